package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/faults"
)

func runFaults(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newFaultsCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	err := cmd.Execute()
	return out.String(), err
}

func TestFaultsCmdListsEveryKind(t *testing.T) {
	out, err := runFaults(t)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(faults.Kinds()))
	for i, k := range faults.Kinds() {
		require.True(t, strings.HasPrefix(lines[i], k+": "), lines[i])
	}
}

func TestFaultsCheck(t *testing.T) {
	out, err := runFaults(t, "check", "node-loss   pool=p at=60s", "quota-exhaustion provider=a at=1m for=90s rpm=0 tpm=0")
	require.NoError(t, err)
	require.Equal(t, "node-loss pool=p at=1m count=1\nquota-exhaustion provider=a at=1m for=1m30s\n", out)

	_, err = runFaults(t, "check", "regional-outage regoin=us at=1m")
	require.Error(t, err)
	require.Contains(t, err.Error(), "did you mean region?")
	var ec exitCoder
	require.True(t, asExitCoder(err, &ec))
	require.Equal(t, exitInvalid, ec.ExitCode())
}
