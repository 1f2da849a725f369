package scenarios

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/fleetdrill/fleetdrill/traces"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

func mustLoad(t *testing.T, path string) *Scenario {
	t.Helper()
	s, err := Load(path)
	require.NoError(t, err)
	return s
}

// libraryProblems parses a library scenario and returns its problems. While
// twin/latency has no built-in profiles yet, problems that only say a ref
// is unknown are set aside and reported as skipped, so the rest of the
// scenario is still checked.
func libraryProblems(t *testing.T, name string) (s *Scenario, problems []Problem, skipped int) {
	t.Helper()
	s, err := LoadNamed(name)
	if err == nil {
		return s, nil, 0
	}
	var ve *ValidationError
	require.True(t, errors.As(err, &ve), "LoadNamed(%q) = %v, want a *ValidationError", name, err)
	for _, p := range ve.Problems {
		if len(latency.BuiltinRefs()) == 0 && strings.HasSuffix(p.Path, ".ref") && strings.Contains(p.Msg, "this build has none") {
			skipped++
			continue
		}
		problems = append(problems, p)
	}
	return nil, problems, skipped
}

func TestLibraryValidates(t *testing.T) {
	infos := List()
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
		require.NotEmpty(t, i.Description, "library scenario %s has no description", i.Name)
	}
	require.Subset(t, names, []string{"default", "mmc", "eu-residency"})
	require.True(t, slices.IsSorted(names), "List() = %v, want sorted by name", names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			s, problems, skipped := libraryProblems(t, name)
			require.Empty(t, problems)
			if skipped > 0 {
				t.Skipf("%d problems not checked: this build has no built-in profiles", skipped)
			}
			require.Equal(t, name, s.Name, "a library scenario's name is its file name")
		})
	}
}

func TestDefaultScenarioShape(t *testing.T) {
	// The issue fixes what default.yaml must hold; keep it so.
	data, err := Source("default")
	require.NoError(t, err)
	var s Scenario
	require.NoError(t, yaml.Unmarshal(data, &s))
	regions := map[string]string{}
	for _, r := range s.Regions {
		regions[r.Name] = r.Jurisdiction
	}
	// A two-region fleet; a third region holds only pool types to buy.
	fleet := map[string]string{}
	for _, p := range s.Pools {
		fleet[p.Region] = regions[p.Region]
	}
	require.Equal(t, map[string]string{"us-east": "us", "eu-west": "eu"}, fleet)
	require.Equal(t, map[string]string{"us-east": "us", "eu-west": "eu", "us-west": "us"}, regions)
	require.NotEmpty(t, s.Purchasable)
	accels := map[string]bool{}
	for _, p := range s.Pools {
		accels[p.Accelerator] = true
	}
	require.Equal(t, map[string]bool{"h100-sxm": true, "a100-sxm-80gb": true}, accels)
	require.Len(t, s.Models, 2)
	require.Len(t, s.Tenants, 3)
	var classes []string
	for _, c := range s.Classes {
		classes = append(classes, c.Name)
	}
	require.ElementsMatch(t, []string{"interactive", "batch"}, classes)
	var rate float64
	for _, st := range s.Workload {
		rate += st.Arrivals.Rate
	}
	require.InDelta(t, 5.5, rate, 0.05, "total arrival rate, the Azure 2023 conversation trace's 5.53 req/s")
	require.EqualValues(t, 42, s.Seed)
	require.Equal(t, 30*time.Minute, s.Duration.D())
}

func TestLoadNamed(t *testing.T) {
	t.Run("a path loads the file", func(t *testing.T) {
		s, err := LoadNamed("testdata/minimal.good.yaml")
		require.NoError(t, err)
		require.Equal(t, "minimal", s.Name)
	})
	t.Run("problems name the path as given", func(t *testing.T) {
		_, err := LoadNamed("testdata/top.bad.yaml")
		require.ErrorContains(t, err, "testdata/top.bad.yaml:3: schema: got 2")
	})
	t.Run("a missing file wraps fs.ErrNotExist", func(t *testing.T) {
		_, err := LoadNamed("testdata/nope.yaml")
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("an unknown library name lists the library", func(t *testing.T) {
		_, err := LoadNamed("nope")
		require.ErrorContains(t, err, `no library scenario named "nope"; want one of `)
		require.ErrorContains(t, err, "default")
	})
	t.Run("a misspelt library name gets the nearest", func(t *testing.T) {
		_, err := LoadNamed("defualt")
		require.ErrorContains(t, err, `no library scenario named "defualt"; did you mean "default"? want one of `)
	})
	t.Run("empty is the default scenario", func(t *testing.T) {
		_, p1, _ := libraryProblems(t, "")
		_, p2, _ := libraryProblems(t, DefaultName)
		require.Equal(t, p2, p1)
	})
	t.Run("library problems are reported against NAME.yaml", func(t *testing.T) {
		_, err := LoadNamedWithSets("mmc", []string{"seed=-3"})
		require.EqualError(t, err, "mmc.yaml (--set seed=-3): seed: got -3, want an integer from 0 to 18446744073709551615")
	})
}

func TestIsLibraryName(t *testing.T) {
	for in, want := range map[string]bool{
		"default": true, "eu-residency": true, "": false, "./default": false,
		"default.yaml": false, "dir/x": false, `dir\x`: false, "..": false,
	} {
		require.Equal(t, want, IsLibraryName(in), "IsLibraryName(%q)", in)
	}
}

func TestSource(t *testing.T) {
	for _, i := range List() {
		data, err := Source(i.Name)
		require.NoError(t, err)
		onDisk, err := os.ReadFile(i.Name + ".yaml")
		require.NoError(t, err)
		require.Equal(t, onDisk, data, "the embedded %s is the file", i.Name)
	}
	_, err := Source("../go.mod")
	require.Error(t, err)
	_, err = Source("testdata/minimal.good")
	require.Error(t, err, "testdata is not part of the library")
}

func TestDefaults(t *testing.T) {
	s := mustLoad(t, "testdata/minimal.good.yaml")
	require.Equal(t, DefaultDrain, s.Drain.D())
	require.Equal(t, DefaultTenantWeight, s.Tenants[0].Weight)
	require.Equal(t, DefaultQueueLimit, s.Policy.Admission.QueueLimit)
	require.Equal(t, DefaultDeferFor, s.Policy.Admission.DeferFor.D())
	require.Equal(t, DefaultRoutingStrategy, s.Policy.Routing.Strategy)

	full := mustLoad(t, "testdata/full.good.yaml")
	require.Equal(t, 15*time.Minute, full.Drain.D(), "a set value is kept")
	require.Equal(t, 12*time.Hour, full.Workload[0].Diurnal.Period.D())
	require.Equal(t, DefaultDiurnalPeriod, full.Workload[1].Diurnal.Period.D())
	require.Equal(t, "cheapest", full.Policy.Routing.Strategy)

	s, err := LoadWithSets("testdata/full.good.yaml", []string{"pools.eu-queue.max_batch="})
	require.NoError(t, err)
	require.Equal(t, 1, s.Pools[2].MaxBatch, "a service-time pool defaults to max_batch 1")
}

func TestFullFixtureReadsEveryField(t *testing.T) {
	s := mustLoad(t, "testdata/full.good.yaml")
	require.Equal(t, "Every field, set.\nSecond line.\n", s.Description)
	require.Equal(t, uint64(18446744073709551615), s.Seed)
	// The merge key copies small's fields into big, which overrides some.
	big := s.Models[1]
	require.Equal(t, "big", big.Name)
	require.Equal(t, 80, big.Layers)
	require.Equal(t, 128, big.HeadDim)
	require.Equal(t, []string{"vllm-a", "sglang-b"}, big.Runtimes)
	require.Equal(t, "535.104.05", big.MinDriver)
	require.Equal(t, Profile{StepBaseUS: 5000, PerSeqUS: 15, PerPrefillTokenUS: 40, PerKVTokenUS: 0.02, MinStepUS: 1000, MaxBatchedTokens: 8192, KVTokens: 400000},
		s.Pools[0].Profiles["small"])
	require.Equal(t, Quota{RequestsPerMinute: 600, TokensPerMinute: 1e6}, s.Pools[0].Quota)
	require.Equal(t, &Service{Distribution: "deterministic", Mean: Duration(1500 * time.Millisecond)}, s.Pools[2].Service)
	require.True(t, s.Pools[0].StartCold)
	require.Equal(t, &Purchase{LeadTime: Period(14 * Day), MinTerm: Period(90 * Day), MaxReplicas: 8}, s.Pools[2].Purchase)
	require.Len(t, s.Purchasable, 1)
	require.Equal(t, "us-reserved", s.Purchasable[0].Name)
	require.Equal(t, &Purchase{LeadTime: Period(56 * Day), MinTerm: Period(365 * Day), MaxReplicas: 16}, s.Purchasable[0].Purchase)
	require.Len(t, s.Pools, 3, "a purchasable type is not in the fleet")
	require.True(t, s.Policy.Routing.IgnoreResidency)
	require.Equal(t, Tenant{Name: "acme", Jurisdiction: "eu", Weight: 3, TokensPerMinute: 250000, MaxConcurrency: 32, Cohort: "gold"}, s.Tenants[0])
	require.Equal(t, Class{Name: "batch", Priority: -1, SLO: SLO{E2E: Duration(time.Hour)}, Deadline: Duration(2 * time.Hour), Deferrable: true}, s.Classes[1])
	require.Equal(t, Duration(time.Minute), s.Workload[0].Start)
	require.Equal(t, Distribution{Dist: "lognormal", Mean: 1155, CV: 0.96, Min: 2, Max: 8192}, s.Workload[0].InputTokens)
	require.Equal(t, Admission{QueueLimit: 200, DeadlineCheck: true, RetryAfter: Duration(5 * time.Second), DeferFor: Duration(2 * time.Minute)}, s.Policy.Admission)
	require.Len(t, s.Expect, 5)
}

func TestBuiltinRefs(t *testing.T) {
	base, err := os.ReadFile("testdata/minimal.good.yaml")
	require.NoError(t, err)
	t.Run("unknown ref", func(t *testing.T) {
		_, err := ParseWithSets("minimal.yaml", base, []string{"pools[0].profiles.m={ref: h100-sxm/nope/tp1}"})
		require.ErrorContains(t, err, `minimal.yaml (--set pools[0].profiles.m={ref: h100-sxm/nope/tp1}): pools[0].profiles.m.ref: got "h100-sxm/nope/tp1", no such built-in profile`)
	})
	t.Run("every built-in ref is accepted", func(t *testing.T) {
		refs := latency.BuiltinRefs()
		if len(refs) == 0 {
			t.Skip("twin/latency has no built-in profiles yet")
		}
		for _, ref := range refs {
			tp := "1"
			if m := tpPattern.FindStringSubmatch(ref); m != nil {
				tp = m[1]
			}
			// A large accelerator, so that whatever model the ref is for,
			// its weights fit: this checks the ref, not the sizing.
			_, err := ParseWithSets("minimal.yaml", base, []string{
				"pools[0].profiles.m={ref: " + ref + "}",
				"pools[0].gpus_per_replica=" + tp,
				"accelerators[0].memory_gib=100000",
			})
			require.NoError(t, err, "ref %s", ref)
		}
	})
}

// TestPrintReparse: printing a parsed scenario with yaml.Marshal and parsing
// the text again gives the same scenario. The run report and `fleetdrill
// run --print` depend on this.
func TestPrintReparse(t *testing.T) {
	var scs []*Scenario
	files, _ := filepath.Glob("testdata/*.good.yaml")
	for _, f := range files {
		scs = append(scs, mustLoad(t, f))
	}
	for _, i := range List() {
		if s, problems, _ := libraryProblems(t, i.Name); s != nil && problems == nil {
			scs = append(scs, s)
		}
	}
	for _, s := range scs {
		t.Run(s.Name, func(t *testing.T) {
			out, err := yaml.Marshal(s)
			require.NoError(t, err)
			again, err := Parse(s.Name+".printed.yaml", out)
			require.NoError(t, err, "printed:\n%s", out)
			again.Dir = s.Dir // where it was read from, not what it says
			require.Equal(t, s, again)
		})
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "a.yaml", Line: 42, Path: "pools[2].gpus_per_replica", Value: "0", Msg: "want >= 1"}, "a.yaml:42: pools[2].gpus_per_replica: got 0, want >= 1"},
		{Problem{File: "a.yaml", Line: 3, Path: "pools[0].driver", Msg: "missing; want a dotted version"}, "a.yaml:3: pools[0].driver: missing; want a dotted version"},
		{Problem{File: "a.yaml", Msg: "empty document"}, "a.yaml: empty document"},
		{Problem{File: "a.yaml", Line: 7, Path: "seed", Value: "-1", Msg: "want >= 0", Set: "seed=-1"}, "a.yaml (--set seed=-1): seed: got -1, want >= 0"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tt.p.String())
	}
}

// TestLibraryTracesAreEmbedded keeps the library runnable anywhere: a
// library scenario has no directory, so a trace path on disk would only
// resolve in a checkout with the file beside it (as ../shared/traces once
// did); every trace it replays must be one the binary carries.
func TestLibraryTracesAreEmbedded(t *testing.T) {
	for _, info := range List() {
		data, err := Source(info.Name)
		require.NoError(t, err)
		// Only the paths are read: whether the rest validates is
		// TestLibraryValidates's.
		var s Scenario
		require.NoError(t, yaml.Unmarshal(data, &s), info.Name)
		var paths []string
		for _, st := range s.Workload {
			if st.Trace != nil {
				paths = append(paths, st.Trace.Path)
			}
		}
		for _, j := range s.Jobs {
			if j.Trace != nil {
				paths = append(paths, j.Trace.Path)
			}
		}
		for _, p := range paths {
			name, ok := traces.Name(p)
			require.True(t, ok, "%s replays %q, a file on disk; want an embedded trace (embedded:NAME, package traces)", info.Name, p)
			require.True(t, traces.Has(name), "%s: %s", info.Name, traces.UnknownError(name))
		}
	}
}
