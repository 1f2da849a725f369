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
