package spec

import (
	"fmt"
	"strings"
)

// Reference renders the step library as the Markdown that docs/specs.md
// holds between its generated-section markers.
func Reference() string {
	var b strings.Builder
	for _, group := range []struct{ keyword, title string }{
		{"Given", "The fleet, the workload and the policy (Given)"},
		{"When", "Faults (When)"},
		{"Then", "Outcomes (Then)"},
	} {
		fmt.Fprintf(&b, "### %s\n\n| step | what it does | example |\n| --- | --- | --- |\n", group.title)
		for _, s := range steps {
			if s.keyword != group.keyword {
				continue
			}
			fmt.Fprintf(&b, "| `%s` | %s | `%s` |\n", strings.ReplaceAll(s.pattern, "|", `\|`), strings.ReplaceAll(s.doc, "|", `\|`), s.example)
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
