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
	// Never: the value was written "never", for a time that may not come
	// (faults.X.time_to_impact_s == never: nothing was lost); only == and
	// != compare with it.
	Never bool
	// IfAny: the line ends "if any": where the figure has no data (no
	// request in its window or group, a time that never came) the
	// expectation is skipped instead of failed.
	IfAny bool

	// Scope limits the expectation to requests that arrived in a window
	// (empty: the whole run): "during" a fault, or "after" one ended plus
	// Offset. Fault is the fault's label, kind(target) as the report names
	// it, or "recovery" for the end of the last fault.
	Scope  string
	Fault  string
	Offset time.Duration
}

// Window is the report key of a scoped expectation's window, e.g.
// "during regional-outage(us-east)" or "after recovery + 5m0s".
func (e Expectation) Window() string {
	switch e.Scope {
	case "during":
		return "during " + e.Fault
	case "after":
		if e.Offset > 0 {
			return "after " + e.Fault + " + " + e.Offset.String()
		}
		return "after " + e.Fault
	}
	return ""
}

// ops in the order they must be tried: two-character operators first, so
// that "<=" is not read as "<" followed by "=2s".
var ops = []string{"<=", ">=", "==", "!=", "<", ">"}

// lhsPattern: dot-separated segments of names. Segments may contain dashes
// and dots come only between segments, so model names such as llama-3.1-8b
// read as segments "llama-3" and "1-8b", which is harmless: the report
// resolves the full path. A segment may end in a parenthesised target, as a
// fault's label does: faults.regional-outage(us-east).time_to_detect_s.
var lhsPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(\([A-Za-z0-9_.,-]*\))?(\.[A-Za-z0-9_-]+(\([A-Za-z0-9_.,-]*\))?)*$`)

// ParseExpectation parses one expectation line. Whitespace around the
// operator is optional. A scope may come first:
//
//	during regional-outage(us-east): interactive.ttft.p99 < 3s
//	after recovery + 5m: interactive.slo_attainment >= 0.99
func ParseExpectation(s string) (Expectation, error) {
	scope, fault, offset, rest, err := parseScope(s)
	if err != nil {
		return Expectation{}, err
	}
	e, err := parseComparison(rest)
	if err != nil {
		return Expectation{}, err
	}
	e.Scope, e.Fault, e.Offset = scope, fault, offset
	return e, nil
}

// parseScope splits "during X: …" and "after X [+ D]: …" from the
// comparison.
func parseScope(s string) (scope, fault string, offset time.Duration, rest string, err error) {
	t := strings.TrimSpace(s)
	for _, kw := range []string{"during ", "after "} {
		if !strings.HasPrefix(t, kw) {
			continue
		}
		head, tail, ok := strings.Cut(t[len(kw):], ": ")
		if !ok {
			return "", "", 0, "", fmt.Errorf("expectation %q: want %s<fault>: <lhs> <op> <value>, e.g. during regional-outage(us-east): interactive.ttft.p99 < 3s", s, kw)
		}
		head = strings.TrimSpace(head)
		if kw == "after " {
			if name, d, ok := strings.Cut(head, "+"); ok {
				offset, err = time.ParseDuration(strings.TrimSpace(d))
				if err != nil || offset < 0 {
					return "", "", 0, "", fmt.Errorf("expectation %q: %q is not a duration: want after <fault> + 5m", s, strings.TrimSpace(d))
				}
				head = strings.TrimSpace(name)
			}
		} else if head == "recovery" {
			return "", "", 0, "", fmt.Errorf("expectation %q: during recovery has no window: want during <fault> or after recovery + <duration>", s)
		}
		if head == "" || strings.ContainsAny(head, " :") {
			return "", "", 0, "", fmt.Errorf("expectation %q: %q is not a fault label: want kind(target) as the report names it, e.g. regional-outage(us-east), or recovery", s, head)
		}
		return strings.TrimSpace(kw), head, offset, tail, nil
	}
	return "", "", 0, s, nil
}

func parseComparison(s string) (Expectation, error) {
	full := s
	ifAny := false
	if rest, ok := strings.CutSuffix(strings.TrimRight(s, " \t"), " if any"); ok {
		s, ifAny = rest, true
	}
	e, err := parseOp(s)
	if err != nil {
		if ifAny {
			return Expectation{}, fmt.Errorf("%w (in %q)", err, full)
		}
		return Expectation{}, err
	}
	e.IfAny = ifAny
	return e, nil
}

func parseOp(s string) (Expectation, error) {
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
	if rhs == "never" {
		if op != "==" && op != "!=" {
			return Expectation{}, fmt.Errorf("expectation %q: never compares with == or != only: a time that never came is neither less nor more than a value", s)
		}
		if f := lhs[strings.LastIndexByte(lhs, '.')+1:]; (!strings.HasPrefix(f, "time_to_") || !strings.HasSuffix(f, "_s")) && f != "rolled_back_at_s" {
			return Expectation{}, fmt.Errorf("expectation %q: never compares with a time that may not come (a fault's time_to_detect_s, _mitigate_s, _recover_s, _impact_s; a canary's time_to_rollback_s or rolled_back_at_s), not with %s; for a figure that may have no data, end the line with \"if any\"", s, f)
		}
		e.Never = true
		return e, nil
	}
	v, err := parseNumber(rhs)
	if err != nil {
		d, derr := time.ParseDuration(rhs)
		if derr != nil {
			return Expectation{}, fmt.Errorf("expectation %q: %q is neither a number nor a duration: want e.g. 10, 0.95 or 2s (or never, for a time that may not come)", s, rhs)
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
// in the expectation's unit: seconds when IsDuration. NaN stands for a
// value that does not exist (a time that never came, a figure with no
// data): it holds "== never" only; the evaluator reports it as no data to
// any other comparison.
func (e Expectation) Holds(v float64) bool {
	if e.Never {
		return math.IsNaN(v) == (e.Op == "==")
	}
	if math.IsNaN(v) {
		return false
	}
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
	switch {
	case e.Never:
		v = "never"
	case e.IsDuration:
		v += "s"
	}
	out := e.LHS + " " + e.Op + " " + v
	if e.IfAny {
		out += " if any"
	}
	if w := e.Window(); w != "" {
		return w + ": " + out
	}
	return out
}
