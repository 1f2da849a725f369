package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanCmd: `fleetdrill plan` on the default scenario prints a fleet per
// demand level, and writes the JSON and the Pareto plot.
func TestPlanCmd(t *testing.T) {
	dir := t.TempDir()
	js, png := filepath.Join(dir, "plan.json"), filepath.Join(dir, "pareto.png")
	code, out, errs := runCommand(t, newPlanCmd(), "default", "--demand", "1,1.5", "--set", "duration=10m",
		"--survive", "node-loss pool=use-h100-8b count=1 at=5m", "--json", js, "--plot", png)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "demand ×1\n")
	require.Contains(t, out, "demand ×1.5\n")
	require.Contains(t, out, "binding: ")
	require.Contains(t, out, "a full grid up to the upper bound")
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var res struct {
		Levels []struct {
			Feasible bool  `json:"feasible"`
			Replicas []int `json:"replicas"`
		} `json:"levels"`
		Points []json.RawMessage `json:"points"`
	}
	require.NoError(t, json.Unmarshal(b, &res))
	require.Len(t, res.Levels, 2)
	require.True(t, res.Levels[0].Feasible)
	require.Len(t, res.Levels[0].Replicas, 4)
	require.NotEmpty(t, res.Points)
	st, err := os.Stat(png)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(1000))
}

// TestPlanCmdInvalid: bad flags and a bad fault line exit 2.
func TestPlanCmdInvalid(t *testing.T) {
	code, _, errs := runCommand(t, newPlanCmd(), "default", "--demand", "0")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "--demand 0")
	code, _, errs = runCommand(t, newPlanCmd(), "default", "--survive", "no-such-fault x=1")
	require.Equal(t, exitInvalid, code, errs)
}

// TestPlanCmdInfeasible: a failure no fleet survives exits 1 and says what fails.
func TestPlanCmdInfeasible(t *testing.T) {
	code, out, errs := runCommand(t, newPlanCmd(), "default", "--set", "duration=20m", "--max-replicas", "8",
		"--survive", "regional-outage region=us-east at=10m for=10m")
	require.Equal(t, 1, code, errs)
	require.Contains(t, out, "infeasible")
	require.Contains(t, errs, "interactive.ttft.p99 < 2s")
}
