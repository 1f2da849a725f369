package benchmark

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goodDoc is a valid experiment as a generic document, for cases to break
// one field at a time.
func goodDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{
	  "name": "64-qwen2.5-7b-tp1", "gpu": "H100", "tensor_parallel": 1,
	  "model_config": "model_configs/qwen2.5-7b-instruct.json", "precision": "fp16",
	  "engine": {"max_num_seqs": 128, "max_num_batched_tokens": 2048, "max_model_len": 4096,
	             "total_kv_blocks": 36000, "block_size": 16, "prefix_caching": true},
	  "workload": {"arrivals": "poisson", "stages": [{"rate": 8, "duration_s": 600}, {"rate": 20, "duration_s": 600}],
	               "shared_prefix": {"system_prompt_len": 100, "question_len": 447,
	                                 "output_len": 248, "num_unique_system_prompts": 9}},
	  "measured_ms": {"-1": {"ttft_mean": 30, "ttft_p90": 40, "ttft_p99": 50, "e2e_mean": 2000},
	                  "0": {"ttft_mean": 25}, "1": {"itl_mean": 7}}}`), &doc))
	return doc
}

// at returns the object holding the last element of a dotted path, creating
// nothing: the cases only touch fields goodDoc has, or add a key to an
// object it has.
func at(doc map[string]any, path string) (map[string]any, string) {
	parts := strings.Split(path, ".")
	obj := doc
	for _, p := range parts[:len(parts)-1] {
		if i := strings.IndexByte(p, '['); i >= 0 {
			n, _ := strconv.Atoi(p[i+1 : len(p)-1])
			obj = obj[p[:i]].([]any)[n].(map[string]any)
			continue
		}
		obj = obj[p].(map[string]any)
	}
	return obj, parts[len(parts)-1]
}

func set(path string, v any) func(map[string]any) {
	return func(doc map[string]any) {
		obj, key := at(doc, path)
		obj[key] = v
	}
}

func del(path string) func(map[string]any) {
	return func(doc map[string]any) {
		obj, key := at(doc, path)
		delete(obj, key)
	}
}

// TestParseProblems: each broken field gets a problem that names the file,
// the field path and what to write instead.
func TestParseProblems(t *testing.T) {
	for _, tt := range []struct {
		name   string
		edit   []func(map[string]any)
		raw    string // used instead of an edited goodDoc when set
		want   []string
		absent []string // problems that must not be reported alongside
	}{
		{name: "unknown field suggests", edit: []func(map[string]any){set("modle_config", "x")},
			want: []string{"bench/64.json: modle_config: unknown field; did you mean model_config?"}},
		{name: "unknown engine field", edit: []func(map[string]any){set("engine.max_num_seq", 1)},
			want: []string{"engine.max_num_seq: unknown field; did you mean max_num_seqs"}},
		{name: "unknown stage field", edit: []func(map[string]any){set("workload.stages[1].duration", 600)},
			want: []string{"workload.stages[1].duration: unknown field; did you mean duration_s"}},
		{name: "extra field in the wrong object", edit: []func(map[string]any){set("workload.num_users_per_system_prompt", 5)},
			want: []string{"workload.num_users_per_system_prompt: unknown field; it belongs in workload.shared_prefix"}},
		{name: "metric outside a stage", edit: []func(map[string]any){set("measured_ms.ttft_mean", 3)},
			want: []string{`measured_ms.ttft_mean: unknown stage`}},
		{name: "engine field at the top", edit: []func(map[string]any){set("block_size", 16)},
			want: []string{"block_size: unknown field; it belongs in engine"}},
		{name: "missing name", edit: []func(map[string]any){del("name")},
			want: []string{"bench/64.json: name: missing; want a name"}},
		{name: "name with a space", edit: []func(map[string]any){set("name", "my run")},
			want: []string{`name: got "my run", want letters, digits`}},
		{name: "empty gpu", edit: []func(map[string]any){set("gpu", "")},
			want: []string{`gpu: got "", want the GPU model`}},
		{name: "tensor_parallel zero", edit: []func(map[string]any){set("tensor_parallel", 0)},
			want: []string{"bench/64.json: tensor_parallel: got 0, want >= 1"}},
		{name: "tensor_parallel fraction", edit: []func(map[string]any){set("tensor_parallel", 1.5)},
			want: []string{"tensor_parallel: got 1.5, want a whole number, written without a fraction or exponent"}},
		{name: "tensor_parallel text", edit: []func(map[string]any){set("tensor_parallel", "2")},
			want: []string{`tensor_parallel: got "2", want a whole number`}},
		{name: "dp zero", edit: []func(map[string]any){set("dp", 0)},
			want: []string{"dp: got 0, want >= 1"}},
		{name: "huge count", edit: []func(map[string]any){set("engine.max_num_seqs", 1e12)},
			want: []string{"engine.max_num_seqs: got 1000000000000, out of range; want at most 2147483647"}},
		{name: "precision", edit: []func(map[string]any){set("precision", "int4")},
			want: []string{`precision: got "int4", want one of fp16, bf16, fp8`}},
		{name: "max_num_seqs zero", edit: []func(map[string]any){set("engine.max_num_seqs", 0)},
			want: []string{"engine.max_num_seqs: got 0, want >= 1"}},
		{name: "block_size zero", edit: []func(map[string]any){set("engine.block_size", 0)},
			want: []string{"engine.block_size: got 0, want >= 1"}},
		{name: "total_kv_blocks negative", edit: []func(map[string]any){set("engine.total_kv_blocks", -1)},
			want: []string{"engine.total_kv_blocks: got -1, want >= 0"}},
		{name: "prefix_caching text", edit: []func(map[string]any){set("engine.prefix_caching", "yes")},
			want: []string{`engine.prefix_caching: got "yes", want true or false`}},
		{name: "missing prefix_caching", edit: []func(map[string]any){del("engine.prefix_caching")},
			want: []string{"engine.prefix_caching: missing; want true or false"}},
		{name: "engine not an object", edit: []func(map[string]any){set("engine", []any{1})},
			want:   []string{"engine: got [1], want an object"},
			absent: []string{"engine.max_num_seqs"}},
		{name: "arrivals", edit: []func(map[string]any){set("workload.arrivals", "bursty")},
			want: []string{`workload.arrivals: got "bursty", want poisson or constant`}},
		{name: "no stages", edit: []func(map[string]any){set("workload.stages", []any{})},
			want:   []string{"workload.stages: got [], want at least one stage"},
			absent: []string{"unknown stage"}},
		{name: "stages not a list", edit: []func(map[string]any){set("workload.stages", map[string]any{"rate": 1})},
			want: []string{"workload.stages: got {\"rate\":1}, want a list"}},
		{name: "rate zero", edit: []func(map[string]any){set("workload.stages[1].rate", 0)},
			want: []string{"bench/64.json: workload.stages[1].rate: got 0, want a finite number > 0"}},
		{name: "duration negative", edit: []func(map[string]any){set("workload.stages[0].duration_s", -5)},
			want: []string{"workload.stages[0].duration_s: got -5, want a finite number > 0"}},
		{name: "missing rate", edit: []func(map[string]any){del("workload.stages[0].rate")},
			want:   []string{"workload.stages[0].rate: missing; want the mean arrival rate"},
			absent: []string{"got 0"}},
		{name: "rate overflows", raw: strings.Replace(string(mustJSON(t, goodDoc(t))), `"rate":8`, `"rate":1e400`, 1),
			want: []string{"workload.stages[0].rate: got 1e400, want a finite number"}},
		{name: "output_len zero", edit: []func(map[string]any){set("workload.shared_prefix.output_len", 0)},
			want: []string{"workload.shared_prefix.output_len: got 0, want >= 1"}},
		{name: "no prompt", edit: []func(map[string]any){set("workload.shared_prefix.system_prompt_len", 0), set("workload.shared_prefix.question_len", 0)},
			want: []string{"workload.shared_prefix.question_len: got 0, want >= 1 when system_prompt_len is 0"}},
		{name: "no shared_prefix", edit: []func(map[string]any){del("workload.shared_prefix")},
			want:   []string{"workload.shared_prefix: missing"},
			absent: []string{"output_len"}},
		{name: "num_unique_system_prompts zero", edit: []func(map[string]any){set("workload.shared_prefix.num_unique_system_prompts", 0)},
			want: []string{"workload.shared_prefix.num_unique_system_prompts: got 0, want >= 1"}},
		{name: "request longer than max_model_len", edit: []func(map[string]any){set("engine.max_model_len", 512)},
			want: []string{"workload.shared_prefix: system_prompt_len + question_len + output_len = 795 tokens exceeds engine.max_model_len 512"}},
		{name: "seed fraction", edit: []func(map[string]any){set("workload.seed", 1.5)},
			want: []string{"workload.seed: got 1.5, want a whole number"}},
		{name: "num_requests negative", edit: []func(map[string]any){set("workload.num_requests", -1)},
			want: []string{"workload.num_requests: got -1, want >= 0"}},
		{name: "stage out of range", edit: []func(map[string]any){set("measured_ms.2", map[string]any{})},
			want: []string{`measured_ms["2"]: unknown stage; want "-1" (the whole run) or an index into workload.stages (0 to 1)`}},
		{name: "stage spelled with a zero", edit: []func(map[string]any){set("measured_ms.01", map[string]any{})},
			want: []string{`measured_ms["01"]: unknown stage`}},
		{name: "stage by name", edit: []func(map[string]any){set("measured_ms.whole", map[string]any{})},
			want: []string{`measured_ms.whole: unknown stage`}},
		{name: "unknown metric", edit: []func(map[string]any){set("measured_ms.0.ttft_p95", 3)},
			want: []string{`measured_ms["0"].ttft_p95: unknown field; did you mean ttft_p90, ttft_p99`}},
		{name: "negative metric", edit: []func(map[string]any){set("measured_ms.0.ttft_mean", -1)},
			want: []string{`measured_ms["0"].ttft_mean: got -1, want a finite number >= 0 (milliseconds)`}},
		{name: "metric as text", edit: []func(map[string]any){set("measured_ms.-1.e2e_mean", "fast")},
			want: []string{`measured_ms["-1"].e2e_mean: got "fast", want a number`}},
		{name: "percentiles decrease", edit: []func(map[string]any){set("measured_ms.-1.ttft_p99", 35)},
			want: []string{`measured_ms["-1"].ttft_p99: got 35, want >= ttft_p90 (40): percentiles cannot decrease`}},
		{name: "e2e below ttft", edit: []func(map[string]any){set("measured_ms.-1.e2e_mean", 20)},
			want: []string{`measured_ms["-1"].e2e_mean: got 20, want >= ttft_mean (30)`}},
		{name: "metrics not an object", edit: []func(map[string]any){set("measured_ms.0", 25)},
			want: []string{`measured_ms["0"]: got 25, want an object`}},
		{name: "null value", edit: []func(map[string]any){set("source", nil)},
			want: []string{"source: got null, want a string"}},
		{name: "repeated field", raw: `{"name": "a", "name": "b"}`,
			want: []string{"bench/64.json: name: given twice; keep one"}},
		{name: "syntax error", raw: "{\n  \"name\": \"a\",\n  \"gpu\" \"H100\"\n}",
			want: []string{"bench/64.json: line 3, column 9: not valid JSON"}},
		{name: "trailing data", raw: string(mustJSON(t, goodDoc(t))) + " {}",
			want: []string{"bench/64.json: line 1"}},
		{name: "not an object", raw: `[1, 2]`,
			want: []string{"bench/64.json: got [1, 2], want an object"}},
		{name: "every problem at once", edit: []func(map[string]any){set("gpu", ""), set("workload.stages[1].rate", -1), set("colour", "red")},
			want: []string{"colour: unknown field", "gpu: got", "workload.stages[1].rate: got -1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.raw)
			if tt.raw == "" {
				doc := goodDoc(t)
				for _, edit := range tt.edit {
					edit(doc)
				}
				data = mustJSON(t, doc)
			}
			e, err := Parse("bench/64.json", data)
			require.Error(t, err)
			require.Nil(t, e)
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "error %T, want *ValidationError", err)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
			for _, a := range tt.absent {
				require.NotContains(t, err.Error(), a)
			}
			for _, p := range ve.Problems {
				require.Equal(t, "bench/64.json", p.File, "every problem names the file: %s", p)
			}
		})
	}
}

func TestGoodDocParses(t *testing.T) {
	_, err := Parse("bench/64.json", mustJSON(t, goodDoc(t)))
	require.NoError(t, err)
}

func TestValidateWithoutFile(t *testing.T) {
	e := &Experiment{Name: "x", GPU: "H100", TensorParallel: 1, DP: 1, ModelConfig: "m.json", Precision: "fp8",
		Engine:   Engine{MaxNumSeqs: 1, MaxNumBatchedTokens: 1, MaxModelLen: 100, BlockSize: 16},
		Workload: Workload{Arrivals: "constant", Stages: []Stage{{Rate: 1, DurationS: 1}}, SharedPrefix: SharedPrefix{QuestionLen: 1, OutputLen: 1, NumUniqueSystemPrompts: 1}},
	}
	require.NoError(t, e.Validate())
	e.DP = 0
	e.Measured = Measured{3: {}}
	err := e.Validate()
	require.EqualError(t, err, "dp: got 0, want >= 1\n"+
		`measured_ms["3"]: unknown stage; want "-1" (the whole run) or an index into workload.stages (0 to 0)`)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}
