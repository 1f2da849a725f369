package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fleetdrill/fleetdrill/internal/suggest"
)

// The library: every *.yaml at the package root, embedded so that the
// binary runs with no files. testdata/ is not embedded.
//
//go:embed *.yaml
var library embed.FS

// Info describes one library scenario.
type Info struct {
	Name        string // what LoadNamed and `fleetdrill scenarios show` take, e.g. default
	Description string // the scenario's description, first line
}

// List returns the library scenarios, sorted by name.
func List() []Info {
	entries, err := fs.Glob(library, "*.yaml")
	if err != nil {
		panic(err) // the pattern is a constant
	}
	out := make([]Info, 0, len(entries))
	for _, e := range entries {
		name := strings.TrimSuffix(e, ".yaml")
		data, _ := library.ReadFile(e)
		// Only the description is needed; a library scenario that does
		// not parse fails TestLibraryValidates, not List.
		var head struct {
			Description string `yaml:"description"`
		}
		_ = yaml.Unmarshal(data, &head)
		desc, _, _ := strings.Cut(strings.TrimSpace(head.Description), "\n")
		out = append(out, Info{Name: name, Description: desc})
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Source returns the YAML text of the library scenario name.
func Source(name string) ([]byte, error) {
	if IsLibraryName(name) {
		if data, err := library.ReadFile(name + ".yaml"); err == nil {
			return data, nil
		}
	}
	var names []string
	for _, i := range List() {
		names = append(names, i.Name)
	}
	hint := ""
	if near := suggest.Nearest(name, names, 1); len(near) > 0 {
		hint = fmt.Sprintf(" did you mean %q?", near[0])
	}
	return nil, fmt.Errorf("no library scenario named %q;%s want one of %s (see fleetdrill scenarios list)", name, hint, strings.Join(names, ", "))
}
