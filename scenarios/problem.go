package scenarios

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a scenario, located precisely enough to fix
// without reading the loader: the file and line, the field path (for example
// pools[1].quota.tokens_per_minute), the offending value and what is allowed.
type Problem struct {
	File string // the name given to Parse, e.g. default.yaml
	// Line is 1-based; 0 when the value did not come from the file (a --set
	// override, or a field missing from a document too broken to locate).
	Line  int
	Path  string // field path; empty for problems with the document itself
	Value string // the value as written, quoted when it is text; empty when there is none to show
	Msg   string // what is allowed or what to do, e.g. "want >= 1"
	// Set is the --set override that supplied the value, when one did.
	Set string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	switch {
	case p.Set != "":
		fmt.Fprintf(&b, " (--set %s)", p.Set)
	case p.Line > 0:
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
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

// ValidationError is every problem found in one scenario. Parse returns it
// (as *ValidationError) whenever the document is readable YAML but not a
// valid scenario, so that the author fixes everything in one pass.
type ValidationError struct {
	Problems []Problem
}

// Error renders one problem per line, in file order:
//
//	default.yaml:42: pools[2].gpus_per_replica: got 0, want >= 1
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// sort orders problems by file position, then path, so that output is stable
// and reads top to bottom like the file. Problems from --set overrides come
// last, in the order the overrides were given (setOrder: override → index).
func (e *ValidationError) sort(setOrder map[string]int) {
	slices.SortStableFunc(e.Problems, func(a, b Problem) int {
		if a.Set != "" || b.Set != "" {
			if a.Set == "" {
				return -1
			}
			if b.Set == "" {
				return 1
			}
			return cmp.Compare(setOrder[a.Set], setOrder[b.Set])
		}
		if c := cmp.Compare(a.Line, b.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Path, b.Path)
	})
	e.Problems = slices.Compact(e.Problems)
}
