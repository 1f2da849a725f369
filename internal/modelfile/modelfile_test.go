package modelfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "..", "twin", "latency", "models", "qwen3-14b.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	abs := write("mine.json")
	write("snapshots/my-model/config.json")
	write("org/Local-Model/config.json")
	write("notjson") // a file, whatever its name

	for _, tc := range []struct {
		ref, base string
		name      string // the model's Name; "" with err
		err       string
	}{
		{abs, "", "mine", ""},
		{"mine.json", dir, "mine", ""},
		{"notjson", dir, "notjson", ""},
		{filepath.Join(dir, "snapshots", "my-model"), "", "my-model", ""}, // a snapshot directory
		{"org/Local-Model", dir, "Local-Model", ""},                       // a file wins over a name
		{"meta-llama/Llama-3.1-8B", dir, "llama-3.1-8b-instruct", ""},     // no such file: a name
		{"qwen3-32b", "", "qwen3-32b", ""},
		{"missing.json", dir, "", "missing.json"},
		{"./qwen3-32b", dir, "", "qwen3-32b"}, // a path, not a name
		{"a/b/c", dir, "", "no such file"},
		{"org/Not-Shipped", dir, "", "unknown model \"org/Not-Shipped\""},
		{"org/Not-Shipped", dir, "", "no file or directory"},
		{"", dir, "", "no model given"},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			m, err := Resolve(tc.ref, tc.base)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("Resolve(%q, %q) = %q, %v; want an error containing %q", tc.ref, tc.base, m.Name, err, tc.err)
			case tc.err == "" && (err != nil || m.Name != tc.name):
				t.Errorf("Resolve(%q, %q) = %q, %v; want %q", tc.ref, tc.base, m.Name, err, tc.name)
			}
		})
	}
}

func TestLoadNames(t *testing.T) {
	dir := t.TempDir()
	body := []byte(`{"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 1, "intermediate_size": 8, "vocab_size": 10}`)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "my-model.json"), "my-model"},
		{filepath.Join(dir, "Some-Model-7B", "config.json"), "Some-Model-7B"},
	} {
		if err := os.MkdirAll(filepath.Dir(tc.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tc.path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Load(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if m.Name != tc.want {
			t.Errorf("Load(%s).Name = %q, want %q", tc.path, m.Name, tc.want)
		}
	}
	missing := filepath.Join(dir, "nope.json")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) error = %v, want one naming %s", err, missing)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"hidden_size": 8}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("Load(bad) error = %v, want one naming %s", err, bad)
	}
}
