package benchmark

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sharedSimToReal is the shared sim-to-real data, outside this repository
// (see its README.md); the golden files are derived from it.
var sharedSimToReal = filepath.Join("..", "..", "..", "shared", "profiles", "sim-to-real")

const simToRealGoldens = "testdata/simtoreal"

// TestSimToRealTrainVal converts the shared train/val data and compares the
// experiments with the committed golden files, which -update rewrites
// (together with the model configs they point at, copied so that the
// goldens stand alone).
func TestSimToRealTrainVal(t *testing.T) {
	csvPath := filepath.Join(sharedSimToReal, "trainval_error_records.csv")
	jsonPath := filepath.Join(sharedSimToReal, "trained_physics_iter29.json")
	for _, p := range []string{csvPath, jsonPath} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("shared sim-to-real data not found (%v): the goldens in %s are checked by TestSimToRealGoldens only", err, simToRealGoldens)
		}
	}
	exps, err := ConvertSimToReal(csvPath, jsonPath)
	require.NoError(t, err)
	require.Len(t, exps, 13, "the CSV measures 13 of the JSON's 15 runs")

	if *update {
		old, err := filepath.Glob(filepath.Join(simToRealGoldens, "*.json"))
		require.NoError(t, err)
		for _, f := range old {
			require.NoError(t, os.Remove(f))
		}
		require.NoError(t, os.RemoveAll(filepath.Join(simToRealGoldens, simToRealModelConfigDir)))
		require.NoError(t, os.MkdirAll(filepath.Join(simToRealGoldens, simToRealModelConfigDir), 0o755))
		for _, e := range exps {
			require.NoError(t, e.Write(filepath.Join(simToRealGoldens, e.Name+".json")))
			copyFile(t, e.ModelConfigPath(), filepath.Join(simToRealGoldens, filepath.FromSlash(e.ModelConfig)))
		}
	}

	var names []string
	for _, e := range exps {
		names = append(names, e.Name+".json")
		got, err := e.Marshal()
		require.NoError(t, err)
		want, err := os.ReadFile(filepath.Join(simToRealGoldens, e.Name+".json"))
		require.NoError(t, err, "run go test -run TestSimToRealTrainVal -update ./internal/benchmark/")
		require.Equal(t, string(want), string(got), "%s: conversion differs from the golden file; rerun with -update and read the diff", e.Name)

		copied, err := os.ReadFile(filepath.Join(simToRealGoldens, filepath.FromSlash(e.ModelConfig)))
		require.NoError(t, err)
		shared, err := os.ReadFile(e.ModelConfigPath())
		require.NoError(t, err)
		require.Equal(t, string(shared), string(copied), "%s: the copied model config differs from the shared one", e.ModelConfig)
	}
	committed, err := filepath.Glob(filepath.Join(simToRealGoldens, "*.json"))
	require.NoError(t, err)
	for i := range committed {
		committed[i] = filepath.Base(committed[i])
	}
	slices.Sort(names)
	require.Equal(t, names, committed, "a golden file without an experiment: rerun with -update")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.Create(to)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}

// TestSimToRealGoldens checks the committed experiments on their own: they
// load, point at model configs that are there, and hold what the study
// measured (seven metrics per stage).
func TestSimToRealGoldens(t *testing.T) {
	exps, err := LoadAll(simToRealGoldens)
	require.NoError(t, err)
	require.Len(t, exps, 13)
	want := []string{"ttft_mean", "ttft_p90", "ttft_p99", "itl_mean", "e2e_mean", "e2e_p90", "e2e_p99"}
	slices.Sort(want)
	for _, e := range exps {
		data, err := os.ReadFile(e.ModelConfigPath())
		require.NoError(t, err, "%s: model config", e.Name)
		require.True(t, json.Valid(data), "%s: %s is not JSON", e.Name, e.ModelConfigPath())
		require.True(t, strings.HasPrefix(e.ModelConfig, "model_configs/"), "%s: model_config %s", e.Name, e.ModelConfig)

		wantStages := []int{WholeRun}
		for i := range e.Workload.Stages {
			wantStages = append(wantStages, i)
		}
		require.Equal(t, wantStages, e.Measured.Stages(), e.Name)
		for _, s := range e.Measured.Stages() {
			require.Equal(t, want, metricKeys(e.Measured[s]), "%s stage %d", e.Name, s)
		}
		require.Contains(t, e.Source, "train/val")
		require.Equal(t, "H100", e.GPU)
		require.Equal(t, "vllm 0.15.1", e.EngineVersion)
	}
}

// simToRealFixture writes a small CSV and profile JSON for conversion
// errors; csvRows follow the header.
func simToRealFixture(t *testing.T, csvRows string, profiles string) (csvPath, jsonPath string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "model_configs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model_configs", "m.json"), []byte(`{}`), 0o644))
	csvPath = filepath.Join(dir, "records.csv")
	header := "simulator,experiment_folder,model,workload,stage_index,metric_name,predicted,actual,mape,mpe,absolute_error,exp_id,hardware,dp,cpu_offload,gpu_mem_util,precision,tp,max_num_batched_tokens\n"
	require.NoError(t, os.WriteFile(csvPath, []byte(header+csvRows), 0o644))
	jsonPath = filepath.Join(dir, "profiles.json")
	require.NoError(t, os.WriteFile(jsonPath, []byte(profiles), 0o644))
	return csvPath, jsonPath
}

const simToRealProfileJSON = `{"description": "d", "backend": "b", "alpha_coeffs": [1], "beta_coeffs": [2], "experiments": [
 {"id": "7", "model": "org/M", "model_config_dir": "model_configs/m", "hardware": "H100", "tp": 1,
  "max_num_seqs": 128, "max_num_batched_tokens": 2048, "total_kv_blocks": 100, "cpu_kv_blocks": 0,
  "workload": {"inference_perf": {"shared_prefix": {"enable_multi_turn_chat": false, "num_unique_system_prompts": 2,
     "num_users_per_system_prompt": 1, "output_len": 10, "question_len": 20, "system_prompt_len": 5},
     "stages": [{"duration": 60, "rate": 1.0}]}, "num_requests": 60, "seed": 1, "version": "2"},
  "expected": {"ttft_mean_ms": 1}},
 {"id": "70", "model": "org/M", "model_config_dir": "model_configs/m", "hardware": "H100", "tp": 1,
  "max_num_seqs": 128, "max_num_batched_tokens": 2048, "total_kv_blocks": 100, "cpu_kv_blocks": 0,
  "workload": {"inference_perf": {"shared_prefix": {"enable_multi_turn_chat": false, "num_unique_system_prompts": 2,
     "num_users_per_system_prompt": 1, "output_len": 10, "question_len": 20, "system_prompt_len": 5},
     "stages": [{"duration": 60, "rate": 2.0}]}, "num_requests": 120, "seed": 1, "version": "2"},
  "expected": {}}]}`

func TestConvertSimToReal(t *testing.T) {
	row := func(sim, folder, stage, metric, actual string) string {
		return sim + "," + folder + ",org/M,general," + stage + "," + metric + ",1," + actual + ",0,0,0,7,H100,,,,FP16,1,2048\n"
	}
	t.Run("longest id wins", func(t *testing.T) {
		c, j := simToRealFixture(t, row("a", "70-m-tp1-general", "0", "ttft_mean", "12.5")+
			row("b", "70-m-tp1-general", "0", "ttft_mean", "12.5")+
			row("a", "7-m-tp1-general", "-1", "e2e_mean", "900"), simToRealProfileJSON)
		exps, err := ConvertSimToReal(c, j)
		require.NoError(t, err)
		require.Len(t, exps, 2)
		require.Equal(t, "7-m-tp1-general", exps[0].Name)
		require.Equal(t, 1.0, exps[0].Workload.Stages[0].Rate)
		require.Equal(t, "70-m-tp1-general", exps[1].Name)
		require.Equal(t, 2.0, exps[1].Workload.Stages[0].Rate)
		require.Equal(t, Measured{0: {"ttft_mean": 12.5}}, exps[1].Measured)
		require.Equal(t, "model_configs/m.json", exps[1].ModelConfig)
		require.Equal(t, PrecisionFP16, exps[1].Precision)
		require.Equal(t, 1, exps[1].DP, "an empty dp column is one replica")
	})
	for _, tt := range []struct {
		name, rows, profiles, want string
	}{
		{"simulators disagree", row("a", "7-m", "0", "ttft_mean", "12.5") + row("b", "7-m", "0", "ttft_mean", "13"),
			simToRealProfileJSON, "records.csv:3: actual: 7-m stage 0 ttft_mean is 13 for b, but 12.5 at line 2 for a"},
		{"no profile", row("a", "9-m", "0", "ttft_mean", "1"), simToRealProfileJSON,
			"folder 9-m: no profile in the JSON has an id it starts with"},
		{"unknown metric", row("a", "7-m", "0", "ttft_p95", "1"), simToRealProfileJSON,
			`records.csv:2: metric_name: got "ttft_p95", want one of`},
		{"stage beyond the profile", row("a", "7-m", "1", "ttft_mean", "1"), simToRealProfileJSON,
			"stage_index 1: the profile has 1 stages"},
		{"bad actual", row("a", "7-m", "0", "ttft_mean", "-3"), simToRealProfileJSON,
			`records.csv:2: actual: got "-3", want a finite latency >= 0 in ms`},
		{"tp differs", strings.Replace(row("a", "7-m", "0", "ttft_mean", "1"), "FP16,1,", "FP16,2,", 1), simToRealProfileJSON,
			`tp: the CSV says "2", the JSON "1"`},
		{"rows of a folder disagree", row("a", "7-m", "0", "ttft_mean", "1") +
			strings.Replace(row("a", "7-m", "-1", "ttft_mean", "1"), "H100", "A100", 1), simToRealProfileJSON,
			`records.csv:3: hardware: got "A100", but line 2 of folder 7-m says "H100"`},
		{"unknown precision", strings.Replace(row("a", "7-m", "0", "ttft_mean", "1"), "FP16", "INT4", 1), simToRealProfileJSON,
			`precision: got "INT4", want FP16, BF16 or FP8`},
		{"missing model config", row("a", "7-m", "0", "ttft_mean", "1"),
			strings.ReplaceAll(simToRealProfileJSON, "model_configs/m", "model_configs/other"), "model config for org/M"},
		{"profile format changed", row("a", "7-m", "0", "ttft_mean", "1"),
			strings.Replace(simToRealProfileJSON, `"tp": 1`, `"tp": 1, "pp": 1`, 1), `unknown field "pp"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, j := simToRealFixture(t, tt.rows, tt.profiles)
			_, err := ConvertSimToReal(c, j)
			require.ErrorContains(t, err, tt.want)
		})
	}
	t.Run("missing columns", func(t *testing.T) {
		dir := t.TempDir()
		c := filepath.Join(dir, "x.csv")
		require.NoError(t, os.WriteFile(c, []byte("simulator,experiment_folder\na,b\n"), 0o644))
		_, err := ConvertSimToReal(c, filepath.Join(dir, "none.json"))
		require.ErrorContains(t, err, "x.csv: missing columns model, workload, stage_index")
	})
	t.Run("merged workload labels", func(t *testing.T) {
		rows := row("a", "7-m-tp1-codegen", "0", "ttft_mean", "1") +
			strings.Replace(row("a", "7-m-tp1-codegen", "0", "ttft_mean", "1"), ",general,", ",roleplay,", 1)
		rows = strings.ReplaceAll(rows, ",general,", ",codegen,")
		rows += strings.Replace(row("a", "7-m-tp1-codegen", "-1", "ttft_mean", "1"), ",general,", ",roleplay,", 1)
		c, j := simToRealFixture(t, rows, simToRealProfileJSON)
		exps, err := ConvertSimToReal(c, j)
		require.NoError(t, err)
		require.Contains(t, exps[0].Source, "Workload codegen (the CSV also labels these same figures roleplay)")
	})
}
