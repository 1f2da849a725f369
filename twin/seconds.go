package twin

import (
	"encoding/json"
	"strconv"
)

// Seconds is a time in seconds from a fault's start or end to something
// that may never come (its detection, mitigation, recovery, first loss):
// Never until it does. The JSON report writes Never as null, so a time
// that did not come reads as its own state, not as a number: an
// expectation on it fails as "not detected" (or passes "== never"), and a
// tool reading the JSON cannot mistake it for -1 seconds.
type Seconds float64

// Never is a time that did not come.
const Never Seconds = -1

// Happened reports whether the time came.
func (s Seconds) Happened() bool { return s >= 0 }

// MarshalJSON writes null for Never.
func (s Seconds) MarshalJSON() ([]byte, error) {
	if s < 0 {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(s), 'g', -1, 64), nil
}

// UnmarshalJSON reads null as Never.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = Never
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*s = Seconds(f)
	return nil
}
