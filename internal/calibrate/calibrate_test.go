package calibrate

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// fixture is a copy of shared/profiles/vllm_measured_llmservingsim/
// RTXPRO6000_Llama-3.1-8B (MIT, LLMServingSim), so these tests never
// depend on the shared folder.
const fixture = "testdata/RTXPRO6000_Llama-3.1-8B"

func TestLoadRun(t *testing.T) {
	run, err := LoadRun(fixture)
	require.NoError(t, err)
	require.Len(t, run.Requests, 300)
	require.Equal(t, Engine{Model: "meta-llama/Llama-3.1-8B", Version: "0.19.0", TP: 1, DP: 1, MaxSeqs: 128,
		MaxBatchedTokens: 2048, GPU: "RTXPRO6000"}, run.Engine)
	require.Zero(t, run.Requests[0].Arrived, "the clock starts at the first arrival")
	// README P4's figures for this run: TTFT p50 9,387.6 ms nearest-rank,
	// TPOT mean 32.46 ms.
	tpot := 0.0
	for _, r := range run.Requests {
		tpot += r.TPOT()
	}
	require.InDelta(t, 0.03246, tpot/300, 0.00005)
	require.NotEmpty(t, run.Series)
}

func TestLoadRunErrorsNameTheLine(t *testing.T) {
	dir := t.TempDir()
	meta, err := os.ReadFile(filepath.Join(fixture, "meta.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta.json"), meta, 0o644))
	write := func(s string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "requests.jsonl"), []byte(s), 0o644))
	}
	ok := `{"request_id":"a","input_toks":10,"output_toks":5,"arrival_time":1,"queued_ts":1,"scheduled_ts":1.1,"first_token_ts":1.2,"last_token_ts":2}` + "\n"

	write(ok + `{"request_id":"b","input_toks":10,"output_toks":5,"queued_ts":3,"scheduled_ts":2,"first_token_ts":4,"last_token_ts":5}` + "\n")
	_, err = LoadRun(dir)
	require.ErrorContains(t, err, "requests.jsonl:2: times out of order")

	write(ok + `{"request_id":"c","input_toks":10}` + "\n")
	_, err = LoadRun(dir)
	require.ErrorContains(t, err, "requests.jsonl:2: want input_toks, output_toks")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta.json"), []byte(`{"engine_kwargs":{"max_num_seqs":0}}`), 0o644))
	_, err = LoadRun(dir)
	require.ErrorContains(t, err, "engine_kwargs.max_num_seqs: got 0, want >= 1")
}

func TestLoadRequestsCSVAndJSONL(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "log.csv")
	require.NoError(t, os.WriteFile(csvPath, []byte("arrival,input_tokens,output_tokens,ttft,e2e,queue_wait\n"+
		"10,100,20,0.5,2.0,0.1\n11,200,30,0.6,3.0,\n"), 0o644))
	run, err := LoadRequests(csvPath, Engine{GPU: "RTX4090"})
	require.NoError(t, err)
	require.Len(t, run.Requests, 2)
	r := run.Requests[0]
	require.Equal(t, [3]int{100, 20, 0}, [3]int{r.Input, r.Output, int(r.Arrived)})
	require.InDelta(t, 0.1, r.Scheduled, 1e-9)
	require.InDelta(t, 0.5, r.First, 1e-9)
	require.InDelta(t, 2.0, r.Last, 1e-9)
	require.InDelta(t, 1.0, run.Requests[1].Scheduled, 1e-9, "no queue_wait: scheduled on arrival")

	jsonPath := filepath.Join(dir, "log.jsonl")
	require.NoError(t, os.WriteFile(jsonPath, []byte(`{"arrival":5,"input_tokens":10,"output_tokens":3,"ttft":"x","e2e":1}`+"\n"), 0o644))
	_, err = LoadRequests(jsonPath, Engine{})
	require.ErrorContains(t, err, "log.jsonl:1: ttft: got x, want a number")
}

// synthesize produces a run from the twin itself with a known profile: the
// fit must recover a profile that replays it faithfully.
func synthesize(t *testing.T, truth latency.Profile) *Run {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	run := &Run{Name: "synthetic", Engine: Engine{Model: "meta-llama/Llama-3.1-8B", GPU: "RTXPRO6000", TP: 1, DP: 1,
		MaxSeqs: 64, MaxBatchedTokens: 2048}}
	at := 0.0
	for range 300 {
		at += rng.ExpFloat64() / 8 // 8 req/s: a busy engine, as in the measured runs
		run.Requests = append(run.Requests, Request{Input: 200 + rng.IntN(2500), Output: 50 + rng.IntN(700), Arrived: at})
	}
	sim, err := newSimulator(run)
	require.NoError(t, err)
	defer sim.close()
	truth.MaxBatchedTokens = 2048
	logs, _, err := sim.replay(context.Background(), truth, false)
	require.NoError(t, err)
	for i, l := range logs {
		r := &run.Requests[i]
		r.Scheduled, r.First, r.Last = l.Scheduled.Seconds(), l.FirstToken.Seconds(), l.Done.Seconds()
	}
	return run
}

func TestFitRecoversAKnownProfile(t *testing.T) {
	truth := latency.Profile{StepBase: 15000, PerSeq: 60, PerPrefillToken: 12, PerKVToken: 0.02}
	run := synthesize(t, truth)
	fit, err := FitProfile(run)
	require.NoError(t, err)
	refined, _, err := Refine(context.Background(), run, fit.Profile, 150)
	require.NoError(t, err)
	fid, err := Replay(context.Background(), run, refined)
	require.NoError(t, err)
	require.Less(t, fid.MaxE2EError(), 0.05, "a profile fitted to the twin's own output replays it")
	require.Less(t, math.Abs(*fid.Metrics["tpot"].RelErr.P50), 0.05)
	// Coefficients trade off against each other where the workload does
	// not separate them (a steady batch confounds base and per-sequence
	// cost), so compare step times where this workload runs: a decode step
	// of the batch it kept, and a step with a full prefill chunk.
	for _, p := range []*latency.Profile{&fit.Profile, &refined} {
		for _, at := range []struct{ b, pre int }{{24, 0}, {24, 2048}} {
			k := int64(at.b * 1500)
			require.InEpsilon(t, truth.Step(at.b, at.pre, k), p.Step(at.b, at.pre, k), 0.25,
				"step(B=%d, P=%d): truth %+v, fitted %+v", at.b, at.pre, truth, *p)
		}
	}
}

func TestReplayComparesEveryMetric(t *testing.T) {
	run, err := LoadRun(fixture)
	require.NoError(t, err)
	// A profile twice too slow must show up as large positive errors.
	slow := latency.Profile{StepBase: 50000, PerSeq: 140, PerPrefillToken: 16, MaxBatchedTokens: 2048}
	fid, err := Replay(context.Background(), run, slow)
	require.NoError(t, err)
	for _, m := range []string{"ttft", "tpot", "e2e", "queue_wait"} {
		require.Contains(t, fid.Metrics, m)
	}
	require.Greater(t, *fid.Metrics["tpot"].RelErr.P50, 0.5)
	require.Greater(t, fid.MaxE2EError(), 0.3)
	meas, pred := fid.Samples("e2e")
	require.Len(t, meas, 300)
	require.Len(t, pred, 300)
	require.NotEmpty(t, fid.Series)
}

func TestPlotWritesPNGAndSVG(t *testing.T) {
	run, err := LoadRun(fixture)
	require.NoError(t, err)
	fid, err := Replay(context.Background(), run, latency.Profile{StepBase: 24000, PerSeq: 70, PerPrefillToken: 8, MaxBatchedTokens: 2048})
	require.NoError(t, err)
	dir := t.TempDir()
	for _, name := range []string{"f.png", "f.svg"} {
		require.NoError(t, Plot(filepath.Join(dir, name), fid))
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Greater(t, fi.Size(), int64(10_000))
	}
	require.ErrorContains(t, Plot(filepath.Join(dir, "f.pdf"), fid), "want a .png or .svg")
}

func TestTransferFollowsTheRoofline(t *testing.T) {
	pro8b, err := Resolve(Engine{GPU: "RTXPRO6000", Model: "meta-llama/Llama-3.1-8B", TP: 1, DP: 1})
	require.NoError(t, err)
	g4090, err := Resolve(Engine{GPU: "RTX4090", Model: "meta-llama/Llama-3.1-8B", TP: 1, DP: 1})
	require.NoError(t, err)
	q32, err := Resolve(Engine{GPU: "RTXPRO6000", Model: "Qwen/Qwen3-32B", TP: 2, DP: 1})
	require.NoError(t, err)
	cal := latency.Profile{StepBase: 20000, PerSeq: 50, PerPrefillToken: 8, PerKVToken: 0.1}
	same := Transfer(cal, pro8b, pro8b)
	require.InDelta(t, cal.StepBase, same.StepBase, 1e-6, "no move, no change")
	require.InDelta(t, cal.PerPrefillToken, same.PerPrefillToken, 1e-9)

	slower := Transfer(cal, pro8b, g4090)
	// Same overhead, the weights but the input embedding (8.03B − 0.53B
	// parameters, BF16) read at 1008 instead of 1792 GB/s.
	total, _ := pro8b.Model.Params()
	streamed := (total - 128256*4096) * 2
	read := func(bw float64) float64 { return streamed / (bw * 1e3) }
	require.InDelta(t, cal.StepBase-read(1792)+read(1008), slower.StepBase, 1e-6)
	// Prefill at the throughput the GEMMs sustain, not the spec ratio.
	require.InDelta(t, cal.PerPrefillToken*335.3/158.8, slower.PerPrefillToken, 1e-9)
	require.InDelta(t, cal.PerKVToken*1792/1008, slower.PerKVToken, 1e-9)
	require.InDelta(t, cal.PerSeq, slower.PerSeq, 1e-9, "per-sequence cost is host work: same on any device")

	bigger := Transfer(cal, pro8b, q32)
	require.Greater(t, bigger.StepBase, cal.StepBase)
	require.InDelta(t, cal.PerSeq*64/32, bigger.PerSeq, 1e-9)
	// KV heads split over TP2: 64 layers × 8 heads × 128 × 2 × 2 bytes / 2
	// per GPU, against 32 × 8 × 128 × 2 × 2 on one.
	require.InDelta(t, cal.PerKVToken, bigger.PerKVToken, 1e-9)
	require.Contains(t, bigger.Source, "RTXPRO6000/Llama-3.1-8B to RTXPRO6000/Qwen3-32B")
}

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Engine
		gpu  string // canonical; "" with err
		// Model shape found, and layout.
		layers, tp, ep int
		err            []string // substrings of the error
	}{
		{name: "measured run", e: Engine{GPU: "RTX4090", Model: "meta-llama/Llama-3.1-8B", TP: 1, DP: 1}, gpu: "RTX4090", layers: 32, tp: 1, ep: 1},
		{name: "H100 70B TP4", e: Engine{GPU: "H100", Model: "meta-llama/Llama-3.1-70B-Instruct", TP: 4, DP: 1}, gpu: "H100-SXM", layers: 80, tp: 4, ep: 1},
		{name: "MoE shards experts over DP", e: Engine{GPU: "RTXPRO6000", Model: "Qwen/Qwen3-30B-A3B-Instruct-2507", TP: 1, DP: 2}, gpu: "RTXPRO6000", layers: 48, tp: 1, ep: 2},
		{name: "dense DP keeps every weight", e: Engine{GPU: "A100-80GB", Model: "Qwen/Qwen3-32B", TP: 2, DP: 4}, gpu: "A100-SXM-80GB", layers: 64, tp: 2, ep: 1},
		{name: "TP 0 is 1", e: Engine{GPU: "L40S", Model: "qwen3-14b"}, gpu: "L40S", layers: 40, tp: 1, ep: 1},
		{name: "unknown GPU", e: Engine{GPU: "TPUv5", Model: "meta-llama/Llama-3.1-8B"},
			err: []string{`calibrate: unknown GPU "TPUv5"`, "H100-SXM", "RTX4090", "RTXPRO6000", "latency.GPUs"}},
		{name: "unknown model", e: Engine{GPU: "H100", Model: "org/Not-Shipped-7B"},
			err: []string{`calibrate: unknown model "org/Not-Shipped-7B"`, "llama-3.1-8b-instruct", "config.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Resolve(tc.e)
			if tc.err != nil {
				require.Error(t, err)
				for _, w := range tc.err {
					require.ErrorContains(t, err, w)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.gpu, p.GPU.Name)
			require.Equal(t, tc.layers, p.Model.Layers)
			require.Equal(t, []int{tc.tp, tc.ep}, []int{p.TP, p.EP})
			require.Positive(t, p.KVTokens())
		})
	}
}

func TestResolveH100Llama70B(t *testing.T) {
	p, err := Resolve(Engine{GPU: "H100", Model: "meta-llama/Llama-3.1-70B-Instruct", TP: 4, DP: 1})
	require.NoError(t, err)
	require.Equal(t, "Llama-3.1-70B-Instruct", p.Model.Name, "named as the run names it")
	// Per GPU: the 81,559 MiB the driver reports × 0.9 − 1.24·10⁹ reserve
	// − 70.55B × 2 / 4 of weights leaves 40.4·10⁹ bytes, at 80 layers × 2
	// heads × 128 × 2 × 2 bytes a token: about 493,000 tokens a replica,
	// 2 % above the 484,016 vLLM 0.15.1 reported for this placement (the
	// sim-to-real study's experiment 60: 30,251 blocks of 16).
	require.InEpsilon(t, 484_016, p.KVTokens(), 0.025)
	from, err := Resolve(Engine{GPU: "RTXPRO6000", Model: "meta-llama/Llama-3.1-8B", TP: 1, DP: 1})
	require.NoError(t, err)
	prof := Transfer(latency.Profile{StepBase: 12600, PerSeq: 60, PerPrefillToken: 39, PerKVToken: 0.06}, from, p)
	// 35 GB per GPU at 3.35 TB/s: a base above 10 ms; prefill per token
	// 68.45B/4 of matmul parameters against 6.98B, at the 745.6 TFLOP/s an
	// H100 sustains against the PRO 6000's 335.3.
	require.Greater(t, prof.StepBase, 10000.0)
	require.InEpsilon(t, 39*(68.45/4/6.98)*335.3/745.6, prof.PerPrefillToken, 0.01)
	require.False(t, from.Equal(p))
	again, err := Resolve(Engine{GPU: "H100-SXM", Model: "meta-llama/Llama-3.1-70B-Instruct", TP: 4, DP: 1})
	require.NoError(t, err)
	require.True(t, p.Equal(again), "aliases resolve to one placement")
}

func TestKVCapacityFromMemoryMatchesTheMeasuredRun(t *testing.T) {
	// The activation reserve was derived from the RTX 4090 run: the
	// estimate must reproduce its recorded 41,408 tokens closely.
	p, err := Resolve(Engine{GPU: "RTX4090", Model: "meta-llama/Llama-3.1-8B", TP: 1, DP: 1})
	require.NoError(t, err)
	require.InEpsilon(t, 41408, p.KVTokens(), 0.01)
}

func TestScenarioName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Llama-3.1-8B", "Llama-3.1-8B"},
		{"meta-llama/Llama-2-70b-hf", "Llama-2-70b-hf"},
		{`C:\models\my model`, "my-model"},
		{"_x", "m-x"},
		{"", "m"},
	} {
		require.Equal(t, tc.want, scenarioName(tc.in), "scenarioName(%q)", tc.in)
	}
}

func TestProfileFileRoundTrips(t *testing.T) {
	pf := &ProfileFile{Profile: ProfileYAML(latency.Profile{StepBase: 1234.5, PerSeq: 6, PerPrefillToken: 7, PerKVToken: 0.01, MaxBatchedTokens: 2048}),
		CalibratedOn: Calibration{Run: "r", GPU: "RTX4090", Model: "meta-llama/Llama-3.1-8B", TP: 1, DP: 1, MaxSeqs: 256, Vllm: "0.19.0"},
		Fit:          FitSummary{Method: "m", DecodeIntervals: 3}}
	path := filepath.Join(t.TempDir(), "p.yaml")
	require.NoError(t, WriteProfileFile(path, pf))
	got, err := ReadProfileFile(path)
	require.NoError(t, err)
	require.Equal(t, pf, got)
	require.NoError(t, os.WriteFile(path, []byte("profile: {step_base_us: 1, bogus: 2}\n"), 0o644))
	_, err = ReadProfileFile(path)
	require.ErrorContains(t, err, "bogus")
}

// shared returns a run of ../shared, skipping without it.
func shared(t *testing.T, name string) *Run {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "profiles", "vllm_measured_llmservingsim", name)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("%s not found: the shared profiles are not beside this checkout", dir)
	}
	run, err := LoadRun(dir)
	require.NoError(t, err)
	return run
}

// TestFidelityRegression pins the fidelity published in docs/fidelity.md,
// recomputed from the runs: in-sample (each run calibrated on itself) and
// out-of-sample (calibrated on RTXPRO6000 Llama-3.1-8B, transferred). The
// bounds are today's figures plus a small margin: a change that makes the
// twin less faithful fails here.
func TestFidelityRegression(t *testing.T) {
	ctx := context.Background()
	calibrated := func(run *Run) latency.Profile {
		fit, err := FitProfile(run)
		require.NoError(t, err)
		p, _, err := Refine(ctx, run, fit.Profile, 150)
		require.NoError(t, err)
		return p
	}
	inSample := map[string]float64{ // max |error| of end-to-end p50 and p95; today 2.0, 4.1, 2.0, 2.0 %
		"RTXPRO6000_Llama-3.1-8B":                0.04,
		"RTX4090_Llama-3.1-8B":                   0.06,
		"RTXPRO6000_Qwen3-32B":                   0.04,
		"RTXPRO6000_Qwen3-30B-A3B-Instruct-2507": 0.04,
	}
	for name, bound := range inSample {
		t.Run("in-sample/"+name, func(t *testing.T) {
			run := shared(t, name)
			fid, err := Replay(ctx, run, calibrated(run))
			require.NoError(t, err)
			require.LessOrEqual(t, fid.MaxE2EError(), bound)
		})
	}
	outOfSample := map[string]float64{ // today 6.2, 38.1, 25.9 %: see docs/fidelity.md for why
		"RTX4090_Llama-3.1-8B":                   0.08,
		"RTXPRO6000_Qwen3-32B":                   0.40,
		"RTXPRO6000_Qwen3-30B-A3B-Instruct-2507": 0.28,
	}
	cal := shared(t, "RTXPRO6000_Llama-3.1-8B")
	prof := calibrated(cal)
	from, err := Resolve(cal.Engine)
	require.NoError(t, err)
	for name, bound := range outOfSample {
		t.Run("out-of-sample/"+name, func(t *testing.T) {
			run := shared(t, name)
			to, err := Resolve(run.Engine)
			require.NoError(t, err)
			p := Transfer(prof, from, to)
			p.MaxBatchedTokens, p.KVTokens = run.Engine.MaxBatchedTokens, run.Engine.KVTokens
			fid, err := Replay(ctx, run, p)
			require.NoError(t, err)
			require.LessOrEqual(t, fid.MaxE2EError(), bound)
		})
	}
}
