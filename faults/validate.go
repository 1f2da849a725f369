package faults

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetdrill/fleetdrill/internal/suggest"
)

// Problem is one thing wrong with a fault spec: the key it is about, the
// value given and what is allowed. Parse, ParseAll and Validate return every
// problem they find as one errors.Join of *Problem; errors.As finds the
// first, and the joined error's Unwrap() []error lists them all, so a caller
// (the scenario loader) can place each one.
type Problem struct {
	// Index is the line's index in the list given to ParseAll; -1 from
	// Parse and Validate.
	Index int
	// Key is the key the problem is about, as written in the text form
	// ("count", "region"), or "kind"; empty for the line as a whole.
	Key   string
	Value string // the value as written, quoted when it is text; empty when there is none
	Msg   string // what is allowed or what to do, e.g. "want >= 1"

	// also lists other keys the problem is about ("brownout needs fail= or
	// latency=" is about both). Parse drops a validation problem about a
	// key whose value it already reported, since the field holds nothing
	// meaningful then.
	also []string
}

// Error renders the problem on one line:
//
//	faults[2]: count: got 0, want >= 1
func (p *Problem) Error() string {
	var b strings.Builder
	if p.Index >= 0 {
		fmt.Fprintf(&b, "faults[%d]: ", p.Index)
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	if p.Value != "" {
		b.WriteString("got ")
		b.WriteString(p.Value)
		b.WriteString(", ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

func join(ps []*Problem) error {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// namePattern is what target names and runtimes must match; it is the
// scenario loader's pattern for names (scenarios/validate.go), so that every
// name a scenario can define can be written here.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

const maxNameLen = 64

// versionPattern is a dotted version of numbers (535.104.05), as the
// scenario loader checks a pool's driver.
var versionPattern = regexp.MustCompile(`^[0-9]{1,9}(\.[0-9]{1,9})*$`)

// Messages shared by Parse (for values written out of range) and Validate.
const (
	msgName      = "want a name: letters, digits, '.', '-' and '_', starting with a letter or digit, at most 64 characters"
	msgVersion   = "want a dotted numeric version like 535.104.05"
	msgDuration  = "want a duration with a unit, like 250ms, 10m or 1h30m"
	msgAt        = "want >= 0"
	msgFor       = "want > 0, or leave for= out for a fault that lasts to the end of the run"
	msgCount     = "want >= 1"
	msgPercent   = "want 0 < percent <= 100"
	msgFail      = "want 0 < fail <= 1"
	msgLatency   = "want > 0"
	msgQuota     = "want a finite number >= 0"
	msgNotice    = "want >= 0"
	msgGrant     = "want 0 <= grant < 1: the share of a request still granted"
	msgGPUs      = "want >= 1"
	msgFactor    = "want a finite number > 0"
	msgBandwidth = "want a bandwidth in GB/s > 0, like 0.5"
)

func validName(s string) bool { return len(s) <= maxNameLen && namePattern.MatchString(s) }

// textKeys are the keys whose values are text, quoted in messages.
var textKeys = []string{"region", "pool", "provider", "model", "tenant", "accelerator", "driver", "runtime"}

// shown returns key's value as a message shows it: quoted when it is text.
func (s Spec) shown(key string) string {
	v, _ := s.value(key)
	if slices.Contains(textKeys, key) {
		return strconv.Quote(v)
	}
	return v
}

// Validate checks the spec against the catalogue and returns every problem
// at once (errors.Join of *Problem), each naming the key as the text form
// writes it, the value and what is allowed; nil if the spec is valid. A spec
// Parse returns without error is valid.
func (s Spec) Validate() error { return join(s.problems()) }

// problems returns what Validate reports, ordered by key as String prints
// them (the kind first).
func (s Spec) problems() []*Problem {
	var ps []*Problem
	add := func(key, value, msg string, also ...string) {
		ps = append(ps, &Problem{Index: -1, Key: key, Value: value, Msg: msg, also: also})
	}

	e, known := lookup(s.Kind)
	if !known {
		ps = append(ps, kindProblem(string(s.Kind)))
	}

	// Each value on its own, whatever the kind.
	for _, key := range []string{"region", "pool", "provider", "model", "tenant", "accelerator", "runtime"} {
		if v, ok := s.value(key); ok && !validName(v) {
			add(key, s.shown(key), msgName)
		}
	}
	if s.Driver != "" && !versionPattern.MatchString(s.Driver) {
		add("driver", s.shown("driver"), msgVersion)
	}
	if s.At < 0 {
		add("at", s.shown("at"), msgAt)
	}
	if s.For < 0 {
		add("for", s.shown("for"), msgFor)
	} else if s.At >= 0 && s.For > math.MaxInt64-s.At {
		add("for", s.shown("for"), "want at+for <= "+formatDuration(math.MaxInt64))
	}
	if s.Radius.Count < 0 {
		add("count", s.shown("count"), msgCount)
	}
	if p := s.Radius.Percent; p != 0 && !(p > 0 && p <= 100) {
		add("percent", s.shown("percent"), msgPercent)
	}
	if s.Radius.Count != 0 && s.Radius.Percent != 0 {
		add("percent", s.shown("percent"), "as well as count="+s.shown("count")+"; give count= or percent=, not both", "count")
	}
	if f := s.FailRate; f != 0 && !(f > 0 && f <= 1) {
		add("fail", s.shown("fail"), msgFail)
	}
	if s.AddLatency < 0 {
		add("latency", s.shown("latency"), msgLatency)
	}
	if q := s.QuotaRPM; !(q >= 0 && q <= math.MaxFloat64) {
		add("rpm", s.shown("rpm"), msgQuota)
	}
	if q := s.QuotaTPM; !(q >= 0 && q <= math.MaxFloat64) {
		add("tpm", s.shown("tpm"), msgQuota)
	}
	if s.Notice < 0 {
		add("notice", s.shown("notice"), msgNotice)
	}
	if g := s.Grant; !(g >= 0 && g < 1) {
		add("grant", s.shown("grant"), msgGrant)
	}
	if s.GPUs < 0 {
		add("gpus", s.shown("gpus"), msgGPUs)
	}
	if f := s.Factor; f != 0 && !(f > 0 && f <= math.MaxFloat64) {
		add("factor", s.shown("factor"), msgFactor)
	}
	if b := s.Bandwidth; b != 0 && !(b > 0 && b <= math.MaxFloat64) {
		add("bandwidth", s.shown("bandwidth"), msgBandwidth)
	}
	if s.Timeout < 0 {
		add("timeout", s.shown("timeout"), "want a duration >= 0, like 300s")
	}

	if known {
		ps = append(ps, e.kindProblems(s)...)
	}
	slices.SortStableFunc(ps, func(a, b *Problem) int { return keyRank(a.Key) - keyRank(b.Key) })
	return ps
}

// kindProblems checks the rules of the spec's kind: the keys it takes, the
// target it needs, and its own rules (entry.rules: the keys it needs or
// that go together).
func (e entry) kindProblems(s Spec) []*Problem {
	var ps []*Problem
	add := func(key, value, msg string, also ...string) {
		ps = append(ps, &Problem{Index: -1, Key: key, Value: value, Msg: msg, also: also})
	}
	for _, key := range keyOrder {
		if _, set := s.value(key); set && !e.uses(key) {
			add(key, s.shown(key), notTaken(e.kind, key))
		}
	}

	var given []string
	for _, key := range e.target {
		if _, set := s.value(key); set {
			given = append(given, key)
		}
	}
	switch {
	case len(given) == 0 && len(e.target) == 1:
		add(e.target[0], "", fmt.Sprintf("%s needs %s=", e.kind, e.target[0]))
	case len(given) == 0:
		add(e.target[0], "", fmt.Sprintf("%s needs one of %s", e.kind, keyList(e.target, "or")), e.target[1:]...)
	case len(given) > 1:
		for _, key := range given[1:] {
			add(key, s.shown(key), fmt.Sprintf("as well as %s=%s; %s takes one target: %s",
				given[0], s.shown(given[0]), e.kind, keyList(e.target, "or")), given[0])
		}
	}

	if e.rules != nil {
		e.rules(s, add)
	}
	return ps
}

// notTaken is the message for a key kind k does not take, naming the kinds
// that do.
func notTaken(k Kind, key string) string {
	msg := fmt.Sprintf("but %s does not take %s=", k, key)
	switch by := usedBy(key); len(by) {
	case 0:
		msg += "; no kind takes it yet"
	case 1:
		msg += "; " + by[0] + " does"
	default:
		msg += "; " + strings.Join(by, ", ") + " do"
	}
	return msg
}

// kindProblem reports a kind not in the catalogue, with the nearest ones.
func kindProblem(k string) *Problem {
	msg := "no such kind"
	if near := suggest.Nearest(k, Kinds(), 2); len(near) > 0 {
		msg += "; did you mean " + strings.Join(near, " or ") + "?"
	}
	msg += " (kinds: " + strings.Join(Kinds(), ", ") + ")"
	return &Problem{Index: -1, Key: "kind", Value: strconv.Quote(k), Msg: msg}
}

// keyList renders keys as "region=, pool= or model=".
func keyList(keys []string, conj string) string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "="
	}
	if len(out) == 1 {
		return out[0]
	}
	return strings.Join(out[:len(out)-1], ", ") + " " + conj + " " + out[len(out)-1]
}

// keyRank orders problems: the line as a whole, then the kind, then keys in
// printing order, then unknown keys.
func keyRank(key string) int {
	switch key {
	case "":
		return -2
	case "kind":
		return -1
	}
	if i := slices.Index(keyOrder, key); i >= 0 {
		return i
	}
	return len(keyOrder)
}
