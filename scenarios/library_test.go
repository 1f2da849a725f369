package scenarios_test

// The library's scenarios run through the twin here, not in package
// scenarios: the twin imports scenarios, so only an external test package
// can import both.

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// loadLibrary loads a library scenario, skipping the test when this build
// has no built-in latency profiles. The traces the library replays are
// embedded (package traces), so nothing beside the checkout is needed.
func loadLibrary(t *testing.T, name string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.LoadNamed(name)
	if err == nil {
		return sc
	}
	var ve *scenarios.ValidationError
	require.True(t, errors.As(err, &ve), "LoadNamed(%q) = %v, want a *scenarios.ValidationError", name, err)
	missing := 0
	for _, p := range ve.Problems {
		if len(latency.BuiltinRefs()) == 0 && strings.HasSuffix(p.Path, ".ref") {
			missing++
		}
	}
	if missing == len(ve.Problems) {
		t.Skipf("%s needs built-in profiles, which this build has not (%d problems): %v", name, missing, err)
	}
	require.NoError(t, err)
	return nil
}

// TestLibraryScenariosPass runs every library scenario through the twin:
// each must run, keep its books (every request accounted for once, in the
// run, per class, per tenant, in every window, and every job), pass every
// one of its expectations, and give the same report when run again.
// Deliberately broken scenarios (a retry storm, a CPU fallback) describe
// their bad outcome in their expectations, so they pass too.
func TestLibraryScenariosPass(t *testing.T) {
	for _, info := range scenarios.List() {
		t.Run(info.Name, func(t *testing.T) {
			t.Parallel()
			sc := loadLibrary(t, info.Name)
			rep, err := twin.Run(t.Context(), sc, twin.Options{})
			require.NoError(t, err)

			require.True(t, rep.Requests.Balanced(), "requests: %+v", rep.Requests)
			for _, name := range slices.Sorted(maps.Keys(rep.Classes)) {
				require.True(t, rep.Classes[name].Balanced(), "classes.%s: %+v", name, rep.Classes[name].Counts)
			}
			for _, name := range slices.Sorted(maps.Keys(rep.Tenants)) {
				require.True(t, rep.Tenants[name].Balanced(), "tenants.%s: %+v", name, rep.Tenants[name].Counts)
			}
			for _, name := range slices.Sorted(maps.Keys(rep.Windows)) {
				w := rep.Windows[name]
				require.True(t, w.Requests.Balanced(), "windows[%s]: %+v", name, w.Requests)
				for cn, g := range w.Classes {
					require.True(t, g.Balanced(), "windows[%s].classes.%s: %+v", name, cn, g.Counts)
				}
			}
			for _, name := range slices.Sorted(maps.Keys(rep.Jobs)) {
				require.True(t, rep.Jobs[name].Balanced(), "jobs.%s: %+v", name, rep.Jobs[name])
			}
			require.Positive(t, rep.Requests.Arrived, "a library scenario that sends nothing shows nothing")

			require.Len(t, rep.Expectations, len(sc.Expect), "every expect line evaluated")
			var failed []string
			for _, e := range rep.Expectations {
				if !e.Pass {
					failed = append(failed, fmt.Sprintf("%s (value %v)", e.Expr, e.Value))
				}
			}
			require.Empty(t, failed, "fleetdrill run %s: expectations that fail", info.Name)

			again, err := twin.Run(t.Context(), sc, twin.Options{})
			require.NoError(t, err)
			require.Equal(t, reportJSON(t, rep), reportJSON(t, again), "the same scenario and seed give the same report")
		})
	}
}

// reportJSON is a report without its run section, the only part allowed to
// differ between identical runs.
func reportJSON(t *testing.T, rep *twin.Report) []byte {
	t.Helper()
	c := *rep
	c.Run = twin.RunInfo{}
	b, err := c.JSON()
	require.NoError(t, err)
	return b
}

// TestLibraryGameDays: the library holds a ready game day for each fault
// the product names, each saying in its leading comment what it teaches and
// what it expects, and judging the fault with expectations scoped to it and
// with its own figures (faults.<kind>(<target>).time_to_detect_s, …).
func TestLibraryGameDays(t *testing.T) {
	want := map[string][]faults.Kind{
		"gameday-regional-outage":    {faults.RegionalOutage},
		"gameday-quota-exhaustion":   {faults.QuotaExhaustion},
		"gameday-model-retirement":   {faults.ModelRetirement},
		"gameday-driver-upgrade":     {faults.DriverUpgrade},
		"gameday-retry-storm":        {faults.NodeLoss},
		"gameday-cpu-fallback":       {faults.NodeLoss},
		"gameday-spot-loss":          {faults.NodeLoss},
		"gameday-full":               {faults.RegionalOutage, faults.QuotaExhaustion, faults.NodeLoss, faults.Brownout},
		"gameday-autoscale-stockout": {faults.RegionalOutage, faults.Stockout},
		"gameday-pd-link":            {faults.LinkDegraded, faults.NodeLoss},
	}
	var names []string
	for _, i := range scenarios.List() {
		names = append(names, i.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		t.Run(name, func(t *testing.T) {
			require.Contains(t, names, name)
			src, err := scenarios.Source(name)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(src, []byte("# "+name+": ")), "%s.yaml starts with a comment naming it", name)
			head, _, _ := bytes.Cut(src, []byte("\nschema:"))
			comment := strings.Join(strings.Fields(strings.ReplaceAll(string(head), "\n#", " ")), " ")
			for _, part := range []string{"What it teaches.", "What it expects", "Measured at seed"} {
				require.Contains(t, comment, part, "%s.yaml's leading comment", name)
			}

			// The fault kinds and scopes need only the YAML, not the
			// traces, so they are read from the source.
			var doc struct {
				Faults []string `yaml:"faults"`
				Expect []string `yaml:"expect"`
			}
			require.NoError(t, yaml.Unmarshal(src, &doc))
			specs, err := faults.ParseAll(doc.Faults)
			require.NoError(t, err)
			var kinds []faults.Kind
			for _, s := range specs {
				kinds = append(kinds, s.Kind)
			}
			require.Subset(t, kinds, want[name], "%s injects the faults it is about", name)
			scoped, figures := 0, 0
			for _, line := range doc.Expect {
				e, err := scenarios.ParseExpectation(line)
				require.NoError(t, err)
				if e.Scope != "" {
					scoped++
				}
				if strings.HasPrefix(e.LHS, "faults.") {
					figures++
				}
			}
			require.Positive(t, scoped, "%s judges its faults with expectations scoped to them (during …/after …)", name)
			require.Positive(t, figures, "%s judges its faults by their own figures (faults.<kind>(<target>).…)", name)
		})
	}
}

// librarySeeds is how many consecutive seeds, from its own, every library
// scenario's expectations must pass at: a game day that passes at one seed
// only teaches luck.
const librarySeeds = 20

// TestLibraryHoldsAcrossSeeds runs every library scenario at librarySeeds
// consecutive seeds from its own and requires every expectation to pass at
// each, every request to be accounted for and residency to hold. It is
// skipped under the race detector and -short (it is 220 twin runs); `make
// seeds` and .ci/run run it.
func TestLibraryHoldsAcrossSeeds(t *testing.T) {
	if raceDetector || testing.Short() {
		t.Skip("220 twin runs: run without -race and -short (make seeds)")
	}
	for _, info := range scenarios.List() {
		t.Run(info.Name, func(t *testing.T) {
			t.Parallel()
			base := loadLibrary(t, info.Name).Seed
			var failed []string
			for i := range uint64(librarySeeds) {
				sc := loadLibrary(t, info.Name)
				sc.Seed = base + i
				rep, err := twin.Run(t.Context(), sc, twin.Options{})
				require.NoError(t, err, "seed %d", sc.Seed)
				require.True(t, rep.Requests.Balanced(), "seed %d: %+v", sc.Seed, rep.Requests)
				require.Zero(t, rep.ResidencyViolations, "seed %d", sc.Seed)
				for _, e := range rep.Expectations {
					if !e.Pass {
						failed = append(failed, fmt.Sprintf("seed %d: %s (value %v)", sc.Seed, e.Expr, e.Value))
					}
				}
			}
			require.Empty(t, failed, "fleetdrill run %s --seed N: expectations that fail", info.Name)
		})
	}
}
