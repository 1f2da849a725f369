// Package modelfile reads a model's shape from disk: a Hugging Face
// config.json by path (or a downloaded snapshot's directory), or, for a
// name, one of the configs shipped in twin/latency. It is the I/O at the
// edge of twin/latency, which stays pure arithmetic (the engine, which
// imports latency, must not reach a file system).
package modelfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// Load reads the Hugging Face config.json at path. The model's name is its
// _name_or_path, else the file's name without ".json" (the directory's
// name for a file called config.json). Errors name the file.
func Load(path string) (latency.ModelConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return latency.ModelConfig{}, fmt.Errorf("model config: %w", err)
	}
	return latency.ParseModelConfigFile(path, data)
}

// Resolve turns a model reference into a shape. A reference to a
// file is loaded: one that exists (relative references are taken from
// baseDir when it is not ""), a directory holding config.json (a
// downloaded Hugging Face snapshot), or anything that ends in ".json", is
// absolute, starts with '.' or '~', or has more than one '/' (the error then
// says the file is missing). Anything else is a name for latency.LookupModel: a
// single '/' cannot mark a path, since Hugging Face names
// ("meta-llama/Llama-3.1-8B") have one.
func Resolve(ref, baseDir string) (latency.ModelConfig, error) {
	if strings.TrimSpace(ref) == "" {
		return latency.ModelConfig{}, fmt.Errorf("no model given: name a shipped model (%s) or give the path to its config.json",
			strings.Join(latency.ModelNames(), ", "))
	}
	p := ref
	if baseDir != "" && !filepath.IsAbs(ref) {
		p = filepath.Join(baseDir, ref)
	}
	if fi, err := os.Stat(p); err == nil {
		if !fi.IsDir() {
			return Load(p)
		}
		if cfg := filepath.Join(p, "config.json"); fileExists(cfg) {
			return Load(cfg)
		}
	}
	if looksLikePath(ref) {
		return Load(p) // fails, saying which file is missing
	}
	m, err := latency.LookupModel(ref)
	if err != nil && strings.Contains(ref, "/") {
		return latency.ModelConfig{}, fmt.Errorf("%w (no file or directory %s holding a config.json exists either)", err, p)
	}
	return m, err
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// looksLikePath reports whether ref can only be a file's path, not a
// model's name.
func looksLikePath(ref string) bool {
	return strings.HasSuffix(strings.ToLower(ref), ".json") || filepath.IsAbs(ref) ||
		strings.HasPrefix(ref, ".") || strings.HasPrefix(ref, "~") ||
		strings.Count(ref, "/") > 1 || (filepath.Separator != '/' && strings.ContainsRune(ref, filepath.Separator))
}
