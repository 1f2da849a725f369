package anonymize

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The canaries: a prompt, a response and a metadata value that must not
// reach anything the anonymizer writes, in whole or in any piece of 8
// bytes or more; and raw ids that must not either.
const (
	canaryPrompt   = "CANARY-PROMPT:Zq7vX93kLp0w@ssn=078-05-1120;\"quoted\", with comma\nand newline"
	canaryResponse = "CANARY-RESPONSE:Jh4TtQw8Yx2Rm"
	canaryMeta     = "CANARY-META:ip=203.0.113.77"
)

var (
	rawTenants  = []string{"ORG-raw-acme-7731", "ORG-raw-globex-4410"}
	rawUsers    = []string{"USER-raw-alice-0042", "USER-raw-bob-9913"}
	rawSessions = []string{"CONV-raw-9f8e7d6c", "CONV-raw-1a2b3c4d", "CONV-raw-55aa77bb"}
	canaries    = []string{canaryPrompt, canaryResponse, canaryMeta}
)

func rawIDs() []string {
	return append(append(append([]string{}, rawTenants...), rawUsers...), rawSessions...)
}

// gatewayRows are a gateway's log rows: row 4 has a bad token count (and
// the canary prompt), to be skipped.
func gatewayRows() [][]string {
	rows := [][]string{{"timestamp", "org_id", "user", "conversation_id", "model", "tier", "prompt_tokens", "completion_tokens", "prompt", "response", "metadata"}}
	for i := range 6 {
		tokens := "812"
		if i == 3 {
			tokens = "812 tokens" // bad
		}
		rows = append(rows, []string{
			"2024-05-01T12:00:0" + string(rune('0'+i)) + ".250Z",
			rawTenants[i%2], rawUsers[i%2], rawSessions[i%3], "llama-70b", "gold", tokens, "95",
			canaryPrompt, canaryResponse, `{"ip":"` + canaryMeta + `"}`,
		})
	}
	return rows
}

func gatewayCSV(t *testing.T) string {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	require.NoError(t, w.WriteAll(gatewayRows()))
	return b.String()
}

func gatewayJSONL(t *testing.T) string {
	rows := gatewayRows()
	var b strings.Builder
	for _, row := range rows[1:] {
		obj := map[string]any{}
		for i, h := range rows[0] {
			obj[h] = row[i]
		}
		obj["messages"] = []any{map[string]any{"role": "user", "content": canaryPrompt, "name": rawUsers[0]}}
		obj["headers"] = map[string]any{"x-org": rawTenants[0], "x-session": rawSessions[0]}
		line, err := json.Marshal(obj)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestCanary is the product issue's acceptance test: no byte of the
// prompt, response or metadata, and no raw id, in the output, the log,
// the text report or the JSON report; over CSV and JSONL.
func TestCanary(t *testing.T) {
	m := gatewayMapping()
	for _, tt := range []struct {
		name    string
		jsonl   bool
		data    string
		badLine string // the prompt has a newline: a CSV row is two lines
	}{{"csv", false, gatewayCSV(t), "line 8"}, {"jsonl", true, gatewayJSONL(t), "line 4"}} {
		t.Run(tt.name, func(t *testing.T) {
			// The check itself finds what the fixture holds.
			require.Contains(t, leak([]byte(tt.data), canaries, nil), "of canary")
			require.Contains(t, leak([]byte(tt.data), nil, rawIDs()), "raw id")
			require.Contains(t, leak([]byte("x"+canaryMeta[5:13]+"x"), canaries, nil), "of canary")

			r := runBytes(t, tt.data, runOpts{jsonl: tt.jsonl, mapping: m, skipBad: true})
			require.NoError(t, r.err)
			require.Equal(t, 5, r.rep.Rows.Written)
			require.Equal(t, 1, r.rep.Rows.Skipped)
			require.Contains(t, string(r.log), tt.badLine+": column prompt_tokens: not a non-negative integer")
			requireNoLeak(t, r.all(), canaries, rawIDs())

			// The report names what it dropped.
			var dropped []string
			for _, c := range r.rep.Dropped {
				dropped = append(dropped, c.Column)
			}
			want := []string{"metadata", "prompt", "response"}
			if tt.jsonl {
				want = []string{"headers", "messages", "metadata", "prompt", "response"}
			}
			require.Equal(t, want, dropped)
			for _, name := range want {
				require.Contains(t, string(r.text), name)
			}

			// Without --skip-bad-rows the bad row stops the run, and its
			// error holds none of the row's cells.
			r = runBytes(t, tt.data, runOpts{jsonl: tt.jsonl, mapping: m})
			require.EqualError(t, r.err, tt.badLine+": column prompt_tokens: not a non-negative integer")
			requireNoLeak(t, r.all(), canaries, rawIDs())
		})
	}
}

// TestCanaryCanonical feeds a canonical trace with raw ids, and rows the
// trace reader refuses (its errors quote cells, here raw ids), through
// TraceSource.
func TestCanaryCanonical(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "raw.jsonl")
	lines := []string{
		`{"t":0,"tenant":"` + rawTenants[0] + `","user":"` + rawUsers[0] + `","session":"` + rawSessions[0] + `","input":10,"output":2,"blocks":[1,2]}`,
		`{"t":1,"tenant":"` + rawTenants[1] + `","user":7,"session":"` + rawSessions[1] + `","input":10,"output":2}`, // user is not a string
		`{"t":2,"tenant":"` + rawTenants[1] + `","user":"` + rawUsers[1] + `","session":"` + rawSessions[2] + `","prompt":"` + canaryResponse + `","input":10,"output":2}`,
		`{"t":3,"tenant":"` + rawTenants[0] + `","user":"` + rawUsers[0] + `","session":"` + rawSessions[0] + `","input":11,"output":3,"blocks":[1,2,3]}`,
	}
	require.NoError(t, os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o600))

	run := func(skip bool) result {
		var out, log, text, js bytes.Buffer
		job := Job{Input: in, Format: "canonical", Output: "out.jsonl",
			Open:   func() (Source, error) { return TraceSource(in, "canonical", skip) },
			Config: Config{Key: testKey}, SkipBadRows: skip, Log: &log}
		w := newTraceWriter(&out)
		rep, err := Run(t.Context(), job, w)
		require.NoError(t, w.Flush())
		r := result{out: out.Bytes(), log: log.Bytes(), rep: rep, err: err}
		if rep != nil {
			require.NoError(t, rep.WriteText(&text))
			require.NoError(t, rep.WriteJSON(&js))
			r.text, r.json = text.Bytes(), js.Bytes()
		}
		return r
	}
	r := run(true)
	require.NoError(t, r.err)
	require.Equal(t, 2, r.rep.Rows.Written)
	require.Equal(t, 2, r.rep.Rows.Skipped)
	require.Contains(t, string(r.log), "line 2: column user: want a JSON string or null")
	require.Contains(t, string(r.text), "every column the canonical reader does not read")
	requireNoLeak(t, r.all(), canaries, rawIDs())
	p := newP(t, testKey, DefaultIDHexChars)
	require.Contains(t, string(r.out), `"session":"`+p.ID(Session, rawSessions[0])+`"`)
	require.Contains(t, string(r.out), `"blocks":[`)
	require.NotContains(t, string(r.out), `"blocks":[1,2`)

	r = run(false)
	require.EqualError(t, r.err, "line 2: column user: want a JSON string or null")
	requireNoLeak(t, r.all(), canaries, rawIDs())

	_, err := TraceSource(filepath.Join(dir, "missing.jsonl"), "", false)
	require.ErrorContains(t, err, "no such file")
	headerless := filepath.Join(dir, "headerless.csv")
	require.NoError(t, os.WriteFile(headerless, []byte("2024-05-01T12:00:00Z,"+rawUsers[0]+","+canaryMeta+"\n"), 0o600))
	_, err = TraceSource(headerless, "", false)
	require.ErrorContains(t, err, "not a request trace of a known format")
	requireNoLeak(t, [][]byte{[]byte(err.Error())}, canaries, rawIDs())
}
