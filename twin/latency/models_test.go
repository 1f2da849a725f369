package latency

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestShippedModelsParse(t *testing.T) {
	models, err := shippedModels()
	if err != nil {
		t.Fatal(err)
	}
	names := ModelNames()
	if len(models) != len(names) || len(names) < 16 || !slices.IsSorted(names) {
		t.Fatalf("ModelNames() = %v and %d parsed: want every shipped config, sorted", names, len(models))
	}
	files, _ := filepath.Glob(filepath.Join("models", "*.json"))
	if len(files) != len(names) {
		t.Errorf("models/ has %d configs, the binary embeds %d", len(files), len(names))
	}
	variants := map[string]string{}
	for _, m := range models {
		// Every stem finds its own file, and no two files collapse to one
		// variant key, so rule 3 is never ambiguous for a shipped name.
		got, err := LookupModel(m.stem)
		if err != nil || got != m.cfg {
			t.Errorf("LookupModel(%q) = %v, %v; want its own config", m.stem, got.Name, err)
		}
		v := variantKey(m.stem)
		if other, dup := variants[v]; dup {
			t.Errorf("%s and %s are both %q without variant words: a name spelt that way would be ambiguous", other, m.stem, v)
		}
		variants[v] = m.stem
	}
}

func TestLookupModel(t *testing.T) {
	for _, tc := range []struct {
		name, want string // want: the file stem found
	}{
		// The models the measured runs in shared/profiles/
		// vllm_measured_llmservingsim name in their meta.json.
		{"meta-llama/Llama-3.1-8B", "llama-3.1-8b-instruct"}, // the base model: the instruct tune's shape
		{"Qwen/Qwen3-32B", "qwen3-32b"},
		{"Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b"},

		{"llama-3.1-8b-instruct", "llama-3.1-8b-instruct"}, // stem
		{"LLAMA-3.1-8B-INSTRUCT", "llama-3.1-8b-instruct"}, // case
		{" llama_3.1_8b_instruct ", "llama-3.1-8b-instruct"},
		{"meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b-instruct"},
		{"meta-llama/Llama-2-70b-hf", "llama-2-70b-hf"}, // its _name_or_path
		{"someone/Llama-2-70b-hf", "llama-2-70b-hf"},    // another org's copy
		{"meta-llama/Llama-2-7b-chat-hf", "llama-2-7b-hf"},
		{"codellama/CodeLlama-34b-Instruct-hf", "codellama-34b-instruct-hf"},
		{"mistralai/Mistral-Nemo-Base-2407", "mistral-nemo-instruct-2407"},
		{"mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b-v0.1"}, // "instruct" dropped mid-name
		{"Qwen/Qwen2.5-7B", "qwen2.5-7b-instruct"},
		{"Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"},
		{"deepseek-ai/DeepSeek-V2-Lite-Chat", "deepseek-v2-lite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LookupModel(tc.name)
			if err != nil {
				t.Fatalf("LookupModel(%q): %v", tc.name, err)
			}
			want, err := loadModelConfig(filepath.Join("models", tc.want+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("LookupModel(%q) = %s, want %s", tc.name, got.Name, tc.want)
			}
		})
	}
}

func TestLookupModelErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string // substrings of the error
	}{
		{"meta-llama/Llama-3.1-405B", []string{`unknown model "meta-llama/Llama-3.1-405B"`, "llama-3.1-70b-instruct, llama-3.1-8b-instruct", "path to its config.json"}},
		{"", []string{`unknown model ""`, "qwen3-32b"}},
		{"instruct", []string{`unknown model "instruct"`}},
		// FP8 is not a variant: the BF16 Scout weighs twice the shipped one.
		{"meta-llama/Llama-4-Scout-17B-16E-Instruct", []string{"unknown model", "llama-4-scout-17b-16e-instruct-fp8-dynamic"}},
		{"Qwen/Qwen3-8B", []string{"unknown model", "qwen3-14b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LookupModel(tc.name)
			if err == nil {
				t.Fatalf("LookupModel(%q) = nil error, want one", tc.name)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("LookupModel(%q) error %q does not contain %q", tc.name, err, w)
				}
			}
		})
	}
}

func TestLookupModelAmbiguous(t *testing.T) {
	models := []shippedModel{
		{stem: "foo-7b-instruct", cfg: ModelConfig{Name: "foo-7b-instruct", Layers: 1}},
		{stem: "foo-7b-chat", cfg: ModelConfig{Name: "org/Foo-7B-Chat", Layers: 2}},
	}
	for _, tc := range []struct {
		name   string
		layers int    // of the model found; 0: an error
		err    string // substring of the error
	}{
		{"foo-7b-chat", 2, ""},     // a stem wins over a variant match
		{"ORG/foo-7b-chat", 2, ""}, // _name_or_path
		{"other/Foo-7B-Instruct", 1, ""},
		{"org/Foo-7B", 0, `model "org/Foo-7B" matches 2 shipped models (foo-7b-instruct, foo-7b-chat); give one of those names exactly`},
		{"foo-7b-hf", 0, "matches 2 shipped models"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lookupModel(tc.name, models)
			switch {
			case tc.layers == 0 && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("lookupModel(%q) = %v, %v; want an error containing %q", tc.name, got.Name, err, tc.err)
			case tc.layers > 0 && (err != nil || got.Layers != tc.layers):
				t.Errorf("lookupModel(%q) = %v (%d layers), %v; want the one with %d layers", tc.name, got.Name, got.Layers, err, tc.layers)
			}
		})
	}
}
