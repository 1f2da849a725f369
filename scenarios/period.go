package scenarios

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Day is 24 hours: the unit of lead times and terms.
const Day = 24 * time.Hour

// Period is a long span for purchase terms and lead times, written in YAML
// as a whole or decimal number of days, weeks or years ("90d", "8w", "1y",
// a year being 365 days) or as Go duration text ("36h"). A bare number is
// refused, as for durations.
type Period time.Duration

// D returns the value as a time.Duration.
func (p Period) D() time.Duration { return time.Duration(p) }

// String prints whole weeks as "8w", whole days as "90d", else Go text.
func (p Period) String() string {
	d := time.Duration(p)
	switch {
	case d == 0:
		return "0d"
	case d%(365*Day) == 0:
		return strconv.FormatInt(int64(d/(365*Day)), 10) + "y"
	case d%(7*Day) == 0:
		return strconv.FormatInt(int64(d/(7*Day)), 10) + "w"
	case d%Day == 0:
		return strconv.FormatInt(int64(d/Day), 10) + "d"
	}
	return d.String()
}

// ParsePeriod reads "90d", "8w", "1.5y" or Go duration text.
func ParsePeriod(s string) (Period, error) {
	units := map[byte]time.Duration{'d': Day, 'w': 7 * Day, 'y': 365 * Day}
	if s != "" {
		if u, ok := units[s[len(s)-1]]; ok {
			num := strings.TrimSpace(s[:len(s)-1])
			f, err := strconv.ParseFloat(num, 64)
			if err != nil || num == "" || !finite(f) || f < 0 || f*float64(u) > float64(1<<62) {
				return 0, fmt.Errorf("%q is not a period: want a number >= 0 of days, weeks or years, such as 90d, 8w or 1y", s)
			}
			return Period(time.Duration(f * float64(u))), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a period: want days, weeks or years, such as 90d, 8w or 1y (or a duration such as 36h)", s)
	}
	return Period(d), nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *Period) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a period such as 90d, 8w or 1y, got a %s", n.Line, kindName(n.Kind))
	}
	v, err := ParsePeriod(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*p = v
	return nil
}

// MarshalYAML implements yaml.Marshaler, printing the text form back.
func (p Period) MarshalYAML() (any, error) { return p.String(), nil }
