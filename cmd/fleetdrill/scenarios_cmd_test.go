package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// runScenarios runs `fleetdrill scenarios ARGS` on the command alone.
func runScenarios(t *testing.T, args ...string) (stdout, stderr string, code int) {
	code, stdout, stderr = runCommand(t, newScenariosCmd(), args...)
	return stdout, stderr, code
}

func TestScenariosCmd(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	src, err := os.ReadFile("../../scenarios/testdata/minimal.good.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(good, src, 0o644))
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("schema: 2\nname: bad\nbogus: 1\n"), 0o644))

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{"list", []string{"list"}, exitOK, []string{"NAME", "DESCRIPTION", "default ", "mmc ", "eu-residency ", "Erlang C"}, nil},
		{"list takes no args", []string{"list", "x"}, exitInvalid, nil, []string{"unknown command"}},
		{"show", []string{"show", "mmc"}, exitOK, []string{"schema: 1\n", "name: mmc\n"}, nil},
		{"show unknown", []string{"show", "nope"}, exitInvalid, nil, []string{`no library scenario named "nope"`, "default"}},
		{"show needs a name", []string{"show"}, exitInvalid, nil, []string{"accepts 1 arg"}},
		{"validate a library name", []string{"validate", "mmc"}, exitOK, []string{"ok mmc\n"}, nil},
		{"validate a file", []string{"validate", good}, exitOK, []string{"ok " + good + "\n"}, nil},
		{
			"validate reports every problem and exits 2", []string{"validate", good, bad, "nope"}, exitInvalid,
			[]string{"ok " + good + "\n"},
			[]string{
				bad + ":1: schema: got 2, want 1",
				bad + `:3: bogus: unknown key "bogus"`,
				bad + ": regions: missing; want at least one entry",
				`no library scenario named "nope"`,
				"scenarios validate: 2 of 3 scenarios invalid",
			},
		},
		{
			"validate with --set", []string{"validate", "--set", "pools[0].replicas=-1", "--set", "seed=3", good}, exitInvalid, nil,
			[]string{good + " (--set pools[0].replicas=-1): pools[0].replicas: got -1, want >= 0"},
		},
		{"validate needs an argument", []string{"validate"}, exitInvalid, nil, []string{"requires at least 1 arg"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runScenarios(t, tt.args...)
			require.Equal(t, tt.wantCode, code, "stdout: %s\nstderr: %s", stdout, stderr)
			for _, s := range tt.wantStdout {
				require.Contains(t, stdout, s)
			}
			for _, s := range tt.wantStderr {
				require.Contains(t, stderr, s)
			}
		})
	}
}

func TestScenariosCmdShowPrintsTheLibrarySource(t *testing.T) {
	stdout, _, code := runScenarios(t, "show", "default")
	require.Equal(t, exitOK, code)
	want, err := os.ReadFile("../../scenarios/default.yaml")
	require.NoError(t, err)
	require.Equal(t, string(want), stdout)
}
