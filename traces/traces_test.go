package traces

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEmbeddedAreTheUpstreamFiles checks each embedded trace against what
// List says of it: byte for byte the upstream file (its SHA-256, the one
// shared/traces/README.md records for the file it copied) and its row count,
// so that a scenario replaying it sees exactly what it saw from disk.
func TestEmbeddedAreTheUpstreamFiles(t *testing.T) {
	require.NotEmpty(t, List())
	require.True(t, slices.IsSortedFunc(List(), func(a, b Info) int { return strings.Compare(a.Name, b.Name) }))
	for _, info := range List() {
		t.Run(info.Name, func(t *testing.T) {
			require.NotEmpty(t, info.Source)
			require.NotEmpty(t, info.License)
			rc, err := Open(info.Name)
			require.NoError(t, err)
			data, err := io.ReadAll(rc)
			require.NoError(t, err)
			require.NoError(t, rc.Close())
			sum := sha256.Sum256(data)
			require.Equal(t, info.SHA256, hex.EncodeToString(sum[:]), "the embedded copy differs from the upstream file")

			lines := bytes.Count(data, []byte("\n"))
			if len(data) > 0 && data[len(data)-1] != '\n' {
				lines++ // Azure's files end without a newline
			}
			if strings.HasSuffix(info.Name, ".csv") {
				lines-- // the header
			}
			require.Equal(t, info.Rows, lines)
		})
	}
}

// TestNothingElseIsEmbedded keeps List and the embedded files one set: a
// file embedded but not listed has no source or licence stated in code, a
// listed one not embedded fails to open.
func TestNothingElseIsEmbedded(t *testing.T) {
	var got []string
	require.NoError(t, fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got = append(got, strings.TrimSuffix(path, ".gz"))
		}
		return err
	}))
	require.Equal(t, Names(), got)
}

func TestName(t *testing.T) {
	name, ok := Name("embedded:mooncake_fast25/conversation_trace.jsonl")
	require.True(t, ok)
	require.Equal(t, "mooncake_fast25/conversation_trace.jsonl", name)
	require.True(t, Has(name))
	_, ok = Name("../shared/traces/mooncake_fast25/conversation_trace.jsonl")
	require.False(t, ok)
}

func TestOpenUnknownSaysWhatThereIs(t *testing.T) {
	_, err := Open("azure_llm_2023/AzureLLMInferenceTrace_code.csv")
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, "embedded:azure_llm_2023/AzureLLMInferenceTrace_code.csv: no such embedded trace")
	require.Contains(t, msg, "did you mean embedded:azure_llm_2023/AzureLLMInferenceTrace_conv.csv?")
	for _, n := range Names() {
		require.Contains(t, msg, Scheme+n)
	}
	// A name that only reaches a file by its storage name is not a trace.
	_, err = Open("azure_llm_2023/AzureLLMInferenceTrace_conv.csv.gz")
	require.ErrorContains(t, err, "no such embedded trace")
}

// BenchmarkRead is what reading an embedded trace costs over reading the
// file: gunzip, per uncompressed byte (SetBytes), once per replay.
func BenchmarkRead(b *testing.B) {
	for _, info := range List() {
		b.Run(info.Name[strings.LastIndexByte(info.Name, '/')+1:], func(b *testing.B) {
			var n int64
			for b.Loop() {
				rc, err := Open(info.Name)
				if err != nil {
					b.Fatal(err)
				}
				n, err = io.Copy(io.Discard, rc)
				if err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
			b.SetBytes(n)
		})
	}
}
