package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// runCommand runs one command alone (not through the root), so a test of a
// subcommand does not depend on its wiring, and returns its exit status as
// main would, with the error text appended to stderr.
func runCommand(t *testing.T, cmd *cobra.Command, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	var out, errb bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		errb.WriteString(err.Error())
		var ec exitCoder
		if !asExitCoder(err, &ec) {
			return exitInvalid, out.String(), errb.String()
		}
		return ec.ExitCode(), out.String(), errb.String()
	}
	return exitOK, out.String(), errb.String()
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCLI(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"version", []string{"version"}, exitOK, "fleetdrill ", ""},
		{"unknown command", []string{"bogus"}, exitInvalid, "", `unknown command "bogus"`},
		{"run default", []string{"run"}, exitOK, "PASS  residency_violations == 0", ""},
		{"run rejects two scenarios", []string{"run", "a", "b"}, exitInvalid, "", "accepts at most 1 arg"},
		{"run unknown scenario", []string{"run", "no-such-scenario"}, exitInvalid, "", "no-such-scenario"},
		{"run bad set", []string{"run", "--set", "pools.nope.replicas=2"}, exitInvalid, "", "pools.nope"},
		{"run invalid value", []string{"run", "--set", "policy.scheduler=lottery"}, exitInvalid, "", "lottery"},
		{"failing expectation exits 1", []string{"run", "--set", "expect[0]=interactive.ttft.p99 < 1ms",
			"--set", "duration=5m", "--set", "warmup=1m"}, exitFailed, "FAIL  interactive.ttft.p99 < 1ms", "reproduce with: fleetdrill run"},
		{"live options need --live", []string{"run", "--speed", "5"}, exitInvalid, "", "need --live"},
		{"a negative seed in the project's words", []string{"run", "--seed", "-1"}, exitInvalid, "", `--seed: got "-1", want a whole number from 0 to`},
		{"a speed that is not a number", []string{"tui", "--speed", "fast"}, exitInvalid, "", `--speed: got "fast", want a number`},
		{"a count that is not a whole number", []string{"compare", "--seeds", "2.5"}, exitInvalid, "", `--seeds: got "2.5", want a whole number`},
		{"live refuses what it cannot emulate", []string{"run", "--live", "--set",
			`faults=["cold-start-storm pool=use-h100-8b at=1m"]`}, exitInvalid, "", "cold-start storms have no live emulation"},
		{"live speed out of range", []string{"run", "--live", "--speed", "5000"}, exitInvalid, "", "speed 5000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tt.args...)
			require.Equal(t, tt.wantCode, code, "stderr: %s\nstdout: %s", errs, out)
			require.Contains(t, out, tt.wantStdout)
			require.Contains(t, errs, tt.wantStderr)
		})
	}
}

func TestRunJSONIsByteIdenticalOutsideRun(t *testing.T) {
	dir := t.TempDir()
	read := func(name string, seed string) map[string]json.RawMessage {
		path := filepath.Join(dir, name)
		code, _, errs := runCLI(t, "run", "--seed", seed, "--set", "duration=10m", "--json", path)
		require.Equal(t, exitOK, code, errs)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &m))
		require.Contains(t, m, "run")
		delete(m, "run")
		return m
	}
	a, b := read("a.json", "7"), read("b.json", "7")
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	require.Equal(t, string(ja), string(jb))
	c := read("c.json", "8")
	jc, _ := json.Marshal(c)
	require.NotEqual(t, string(ja), string(jc))
}

func TestScenariosCompat(t *testing.T) {
	code, out, errs := runCLI(t, "scenarios", "compat")
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "use-h100-8b   llama-3.1-8b   yes")
	require.Contains(t, out, "exceed 1×h100-sxm usable memory")

	code, _, errs = runCLI(t, "scenarios", "compat", "--set", "pools.use-h100-8b.driver=535.104")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "pools[0].driver")
}

func TestProgressBarStaysQuietForShortRuns(t *testing.T) {
	var buf bytes.Buffer
	progressBar(&buf, time.Now())(0.5)
	require.Empty(t, buf.String(), "runs under a second draw nothing")
	progressBar(&buf, time.Now().Add(-2*time.Second))(0.5)
	require.Equal(t, "\r[###############...............]  50% simulated", buf.String())
}

func TestDescribeBuild(t *testing.T) {
	stamped := func(version string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/fleetdrill/fleetdrill", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	rev := "bb3bb792e6580c1db45a6459f4eeaa358487f251"
	tests := []struct {
		name, ldflags string
		commit        string // make build's -X main.commit
		bi            *debug.BuildInfo
		want          string
	}{
		{"go build at a tag", "", "", stamped("v0.3.1", "vcs.revision", rev, "vcs.time", "2026-12-04T23:49:24Z", "vcs.modified", "false"),
			"fleetdrill v0.3.1 (commit " + rev + " of 2026-12-04T23:49:24Z)"},
		{"go build, changes not committed", "", "", stamped("v0.0.0-20261204234924-bb3bb792e658+dirty", "vcs.revision", rev, "vcs.modified", "true"),
			"fleetdrill v0.0.0-20261204234924-bb3bb792e658+dirty (commit " + rev + ", with uncommitted changes)"},
		{"devel with its commit", "", "", stamped("(devel)", "vcs.revision", rev),
			"fleetdrill (devel) (commit " + rev + ")"},
		{"go run stamps nothing", "", "", stamped("(devel)"),
			"fleetdrill (devel), no commit stamped: go run, go test, -buildvcs=false and git worktrees carry none; make build stamps it"},
		{"make build in a worktree", "", rev, stamped("(devel)"), "fleetdrill (devel) (commit " + rev + ")"},
		{"the toolchain's stamp wins over make build's", "", "0000000000000000000000000000000000000000",
			stamped("v0.3.1", "vcs.revision", rev, "vcs.modified", "false"), "fleetdrill v0.3.1 (commit " + rev + ")"},
		{"no build information", "", "", nil, "fleetdrill (devel), no commit stamped"},
		{"ldflags version wins", "1.2.3", "", stamped("(devel)", "vcs.revision", rev), "fleetdrill 1.2.3 (commit " + rev + ")"},
		{"ldflags version alone", "1.2.3", "", stamped("(devel)"), "fleetdrill 1.2.3"},
		{"installed from the proxy", "", "", stamped("v0.3.1"), "fleetdrill v0.3.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describeBuild(tt.ldflags, tt.commit, false, tt.bi)
			if strings.HasSuffix(tt.want, "stamped") {
				require.True(t, strings.HasPrefix(got, tt.want), got)
				return
			}
			require.Equal(t, tt.want, got)
		})
	}
	require.Equal(t, "fleetdrill (devel) (commit "+rev+", with uncommitted changes)", describeBuild("", rev, true, stamped("(devel)")),
		"make build from a work tree with changes")
}
