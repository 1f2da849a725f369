package latency

// This file reads a model's shape from its Hugging Face config.json, the
// one file every checkpoint ships, so that any model can be placed on any
// GPU of gpus.go without a hand-written shape. It counts parameters and KV
// bytes the way the inference engines lay the weights out; the tests check
// the counts against the sizes the model authors publish.

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
)

// ModelConfig is the shape of a decoder-only transformer, as far as weight
// and KV-cache sizes need it.
type ModelConfig struct {
	Name string // _name_or_path, or the file's base name
	Arch string // model_type, e.g. "llama", "mixtral", "qwen3_moe", "llama4", "deepseek_v2"

	Layers, Hidden, Heads int
	// KVHeads is num_key_value_heads (Heads when absent). MLA models cache
	// one latent vector per token that every head reads, which engines
	// treat as a single KV head (vLLM: MQA during decode), so it is 1 for
	// them whatever the file says: the latent is replicated, not split,
	// across a tensor-parallel group.
	KVHeads int
	// HeadDim is the query/key width of one head: head_dim, or
	// hidden/heads when absent; for MLA, qk_nope_head_dim +
	// qk_rope_head_dim.
	HeadDim      int
	Intermediate int // a dense layer's MLP width
	Vocab        int

	TiedEmbeddings bool

	// MoE (zero for dense models).
	Experts, ExpertsPerToken int // routed experts per MoE layer, and chosen per token
	MoEIntermediate          int // one routed expert's MLP width (moe_intermediate_size, or intermediate_size for Mixtral and Llama 4)
	SharedExperts            int // always-active shared experts per MoE layer (n_shared_experts, or 1 for Llama 4 and Qwen2-MoE)
	SharedIntermediate       int // their MLP width (each)
	// MoELayers is how many of Layers are MoE: all of them for Mixtral;
	// Llama 4 every interleave_moe_layer_step-th; DeepSeek from
	// first_k_dense_replace on, every moe_layer_freq-th; Qwen MoE every
	// decoder_sparse_step-th except mlp_only_layers.
	MoELayers int

	Quantization string // "fp8" when the checkpoint's weights are FP8, "" otherwise
	DType        string // torch_dtype / dtype
	MaxPosition  int

	// MLA (DeepSeek-V2/V3, GLM-5): low-rank KV (and query) projections.
	// The KV cache holds KVLoraRank + QKRopeHeadDim values per token and
	// layer, once for all heads.
	KVLoraRank, QKRopeHeadDim int
	QLoraRank                 int // 0: queries are projected directly
	QKNopeHeadDim, VHeadDim   int
}

// maxDim bounds every count and width in a config: far above any real
// model (the largest hidden sizes are in the tens of thousands, vocabularies
// under a million), low enough that products of them stay far from
// overflowing, so sizes are always finite.
const maxDim = 1 << 24

// ParseModelConfigFile reads the contents of the Hugging Face config.json
// at path (internal/modelfile reads the file). The model's name is its
// _name_or_path, else the file's name without ".json" (the directory's name
// for a file called config.json); errors name path.
func ParseModelConfigFile(path string, data []byte) (ModelConfig, error) {
	name := strings.TrimSuffix(filepath.Base(path), ".json")
	if name == "config" {
		if dir := filepath.Base(filepath.Dir(path)); dir != "." && dir != string(filepath.Separator) {
			name = dir
		}
	}
	return parseModelConfig(name, path, data)
}

// ParseModelConfig reads a Hugging Face config.json's contents; name names
// the model when the file has no _name_or_path, and the file in errors.
func ParseModelConfig(name string, data []byte) (ModelConfig, error) {
	return parseModelConfig(name, name, data)
}

func parseModelConfig(name, source string, data []byte) (ModelConfig, error) {
	r, err := newConfigReader(source, data)
	if err != nil {
		return ModelConfig{}, err
	}
	m, err := r.read(name)
	if err != nil {
		return ModelConfig{}, err // not half a shape
	}
	return m, nil
}

// configReader looks keys up in a config.json. Multimodal checkpoints
// (Llama 4, Gemma 3, Mistral 3) keep the language model under text_config:
// text fields are looked up there first, then at the top level. Their vision
// tower and projector are ignored: about a billion parameters for Llama 4
// Scout (109B published, 107.8B counted here), run once per image and not
// on the decode path.
type configReader struct {
	source string
	top    map[string]json.RawMessage
	text   map[string]json.RawMessage // nil without text_config
}

func newConfigReader(source string, data []byte) (*configReader, error) {
	r := &configReader{source: source}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		return nil, r.errorf("it is not valid JSON (%v); give the model's config.json from its Hugging Face repository", err)
	}
	if err := json.Unmarshal(data, &r.top); err != nil || r.top == nil {
		return nil, r.errorf("it is not a JSON object; give the model's config.json from its Hugging Face repository")
	}
	if raw, ok := present(r.top, "text_config"); ok {
		if err := json.Unmarshal(raw, &r.text); err != nil || r.text == nil {
			return nil, r.errorf("text_config is %s, not an object; it should hold the language model's fields", clip(raw))
		}
	}
	return r, nil
}

func (r *configReader) errorf(format string, args ...any) error {
	return fmt.Errorf("model config %q: %s", r.source, fmt.Sprintf(format, args...))
}

// present returns a key's value unless it is missing or null.
func present(obj map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	raw, ok := obj[key]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// lookup returns the first of keys that is set, text_config first.
func (r *configReader) lookup(keys ...string) (json.RawMessage, string, bool) {
	for _, obj := range []map[string]json.RawMessage{r.text, r.top} {
		for _, k := range keys {
			if raw, ok := present(obj, k); ok {
				return raw, k, true
			}
		}
	}
	return nil, keys[0], false
}

// lookupTop is lookup with the top level first, for the fields that
// describe the checkpoint rather than the language model.
func (r *configReader) lookupTop(keys ...string) (json.RawMessage, string, bool) {
	for _, obj := range []map[string]json.RawMessage{r.top, r.text} {
		for _, k := range keys {
			if raw, ok := present(obj, k); ok {
				return raw, k, true
			}
		}
	}
	return nil, keys[0], false
}

func (r *configReader) has(keys ...string) bool {
	_, _, ok := r.lookup(keys...)
	return ok
}

// count reads a non-negative whole number no larger than limit; 0 when
// absent.
func (r *configReader) count(limit float64, keys ...string) (int, error) {
	raw, key, ok := r.lookup(keys...)
	if !ok {
		return 0, nil
	}
	return r.number(key, raw, limit)
}

func (r *configReader) number(key string, raw json.RawMessage, limit float64) (int, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, r.errorf("%s is %s; it must be a number", key, clip(raw))
	}
	switch {
	case f != math.Trunc(f):
		return 0, r.errorf("%s is %v; it must be a whole number", key, f)
	case f < 0:
		return 0, r.errorf("%s is %v; it must not be negative", key, f)
	case f > limit:
		return 0, r.errorf("%s is %v, larger than any real model's (limit %v); check the file", key, f, limit)
	}
	return int(f), nil
}

// layerSet reads a list of layer indices (moe_layers, mlp_only_layers).
func (r *configReader) layerSet(key string, layers int) (map[int]bool, error) {
	raw, _, ok := r.lookup(key)
	if !ok {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, r.errorf("%s is %s; it must be a list of layer indices", key, clip(raw))
	}
	set := make(map[int]bool, len(list))
	for _, item := range list {
		i, err := r.number(key, item, maxDim)
		if err != nil {
			return nil, err
		}
		if i >= layers {
			return nil, r.errorf("%s lists layer %d, but the model has %d layers (0..%d)", key, i, layers, layers-1)
		}
		set[i] = true
	}
	return set, nil
}

func (r *configReader) str(top bool, keys ...string) (string, error) {
	look := r.lookup
	if top {
		look = r.lookupTop
	}
	raw, key, ok := look(keys...)
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", r.errorf("%s is %s; it must be a string", key, clip(raw))
	}
	return s, nil
}

func (r *configReader) flag(key string) (bool, error) {
	raw, _, ok := r.lookup(key)
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, r.errorf("%s is %s; it must be true or false", key, clip(raw))
	}
	return b, nil
}

// clip shortens a raw JSON value for an error message.
func clip(raw json.RawMessage) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

func (r *configReader) read(name string) (ModelConfig, error) {
	var m ModelConfig
	var err error
	if m.Name, err = r.str(true, "_name_or_path"); err != nil {
		return m, err
	}
	if m.Name == "" {
		m.Name = name
	}
	if m.Arch, err = r.str(true, "model_type"); err != nil {
		return m, err
	}
	textType, err := r.str(false, "model_type")
	if err != nil {
		return m, err
	}
	if m.DType, err = r.str(true, "torch_dtype", "dtype"); err != nil {
		return m, err
	}
	if m.TiedEmbeddings, err = r.flag("tie_word_embeddings"); err != nil {
		return m, err
	}
	m.Quantization = r.quantization(m.DType)

	ints := []struct {
		dst   *int
		limit float64
		keys  []string
	}{
		{&m.Layers, maxDim, []string{"num_hidden_layers", "n_layer", "num_layers"}},
		{&m.Hidden, maxDim, []string{"hidden_size", "n_embd", "d_model"}},
		{&m.Heads, maxDim, []string{"num_attention_heads", "n_head"}},
		{&m.KVHeads, maxDim, []string{"num_key_value_heads", "num_kv_heads"}},
		{&m.HeadDim, maxDim, []string{"head_dim"}},
		{&m.Intermediate, maxDim, []string{"intermediate_size", "n_inner", "ffn_hidden_size"}},
		{&m.Vocab, maxDim, []string{"vocab_size", "padded_vocab_size"}},
		{&m.MaxPosition, math.MaxInt32, []string{"max_position_embeddings", "n_positions"}},
		{&m.Experts, maxDim, []string{"num_local_experts", "num_experts", "n_routed_experts"}},
		{&m.ExpertsPerToken, maxDim, []string{"num_experts_per_tok"}},
		{&m.MoEIntermediate, maxDim, []string{"moe_intermediate_size"}},
		{&m.KVLoraRank, maxDim, []string{"kv_lora_rank"}},
		{&m.QKRopeHeadDim, maxDim, []string{"qk_rope_head_dim"}},
		{&m.QKNopeHeadDim, maxDim, []string{"qk_nope_head_dim"}},
		{&m.VHeadDim, maxDim, []string{"v_head_dim"}},
		{&m.QLoraRank, maxDim, []string{"q_lora_rank"}},
	}
	for _, f := range ints {
		if *f.dst, err = r.count(f.limit, f.keys...); err != nil {
			return m, err
		}
	}

	for _, req := range []struct {
		v       int
		key, is string
	}{
		{m.Layers, "num_hidden_layers", "the number of transformer layers"},
		{m.Hidden, "hidden_size", "the model's hidden (embedding) width"},
		{m.Heads, "num_attention_heads", "the number of attention (query) heads"},
		{m.Vocab, "vocab_size", "the tokenizer's vocabulary size"},
	} {
		if req.v == 0 {
			return m, r.errorf("%s is missing or 0; set it to %s", req.key, req.is)
		}
	}

	if err := r.attention(&m); err != nil {
		return m, err
	}
	llama4 := strings.HasPrefix(m.Arch, "llama4") || strings.HasPrefix(textType, "llama4")
	if err := r.moe(&m, llama4); err != nil {
		return m, err
	}
	if m.Layers > m.MoELayers && m.Intermediate == 0 {
		return m, r.errorf("intermediate_size is missing or 0; set it to the width of the dense layers' MLP")
	}
	return m, nil
}

// attention fills the head geometry: MLA's when kv_lora_rank is set,
// multi-head or grouped-query attention's otherwise.
func (r *configReader) attention(m *ModelConfig) error {
	if m.KVLoraRank > 0 {
		for _, f := range []struct {
			v   int
			key string
		}{{m.QKRopeHeadDim, "qk_rope_head_dim"}, {m.QKNopeHeadDim, "qk_nope_head_dim"}, {m.VHeadDim, "v_head_dim"}} {
			if f.v == 0 {
				return r.errorf("kv_lora_rank is set (MLA) but %s is missing or 0; MLA configs give qk_rope_head_dim, qk_nope_head_dim and v_head_dim", f.key)
			}
		}
		m.HeadDim = m.QKNopeHeadDim + m.QKRopeHeadDim
		m.KVHeads = 1
		return nil
	}
	// Without MLA these only describe an MLA model; keep them out of
	// dense attention's arithmetic.
	m.QKRopeHeadDim, m.QKNopeHeadDim, m.VHeadDim, m.QLoraRank = 0, 0, 0, 0
	if m.HeadDim == 0 {
		if m.Hidden%m.Heads != 0 {
			return r.errorf("num_attention_heads (%d) does not divide hidden_size (%d) and head_dim is absent; add head_dim (the width of one attention head)", m.Heads, m.Hidden)
		}
		m.HeadDim = m.Hidden / m.Heads
	}
	if m.KVHeads == 0 {
		m.KVHeads = m.Heads
	}
	if m.KVHeads > m.Heads || m.Heads%m.KVHeads != 0 {
		return r.errorf("num_key_value_heads (%d) must divide num_attention_heads (%d): each KV head serves a whole group of query heads", m.KVHeads, m.Heads)
	}
	return nil
}

// moe fills the mixture-of-experts fields, or zeroes them for a dense
// model. Which layers are MoE is spelled three ways; the keys present say
// which.
func (r *configReader) moe(m *ModelConfig, llama4 bool) error {
	expertWidth := m.MoEIntermediate
	if llama4 {
		// Llama 4: intermediate_size is an expert's width (routed and
		// shared alike), intermediate_size_mlp the dense layers'.
		expertWidth = m.Intermediate
		dense, err := r.count(maxDim, "intermediate_size_mlp")
		if err != nil {
			return err
		}
		if dense > 0 {
			m.Intermediate = dense
		}
	}
	if m.Experts == 0 {
		m.ExpertsPerToken, m.MoEIntermediate = 0, 0
		return nil
	}
	if m.ExpertsPerToken < 1 || m.ExpertsPerToken > m.Experts {
		return r.errorf("num_experts_per_tok is %d; with %d routed experts it must be 1..%d", m.ExpertsPerToken, m.Experts, m.Experts)
	}
	if expertWidth == 0 {
		expertWidth = m.Intermediate // Mixtral: every layer's MLP is the experts
	}
	if expertWidth == 0 {
		return r.errorf("the model has %d experts but neither moe_intermediate_size nor intermediate_size; set moe_intermediate_size to one expert's MLP width", m.Experts)
	}
	m.MoEIntermediate = expertWidth

	L := m.Layers
	switch {
	case llama4:
		// HF Llama4TextConfig: moe_layers, else every step-th layer
		// counting from step−1.
		if r.has("moe_layers") {
			set, err := r.layerSet("moe_layers", L)
			if err != nil {
				return err
			}
			m.MoELayers = len(set)
			break
		}
		step := 1
		if r.has("interleave_moe_layer_step") {
			var err error
			if step, err = r.count(maxDim, "interleave_moe_layer_step"); err != nil {
				return err
			}
			if step < 1 {
				return r.errorf("interleave_moe_layer_step is %d; it must be at least 1 (1: every layer is MoE)", step)
			}
		}
		m.MoELayers = L / step
	case r.has("first_k_dense_replace", "moe_layer_freq"):
		// DeepSeek: layer i is MoE when i ≥ first_k_dense_replace and
		// i % moe_layer_freq == 0.
		first, err := r.count(maxDim, "first_k_dense_replace")
		if err != nil {
			return err
		}
		freq := 1
		if r.has("moe_layer_freq") {
			if freq, err = r.count(maxDim, "moe_layer_freq"); err != nil {
				return err
			}
			if freq < 1 {
				return r.errorf("moe_layer_freq is %d; it must be at least 1 (1: every layer past first_k_dense_replace is MoE)", freq)
			}
		}
		multiples := func(n int) int { return (n + freq - 1) / freq } // of freq in [0, n)
		m.MoELayers = multiples(L) - multiples(min(first, L))
	case r.has("decoder_sparse_step", "mlp_only_layers"):
		// Qwen MoE: layer i is MoE when (i+1) % decoder_sparse_step == 0
		// and i is not in mlp_only_layers.
		step := 1
		if r.has("decoder_sparse_step") {
			var err error
			if step, err = r.count(maxDim, "decoder_sparse_step"); err != nil {
				return err
			}
			if step < 1 {
				return r.errorf("decoder_sparse_step is %d; it must be at least 1 (1: every layer is MoE)", step)
			}
		}
		dense, err := r.layerSet("mlp_only_layers", L)
		if err != nil {
			return err
		}
		m.MoELayers = L / step
		for i := range dense {
			if (i+1)%step == 0 {
				m.MoELayers--
			}
		}
	default:
		m.MoELayers = L
	}

	shared, err := r.count(maxDim, "n_shared_experts")
	if err != nil {
		return err
	}
	sharedWidth, err := r.count(maxDim, "shared_expert_intermediate_size")
	if err != nil {
		return err
	}
	switch {
	case llama4:
		m.SharedExperts, m.SharedIntermediate = 1, expertWidth
	case shared > 0: // DeepSeek, GLM: each as wide as a routed expert
		m.SharedExperts, m.SharedIntermediate = shared, expertWidth
	case sharedWidth > 0: // Qwen2-MoE: one shared expert of its own width
		m.SharedExperts, m.SharedIntermediate = 1, sharedWidth
	}
	return nil
}

// quantization says whether the checkpoint's weights are FP8. The shapes
// seen in published checkpoints: quant_method "fp8" (DeepSeek-V3, Qwen3
// -FP8, GLM: block-wise e4m3), "fbgemm_fp8" and "ptpc_fp8";
// "compressed-tensors" (llm-compressor, RedHat/neuralmagic "-FP8" models)
// with config_groups whose weights are {"type": "float", "num_bits": 8},
// older ones under compression_config; ModelOpt's quant_algo "FP8"; Quark's
// global_quant_config.weight.dtype "fp8_e4m3"; or a float8 torch_dtype.
// Anything it does not recognise (AWQ, GPTQ, INT8, bitsandbytes) is "",
// meaning 16-bit weights.
func (r *configReader) quantization(dtype string) string {
	if strings.HasPrefix(strings.ToLower(dtype), "float8") {
		return "fp8"
	}
	for _, key := range []string{"quantization_config", "compression_config"} {
		raw, _, ok := r.lookupTop(key)
		if !ok {
			continue
		}
		var qc struct {
			Method string `json:"quant_method"`
			Algo   string `json:"quant_algo"`
			Format string `json:"format"`
		}
		_ = json.Unmarshal(raw, &qc) // a field of another type stays "": not recognised
		switch strings.ToLower(qc.Method) {
		case "fp8", "fbgemm_fp8", "ptpc_fp8":
			return "fp8"
		case "modelopt":
			if strings.HasPrefix(strings.ToUpper(qc.Algo), "FP8") {
				return "fp8"
			}
		case "quark":
			var q struct {
				Global struct {
					Weight struct {
						Dtype string `json:"dtype"`
					} `json:"weight"`
				} `json:"global_quant_config"`
			}
			_ = json.Unmarshal(raw, &q)
			if strings.HasPrefix(strings.ToLower(q.Global.Weight.Dtype), "fp8") {
				return "fp8"
			}
		case "compressed-tensors", "":
			var ct struct {
				Groups map[string]json.RawMessage `json:"config_groups"`
			}
			_ = json.Unmarshal(raw, &ct)
			for _, g := range ct.Groups {
				var group struct {
					Weights struct {
						Type    string  `json:"type"`
						NumBits float64 `json:"num_bits"`
					} `json:"weights"`
				}
				_ = json.Unmarshal(g, &group)
				if group.Weights.Type == "float" && group.Weights.NumBits == 8 {
					return "fp8"
				}
			}
			if qc.Format == "float-quantized" {
				return "fp8"
			}
		}
	}
	return ""
}

// headDim and kvHeads default the way the parser does, for configs built
// by hand.
func (m ModelConfig) headDim() float64 {
	if m.HeadDim > 0 || m.Heads <= 0 {
		return float64(m.HeadDim)
	}
	return float64(m.Hidden) / float64(m.Heads)
}

func (m ModelConfig) kvHeads() float64 {
	if m.KVHeads > 0 {
		return float64(m.KVHeads)
	}
	return float64(m.Heads)
}

// AttnParams is one layer's attention weights. Multi-head and grouped-query
// attention: Q and O are hidden × heads·head_dim, K and V hidden ×
// kv_heads·head_dim. MLA: the query projection (through q_lora_rank when
// set), the shared down-projection to kv_lora_rank + the rope key, its
// up-projection to every head's no-rope key and value, and O. Biases and
// the small norms inside MLA are left out (under 0.1 %), as is the DSA
// indexer of GLM-5 and DeepSeek-V3.2 (about 1 % of attention).
func (m ModelConfig) AttnParams() float64 {
	h, heads := float64(m.Hidden), float64(m.Heads)
	if m.KVLoraRank > 0 {
		rope, nope, v := float64(m.QKRopeHeadDim), float64(m.QKNopeHeadDim), float64(m.VHeadDim)
		if nope == 0 {
			nope = m.headDim() - rope
		}
		if v == 0 {
			v = m.headDim()
		}
		rank := float64(m.KVLoraRank)
		q := h * heads * (nope + rope)
		if m.QLoraRank > 0 {
			q = h*float64(m.QLoraRank) + float64(m.QLoraRank)*heads*(nope+rope)
		}
		return q + h*(rank+rope) + rank*heads*(nope+v) + heads*v*h
	}
	hd := m.headDim()
	return 2*h*heads*hd + 2*h*m.kvHeads()*hd
}

// DenseMLPParams is one dense layer's gated MLP: gate, up and down,
// 3·hidden·intermediate.
func (m ModelConfig) DenseMLPParams() float64 {
	return 3 * float64(m.Hidden) * float64(m.Intermediate)
}

// ExpertParams is one routed expert: 3·hidden·moe_intermediate.
func (m ModelConfig) ExpertParams() float64 {
	return 3 * float64(m.Hidden) * float64(m.MoEIntermediate)
}

// SharedExpertParams is all the shared experts of one MoE layer.
func (m ModelConfig) SharedExpertParams() float64 {
	return float64(m.SharedExperts) * 3 * float64(m.Hidden) * float64(m.SharedIntermediate)
}

// EmbeddingParams is the input embedding and the LM head: vocab·hidden
// each, once when they are tied.
func (m ModelConfig) EmbeddingParams() float64 {
	e := float64(m.Vocab) * float64(m.Hidden)
	if m.TiedEmbeddings {
		return e
	}
	return 2 * e
}

// IsMoE reports whether some layers route tokens to experts.
func (m ModelConfig) IsMoE() bool { return m.Experts > 0 && m.MoELayers > 0 }

// Params counts the whole model's weights, and those one token is computed
// with: active counts ExpertsPerToken routed experts per MoE layer instead
// of all of them. Both include the embedding and LM head, the router and
// the norms, as Mistral, Meta and Qwen count; DeepSeek and Zhipu leave the
// input embedding out of their "activated" figure (a lookup, not a
// matmul). Vision towers and multi-token-prediction layers are not counted.
func (m ModelConfig) Params() (total, active float64) {
	h := float64(m.Hidden)
	L := float64(m.Layers)
	moeL := 0.0
	if m.IsMoE() {
		moeL = float64(min(m.MoELayers, m.Layers))
	}
	base := m.EmbeddingParams() + L*(m.AttnParams()+2*h) + h + // norms: two per layer and a final one
		(L-moeL)*m.DenseMLPParams() +
		moeL*(m.SharedExpertParams()+h*float64(m.Experts)) // the router: hidden × experts
	experts := moeL * m.ExpertParams()
	return base + experts*float64(m.Experts), base + experts*float64(min(m.ExpertsPerToken, m.Experts))
}

// KVBytesPerToken is one token's KV cache over all layers at dtypeBytes per
// value: K and V of every KV head, or for MLA the latent and rope key once.
// Engines that window or chunk some layers' attention (Mistral's
// sliding_window, Llama 4's attention_chunk_size) may keep less; this is
// the full-attention size, which vLLM allocates unless its hybrid KV
// manager is on.
func (m ModelConfig) KVBytesPerToken(dtypeBytes float64) float64 {
	L := float64(m.Layers)
	if m.KVLoraRank > 0 {
		return L * float64(m.KVLoraRank+m.QKRopeHeadDim) * dtypeBytes
	}
	return L * 2 * m.kvHeads() * m.headDim() * dtypeBytes
}
