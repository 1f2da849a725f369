package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// shellWords splits a command line as sh does.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", "set -- "+line+`; for a in "$@"; do printf '%s\0' "$a"; done`).Output()
	require.NoError(t, err, "sh could not read %q", line)
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// printed finds the command a reproduce or verify line prints.
var printed = regexp.MustCompile(`(?m)(?:reproduce with|reproduce|replay with|verify): (fleetdrill .*)$`)

// TestPrintedCommandsReproduce runs, for each command that prints a
// command to reproduce what it ran, the command it prints, as the shell
// splits it: the outcome is the same (exit status, and for a run its
// report). A command that dropped an override, the seed or a fault would
// replay a different run.
func TestPrintedCommandsReproduce(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on PATH")
	}
	dir := t.TempDir()
	feature := filepath.Join(dir, "fail.feature")
	require.NoError(t, os.WriteFile(feature, []byte("Feature: f\n  Scenario: s\n    Given the fleet \"default\"\n"+
		"    And the run lasts 5m\n    And the seed is 5\n"+
		"    When the fault \"regional-outage region=eu-west at=1m for=2m\" is injected\n"+
		"    Then interactive p99 TTFT stays below 1ms\n"), 0o644))
	for _, tt := range []struct {
		name string
		args []string
		// sameOutput: the rerun prints the same report; else it fails
		// saying wantRerun.
		sameOutput bool
		wantRerun  string
	}{
		{"run with overrides and a seed", []string{"run", "--set", "expect[0]=interactive.ttft.p99 < 1ms",
			"--set", "duration=5m", "--set", "warmup=1m", "--seed", "9",
			"--set", `faults=["regional-outage region=eu-west at=2m for=1m"]`}, true, ""},
		{"run with the seed as an override", []string{"run", "--set", "seed=3", "--set", "duration=4m",
			"--set", "warmup=1m", "--set", "expect[0]=interactive.ttft.p99 < 1ms"}, true, ""},
		{"compare's failed run", []string{"compare", "../../internal/compare/testdata/small.yaml", "--policy", "fifo,wfq",
			"--seeds", "2", "--parallel", "1", "--set", "expect=[nosuch.value < 1]"}, false, "nosuch.value"},
		{"spec's failed scenario", []string{"spec", feature, "--format", "progress"}, false, "FAIL  interactive.ttft.p99 < 1ms"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tt.args...)
			require.NotEqual(t, exitOK, code, "the case must fail to print a reproduce command:\n%s%s", out, errs)
			m := printed.FindStringSubmatch(errs + "\n" + out)
			require.NotNil(t, m, "no reproduce command printed:\n%s%s", out, errs)
			words := shellWords(t, m[1])
			require.Equal(t, "fleetdrill", words[0])
			rcode, rout, rerrs := runCLI(t, words[1:]...)
			require.NotEqual(t, exitOK, rcode, "%s passes:\n%s%s", m[1], rout, rerrs)
			if tt.sameOutput {
				require.Equal(t, code, rcode, "%s", m[1])
				require.Equal(t, out, rout, "%s prints another report", m[1])
				require.Equal(t, errs, rerrs, "%s fails otherwise", m[1])
				return
			}
			require.Contains(t, rout+rerrs, tt.wantRerun, "%s", m[1])
		})
	}
}
