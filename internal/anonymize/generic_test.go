package anonymize

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/trace"
)

func gatewayMapping() Mapping {
	m := DefaultMapping()
	m.Tenant, m.Session, m.Class = "org_id", "conversation_id", "tier"
	m.MustExist = []string{FieldTenant, FieldSession, FieldClass}
	return m
}

func TestGenericCSV(t *testing.T) {
	const log = "timestamp,org_id,user,conversation_id,model,tier,prompt_tokens,completion_tokens,prompt,latency_ms\n" +
		"2024-05-01T12:00:00Z,acme,alice,c1,llama-70b,gold,812,95,hello there,120\n" +
		"2024-05-01T12:00:01.5Z,acme,bob,c2,llama-70b,,10,5,,130\n" +
		"2024-05-01T12:00:02Z,acme,alice,c1,llama-8b,gold,900,7,and again,\n"
	r := runBytes(t, log, runOpts{mapping: gatewayMapping()})
	require.NoError(t, r.err)
	p := newP(t, testKey, DefaultIDHexChars)
	want := "" +
		`{"t":0,"tenant":"` + p.ID(Tenant, "acme") + `","user":"` + p.ID(User, "alice") + `","session":"` + p.ID(Session, "c1") + `","class":"gold","model":"llama-70b","input":812,"output":95}` + "\n" +
		`{"t":1.5,"tenant":"` + p.ID(Tenant, "acme") + `","user":"` + p.ID(User, "bob") + `","session":"` + p.ID(Session, "c2") + `","model":"llama-70b","input":10,"output":5}` + "\n" +
		`{"t":2,"tenant":"` + p.ID(Tenant, "acme") + `","user":"` + p.ID(User, "alice") + `","session":"` + p.ID(Session, "c1") + `","class":"gold","model":"llama-8b","input":900,"output":7}` + "\n"
	require.Equal(t, want, string(r.out))

	rep := r.rep
	require.Equal(t, 3, rep.Rows.Read)
	require.Equal(t, 3, rep.Rows.Written)
	require.Equal(t, []ColumnCount{
		{FieldT, "timestamp", 3}, {FieldInput, "prompt_tokens", 3}, {FieldOutput, "completion_tokens", 3},
		{FieldModel, "model", 3}, {FieldClass, "tier", 2},
	}, rep.Kept)
	require.Equal(t, []ColumnCount{{FieldTenant, "org_id", 3}, {FieldUser, "user", 3}, {FieldSession, "conversation_id", 3}}, rep.Hashed)
	require.Equal(t, []ColumnCount{{"", "latency_ms", 2}, {"", "prompt", 2}}, rep.Dropped)

	text := string(r.text)
	for _, s := range []string{
		"anonymized in.csv (csv) -> out.jsonl",
		"rows: 3 read, 3 written, 0 skipped",
		"class   <- tier",
		"tenant   <- org_id",
		"dropped:\n  latency_ms  2 rows\n  prompt      2 rows",
		"16 hex chars (64 bits): collision probability <= 1.6e-19 for 3 ids",
	} {
		require.Contains(t, strings.Join(strings.Fields(text), " "), strings.Join(strings.Fields(s), " "), text)
	}
	var back Report
	require.NoError(t, json.Unmarshal(r.json, &back))
	require.Equal(t, rep.Dropped, back.Dropped)
	require.Equal(t, 64, back.Pseudonyms.Bits)
}

// TestSessionsStayLinked: every request of a session gets one pseudonym,
// distinct sessions distinct ones, and a second run with the key (another
// file, another day) the same ones.
func TestSessionsStayLinked(t *testing.T) {
	var b strings.Builder
	b.WriteString("timestamp,user,session_id,prompt_tokens,completion_tokens\n")
	for i := range 30 {
		b.WriteString(time.Date(2024, 5, 1, 12, 0, i, 0, time.UTC).Format(time.RFC3339))
		b.WriteString(",user-" + string(rune('a'+i%3)) + ",sess-" + string(rune('a'+i%5)) + ",1,1\n")
	}
	sessions := func(out []byte) []string {
		var s []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var rec struct{ Session, User string }
			require.NoError(t, json.Unmarshal([]byte(l), &rec))
			s = append(s, rec.Session)
		}
		return s
	}
	r1 := runBytes(t, b.String(), runOpts{})
	require.NoError(t, r1.err)
	got := sessions(r1.out)
	require.Len(t, got, 30)
	for i := range got {
		require.Equal(t, got[i%5], got[i], "row %d is in the session of row %d", i, i%5)
		require.Regexp(t, `^s-[0-9a-f]{16}$`, got[i])
	}
	distinct := map[string]bool{}
	for _, s := range got {
		distinct[s] = true
	}
	require.Len(t, distinct, 5)

	r2 := runBytes(t, b.String(), runOpts{})
	require.Equal(t, got, sessions(r2.out), "same key: same pseudonyms")
	r3 := runBytes(t, b.String(), runOpts{cfg: Config{Key: otherKey}})
	for i, s := range sessions(r3.out) {
		require.NotEqual(t, got[i], s, "another key: other pseudonyms")
	}
}

func TestGenericJSONL(t *testing.T) {
	const log = `{"timestamp":1714564800.25,"user":"alice","model":"m","usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15},"messages":[{"role":"user","content":"hi"}],"metadata":{"ip":"10.0.0.1"}}
{"timestamp":1714564801,"user":42,"model":"m","usage":{"prompt_tokens":"7","completion_tokens":1},"metadata":null}

{"timestamp":1714564802,"model":"m","usage.prompt_tokens":5,"usage":{"completion_tokens":2},"user":null}
`
	m := DefaultMapping()
	m.TimeFormat = Unix
	m.Input, m.Output = "usage.prompt_tokens", "usage.completion_tokens"
	r := runBytes(t, log, runOpts{jsonl: true, mapping: m})
	require.NoError(t, r.err)
	p := newP(t, testKey, DefaultIDHexChars)
	require.Equal(t, `{"t":0,"user":"`+p.ID(User, "alice")+`","model":"m","input":12,"output":3}
{"t":0.75,"user":"`+p.ID(User, "42")+`","model":"m","input":7,"output":1}
{"t":1.75,"model":"m","input":5,"output":2}
`, string(r.out))
	require.Equal(t, []ColumnCount{{"", "messages", 1}, {"", "metadata", 1}, {"", "usage.total_tokens", 1}}, r.rep.Dropped)
	require.Equal(t, []ColumnCount{{FieldUser, "user", 2}}, r.rep.Hashed)
	require.Empty(t, r.log)

	t.Run("an explicit column no row has is a warning", func(t *testing.T) {
		m := m
		m.Tenant, m.MustExist = "org", []string{FieldTenant}
		r := runBytes(t, log, runOpts{jsonl: true, mapping: m})
		require.NoError(t, r.err)
		require.Equal(t, "anonymize: warning: no row has a value in column org (for tenant)\n", string(r.log))
		require.Equal(t, []ColumnCount{{FieldTenant, "org", 0}, {FieldUser, "user", 2}}, r.rep.Hashed)
	})
}

func TestHeaderProblems(t *testing.T) {
	tests := []struct {
		name, data string
		mapping    Mapping
		want       string
	}{
		{"empty", "", DefaultMapping(), "empty file: no header line"},
		{"near names", "TIMESTAMP,prompt_token,completion_tokens\n", DefaultMapping(),
			"header: no column timestamp for t; did you mean TIMESTAMP?\nheader: no column prompt_tokens for input; did you mean prompt_token?"},
		{"explicit column must exist", "timestamp,prompt_tokens,completion_tokens\n", gatewayMapping(),
			"header: no column tier for class (the header has 3 columns; is the first line a header?)\n" +
				"header: no column org_id for tenant (the header has 3 columns; is the first line a header?)\n" +
				"header: no column conversation_id for session (the header has 3 columns; is the first line a header?)"},
		{"duplicate mapped column", "timestamp,prompt_tokens,completion_tokens,user,user\n", DefaultMapping(),
			"header: column user (user) appears 5 times"},
	}
	tests[3].want = "header: column user (user) appears 2 times"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewCSV(strings.NewReader(tt.data), tt.mapping, 0)
			require.EqualError(t, err, tt.want)
		})
	}
	t.Run("a default column may be absent", func(t *testing.T) {
		g, err := NewCSV(strings.NewReader("timestamp,prompt_tokens,completion_tokens\n"), DefaultMapping(), 0)
		require.NoError(t, err)
		require.Equal(t, io.EOF, g.Next(&trace.Record{}))
	})
	t.Run("a headerless file's first row is not printed", func(t *testing.T) {
		const secret = "2024-05-01T12:00:00Z,my secret prompt about tokens and timestamps,812,95"
		_, err := NewCSV(strings.NewReader(secret+"\n"), DefaultMapping(), 0)
		require.Error(t, err)
		require.NotContains(t, err.Error(), "secret")
		require.NotContains(t, err.Error(), "2024")
	})
}

func TestMappingProblems(t *testing.T) {
	m := DefaultMapping()
	m.Class = "user" // would put raw user ids into a clear field
	_, err := NewCSV(strings.NewReader("timestamp,prompt_tokens,completion_tokens,user\n"), m, 0)
	require.EqualError(t, err, "mapping: column user feeds both class and user")

	m = DefaultMapping()
	m.Time = ""
	_, err = NewJSONL(strings.NewReader(""), m)
	require.EqualError(t, err, "mapping: no column for t")

	m = DefaultMapping()
	m.TimeFormat = "iso"
	_, err = NewJSONL(strings.NewReader(""), m)
	require.ErrorContains(t, err, `time format "iso", want one of rfc3339, azure, unix, unix-ms, seconds, ms`)

	m = DefaultMapping()
	m.MustExist = []string{"prompt"}
	_, err = NewJSONL(strings.NewReader(""), m)
	require.EqualError(t, err, `mapping: unknown field "prompt"`)
}

func TestParseTime(t *testing.T) {
	epoch := func(s string) time.Duration {
		tm, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return time.Duration(tm.UnixNano())
	}
	tests := []struct {
		f    TimeFormat
		in   string
		want time.Duration
		err  string
	}{
		{RFC3339, "2024-05-01T12:00:00Z", epoch("2024-05-01T12:00:00Z"), ""},
		{RFC3339, "2024-05-01T14:00:00.123456789+02:00", epoch("2024-05-01T12:00:00.123456789Z"), ""},
		{RFC3339, " 2024-05-01T12:00:00Z ", epoch("2024-05-01T12:00:00Z"), ""},
		{RFC3339, "2024-05-01 12:00:00", 0, "not a time"},
		{RFC3339, "3000-01-01T00:00:00Z", 0, "out of range"},
		{Azure, "2023-11-16 18:17:03.9799600", epoch("2023-11-16T18:17:03.97996Z"), ""},
		{Azure, "2023-11-16 18:17:03", epoch("2023-11-16T18:17:03Z"), ""},
		{Azure, "2023-11-16T18:17:03Z", 0, "not a time"},
		{Unix, "1714564800", epoch("2024-05-01T12:00:00Z"), ""},
		{Unix, "1714564800.123456789123", epoch("2024-05-01T12:00:00.123456789Z"), ""},
		{Unix, "1.7145648e9", epoch("2024-05-01T12:00:00Z"), ""},
		{Unix, "-1", 0, "not a time"},
		{Unix, "1e400", 0, "not a time"},
		{Unix, "99999999999999999999", 0, "out of range"},
		{UnixMS, "1714564800250", epoch("2024-05-01T12:00:00.25Z"), ""},
		{UnixMS, "1714564800250.5", epoch("2024-05-01T12:00:00.2505Z"), ""},
		{Seconds, "3435.948056", 3435948056 * time.Microsecond, ""},
		{Seconds, ".5", 500 * time.Millisecond, ""},
		{Seconds, "5.", 5 * time.Second, ""},
		{Seconds, ".", 0, "not a time"},
		{Seconds, "", 0, "not a time"},
		{Seconds, "1,5", 0, "not a time"},
		{Millis, "1500", 1500 * time.Millisecond, ""},
		{Millis, "0.001", time.Microsecond, ""},
	}
	for _, tt := range tests {
		got, err := parseTime(tt.f, tt.in)
		if tt.err != "" {
			require.ErrorContains(t, err, tt.err, "parseTime(%s, %q)", tt.f, tt.in)
			if strings.TrimSpace(tt.in) != "" {
				require.NotContains(t, err.Error(), strings.TrimSpace(tt.in), "the error quotes the cell")
			}
			continue
		}
		require.NoError(t, err, "parseTime(%s, %q)", tt.f, tt.in)
		require.Equal(t, tt.want, got, "parseTime(%s, %q)", tt.f, tt.in)
	}
}

func TestParseTokens(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "812": 812, " 12 ": 12, "32.0": 32, "7.": 7} {
		got, err := parseTokens(in)
		require.NoError(t, err, "parseTokens(%q)", in)
		require.Equal(t, want, got, "parseTokens(%q)", in)
	}
	for _, in := range []string{"", "-1", "1.5", "twelve", "1e3", ".0", "99999999999999999999"} {
		_, err := parseTokens(in)
		require.Error(t, err, "parseTokens(%q)", in)
	}
}

func TestQuoteName(t *testing.T) {
	require.Equal(t, "prompt_tokens", quoteName("prompt_tokens"))
	require.Equal(t, "usage.total_tokens", quoteName("usage.total_tokens"))
	require.Equal(t, `"Request tokens"`, quoteName("Request tokens"))
	require.Equal(t, `"\x1b[31mred"`, quoteName("\x1b[31mred"))
	require.Equal(t, `""`, quoteName(""))
}

// TestBadRowErrorsHideCells: every kind of malformed row names the line
// and the column, and never prints a cell.
func TestBadRowErrorsHideCells(t *testing.T) {
	const prompt = "PROMPT-CELL-c4n4ry-Zq9"
	csvHeader := "timestamp,user,prompt,prompt_tokens,completion_tokens\n"
	csvTests := []struct {
		name, row, want string
	}{
		{"bad tokens", "2024-05-01T12:00:00Z,alice-raw-id," + prompt + ",lots,1\n", "line 2: column prompt_tokens: not a non-negative integer"},
		{"prompt in the token column", "2024-05-01T12:00:00Z,alice-raw-id,1," + prompt + ",1\n", "line 2: column prompt_tokens: not a non-negative integer"},
		{"prompt in the time column", prompt + ",alice-raw-id,x,1,1\n", "line 2: column timestamp: not a time in format rfc3339"},
		{"too many fields", "2024-05-01T12:00:00Z,alice-raw-id," + prompt + ",more," + prompt + ",1,1\n", "line 2: 7 fields, the header has 5"},
		{"bare quote", "2024-05-01T12:00:00Z,alice-raw-id,say \"" + prompt + "\",1,1\n", `line 2: bare " in non-quoted-field`},
		{"missing tokens", "2024-05-01T12:00:00Z,alice-raw-id," + prompt + ",,1\n", "line 2: column prompt_tokens: missing"},
		{"multi-line cell", "2024-05-01T12:00:00Z,alice-raw-id,\"line one\n" + prompt + "\",x,1\n", "line 2: column prompt_tokens: not a non-negative integer"},
	}
	for _, tt := range csvTests {
		t.Run("csv "+tt.name, func(t *testing.T) {
			r := runBytes(t, csvHeader+tt.row, runOpts{})
			require.EqualError(t, r.err, tt.want)
			requireNoLeak(t, r.all(), []string{prompt}, []string{"alice-raw-id"})

			r = runBytes(t, csvHeader+tt.row, runOpts{skipBad: true})
			require.NoError(t, r.err)
			require.Equal(t, 1, r.rep.Rows.Skipped)
			require.Contains(t, string(r.log), tt.want)
			require.Contains(t, string(r.text), tt.want)
			requireNoLeak(t, r.all(), []string{prompt}, []string{"alice-raw-id"})
		})
	}
	jsonTests := []struct {
		name, row, want string
	}{
		{"syntax error", `{"timestamp":"2024-05-01T12:00:00Z","user":"alice-raw-id","prompt":"` + prompt + `" oops}`, "line 1: not a JSON object"},
		{"not an object", `["` + prompt + `"]`, "line 1: not a JSON object"},
		{"two values", `{"timestamp":"2024-05-01T12:00:00Z"} "` + prompt + `"`, "line 1: more than one JSON value on the line"},
		{"id is an object", `{"timestamp":"2024-05-01T12:00:00Z","user":{"name":"alice-raw-id"},"prompt_tokens":1,"completion_tokens":1}`, "line 1: column user: an object, want a string or a number"},
		{"prompt as tokens", `{"timestamp":"2024-05-01T12:00:00Z","user":"alice-raw-id","prompt_tokens":"` + prompt + `","completion_tokens":1}`, "line 1: column prompt_tokens: not a non-negative integer"},
		{"number time", `{"timestamp":1714564800,"user":"alice-raw-id","prompt_tokens":1,"completion_tokens":1,"prompt":"` + prompt + `"}`, "line 1: column timestamp: a number, but the time format is rfc3339; use --time-format unix, unix-ms, seconds or ms"},
		{"invalid utf-8", "{\"timestamp\":\"2024-05-01T12:00:00Z\",\"prompt\":\"" + prompt + "\xff\"", "line 1: not a JSON object"},
	}
	for _, tt := range jsonTests {
		t.Run("jsonl "+tt.name, func(t *testing.T) {
			r := runBytes(t, tt.row+"\n", runOpts{jsonl: true})
			require.EqualError(t, r.err, tt.want)
			requireNoLeak(t, r.all(), []string{prompt}, []string{"alice-raw-id"})
		})
	}
}

func TestLongJSONLLine(t *testing.T) {
	defer func(n int) { maxLineBytes = n }(maxLineBytes)
	maxLineBytes = 200_000
	long := `{"timestamp":"2024-05-01T12:00:00Z","prompt":"` + strings.Repeat("x", maxLineBytes) + `"}` + "\n"
	ok := `{"timestamp":"2024-05-01T12:00:01Z","prompt_tokens":1,"completion_tokens":1}` + "\n"
	r := runBytes(t, ok+long+ok, runOpts{jsonl: true, skipBad: true})
	require.NoError(t, r.err)
	require.Equal(t, 2, r.rep.Rows.Written)
	require.Equal(t, 1, r.rep.Rows.Skipped)
	require.Contains(t, string(r.log), "line 2: line longer than 200000 bytes")
	require.False(t, bytes.Contains(r.log, []byte("xxxxxxxx")))
}

func TestManyDroppedNames(t *testing.T) {
	var b strings.Builder
	for i := range maxDroppedNames + 50 {
		b.WriteString(`{"timestamp":"2024-05-01T12:00:00Z","prompt_tokens":1,"completion_tokens":1,"k`)
		b.WriteString(strings.Repeat("z", i))
		b.WriteString(`":1}` + "\n")
	}
	r := runBytes(t, b.String(), runOpts{jsonl: true})
	require.NoError(t, r.err)
	require.Len(t, r.rep.Dropped, maxDroppedNames)
	require.Equal(t, 50, r.rep.DroppedUnlisted)
	require.Contains(t, string(r.text), "and 50 more columns, not listed")
}
