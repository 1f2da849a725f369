package benchmark

import (
	"strings"
	"unicode/utf8"
)

// Problem is one thing wrong with an experiment file, located precisely
// enough to fix without reading the loader: the file, the JSON field path
// (workload.stages[1].rate, measured_ms["0"].ttft_p99), the offending value
// and what is allowed.
type Problem struct {
	File  string // the name given to Parse, usually the file's path; empty from Validate
	Path  string // JSON field path; empty for problems with the document as a whole
	Value string // the value as written (JSON text, cut short); empty when there is none
	Msg   string // what is allowed or what to do, e.g. "want > 0"
}

// String renders the problem on one line:
//
//	bench/64.json: workload.stages[1].rate: got 0, want > 0
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteString(": ")
	}
	if p.Path != "" {
		b.WriteString(p.Path)
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

// ValidationError is every problem found in one experiment, so that the
// author fixes everything in one pass: first those found decoding (unknown
// fields, wrong types), then values out of range, each group in schema order.
// Parse, Load and Validate return it as *ValidationError.
type ValidationError struct {
	Problems []Problem
}

// Error renders one problem per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// maxValueLen bounds how much of a bad value a problem quotes: enough to
// recognise it, not a whole nested object.
const maxValueLen = 40

// shorten cuts a value for quoting in a problem, on a character boundary.
func shorten(s string) string {
	if len(s) <= maxValueLen {
		return s
	}
	cut := maxValueLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
