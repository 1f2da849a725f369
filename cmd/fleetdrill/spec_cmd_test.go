package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runSpecCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newSpecCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

func exitCode(err error) int {
	var ec exitCoder
	if err == nil {
		return exitOK
	}
	if asExitCoder(err, &ec) {
		return ec.ExitCode()
	}
	return -1
}

func TestSpecCmd(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	pass := write("pass.feature", "Feature: f\n  Scenario: s\n    Given the fleet \"default\"\n    Then no request leaves its jurisdiction\n")
	fail := write("fail.feature", "Feature: f\n  Scenario: s\n    Given the fleet \"default\"\n    Then interactive p99 TTFT stays below 1ms\n")
	// A @live scenario whose fault the live harness refuses up front: the
	// spec fails without starting a container.
	live := write("live.feature", "Feature: f\n  @live\n  Scenario: s\n    Given the fleet \"default\"\n"+
		"    When the fault \"cold-start-storm pool=use-h100-8b at=1m\" is injected\n    Then every request is accounted for\n")

	out, err := runSpecCmd(t, pass, "--format", "progress")
	require.Equal(t, exitOK, exitCode(err), out)
	out, err = runSpecCmd(t, fail, "--format", "pretty,junit:"+filepath.Join(dir, "j.xml"))
	require.Equal(t, exitFailed, exitCode(err), out)
	require.Contains(t, out, "reproduce: fleetdrill run default")
	require.FileExists(t, filepath.Join(dir, "j.xml"))
	// JUnit alone still tells the console that the specs ran and why one failed.
	out, err = runSpecCmd(t, fail, "--format", "junit:"+filepath.Join(dir, "k.xml"))
	require.Equal(t, exitFailed, exitCode(err), out)
	require.Contains(t, out, "1 scenarios (1 failed)")
	require.Contains(t, out, "reproduce: fleetdrill run default")
	require.Contains(t, out, "junit report written to "+filepath.Join(dir, "k.xml"))
	require.NotContains(t, out, "<testsuites", "the XML goes to the file only")
	_, err = runSpecCmd(t, pass, "--format", "prety")
	require.Equal(t, exitInvalid, exitCode(err))
	require.ErrorContains(t, err, `unknown format "prety"`)
	out, err = runSpecCmd(t, live, "--tags", "@live")
	require.Equal(t, exitFailed, exitCode(err), out)
	require.Contains(t, out, "reproduce with: fleetdrill run default --live")
	_, err = runSpecCmd(t, filepath.Join(dir, "missing.feature"))
	require.Equal(t, exitInvalid, exitCode(err))
	out, err = runSpecCmd(t, "--list")
	require.NoError(t, err)
	require.Contains(t, out, "region us-east goes down at 10m for 15m")
}

// TestSpecHelpAgreesWithTheDocsOnLive: --help and docs/specs.md both say
// that @live scenarios run on the live harness, left out by default and
// selected with --tags @live (the help once said they were pending).
func TestSpecHelpAgreesWithTheDocsOnLive(t *testing.T) {
	help := strings.Join(strings.Fields(newSpecCmd().Long), " ")
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "specs.md"))
	require.NoError(t, err)
	doc := strings.Join(strings.Fields(string(data)), " ")
	for _, tc := range []struct{ help, doc string }{
		{"@live scenarios run on the live harness (docs/live.md)", "`@live` scenarios run on the live harness (docs/live.md)"},
		{"the default filter is ~@live: select them with --tags @live", "the default filter is `~@live`; select them with `--tags @live`"},
		{"reproduces with fleetdrill run --live", "reproduces with `fleetdrill run ... --live`"},
		{"need a Docker engine", "need a Docker engine"},
	} {
		require.Contains(t, help, tc.help)
		require.Contains(t, doc, tc.doc)
	}
	require.NotContains(t, help, "reported as pending")
}
