package scenarios

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParsePeriod(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		text string
	}{
		{"90d", 90 * Day, "90d"},
		{"8w", 56 * Day, "8w"},
		{"1y", 365 * Day, "1y"},
		{"1.5y", 547*Day + 12*time.Hour, "13140h0m0s"},
		{"0d", 0, "0d"},
		{"36h", 36 * time.Hour, "36h0m0s"},
		{"14d", 14 * Day, "2w"},
	} {
		got, err := ParsePeriod(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got.D(), tc.in)
		require.Equal(t, tc.text, got.String(), tc.in)
		back, err := ParsePeriod(got.String())
		require.NoError(t, err)
		require.Equal(t, got, back, "String re-parses to the same period")
	}
	for _, bad := range []string{"", "8", "d", "-1d", "2 weeks", "NaNd", "1e300y", "-5h"} {
		_, err := ParsePeriod(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "is not a period", bad)
	}
}

// FuzzParsePeriod: no input panics, and a parsed period prints as text
// that parses back to it.
func FuzzParsePeriod(f *testing.F) {
	for _, s := range []string{"90d", "8w", "1y", "1.5y", "36h", "0d", "-1d", "1e300y", "2 weeks"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePeriod(s)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, p, Period(0))
		back, err := ParsePeriod(p.String())
		require.NoError(t, err, "%q printed as %q", s, p.String())
		require.Equal(t, p, back)
	})
}
