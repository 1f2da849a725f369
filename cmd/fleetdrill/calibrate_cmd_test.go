package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
