package faults

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func readDocs(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/faults.md")
	require.NoError(t, err)
	return string(doc)
}

// section returns the text of the docs' "## name" section.
func section(t *testing.T, doc, name string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## "+name+"\n")
	require.True(t, ok, "docs/faults.md has no section %q", name)
	text, _, _ := strings.Cut(rest, "\n## ")
	return text
}

// codeBlocks returns the lines of the section's fenced blocks.
func codeBlocks(text string) [][]string {
	var out [][]string
	parts := strings.Split(text, "```")
	for i := 1; i < len(parts); i += 2 {
		lines := strings.Split(strings.TrimSpace(parts[i]), "\n")
		if strings.HasPrefix(lines[0], "yaml") || lines[0] == "" {
			lines = lines[1:]
		}
		out = append(out, lines)
	}
	return out
}

// TestDocsCoverCatalogue fails when docs/faults.md lacks a kind in its
// catalogue table or a key in its keys table.
func TestDocsCoverCatalogue(t *testing.T) {
	doc := readDocs(t)
	for _, k := range Kinds() {
		require.Contains(t, section(t, doc, "Catalogue"), "| `"+k+"` |", "the catalogue table lacks %s", k)
	}
	for _, k := range keyOrder {
		require.Contains(t, section(t, doc, "Keys"), "| `"+k+"` |", "the keys table lacks %s", k)
	}
	canon := strings.Join(strings.Fields(section(t, doc, "Canonical form")), " ")
	require.Contains(t, canon, strings.Join(keyOrder, " "), "the canonical key order")
}

// TestDocsExamples: every example parses, is in canonical form, and every
// kind has one; the canonical-form example prints as the docs say.
func TestDocsExamples(t *testing.T) {
	doc := readDocs(t)
	blocks := codeBlocks(section(t, doc, "Examples"))
	require.Len(t, blocks, 1)
	seen := map[Kind]bool{}
	for _, line := range blocks[0] {
		s, err := Parse(line)
		require.NoError(t, err, "docs example %q", line)
		require.Equal(t, line, s.String(), "docs example %q is not in canonical form", line)
		seen[s.Kind] = true
	}
	for _, k := range Kinds() {
		require.True(t, seen[Kind(k)], "docs/faults.md has no example of %s", k)
	}

	canon := codeBlocks(section(t, doc, "Canonical form"))
	require.Len(t, canon, 2)
	s, err := Parse(canon[0][0])
	require.NoError(t, err)
	require.Equal(t, canon[1][0], s.String())

	// The introduction's lines and YAML lists.
	intro, _, _ := strings.Cut(doc, "\n## ")
	quoted := regexp.MustCompile(`"([a-z-]+ [^"]*)"`)
	n := 0
	for _, b := range codeBlocks(intro) {
		for _, line := range b {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- "))
			for _, m := range quoted.FindAllStringSubmatch(line, -1) {
				line = m[1]
			}
			if line == "faults:" {
				continue
			}
			_, err := Parse(line)
			require.NoError(t, err, "docs line %q", line)
			n++
		}
	}
	require.Equal(t, 5, n, "the introduction's fault lines")
}

// TestDocsErrors: the errors section shows messages Parse produces.
func TestDocsErrors(t *testing.T) {
	_, err := ParseAll([]string{
		"regional-outage region=us-east at=10m",
		"node-loss pool=p at=1m count=0",
		"regional-outage region=us-east at=10m",
		"brownout at=1m regoin=x",
		"brownout region=a pool=b at=1m fail=0.1",
		"regional-outage region=r",
		"regional-outage region=r at=1m for=0s",
	})
	blocks := codeBlocks(section(t, readDocs(t), "Errors"))
	require.Len(t, blocks, 1)
	require.Equal(t, blocks[0], messages(err))
}
