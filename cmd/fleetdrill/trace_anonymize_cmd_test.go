package main

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runAnonymize runs `fleetdrill trace anonymize args...` on the command
// alone.
func runAnonymize(t *testing.T, args ...string) (code int, stdout, stderr string) {
	return runCommand(t, newTraceAnonymizeCmd(), args...)
}

const (
	cmdCanaryPrompt = "CANARY-PROMPT:Wq2zP7xK@ssn=078-05-1120, \"quoted\"\nsecond line"
	cmdCanaryMeta   = "CANARY-META:203.0.113.77"
)

var cmdRawIDs = []string{"ORG-raw-initech-5521", "USER-raw-carol-7781", "USER-raw-dave-1102", "CONV-raw-77ee99aa", "CONV-raw-0b1c2d3e"}

// anonNoLeak fails if b holds a canary, a piece of one 8 bytes or longer, or a
// raw id.
func anonNoLeak(t *testing.T, what string, b []byte, canaries, ids []string) {
	t.Helper()
	for _, c := range canaries {
		for n := 8; n <= len(c); n++ {
			for j := 0; j+n <= len(c); j++ {
				require.False(t, bytes.Contains(b, []byte(c[j:j+n])), "%s leaks %q:\n%s", what, c[j:j+n], b)
			}
		}
	}
	for _, id := range ids {
		require.False(t, bytes.Contains(b, []byte(id)), "%s leaks raw id %q:\n%s", what, id, b)
	}
}

func writeAnonFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
	return p
}

func canaryCSV() string {
	q := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	var b strings.Builder
	b.WriteString("timestamp,org_id,user,conversation_id,model,tier,prompt_tokens,completion_tokens,prompt,metadata\n")
	for i := range 4 {
		tokens := "120"
		if i == 2 {
			tokens = "n/a"
		}
		b.WriteString("2024-05-01T12:00:0" + string(rune('0'+i)) + "Z," + cmdRawIDs[0] + "," + cmdRawIDs[1+i%2] + "," + cmdRawIDs[3+i%2] +
			",llama-8b,silver," + tokens + ",30," + q(cmdCanaryPrompt) + "," + q(`{"ip":"`+cmdCanaryMeta+`"}`) + "\n")
	}
	return b.String()
}

func canaryJSONL(t *testing.T) string {
	var b strings.Builder
	for i := range 4 {
		obj := map[string]any{
			"timestamp": 1714564800000 + i*250, "org_id": cmdRawIDs[0], "user": cmdRawIDs[1+i%2], "conversation_id": cmdRawIDs[3+i%2],
			"model": "llama-8b", "usage": map[string]any{"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
			"messages": []any{map[string]any{"role": "user", "content": cmdCanaryPrompt}}, "metadata": map[string]any{"ip": cmdCanaryMeta},
		}
		if i == 2 {
			obj["usage"] = map[string]any{"prompt_tokens": cmdCanaryPrompt, "completion_tokens": 30}
		}
		line, err := json.Marshal(obj)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestTraceAnonymizeCanary is the product issue's test, end to end: no
// piece of the prompt or metadata, no raw id and no byte of the key
// reaches OUT, stdout, stderr or the JSON report, over CSV and JSONL.
func TestTraceAnonymizeCanary(t *testing.T) {
	for _, tt := range []struct {
		name, file, data string
		flags            []string
	}{
		{"csv", "gateway.csv", canaryCSV(), []string{"--tenant-col", "org_id", "--session-col", "conversation_id", "--class-col", "tier"}},
		{"jsonl", "gateway.jsonl", canaryJSONL(t), []string{"--tenant-col", "org_id", "--session-col", "conversation_id",
			"--time-format", "unix-ms", "--input-col", "usage.prompt_tokens", "--output-col", "usage.completion_tokens"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			in := writeAnonFile(t, dir, tt.file, tt.data)
			out, key, report := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "anon.key"), filepath.Join(dir, "report.json")
			args := append([]string{in, out, "--new-key-file", key, "--report", report, "--skip-bad-rows", "--resolution", "1s"}, tt.flags...)
			code, stdout, stderr := runAnonymize(t, args...)
			require.Equal(t, exitOK, code, stderr)

			keyBytes, err := os.ReadFile(key)
			require.NoError(t, err)
			require.Len(t, keyBytes, 32)
			ids := append(append([]string{}, cmdRawIDs...), hex.EncodeToString(keyBytes), hex.EncodeToString(keyBytes[:8]))
			outBytes, err := os.ReadFile(out)
			require.NoError(t, err)
			repBytes, err := os.ReadFile(report)
			require.NoError(t, err)
			canaries := []string{cmdCanaryPrompt, cmdCanaryMeta, string(keyBytes)}
			anonNoLeak(t, "OUT", outBytes, canaries, ids)
			anonNoLeak(t, "stdout", []byte(stdout), canaries, ids)
			anonNoLeak(t, "stderr", []byte(stderr), canaries, ids)
			anonNoLeak(t, "report", repBytes, canaries, ids)

			require.Equal(t, 3, strings.Count(string(outBytes), "\n"))
			require.Regexp(t, regexp.MustCompile(`"user":"u-[0-9a-f]{16}"`), string(outBytes))
			require.Contains(t, stdout, "rows: 4 read, 3 written, 1 skipped")
			require.Contains(t, stdout, "dropped:")
			require.Contains(t, stdout, "metadata")
			require.Contains(t, stderr, "column "+map[string]string{"csv": "prompt_tokens", "jsonl": "usage.prompt_tokens"}[tt.name]+": not a non-negative integer")
			require.Contains(t, stderr, "wrote a new 32-byte key to "+key)
			var rep struct {
				Rows    struct{ Read, Written, Skipped int }
				Dropped []struct{ Column string }
			}
			require.NoError(t, json.Unmarshal(repBytes, &rep))
			require.Equal(t, 3, rep.Rows.Written)

			// Again with the key: the same output, byte for byte.
			out2 := filepath.Join(dir, "out2.jsonl")
			code, _, stderr = runAnonymize(t, append([]string{in, out2, "--key-file", key, "--skip-bad-rows", "--resolution", "1s"}, tt.flags...)...)
			require.Equal(t, exitOK, code, stderr)
			again, err := os.ReadFile(out2)
			require.NoError(t, err)
			require.Equal(t, string(outBytes), string(again))

			// Without --skip-bad-rows: exit 2, no OUT, and the message
			// names the line and column but no cell.
			out3 := filepath.Join(dir, "out3.jsonl")
			code, stdout, stderr = runAnonymize(t, append([]string{in, out3, "--key-file", key}, tt.flags...)...)
			require.Equal(t, exitInvalid, code)
			require.Contains(t, stderr, "trace anonymize: line ")
			anonNoLeak(t, "stdout", []byte(stdout), canaries, ids)
			anonNoLeak(t, "stderr", []byte(stderr), canaries, ids)
			_, err = os.Stat(out3)
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

func TestTraceAnonymizeKeys(t *testing.T) {
	dir := t.TempDir()
	in := writeAnonFile(t, dir, "in.csv", "timestamp,prompt_tokens,completion_tokens\n2024-05-01T12:00:00Z,1,1\n")
	out := filepath.Join(dir, "out.jsonl")
	short := writeAnonFile(t, dir, "short.key", "only-twenty-bytes...")

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"short key", []string{in, out, "--key-file", short}, "key file " + short + ": key is 20 bytes, want at least 32"},
		{"no key", []string{in, out}, "give exactly one of --key-file K and --new-key-file K"},
		{"two keys", []string{in, out, "--key-file", short, "--new-key-file", filepath.Join(dir, "n.key")}, "give exactly one of"},
		{"existing new key", []string{in, out, "--new-key-file", short}, "already exists"},
		{"out is in", []string{in, in, "--new-key-file", filepath.Join(dir, "n2.key")}, "OUT is IN"},
		{"out is the key", []string{in, short, "--key-file", short}, "OUT or --report is the key file"},
		{"bad time format", []string{in, out, "--new-key-file", filepath.Join(dir, "n3.key"), "--time-format", "iso"}, `time format "iso"`},
		{"short pseudonyms", []string{in, out, "--new-key-file", filepath.Join(dir, "n4.key"), "--id-hex", "4"}, "want 8 to 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runAnonymize(t, tt.args...)
			require.Equal(t, exitInvalid, code)
			require.Contains(t, stderr, tt.want)
			_, err := os.Stat(out)
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	}
	// A usage error does not leave a new key behind.
	_, err := os.Stat(filepath.Join(dir, "n3.key"))
	require.ErrorIs(t, err, os.ErrNotExist)
	// The short key was not overwritten.
	b, err := os.ReadFile(short)
	require.NoError(t, err)
	require.Equal(t, "only-twenty-bytes...", string(b))
}

// TestTraceAnonymizeKnownFormat: an Azure trace is detected and read by
// internal/trace; OUT.gz is gzipped; --rebase and --bucket-tokens apply.
func TestTraceAnonymizeKnownFormat(t *testing.T) {
	dir := t.TempDir()
	in := writeAnonFile(t, dir, "azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"+
		"2023-11-16 18:17:03.9799600,374,44\r\n2023-11-16 18:17:04.5000000,1000,3\r\n2023-11-16 18:17:05.0000000,7,1")
	key := filepath.Join(dir, "k")
	require.NoError(t, os.WriteFile(key, bytes.Repeat([]byte{7}, 32), 0o600))
	out := filepath.Join(dir, "out.jsonl.gz")
	code, stdout, stderr := runAnonymize(t, in, out, "--key-file", key, "--bucket-tokens", "16", "--resolution", "500ms")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "anonymized "+in+" (azure) -> "+out)
	require.Contains(t, stdout, "every column the azure reader does not read")
	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	got, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, `{"t":0,"input":384,"output":48}
{"t":0.5,"input":1008,"output":16}
{"t":1,"input":16,"output":16}
`, string(got))

	// Mapping flags make it a gateway log, and the Azure header has none
	// of the default columns.
	code, _, stderr = runAnonymize(t, in, filepath.Join(dir, "o.jsonl"), "--key-file", key, "--tenant-col", "x")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, stderr, "header: no column timestamp for t; did you mean TIMESTAMP?")
	code, _, stderr = runAnonymize(t, in, filepath.Join(dir, "o.jsonl"), "--key-file", key, "--tenant-col", "x", "--format", "azure")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, stderr, "map a gateway log's columns; an azure trace's are fixed")
}
