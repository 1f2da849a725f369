package calibrate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
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

// TestBenchmarkFidelityRegression: the built-in engine coefficients on the
// experiments they were fitted on (in-sample, so this guards against
// regressions; docs/fidelity.md has the figures), and the leave-one-model-
// out cross-validation: each held-out model replayed with the coefficients
// its fold fitted without it (testdata/cv-model-folds.json, written by the
// command in docs/fidelity.md), so a change to the model that loses what
// the folds generalised fails here without refitting six folds. Bounds are
// the measured figures with a small margin.
func TestBenchmarkFidelityRegression(t *testing.T) {
	sc, err := ScoreBenchmarks(context.Background(), loadTrainVal(t), nil)
	require.NoError(t, err)
	requireWithin(t, "in-sample", &sc.BenchFigures,
		map[string]float64{"e2e_mean": 0.066, "itl_mean": 0.097, "e2e_p99": 0.116, "ttft_mean": 0.148})
	cv := crossValidatedFromFolds(t, "testdata/cv-model-folds.json")
	requireWithin(t, "cross-validated (leave one model out)", &cv,
		map[string]float64{"e2e_mean": 0.082, "itl_mean": 0.111, "e2e_p99": 0.128, "ttft_mean": 0.22})
}

// requireWithin fails unless every metric's median |error| over the 13
// experiments is within its bound and none backs up.
func requireWithin(t *testing.T, what string, f *BenchFigures, bounds map[string]float64) {
	t.Helper()
	for m, b := range bounds {
		s, ok := f.SummaryOf(m)
		require.True(t, ok, m)
		require.Equal(t, 13, s.Experiments, m)
		require.LessOrEqual(t, s.MedianAbs, b, "%s: %s median |error| over the train/val experiments", what, m)
	}
	require.Zero(t, f.BackedUp, "%s: the twin backs up on %v", what, f.BackedUpNames)
}

// crossValidatedFromFolds scores every train/val experiment with the
// coefficients of the fold that held it out.
func crossValidatedFromFolds(t *testing.T, path string) BenchFigures {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var res CVResult
	require.NoError(t, json.Unmarshal(b, &res))
	setups := loadTrainVal(t)
	fold := map[string]latency.Coeffs{}
	for _, f := range res.Folds {
		for _, name := range f.HeldOut {
			fold[name] = f.Coeffs
		}
	}
	for _, s := range setups {
		require.Contains(t, fold, s.Name, "no fold holds out %s: rerun the cross-validation", s.Name)
	}
	preds, err := replayAll(context.Background(), setups, func(s *BenchSetup) latency.Coeffs { return fold[s.Name] })
	require.NoError(t, err)
	return benchFigures(setups, preds)
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
	setups := measuredBy(t, truth, 40*time.Second, 2, 6)
	start := truth
	start.Step *= 0.7
	start.Request *= 1.6
	got, loss, err := FitCoeffs(context.Background(), setups, start, []string{"step_us", "request_us"}, 200)
	require.NoError(t, err)
	require.Less(t, loss, 0.01)
	require.InEpsilon(t, truth.Step, got.Step, 0.05)
	require.InEpsilon(t, truth.Request, got.Request, 0.10)

	_, _, err = FitCoeffs(context.Background(), setups, start, []string{"no_such"}, 10)
	require.ErrorContains(t, err, `no coefficient "no_such"`)
}

// measuredBy makes one small experiment per rate, one stage of d each,
// "measured" by replaying coefficients truth: a fit must find them again.
func measuredBy(t *testing.T, truth latency.Coeffs, d time.Duration, rates ...float64) []*BenchSetup {
	t.Helper()
	var setups []*BenchSetup
	for i, rate := range rates {
		s := smallSetup(t, rate)
		s.Name = fmt.Sprintf("small-%d", i)
		s.Workload.Seed = uint64(i + 1)
		s.Workload.Stages = []BenchStage{{Rate: rate, Duration: d}}
		p, err := ReplayBenchmark(s, truth)
		require.NoError(t, err)
		s.Measured = p.Stages
		setups = append(setups, s)
	}
	return setups
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

// TestLlama2CountsFewerTokens records the observation the removed Llama-2
// token-counting correction rested on, so that it is not forgotten: on
// both Llama-2 runs the client's (E2E − TTFT) / ITL is about 0.78 of the
// requested output, where every other model's runs give 0.98–1.01. The
// twin does not correct for it (no independent measurement of the
// mechanism: docs/fidelity.md); this test fails if the data say otherwise.
func TestLlama2CountsFewerTokens(t *testing.T) {
	for _, s := range loadTrainVal(t) {
		m := s.Measured["-1"]
		counted := (m["e2e_mean"]-m["ttft_mean"])/m["itl_mean"] + 1
		ratio := counted / float64(s.Workload.OutputLen)
		llama2 := strings.HasPrefix(s.Placement.Model.Name, "llama-2")
		if llama2 {
			require.InDelta(t, 0.78, ratio, 0.02, "%s", s.Name)
		} else {
			require.InDelta(t, 1, ratio, 0.025, "%s", s.Name)
		}
	}
}
