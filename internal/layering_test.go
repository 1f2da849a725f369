package internal

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/fleetdrill/fleetdrill"

// layerRule is an import rule a package's doc comment states. With
// transitive, what the package reaches through other packages of the
// module counts too; otherwise only its own imports (for packages that use
// a higher package's types, which itself stands on what they must not
// touch).
type layerRule struct {
	pkg        string   // relative to the module root
	forbidden  []string // import paths, or prefixes ending in "/..."
	transitive bool
	why        string // where the rule is stated
}

// layerRules are the import rules the packages' doc comments state. A rule
// added to a doc comment belongs here too, so that it holds.
var layerRules = []layerRule{
	{"sim", []string{module + "/..."}, true, "sim/doc.go: must not import anything from fleetdrill"},
	{"sim/stats", []string{module + "/..."}, true, "sim/stats/doc.go: stats is a leaf"},
	{"twin/dispatch", []string{module + "/..."}, true, "twin/dispatch/doc.go: must not import sim or any other fleetdrill package"},
	{"twin/sched", []string{module + "/sim/...", module + "/sim", "os", "net/...", "net", "io/...", "io", "math/rand", "math/rand/v2", "crypto/rand"}, true,
		"twin/sched/sched.go: must not import sim, read a clock, draw random numbers or do I/O"},
	{"twin/reqengine", []string{module + "/twin", module + "/sim/...", module + "/sim", module + "/internal/gateway", module + "/internal/node", module + "/internal/livefleet", module + "/internal/liverun"}, true,
		"twin/reqengine/doc.go: must not import sim, the twin's root package or any live package"},
	// Its scenarios' types come with the loader's imports; its own code
	// stays pure.
	{"twin/reqengine", []string{"os", "net/...", "net", "io/...", "io", "math/rand", "math/rand/v2", "crypto/rand"}, false,
		"twin/reqengine/doc.go: reads no clock, draws no random number and does no I/O"},
	{"twin/engine", []string{module + "/sim/...", module + "/sim", "os", "net", "net/...", "io", "math/rand", "math/rand/v2"}, true,
		"twin/engine/engine.go: must not import sim, read a clock, start goroutines or do I/O"},
	{"twin/kvlink", []string{module + "/...", "os", "net", "net/...", "io", "io/...", "math/rand", "math/rand/v2"}, true,
		"twin/kvlink/doc.go: pure: no clock, no random numbers, no I/O, no import from fleetdrill"},
	{"twin/fleet", []string{module + "/sim", module + "/sim/...", module + "/twin/sched"}, true,
		"twin/fleet/fleet.go: must not import sim, the scheduler, or anything that does I/O"},
	{"twin/latency", []string{module + "/...", "math/rand", "math/rand/v2", "net", "net/...", "os"}, true,
		"twin/latency/profile.go: pure arithmetic, no I/O (internal/modelfile reads files); must not import sim or anything above twin/latency"},
	{"internal/trace", []string{module + "/twin", module + "/twin/...", module + "/sim", module + "/sim/..."}, true,
		"internal/trace/record.go: must not import the twin or the kernel"},
	{"internal/anonymize", []string{module + "/twin", module + "/twin/...", module + "/sim", module + "/sim/...", module + "/cmd/..."}, true,
		"internal/anonymize/doc.go: must not import the twin, the kernel or the CLI"},
	{"internal/tui", []string{module + "/twin/sched", module + "/sim", module + "/sim/..."}, false,
		"internal/tui/doc.go: must not import twin/sched, sim"},
	{"internal/report", []string{module + "/twin/sched", module + "/sim"}, false,
		"internal/report/text.go: must not import the scheduler or the kernel"},
	{"internal/openmetrics", []string{module + "/twin/sched", module + "/twin/engine", module + "/sim"}, false,
		"internal/openmetrics/doc.go: imports nothing from the twin's model"},
	{"internal/gpu", []string{module + "/twin", module + "/twin/...", module + "/sim", module + "/sim/...", module + "/internal/gateway", module + "/internal/node"}, false,
		"internal/gpu/doc.go: must not import twin/, sim/ or the live gateway and node"},
	// The twin is one of the two drivers of the scheduler core; it must not
	// reach the live one.
	{"twin", []string{module + "/internal/gateway", module + "/internal/node", module + "/internal/livefleet", module + "/internal/liverun"}, true,
		"docs/architecture.md: the simulator and the live gateway are two drivers of one core"},
	// Nor the live one the twin: both configure themselves from twin/compile.
	// module+"/twin" is the root package only; its sub-packages are allowed.
	{"internal/gateway", []string{module + "/twin"}, true,
		"internal/gateway/doc.go: must not import the twin (twin, the root package)"},
	{"internal/node", []string{module + "/twin"}, true,
		"internal/node/doc.go: must not import the twin (twin, the root package)"},
	{"internal/livefleet", []string{module + "/twin"}, true,
		"internal/livefleet/doc.go: must not import the twin (twin, the root package)"},
	{"twin/compile", []string{module + "/twin", module + "/sim", module + "/sim/...", module + "/internal/gateway", module + "/internal/node",
		module + "/internal/livefleet", module + "/internal/liverun"}, true,
		"twin/compile/doc.go: must not import the twin (twin, the root package), sim, or any live package"},
}

// TestLayering holds the import rules the doc comments state.
func TestLayering(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string][]string{} // package (relative) → its imports
	load := func(rel string) []string {
		if imp, ok := imports[rel]; ok {
			return imp
		}
		imp, err := directImports(filepath.Join(root, rel))
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		imports[rel] = imp
		return imp
	}
	reach := func(rel string, transitive bool) map[string]string {
		out := map[string]string{} // import → the package of ours that imports it
		var walk func(rel string)
		walk = func(rel string) {
			for _, p := range load(rel) {
				if _, seen := out[p]; seen {
					continue
				}
				out[p] = rel
				if transitive && strings.HasPrefix(p, module+"/") {
					walk(strings.TrimPrefix(p, module+"/"))
				}
			}
		}
		walk(rel)
		return out
	}
	for _, r := range layerRules {
		if _, err := os.Stat(filepath.Join(root, r.pkg)); err != nil {
			t.Errorf("%s: no such package (the rule from %s)", r.pkg, r.why)
			continue
		}
		for p, via := range reach(r.pkg, r.transitive) {
			for _, f := range r.forbidden {
				if matches(p, f) && p != module+"/"+r.pkg {
					t.Errorf("%s imports %s (through %s); %s", r.pkg, p, via, r.why)
				}
			}
		}
	}
}

func matches(path, pattern string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return strings.HasPrefix(path, prefix+"/")
	}
	return path == pattern
}

// directImports lists the imports of a package's non-test Go files, every
// build variant included (cgo and not).
func directImports(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, s := range f.Imports {
			p, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// TestLayeringCatchesAViolation: the check itself finds an import it
// forbids (a rule on a package that does import the path).
func TestLayeringCatchesAViolation(t *testing.T) {
	imp, err := directImports("../twin")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(imp, module+"/sim") {
		t.Fatalf("twin's imports %v: want sim among them for this check", imp)
	}
	if !matches(module+"/sim/stats", module+"/sim/...") || matches(module+"/simx", module+"/sim/...") {
		t.Error("prefix patterns match the package tree, not a name prefix")
	}
}

// singleGoroutine are the packages `make test` runs without the race
// detector (the Makefile's PURE_PKGS): pure computation on the caller's
// goroutine, where the detector finds nothing and costs ten times the
// time. A package here that starts a goroutine must leave the list, and
// the Makefile's, to be raced again.
var singleGoroutine = []string{
	"sim", "sim/stats", "twin", "twin/compile", "twin/dispatch", "twin/engine", "twin/fleet", "twin/latency", "twin/reqengine", "twin/sched",
	"scenarios", "internal/trace", "internal/openmetrics",
}

// TestRaceFreePackagesStartNoGoroutine: no go statement in the non-test
// files of the packages `make test` does not race.
func TestRaceFreePackagesStartNoGoroutine(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var purePkgs []string
	for _, line := range strings.Split(string(mk), "\n") {
		if rest, ok := strings.CutPrefix(line, "PURE_PKGS := "); ok {
			purePkgs = strings.Fields(rest)
		}
	}
	for _, pkg := range purePkgs {
		if !slices.Contains(singleGoroutine, pkg) {
			t.Errorf("the Makefile's PURE_PKGS has %s, which singleGoroutine here does not check", pkg)
		}
	}
	for _, pkg := range singleGoroutine {
		if !slices.Contains(purePkgs, pkg) {
			t.Errorf("%s is not in the Makefile's PURE_PKGS", pkg)
		}
		files, err := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", pkg, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			// A go statement, an errgroup, or the sync types goroutines
			// share state with; sync.Once and sync.Map (caches safe for a
			// concurrent caller) are allowed.
			for _, imp := range file.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "golang.org/x/sync/errgroup" {
					t.Errorf("%s imports errgroup: race it in make test (the Makefile's PURE_PKGS and singleGoroutine here)", f)
				}
			}
			ast.Inspect(file, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s starts a goroutine: race it in make test (the Makefile's PURE_PKGS and singleGoroutine here)", f)
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.Ident); ok && id.Name == "sync" && slices.Contains([]string{"Mutex", "RWMutex", "WaitGroup", "Cond"}, x.Sel.Name) {
						t.Errorf("%s uses sync.%s, state shared between goroutines: race it in make test", f, x.Sel.Name)
					}
				}
				return true
			})
		}
	}
}
