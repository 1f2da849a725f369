package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/trace"
	"github.com/fleetdrill/fleetdrill/traces"
)

// runTrace runs the CLI with the trace command wired in, whether or not
// root.go has done so yet.
func runTrace(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRootCmd(&out, &errb)
	if c, _, err := root.Find([]string{"trace"}); err != nil || c == root {
		root.AddCommand(newTraceCmd())
	}
	root.SetArgs(args)
	code = exitOK
	if err := root.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintf(&errb, "fleetdrill: %v\n", err)
		code = exitInvalid
		var ec exitCoder
		if asExitCoder(err, &ec) {
			code = ec.ExitCode()
		}
	}
	return code, out.String(), errb.String()
}

const sharedTraces = "../../../shared/traces"

// sharedTrace returns the staged trace rel (a path under shared/traces):
// the file beside the repository, else the binary's embedded copy of the
// same bytes (embedded:REL, which the command takes as it takes a file),
// else the test skips.
func sharedTrace(t *testing.T, rel string) string {
	t.Helper()
	path := filepath.Join(sharedTraces, rel)
	if _, err := os.Stat(path); err != nil {
		if traces.Has(rel) {
			return traces.Scheme + rel
		}
		t.Skipf("staged trace %s not found (%v) and not embedded: this test needs the shared/traces folder next to the repository", path, err)
	}
	return path
}

// TestTraceStatsPrintsREADMEFigures checks the printed statistics against
// shared/traces/README.md (internal/trace checks every figure; this checks
// that the command prints them as the README does).
func TestTraceStatsPrintsREADMEFigures(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"azure_llm_2023/AzureLLMInferenceTrace_code.csv", []string{
			"format     azure\n",
			"requests   8819\n",
			"span       2023-11-16 18:17:03.9799600 → 2023-11-16 19:14:19.9280160 (UTC)\n",
			"duration   3435.948056 s\n",
			"rate       2.56669 req/s",
			"input      mean 2047.848  p50 1469  p99 7436  min 3  max 7437  sum 18059974\n",
			"output     mean 27.883  p50 13  p99 252  min 6  max 1899  sum 245896\n",
			"peak/min   fixed 585 (bin from 18:31)  sliding 723 (window from 18:26:32.9976100)\n",
		}},
		{"azure_llm_2023/AzureLLMInferenceTrace_conv.csv", []string{
			"requests   19366\n", "duration   3501.721937 s\n", "rate       5.53042 req/s",
			"input      mean 1154.697  p50 1020  p99 4142  min 2  max 14050  sum 22361870\n",
			"output     mean 211.126  p50 129  p99 601  min 7  max 1000  sum 4088665\n",
			"peak/min   fixed 502 (bin from 18:43)  sliding 522 (window from 18:46:29.5587160)\n",
		}},
		{"mooncake_fast25/conversation_trace.jsonl", []string{
			"format     mooncake\n", "requests   12031\n", "duration   3536.999 s\n", "rate       3.40147 req/s",
			"input      mean 12035.061  p50 6909  p99 85401  min 891  max 126195  sum 144793823\n",
			"output     mean 342.619  p50 350  p99 1120  min 1  max 2000  sum 4122048\n",
			"peak/min   fixed 247 (bin from 2160 s)  sliding 260 (window from 2472 s)\n",
			"blocks     288500 total, 182790 distinct, 36.64% seen before, 36.64% prefix hits\n",
			"blocks/req mean 23.980  p50 14  p99 167  min 2  max 247  sum 288500\n",
		}},
		{"mooncake_fast25/synthetic_trace.jsonl", []string{
			"requests   3993\n", "duration   1022.025 s\n", "rate       3.90695 req/s",
			"input      mean 15325.477  p50 11587  p99 66458  min 13  max 191378  sum 61194628\n",
			"output     mean 149.119  p50 69  p99 769  min 1  max 893  sum 595432\n",
			"peak/min   fixed 273 (bin from 900 s)  sliding 280 (window from 904.425 s)\n",
			"blocks     121877 total, 43924 distinct, 63.96% seen before",
			"blocks/req mean 30.523  p50 23  p99 130",
		}},
		{"alibaba_gpu_v2023/openb_pod_list_gpuspec33.csv", []string{
			"jobs       8152 (sorted by creation_time)\n",
			"creation   span 12901761 s (149.33 days), 2.27 arrivals/hour\n",
			"num_gpu    1: 6989, 0: 1088, 8: 44, 2: 16, 4: 15\n",
			"sharing    3078 ", "gpu_spec   2388 constrained\n",
			"qos        LS: 4647, BE: 3398, Burstable: 100, Guaranteed: 7\n",
			"phase      Running: 5193, Failed: 1870, Pending: 897, Succeeded: 192\n",
			"scheduled  7255 (897 with empty scheduled_time)\n",
			"lifetime   mean 25839.4  p50 540  p99 99719  max 12537496 (s)\n",
			"wait       mean 61.3  p50 2  p99 908",
		}},
		{"alibaba_spot_gpu_v2026/node_info_df.csv", []string{
			"format     alibaba-spot-node\n", "nodes      4278, 10412 GPUs\n",
			"A100-SXM4-80GB      432   3456\n", "GPUs/node  1: 3396, 8: 872, 4: 10\n", "cores/node 128: 2947, 192: 1329, 126: 2\n",
		}},
		{"alibaba_gpu_v2023/openb_node_list_all_node.csv", []string{
			"nodes      1523, 6212 GPUs\n", "(CPU only)          310      0\n",
		}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			code, out, errs := runTrace(t, "trace", "stats", sharedTrace(t, tt.file))
			require.Equal(t, exitOK, code, errs)
			for _, w := range tt.want {
				require.Contains(t, out, w)
			}
		})
	}
}

func TestTraceStatsJSON(t *testing.T) {
	code, out, errs := runTrace(t, "trace", "stats", "--json", sharedTrace(t, "azure_llm_2023/AzureLLMInferenceTrace_code.csv"))
	require.Equal(t, exitOK, code, errs)
	var got struct {
		Format    string  `json:"format"`
		Requests  int     `json:"requests"`
		Start     string  `json:"start"`
		DurationS float64 `json:"duration_s"`
		Input     struct {
			P50 int `json:"p50"`
			P99 int `json:"p99"`
		} `json:"input_tokens"`
		PeakFixed struct {
			Count int    `json:"count"`
			Wall  string `json:"start_wall"`
		} `json:"peak_minute_fixed"`
		PerMinute []int `json:"per_minute"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, "azure", got.Format)
	require.Equal(t, 8819, got.Requests)
	require.Equal(t, "2023-11-16T18:17:03.97996Z", got.Start)
	require.Equal(t, 3435.948056, got.DurationS)
	require.Equal(t, 1469, got.Input.P50)
	require.Equal(t, 7436, got.Input.P99)
	require.Equal(t, 585, got.PeakFixed.Count)
	require.Equal(t, "2023-11-16T18:31:00Z", got.PeakFixed.Wall)
	require.Len(t, got.PerMinute, 58)
}

func TestTraceCommandErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
		return path
	}
	bad := write("bad.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,1,1\n2023-11-16 18:17:04.0000000,x,1\n2023-11-16 18:17:05.0000000,3,1\n")
	unknown := write("unknown.csv", "when,what\n1,2\n")
	pods := write("pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\np,1,1,1,1000,,LS,Running,0,1,0\n")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"stats needs a file", []string{"trace", "stats"}, exitInvalid, "", "accepts 1 arg(s), received 0"},
		{"stats missing file", []string{"trace", "stats", filepath.Join(dir, "nope.csv")}, exitInvalid, "", "no such file"},
		{"stats bad row", []string{"trace", "stats", bad}, exitInvalid, "", bad + `:3: ContextTokens: got "x", want a non-negative integer`},
		{"stats skips bad rows", []string{"trace", "stats", "--skip-bad-rows", bad}, exitOK, "requests   2\nskipped    1 bad rows\n", "skipped " + bad + ":3: ContextTokens"},
		{"stats unknown layout", []string{"trace", "stats", unknown}, exitInvalid, "", `unknown.csv:1: unrecognised trace: got "when,what", want one of: azure header`},
		{"stats unknown format", []string{"trace", "stats", "--format", "parquet", bad}, exitInvalid, "", `unknown trace format "parquet"`},
		{"convert a job list", []string{"trace", "convert", pods, filepath.Join(dir, "x.jsonl")}, exitInvalid, "", "alibaba-pod is a GPU job (pod) list, not a request trace"},
		{"convert bad row", []string{"trace", "convert", bad, filepath.Join(dir, "x.jsonl")}, exitInvalid, "", `bad.csv:3: ContextTokens: got "x", want a non-negative integer (--skip-bad-rows skips such rows)`},
		{"stats unknown embedded trace", []string{"trace", "stats", "embedded:azure_llm_2023/AzureLLMInferenceTrace_code.csv"}, exitInvalid, "",
			"embedded:azure_llm_2023/AzureLLMInferenceTrace_code.csv: no such embedded trace (did you mean embedded:azure_llm_2023/AzureLLMInferenceTrace_conv.csv?)"},
		{"list the embedded traces", []string{"trace", "list"}, exitOK,
			"embedded:azure_llm_2023/AzureLLMInferenceTrace_conv.csv\n  rows     19366\n  source   github.com/Azure/AzurePublicDataset", ""},
		{"convert onto itself", []string{"trace", "convert", bad, bad}, exitInvalid, "", "IN and OUT are the same file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runTrace(t, tt.args...)
			require.Equal(t, tt.wantCode, code, "stderr: %s\nstdout: %s", errs, out)
			require.Contains(t, out, tt.wantStdout)
			require.Contains(t, errs, tt.wantStderr)
		})
	}
	_, err := os.Stat(filepath.Join(dir, "x.jsonl"))
	require.ErrorIs(t, err, os.ErrNotExist, "a failed convert leaves no output")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasSuffix(e.Name(), ".tmp"), "temporary file %s left behind", e.Name())
	}
}

func TestTraceConvert(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "burst.csv")
	require.NoError(t, os.WriteFile(in, []byte("Timestamp,Session ID,Model,Request tokens,Response tokens,Total tokens,Log Type\n"+
		"5,s-1,ChatGPT,472,18,490,Conversation log\n"+
		"6,s-2,ChatGPT,bad,18,490,Conversation log\n"+
		"45.5,,GPT-4,1087,230,1317,API log\n"), 0o644))

	for _, name := range []string{"out.jsonl", "out.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, name)
			code, stdout, stderr := runTrace(t, "trace", "convert", "--skip-bad-rows", in, out)
			require.Equal(t, exitOK, code, stderr)
			require.Equal(t, fmt.Sprintf("wrote 2 records to %s (burstgpt → canonical), skipped 1 bad rows\n", out), stdout)
			require.Contains(t, stderr, `burst.csv:3: Request tokens: got "bad", want a non-negative integer`)
			require.Contains(t, stderr, "dropped raw tenant/user/session identifiers from 1 records")

			b, err := os.ReadFile(out)
			require.NoError(t, err)
			if strings.HasSuffix(name, ".gz") {
				zr, err := gzip.NewReader(bytes.NewReader(b))
				require.NoError(t, err)
				b, err = io.ReadAll(zr)
				require.NoError(t, err)
			}
			require.Equal(t,
				`{"t":5,"class":"Conversation log","model":"ChatGPT","input":472,"output":18}`+"\n"+
					`{"t":45.5,"class":"API log","model":"GPT-4","input":1087,"output":230}`+"\n",
				string(b))

			// The result is canonical and reads back.
			code, stdout, stderr = runTrace(t, "trace", "stats", out)
			require.Equal(t, exitOK, code, stderr)
			require.Contains(t, stdout, "format     "+trace.FormatCanonical+"\n")
			require.Contains(t, stdout, "requests   2\n")
		})
	}
}
