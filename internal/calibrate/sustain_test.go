package calibrate

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// sustainable is smallSetup's sustainable rate with its family's built-in
// coefficients, after change edits the setup.
func sustainable(t *testing.T, change func(*BenchSetup)) (*BenchSetup, Sustainable) {
	t.Helper()
	s := smallSetup(t, 4)
	if change != nil {
		change(s)
	}
	r, err := SustainableRate(s, BuiltinCoeffs(s))
	require.NoError(t, err)
	return s, r
}

// TestSustainableRateBrackets: the factor found is bounded, and a load
// well above it backs up in a full replay (the figures' replay, not the
// search's early exit); the same search twice gives the same answer.
func TestSustainableRateBrackets(t *testing.T) {
	s, r := sustainable(t, nil)
	require.False(t, r.AtLeast || r.Below, "%+v", r)
	require.Greater(t, r.Factor, 1.0, "8 req/s is well within one H100's capacity for Llama-3.1-8B")
	require.Equal(t, 8.0, r.Offered)
	require.InDelta(t, r.Factor*r.Offered, r.Rate, 1e-9)
	require.LessOrEqual(t, r.Replays, 10)

	c := BuiltinCoeffs(s)
	p, err := ReplayBenchmark(scaleRates(s, r.Factor), c)
	require.NoError(t, err)
	require.Empty(t, p.BackedUp, "at the sustainable rate")
	p, err = ReplayBenchmark(scaleRates(s, 1.5*r.Factor), c)
	require.NoError(t, err)
	require.NotEmpty(t, p.BackedUp, "at 1.5 × the sustainable rate")

	_, again := sustainable(t, nil)
	require.Equal(t, r, again, "deterministic")
}

// TestSustainableRateMoves: more room (KV and batch) does not lower the
// sustainable rate; longer outputs and a bigger model lower it.
func TestSustainableRateMoves(t *testing.T) {
	_, base := sustainable(t, nil)
	_, roomy := sustainable(t, func(s *BenchSetup) { s.KVTokens *= 2; s.MaxSeqs *= 2 })
	_, longer := sustainable(t, func(s *BenchSetup) { s.Workload.OutputLen *= 2 })
	_, bigger := sustainable(t, func(s *BenchSetup) {
		m, err := latency.LookupModel("qwen3-14b")
		require.NoError(t, err)
		s.Placement.Model = m
		require.NoError(t, s.Placement.Normalize())
	})
	require.GreaterOrEqual(t, roomy.Rate, base.Rate, "twice the KV and max_num_seqs")
	require.Less(t, longer.Rate, base.Rate, "twice the output")
	require.Less(t, bigger.Rate, base.Rate, "a 14B model instead of an 8B")
}

// TestSustainableRateBelowOffered: an experiment whose first stage runs
// at 1.3 times the twin's capacity gets a factor below 1, a sustainable
// rate below that stage's, and counts as a collapse since the engine kept
// up with that stage (though not with the second).
func TestSustainableRateBelowOffered(t *testing.T) {
	_, base := sustainable(t, nil)
	s := smallSetup(t, 1.3*base.Rate)
	s.Measured = map[string]map[string]float64{"0": {"ttft_mean": 50, "e2e_mean": 3000}, "1": {"ttft_mean": 9000, "e2e_mean": 20000}}
	sc, err := ScoreBenchmarks(context.Background(), []*BenchSetup{s}, nil)
	require.NoError(t, err)
	require.NoError(t, sc.AddSustainable(context.Background(), []*BenchSetup{s}, false))
	require.Len(t, sc.Sustainable, 1)
	b := sc.Sustainable[0]
	require.Less(t, b.Headroom, 1.0)
	require.Less(t, b.Sustainable, s.Workload.Stages[0].Rate)
	require.False(t, b.MeasuredKeptUp, "stage 1's TTFT is 9 s")
	require.True(t, b.Collapses)
	require.Equal(t, []string{"small"}, sc.Collapsed())

	light := smallSetup(t, 1)
	sc, err = ScoreBenchmarks(context.Background(), []*BenchSetup{light}, nil)
	require.NoError(t, err)
	require.NoError(t, sc.AddSustainable(context.Background(), []*BenchSetup{light}, false))
	require.Empty(t, sc.Sustainable, "bounded at its own load: not searched without all")
	require.Empty(t, sc.Collapsed())
}
