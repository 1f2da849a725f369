package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
