package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunOpenMetrics(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, args ...string) []byte {
		t.Helper()
		path := filepath.Join(dir, name)
		args = append([]string{"run", "--set", "duration=5m", "--set", "warmup=1m", "--openmetrics", path}, args...)
		code, out, errs := runCLI(t, args...)
		require.Equal(t, exitOK, code, "stderr: %s", errs)
		require.Contains(t, out, "PASS", "the report is printed as usual")
		require.Contains(t, errs, "openmetrics: "+path+": ")
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.True(t, bytes.HasSuffix(b, []byte("\n# EOF\n")))
		return b
	}
	has := func(b []byte, sub string) bool { return bytes.Contains(b, []byte(sub)) }
	// A sample line ends with its timestamp, seconds as the encoder writes
	// them.
	at := func(t time.Time) string {
		return " " + strconv.FormatFloat(float64(t.UnixMilli())/1000, 'g', -1, 64) + "\n"
	}
	a := write("a.om")
	require.True(t, has(a, "# TYPE fleetdrill_requests counter\n"))
	require.True(t, has(a, "# TYPE gen_ai_server_time_to_first_token_seconds histogram\n"))
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.True(t, has(a, at(epoch)), "simulated 0 at 2026-01-01T00:00:00Z")
	require.True(t, has(a, at(epoch.Add(15*time.Second))), "then every 15s")
	require.True(t, bytes.Equal(a, write("b.om")), "the same run writes the same file")

	c := write("c.om", "--openmetrics-step", "1m", "--openmetrics-start", "2030-06-01T00:00:00Z")
	start := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	require.True(t, has(c, at(start)))
	require.True(t, has(c, at(start.Add(time.Minute))))
	require.False(t, has(c, at(start.Add(15*time.Second))), "no sample between minutes")
	require.False(t, has(c, at(epoch)))
	require.Less(t, len(c), len(a)/3)

	// The report is the same with the series as without.
	plain, withOM := filepath.Join(dir, "plain.json"), filepath.Join(dir, "om.json")
	code, _, errs := runCLI(t, "run", "--set", "duration=5m", "--set", "warmup=1m", "--json", plain)
	require.Equal(t, exitOK, code, errs)
	code, _, errs = runCLI(t, "run", "--set", "duration=5m", "--set", "warmup=1m", "--json", withOM, "--openmetrics", filepath.Join(dir, "d.om"))
	require.Equal(t, exitOK, code, errs)
	pj, err := os.ReadFile(plain)
	require.NoError(t, err)
	oj, err := os.ReadFile(withOM)
	require.NoError(t, err)
	cut := func(b []byte) string { s, _, _ := strings.Cut(string(b), `"run": {`); return s }
	require.Equal(t, cut(pj), cut(oj))
}

func TestRunOpenMetricsFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "x.om")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"step needs the file", []string{"--openmetrics-step", "5s"}, "need --openmetrics"},
		{"start needs the file", []string{"--openmetrics-start", "2030-01-01T00:00:00Z"}, "need --openmetrics"},
		{"bad start", []string{"--openmetrics", file, "--openmetrics-start", "yesterday"}, "--openmetrics-start"},
		{"zero step", []string{"--openmetrics", file, "--openmetrics-step", "0s"}, "at least 1ms"},
		{"sub-millisecond step", []string{"--openmetrics", file, "--openmetrics-step", "1500us"}, "whole number of milliseconds"},
		{"too many samples", []string{"--openmetrics", file, "--openmetrics-step", "1ms"}, "at most 100000"},
		{"not with --live", []string{"--live", "--openmetrics", file}, "does not combine with --live"},
		{"unwritable file", []string{"--set", "duration=5m", "--set", "warmup=1m", "--openmetrics", filepath.Join(dir, "no", "such", "dir.om")}, "--openmetrics: open"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := runCLI(t, append([]string{"run"}, tt.args...)...)
			require.Equal(t, exitInvalid, code, errs)
			require.Contains(t, errs, tt.want)
		})
	}
}

// --cpuprofile writes a profile pprof reads (gzip-compressed protobuf), and
// an unwritable path is refused as invalid input, naming the flag.
func TestRunCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.prof")
	code, _, errs := runCLI(t, "run", "--set", "duration=5m", "--set", "warmup=1m", "--cpuprofile", path)
	require.Equal(t, exitOK, code, "stderr: %s", errs)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, []byte{0x1f, 0x8b}), "a pprof profile is gzipped")

	code, _, errs = runCLI(t, "run", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "x.prof"))
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "--cpuprofile")
}
