// Package traces holds the public request traces the library's scenarios
// replay, compressed, inside the binary: a scenario names one as
// "embedded:NAME" (trace.path: embedded:azure_llm_2023/AzureLLMInferenceTrace_conv.csv)
// and it runs from any directory, in a clone with nothing beside it, or
// from an installed binary. Where each trace comes from and under which
// licence is in README.md beside this file (and docs/traces.md).
//
// NAME is the file's upstream path under its dataset's folder, as staged in
// the team's shared/traces; the copy is byte for byte the upstream file (List
// gives its SHA-256, which a test checks), gzipped only for storage. Other
// traces are read from disk by path, as before.
package traces

import (
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/fleetdrill/fleetdrill/internal/suggest"
)

// Scheme prefixes a trace path that names an embedded trace.
const Scheme = "embedded:"

//go:embed azure_llm_2023/*.gz mooncake_fast25/*.gz
var files embed.FS

// Info describes an embedded trace.
type Info struct {
	Name    string // what follows Scheme in a trace path
	Rows    int    // data rows (requests)
	SHA256  string // of the uncompressed file, the upstream file's
	Source  string // repository, path and commit it was copied from
	License string
}

// all lists the embedded traces; a test checks that each is there, has
// Rows rows and SHA256's digest, and that nothing else is embedded.
var all = []Info{
	{
		Name:    "azure_llm_2023/AzureLLMInferenceTrace_conv.csv",
		Rows:    19366,
		SHA256:  "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8",
		Source:  "github.com/Azure/AzurePublicDataset data/AzureLLMInferenceTrace_conv.csv @ 790921015d50dd6aae7f7e47f39ba0e235ad6b08",
		License: "CC-BY-4.0 (Patel et al., Splitwise, ISCA 2024)",
	},
	{
		Name:    "mooncake_fast25/conversation_trace.jsonl",
		Rows:    12031,
		SHA256:  "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
		Source:  "github.com/kvcache-ai/Mooncake FAST25-release/traces/conversation_trace.jsonl @ 3cca71daccf2a7afb8fe3f0295358f70e3a69fdb",
		License: "Apache-2.0 (Qin et al., Mooncake, FAST 2025)",
	},
}

// List returns the embedded traces, sorted by name.
func List() []Info { return slices.Clone(all) }

// Names returns the embedded traces' names, sorted.
func Names() []string {
	out := make([]string, len(all))
	for i, t := range all {
		out[i] = t.Name
	}
	return out
}

// Name reports whether path names an embedded trace ("embedded:NAME"), and
// which.
func Name(path string) (name string, ok bool) {
	return strings.CutPrefix(path, Scheme)
}

// Has reports whether name (without Scheme) is an embedded trace.
func Has(name string) bool {
	return slices.ContainsFunc(all, func(t Info) bool { return t.Name == name })
}

// UnknownError says that a trace path names no embedded trace, and which
// ones there are.
func UnknownError(name string) error {
	hint := ""
	if near := suggest.Nearest(name, Names(), 1); len(near) > 0 {
		hint = fmt.Sprintf(" (did you mean %s%s?)", Scheme, near[0])
	}
	return fmt.Errorf("%s%s: no such embedded trace%s; the embedded traces are %s%s, or give a file's path",
		Scheme, name, hint, Scheme, strings.Join(Names(), ", "+Scheme))
}

// Open returns the uncompressed content of the embedded trace name
// (without Scheme), or UnknownError.
func Open(name string) (io.ReadCloser, error) {
	if !Has(name) {
		return nil, UnknownError(name)
	}
	f, err := files.Open(name + ".gz")
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", Scheme, name, err) // all and the embed pattern disagree: the test catches it
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s%s: gzip: %w", Scheme, name, err)
	}
	return &gzipFile{Reader: gz, f: f}, nil
}

type gzipFile struct {
	*gzip.Reader
	f io.Closer
}

func (g *gzipFile) Close() error {
	err := g.Reader.Close()
	if ferr := g.f.Close(); err == nil {
		err = ferr
	}
	return err
}
