package latency

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const modelConfigDir = "models" // the shipped set, embedded by models.go

// publishedSize is a checkpoint in models/ and the size its
// authors publish. The files from shared/profiles/sim-to-real/model_configs
// are copied as they are; mixtral-8x22b-v0.1, llama-2-70b-hf and qwen3-32b
// were added by hand from the published config.json (mistral-community
// /Mixtral-8x22B-v0.1, TheBloke/Llama-2-70B-fp16's copy of
// meta-llama/Llama-2-70b-hf, Qwen/Qwen3-32B).
type publishedSize struct {
	file          string
	total, active float64 // parameters; active 0 for dense models
	// activeSansInput: the publisher's "activated" figure leaves the
	// input embedding out (DeepSeek, Zhipu), where Params counts it.
	activeSansInput bool
	source          string

	// Shape the parser must find.
	arch       string
	moeLayers  int
	quant      string
	kvBF16     float64 // KV bytes per token at 16 bits
	kvHeads    int
	headDim    int
	sharedExps int
}

var publishedSizes = []publishedSize{
	{file: "codellama-34b-instruct-hf.json", total: 33.7e9, source: "codellama/CodeLlama-34b-Instruct-hf model card",
		arch: "llama", kvBF16: 48 * 2 * 8 * 128 * 2, kvHeads: 8, headDim: 128},
	{file: "deepseek-v2-lite.json", total: 15.7e9, active: 2.4e9, activeSansInput: true,
		source: "DeepSeek-V2 paper, §Lite: 15.7B total, 2.4B activated",
		arch:   "deepseek_v2", moeLayers: 26, kvBF16: 27 * (512 + 64) * 2, kvHeads: 1, headDim: 192, sharedExps: 2},
	{file: "glm-5.2-fp8.json", total: 744e9, active: 40e9, activeSansInput: true,
		source: "Transformers GlmMoeDsa docs: GLM-5 744B, 40B active (GLM-5.2 has the same layout per NeMo's GLM-5 family docs)",
		arch:   "glm_moe_dsa", moeLayers: 75, quant: "fp8", kvBF16: 78 * (512 + 64) * 2, kvHeads: 1, headDim: 256, sharedExps: 1},
	{file: "llama-2-7b-hf.json", total: 6.74e9, source: "meta-llama/Llama-2-7b-hf (6,738,415,616 weights)",
		arch: "llama", kvBF16: 32 * 2 * 32 * 128 * 2, kvHeads: 32, headDim: 128},
	{file: "llama-2-70b-hf.json", total: 68.98e9, source: "meta-llama/Llama-2-70b-hf (68,976,648,192 weights)",
		arch: "llama", kvBF16: 80 * 2 * 8 * 128 * 2, kvHeads: 8, headDim: 128},
	{file: "llama-3.1-70b-instruct.json", total: 70.6e9, source: "meta-llama/Llama-3.1-70B-Instruct model card",
		arch: "llama", kvBF16: 80 * 2 * 8 * 128 * 2, kvHeads: 8, headDim: 128},
	{file: "llama-3.1-8b-instruct.json", total: 8.03e9, source: "meta-llama/Llama-3.1-8B-Instruct model card",
		arch: "llama", kvBF16: 32 * 2 * 8 * 128 * 2, kvHeads: 8, headDim: 128},
	{file: "llama-4-scout-17b-16e-instruct-fp8-dynamic.json", total: 109e9, active: 17e9,
		source: "Hugging Face Llama 4 release post: Scout ~109B total (with the vision tower, which Params leaves out), 17B active",
		arch:   "llama4", moeLayers: 48, quant: "fp8", kvBF16: 48 * 2 * 8 * 128 * 2, kvHeads: 8, headDim: 128, sharedExps: 1},
	{file: "mistral-nemo-instruct-2407.json", total: 12.2e9, source: "mistralai/Mistral-Nemo-Instruct-2407 model card",
		arch: "mistral", kvBF16: 40 * 2 * 8 * 128 * 2, kvHeads: 8, headDim: 128},
	{file: "mixtral-8x7b-v0.1.json", total: 46.7e9, active: 12.9e9, source: "Mixtral of Experts paper: 47B total, 13B active (46.7B / 12.9B in Mistral's announcement)",
		arch: "mixtral", moeLayers: 32, kvBF16: 32 * 2 * 8 * 128 * 2, kvHeads: 8, headDim: 128},
	{file: "mixtral-8x22b-v0.1.json", total: 141e9, active: 39e9, source: "Mistral's Mixtral 8x22B announcement: 141B total, 39B active",
		arch: "mixtral", moeLayers: 56, kvBF16: 56 * 2 * 8 * 128 * 2, kvHeads: 8, headDim: 128},
	{file: "qwen2.5-7b-instruct.json", total: 7.61e9, source: "Qwen/Qwen2.5-7B-Instruct model card",
		arch: "qwen2", kvBF16: 28 * 2 * 4 * 128 * 2, kvHeads: 4, headDim: 128},
	{file: "qwen3-14b.json", total: 14.8e9, source: "Qwen/Qwen3-14B model card",
		arch: "qwen3", kvBF16: 40 * 2 * 8 * 128 * 2, kvHeads: 8, headDim: 128},
	{file: "qwen3-30b-a3b.json", total: 30.5e9, active: 3.3e9, source: "Qwen/Qwen3-30B-A3B model card",
		arch: "qwen3_moe", moeLayers: 48, kvBF16: 48 * 2 * 4 * 128 * 2, kvHeads: 4, headDim: 128},
	{file: "qwen3-32b.json", total: 32.8e9, source: "Qwen/Qwen3-32B model card",
		arch: "qwen3", kvBF16: 64 * 2 * 8 * 128 * 2, kvHeads: 8, headDim: 128},
	{file: "yi-34b.json", total: 34.4e9, source: "01-ai/Yi-34B model card",
		arch: "llama", kvBF16: 60 * 2 * 8 * 128 * 2, kvHeads: 8, headDim: 128},
}

// paramTolerance is how far a count may be from the published size: the
// published figures are rounded to three digits and some include small
// parts Params leaves out (vision towers, biases).
const paramTolerance = 0.03

func relErr(got, want float64) float64 { return math.Abs(got-want) / want }

func TestModelConfigPublishedSizes(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(modelConfigDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no model configs in %s (err %v)", modelConfigDir, err)
	}
	for _, f := range files {
		base := filepath.Base(f)
		if !slices.ContainsFunc(publishedSizes, func(p publishedSize) bool { return p.file == base }) {
			t.Errorf("%s has no row in publishedSizes: add its published size", base)
		}
	}
	for _, p := range publishedSizes {
		t.Run(strings.TrimSuffix(p.file, ".json"), func(t *testing.T) {
			m, err := loadModelConfig(filepath.Join(modelConfigDir, p.file))
			if err != nil {
				t.Fatal(err)
			}
			total, active := m.Params()
			t.Logf("%s: %.2fB total, %.2fB active (published %.3gB / %.3gB: %s)",
				m.Name, total/1e9, active/1e9, p.total/1e9, p.active/1e9, p.source)
			if e := relErr(total, p.total); e > paramTolerance {
				t.Errorf("total params = %.3gB, published %.3gB (%.1f%% off)", total/1e9, p.total/1e9, 100*e)
			}
			switch {
			case p.active == 0 && active != total:
				t.Errorf("dense model: active params %.4gB ≠ total %.4gB", active/1e9, total/1e9)
			case p.active > 0:
				got := active
				if p.activeSansInput {
					got -= float64(m.Vocab) * float64(m.Hidden)
				}
				if e := relErr(got, p.active); e > paramTolerance {
					t.Errorf("active params = %.3gB, published %.3gB (%.1f%% off)", got/1e9, p.active/1e9, 100*e)
				}
			}
			if m.Arch != p.arch {
				t.Errorf("Arch = %q, want %q", m.Arch, p.arch)
			}
			if m.IsMoE() != (p.active > 0) || m.MoELayers != p.moeLayers {
				t.Errorf("IsMoE = %v, MoELayers = %d; want %v, %d", m.IsMoE(), m.MoELayers, p.active > 0, p.moeLayers)
			}
			if m.SharedExperts != p.sharedExps {
				t.Errorf("SharedExperts = %d, want %d", m.SharedExperts, p.sharedExps)
			}
			if m.Quantization != p.quant {
				t.Errorf("Quantization = %q, want %q", m.Quantization, p.quant)
			}
			if m.KVHeads != p.kvHeads || m.HeadDim != p.headDim {
				t.Errorf("KVHeads, HeadDim = %d, %d; want %d, %d", m.KVHeads, m.HeadDim, p.kvHeads, p.headDim)
			}
			if got := m.KVBytesPerToken(2); got != p.kvBF16 {
				t.Errorf("KVBytesPerToken(2) = %v, want %v", got, p.kvBF16)
			}
		})
	}
}

// The Llama shapes derive.go hard-codes and the configs must agree.
func TestModelConfigMatchesLlamaShapes(t *testing.T) {
	for _, tc := range []struct {
		file  string
		shape llamaShape
	}{
		{"llama-3.1-8b-instruct.json", llama31_8B},
		{"llama-3.1-70b-instruct.json", llama31_70B},
	} {
		m, err := loadModelConfig(filepath.Join(modelConfigDir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got := llamaShape{Layers: m.Layers, Hidden: m.Hidden, Intermediate: m.Intermediate, Heads: m.Heads, KVHeads: m.KVHeads, Vocab: m.Vocab}
		if got != tc.shape {
			t.Errorf("%s: shape %+v, derive.go has %+v", tc.file, got, tc.shape)
		}
		total, _ := m.Params()
		// derive.go leaves the norms out: they are 0.001 % of the model.
		if e := relErr(total, tc.shape.params()); e > 1e-4 {
			t.Errorf("%s: Params = %.6g, derive.go's params() = %.6g", tc.file, total, tc.shape.params())
		}
	}
}

func TestModelConfigFields(t *testing.T) {
	m, err := loadModelConfig(filepath.Join(modelConfigDir, "llama-4-scout-17b-16e-instruct-fp8-dynamic.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Llama 4 keeps the language model under text_config; intermediate_size
	// is an expert's width, intermediate_size_mlp a dense layer's.
	want := ModelConfig{
		Name: "llama-4-scout-17b-16e-instruct-fp8-dynamic", Arch: "llama4",
		Layers: 48, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128, Intermediate: 16384, Vocab: 202048,
		Experts: 16, ExpertsPerToken: 1, MoEIntermediate: 8192, SharedExperts: 1, SharedIntermediate: 8192, MoELayers: 48,
		Quantization: "fp8", DType: "bfloat16", MaxPosition: 10485760,
	}
	if m != want {
		t.Errorf("loadModelConfig(scout) =\n%+v\nwant\n%+v", m, want)
	}

	m, err = loadModelConfig(filepath.Join(modelConfigDir, "deepseek-v2-lite.json"))
	if err != nil {
		t.Fatal(err)
	}
	want = ModelConfig{
		Name: "deepseek-v2-lite", Arch: "deepseek_v2",
		Layers: 27, Hidden: 2048, Heads: 16, KVHeads: 1, HeadDim: 192, Intermediate: 10944, Vocab: 102400,
		Experts: 64, ExpertsPerToken: 6, MoEIntermediate: 1408, SharedExperts: 2, SharedIntermediate: 1408, MoELayers: 26,
		DType: "bfloat16", MaxPosition: 163840,
		KVLoraRank: 512, QKRopeHeadDim: 64, QKNopeHeadDim: 128, VHeadDim: 128,
	}
	if m != want {
		t.Errorf("loadModelConfig(deepseek-v2-lite) =\n%+v\nwant\n%+v", m, want)
	}

	m, err = loadModelConfig(filepath.Join(modelConfigDir, "llama-2-70b-hf.json"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "meta-llama/Llama-2-70b-hf" || m.DType != "float16" {
		t.Errorf("Name, DType = %q, %q; want _name_or_path and torch_dtype", m.Name, m.DType)
	}
}

// inline configs: small hand-written shapes for what the fixtures do not
// cover.
func TestParseModelConfig(t *testing.T) {
	tests := []struct {
		name string
		json string
		want func(ModelConfig) string // "" when right
	}{
		{"head_dim and KV heads default", `{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 8, "intermediate_size": 128, "vocab_size": 100}`,
			func(m ModelConfig) string {
				if m.HeadDim != 8 || m.KVHeads != 8 || m.Name != "inline" {
					return "want HeadDim 8 = hidden/heads, KVHeads 8 = heads, Name from the argument"
				}
				return ""
			}},
		{"tied embeddings count once", `{"num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 8, "intermediate_size": 128, "vocab_size": 1000, "tie_word_embeddings": true}`,
			func(m ModelConfig) string {
				if m.EmbeddingParams() != 64000 {
					return "want EmbeddingParams = vocab·hidden once"
				}
				return ""
			}},
		{"GPT-2 key names", `{"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "n_inner": 3072, "vocab_size": 50257, "n_positions": 1024}`,
			func(m ModelConfig) string {
				if m.Layers != 12 || m.Hidden != 768 || m.Heads != 12 || m.Intermediate != 3072 || m.MaxPosition != 1024 {
					return "want n_layer, n_embd, n_head, n_inner, n_positions read"
				}
				return ""
			}},
		// Llama-4-Maverick's text_config shape (meta-llama/Llama-4-Maverick
		// -17B-128E; its GGUF metadata lists the same): MoE every second
		// layer, dense layers intermediate_size_mlp wide. Published ~400B
		// total (402B in the Transformers docs, with the vision tower), 17B
		// active.
		{"Llama 4 Maverick interleaves MoE", `{"model_type": "llama4", "text_config": {"model_type": "llama4_text",
			"num_hidden_layers": 48, "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
			"intermediate_size": 8192, "intermediate_size_mlp": 16384, "vocab_size": 202048,
			"num_local_experts": 128, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2}}`,
			func(m ModelConfig) string {
				total, active := m.Params()
				if m.MoELayers != 24 || m.Intermediate != 16384 || m.MoEIntermediate != 8192 ||
					relErr(total, 400e9) > paramTolerance || relErr(active, 17e9) > paramTolerance {
					return "want 24 MoE layers, dense MLP 16384, experts 8192, ~400B / 17B"
				}
				return ""
			}},
		{"Llama 4 explicit moe_layers", `{"model_type": "llama4_text", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 8,
			"intermediate_size": 32, "intermediate_size_mlp": 128, "vocab_size": 100, "num_local_experts": 4, "num_experts_per_tok": 1, "moe_layers": [1, 3, 3]}`,
			func(m ModelConfig) string {
				if m.MoELayers != 2 {
					return "want 2 MoE layers (duplicates count once)"
				}
				return ""
			}},
		{"Qwen MoE mlp_only_layers and sparse step", `{"model_type": "qwen3_moe", "num_hidden_layers": 8, "hidden_size": 64, "num_attention_heads": 8,
			"intermediate_size": 128, "moe_intermediate_size": 32, "vocab_size": 100, "num_experts": 8, "num_experts_per_tok": 2,
			"decoder_sparse_step": 2, "mlp_only_layers": [0, 1, 3]}`,
			func(m ModelConfig) string {
				// Sparse at i = 1, 3, 5, 7; 1 and 3 are dense-only.
				if m.MoELayers != 2 {
					return "want 2 MoE layers"
				}
				return ""
			}},
		{"Qwen2-MoE shared expert", `{"model_type": "qwen2_moe", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 8,
			"intermediate_size": 128, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 256, "vocab_size": 100,
			"num_experts": 8, "num_experts_per_tok": 2}`,
			func(m ModelConfig) string {
				if m.SharedExperts != 1 || m.SharedIntermediate != 256 || m.SharedExpertParams() != 3*64*256 {
					return "want one shared expert 256 wide"
				}
				return ""
			}},
		{"DeepSeek moe_layer_freq", `{"model_type": "deepseek_v2", "num_hidden_layers": 10, "hidden_size": 64, "num_attention_heads": 8,
			"intermediate_size": 128, "moe_intermediate_size": 32, "vocab_size": 100, "n_routed_experts": 8, "num_experts_per_tok": 2,
			"first_k_dense_replace": 3, "moe_layer_freq": 2}`,
			func(m ModelConfig) string {
				// i ≥ 3 and even: 4, 6, 8.
				if m.MoELayers != 3 {
					return "want 3 MoE layers"
				}
				return ""
			}},
		{"MLA with q_lora_rank", `{"num_hidden_layers": 1, "hidden_size": 100, "num_attention_heads": 2, "vocab_size": 10, "intermediate_size": 10,
			"q_lora_rank": 20, "kv_lora_rank": 30, "qk_rope_head_dim": 4, "qk_nope_head_dim": 6, "v_head_dim": 5}`,
			func(m ModelConfig) string {
				// q_a 100·20, q_b 20·2·10, kv_a 100·34, kv_b 30·2·11, o 2·5·100.
				if m.AttnParams() != 2000+400+3400+660+1000 || m.KVBytesPerToken(1) != 34 {
					return "want the MLA projections and a 34-value latent"
				}
				return ""
			}},
		{"FP8: quant_method fp8", `{"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 10,
			"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}`, wantQuant("fp8")},
		// neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8's shape; older
		// checkpoints (nm-testing/Meta-llama3-8b-Instruct-quant-FP8) put
		// it under compression_config.
		{"FP8: compressed-tensors float weights", `{"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 10,
			"compression_config": {"config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}}},
			"quant_method": "compressed-tensors"}}`, wantQuant("fp8")},
		{"INT8: compressed-tensors int weights", `{"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 10,
			"quantization_config": {"config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "int"}}}, "format": "int-quantized",
			"quant_method": "compressed-tensors"}}`, wantQuant("")},
		{"FP8: ModelOpt", `{"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 10,
			"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}}`, wantQuant("fp8")},
		{"FP8: Quark", `{"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 10,
			"quantization_config": {"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp8_e4m3"}}}}`, wantQuant("fp8")},
		{"AWQ is not FP8", `{"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 10,
			"quantization_config": {"quant_method": "awq", "bits": 4}}`, wantQuant("")},
		{"odd quantization_config shape is ignored", `{"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 10,
			"quantization_config": {"quant_method": 8, "config_groups": [1]}}`, wantQuant("")},
		{"float8 dtype", `{"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 10,
			"torch_dtype": "float8_e4m3fn"}`, wantQuant("fp8")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseModelConfig("inline", []byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if why := tc.want(m); why != "" {
				total, active := m.Params()
				t.Errorf("ParseModelConfig = %+v (params %.4g / %.4g): %s", m, total, active, why)
			}
		})
	}
}

func wantQuant(q string) func(ModelConfig) string {
	return func(m ModelConfig) string {
		if m.Quantization != q {
			return "want Quantization " + q
		}
		return ""
	}
}

func TestParseModelConfigErrors(t *testing.T) {
	const base = `"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 8, "intermediate_size": 128, "vocab_size": 100`
	tests := []struct {
		name, json string
		want       []string // substrings of the error
	}{
		{"not JSON", `{"num_hidden_layers": 2,`, []string{"not valid JSON"}},
		{"not an object", `[1, 2]`, []string{"not a JSON object"}},
		{"null", `null`, []string{"not a JSON object"}},
		{"missing layers", `{"hidden_size": 64, "num_attention_heads": 8, "vocab_size": 100}`, []string{"num_hidden_layers is missing", "number of transformer layers"}},
		{"zero hidden", `{"num_hidden_layers": 2, "hidden_size": 0, "num_attention_heads": 8, "vocab_size": 100}`, []string{"hidden_size is missing or 0"}},
		{"missing heads", `{"num_hidden_layers": 2, "hidden_size": 64, "vocab_size": 100}`, []string{"num_attention_heads"}},
		{"missing vocab", `{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 8, "intermediate_size": 128}`, []string{"vocab_size"}},
		{"missing intermediate", `{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 8, "vocab_size": 100}`, []string{"intermediate_size"}},
		{"negative", `{` + base + `, "num_key_value_heads": -8}`, []string{"num_key_value_heads is -8", "not be negative"}},
		{"fraction", `{` + base + `, "head_dim": 12.5}`, []string{"head_dim is 12.5", "whole number"}},
		{"string", `{"num_hidden_layers": "32", "hidden_size": 64, "num_attention_heads": 8, "vocab_size": 100}`, []string{`num_hidden_layers is "32"`, "must be a number"}},
		{"absurd", `{"num_hidden_layers": 2, "hidden_size": 1e12, "num_attention_heads": 8, "vocab_size": 100}`, []string{"hidden_size", "larger than any real model"}},
		{"heads do not divide hidden", `{"num_hidden_layers": 2, "hidden_size": 100, "num_attention_heads": 8, "intermediate_size": 128, "vocab_size": 100}`,
			[]string{"does not divide hidden_size", "add head_dim"}},
		{"KV heads do not divide heads", `{` + base + `, "num_key_value_heads": 3}`, []string{"num_key_value_heads (3) must divide num_attention_heads (8)"}},
		{"more KV heads than heads", `{` + base + `, "num_key_value_heads": 16}`, []string{"must divide"}},
		{"top-k above experts", `{` + base + `, "num_local_experts": 8, "num_experts_per_tok": 9}`, []string{"num_experts_per_tok is 9", "1..8"}},
		{"experts without top-k", `{` + base + `, "num_local_experts": 8}`, []string{"num_experts_per_tok is 0"}},
		{"text_config not an object", `{"text_config": [1]}`, []string{"text_config"}},
		{"mlp_only_layers out of range", `{` + base + `, "num_experts": 4, "num_experts_per_tok": 1, "mlp_only_layers": [5]}`, []string{"mlp_only_layers lists layer 5", "2 layers"}},
		{"mlp_only_layers not a list", `{` + base + `, "num_experts": 4, "num_experts_per_tok": 1, "mlp_only_layers": 5}`, []string{"list of layer indices"}},
		{"interleave step 0", `{"model_type": "llama4", ` + base + `, "num_local_experts": 4, "num_experts_per_tok": 1, "interleave_moe_layer_step": 0}`, []string{"interleave_moe_layer_step is 0", "at least 1"}},
		{"moe_layer_freq 0", `{` + base + `, "n_routed_experts": 4, "num_experts_per_tok": 1, "moe_layer_freq": 0}`, []string{"moe_layer_freq is 0"}},
		{"MLA without rope dim", `{` + base + `, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "v_head_dim": 128}`, []string{"qk_rope_head_dim is missing"}},
		{"tie flag not a bool", `{` + base + `, "tie_word_embeddings": "yes"}`, []string{"tie_word_embeddings", "true or false"}},
		{"model_type not a string", `{` + base + `, "model_type": 7}`, []string{"model_type is 7", "string"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseModelConfig("bad.json", []byte(tc.json))
			if err == nil {
				t.Fatalf("ParseModelConfig(%s) = nil error, want one saying %q", tc.json, tc.want)
			}
			for _, w := range append(tc.want, `"bad.json"`) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseModelConfig(%s) error %q does not say %q", tc.json, err, w)
				}
			}
		})
	}
}

// FuzzParseModelConfig: no input panics, and every accepted config has a
// usable shape and finite sizes.
func FuzzParseModelConfig(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(modelConfigDir, "*.json"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseModelConfig("fuzz.json", data)
		if err != nil {
			if !strings.Contains(err.Error(), `"fuzz.json"`) {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		if m.Layers <= 0 || m.Hidden <= 0 || m.Heads <= 0 || m.KVHeads <= 0 || m.HeadDim <= 0 || m.Vocab <= 0 {
			t.Fatalf("accepted a config without a shape: %+v", m)
		}
		if m.MoELayers < 0 || m.MoELayers > m.Layers || (m.Experts > 0 && (m.ExpertsPerToken < 1 || m.ExpertsPerToken > m.Experts)) {
			t.Fatalf("accepted inconsistent MoE fields: %+v", m)
		}
		total, active := m.Params()
		kv := m.KVBytesPerToken(2)
		for _, v := range []float64{total, active, kv, m.AttnParams(), m.EmbeddingParams()} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
				t.Fatalf("non-finite or non-positive size %v for %+v", v, m)
			}
		}
		if active > total {
			t.Fatalf("active %v > total %v for %+v", active, total, m)
		}
	})
}

// loadModelConfig reads a config.json fixture (the package itself does no
// I/O: internal/modelfile does).
func loadModelConfig(path string) (ModelConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ModelConfig{}, err
	}
	return ParseModelConfigFile(path, data)
}
