package latency

// This file ships a set of Hugging Face config.json files inside the
// binary, so a run or a flag can name a model ("meta-llama/Llama-3.1-8B")
// instead of pointing at a file. Names are matched loosely because the
// files that name models (vLLM's meta.json, benchmark results, user flags)
// spell the same checkpoint many ways: with or without the org, with an
// -Instruct or -hf suffix, with a release tag. Those variants share their
// base model's shape, which is all this package reads.

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
)

// modelFiles are the shipped configs. To ship another model, drop its
// config.json into models/ under a lower-case file name and add its
// published size to modelconfig_test.go's publishedSizes.
//
//go:embed models/*.json
var modelFiles embed.FS

// shippedModel is one embedded config: its file stem and its shape.
type shippedModel struct {
	stem string
	cfg  ModelConfig
}

// shippedModels parses the embedded configs once. A file that does not
// parse is a bug in the shipped set (TestShippedModelsParse catches it), so
// the error names the file rather than the user's input.
var shippedModels = sync.OnceValues(func() ([]shippedModel, error) {
	var out []shippedModel
	for _, stem := range ModelNames() {
		file := "models/" + stem + ".json"
		data, err := modelFiles.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("shipped model %s: %w", file, err)
		}
		m, err := parseModelConfig(stem, "shipped "+file, data)
		if err != nil {
			return nil, err
		}
		out = append(out, shippedModel{stem: stem, cfg: m})
	}
	return out, nil
})

// ModelNames returns the shipped models' names (file stems), sorted.
func ModelNames() []string {
	files, _ := fs.Glob(modelFiles, "models/*.json") // the pattern is valid
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, strings.TrimSuffix(path.Base(f), ".json"))
	}
	slices.Sort(names)
	return names
}

// LookupModel finds a shipped model config by its Hugging Face name (the
// config's _name_or_path, e.g. "meta-llama/Llama-3.1-8B-Instruct") or file
// stem (e.g. "llama-3.1-8b-instruct"), case-insensitively. It tries, in
// order, and returns the first rule that picks exactly one model:
//
//  1. the whole name equals a stem or a _name_or_path;
//  2. the name without its org ("meta-llama/") equals a stem or a
//     _name_or_path without its org;
//  3. the same, once variant words are dropped from both sides: "instruct",
//     "chat", "hf", "base" anywhere, and a trailing four-digit release tag
//     ("-2507"). So "meta-llama/Llama-3.1-8B" finds llama-3.1-8b-instruct,
//     and "Qwen/Qwen3-30B-A3B-Instruct-2507" finds qwen3-30b-a3b.
//
// A rule that picks several models is an error naming them. Quantisation
// words ("fp8") are not variants: an FP8 checkpoint weighs half as much.
// The error for an unknown name lists the shipped names and says to pass a
// config.json path instead.
func LookupModel(name string) (ModelConfig, error) {
	models, err := shippedModels()
	if err != nil {
		return ModelConfig{}, err
	}
	return lookupModel(name, models)
}

func lookupModel(name string, models []shippedModel) (ModelConfig, error) {
	q := modelKey(name)
	base := dropOrg(q)
	variant := variantKey(base)
	rules := []func(m shippedModel) bool{
		func(m shippedModel) bool { return q == modelKey(m.stem) || q == modelKey(m.cfg.Name) },
		func(m shippedModel) bool {
			return base == modelKey(m.stem) || base == dropOrg(modelKey(m.cfg.Name))
		},
		func(m shippedModel) bool {
			return variant == variantKey(modelKey(m.stem)) || variant == variantKey(dropOrg(modelKey(m.cfg.Name)))
		},
	}
	if q != "" && variant != "" {
		for _, match := range rules {
			var hits []string
			var found ModelConfig
			for _, m := range models {
				if match(m) {
					hits = append(hits, m.stem)
					found = m.cfg
				}
			}
			switch {
			case len(hits) == 1:
				return found, nil
			case len(hits) > 1:
				return ModelConfig{}, fmt.Errorf("model %q matches %d shipped models (%s); give one of those names exactly, or the path to the config.json you mean",
					name, len(hits), strings.Join(hits, ", "))
			}
		}
	}
	stems := make([]string, len(models))
	for i, m := range models {
		stems[i] = m.stem
	}
	return ModelConfig{}, fmt.Errorf("unknown model %q: the shipped models are %s (Hugging Face names such as meta-llama/Llama-3.1-8B-Instruct also match, as do names that differ only by an -Instruct, -hf or release-tag suffix); for another model, pass the path to its config.json (from its Hugging Face repository) instead",
		name, strings.Join(stems, ", "))
}

// modelKey folds case and the separators users swap for '-'.
func modelKey(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == ' ' {
			return '-'
		}
		return r
	}, strings.ToLower(strings.TrimSpace(s)))
}

// dropOrg keeps what follows the last '/': "meta-llama/x" → "x".
func dropOrg(key string) string { return key[strings.LastIndexByte(key, '/')+1:] }

// variantWords name fine-tunes and repackagings of a base checkpoint that
// keep its shape.
var variantWords = []string{"instruct", "chat", "hf", "base"}

// variantKey drops variant words anywhere and a trailing four-digit
// release tag ("2507", "2407") from a dash-separated key.
func variantKey(key string) string {
	words := slices.DeleteFunc(strings.Split(key, "-"), func(w string) bool {
		return w == "" || slices.Contains(variantWords, w)
	})
	if n := len(words); n > 1 && isReleaseTag(words[n-1]) {
		words = words[:n-1]
	}
	return strings.Join(words, "-")
}

func isReleaseTag(w string) bool {
	if len(w) != 4 {
		return false
	}
	for _, r := range w {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
