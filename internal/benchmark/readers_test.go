package benchmark

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	vllmDefault  = "testdata/vllm/openai-6.0qps-Qwen2.5-7B-Instruct-20260301-101500.json"
	vllmConstant = "testdata/vllm/constant-e2el-percentiles.json"
	ipStage0     = "testdata/inference-perf/stage_0_lifecycle_metrics.json"
	ipStage1     = "testdata/inference-perf/stage_1_lifecycle_metrics.json"
	ipSummary    = "testdata/inference-perf/summary_lifecycle_metrics.json"
)

func readFixture(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(path))
	require.NoError(t, err)
	return data
}

func metricKeys(m Metrics) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestFromVLLMBenchServe(t *testing.T) {
	t.Run("default percentile metrics", func(t *testing.T) {
		m, info, err := FromVLLMBenchServe(readFixture(t, vllmDefault))
		require.NoError(t, err)
		// --percentile-metrics defaults to ttft,tpot,itl with p99 only: no e2e.
		require.Equal(t, []string{"itl_mean", "itl_p50", "itl_p99", "tpot_mean", "ttft_mean", "ttft_p50", "ttft_p99"}, metricKeys(m))
		require.InDelta(t, 27.535405342638743, m["ttft_mean"], 1e-12)
		require.InDelta(t, 27.457159550569404, m["ttft_p50"], 1e-12)
		require.InDelta(t, 42.564105755496236, m["ttft_p99"], 1e-12)
		require.InDelta(t, 7.011651686109242, m["itl_mean"], 1e-12)
		require.InDelta(t, 7.011543496205727, m["tpot_mean"], 1e-12)
		require.Equal(t, StageInfo{Rate: 6, Arrivals: ArrivalsPoisson, DurationS: 62.97565612230935, Completed: 350,
			MeanInputLen: 191406.0 / 350, MeanOutputLen: 85975.0 / 350}, info)
	})
	t.Run("e2el, more percentiles, constant arrivals", func(t *testing.T) {
		m, info, err := FromVLLMBenchServe(readFixture(t, vllmConstant))
		require.NoError(t, err)
		require.Equal(t, []string{"e2e_mean", "e2e_p50", "e2e_p90", "e2e_p99", "itl_mean", "itl_p50", "itl_p90", "itl_p99",
			"tpot_mean", "ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99"}, metricKeys(m))
		require.InDelta(t, 1767.2286941326101, m["e2e_mean"], 1e-9)
		require.InDelta(t, 1917.1609894744238, m["e2e_p90"], 1e-9)
		require.Equal(t, ArrivalsConstant, info.Arrivals, "burstiness Infinity is constant spacing")
	})

	base := `{"request_rate": 4.0, "burstiness": 1.0, "max_concurrency": null, "duration": 10.0, "completed": 40, "failed": 0, "mean_ttft_ms": 20.0, "p99_ttft_ms": 30.0`
	for _, tt := range []struct {
		name, data, want string
	}{
		{"nothing completed", `{"completed": 0, "mean_ttft_ms": 0.0}`, "completed: 0 requests completed"},
		{"not a result", `{"model": "x"}`, "completed: missing; is this the file --save-result wrote?"},
		{"appended results", base + "}\n" + base + "}", "holds 2 results one after another"},
		{"NaN latency", base + `, "mean_itl_ms": NaN}`, "mean_itl_ms: got NaN, want a finite latency >= 0"},
		{"text latency", base + `, "mean_itl_ms": "7"}`, `mean_itl_ms: got "7", want a number`},
		{"no figures", `{"completed": 3, "duration": 1.0}`, "no latency figures"},
		{"top-level list", `[1]`, "want a JSON object"},
		{"broken JSON", `{"completed": 3,`, "not valid JSON"},
		{"percentiles out of order", base + `, "p90_ttft_ms": 35.0}`, "ttft_p99: got 30, want >= ttft_p90 (35)"},
		{"rate zero", base + `, "request_rate": 0}`, "request_rate: got 0, want a rate > 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := FromVLLMBenchServe([]byte(tt.data))
			require.ErrorContains(t, err, "vllm bench serve result: ")
			require.ErrorContains(t, err, tt.want)
		})
	}
	t.Run("rate inf, ramp-up, concurrency cap", func(t *testing.T) {
		_, info, err := FromVLLMBenchServe([]byte(`{"request_rate": "inf", "burstiness": 0.5, "max_concurrency": 32,
			"ramp_up_strategy": "linear", "completed": 5, "mean_ttft_ms": 3.0}`))
		require.NoError(t, err)
		require.True(t, math.IsInf(info.Rate, 1))
		require.Empty(t, info.Arrivals, "burstiness 0.5 is gamma arrivals")
		require.Equal(t, 32, info.MaxConcurrency)
		require.Equal(t, "linear", info.RampUp)
	})
}

func TestFromInferencePerf(t *testing.T) {
	t.Run("stage report", func(t *testing.T) {
		m, info, err := FromInferencePerf(readFixture(t, ipStage0))
		require.NoError(t, err)
		require.Equal(t, []string{"e2e_mean", "e2e_p50", "e2e_p90", "e2e_p99", "itl_mean", "tpot_mean",
			"ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99"}, metricKeys(m), "no ITL percentiles: see FromInferencePerf")
		require.InDelta(t, 26.88396036203626, m["ttft_mean"], 1e-9, "seconds become milliseconds")
		require.InDelta(t, 26.248757564299355, m["ttft_p50"], 1e-9)
		require.InDelta(t, 1962.2191279351564, m["e2e_p99"], 1e-9)
		require.InDelta(t, 6.906677003416712, m["itl_mean"], 1e-9)
		require.InDelta(t, 6.907550503933813, m["tpot_mean"], 1e-9)
		require.Equal(t, 2.0, info.Rate)
		require.False(t, info.Summary)
		require.Equal(t, 89, info.Completed)
		require.InDelta(t, 40.21085184600704, info.DurationS, 1e-12)
		require.InDelta(t, 546.7865168539325, info.MeanInputLen, 1e-9)
		require.InDelta(t, 246.1123595505618, info.MeanOutputLen, 1e-9)
	})
	t.Run("summary report", func(t *testing.T) {
		m, info, err := FromInferencePerf(readFixture(t, ipSummary))
		require.NoError(t, err)
		require.True(t, info.Summary, "a summary's load_summary has no requested_rate")
		require.Zero(t, info.Rate)
		require.Equal(t, 245, info.Completed)
		require.InDelta(t, 1804.6243929614993, m["e2e_mean"], 1e-9)
	})
	t.Run("older report", func(t *testing.T) {
		// The shape of inference-perf's 2025 reports: prompt_len rather than
		// prompt_tokens, no benchmark_time_seconds, percentile keys before max.
		old := `{"load_summary": {"count": 60, "send_duration": 58.5, "requested_rate": 1.0, "achieved_rate": 1.02},
		  "successes": {"count": 60, "latency": {
		    "request_latency": {"mean": 0.48, "min": 0.47, "median": 0.479, "p90": 0.485, "p99": 0.489, "max": 0.49},
		    "normalized_time_per_output_token": {"mean": 0.0076},
		    "time_per_output_token": {"mean": 0.00347},
		    "time_to_first_token": null,
		    "inter_token_latency": {"mean": 0.00347, "median": 0.00004}},
		   "throughput": {"requests_per_sec": 1.0}, "prompt_len": {"mean": 204.1}, "output_len": {"mean": 63.15}},
		  "failures": {"count": 0, "request_latency": null, "prompt_len": null}}`
		m, info, err := FromInferencePerf([]byte(old))
		require.NoError(t, err)
		require.Equal(t, []string{"e2e_mean", "e2e_p50", "e2e_p90", "e2e_p99", "itl_mean", "tpot_mean"}, metricKeys(m),
			"a null time_to_first_token leaves TTFT absent")
		require.InDelta(t, 58.5, info.DurationS, 1e-12, "send_duration when benchmark_time_seconds is absent")
		require.InDelta(t, 204.1, info.MeanInputLen, 1e-12)
	})
	for _, tt := range []struct {
		name, data, want string
	}{
		{"per-request file", `[{"start_time": 1}]`, "want a JSON object"},
		{"not a lifecycle report", `{"metrics": {}}`, "no successes or load_summary"},
		{"nothing succeeded", `{"load_summary": {"count": 3}, "successes": {"count": 0, "latency": {}}}`,
			"successes.count: no request succeeded"},
		{"latency as text", `{"load_summary": {}, "successes": {"count": 1, "latency": {"request_latency": {"mean": "x"}}}}`,
			`successes.latency.request_latency.mean: got "x", want a number`},
		{"negative latency", `{"load_summary": {}, "successes": {"count": 1, "latency": {"request_latency": {"mean": -1}}}}`,
			"successes.latency.request_latency.mean: got -1, want a finite latency >= 0"},
		{"no figures", `{"load_summary": {}, "successes": {"count": 1, "latency": {"request_latency": null}}}`,
			"no latency figures"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := FromInferencePerf([]byte(tt.data))
			require.ErrorContains(t, err, "inference-perf report: ")
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestPythonJSON(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a": NaN, "b": Infinity, "c": -Infinity}`, `{"a": "NaN", "b": "Infinity", "c": "-Infinity"}`},
		{`{"NaN": "Infinity is \"NaN\"", "d": -1.5}`, `{"NaN": "Infinity is \"NaN\"", "d": -1.5}`},
		{`["\\", NaN]`, `["\\", "NaN"]`},
		{``, ``},
	} {
		if got := string(pythonJSON([]byte(tt.in))); got != tt.want {
			t.Errorf("pythonJSON(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestFixturesAreRealFormats guards the fixtures against drifting from the
// formats they stand for: the keys the real tools write are there.
func TestFixturesAreRealFormats(t *testing.T) {
	for _, key := range []string{`"date"`, `"endpoint_type"`, `"request_rate"`, `"burstiness"`, `"max_concurrency"`,
		`"duration"`, `"completed"`, `"total_input_tokens"`, `"request_throughput"`, `"std_ttft_ms"`, `"median_itl_ms"`} {
		require.Contains(t, string(readFixture(t, vllmDefault)), key)
	}
	for _, key := range []string{`"benchmark_time_seconds"`, `"schedule_delay"`, `"send_duration"`, `"achieved_rate"`,
		`"normalized_time_per_output_token"`, `"p99.9"`, `"prompt_tokens"`, `"by_label"`} {
		require.Contains(t, string(readFixture(t, ipStage1)), key)
	}
	require.True(t, strings.Contains(string(readFixture(t, vllmConstant)), `"burstiness": Infinity`))
}
