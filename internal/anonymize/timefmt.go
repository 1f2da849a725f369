package anonymize

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// TimeFormat is how a generic log writes its arrival times.
type TimeFormat string

const (
	RFC3339 TimeFormat = "rfc3339" // 2024-05-01T12:00:00.123Z; any fraction, any offset
	Azure   TimeFormat = "azure"   // 2023-11-16 18:17:03.9799600, no zone: UTC
	Unix    TimeFormat = "unix"    // seconds since 1970, decimal fraction allowed
	UnixMS  TimeFormat = "unix-ms" // milliseconds since 1970, decimal fraction allowed
	Seconds TimeFormat = "seconds" // seconds since the trace's own zero
	Millis  TimeFormat = "ms"      // milliseconds since the trace's own zero
)

// TimeFormats lists the formats, for help and errors.
var TimeFormats = []TimeFormat{RFC3339, Azure, Unix, UnixMS, Seconds, Millis}

// ParseTimeFormat checks a --time-format value.
func ParseTimeFormat(s string) (TimeFormat, error) {
	for _, f := range TimeFormats {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, len(TimeFormats))
	for i, f := range TimeFormats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("time format %q, want one of %s", s, strings.Join(names, ", "))
}

// absolute says whether the format gives wall-clock instants, which are
// made relative to the first row (trace.Record's convention), rather than
// times relative to the trace's own zero, which are kept.
func (f TimeFormat) absolute() bool { return f != Seconds && f != Millis }

// numeric says whether the format is a number.
func (f TimeFormat) numeric() bool { return f != RFC3339 && f != Azure }

// errTime is the reason a time cell did not parse. NB: no error in this
// file may quote the cell: a mis-mapped column could hold anything.
var errTime = errors.New("not a time")

// Representable wall-clock instants: UnixNano is defined from 1678 to 2262.
var (
	minInstant = time.Unix(0, math.MinInt64).UTC()
	maxInstant = time.Unix(0, math.MaxInt64).UTC()
)

// parseTime returns s as a Duration on the format's axis: since the Unix
// epoch for wall-clock formats, since the trace's zero for relative ones.
func parseTime(f TimeFormat, s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch f {
	case RFC3339, Azure:
		layout := time.RFC3339Nano
		if f == Azure {
			layout = "2006-01-02 15:04:05.999999999"
		}
		t, err := time.Parse(layout, s)
		if err != nil {
			return 0, errTime
		}
		if t.Before(minInstant) || t.After(maxInstant) {
			return 0, errors.New("time out of range (1678 to 2262)")
		}
		return time.Duration(t.UnixNano()), nil
	case Unix, Seconds:
		return parseDecimal(s, time.Second)
	case UnixMS, Millis:
		return parseDecimal(s, time.Millisecond)
	}
	return 0, fmt.Errorf("unknown time format %q", string(f))
}

// parseDecimal parses a non-negative decimal number of units exactly (no
// float rounding), to the nanosecond; an exponent form is parsed as a
// float.
func parseDecimal(s string, unit time.Duration) (time.Duration, error) {
	if s == "" {
		return 0, errTime
	}
	if strings.ContainsAny(s, "eE") {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || math.IsNaN(v) {
			return 0, errTime
		}
		ns := v * float64(unit)
		if ns >= math.MaxInt64 {
			return 0, errors.New("time out of range")
		}
		return time.Duration(math.Round(ns)), nil
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" {
		return 0, errTime
	}
	var w int64
	if whole != "" {
		var err error
		if !allDigits(whole) {
			return 0, errTime
		}
		if w, err = strconv.ParseInt(whole, 10, 64); err != nil || w > math.MaxInt64/int64(unit) {
			return 0, errors.New("time out of range")
		}
	}
	if !allDigits(frac) {
		return 0, errTime
	}
	// The fraction, in nanoseconds of unit: its digits scaled by unit.
	var fns int64
	scale := int64(unit)
	for i := 0; i < len(frac) && scale > 1; i++ {
		scale /= 10
		fns += int64(frac[i]-'0') * scale
	}
	d := w*int64(unit) + fns
	if d < 0 {
		return 0, errors.New("time out of range")
	}
	return time.Duration(d), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// MaxTokens is the largest token count: the canonical format's bound.
const MaxTokens = math.MaxInt32

// parseTokens parses a token count, 0 to MaxTokens. A zero fraction is
// allowed ("32.0", as some exporters write integers).
func parseTokens(s string) (int, error) {
	s = strings.TrimSpace(s)
	if whole, frac, ok := strings.Cut(s, "."); ok && strings.Trim(frac, "0") == "" && whole != "" {
		s = whole
	}
	if !allDigits(s) || s == "" {
		return 0, errors.New("not a non-negative integer")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > MaxTokens {
		return 0, fmt.Errorf("token count above %d", MaxTokens)
	}
	return n, nil
}
