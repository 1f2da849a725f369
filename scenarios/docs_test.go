package scenarios

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsCoverSchema fails when a YAML key of the schema is not in
// docs/scenarios.md, both in a reference table (`key`) and in an example
// (key:). Add the key to the docs, with its default and what it allows.
func TestDocsCoverSchema(t *testing.T) {
	doc, err := os.ReadFile("../docs/scenarios.md")
	require.NoError(t, err)
	text := string(doc)
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string)
	var missing []string
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			key := yamlKey(typ.Field(i))
			if key == "" {
				continue
			}
			p := join(path, key)
			if !strings.Contains(text, "`"+key+"`") {
				missing = append(missing, p+" (no `"+key+"` in a table)")
			}
			if !strings.Contains(text, key+":") {
				missing = append(missing, p+" (no "+key+": in an example)")
			}
			walk(typ.Field(i).Type, p)
		}
	}
	walk(reflect.TypeFor[Scenario](), "")
	require.Empty(t, missing, "docs/scenarios.md does not document these keys")
	require.Greater(t, len(seen), 15, "the walk reached every schema type")
}

// TestDocsListLibrary: every library scenario is in the docs' table.
func TestDocsListLibrary(t *testing.T) {
	doc, err := os.ReadFile("../docs/scenarios.md")
	require.NoError(t, err)
	for _, i := range List() {
		require.Contains(t, string(doc), "| `"+i.Name+"` |", "docs/scenarios.md's library table lacks %s", i.Name)
	}
}
