package latency

// The converter of the kernel tables in testdata/kernels/: op-level measurements of
// vLLM's kernels per GPU, published by the AIConfigurator project
// (github.com/ai-dynamo/aiconfigurator, Apache-2.0) as Parquet files. It
// runs only when FLEETDRILL_AIC_GIT names a clone's git directory (the
// search tool's mirror is one):
//
//	FLEETDRILL_AIC_GIT=/work/.mirror/ai-dynamo+aiconfigurator/repo \
//	  go test ./twin/latency -run TestConvertAIConfiguratorKernels
//
// It reads the files at aicCommit (never the working tree), keeps the rows
// the step-time model reads and writes them as CSV; testdata/kernels/README.md says
// what each file holds. A hand edit of a CSV is undone by the next run.

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"
)

// aicCommit is the AIConfigurator commit the tables come from.
const aicCommit = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"

// aicVersion is the vLLM version whose kernels were measured: the nearest
// to the 0.15.1 of the train/val runs that all three GPUs have.
const aicVersion = "0.14.0"

// aicGPUs maps AIConfigurator's system names to ours.
var aicGPUs = map[string]string{"h100_sxm": "h100", "a100_sxm": "a100", "l40s": "l40s"}

type aicTable struct {
	op, file string
	cols     []string                       // the source columns written, in order (renamed by head)
	head     []string                       // the CSV header
	keep     func(r map[string]string) bool // nil keeps every row
}

var aicTables = []aicTable{
	{op: "gemm", file: "gemm_perf",
		cols: []string{"gemm_dtype", "m", "n", "k", "latency"},
		head: []string{"dtype", "m", "n", "k", "us"},
		keep: func(r map[string]string) bool {
			n, _ := strconv.Atoi(r["n"])
			k, _ := strconv.Atoi(r["k"])
			// fp8_block is DeepSeek-style block scaling, which no model here
			// uses; shapes below 256 or at 65,536 are no layer of ours.
			return (r["gemm_dtype"] == "bfloat16" || r["gemm_dtype"] == "fp8") && n >= 256 && k >= 256 && n < 65536 && k < 65536
		}},
	{op: "attention", file: "generation_attention_perf",
		cols: []string{"kv_cache_dtype", "batch_size", "step", "num_heads", "num_key_value_heads", "head_dim", "latency"},
		head: []string{"kv_dtype", "batch", "kv_len", "heads", "kv_heads", "head_dim", "us"}},
	{op: "attention", file: "context_attention_perf",
		cols: []string{"kv_cache_dtype", "batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "latency"},
		head: []string{"kv_dtype", "batch", "tokens", "heads", "kv_heads", "head_dim", "us"}},
	{op: "comm", file: "custom_allreduce_perf",
		cols: []string{"num_gpus", "message_size", "latency"},
		head: []string{"tp", "bytes", "us"},
		// The CUDA-graph variant: vLLM captures decode steps in graphs.
		keep: func(r map[string]string) bool { return r["backend"] == "vllm_graph" }},
	{op: "moe", file: "moe_perf",
		cols: []string{"moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size", "latency"},
		head: []string{"dtype", "tokens", "hidden", "inter", "topk", "experts", "tp", "ep", "us"},
		// One routing skew (the one all three GPUs have: a near-uniform
		// power law, as trained routers give), 16-bit and FP8 weights.
		keep: func(r map[string]string) bool {
			return r["distribution"] == "power_law_1.01" && (r["moe_dtype"] == "bfloat16" || r["moe_dtype"] == "fp8")
		}},
}

func TestConvertAIConfiguratorKernels(t *testing.T) {
	gitDir := os.Getenv("FLEETDRILL_AIC_GIT")
	if gitDir == "" {
		t.Skip("FLEETDRILL_AIC_GIT is not set: the kernel tables in testdata/kernels/ are converted only on demand")
	}
	for sys, ours := range aicGPUs {
		for _, tb := range aicTables {
			path := fmt.Sprintf("aic-core/src/aiconfigurator_core/systems/data/%s/%s/vllm/%s/%s.parquet", sys, tb.op, aicVersion, tb.file)
			raw, err := exec.Command("git", "--git-dir", gitDir, "show", aicCommit+":"+path).Output()
			require.NoError(t, err, "git show %s", path)
			out, n := convertParquet(t, raw, tb)
			require.Positive(t, n, "%s: no row kept", path)
			name := filepath.Join("testdata", "kernels", ours+"_"+tb.file+".csv")
			require.NoError(t, os.WriteFile(name, out, 0o644))
			t.Logf("%s: %d rows from %s", name, n, path)
		}
	}
}

// convertParquet keeps a table's rows and columns, latency in µs (the
// source's is ms).
func convertParquet(t *testing.T, raw []byte, tb aicTable) ([]byte, int) {
	pf, err := parquet.OpenFile(bytes.NewReader(raw), int64(len(raw)))
	require.NoError(t, err)
	var names []string
	for _, f := range pf.Schema().Fields() {
		names = append(names, f.Name())
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	require.NoError(t, w.Write(tb.head))
	r := parquet.NewReader(pf)
	rows := make([]parquet.Row, 64)
	kept := 0
	for {
		n, err := r.ReadRows(rows)
		for _, row := range rows[:n] {
			rec := map[string]string{}
			for i, v := range row {
				if i < len(names) && !v.IsNull() {
					rec[names[i]] = v.String()
				}
			}
			if tb.keep != nil && !tb.keep(rec) {
				continue
			}
			var out []string
			for _, c := range tb.cols {
				v, ok := rec[c]
				require.True(t, ok, "column %s missing", c)
				if c == "latency" {
					ms, err := strconv.ParseFloat(v, 64)
					require.NoError(t, err)
					v = strconv.FormatFloat(ms*1000, 'g', 5, 64)
				}
				if c == "gemm_dtype" || c == "moe_dtype" || c == "kv_cache_dtype" {
					v = map[string]string{"bfloat16": "bf16", "fp8": "fp8"}[v]
				}
				out = append(out, v)
			}
			require.NoError(t, w.Write(out))
			kept++
		}
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	w.Flush()
	return buf.Bytes(), kept
}
