package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readAll reads every record of data, copying each.
func readAll(t *testing.T, data, name string, opts Options) ([]Record, *Reader, error) {
	t.Helper()
	r, err := NewReader(strings.NewReader(data), name, opts)
	if err != nil {
		return nil, nil, err
	}
	var out []Record
	var rec Record
	for {
		err := r.Next(&rec)
		if errors.Is(err, io.EOF) {
			return out, r, nil
		}
		if err != nil {
			return out, r, err
		}
		c := rec.Clone()
		if len(c.Blocks) == 0 {
			c.Blocks = nil
		}
		out = append(out, c)
	}
}

func TestReadFormats(t *testing.T) {
	tests := []struct {
		name, data string
		format     string
		start      string // RFC 3339, for absolute formats
		want       []Record
	}{
		{
			name:   "azure 2023: CRLF, no final newline, 7 fractional digits",
			data:   "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,4808,10\r\n2023-11-16 18:17:04.0319600,3180,8\r\n2023-11-16 18:18:04.0319601,0,1",
			format: FormatAzure, start: "2023-11-16T18:17:03.97996Z",
			want: []Record{
				{Time: 0, Input: 4808, Output: 10, Line: 2},
				{Time: 52 * time.Millisecond, Input: 3180, Output: 8, Line: 3},
				{Time: 60*time.Second + 52*time.Millisecond + 100, Input: 0, Output: 1, Line: 4},
			},
		},
		{
			name:   "azure 2024: +00:00 zone, LF",
			data:   "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.0000000+00:00,2048,128\n2024-05-10 00:00:00.0000000+00:00,17,3\n2024-05-10 00:00:01.5000000+00:00,100,20\n",
			format: FormatAzure, start: "2024-05-10T00:00:00Z",
			want: []Record{
				{Time: 0, Input: 2048, Output: 128, Line: 2},
				{Time: 0, Input: 17, Output: 3, Line: 3},
				{Time: 1500 * time.Millisecond, Input: 100, Output: 20, Line: 4},
			},
		},
		{
			name:   "azure with other zones: converted to UTC",
			data:   "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 02:00:00.0000000+02:00,1,1\n2024-05-09 19:30:00.5000000-04:30,1,1\n2024-05-10T00:00:01Z,1,1\n",
			format: FormatAzure, start: "2024-05-10T00:00:00Z",
			want: []Record{
				{Time: 0, Input: 1, Output: 1, Line: 2},
				{Time: 500 * time.Millisecond, Input: 1, Output: 1, Line: 3},
				{Time: time.Second, Input: 1, Output: 1, Line: 4},
			},
		},
		{
			name:   "azure columns in another order, with an extra one",
			data:   "GeneratedTokens,note,ContextTokens,TIMESTAMP\n5,x,7,2023-11-16 18:17:03.1\n",
			format: FormatAzure, start: "2023-11-16T18:17:03.1Z",
			want: []Record{{Time: 0, Input: 7, Output: 5, Line: 2}},
		},
		{
			name:   "mooncake: relative ms, ties in file order, keys in any order",
			data:   "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n{\"hash_ids\": [0, 2], \"output_length\": 6, \"input_length\": 700, \"timestamp\": 0}\n\n{\"timestamp\": 3001, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [], \"extra\": {\"a\": [1, \"x\"]}}\n",
			format: FormatMooncake,
			want: []Record{
				{Time: 0, Input: 600, Output: 5, Blocks: []uint64{0, 1}, Line: 1},
				{Time: 0, Input: 700, Output: 6, Blocks: []uint64{0, 2}, Line: 2},
				{Time: 3001 * time.Millisecond, Input: 1, Output: 1, Line: 4},
			},
		},
		{
			name: "burstgpt: relative float seconds, model and log type",
			data: "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" +
				"5,ChatGPT,472,18,490,Conversation log\n" +
				"45.25,ChatGPT,1087,0,1087,API log\n" +
				"118.000001,GPT-4,417,276,693,Conversation log\n",
			format: FormatBurstGPT,
			want: []Record{
				{Time: 5 * time.Second, Model: "ChatGPT", Class: "Conversation log", Input: 472, Output: 18, Line: 2},
				{Time: 45250 * time.Millisecond, Model: "ChatGPT", Class: "API log", Input: 1087, Output: 0, Line: 3},
				{Time: 118*time.Second + time.Microsecond, Model: "GPT-4", Class: "Conversation log", Input: 417, Output: 276, Line: 4},
			},
		},
		{
			name: "burstgpt v2 columns: session id, elapsed time, a quoted model",
			data: "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n" +
				"0,s-1,1,\"GPT-4, 0613\",100,10,110,Conversation log\n" +
				"10,s-2,1,\"say \"\"hi\"\"\",200,20,220,API log\n",
			format: FormatBurstGPT,
			want: []Record{
				{Time: 0, Session: "s-1", Model: "GPT-4, 0613", Class: "Conversation log", Input: 100, Output: 10, Line: 2},
				{Time: 10 * time.Second, Session: "s-2", Model: `say "hi"`, Class: "API log", Input: 200, Output: 20, Line: 3},
			},
		},
		{
			name: "alibaba-genai: service time, empty prompt length",
			data: "gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,negative_prompt_length,num_images_per_prompt,num_inference_steps,checkpoint_model_version_id,num_lora\n" +
				"2024-11-15 16:57:50,TXT_2_IMG,SUCCEED,32.0,G0000,63.0,26.0,1.0,30.0,M0000,0\n" +
				"2024-11-15 16:58:01,IMG_2_IMG,FAILED,0.0,G0001,,,1.0,30.0,,1\n",
			format: FormatGenAI, start: "2024-11-15T16:57:50Z",
			want: []Record{
				{Time: 0, Tenant: "G0000", Class: "TXT_2_IMG", Model: "M0000", Input: 63, Service: 32 * time.Second, Line: 2},
				{Time: 11 * time.Second, Tenant: "G0001", Class: "IMG_2_IMG", Line: 3},
			},
		},
		{
			name: "canonical: every key, escapes, nulls",
			data: `{"t":0,"tenant":"acme","user":"u\"1\\","session":"s\u00e9\ud83d\ude00","class":"chat","model":"llama-3.1-8b","input":812,"output":96,"blocks":[4,9],"deadline_s":30,"service_s":1.25}` + "\n" +
				`{"output": 1, "input": 2, "t": 1.5e0, "tenant": null, "blocks": null, "deadline_s": null}` + "\n",
			format: FormatCanonical,
			want: []Record{
				{Time: 0, Tenant: "acme", User: `u"1\`, Session: "sé😀", Class: "chat", Model: "llama-3.1-8b", Input: 812, Output: 96,
					Blocks: []uint64{4, 9}, Deadline: 30 * time.Second, Service: 1250 * time.Millisecond, Line: 1},
				{Time: 1500 * time.Millisecond, Input: 2, Output: 1, Line: 2},
			},
		},
		{
			name:   "a UTF-8 byte-order mark is not part of the header",
			data:   "\xef\xbb\xbfTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,1,2\n",
			format: FormatAzure, start: "2023-11-16T18:17:03.97996Z",
			want: []Record{{Time: 0, Input: 1, Output: 2, Line: 2}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, forced := range []string{"", tt.format} {
				got, r, err := readAll(t, tt.data, "in", Options{Format: forced})
				require.NoError(t, err)
				require.Equal(t, tt.format, r.Format())
				require.Equal(t, tt.want, got)
				start, ok := r.Start()
				require.Equal(t, tt.start != "", ok, "Start() known")
				if ok {
					require.Equal(t, tt.start, start.Format(time.RFC3339Nano))
				}
			}
		})
	}
}

func TestDetectionErrors(t *testing.T) {
	tests := []struct {
		name, data, format string
		want               []string // substrings of the error
	}{
		{"unknown header", "time,prompt,completion\n1,2,3\n", "",
			[]string{`in:1: unrecognised trace: got "time,prompt,completion", want one of: azure header "TIMESTAMP,ContextTokens,GeneratedTokens"`,
				`burstgpt header "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"`, "mooncake JSONL", "canonical JSONL", "alibaba-pod header"}},
		{"unknown JSON keys", `{"ts": 1, "prompt": 2}` + "\n", "",
			[]string{`in:1: unrecognised trace: got "{\"ts\": 1, \"prompt\": 2}"`}},
		{"header after blank lines", "\n\nfoo\n", "", []string{`in:3: unrecognised trace: got "foo"`}},
		{"empty file", "", "", []string{"in: empty file: want one of:"}},
		{"forced format, other header", "TIMESTAMP,ContextTokens,GeneratedTokens\n", FormatBurstGPT,
			[]string{`in:1: unrecognised trace: got "TIMESTAMP,ContextTokens,GeneratedTokens", want burstgpt header`, "required columns Timestamp,Request tokens,Response tokens"}},
		{"forced JSONL format on a CSV", "TIMESTAMP,ContextTokens,GeneratedTokens\n", FormatMooncake,
			[]string{`want mooncake JSONL like {"timestamp": 0`}},
		{"unknown format name", "x\n", "parquet", []string{`unknown trace format "parquet": want one of alibaba-genai, alibaba-node, alibaba-pod, alibaba-spot-node, azure, burstgpt, canonical, mooncake`}},
		{"a pod list is not a request trace", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n", "",
			[]string{"in: alibaba-pod is a GPU job (pod) list, not a request trace: read it with trace.OpenJobs"}},
		{"a node list is not a request trace", "gpu_model,gpu_capacity_num,cpu_num,node_name\n", "",
			[]string{"in: alibaba-spot-node is a GPU node list, not a request trace: read it with trace.OpenNodes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(strings.NewReader(tt.data), "in", Options{Format: tt.format})
			require.Error(t, err)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
	t.Run("a forced JSONL format reads an empty file as no records", func(t *testing.T) {
		got, _, err := readAll(t, "\n", "in", Options{Format: FormatCanonical})
		require.NoError(t, err)
		require.Empty(t, got)
	})
	t.Run("a request trace is not a job list", func(t *testing.T) {
		_, err := NewJobReader(strings.NewReader("TIMESTAMP,ContextTokens,GeneratedTokens\n"), "in", Options{})
		require.EqualError(t, err, "in: azure is a request trace, not a GPU job (pod) list: read it with trace.Open")
	})
}

const azureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens\n"

// TestRowErrors checks that each malformed row is reported as
// FILE:LINE: field: got X, want Y.
func TestRowErrors(t *testing.T) {
	tests := []struct {
		name, data, format string
		want               string
	}{
		{"azure bad count", azureHeader + "2023-11-16 18:17:03.9799600,12a,1\n", "",
			`in:2: ContextTokens: got "12a", want a non-negative integer`},
		{"azure negative count", azureHeader + "2023-11-16 18:17:03.9799600,1,-1\n", "",
			`in:2: GeneratedTokens: got "-1", want a non-negative integer`},
		{"azure bad time", azureHeader + "2023-11-16 18:17:03.9799600,1,1\n2023-11-16 25:17:03.97,1,1\n", "",
			`in:3: TIMESTAMP: got "2023-11-16 25:17:03.97", want a time like 2023-11-16 18:17:03.9799600 or 2024-05-10 00:00:00.0000000+00:00`},
		{"azure finer than 100 ns", azureHeader + "2023-11-16 18:17:03.97996001,1,1\n", "",
			`in:2: TIMESTAMP: got "2023-11-16 18:17:03.97996001", want a time like`},
		{"azure 30 February", azureHeader + "2023-02-30 18:17:03.9799600,1,1\n", "",
			`in:2: TIMESTAMP: got "2023-02-30 18:17:03.9799600"`},
		{"azure field count", azureHeader + "2023-11-16 18:17:03.9799600,1\n", "",
			`in:2: row: got 2 fields in "2023-11-16 18:17:03.9799600,1", want 3, as in the header`},
		{"azure unsorted", azureHeader + "2023-11-16 18:17:03.9799600,1,1\n2023-11-16 18:17:04.0000000,1,1\n2023-11-16 18:17:03.0000000,1,1\n", "",
			`in:4: TIMESTAMP: got "2023-11-16 18:17:03.0000000", want a time no earlier than line 3's (request traces must be sorted by arrival)`},
		{"mooncake unsorted", `{"timestamp": 5, "input_length": 1, "output_length": 1}` + "\n" + `{"timestamp": 4, "input_length": 1, "output_length": 1}` + "\n", "",
			`in:2: timestamp: got "4", want a time no earlier than line 1's`},
		{"mooncake float timestamp", `{"timestamp": 1.5, "input_length": 1, "output_length": 1}` + "\n", "",
			`in:1: timestamp: got "1.5", want non-negative integer milliseconds`},
		{"mooncake missing key", `{"timestamp": 1, "input_length": 1, "output_length": 1}` + "\n" + `{"timestamp": 1, "output_length": 1}` + "\n", "",
			`in:2: input_length: got no such key, want every row to have timestamp, input_length and output_length`},
		{"mooncake bad hash", `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1, -2]}` + "\n", "",
			`in:1: hash_ids: got "-2", want an array of non-negative integers`},
		{"mooncake syntax", `{"timestamp": 1, "input_length": 1, "output_length": 1}` + "\n" + `{"timestamp": 1, "input_length": 1 "output_length": 1}` + "\n", "",
			`in:2: row: got "\"output_length\": 1}", want one JSON object per line`},
		{"mooncake duplicate key", `{"timestamp": 1, "input_length": 1, "output_length": 1, "input_length": 2}` + "\n", "",
			`in:1: input_length: got "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"input_length\": 2}", want each key once`},
		{"canonical unknown key", `{"t": 0, "input": 1, "output": 1, "tenat": "x"}` + "\n", FormatCanonical,
			`in:1: key: got "tenat", want one of the canonical keys t, tenant, user, session, class, model, input, output, blocks, deadline_s, service_s`},
		{"canonical negative time", `{"t": -1, "input": 1, "output": 1}` + "\n", FormatCanonical,
			`in:1: t: got "-1", want non-negative seconds, a decimal number`},
		{"canonical string count", `{"t": 0, "input": "1", "output": 1}` + "\n", FormatCanonical,
			`in:1: input: got "\"1\"", want a non-negative integer`},
		{"canonical missing output", `{"t": 0, "input": 1}` + "\n", FormatCanonical,
			`in:1: output: got no such key, want every row to have t, input and output`},
		{"burstgpt bad timestamp", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n-5,ChatGPT,1,1,2,API log\n", "",
			`in:2: Timestamp: got "-5", want non-negative seconds, a decimal number`},
		{"burstgpt stray quote", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,Chat\"GPT,1,1,2,API log\n", "",
			`in:2: row: got "5,Chat\"GPT,1,1,2,API log", want valid CSV (a stray or unterminated quote)`},
		{"genai fractional prompt", "gmt_create,predict_type,exec_time_seconds,prompt_length\n2024-11-15 16:57:50,TXT_2_IMG,1.0,63.5\n", "",
			`in:2: prompt_length: got "63.5", want a non-negative whole number (63 or 63.0) or empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, r, err := readAll(t, tt.data, "in", Options{Format: tt.format})
			require.Error(t, err)
			var re *RowError
			require.ErrorAs(t, err, &re)
			require.Contains(t, err.Error(), tt.want)
			// The error is sticky.
			var rec Record
			require.Equal(t, err, r.Next(&rec))

			// With SkipBadRows the row is counted and kept, not returned.
			_, r, err = readAll(t, tt.data, "in", Options{Format: tt.format, SkipBadRows: true})
			require.NoError(t, err)
			require.Equal(t, 1, r.Skipped())
			rows := r.SkippedRows()
			require.Len(t, rows, 1)
			require.Contains(t, rows[0].Error(), tt.want)
		})
	}
}

func TestSkipBadRows(t *testing.T) {
	var b strings.Builder
	b.WriteString(azureHeader)
	good := 0
	for i := range 30 {
		if i%2 == 1 {
			b.WriteString("2023-11-16 18:17:03.9799600,bad,1\n")
			continue
		}
		b.WriteString("2023-11-16 18:17:03.9799600,1,1\n")
		good++
	}
	got, r, err := readAll(t, b.String(), "x.csv", Options{SkipBadRows: true})
	require.NoError(t, err)
	require.Len(t, got, good)
	require.Equal(t, 15, r.Skipped())
	rows := r.SkippedRows()
	require.Len(t, rows, MaxSkippedRows, "only the first few are kept")
	for i, row := range rows {
		require.Equal(t, 3+2*i, row.Line)
		require.Equal(t, "ContextTokens", row.Field)
		require.Equal(t, `"bad"`, row.Got)
	}
	// Lines of the records that were read skip over the bad ones.
	require.Equal(t, 2, got[0].Line)
	require.Equal(t, 4, got[1].Line)

	t.Run("a bad first row does not set the origin", func(t *testing.T) {
		got, r, err := readAll(t, azureHeader+"2023-11-16 18:17:00.0000000,x,1\n2023-11-16 18:17:03.0000000,1,1\n2023-11-16 18:17:04.0000000,1,1\n", "x.csv", Options{SkipBadRows: true})
		require.NoError(t, err)
		require.Equal(t, 1, r.Skipped())
		require.Equal(t, []time.Duration{0, time.Second}, []time.Duration{got[0].Time, got[1].Time})
	})
}

func gz(t *testing.T, data string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(data))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func TestGzipDetectedByMagic(t *testing.T) {
	data := azureHeader + "2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 18:17:04.0319600,3180,8"
	dir := t.TempDir()
	files := map[string][]byte{
		"plain.csv":         []byte(data),
		"gzipped.csv":       gz(t, data), // no .gz: the magic bytes tell
		"gzipped.csv.gz":    gz(t, data),
		"plain-named.gz":    []byte(data), // a .gz name does not force gunzip
		"two-members.csv.z": append(gz(t, data[:60]), gz(t, data[60:])...),
	}
	for name, b := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(path, b, 0o644))
			r, err := Open(path, Options{})
			require.NoError(t, err)
			var rec Record
			require.NoError(t, r.Next(&rec))
			require.Equal(t, 4808, rec.Input)
			require.NoError(t, r.Next(&rec))
			require.Equal(t, 52*time.Millisecond, rec.Time)
			require.ErrorIs(t, r.Next(&rec), io.EOF)
			require.ErrorIs(t, r.Next(&rec), io.EOF, "EOF again after the end")
			require.NoError(t, r.Close())
		})
	}
	t.Run("corrupt gzip", func(t *testing.T) {
		b := gz(t, data)
		b[len(b)-5] ^= 0xff // break the CRC-32 trailer
		r, err := NewReader(bytes.NewReader(b), "bad.gz", Options{})
		require.NoError(t, err)
		var rec Record
		for err == nil {
			err = r.Next(&rec)
		}
		require.ErrorContains(t, err, "bad.gz: read: gzip: invalid checksum")
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Open(filepath.Join(dir, "nope.csv"), Options{})
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

func TestLongLines(t *testing.T) {
	// A Mooncake row longer than the read buffer: 20,000 blocks.
	var b strings.Builder
	b.WriteString(`{"timestamp": 7, "input_length": 10240000, "output_length": 1, "hash_ids": [`)
	for i := range 20000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("1234567")
	}
	b.WriteString("]}\n")
	long := b.String()
	require.Greater(t, len(long), bufSize)
	got, _, err := readAll(t, long+`{"timestamp": 8, "input_length": 1, "output_length": 1}`, "in", Options{})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Len(t, got[0].Blocks, 20000)
	require.Equal(t, 2, got[1].Line)
}

func TestRecordsReuseMemory(t *testing.T) {
	data := `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1, 2, 3]}` + "\n" +
		`{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [4]}` + "\n" +
		`{"timestamp": 2, "input_length": 1, "output_length": 1}` + "\n"
	r, err := NewReader(strings.NewReader(data), "in", Options{})
	require.NoError(t, err)
	var rec Record
	require.NoError(t, r.Next(&rec))
	first := &rec.Blocks[0]
	kept := rec.Clone()
	require.NoError(t, r.Next(&rec))
	require.Equal(t, []uint64{4}, rec.Blocks)
	require.Same(t, first, &rec.Blocks[0], "Blocks' backing array is reused")
	require.Equal(t, []uint64{1, 2, 3}, kept.Blocks, "a clone does not share it")
	require.NoError(t, r.Next(&rec))
	require.Empty(t, rec.Blocks, "a row without hash_ids leaves no stale blocks")
}

// TestNextDoesNotAllocate pins the steady-state promise: once warm, reading
// a row allocates nothing.
func TestNextDoesNotAllocate(t *testing.T) {
	tests := []struct {
		name   string
		header string
		row    func(i int) string
	}{
		{"azure", azureHeader, func(i int) string {
			return "2023-11-16 18:17:03.9799600,4808,10\n"
		}},
		{"mooncake", "", func(i int) string {
			return `{"timestamp": 3000, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}` + "\n"
		}},
		{"burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n", func(i int) string {
			return "5.5,ChatGPT,472,18,490,Conversation log\n"
		}},
		{"canonical", "", func(i int) string {
			return `{"t":1.5,"tenant":"acme","class":"chat","model":"m","input":812,"output":96,"blocks":[4,9],"deadline_s":30}` + "\n"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const rows = 2000
			var b strings.Builder
			b.WriteString(tt.header)
			for i := range rows {
				b.WriteString(tt.row(i))
			}
			r, err := NewReader(strings.NewReader(b.String()), "in", Options{})
			require.NoError(t, err)
			var rec Record
			require.NoError(t, r.Next(&rec)) // warm: the first row sizes buffers and interns strings
			allocs := testing.AllocsPerRun(rows/2, func() {
				if err := r.Next(&rec); err != nil {
					t.Fatal(err)
				}
			})
			require.Zero(t, allocs, "allocations per row")
		})
	}
}

func TestJobs(t *testing.T) {
	const header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
	data := header +
		"openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n" +
		"openb-pod-0001,6000,12288,1,460,V100M16|V100M32,BE,Pending,427061,12902960,\n" +
		"openb-pod-0002,6000,12288,0,0,,BE,Failed,427070,427080,427071\n"
	r, err := NewJobReader(strings.NewReader(data), "pods.csv", Options{})
	require.NoError(t, err)
	require.Equal(t, FormatPod, r.Format())
	var got []Job
	var j Job
	for r.Next(&j) == nil {
		c := j
		c.GPUSpec = append([]string(nil), j.GPUSpec...)
		got = append(got, c)
	}
	require.Equal(t, []Job{
		{Name: "openb-pod-0000", CPUMilli: 12000, MemoryMiB: 16384, GPUs: 1, GPUMilli: 1000, QoS: "LS", Phase: "Running",
			Created: 0, Deleted: 12537496 * time.Second, Scheduled: 0, ScheduledKnown: true, Line: 2},
		{Name: "openb-pod-0001", CPUMilli: 6000, MemoryMiB: 12288, GPUs: 1, GPUMilli: 460, GPUSpec: []string{"V100M16", "V100M32"}, QoS: "BE", Phase: "Pending",
			Created: 427061 * time.Second, Deleted: 12902960 * time.Second, Line: 3},
		{Name: "openb-pod-0002", CPUMilli: 6000, MemoryMiB: 12288, QoS: "BE", Phase: "Failed",
			Created: 427070 * time.Second, Deleted: 427080 * time.Second, Scheduled: 427071 * time.Second, ScheduledKnown: true, Line: 4},
	}, got)
	_, ok := got[1].Wait()
	require.False(t, ok, "an empty scheduled_time is unknown, not 0")
	w, ok := got[2].Wait()
	require.True(t, ok)
	require.Equal(t, time.Second, w)
	require.Equal(t, 10*time.Second, got[2].Lifetime())

	bad := []struct{ row, want string }{
		{"p,1,1,1,1001,,LS,Running,0,1,0", `pods.csv:2: gpu_milli: got "1001", want 0..1000 (thousandths of one GPU)`},
		{"p,1,1,1,1,A||B,LS,Running,0,1,0", `pods.csv:2: gpu_spec: got "A||B", want GPU models separated by |`},
		{"p,1,1,1,1,,LS,Running,5,4,5", `pods.csv:2: deletion_time: got "4", want no earlier than creation_time`},
		{"p,1,1,1,1,,LS,Running,5,9,4", `pods.csv:2: scheduled_time: got "4", want no earlier than creation_time, or empty`},
		{"p,1,1,1,1,,LS,Running,x,9,4", `pods.csv:2: creation_time: got "x", want non-negative integer seconds`},
		{",1,1,1,1,,LS,Running,0,9,4", `pods.csv:2: name: got "", want a pod name`},
	}
	for _, tt := range bad {
		r, err := NewJobReader(strings.NewReader(header+tt.row+"\n"), "pods.csv", Options{})
		require.NoError(t, err)
		require.ErrorContains(t, r.Next(&j), tt.want)
	}
}

func TestNodes(t *testing.T) {
	tests := []struct {
		name, data, format string
		want               []Node
	}{
		{"openb", "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,32000,262144,0,\nopenb-node-1521,96000,393216,8,G2\n", FormatNode,
			[]Node{{Name: "openb-node-0000", CPUMilli: 32000, MemoryMiB: 262144, Line: 2}, {Name: "openb-node-1521", GPUs: 8, Model: "G2", CPUMilli: 96000, MemoryMiB: 393216, Line: 3}}},
		{"spot, its own column order", "gpu_model,gpu_capacity_num,cpu_num,node_name\nA100-SXM4-80GB,8,128,4337\n", FormatSpotNode,
			[]Node{{Name: "4337", GPUs: 8, Model: "A100-SXM4-80GB", CPUMilli: 128000, Line: 2}}},
		{"spot, README's column order", "node_name,gpu_model,gpu_capacity_num,cpu_num\n7,H800,8,192\n", FormatSpotNode,
			[]Node{{Name: "7", GPUs: 8, Model: "H800", CPUMilli: 192000, Line: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewNodeReader(strings.NewReader(tt.data), "nodes.csv", Options{})
			require.NoError(t, err)
			require.Equal(t, tt.format, r.Format())
			var got []Node
			var n Node
			for {
				err := r.Next(&n)
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				got = append(got, n)
			}
			require.Equal(t, tt.want, got)
		})
	}
}
