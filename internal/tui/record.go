package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/shell"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/traces"
)

// Base is the scenario a drill started from, as the operator gave it.
type Base struct {
	Name string   // a library name (default, gameday-full) or a file path
	Sets []string // --set overrides in order, --seed as seed=N among them
}

// RecordScenario returns the scenario file that replays a drill: base's
// YAML, comments and all, with its --set overrides written in, its faults:
// list replaced by the drill's recorded lines (the scenario's own and the
// operator's, each with its exact at= and for=), and relative trace paths
// rewritten to resolve from outPath's directory. `fleetdrill run` of the
// file gives the drill's report when the drill ran to its end; a drill
// stopped early replays to the scenario's end. The result is parsed as
// the loader would read it from outPath before it is returned.
func RecordScenario(base Base, recorded []string, outPath string) ([]byte, error) {
	name := base.Name
	if name == "" {
		name = scenarios.DefaultName
	}
	var (
		src []byte
		dir string
		err error
	)
	if scenarios.IsLibraryName(name) {
		src, err = scenarios.Source(name)
	} else {
		src, err = os.ReadFile(name)
		dir = filepath.Dir(name)
	}
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	sc, err := scenarios.ParseInDir(name, dir, src, base.Sets)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	// The loader leaves fault lines to the twin; check them here, so a
	// record that would not replay is never written.
	if _, err := faults.ParseAll(recorded); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("record: %s: %w", name, err)
	}
	sets := slices.Clone(base.Sets)
	fl, err := json.Marshal(recorded)
	if err != nil {
		return nil, err
	}
	if len(recorded) == 0 {
		fl = []byte("[]")
	}
	sets = append(sets, "faults="+string(fl))
	outDir, err := filepath.Abs(filepath.Dir(outPath))
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	rebase := func(field string, i int, path string) error {
		if _, embedded := traces.Name(path); embedded || path == "" || filepath.IsAbs(path) {
			return nil // where the recording is written changes nothing
		}
		abs, err := filepath.Abs(sc.TracePath(path))
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(outDir, abs)
		if err != nil {
			rel = abs
		}
		q, _ := json.Marshal(filepath.ToSlash(rel))
		sets = append(sets, fmt.Sprintf("%s[%d].trace.path=%s", field, i, q))
		return nil
	}
	for i, st := range sc.Workload {
		if st.Trace != nil {
			if err := rebase("workload", i, st.Trace.Path); err != nil {
				return nil, fmt.Errorf("record: %w", err)
			}
		}
	}
	for i, j := range sc.Jobs {
		if j.Trace != nil {
			if err := rebase("jobs", i, j.Trace.Path); err != nil {
				return nil, fmt.Errorf("record: %w", err)
			}
		}
	}
	for _, set := range sets {
		if err := scenarios.ApplySet(&doc, set); err != nil {
			return nil, fmt.Errorf("record: %w", err)
		}
	}
	blockStyle(&doc, "faults")

	var b bytes.Buffer
	fmt.Fprintf(&b, "# Recorded by fleetdrill tui from %s", name)
	if len(base.Sets) > 0 {
		fmt.Fprintf(&b, " with --set %s", strings.Join(base.Sets, " --set "))
	}
	b.WriteString(".\n# The faults below are the scenario's and the operator's, at their simulated\n" +
		"# times; replay with: fleetdrill run " + filepath.Base(outPath) + "\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	out := b.Bytes()
	check, err := scenarios.ParseInDir(outPath, filepath.Dir(outPath), out, nil)
	if err != nil {
		return nil, fmt.Errorf("record: the recorded scenario does not load (a fleetdrill bug): %w", err)
	}
	if !slices.Equal(check.Faults, recorded) && (len(check.Faults) > 0 || len(recorded) > 0) {
		return nil, fmt.Errorf("record: the recorded scenario's faults %q differ from the drill's %q (a fleetdrill bug)", check.Faults, recorded)
	}
	return out, nil
}

// blockStyle prints the root mapping's key list in block style, one entry
// per line, whatever style the override gave it.
func blockStyle(doc *yaml.Node, key string) {
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == key {
			v := root.Content[i+1]
			v.Style = 0
			for _, c := range v.Content {
				c.Style = 0
			}
		}
	}
}

// ReplayArgs are the arguments of the fleetdrill run command that replays a
// drill without a record file: base's scenario and overrides, and the
// drill's fault lines (the scenario's own and the operator's, with their
// exact times) as one faults= override, which replaces the scenario's list.
func ReplayArgs(base Base, recorded []string) []string {
	name := base.Name
	if name == "" {
		name = scenarios.DefaultName
	}
	args := []string{"run", name}
	for _, s := range base.Sets {
		if strings.HasPrefix(s, "faults=") {
			continue // the recorded lines replace them
		}
		args = append(args, "--set", s)
	}
	quoted := make([]string, len(recorded))
	for i, l := range recorded {
		quoted[i] = strconv.Quote(l) // a YAML double-quoted string too
	}
	return append(args, "--set", "faults=["+strings.Join(quoted, ", ")+"]")
}

// ReplayCommand is ReplayArgs as a line to paste into a POSIX shell.
func ReplayCommand(base Base, recorded []string) string {
	return shell.Line(append([]string{"fleetdrill"}, ReplayArgs(base, recorded)...)...)
}
