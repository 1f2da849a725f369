package benchmark

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// WholeRun is the stage key of figures measured over the whole run, all
// stages together ("-1" in measured_ms).
const WholeRun = -1

// Precisions and arrival processes an experiment may name.
const (
	PrecisionFP16 = "fp16"
	PrecisionBF16 = "bf16"
	PrecisionFP8  = "fp8"

	ArrivalsPoisson  = "poisson"
	ArrivalsConstant = "constant"
)

// DefaultBlockSize is vLLM's KV block size in tokens, used when an
// experiment's engine.block_size is absent.
const DefaultBlockSize = 16

// maxCount bounds every integer field: larger values are typos, and the
// bound keeps products of two of them (blocks × block size) within int64.
const maxCount = 1<<31 - 1

// Experiment is one published benchmark run: the hardware and engine it ran
// on, the load it was given, and the latencies measured, per load stage.
// The JSON field names are the file format.
type Experiment struct {
	Name string `json:"name"`
	// Source says where the figures come from (study, commit, split); free text.
	Source         string `json:"source,omitempty"`
	GPU            string `json:"gpu"`
	TensorParallel int    `json:"tensor_parallel"`
	// DP is the number of data-parallel replicas the load was spread over.
	DP int `json:"dp"`
	// ModelConfig is the Hugging Face config.json of the model, relative to
	// Dir unless absolute; ModelConfigPath resolves it.
	ModelConfig   string   `json:"model_config"`
	Precision     string   `json:"precision"`
	EngineVersion string   `json:"engine_version,omitempty"` // e.g. "vllm 0.15.1"
	Engine        Engine   `json:"engine"`
	Workload      Workload `json:"workload"`
	// Measured maps a stage index (an index into Workload.Stages, or
	// WholeRun) to the latencies measured in it, in milliseconds.
	Measured Measured `json:"measured_ms,omitempty"`

	// Dir is the directory relative paths resolve against: the directory of
	// the file the experiment was parsed from. It is not written.
	Dir string `json:"-"`
}

// Engine is the serving engine's configuration (vLLM's argument names).
type Engine struct {
	MaxNumSeqs          int `json:"max_num_seqs"`
	MaxNumBatchedTokens int `json:"max_num_batched_tokens"`
	MaxModelLen         int `json:"max_model_len"`
	// TotalKVBlocks is the GPU KV cache capacity the engine reported, in
	// blocks; 0 means unknown, to be derived from the GPU and model.
	TotalKVBlocks int  `json:"total_kv_blocks,omitempty"`
	BlockSize     int  `json:"block_size"` // tokens per KV block
	PrefixCaching bool `json:"prefix_caching"`
	// KVCacheDtype is vLLM's --kv-cache-dtype; empty or "auto" keeps the
	// model's 16-bit KV.
	KVCacheDtype string `json:"kv_cache_dtype,omitempty"`
	// EnableExpertParallel is vLLM's --enable-expert-parallel: a MoE
	// model's experts spread whole over the TP × DP GPUs.
	EnableExpertParallel bool `json:"enable_expert_parallel,omitempty"`
}

// Workload is the open-loop load the benchmark client generated.
type Workload struct {
	Arrivals     string       `json:"arrivals"` // ArrivalsPoisson or ArrivalsConstant
	Stages       []Stage      `json:"stages"`
	SharedPrefix SharedPrefix `json:"shared_prefix"`
	// Seed is the load generator's seed; nil when not published.
	Seed *int64 `json:"seed,omitempty"`
	// NumRequests is how many requests the run sent in all; 0 when not
	// published.
	NumRequests int `json:"num_requests,omitempty"`
}

// Stage is one period of constant mean arrival rate; stages run one after
// another.
type Stage struct {
	Rate      float64 `json:"rate"` // requests per second
	DurationS float64 `json:"duration_s"`
}

// SharedPrefix is inference-perf's shared-prefix generator: every request is
// one of NumUniqueSystemPrompts system prompts followed by a question of its
// own, and asks for OutputLen tokens. Lengths are in tokens.
type SharedPrefix struct {
	SystemPromptLen        int `json:"system_prompt_len"`
	QuestionLen            int `json:"question_len"`
	OutputLen              int `json:"output_len"`
	NumUniqueSystemPrompts int `json:"num_unique_system_prompts"`
	// NumUsersPerSystemPrompt is how many simulated users share each
	// system prompt; 0 when not published.
	NumUsersPerSystemPrompt int  `json:"num_users_per_system_prompt,omitempty"`
	EnableMultiTurnChat     bool `json:"enable_multi_turn_chat,omitempty"`
}

// Metrics maps a metric name (see MetricNames) to its measured value in
// milliseconds. A metric that was not measured is absent, which is not the
// same as a measured 0.
type Metrics map[string]float64

// Measured maps stage indices to their metrics; see Experiment.Measured.
type Measured map[int]Metrics

// metricNames is the canonical order: the order Write uses.
var metricNames = []string{
	"ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99",
	"itl_mean", "itl_p50", "itl_p90", "itl_p99",
	"e2e_mean", "e2e_p50", "e2e_p90", "e2e_p99",
	"tpot_mean",
}

// MetricNames returns the metric names an experiment may hold, in the order
// they are written: time to first token, inter-token latency, end-to-end
// latency (each mean, p50, p90, p99), then mean time per output token.
func MetricNames() []string { return slices.Clone(metricNames) }

// Stages returns the stage keys of m in order: WholeRun first, then stage
// indices ascending.
func (m Measured) Stages() []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// MarshalJSON writes the stages in order, WholeRun ("-1") first; encoding/json
// would sort the keys as text ("10" before "2").
func (m Measured) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.Stages() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(strconv.Itoa(k)))
		b.WriteByte(':')
		v, err := json.Marshal(m[k])
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// MarshalJSON writes the metrics in MetricNames order, then any other names
// (which Validate refuses) sorted, so that nothing is dropped silently.
func (m Metrics) MarshalJSON() ([]byte, error) {
	names := make([]string, 0, len(m))
	for _, n := range metricNames {
		if _, ok := m[n]; ok {
			names = append(names, n)
		}
	}
	var others []string
	for n := range m {
		if !slices.Contains(metricNames, n) {
			others = append(others, n)
		}
	}
	slices.Sort(others)
	names = append(names, others...)

	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(n))
		b.WriteByte(':')
		v, err := json.Marshal(m[n])
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", n, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// ModelConfigPath is the model's config.json: ModelConfig resolved against
// Dir when it is relative.
func (e *Experiment) ModelConfigPath() string {
	if filepath.IsAbs(e.ModelConfig) || e.Dir == "" {
		return e.ModelConfig
	}
	return filepath.Join(e.Dir, e.ModelConfig)
}

// Load reads and parses one experiment file. Relative paths in it resolve
// against the file's directory.
func Load(path string) (*Experiment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// LoadAll loads the experiments at paths, in order; a directory stands for
// its *.json files (not those in subdirectories), sorted by name. It reports
// the problems of every file, not just the first, and refuses two
// experiments with the same name.
func LoadAll(paths ...string) ([]*Experiment, error) {
	var files []string
	var errs []error
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(matches) == 0 {
			errs = append(errs, fmt.Errorf("%s: no *.json experiment files in this directory", p))
		}
		slices.Sort(matches)
		files = append(files, matches...)
	}
	var out []*Experiment
	byName := map[string]string{}
	for _, f := range files {
		e, err := Load(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := byName[e.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: name: %q is also the name of %s; names must be unique", f, e.Name, prev))
			continue
		}
		byName[e.Name] = f
		out = append(out, e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// LoadDir is LoadAll of one directory.
func LoadDir(dir string) ([]*Experiment, error) {
	return LoadAll(dir)
}

// Marshal renders the experiment in its canonical form: indented, fields in
// a fixed order, stages ascending, metrics in MetricNames order, defaults
// written out. Parsing the result gives the same experiment back. It refuses
// an experiment that does not validate, since that would not parse.
func (e *Experiment) Marshal() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep "<" and "&" in free text readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write writes the canonical form (Marshal) to path, replacing the file in
// one step so that a failed write leaves the old file intact.
func (e *Experiment) Write(path string) error {
	data, err := e.Marshal()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".benchmark-*.json")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Chmod(0o644), tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
