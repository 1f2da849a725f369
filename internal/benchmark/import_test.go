package benchmark

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// baseExperiment is an experiment with no figures yet, run at the given
// stage rates.
func baseExperiment(arrivals string, rates ...float64) *Experiment {
	e := &Experiment{Name: "base", GPU: "H100", TensorParallel: 1, DP: 1,
		ModelConfig: "model_configs/qwen2.5-7b-instruct.json", Precision: PrecisionBF16,
		Engine: Engine{MaxNumSeqs: 128, MaxNumBatchedTokens: 2048, MaxModelLen: 4096, BlockSize: 16, PrefixCaching: true},
		Workload: Workload{Arrivals: arrivals,
			SharedPrefix: SharedPrefix{SystemPromptLen: 100, QuestionLen: 447, OutputLen: 248, NumUniqueSystemPrompts: 9}},
	}
	for _, r := range rates {
		e.Workload.Stages = append(e.Workload.Stages, Stage{Rate: r, DurationS: 40})
	}
	return e
}

// withFile writes a variant of a fixture, edited by replacing text, under
// the given name in a temporary directory.
func withFile(t *testing.T, fixture, name string, replace ...string) string {
	t.Helper()
	text := string(readFixture(t, fixture))
	for i := 0; i+1 < len(replace); i += 2 {
		require.Contains(t, text, replace[i])
		text = strings.Replace(text, replace[i], replace[i+1], 1)
	}
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

func TestImport(t *testing.T) {
	for _, tt := range []struct {
		name   string
		kind   string
		path   func(t *testing.T) string
		base   *Experiment
		stages []int
		want   string // error text; empty for success
	}{
		{name: "vllm into one stage", kind: KindVLLMBenchServe, path: fixture(vllmDefault),
			base: baseExperiment(ArrivalsPoisson, 6), stages: []int{0, WholeRun}},
		{name: "vllm constant", kind: KindVLLMBenchServe, path: fixture(vllmConstant),
			base: baseExperiment(ArrivalsConstant, 6), stages: []int{0, WholeRun}},
		{name: "vllm into two stages", kind: KindVLLMBenchServe, path: fixture(vllmDefault),
			base: baseExperiment(ArrivalsPoisson, 6, 12), want: "a vllm bench serve run is one stage, but base has 2"},
		{name: "vllm rate differs", kind: KindVLLMBenchServe, path: fixture(vllmDefault),
			base: baseExperiment(ArrivalsPoisson, 8), want: "the run's rate was 6 req/s, but base has workload.stages[0].rate 8"},
		{name: "vllm arrivals differ", kind: KindVLLMBenchServe, path: fixture(vllmConstant),
			base: baseExperiment(ArrivalsPoisson, 6), want: "arrivals were constant, but base says workload.arrivals poisson"},
		{name: "vllm gamma arrivals", kind: KindVLLMBenchServe,
			path: edited(vllmDefault, "r.json", `"burstiness": 1.0`, `"burstiness": 0.5`),
			base: baseExperiment(ArrivalsPoisson, 6), want: "gamma-distributed arrivals"},
		{name: "vllm concurrency cap", kind: KindVLLMBenchServe,
			path: edited(vllmDefault, "r.json", `"max_concurrency": null`, `"max_concurrency": 16`),
			base: baseExperiment(ArrivalsPoisson, 6), want: "capped requests in flight at 16"},
		{name: "vllm all at once", kind: KindVLLMBenchServe,
			path: edited(vllmDefault, "r.json", `"request_rate": 6.0`, `"request_rate": "inf"`),
			base: baseExperiment(ArrivalsPoisson, 6), want: "request_rate inf sends every request at once"},
		{name: "vllm ramp-up", kind: KindVLLMBenchServe,
			path: edited(vllmDefault, "r.json", `"max_concurrency": null`, `"max_concurrency": null, "ramp_up_strategy": "linear"`),
			base: baseExperiment(ArrivalsPoisson, 6), want: "ramp_up_strategy linear"},
		{name: "inference-perf stage by name", kind: KindInferencePerf, path: fixture(ipStage1),
			base: baseExperiment(ArrivalsPoisson, 2, 4), stages: []int{1}},
		{name: "inference-perf summary", kind: KindInferencePerf, path: fixture(ipSummary),
			base: baseExperiment(ArrivalsPoisson, 2, 4), stages: []int{WholeRun}},
		{name: "inference-perf one stage fills both", kind: KindInferencePerf, path: fixture(ipStage0),
			base: baseExperiment(ArrivalsConstant, 2), stages: []int{0, WholeRun}},
		{name: "inference-perf renamed, one stage", kind: KindInferencePerf, path: edited(ipStage0, "run.json"),
			base: baseExperiment(ArrivalsPoisson, 2), stages: []int{0, WholeRun}},
		{name: "inference-perf renamed, two stages", kind: KindInferencePerf, path: edited(ipStage0, "run.json"),
			base: baseExperiment(ArrivalsPoisson, 2, 4), want: "cannot tell which stage this report covers"},
		{name: "inference-perf stage beyond the experiment", kind: KindInferencePerf, path: fixture(ipStage1),
			base: baseExperiment(ArrivalsPoisson, 4), want: "stage 1, but the experiment has 1 stages"},
		{name: "inference-perf rate differs", kind: KindInferencePerf, path: fixture(ipStage1),
			base: baseExperiment(ArrivalsPoisson, 2, 5), want: "the run's rate was 4 req/s, but base has workload.stages[1].rate 5"},
		{name: "inference-perf summary named as a stage", kind: KindInferencePerf,
			path: edited(ipSummary, "stage_0_lifecycle_metrics.json"),
			base: baseExperiment(ArrivalsPoisson, 2, 4), want: "named as a stage report, but its load_summary has no requested_rate"},
		{name: "inference-perf concurrency stage", kind: KindInferencePerf,
			path: edited(ipStage0, "stage_0_lifecycle_metrics.json", `"requested_rate": 2.0,`, `"requested_rate": 2.0, "concurrency": 8,`),
			base: baseExperiment(ArrivalsPoisson, 2), want: "capped requests in flight at 8"},
		{name: "unknown kind", kind: "guidellm", path: fixture(vllmDefault),
			base: baseExperiment(ArrivalsPoisson, 6), want: `unknown result kind "guidellm"; want vllm-bench-serve or inference-perf`},
		{name: "wrong kind for the file", kind: KindInferencePerf, path: fixture(vllmDefault),
			base: baseExperiment(ArrivalsPoisson, 6), want: "no successes or load_summary"},
		{name: "invalid base", kind: KindVLLMBenchServe, path: fixture(vllmDefault),
			base: baseExperiment("bursty", 6), want: "base experiment base:\nworkload.arrivals"},
		{name: "missing file", kind: KindVLLMBenchServe, path: func(*testing.T) string { return "testdata/none.json" },
			base: baseExperiment(ArrivalsPoisson, 6), want: "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path(t)
			before := tt.base.Measured
			stages, err := Import(tt.kind, path, tt.base)
			if tt.want != "" {
				require.ErrorContains(t, err, tt.want)
				require.Equal(t, before, tt.base.Measured, "base unchanged on error")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.stages, stages)
			require.Equal(t, len(stages), len(tt.base.Measured))
			for _, s := range stages {
				require.NotEmpty(t, tt.base.Measured[s])
			}
			require.NoError(t, tt.base.Validate())
		})
	}
}

func TestImportKeepsOtherStages(t *testing.T) {
	base := baseExperiment(ArrivalsPoisson, 2, 4)
	for _, p := range []string{ipStage0, ipStage1, ipSummary} {
		_, err := Import(KindInferencePerf, p, base)
		require.NoError(t, err)
	}
	require.Equal(t, []int{WholeRun, 0, 1}, base.Measured.Stages())
	require.InDelta(t, 29.56741193299616, base.Measured[1]["ttft_mean"], 1e-9)

	// The stages' figures are separate maps: editing one leaves the others.
	one := baseExperiment(ArrivalsPoisson, 6)
	_, err := Import(KindVLLMBenchServe, vllmDefault, one)
	require.NoError(t, err)
	one.Measured[0]["ttft_mean"] = 1
	require.NotEqual(t, 1.0, one.Measured[WholeRun]["ttft_mean"])

	// The result round-trips through the file format.
	out, err := base.Marshal()
	require.NoError(t, err)
	_, err = Parse("imported.json", out)
	require.NoError(t, err)
}

func TestImportNilBase(t *testing.T) {
	_, err := Import(KindVLLMBenchServe, vllmDefault, nil)
	require.ErrorContains(t, err, "no base experiment")
}

func fixture(path string) func(*testing.T) string {
	return func(*testing.T) string { return path }
}

func edited(fixture, name string, replace ...string) func(*testing.T) string {
	return func(t *testing.T) string { return withFile(t, fixture, name, replace...) }
}
