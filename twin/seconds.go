package twin

import (
	"encoding/json"
	"math"
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
func (s Seconds) MarshalJSON() ([]byte, error) { return floatOrNull(float64(s), s < 0), nil }

// UnmarshalJSON reads null as Never.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	f, err := readFloatOrNull(b, float64(Never))
	*s = Seconds(f)
	return err
}

// floatOrNull is f in JSON, or null.
func floatOrNull(f float64, null bool) []byte {
	if null {
		return []byte("null")
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64)
}

// readFloatOrNull reads a JSON number, or null as ifNull.
func readFloatOrNull(b []byte, ifNull float64) (float64, error) {
	if string(b) == "null" {
		return ifNull, nil
	}
	var f float64
	err := json.Unmarshal(b, &f)
	return f, err
}

// Ratio is a share (an SLO attainment) of a count that may be empty: NaN
// when nothing was measured, written null in the JSON — as a time that
// never came is — rather than a 1 or a 0 that would read as a result
// (issue 36: slo_attainment_after 1 of finished_after 0).
type Ratio float64

// NoRatio is a Ratio of nothing.
var NoRatio = Ratio(math.NaN())

// Or is the ratio, or x when it is of nothing (for a sort or a sum that
// counts nothing as x).
func (r Ratio) Or(x float64) float64 {
	if !r.Measured() {
		return x
	}
	return float64(r)
}

// Measured reports whether the ratio is of something.
func (r Ratio) Measured() bool { return !math.IsNaN(float64(r)) }

// MarshalJSON writes null for a ratio of nothing.
func (r Ratio) MarshalJSON() ([]byte, error) { return floatOrNull(float64(r), !r.Measured()), nil }

// UnmarshalJSON reads null as a ratio of nothing.
func (r *Ratio) UnmarshalJSON(b []byte) error {
	f, err := readFloatOrNull(b, float64(NoRatio))
	*r = Ratio(f)
	return err
}

// ratioOf is met of done, or NoRatio of none, rounded to six digits.
func ratioOf(met, done uint64) Ratio {
	if done == 0 {
		return NoRatio
	}
	return Ratio(round(float64(met)/float64(done), 6))
}
