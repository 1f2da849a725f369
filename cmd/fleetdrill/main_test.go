package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

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
		{"run says the twin is missing", []string{"run"}, exitInvalid, "", "has not landed yet"},
		{"run rejects two scenarios", []string{"run", "a", "b"}, exitInvalid, "", "accepts at most 1 arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tt.args, &out, &errb)
			require.Equal(t, tt.wantCode, code, "stderr: %s", errb.String())
			require.Contains(t, out.String(), tt.wantStdout)
			require.Contains(t, errb.String(), tt.wantStderr)
		})
	}
}
