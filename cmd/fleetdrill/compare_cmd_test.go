package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/sweep"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// smallScenario is overloaded enough that the scheduler matters, and runs
// in milliseconds; see its comments.
const smallScenario = "../../internal/compare/testdata/small.yaml"

// runCompare runs `fleetdrill compare args...` on the command alone.
func runCompare(t *testing.T, args ...string) (code int, stdout, stderr string) {
	return runCommand(t, newCompareCmd(), args...)
}

// TestCompareEndToEnd: on the small, overloaded scenario, priority
// scheduling gives interactive requests a significantly shorter queue wait
// than fifo, in the table and in the JSON.
func TestCompareEndToEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	code, out, errs := runCompare(t, smallScenario, "--policy", "fifo", "--policy", "priority", "--seeds", "10", "--json", path)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "compare small: policies fifo (baseline), priority; 10 seeds (42..51)")
	require.Contains(t, out, "class interactive")
	require.Contains(t, out, "class batch")
	require.Contains(t, out, "paired t-test")
	require.Contains(t, errs, "compare: 20 runs in")

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var res struct {
		Policies []string `json:"policies"`
		Seeds    []uint64 `json:"seeds"`
		Classes  map[string]map[string]map[string]struct {
			N           int      `json:"n"`
			Mean        float64  `json:"mean"`
			CI95        *float64 `json:"ci95"`
			P           *float64 `json:"p_vs_baseline"`
			Significant bool     `json:"significant"`
		} `json:"classes"`
		Run map[string]any `json:"run"`
	}
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, []string{"fifo", "priority"}, res.Policies)
	require.Len(t, res.Seeds, 10)
	wait := res.Classes["interactive"]["queue_wait_s.p99"]
	fifo, prio := wait["fifo"], wait["priority"]
	require.Equal(t, 10, prio.N)
	require.NotNil(t, prio.CI95)
	require.NotNil(t, prio.P)
	require.Less(t, prio.Mean, fifo.Mean/10, "priority's interactive queue-wait p99 (%g s) should be far below fifo's (%g s)", prio.Mean, fifo.Mean)
	require.True(t, prio.Significant, "p = %g", *prio.P)
	require.Less(t, *prio.P, 0.001)
	require.Contains(t, res.Run, "wall_s")

	// The table marks it too: the interactive queue_wait row ends in *.
	require.Regexp(t, `(?m)^  queue_wait_s\.p99 .* \*$`, out)
}

// TestCompareParallelIsDeterministic: the number of workers, and with it
// the order in which runs finish, does not change a byte of the output.
func TestCompareParallelIsDeterministic(t *testing.T) {
	args := []string{smallScenario, "--policy", "fifo,priority,wfq", "--seeds", "4"}
	code1, out1, errs1 := runCompare(t, append(args, "--parallel", "1")...)
	require.Equal(t, exitOK, code1, errs1)
	code3, out3, errs3 := runCompare(t, append(args, "--parallel", "3")...)
	require.Equal(t, exitOK, code3, errs3)
	require.Equal(t, out1, out3)
	require.Contains(t, errs1, "on 1 worker\n")
	require.Contains(t, errs3, "on 3 workers\n")
}

func TestCompareJSONToStdout(t *testing.T) {
	code, out, errs := runCompare(t, smallScenario, "--policy", "fifo,edf", "--seeds", "2", "--json", "-")
	require.Equal(t, exitOK, code, errs)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(out), &m), "stdout should be JSON alone:\n%s", out)
	require.Contains(t, m, "classes")
}

func TestCompareOneSeedWarns(t *testing.T) {
	code, out, errs := runCompare(t, smallScenario, "--policy", "fifo,priority", "--seeds", "1")
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, errs, "warning: --seeds 1 gives no confidence intervals and no tests")
	require.Contains(t, out, "± n/a")
}

func TestCompareInvalid(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no policy", []string{smallScenario}, []string{"--policy: got 0, want at least 2", "fifo, priority, wfq, edf"}},
		{"one policy", []string{smallScenario, "--policy", "fifo"}, []string{"--policy: got 1, want at least 2"}},
		{"unknown policy", []string{smallScenario, "--policy", "fifo,lottery"}, []string{`--policy "lottery": want one of fifo, priority, wfq, edf`}},
		{"policy twice", []string{smallScenario, "--policy", "fifo", "--policy", "fifo"}, []string{`--policy "fifo" given twice`}},
		{"every problem at once", []string{smallScenario, "--policy", "x", "--seeds", "0", "--parallel", "-1"}, []string{
			"--policy: got 1", `--policy "x"`, "--seeds: got 0, want >= 1", "--parallel: got -1, want >= 1, or 0"}},
		{"scheduler set", []string{smallScenario, "--policy", "fifo,wfq", "--set", "policy.scheduler=edf"}, []string{"--set policy.scheduler=edf: compare sets the scheduler itself; use --policy"}},
		{"too many args", []string{"a", "b", "--policy", "fifo,wfq"}, []string{"accepts at most 1 arg"}},
		{"unknown library name", []string{"no-such-scenario", "--policy", "fifo,wfq"}, []string{`no library scenario named "no-such-scenario"`}},
		{"missing file", []string{"./nope.yaml", "--policy", "fifo,wfq"}, []string{"nope.yaml", "no such file"}},
		{"bad set", []string{smallScenario, "--policy", "fifo,wfq", "--set", "pools.nope.replicas=2"}, []string{"scenario ../../internal/compare/testdata/small.yaml is invalid", "pools.nope"}},
		{"bad json dir", []string{smallScenario, "--policy", "fifo,wfq", "--json", "/no/such/dir/out.json"}, []string{"--json /no/such/dir/out.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCompare(t, tt.args...)
			require.Equal(t, exitInvalid, code, "stderr: %s", errs)
			require.Empty(t, out)
			for _, w := range tt.want {
				require.Contains(t, errs, w)
			}
		})
	}
}

// TestCompareRunFailure: a run that fails says which policy and seed, and
// how to reproduce it alone.
func TestCompareRunFailure(t *testing.T) {
	// The expectation parses, but names no report value: the twin refuses
	// it when the run starts.
	code, out, errs := runCompare(t, smallScenario, "--policy", "fifo,wfq", "--seeds", "2", "--parallel", "1",
		"--set", "expect=[nosuch.value < 1]")
	require.Equal(t, exitInvalid, code, errs)
	require.Empty(t, out)
	require.Contains(t, errs, "policy fifo, seed 42: ")
	require.Contains(t, errs, "reproduce with: fleetdrill run ../../internal/compare/testdata/small.yaml --set 'expect=[nosuch.value < 1]' --set policy.scheduler=fifo --seed 42")
}

// mmcCompareArgs is a short comparison on the library scenario mmc (its
// 10-minute warm-up shortened to fit 5 minutes).
var mmcCompareArgs = []string{"mmc", "--policy", "fifo,priority", "--seeds", "3", "--set", "duration=5m", "--set", "warmup=1m"}

// TestCompareEmitSweep: --emit-sweep runs nothing and writes a spec that
// sweep.Load accepts, with a point per policy and compare's seeds listed.
func TestCompareEmitSweep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sweep.yaml")
	code, out, errs := runCompare(t, append(mmcCompareArgs, "--emit-sweep", path)...)
	require.Equal(t, exitOK, code, errs)
	require.Empty(t, out)
	require.Equal(t, "compare: wrote sweep spec "+path+": 2 policies × 3 seeds = 6 runs; run it with fleetdrill sweep run "+path+", or fleetdrill sweep "+path+" --emit k8s\n", errs)

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(b), "#   fleetdrill sweep run "+path)
	require.Contains(t, string(b), "--emit k8s")
	require.Contains(t, string(b), "paired t-test")

	spec, err := sweep.Load(path)
	require.NoError(t, err)
	require.Equal(t, "mmc", spec.Scenario, "a library name stays a name")
	require.Equal(t, []string{"duration=5m", "warmup=1m"}, spec.Sets)
	require.Len(t, spec.Points, 2)
	require.Equal(t, "fifo", spec.Points[0].Name)
	require.Equal(t, []string{"policy.scheduler=fifo"}, spec.Points[0].Sets)
	require.Equal(t, "priority", spec.Points[1].Name)
	require.Equal(t, []string{"policy.scheduler=priority"}, spec.Points[1].Sets)
	mmc, err := scenarios.LoadNamed("mmc")
	require.NoError(t, err)
	require.Equal(t, []uint64{mmc.Seed, mmc.Seed + 1, mmc.Seed + 2}, spec.Seeds)
	require.Equal(t, 6, spec.Runs())
}

// TestCompareEmitSweepSameFigures is the point of --emit-sweep: the sweep
// of the spec, run and merged, gives per policy and seed the figures
// compare's own runs give, and so the same means. mmc has one class, under
// which fifo and priority agree; small has two, under which they differ.
func TestCompareEmitSweepSameFigures(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		differ bool
	}{
		{"mmc", mmcCompareArgs, false},
		{"small", []string{smallScenario, "--policy", "fifo,priority", "--seeds", "3", "--set", "seed=7"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sweep.yaml")
			code, _, errs := runCompare(t, append(tt.args, "--emit-sweep", path)...)
			require.Equal(t, exitOK, code, errs)
			code, out, errs := runCompare(t, append(tt.args, "--json", "-")...)
			require.Equal(t, exitOK, code, errs)
			checkSweepMatchesCompare(t, path, out, tt.differ)
		})
	}
}

// checkSweepMatchesCompare runs the sweep spec at path on one shard, merges
// it, and checks its figures against compare's JSON.
func checkSweepMatchesCompare(t *testing.T, path, compareJSON string, differ bool) {
	t.Helper()
	type stat struct {
		N      int       `json:"n"`
		Mean   float64   `json:"mean"`
		Values []float64 `json:"values"`
	}
	var cmp struct {
		Policies []string                              `json:"policies"`
		Seeds    []uint64                              `json:"seeds"`
		Classes  map[string]map[string]map[string]stat `json:"classes"`
		Fleet    map[string]map[string]stat            `json:"fleet"`
	}
	require.NoError(t, json.Unmarshal([]byte(compareJSON), &cmp))

	spec, err := sweep.Load(path)
	require.NoError(t, err)
	require.Equal(t, cmp.Seeds, spec.Seeds)
	sh, err := sweep.RunShard(t.Context(), spec, sweep.Options{Parallel: 2})
	require.NoError(t, err)
	rep, err := sweep.Merge([]*sweep.Shard{sh}, nil)
	require.NoError(t, err)

	// The figures both report: the sweep's name, compare's metric.
	type shared struct {
		name string
		cmp  map[string]stat // policy → statistics
	}
	var figs []shared
	require.NotEmpty(t, cmp.Classes)
	for class, metrics := range cmp.Classes {
		for _, m := range []string{"ttft_s.p99", "e2e_s.p99", "slo_attainment"} {
			figs = append(figs, shared{"classes." + class + "." + m, metrics[m]})
		}
	}
	figs = append(figs, shared{"cost.per_successful_task", cmp.Fleet["cost.per_successful_task"]})

	require.Len(t, rep.Aggregates, len(cmp.Policies))
	for pi, agg := range rep.Aggregates {
		policy := cmp.Policies[pi]
		require.Equal(t, policy, agg.Point)
		for _, f := range figs {
			want := f.cmp[policy]
			require.Equal(t, len(spec.Seeds), want.N, "compare has no %s for %s", f.name, policy)
			// Per seed: run pi*len(seeds)+si is the point's seed si.
			for si, seed := range spec.Seeds {
				r := rep.Results[pi*len(spec.Seeds)+si]
				require.Equal(t, policy, r.Point)
				require.Equal(t, seed, r.Seed)
				require.Equal(t, want.Values[si], figure(t, r.Figures, f.name), "%s, %s, seed %d", policy, f.name, seed)
			}
			var got *sweep.FigureStat
			for i := range agg.Figures {
				if agg.Figures[i].Name == f.name {
					got = &agg.Figures[i]
				}
			}
			require.NotNil(t, got, "sweep has no %s", f.name)
			require.Equal(t, len(spec.Seeds), got.N)
			require.InDelta(t, want.Mean, got.Mean, 1e-9, "%s: mean of %s", policy, f.name)
		}
	}
	if differ {
		// The policies differ somewhere, or the check proves little.
		same := true
		for _, f := range figs {
			if !slices.Equal(f.cmp[cmp.Policies[0]].Values, f.cmp[cmp.Policies[1]].Values) {
				same = false
			}
		}
		require.False(t, same, "%s and %s give the same figures", cmp.Policies[0], cmp.Policies[1])
	}
}

func figure(t *testing.T, figs []sweep.Figure, name string) float64 {
	t.Helper()
	for _, f := range figs {
		if f.Name == name {
			return f.Value
		}
	}
	t.Fatalf("no figure %s", name)
	return math.NaN()
}

// TestCompareEmitSweepScenarioPath: a scenario file is named relative to
// the spec's directory, wherever the spec goes, and a seed= set moves the
// listed seeds instead of staying among the sets.
func TestCompareEmitSweepScenarioPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "specs", "deep")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "sweep.yaml")
	code, _, errs := runCompare(t, smallScenario, "--policy", "wfq,edf", "--seeds", "2",
		"--set", "seed=100", "--set", "expect=[requests.rejected >= 0]", "--emit-sweep", path)
	require.Equal(t, exitOK, code, errs)

	spec, err := sweep.Load(path)
	require.NoError(t, err)
	require.False(t, filepath.IsAbs(spec.Scenario), "want a path relative to the spec: %s", spec.Scenario)
	abs, err := filepath.Abs(smallScenario)
	require.NoError(t, err)
	require.Equal(t, abs, filepath.Join(dir, spec.Scenario))
	want, err := os.ReadFile(smallScenario)
	require.NoError(t, err)
	require.Equal(t, want, spec.ScenarioData)
	require.Equal(t, []uint64{100, 101}, spec.Seeds)
	require.Equal(t, []string{"expect=[requests.rejected >= 0]"}, spec.Sets)

	// Moved with its directory, the spec still finds the scenario.
	moved := filepath.Join(t.TempDir(), "elsewhere")
	require.NoError(t, os.MkdirAll(moved, 0o755))
	copied := filepath.Join(moved, "scenario-no-ext")
	require.NoError(t, os.WriteFile(copied, want, 0o644))
	// A file whose relative path reads as a library name gets a ./.
	code, _, errs = runCompare(t, copied, "--policy", "fifo,wfq", "--seeds", "2", "--emit-sweep", filepath.Join(moved, "s.yaml"))
	require.Equal(t, exitOK, code, errs)
	spec, err = sweep.Load(filepath.Join(moved, "s.yaml"))
	require.NoError(t, err)
	require.Equal(t, "./scenario-no-ext", spec.Scenario)
	require.Equal(t, want, spec.ScenarioData)
}

// TestCompareEmitSweepInvalid: flags that mean nothing without runs are
// refused, and no file is written.
func TestCompareEmitSweepInvalid(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sweep.yaml")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"json", []string{"--json", filepath.Join(dir, "out.json")}, []string{"--json with --emit-sweep", "sweep merge DIR --json FILE"}},
		{"json stdout", []string{"--json", "-"}, []string{"--json with --emit-sweep"}},
		{"parallel", []string{"--parallel", "4"}, []string{"--parallel with --emit-sweep"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{smallScenario, "--policy", "fifo,wfq", "--emit-sweep", path}, tt.args...)
			code, out, errs := runCompare(t, args...)
			require.Equal(t, exitInvalid, code, errs)
			require.Empty(t, out)
			for _, w := range tt.want {
				require.Contains(t, errs, w)
			}
			require.NoFileExists(t, path)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, entries)
		})
	}
	code, _, errs := runCompare(t, smallScenario, "--policy", "fifo,wfq", "--emit-sweep", "-")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "--emit-sweep -: want a file")
}
