package scenarios

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Expectation is one parsed line of a scenario's expect list:
//
//	<lhs> <op> <value>
//
// such as "interactive.ttft.p99 < 2s" or "residency_violations == 0". The
// left-hand side names a figure of the run report; which names exist is the
// report's business, so only its syntax is checked here.
type Expectation struct {
	LHS string // dotted path, e.g. tenants.acme.e2e.p95
	Op  string // one of < <= > >= == !=
	// Value is the right-hand side; a duration is converted to seconds, the
	// unit the report uses for every latency.
	Value      float64
	IsDuration bool // the value was written as a duration (2s, 150ms)
}

// ops in the order they must be tried: two-character operators first, so
// that "<=" is not read as "<" followed by "=2s".
var ops = []string{"<=", ">=", "==", "!=", "<", ">"}

// lhsPattern: dot-separated segments of names. Segments may contain dashes
// and dots come only between segments, so model names such as llama-3.1-8b
// read as segments "llama-3" and "1-8b", which is harmless: the report
// resolves the full path.
var lhsPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// ParseExpectation parses one expectation line. Whitespace around the
// operator is optional.
func ParseExpectation(s string) (Expectation, error) {
	i, op := -1, ""
	for _, o := range ops {
		if j := strings.Index(s, o); j >= 0 && (i < 0 || j < i) {
			i, op = j, o
		}
	}
	if i < 0 {
		return Expectation{}, fmt.Errorf("expectation %q has no comparison: want <lhs> <op> <value> with op one of < <= > >= == !=, e.g. interactive.ttft.p99 < 2s", s)
	}
	// At the first operator position, prefer the two-character operator.
	for _, o := range ops[:4] {
		if strings.HasPrefix(s[i:], o) {
			op = o
			break
		}
	}
	lhs := strings.TrimSpace(s[:i])
	rhs := strings.TrimSpace(s[i+len(op):])
	if lhs == "" {
		return Expectation{}, fmt.Errorf("expectation %q has nothing left of %s: want a report figure such as interactive.ttft.p99", s, op)
	}
	if !lhsPattern.MatchString(lhs) {
		return Expectation{}, fmt.Errorf("expectation %q: left side %q is not a dotted name: want letters, digits, - and _ separated by dots, e.g. tenants.acme.e2e.p95", s, lhs)
	}
	if rhs == "" {
		return Expectation{}, fmt.Errorf("expectation %q has nothing right of %s: want a number or a duration such as 2s", s, op)
	}
	e := Expectation{LHS: lhs, Op: op}
	v, err := parseNumber(rhs)
	if err != nil {
		d, derr := time.ParseDuration(rhs)
		if derr != nil {
			return Expectation{}, fmt.Errorf("expectation %q: %q is neither a number nor a duration: want e.g. 10, 0.95 or 2s", s, rhs)
		}
		v, e.IsDuration = d.Seconds(), true
	}
	e.Value = v
	return e, nil
}

// parseNumber is strconv.ParseFloat without the forms that are not numbers
// to a reader of an expectation: NaN, infinities, hex and underscores.
func parseNumber(s string) (float64, error) {
	for _, c := range s {
		if !strings.ContainsRune("0123456789.eE+-", c) {
			return 0, errors.New("not a decimal number")
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, errors.New("not a finite decimal number")
	}
	return v, nil
}

// Holds reports whether the measured value v satisfies the expectation. v is
// in the expectation's unit: seconds when IsDuration.
func (e Expectation) Holds(v float64) bool {
	switch e.Op {
	case "<":
		return v < e.Value
	case "<=":
		return v <= e.Value
	case ">":
		return v > e.Value
	case ">=":
		return v >= e.Value
	case "==":
		return v == e.Value
	case "!=":
		return v != e.Value
	}
	return false
}

// String prints the expectation back in a form ParseExpectation reads.
// Durations print as seconds ("0.1s"), which keeps every value exact.
func (e Expectation) String() string {
	v := strconv.FormatFloat(e.Value, 'f', -1, 64)
	if e.IsDuration {
		v += "s"
	}
	return e.LHS + " " + e.Op + " " + v
}
