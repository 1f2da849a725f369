package calibrate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// trainVal is the sim-to-real study's train/validation split converted to
// benchmark experiment files (internal/benchmark's TestSimToRealTrainVal
// keeps them equal to ../shared).
const trainVal = "../benchmark/testdata/simtoreal"

func loadTrainVal(t *testing.T) []*BenchSetup {
	t.Helper()
	setups, err := LoadSetups(trainVal)
	require.NoError(t, err)
	require.Len(t, setups, 13)
	return setups
}

// TestBenchmarkFidelityRegression: the built-in Hopper coefficients on the
// experiments they were fitted on (in-sample, so this guards against
// regressions; docs/fidelity.md has the figures). Bounds are the fitted
// figures with a small margin.
func TestBenchmarkFidelityRegression(t *testing.T) {
	sc, err := ScoreBenchmarks(context.Background(), loadTrainVal(t), nil)
	require.NoError(t, err)
	bounds := map[string]float64{"e2e_mean": 0.045, "itl_mean": 0.062, "e2e_p99": 0.058, "ttft_mean": 0.13}
	for m, b := range bounds {
		s, ok := sc.SummaryOf(m)
		require.True(t, ok, m)
		require.Equal(t, 13, s.Experiments, m)
		require.LessOrEqual(t, s.MedianAbs, b, "%s median |error| over the train/val experiments", m)
	}
	require.Zero(t, sc.BackedUp, "the twin backs up on %v", sc.BackedUpNames)
}

// smallSetup is a short, light experiment: Llama-3.1-8B on one H100.
func smallSetup(t *testing.T, rate float64) *BenchSetup {
	t.Helper()
	g, err := latency.LookupGPU("H100")
	require.NoError(t, err)
	m, err := latency.LookupModel("llama-3.1-8b-instruct")
	require.NoError(t, err)
	return &BenchSetup{Name: "small", Placement: latency.Placement{GPU: g, Model: m, TP: 1}, MaxSeqs: 128,
		MaxBatchedTokens: 2048, KVTokens: 200_000, BlockSize: 16, PrefixCaching: true,
		Workload: BenchWorkload{Stages: []BenchStage{{Rate: rate, Duration: time.Minute}, {Rate: 2 * rate, Duration: time.Minute}},
			SystemLen: 100, QuestionLen: 400, OutputLen: 200, NumPrompts: 5, Seed: 7}}
}

// TestReplayAccountsForEveryRequest: every generated request finishes once,
// the stages partition them, and the same seed gives the same figures.
func TestReplayAccountsForEveryRequest(t *testing.T) {
	s := smallSetup(t, 4)
	c, _ := latency.CoeffsFor(s.Placement.GPU)
	p1, err := ReplayBenchmark(s, c)
	require.NoError(t, err)
	p2, err := ReplayBenchmark(s, c)
	require.NoError(t, err)
	require.Equal(t, p1, p2, "same experiment, same seed: same prediction")

	reqs := s.Workload.generate(16)
	require.Equal(t, len(reqs), p1.Requests)
	n := map[int]int{}
	for _, r := range reqs {
		n[r.stage]++
	}
	require.Equal(t, len(reqs), n[0]+n[1])
	// Poisson counts: 240 and 480 expected; far outside 5 sigma is a bug.
	require.InDelta(t, 240, n[0], 5*15.5)
	require.InDelta(t, 480, n[1], 5*22)
	require.Equal(t, p1.Counts["-1"], len(reqs))
	require.Equal(t, p1.Counts["0"], n[0])
	require.Equal(t, p1.Counts["1"], n[1])

	// Heavier load, longer latency.
	require.Greater(t, p1.Stages["1"]["e2e_mean"], p1.Stages["0"]["e2e_mean"])
	require.Greater(t, p1.Stages["1"]["itl_mean"], p1.Stages["0"]["itl_mean"])
	for _, st := range []string{"-1", "0", "1"} {
		m := p1.Stages[st]
		require.LessOrEqual(t, m["ttft_p90"], m["ttft_p99"]*1.0001)
		require.Less(t, m["ttft_mean"], m["e2e_mean"])
	}
}

// TestSharedPrefixBlocks: requests of one system prompt share its full
// blocks and nothing else.
func TestSharedPrefixBlocks(t *testing.T) {
	w := BenchWorkload{Stages: []BenchStage{{Rate: 50, Duration: 10 * time.Second}}, SystemLen: 100, QuestionLen: 60, OutputLen: 5, NumPrompts: 2, Seed: 1}
	reqs := w.generate(16)
	require.Greater(t, len(reqs), 100)
	a, b := reqs[0].seq.Blocks, reqs[1].seq.Blocks
	require.Len(t, a, 10) // 160 tokens / 16
	shared := 0
	for i := range a {
		if a[i] == b[i] {
			shared++
		}
	}
	require.True(t, shared == 0 || shared == 6, "a 100-token system prompt fills 6 blocks; got %d shared", shared)
	for _, r := range reqs {
		require.Equal(t, 160, r.seq.Prompt)
	}
}

// TestBackedUpIsDetected: far past the engine's capacity the queue grows
// to the end of the stage, and the score counts it against a measurement
// that kept up.
func TestBackedUpIsDetected(t *testing.T) {
	s := smallSetup(t, 60)
	s.Workload.Stages = s.Workload.Stages[:1]
	s.Measured = map[string]map[string]float64{"0": {"ttft_mean": 50, "e2e_mean": 3000}}
	sc, err := ScoreBenchmarks(context.Background(), []*BenchSetup{s}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"0"}, sc.Predictions[0].BackedUp)
	require.Equal(t, 1, sc.BackedUp)

	light := smallSetup(t, 1)
	light.Measured = s.Measured
	sc, err = ScoreBenchmarks(context.Background(), []*BenchSetup{light}, nil)
	require.NoError(t, err)
	require.Zero(t, sc.BackedUp)
}

// TestFitRecoversKnownCoefficients: experiments "measured" by replaying
// known coefficients are fitted back from a perturbed start.
func TestFitRecoversKnownCoefficients(t *testing.T) {
	truth, _ := latency.CoeffsFor(latency.GPU{Family: "hopper"})
	var setups []*BenchSetup
	for i, rate := range []float64{2, 6} {
		s := smallSetup(t, rate)
		s.Workload.Seed = uint64(i + 1)
		s.Workload.Stages = []BenchStage{{Rate: rate, Duration: 40 * time.Second}}
		p, err := ReplayBenchmark(s, truth)
		require.NoError(t, err)
		s.Measured = p.Stages
		setups = append(setups, s)
	}
	start := truth
	start.Weights *= 0.7
	start.Request *= 1.6
	got, loss, err := FitCoeffs(context.Background(), setups, start, []string{"weight_eff", "request_us"}, 200)
	require.NoError(t, err)
	require.Less(t, loss, 0.01)
	require.InEpsilon(t, truth.Weights, got.Weights, 0.05)
	require.InEpsilon(t, truth.Request, got.Request, 0.10)

	_, _, err = FitCoeffs(context.Background(), setups, start, []string{"no_such"}, 10)
	require.ErrorContains(t, err, `no coefficient "no_such"`)
}

// BenchmarkReplayTrainVal replays the 13 train/val experiments (74,246
// requests, 4.3 hours of load) with the physical model: one evaluation of
// the fit's objective.
func BenchmarkReplayTrainVal(b *testing.B) {
	setups, err := LoadSetups(trainVal)
	if err != nil {
		b.Fatal(err)
	}
	var reqs int
	for b.Loop() {
		preds, err := replayAll(context.Background(), setups, BuiltinCoeffs)
		if err != nil {
			b.Fatal(err)
		}
		reqs = 0
		for _, p := range preds {
			reqs += p.Requests
		}
	}
	b.ReportMetric(float64(reqs), "requests/op")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/float64(len(setups)), "ms/experiment")
}

// TestTokensPerChunkIsMeasured: latency.TokensPerStreamChunk's Llama-2
// figure is the one the train/val measurements give, (output − 1) ÷ the
// tokens the client counted, (E2E − TTFT) / ITL, on both Llama-2 runs; every
// other model's runs count what they generate (the factor is 1).
func TestTokensPerChunkIsMeasured(t *testing.T) {
	llama2 := 0
	for _, s := range loadTrainVal(t) {
		m := s.Measured["-1"]
		gaps := (m["e2e_mean"] - m["ttft_mean"]) / m["itl_mean"] // counted output − 1
		ratio := float64(s.Workload.OutputLen-1) / gaps
		want := latency.TokensPerStreamChunk(s.Placement.Model)
		require.InEpsilon(t, want, ratio, 0.02, "%s: generated / counted tokens", s.Name)
		if want != 1 {
			llama2++
		}
	}
	require.Equal(t, 2, llama2, "the two Llama-2 runs")
}
