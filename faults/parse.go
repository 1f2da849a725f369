package faults

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/suggest"
)

// Parse reads one fault in the text form
//
//	KIND key=value ...
//
// for example "brownout region=us-east at=10m for=15m fail=0.2
// latency=300ms". Keys may come in any order, each at most once; values hold
// no spaces. Durations are Go duration text (250ms, 10m, 1h30m). The spec
// returned is valid (see Validate) and prints back in canonical form with
// String.
//
// Two things Parse does that Validate cannot, because they depend on the
// text rather than the spec: at= is required (at=0s is the start of the
// run), and a key written with the value that leaving it out means (for=0s,
// count=0, fail=0, latency=0s, an empty name) is refused, since the spec could
// not print it back. rpm=0, tpm=0 and notice=0s are allowed: zero is a value
// those keys take. node-loss without count= or percent= gets count=1.
//
// Every problem is reported at once: errors.Join of *Problem, in the order
// of the line (problems found by validation follow, in key order).
func Parse(s string) (Spec, error) {
	spec, ps := parse(s)
	if len(ps) > 0 {
		return Spec{}, join(ps)
	}
	return spec, nil
}

// ParseAll parses one fault per line (the entries of a scenario's faults:
// list) and returns every problem of every line at once, each with its
// line's index (Problem.Index): "faults[2]: count: got 0, want >= 1". It
// returns no specs unless every line parses.
func ParseAll(lines []string) ([]Spec, error) {
	specs := make([]Spec, len(lines))
	var all []*Problem
	for i, line := range lines {
		spec, ps := parse(line)
		for _, p := range ps {
			p.Index = i
		}
		all = append(all, ps...)
		specs[i] = spec
	}
	if len(all) > 0 {
		return nil, join(all)
	}
	return specs, nil
}

func parse(line string) (Spec, []*Problem) {
	var (
		s     Spec
		ps    []*Problem
		bad   = map[string]bool{} // keys (and "kind") already reported
		given = map[string]string{}
	)
	add := func(key, value, msg string) {
		ps = append(ps, &Problem{Index: -1, Key: key, Value: value, Msg: msg})
		bad[key] = true
	}

	tokens := strings.Fields(line)
	if len(tokens) == 0 {
		add("", "", "the line is empty; want KIND key=value ... (kinds: "+strings.Join(Kinds(), ", ")+")")
		return Spec{}, ps
	}
	if strings.Contains(tokens[0], "=") {
		add("kind", "", "missing; want KIND key=value ..., the kind first (kinds: "+strings.Join(Kinds(), ", ")+")")
	} else {
		s.Kind = Kind(tokens[0])
		tokens = tokens[1:]
		if _, ok := lookup(s.Kind); !ok {
			ps = append(ps, kindProblem(string(s.Kind)))
			bad["kind"] = true
		}
	}
	e, known := lookup(s.Kind)

	for _, tok := range tokens {
		key, v, ok := strings.Cut(tok, "=")
		if !ok || key == "" {
			ps = append(ps, &Problem{Index: -1, Value: strconv.Quote(tok), Msg: "want key=value"})
			continue
		}
		if !slices.Contains(keyOrder, key) {
			ps = append(ps, unknownKey(key, e, known))
			continue
		}
		if first, dup := given[key]; dup {
			add(key, strconv.Quote(v), "but "+key+"= is already given ("+strconv.Quote(first)+"); give each key once")
			continue
		}
		given[key] = v
		if known && !e.uses(key) {
			var scratch Spec
			_, parsed := scratch.set(key, v)
			add(key, quoteText(key, v, parsed), notTaken(e.kind, key))
			continue
		}
		if msg, parsed := s.set(key, v); msg != "" {
			add(key, quoteText(key, v, parsed), msg)
		}
	}
	if _, ok := given["at"]; !ok {
		add("at", "", "required: when the fault starts, from the beginning of the run (at=0s is the start)")
	}
	if known {
		_, count := given["count"]
		_, percent := given["percent"]
		if !count && !percent {
			s.Radius = e.radius // node-loss: count=1
		}
	}

	for _, p := range s.problems() {
		if !bad[p.Key] && !slices.ContainsFunc(p.also, func(k string) bool { return bad[k] }) {
			ps = append(ps, p)
		}
	}
	if len(ps) > 0 {
		return Spec{}, ps
	}
	return s, nil
}

// set stores key's value v in the spec, or returns what is wrong with it
// and whether v parsed at all. It refuses a value that the spec could not
// print back because it equals leaving the key out.
func (s *Spec) set(key, v string) (msg string, parsed bool) {
	name := func(dst *string) (string, bool) {
		if v == "" {
			return msgName, true
		}
		*dst = v
		return "", true
	}
	dur := func(dst *time.Duration, zeroMsg string) (string, bool) {
		d, err := time.ParseDuration(v)
		if err != nil {
			return msgDuration, false
		}
		if d == 0 && zeroMsg != "" {
			return zeroMsg, true
		}
		*dst = d
		return "", true
	}
	num := func(dst *float64, zeroMsg string) (string, bool) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return "want a finite number", false
		}
		if f == 0 && zeroMsg != "" {
			return zeroMsg, true
		}
		*dst = f
		return "", true
	}
	switch key {
	case "region":
		return name(&s.Target.Region)
	case "pool":
		return name(&s.Target.Pool)
	case "provider":
		return name(&s.Target.Provider)
	case "model":
		return name(&s.Target.Model)
	case "tenant":
		return name(&s.Target.Tenant)
	case "accelerator":
		return name(&s.Target.Accelerator)
	case "runtime":
		return name(&s.Runtime)
	case "driver":
		if v == "" {
			return msgVersion, true
		}
		s.Driver = v
		return "", true
	case "at":
		return dur(&s.At, "")
	case "for":
		return dur(&s.For, msgFor)
	case "latency":
		return dur(&s.AddLatency, msgLatency)
	case "notice":
		return dur(&s.Notice, "")
	case "count":
		n, err := strconv.Atoi(v)
		if err != nil {
			return "want a whole number >= 1", false
		}
		if n == 0 {
			return msgCount, true
		}
		s.Radius.Count = n
		return "", true
	case "percent":
		return num(&s.Radius.Percent, msgPercent)
	case "fail":
		return num(&s.FailRate, msgFail)
	case "rpm":
		return num(&s.QuotaRPM, "")
	case "tpm":
		return num(&s.QuotaTPM, "")
	case "grant":
		return num(&s.Grant, "")
	case "factor":
		return num(&s.Factor, msgFactor)
	case "bandwidth":
		return num(&s.Bandwidth, msgBandwidth)
	case "timeout":
		return dur(&s.Timeout, "")
	case "gpus":
		n, err := strconv.Atoi(v)
		if err != nil {
			return "want a whole number >= 1", false
		}
		if n == 0 {
			return msgGPUs, true
		}
		s.GPUs = n
		return "", true
	}
	panic("faults: no field for key " + key)
}

// quoteText shows a value as written: quoted when it is text or did not
// parse, bare when it is a number or duration that parsed.
func quoteText(key, v string, parsed bool) string {
	if slices.Contains(textKeys, key) || !parsed {
		return strconv.Quote(v)
	}
	return v
}

// unknownKey reports a key not in the text form, with the nearest keys, or
// the keys the kind takes when none is near.
func unknownKey(key string, e entry, known bool) *Problem {
	msg := "unknown key"
	if near := suggest.Nearest(key, keyOrder, 2); len(near) > 0 {
		msg += "; did you mean " + strings.Join(near, " or ") + "?"
	} else if known {
		msg += "; " + string(e.kind) + " takes " + strings.Join(e.takes, ", ")
	} else {
		msg += "; keys are " + strings.Join(keyOrder, ", ")
	}
	return &Problem{Index: -1, Key: key, Msg: msg}
}
