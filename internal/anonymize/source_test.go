package anonymize

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/trace"
)

func TestChooseFormat(t *testing.T) {
	dir := t.TempDir()
	file := func(name, data string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
		return p
	}
	azure := file("azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,374,44\n")
	mooncake := file("m.jsonl", `{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1]}`+"\n")
	gatewayCSV := file("gw.log", "timestamp,prompt_tokens,completion_tokens\n")
	gatewayJSONL := file("gw.ndjson.gz", `{"timestamp":"2024-05-01T12:00:00Z"}`+"\n")
	nodes := file("nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,1,T4\n")

	tests := []struct {
		path, format string
		mapped       bool
		want, err    string
	}{
		{azure, FormatAuto, false, "azure", ""},
		{azure, FormatAuto, true, FormatCSV, ""}, // mapped columns: a gateway log
		{mooncake, FormatAuto, false, "mooncake", ""},
		{gatewayCSV, FormatAuto, false, FormatCSV, ""},
		{gatewayJSONL, "", false, FormatJSONL, ""},
		{azure, FormatJSONL, false, FormatJSONL, ""},
		{azure, "canonical", false, "canonical", ""},
		{nodes, FormatAuto, false, "", "format alibaba-node is not a request trace"},
		{azure, "alibaba-pod", false, "", `format "alibaba-pod", want auto, csv, jsonl or a request trace format: alibaba-genai, azure, burstgpt, canonical, mooncake`},
		{filepath.Join(dir, "missing.csv"), FormatAuto, false, "", "no such file"},
	}
	for _, tt := range tests {
		got, err := ChooseFormat(tt.path, tt.format, tt.mapped)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, "ChooseFormat(%s, %q, %v)", filepath.Base(tt.path), tt.format, tt.mapped)
			continue
		}
		require.NoError(t, err, "ChooseFormat(%s, %q, %v)", filepath.Base(tt.path), tt.format, tt.mapped)
		require.Equal(t, tt.want, got, "ChooseFormat(%s, %q, %v)", filepath.Base(tt.path), tt.format, tt.mapped)
	}
}

func TestOpenGenericGzip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log.csv.gz")
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte("timestamp,prompt_tokens,completion_tokens\n1.5,2,3\n"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o600))

	m := DefaultMapping()
	m.TimeFormat = Seconds
	src, err := OpenGeneric(p, FormatCSV, m, 0)
	require.NoError(t, err)
	var rec trace.Record
	require.NoError(t, src.Next(&rec))
	require.Equal(t, trace.Record{Time: 1500 * time.Millisecond, Input: 2, Output: 3, Line: 2, Blocks: rec.Blocks}, rec)
	require.ErrorIs(t, src.Next(&rec), io.EOF)
	require.NoError(t, src.Close())

	_, err = OpenGeneric(p, "xml", m, 0)
	require.ErrorContains(t, err, `generic format "xml", want csv or jsonl`)
}
