package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/calibrate"
)

const calRun = "../../internal/calibrate/testdata/RTXPRO6000_Llama-3.1-8B"

func TestCalibrateAndFidelity(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.yaml")
	code, out, errs := runCLI(t, "calibrate", calRun, "--out", prof)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "calibrated RTXPRO6000_Llama-3.1-8B: 300 requests")
	data, err := os.ReadFile(prof)
	require.NoError(t, err)
	require.Contains(t, string(data), "step_base_us:")

	js, png := filepath.Join(dir, "f.json"), filepath.Join(dir, "f.png")
	code, out, errs = runCLI(t, "fidelity", calRun, "--profile", prof, "--json", js, "--plot", png, "--max-error", "0.1")
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "(in-sample)")
	var fid struct {
		Metrics map[string]struct {
			RelErr struct{ P50 *float64 } `json:"rel_err"`
		} `json:"metrics"`
	}
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &fid))
	require.Less(t, *fid.Metrics["e2e"].RelErr.P50, 0.1)
	fi, err := os.Stat(png)
	require.NoError(t, err)
	require.Positive(t, fi.Size())

	code, _, errs = runCLI(t, "fidelity", calRun, "--profile", prof, "--max-error", "0.0001")
	require.Equal(t, exitFailed, code, errs)
	require.Contains(t, errs, "exceeds --max-error")
}

func TestCalibrateErrors(t *testing.T) {
	code, _, errs := runCLI(t, "calibrate")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "give RUN_DIR or --requests FILE")
	code, _, errs = runCLI(t, "fidelity", calRun)
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "--profile: required")
	code, _, errs = runCLI(t, "calibrate", t.TempDir())
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "meta.json")
}

const trainVal = "../../internal/benchmark/testdata/simtoreal"

// TestFidelityBenchmark scores the twin on the sim-to-real train/val
// experiments through the command: a row per experiment, stage and metric
// in the JSON, a summary, and the exit codes --max-error gives.
func TestFidelityBenchmark(t *testing.T) {
	js := filepath.Join(t.TempDir(), "b.json")
	code, out, errs := runCLI(t, "fidelity", "--benchmark", trainVal, "--json", js, "--max-error", "0.12")
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "fidelity of the twin on 13 benchmark experiments, with the built-in coefficients")
	require.Contains(t, out, "backs up where the engine kept up: 0")
	var sc struct {
		Rows []struct {
			Experiment, Stage, Metric string
			Measured                  float64 `json:"measured_ms"`
			Predicted                 float64 `json:"predicted_ms"`
			Error                     float64
		}
		Summary []struct {
			Metric      string
			Experiments int
			MedianAbs   float64 `json:"median_abs_error"`
		}
		BackedUp int `json:"backed_up"`
	}
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &sc))
	exps := map[string]bool{}
	for _, r := range sc.Rows {
		exps[r.Experiment] = true
		require.InDelta(t, (r.Predicted-r.Measured)/r.Measured, r.Error, 1e-3, "%+v", r)
	}
	require.Len(t, exps, 13)
	// 13 experiments, 8 of them two-stage: 7 metrics in stages -1, 0 and,
	// where there is one, 1.
	require.Equal(t, 7*(13*2+8), len(sc.Rows))
	var e2e float64
	for _, s := range sc.Summary {
		if s.Metric == "e2e_mean" {
			e2e = s.MedianAbs
			require.Equal(t, 13, s.Experiments)
		}
	}
	require.Positive(t, e2e)

	code, _, errs = runCLI(t, "fidelity", "--benchmark", trainVal, "--max-error", "0.0001")
	require.Equal(t, exitFailed, code)
	require.Contains(t, errs, "e2e_mean median |error|")

	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"name": "x", "gpu": "TPUv9"}`), 0o644))
	code, _, errs = runCLI(t, "fidelity", "--benchmark", bad)
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "bad.json")
}

// TestCalibrateBenchmark fits two coefficients to one experiment, writes
// them, and fidelity --profile reads them back.
func TestCalibrateBenchmark(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "c.yaml")
	one := filepath.Join(trainVal, "64-qwen2-5-7b-instruct-tp1-roleplay-1-1.json")
	code, stdout, errs := runCLI(t, "calibrate", "--benchmark", one, "--free", "request_us,kv_eff", "--refine-evals", "30", "--out", out)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, stdout, "fitting 1 experiments (hopper family)")
	require.Contains(t, stdout, "wrote "+out)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Contains(t, string(data), "request_us:")
	require.Contains(t, string(data), "64-qwen2-5-7b-instruct-tp1-roleplay-1-1")

	code, stdout, errs = runCLI(t, "fidelity", "--benchmark", one, "--profile", out)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, stdout, "with "+out)

	code, _, errs = runCLI(t, "calibrate", "--benchmark", one, "--free", "no_such")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, `no coefficient "no_such"`)
	code, _, errs = runCLI(t, "calibrate", "--benchmark", one, "--physics")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "--physics")
	code, _, errs = runCLI(t, "calibrate", calRun, "--free", "kv_eff")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "use them with --benchmark or --physics")
	code, _, errs = runCLI(t, "fidelity", "--benchmark", one, "--profile", calRun)
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "--profile:")
}

// TestCalibratePhysicsOnARun fits the physical model's device
// coefficients to a measured run and replays it with them.
func TestCalibratePhysicsOnARun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "c.yaml")
	code, stdout, errs := runCLI(t, "calibrate", calRun, "--physics", "--refine-evals", "60", "--out", out)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, stdout, "fitting compute_eff,weight_eff,kv_eff,step_us,seq_us on RTXPRO6000_Llama-3.1-8B (blackwell family)")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Contains(t, string(data), "family: blackwell")

	code, stdout, errs = runCLI(t, "fidelity", calRun, "--profile", out, "--max-error", "0.1")
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, stdout, "the physical model with "+out)
}

// TestBenchmarkImport puts a vllm bench serve result into an experiment
// and scores the twin on it.
func TestBenchmarkImport(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(trainVal, "64-qwen2-5-7b-instruct-tp1-roleplay-1-1.json")
	res := "../../internal/benchmark/testdata/vllm/openai-6.0qps-Qwen2.5-7B-Instruct-20260301-101500.json"
	out := filepath.Join(dir, "mine.json")
	code, stdout, errs := runCLI(t, "benchmark", "import", res, "--kind", "vllm-bench-serve", "--into", base, "--out", out)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, stdout, "stages [0 -1]")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	var e struct {
		Measured map[string]map[string]float64 `json:"measured_ms"`
	}
	require.NoError(t, json.Unmarshal(data, &e))
	require.Contains(t, e.Measured["-1"], "ttft_mean")
	require.Equal(t, e.Measured["-1"], e.Measured["0"], "one run at one rate: the stage is the whole run")

	code, _, errs = runCLI(t, "benchmark", "import", res, "--into", filepath.Join(trainVal, "17-llama-4-scout-17b-16e-tp2-general-lite-2-1.json"), "--out", out)
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "one stage")
}

// TestCalibrateBenchmarkCV cross-validates a tiny fit over three committed
// experiments, leaving one out at a time, and writes it.
func TestCalibrateBenchmarkCV(t *testing.T) {
	dir := t.TempDir()
	out, js := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "cv.json")
	var args []string
	for _, f := range []string{"64-qwen2-5-7b-instruct-tp1-roleplay-1-1.json", "62-mistral-nemo-12b-tp2-general-lite-2-1.json",
		"65-01-ai-yi-34b-tp2-general-lite-2-1.json"} {
		args = append(args, "--benchmark", filepath.Join(trainVal, f))
	}
	code, stdout, errs := runCLI(t, append([]string{"calibrate", "--cv", "experiment", "--refine-evals", "4", "--free", "step_us",
		"--json", js, "--out", out}, args...)...)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, stdout, "cross-validating the fit by experiment over 3 experiments (hopper family) from the neutral start",
		"a fold must not start from coefficients fitted on what it holds out")
	require.Contains(t, stdout, "fold 1/3, 64-qwen2-5-7b-instruct-tp1-roleplay-1-1 held out (fitted on 2")
	require.Contains(t, stdout, "fold 3/3, 65-01-ai-yi-34b-tp2-general-lite-2-1 held out")
	require.Regexp(t, `e2e_mean +\d+\.\d% +\d+\.\d% +\d\.\d\d`, stdout)

	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var res calibrate.CVResult
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, calibrate.CVByExperiment, res.By)
	require.Len(t, res.Folds, 3)
	s, ok := res.CrossValidated.SummaryOf("e2e_mean")
	require.True(t, ok)
	require.Equal(t, 3, s.Experiments)

	f, err := calibrate.ReadCoeffsFile(out)
	require.NoError(t, err)
	require.Equal(t, "experiment", f.Fit.CVBy)
	require.Equal(t, s.MedianAbs, f.Fit.CrossValidated["e2e_mean"])
	require.Contains(t, f.Fit.InSample, "e2e_mean")
	require.Len(t, f.CalibratedOn, 3)
}

func TestCalibrateBenchmarkCVErrors(t *testing.T) {
	one := filepath.Join(trainVal, "64-qwen2-5-7b-instruct-tp1-roleplay-1-1.json")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad grouping", []string{"--benchmark", one, "--cv", "gpu"}, `--cv: "gpu" is not a cross-validation grouping; use model (leave one model out) or experiment`},
		{"one experiment", []string{"--benchmark", one, "--cv", "experiment", "--refine-evals", "2"}, "at least two experiments"},
		{"json without cv", []string{"--benchmark", one, "--json", "x.json"}, "--json writes a cross-validation: add --cv"},
		{"cv without benchmark", []string{calRun, "--cv", "model"}, "use them with --benchmark"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := runCLI(t, append([]string{"calibrate"}, tt.args...)...)
			require.Equal(t, exitInvalid, code)
			require.Contains(t, errs, tt.want)
		})
	}
}

// TestFidelityBenchmarkCollapse: an experiment vLLM kept up with, its rate
// made ten times the twin's capacity, fails --max-error with exit 1 and a
// message naming it with its offered and sustainable rates; --sustainable
// prints the table.
func TestFidelityBenchmarkCollapse(t *testing.T) {
	src := filepath.Join(trainVal, "64-qwen2-5-7b-instruct-tp1-roleplay-1-1.json")
	var e map[string]any
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &e))
	cfg, err := filepath.Abs(filepath.Join(trainVal, e["model_config"].(string)))
	require.NoError(t, err)
	e["model_config"] = cfg
	e["name"] = "64-at-60"
	stages := e["workload"].(map[string]any)["stages"].([]any)
	st := stages[0].(map[string]any)
	st["rate"] = st["rate"].(float64) * 10 // 60 req/s; the twin sustains some 7 times 6
	st["duration_s"] = 120.0
	b, err = json.Marshal(e)
	require.NoError(t, err)
	exp := filepath.Join(t.TempDir(), "64-at-60.json")
	require.NoError(t, os.WriteFile(exp, b, 0o644))

	code, out, errs := runCLI(t, "fidelity", "--benchmark", exp, "--max-error", "10", "--sustainable")
	require.Equal(t, exitFailed, code, errs)
	require.Regexp(t, `the twin backs up on 1 experiments the engine kept up with: 64-at-60 \(offered 60 req/s, twin sustains [0-9.]+\)`, errs)
	require.Contains(t, out, "twin sustainable req/s")
	require.Regexp(t, `64-at-60 +60 +[0-9.]+ +0\.[0-9]+× +yes  ✗ the twin backs up`, out)
}
