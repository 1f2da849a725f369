package faults

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// String prints the spec in its canonical text form: the kind, then every
// key whose field is set, in a fixed order (targets; at, for; count,
// percent; fail, latency; rpm, tpm; notice; driver, runtime), with compact
// durations (10m, 1h30m, 250ms) and the shortest numbers that read back
// exactly. at= is always printed, since Parse requires it; other keys are
// printed when their field is not zero, because zero is what leaving the key
// out means.
//
// For every valid spec s, Parse(s.String()) == s. An invalid spec prints all
// the same, so that an error can show it.
func (s Spec) String() string {
	var b strings.Builder
	b.WriteString(string(s.Kind))
	for _, key := range keyOrder {
		if v, ok := s.value(key); ok {
			b.WriteByte(' ')
			b.WriteString(key)
			b.WriteByte('=')
			b.WriteString(v)
		}
	}
	return b.String()
}

// value returns key's value as the text form prints it, and false when the
// field is zero (the key is left out), except for at, which is always set.
func (s Spec) value(key string) (string, bool) {
	str := func(v string) (string, bool) { return v, v != "" }
	dur := func(d time.Duration) (string, bool) { return formatDuration(d), d != 0 }
	num := func(f float64) (string, bool) { return formatFloat(f), f != 0 }
	switch key {
	case "region":
		return str(s.Target.Region)
	case "pool":
		return str(s.Target.Pool)
	case "provider":
		return str(s.Target.Provider)
	case "model":
		return str(s.Target.Model)
	case "tenant":
		return str(s.Target.Tenant)
	case "accelerator":
		return str(s.Target.Accelerator)
	case "grant":
		return num(s.Grant)
	case "gpus":
		return strconv.Itoa(s.GPUs), s.GPUs != 0
	case "factor":
		return num(s.Factor)
	case "bandwidth":
		return num(s.Bandwidth)
	case "timeout":
		return dur(s.Timeout)
	case "at":
		return formatDuration(s.At), true
	case "for":
		return dur(s.For)
	case "count":
		return strconv.Itoa(s.Radius.Count), s.Radius.Count != 0
	case "percent":
		return num(s.Radius.Percent)
	case "fail":
		return num(s.FailRate)
	case "latency":
		return dur(s.AddLatency)
	case "rpm":
		return num(s.QuotaRPM)
	case "tpm":
		return num(s.QuotaTPM)
	case "notice":
		return dur(s.Notice)
	case "driver":
		return str(s.Driver)
	case "runtime":
		return str(s.Runtime)
	}
	panic("faults: no field for key " + key)
}

// formatDuration prints d as time.Duration.String does, less the zero units
// it pads with: 10m rather than 10m0s, 1h30m rather than 1h30m0s, 1h5s
// rather than 1h0m5s; and us rather than µs, so that the text is ASCII.
// time.ParseDuration reads every form it prints back to the same value.
func formatDuration(d time.Duration) string {
	t := d.String()
	if strings.HasSuffix(t, "m0s") {
		t = strings.TrimSuffix(t, "0s")
	}
	// Minutes follow hours directly and have no leading zero, so "h0m" is
	// only ever a zero minutes field.
	t = strings.Replace(t, "h0m", "h", 1)
	return strings.Replace(t, "µs", "us", 1)
}

// formatFloat prints f in the shortest form that parses back to exactly f,
// in plain decimal unless that would be very long (0.25, 1500000, 1e-07).
func formatFloat(f float64) string {
	if a := math.Abs(f); a == 0 || (a >= 1e-4 && a < 1e15) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
