package benchmark

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
)

// The keys each object may hold, in the order Write puts them.
var (
	experimentKeys = []string{"name", "source", "gpu", "tensor_parallel", "dp", "model_config",
		"precision", "engine_version", "engine", "workload", "measured_ms"}
	engineKeys = []string{"max_num_seqs", "max_num_batched_tokens", "max_model_len",
		"total_kv_blocks", "block_size", "prefix_caching", "kv_cache_dtype", "enable_expert_parallel"}
	workloadKeys     = []string{"arrivals", "stages", "shared_prefix", "seed", "num_requests"}
	stageKeys        = []string{"rate", "duration_s"}
	sharedPrefixKeys = []string{"system_prompt_len", "question_len", "output_len",
		"num_unique_system_prompts", "num_users_per_system_prompt", "enable_multi_turn_chat"}
)

// Parse decodes and validates one experiment. name is the file's path: it
// prefixes every problem, and relative paths in the experiment resolve
// against its directory. Unknown fields, repeated fields, values of the
// wrong type and values out of range are all problems; on failure the error
// is a *ValidationError listing every one of them. Absent dp and
// engine.block_size are filled in (1 and DefaultBlockSize).
func Parse(name string, data []byte) (*Experiment, error) {
	var root json.RawMessage
	if err := json.Unmarshal(data, &root); err != nil {
		return nil, &ValidationError{Problems: []Problem{syntaxProblem(name, data, err)}}
	}
	w := newWalker(name)
	e := &Experiment{Dir: filepath.Dir(name)}
	w.experiment(e, root)
	// A stage index can only be checked against stages that decoded.
	stagesBad := w.reported("workload.stages")
	for _, p := range e.problems() {
		if w.reported(p.Path) || (stagesBad && stagePath.MatchString(p.Path)) {
			continue
		}
		p.File = name
		w.problems = append(w.problems, p)
	}
	if len(w.problems) > 0 {
		return nil, &ValidationError{Problems: w.problems}
	}
	return e, nil
}

func (w *walker) experiment(e *Experiment, raw json.RawMessage) {
	obj, ok := w.fields("", raw, experimentKeys)
	if !ok {
		return
	}
	if raw, ok := w.required(obj, "", "name", "want a name such as 64-qwen2.5-7b-tp1"); ok {
		e.Name, _ = w.str("name", raw)
	}
	if raw, ok := obj["source"]; ok {
		e.Source, _ = w.str("source", raw)
	}
	if raw, ok := w.required(obj, "", "gpu", "want the GPU model, such as H100"); ok {
		e.GPU, _ = w.str("gpu", raw)
	}
	if raw, ok := w.required(obj, "", "tensor_parallel", "want the number of GPUs a replica spans (1, 2, 4, 8)"); ok {
		e.TensorParallel, _ = w.count("tensor_parallel", raw)
	}
	e.DP = 1
	if raw, ok := obj["dp"]; ok {
		e.DP, _ = w.count("dp", raw)
	}
	if raw, ok := w.required(obj, "", "model_config", "want the path of the model's config.json"); ok {
		e.ModelConfig, _ = w.str("model_config", raw)
	}
	if raw, ok := w.required(obj, "", "precision", "want one of fp16, bf16, fp8"); ok {
		e.Precision, _ = w.str("precision", raw)
	}
	if raw, ok := obj["engine_version"]; ok {
		e.EngineVersion, _ = w.str("engine_version", raw)
	}
	if raw, ok := w.required(obj, "", "engine", "want the engine settings {max_num_seqs, …}"); ok {
		w.engine(&e.Engine, raw)
	}
	if raw, ok := w.required(obj, "", "workload", "want the load {arrivals, stages, shared_prefix}"); ok {
		w.workload(&e.Workload, raw)
	}
	if raw, ok := obj["measured_ms"]; ok {
		e.Measured = w.measured(raw)
	}
}

func (w *walker) engine(g *Engine, raw json.RawMessage) {
	const path = "engine"
	obj, ok := w.fields(path, raw, engineKeys)
	if !ok {
		return
	}
	for _, f := range []struct {
		key  string
		dst  *int
		want string
	}{
		{"max_num_seqs", &g.MaxNumSeqs, "want vLLM's --max-num-seqs, such as 128"},
		{"max_num_batched_tokens", &g.MaxNumBatchedTokens, "want vLLM's --max-num-batched-tokens, such as 2048"},
		{"max_model_len", &g.MaxModelLen, "want vLLM's --max-model-len, such as 4096"},
	} {
		if raw, ok := w.required(obj, path, f.key, f.want); ok {
			*f.dst, _ = w.count(path+"."+f.key, raw)
		}
	}
	if raw, ok := obj["total_kv_blocks"]; ok {
		g.TotalKVBlocks, _ = w.count(path+".total_kv_blocks", raw)
	}
	g.BlockSize = DefaultBlockSize
	if raw, ok := obj["block_size"]; ok {
		g.BlockSize, _ = w.count(path+".block_size", raw)
	}
	if raw, ok := w.required(obj, path, "prefix_caching", "want true or false"); ok {
		g.PrefixCaching, _ = w.boolean(path+".prefix_caching", raw)
	}
	if raw, ok := obj["kv_cache_dtype"]; ok {
		if v, ok := w.str(path+".kv_cache_dtype", raw); ok {
			switch v {
			case "auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2":
				g.KVCacheDtype = v
			default:
				w.add(path+".kv_cache_dtype", quoteRaw(raw), "want vLLM's --kv-cache-dtype: auto, fp8, fp8_e4m3 or fp8_e5m2")
			}
		}
	}
	if raw, ok := obj["enable_expert_parallel"]; ok {
		g.EnableExpertParallel, _ = w.boolean(path+".enable_expert_parallel", raw)
	}
}

func (w *walker) workload(wl *Workload, raw json.RawMessage) {
	const path = "workload"
	obj, ok := w.fields(path, raw, workloadKeys)
	if !ok {
		return
	}
	if raw, ok := w.required(obj, path, "arrivals", "want poisson or constant"); ok {
		wl.Arrivals, _ = w.str(path+".arrivals", raw)
	}
	if raw, ok := w.required(obj, path, "stages", `want a list of stages [{"rate": 8, "duration_s": 600}, …]`); ok {
		wl.Stages = w.stages(path+".stages", raw)
	}
	if raw, ok := w.required(obj, path, "shared_prefix", "want the shared-prefix generator's settings"); ok {
		w.sharedPrefix(&wl.SharedPrefix, path+".shared_prefix", raw)
	}
	if raw, ok := obj["seed"]; ok {
		if n, ok := w.integer(path+".seed", raw); ok {
			wl.Seed = &n
		}
	}
	if raw, ok := obj["num_requests"]; ok {
		wl.NumRequests, _ = w.count(path+".num_requests", raw)
	}
}

func (w *walker) stages(path string, raw json.RawMessage) []Stage {
	var items []json.RawMessage
	if kind(raw) != '[' || json.Unmarshal(raw, &items) != nil {
		w.add(path, quoteRaw(raw), "want a list [{…}, …]")
		return nil
	}
	if len(items) == 0 {
		w.add(path, "[]", "want at least one stage")
		return nil
	}
	stages := make([]Stage, len(items))
	for i, item := range items {
		p := joinIndex(path, i)
		obj, ok := w.fields(p, item, stageKeys)
		if !ok {
			continue
		}
		if raw, ok := w.required(obj, p, "rate", "want the mean arrival rate in requests per second"); ok {
			stages[i].Rate, _ = w.number(p+".rate", raw)
		}
		if raw, ok := w.required(obj, p, "duration_s", "want the stage's length in seconds"); ok {
			stages[i].DurationS, _ = w.number(p+".duration_s", raw)
		}
	}
	return stages
}

func (w *walker) sharedPrefix(sp *SharedPrefix, path string, raw json.RawMessage) {
	obj, ok := w.fields(path, raw, sharedPrefixKeys)
	if !ok {
		return
	}
	for _, f := range []struct {
		key  string
		dst  *int
		want string
	}{
		{"system_prompt_len", &sp.SystemPromptLen, "want the system prompt's length in tokens"},
		{"question_len", &sp.QuestionLen, "want the question's length in tokens"},
		{"output_len", &sp.OutputLen, "want the output length asked for, in tokens"},
		{"num_unique_system_prompts", &sp.NumUniqueSystemPrompts, "want how many distinct system prompts there are"},
	} {
		if raw, ok := w.required(obj, path, f.key, f.want); ok {
			*f.dst, _ = w.count(path+"."+f.key, raw)
		}
	}
	if raw, ok := obj["num_users_per_system_prompt"]; ok {
		sp.NumUsersPerSystemPrompt, _ = w.count(path+".num_users_per_system_prompt", raw)
	}
	if raw, ok := obj["enable_multi_turn_chat"]; ok {
		sp.EnableMultiTurnChat, _ = w.boolean(path+".enable_multi_turn_chat", raw)
	}
}

// stageKey is how a stage index is written: "-1" or a decimal index without
// sign or leading zeros, so that each stage has exactly one spelling.
var stageKey = regexp.MustCompile(`^(-1|0|[1-9][0-9]{0,8})$`)

// stagePath matches the path of one stage's figures, measured_ms["0"].
var stagePath = regexp.MustCompile(`^measured_ms\["-?[0-9]+"\]$`)

func (w *walker) measured(raw json.RawMessage) Measured {
	const path = "measured_ms"
	ms, ok := w.members(path, raw)
	if !ok {
		return nil
	}
	out := make(Measured, len(ms))
	for _, m := range ms {
		p := joinKey(path, m.key)
		if !stageKey.MatchString(m.key) {
			w.add(p, "", `unknown stage; want "-1" (the whole run) or a stage index "0", "1", … into workload.stages`)
			continue
		}
		stage, _ := strconv.Atoi(m.key)
		if _, dup := out[stage]; dup { // cannot happen with one spelling, but be sure
			w.add(p, "", "given twice; keep one")
			continue
		}
		out[stage] = w.metrics(p, m.raw)
	}
	return out
}

func (w *walker) metrics(path string, raw json.RawMessage) Metrics {
	obj, ok := w.fields(path, raw, metricNames)
	if !ok {
		return nil
	}
	m := make(Metrics, len(obj))
	for _, name := range metricNames {
		raw, ok := obj[name]
		if !ok {
			continue
		}
		if v, ok := w.number(path+"."+name, raw); ok {
			m[name] = v
		}
	}
	return m
}
