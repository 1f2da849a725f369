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

// TestPlanVerifyReplaysEveryCase: plan prints a verify command for every case it
// checked — the healthy run and each --survive fault — each with one
// expect; run as printed, each passes, as the plan says the fleet does.
func TestPlanVerifyReplaysEveryCase(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on PATH")
	}
	const fault = "regional-outage region=us-east at=5m for=5m"
	code, out, errs := runCLI(t, "plan", "default", "--demand", "1", "--survive", fault,
		"--set", "duration=10m", "--set", "warmup=1m", "--set", `expect=["residency_violations == 0"]`)
	require.Equal(t, exitOK, code, "%s%s", out, errs)
	lines := regexp.MustCompile(`(?m)^\s*verify(?: through ([^:]*))?: (fleetdrill .*)$`).FindAllStringSubmatch(out, -1)
	require.Len(t, lines, 2, "one verify command per case (healthy, the outage):\n%s", out)
	require.Empty(t, lines[0][1])
	require.Equal(t, fault, lines[1][1])
	for _, l := range lines {
		words := shellWords(t, l[2])
		var expects, faults []string
		for i, w := range words {
			if i > 0 && words[i-1] == "--set" {
				switch {
				case strings.HasPrefix(w, "expect"):
					expects = append(expects, w)
				case strings.HasPrefix(w, "faults="):
					faults = append(faults, w)
				}
			}
		}
		require.Len(t, expects, 1, "one expect in %s", l[2])
		if l[1] != "" {
			require.Len(t, faults, 1, "%s", l[2])
			require.Contains(t, faults[0], fault, "the verify command runs the fault it survived")
		}
		rcode, rout, rerrs := runCLI(t, words[1:]...)
		require.Equal(t, exitOK, rcode, "%s fails:\n%s%s", l[2], rout, rerrs)
	}
}
