package compare

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// smallLoader parses testdata/small.yaml afresh for each run, as the
// command does, counting the calls.
func smallLoader(t *testing.T, calls *atomic.Int64, sets ...string) Loader {
	t.Helper()
	data, err := os.ReadFile("testdata/small.yaml")
	require.NoError(t, err)
	return func(policy string, seed uint64) (*scenarios.Scenario, error) {
		if calls != nil {
			calls.Add(1)
		}
		all := append(append([]string{}, sets...), "policy.scheduler="+policy, "seed="+strconv.FormatUint(seed, 10))
		return scenarios.ParseWithSets("small.yaml", data, all)
	}
}

func TestRunSmall(t *testing.T) {
	var calls atomic.Int64
	res, err := Run(t.Context(), smallLoader(t, &calls), Config{
		Scenario: "small", Policies: []string{"fifo", "priority"}, FirstSeed: 42, Seeds: 6, Parallel: 2,
	})
	require.NoError(t, err)
	require.Equal(t, int64(12), calls.Load(), "loader calls: want one fresh scenario per run")
	require.Equal(t, []uint64{42, 43, 44, 45, 46, 47}, res.Seeds)
	require.Equal(t, []string{"fifo", "priority"}, res.Policies)

	var names []string
	for _, g := range res.Groups {
		names = append(names, g.Name)
	}
	require.Equal(t, []string{"interactive", "batch", "fleet"}, names, "groups: the scenario's classes in order, then fleet")

	wait := metric(t, res, "interactive", "queue_wait_s.p99")
	require.Len(t, wait.Policies, 2)
	require.Nil(t, wait.Policies[0].VsBaseline, "the baseline is not tested against itself")
	fifo, prio := wait.Policies[0], wait.Policies[1]
	require.Len(t, fifo.Values, 6)
	require.NotNil(t, prio.VsBaseline)
	require.Less(t, prio.Mean, fifo.Mean, "priority's interactive queue-wait p99 should be below fifo's")
	require.True(t, prio.VsBaseline.Significant(), "paired p = %g", prio.VsBaseline.P())

	// Nothing is rejected in small.yaml: zero variance on both sides, p = 1.
	rej := metric(t, res, "fleet", "rejection_rate")
	require.Equal(t, 0.0, rej.Policies[1].Mean)
	require.Equal(t, 1.0, rej.Policies[1].VsBaseline.P())
	require.False(t, rej.Policies[1].VsBaseline.Significant())
}

func metric(t *testing.T, r *Result, group, name string) Metric {
	t.Helper()
	for _, g := range r.Groups {
		if g.Name != group {
			continue
		}
		for _, m := range g.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	t.Fatalf("no metric %s in group %s", name, group)
	return Metric{}
}

// TestRunDeterministic: the worker count and so the completion order change
// nothing but the run section.
func TestRunDeterministic(t *testing.T) {
	render := func(parallel int) (text, js string) {
		res, err := Run(t.Context(), smallLoader(t, nil), Config{
			Scenario: "small", Policies: []string{"fifo", "priority", "wfq"}, FirstSeed: 7, Seeds: 4, Parallel: parallel,
		})
		require.NoError(t, err)
		require.Equal(t, parallel, res.Run.Parallel)
		res.Run = RunInfo{}
		var tb, jb bytes.Buffer
		require.NoError(t, WriteText(&tb, res))
		require.NoError(t, WriteJSON(&jb, res))
		return tb.String(), jb.String()
	}
	t1, j1 := render(1)
	t3, j3 := render(3)
	require.Equal(t, t1, t3, "text output with 1 and 3 workers")
	require.Equal(t, j1, j3, "JSON output with 1 and 3 workers")
}

func TestRunLoaderError(t *testing.T) {
	boom := errors.New("boom")
	load := smallLoader(t, nil)
	_, err := Run(t.Context(), func(policy string, seed uint64) (*scenarios.Scenario, error) {
		if policy == "priority" && seed == 11 {
			return nil, boom
		}
		return load(policy, seed)
	}, Config{Policies: []string{"fifo", "priority"}, FirstSeed: 10, Seeds: 3, Parallel: 2})
	var re *RunError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "priority", re.Policy)
	require.Equal(t, uint64(11), re.Seed)
	require.ErrorIs(t, err, boom)
	require.EqualError(t, err, "policy priority, seed 11: boom")
}

func TestRunChecksLoader(t *testing.T) {
	load := smallLoader(t, nil)
	// A loader that forgets the policy would compare a scenario with
	// itself.
	_, err := Run(t.Context(), func(_ string, seed uint64) (*scenarios.Scenario, error) {
		return load("fifo", seed)
	}, Config{Policies: []string{"fifo", "wfq"}, FirstSeed: 1, Seeds: 2, Parallel: 1})
	require.ErrorContains(t, err, `the loader returned a scenario with scheduler "fifo" and seed 1; want "wfq" and 1`)
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int64
	load := smallLoader(t, nil)
	_, err := Run(ctx, func(policy string, seed uint64) (*scenarios.Scenario, error) {
		if calls.Add(1) == 2 {
			cancel()
		}
		return load(policy, seed)
	}, Config{Policies: []string{"fifo", "priority"}, FirstSeed: 1, Seeds: 50, Parallel: 1})
	require.ErrorIs(t, err, context.Canceled)
	require.Less(t, calls.Load(), int64(5), "workers should stop soon after cancellation, not run all 100")
}

func TestRunConfigErrors(t *testing.T) {
	_, err := Run(t.Context(), smallLoader(t, nil), Config{Policies: []string{"fifo", "fifo"}, Seeds: 0})
	require.ErrorContains(t, err, `policy "fifo" given twice`)
	require.ErrorContains(t, err, "seeds: got 0, want >= 1")
	_, err = Run(t.Context(), smallLoader(t, nil), Config{Seeds: 2})
	require.ErrorContains(t, err, "no policies")
}

func TestRunOneSeed(t *testing.T) {
	res, err := Run(t.Context(), smallLoader(t, nil), Config{
		Scenario: "small", Policies: []string{"fifo", "priority"}, FirstSeed: 42, Seeds: 1,
	})
	require.NoError(t, err)
	for _, g := range res.Groups {
		for _, m := range g.Metrics {
			for _, ps := range m.Policies {
				require.Nil(t, ps.VsBaseline, "%s %s: no test with one seed", g.Name, m.Name)
			}
		}
	}
	var tb, jb bytes.Buffer
	require.NoError(t, WriteText(&tb, res))
	require.Contains(t, tb.String(), "± n/a")
	require.Contains(t, tb.String(), "the confidence interval (n/a) and the tests need at least 2 seeds")
	require.NotContains(t, tb.String(), "*")
	require.NoError(t, WriteJSON(&jb, res))
	require.Contains(t, jb.String(), `"ci95": null`)
}
