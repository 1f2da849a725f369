package trace

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWriterOutput(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	recs := []Record{
		{Time: 0, Input: 4808, Output: 10},
		{Time: 3435948056 * time.Microsecond, Tenant: "acme", User: "u\"1", Session: "s\n", Class: "chat", Model: "llama-3.1-8b",
			Input: 812, Output: 96, Blocks: []uint64{4, 1<<64 - 1}, Deadline: 30 * time.Second, Service: 1250 * time.Millisecond},
		{Time: 3435948056 * time.Microsecond, User: "bad\xffutf8\x01", Input: 1, Output: 2},
	}
	for i := range recs {
		require.NoError(t, w.Write(&recs[i]))
	}
	require.NoError(t, w.Close())
	require.Equal(t, 3, w.Count())
	require.Equal(t,
		`{"t":0,"input":4808,"output":10}`+"\n"+
			`{"t":3435.948056,"tenant":"acme","user":"u\"1","session":"s\n","class":"chat","model":"llama-3.1-8b","input":812,"output":96,"blocks":[4,18446744073709551615],"deadline_s":30,"service_s":1.25}`+"\n"+
			`{"t":3435.948056,"user":"bad\ufffdutf8\u0001","input":1,"output":2}`+"\n",
		buf.String())

	// encoding/json agrees that every line is valid JSON with these values.
	for line := range bytes.Lines(buf.Bytes()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "%s", line)
	}

	// And it reads back equal, but for the invalid UTF-8.
	got, r, err := readAll(t, buf.String(), "out.jsonl", Options{})
	require.NoError(t, err)
	require.Equal(t, FormatCanonical, r.Format())
	for i := range recs {
		recs[i].Line = i + 1
	}
	recs[2].User = "bad\uFFFDutf8\x01"
	require.Equal(t, recs, got)
}

func TestWriterRefusesWhatTheReaderWould(t *testing.T) {
	tests := []struct {
		name string
		recs []Record
		want string
	}{
		{"negative time", []Record{{Time: -1}}, "record 1: t: got -1ns, want >= 0"},
		{"out of order", []Record{{Time: 2 * time.Second}, {Time: time.Second}}, "record 2: t: got 1s, want >= the previous record's 2s (sorted by arrival)"},
		{"negative input", []Record{{Input: -1}}, "record 1: input: got -1, want 0..2147483647"},
		{"huge output", []Record{{Output: 1 << 40}}, "record 1: output: got 1099511627776, want 0..2147483647"},
		{"negative deadline", []Record{{Deadline: -time.Second}}, "record 1: deadline_s: got -1s, want >= 0"},
		{"negative service", []Record{{Service: -time.Second}}, "record 1: service_s: got -1s, want >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf)
			var err error
			for i := range tt.recs {
				if err = w.Write(&tt.recs[i]); err != nil {
					break
				}
			}
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestCreateGzipAndReadBack(t *testing.T) {
	dir := t.TempDir()
	recs := []Record{{Time: 0, Input: 1, Output: 2, Blocks: []uint64{7}}, {Time: time.Millisecond, Model: "m", Input: 3, Output: 4}}
	for _, name := range []string{"out.jsonl", "out.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			w, err := Create(path)
			require.NoError(t, err)
			for i := range recs {
				require.NoError(t, w.Write(&recs[i]))
			}
			require.NoError(t, w.Close())
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, filepath.Ext(name) == ".gz", bytes.HasPrefix(b, gzipMagic), "gzipped exactly when named .gz")

			r, err := Open(path, Options{})
			require.NoError(t, err)
			defer r.Close()
			var rec Record
			for i := range recs {
				require.NoError(t, r.Next(&rec))
				want := recs[i]
				want.Line = i + 1
				got := rec.Clone()
				if len(got.Blocks) == 0 {
					got.Blocks = nil
				}
				require.Equal(t, want, got)
			}
		})
	}
}

// TestConvertRealTraceRoundTrips writes T3 as canonical JSONL and reads it
// back: the same records and the same statistics.
func TestConvertRealTraceRoundTrips(t *testing.T) {
	path := sharedFile(t, "mooncake_fast25/conversation_trace.jsonl")
	in, err := Open(path, Options{})
	require.NoError(t, err)
	defer in.Close()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	var rec Record
	var orig []Record
	for in.Next(&rec) == nil {
		require.NoError(t, w.Write(&rec))
		c := rec.Clone()
		c.Line = 0
		orig = append(orig, c)
	}
	require.NoError(t, w.Close())

	r, err := NewReader(bytes.NewReader(buf.Bytes()), "canonical", Options{})
	require.NoError(t, err)
	require.Equal(t, FormatCanonical, r.Format())
	i := 0
	for r.Next(&rec) == nil {
		c := rec.Clone()
		c.Line = 0
		require.Equal(t, orig[i], c, "record %d", i)
		i++
	}
	require.Equal(t, len(orig), i)

	r, err = NewReader(bytes.NewReader(buf.Bytes()), "canonical", Options{})
	require.NoError(t, err)
	s, err := ComputeStats(r)
	require.NoError(t, err)
	require.Equal(t, 12031, s.Requests)
	require.Equal(t, 260, s.PeakSliding.Count)
	require.EqualValues(t, 182790, s.Blocks.Distinct)
}
