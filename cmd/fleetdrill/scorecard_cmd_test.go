package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScorecardCmd(t *testing.T) {
	dir := t.TempDir()
	js, md := filepath.Join(dir, "card.json"), filepath.Join(dir, "card.md")
	code, out, errs := runCommand(t, newScorecardCmd(), "default", "--provider", "gpu-cloud-b", "--set", "duration=5m", "--json", js, "--md", md)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "gate PASS")
	require.Contains(t, out, "PASS  data boundary")
	var card map[string]any
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &card))
	require.Equal(t, true, card["passed"])
	m, err := os.ReadFile(md)
	require.NoError(t, err)
	require.Contains(t, string(m), "# Scorecard: gpu-cloud-b on default")

	code, out, _ = runCommand(t, newScorecardCmd(), "default", "--provider", "gpu-cloud-b", "--set", "duration=5m", "--set", "policy.routing.ignore_residency=true")
	require.Equal(t, exitFailed, code)
	require.Contains(t, out, "FAIL  data boundary")

	code, out, _ = runCommand(t, newScorecardCmd(), "default", "--provider", "gpu-cloud-b", "--set", "duration=5m", "--set", "pools.euw-a100-8b.driver=535.104")
	require.Equal(t, exitFailed, code)
	require.Contains(t, out, "FAIL  runtime parity")
	require.Contains(t, out, "min_driver of runtime vllm-0.6.3")

	code, _, errs = runCommand(t, newScorecardCmd(), "default", "--provider", "nope")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "gpu-cloud-a, gpu-cloud-b")

	// registered on the root command
	code, out, _ = runCLI(t, "scorecard", "--help")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "--provider")
}

// TestScorecardCmdAcquisition: the acquisition stage's flags reach the
// drill, a refused scale-up fails the gate (exit 1) with its figure and
// bar, and a bar out of range is invalid input.
func TestScorecardCmdAcquisition(t *testing.T) {
	base := []string{"gameday-autoscale-stockout", "--provider", "gpu-cloud-b", "--set", "duration=10m", "--set", "faults=[]",
		"--set", "pools.usw-h100-8b.acquisition.delay.mean=20s", "--acquisition-seeds", "2"}
	code, out, errs := runCommand(t, newScorecardCmd(), append(base, "--acquisition-fault", "stockout provider=gpu-cloud-b at=0s")...)
	require.Equal(t, exitFailed, code, errs)
	require.Contains(t, out, "FAIL  acquisition: granted share: step ×1, 2 seeds, under stockout provider=gpu-cloud-b at=0s: usw-h100-8b: 0 of 16 replicas asked granted (0%, want >= 90%)")

	// A lower bar passes the same drill (the gate still fails: the game
	// day's latency budget breaks on gpu-cloud-b alone).
	code, out, errs = runCommand(t, newScorecardCmd(), append(base, "--acquisition-min-granted", "0.5")...)
	require.Equal(t, exitFailed, code, errs)
	require.Contains(t, out, "PASS  acquisition: granted share: step ×1, 2 seeds: usw-h100-8b: 16 of 16 replicas asked granted (100%, want >= 50%)")
	require.Contains(t, out, "FAIL  latency budget")

	for _, bad := range [][]string{{"--acquisition-min-granted", "2"}, {"--acquisition-seeds", "0"}, {"--acquisition-slack", "0s"},
		{"--acquisition-max-slo-drop", "0"}, {"--acquisition-fault", "node-loss pool=usw-h100-8b at=0s"}} {
		code, _, errs = runCommand(t, newScorecardCmd(), append(base, bad...)...)
		require.Equal(t, exitInvalid, code, "%v: %s", bad, errs)
	}
}
