package node

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseRequest: whatever body and count headers a client sends, the
// node's parsing (parseRequest) answers a 400 naming a code, or takes
// counts within their bounds, so that input + output cannot wrap; it takes
// only a body that is UTF-8 and one JSON value; and the counts it makes
// from content in place are the ones decoding it whole made
// (referenceCount), so that counting without copies changed no estimate.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []struct {
		body, in, out string
		chat          bool
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hello there"}],"max_tokens":4}`, "", "", true},
		{`{"model":"m","prompt":"héllo \u00e9\ud83d\ude00\ud800x\n","max_tokens":4}`, "", "", false},
		{`{"model":"m","prompt":["a","bcdef",null]}`, "", "", false},
		{`{"model":"m","prompt":[1,2,3,null,-4]}`, "", "", false},
		{`{"model":"m","prompt":[[1,2],[3],null,[]]}`, "", "", false},
		{`{"model":"m","messages":[{"content":[{"type":"text","text":"abc"},{"type":"image_url"}]}]}`, "", "", true},
		{`{"model":"m","messages":[{"content":{"x":1}}],"x_fleetdrill":{"input_tokens":9223372036854775807}}`, "", "", true},
		{`{"model":"m","messages":[{"content":"x"}]}`, "9223372036854775807", "9223372036854775807", true},
		{`{"model":"m","messages":[{"content":"x"}],"n":1000,"min_tokens":5}`, "", "", true},
		{"{\"model\":\"m\",\"prompt\":\"\xff\"}", "", "", false},
		{`{"model":"m","prompt":"x"}}`, "-1", "0", false},
	} {
		f.Add([]byte(s.body), s.in, s.out, s.chat)
	}
	f.Fuzz(func(t *testing.T, body []byte, inHdr, outHdr string, chat bool) {
		h := http.Header{}
		if inHdr != "" {
			h.Set(HeaderInputTokens, inHdr)
		}
		if outHdr != "" {
			h.Set(HeaderOutputTokens, outHdr)
		}
		p, br := parseRequest(body, h, chat, DefaultMaxTokens, false, "m")
		if br != nil {
			if br.code == "" || br.msg == "" || br.reason == "" {
				t.Fatalf("a refusal without a code, message or reason: %+v", br)
			}
			return
		}
		if !utf8.Valid(body) || !json.Valid(body) {
			t.Fatalf("took a body that is not UTF-8 JSON: %q", body)
		}
		if p.in < 1 || p.in > MaxTokenCount || p.out < 1 || p.out > maxOutputTokens {
			t.Fatalf("counts in=%d out=%d out of bounds", p.in, p.out)
		}
		stated := inHdr != "" || (p.req.X != nil && p.req.X.InputTokens != nil)
		if want, ok := referenceCount(body, chat); ok && !stated && p.in != want {
			t.Fatalf("input tokens %d, want %d (decoded whole) for %q", p.in, want, body)
		}
	})
}

// referenceCount is the input estimate of a body decoded whole, as the node
// counted before it counted in place: the content copied out, strings
// decoded, ids stored.
func referenceCount(body []byte, chat bool) (int, bool) {
	var r struct {
		Messages []json.RawMessage `json:"messages"`
		Prompt   json.RawMessage   `json:"prompt"`
	}
	if json.Unmarshal(body, &r) != nil {
		return 0, false
	}
	t := 0
	if chat {
		for _, m := range r.Messages {
			var msg struct {
				Content json.RawMessage `json:"content"`
			}
			if json.Unmarshal(m, &msg) != nil {
				return 0, false
			}
			t += referenceRaw(msg.Content)
		}
	} else {
		t = referenceRaw(r.Prompt)
	}
	return max(t, 1), true
}

func referenceRaw(raw json.RawMessage) int {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return EstimateTokens(s)
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		t := 0
		for _, s := range ss {
			t += EstimateTokens(s)
		}
		return t
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		return len(ids)
	}
	var idss [][]int64
	if json.Unmarshal(raw, &idss) == nil {
		t := 0
		for _, ids := range idss {
			t += len(ids)
		}
		return t
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		t := 0
		for _, p := range parts {
			t += EstimateTokens(p.Text)
		}
		return t
	}
	return (len(raw) + 3) / 4
}

// The counting in place agrees with decoding whole on the forms a client
// sends (the fuzz target checks any).
func TestCountInPlace(t *testing.T) {
	for _, raw := range []string{
		`"hello"`, `"h\u00e9llo \ud83d\ude00"`, `"\ud800\ud800"`, `"\ud800x"`, `"a\\b\"c\/"`, `""`,
		`["ab","cdefg",null]`, `[1,2,3]`, `[1,null]`, `[[1,2],[3]]`, `[[1],null,[]]`,
		`[{"type":"text","text":"abcdef"},{"type":"image"}]`, `{"x":1}`, `[1,"a"]`, `[1.5]`, `[99999999999999999999]`, `true`,
	} {
		if got, want := countRaw(json.RawMessage(raw)), referenceRaw(json.RawMessage(raw)); got != want {
			t.Errorf("countRaw(%s) = %d, want %d", raw, got, want)
		}
	}
	if got := countRaw(json.RawMessage(`"` + strings.Repeat("é", 9) + `"`)); got != 3 {
		t.Errorf("nine characters: %d tokens, want 3", got)
	}
}

// BenchmarkCountRaw measures what counting a 15 MB content costs in memory
// (B/op against the content's size): a string is counted in place, a list
// element by element, token ids into zero-size values.
//
//	go test -run '^$' -bench CountRaw -benchmem ./internal/node/
func BenchmarkCountRaw(b *testing.B) {
	const size = 15 << 20
	for _, bc := range []struct{ name, unit string }{
		{"string", ""}, {"token-ids", "12345,"}, {"strings", `"abcdefghij",`}, {"id-lists", "[1,2,3],"},
		{"parts", `{"type":"text","text":"abcdefghij"},`},
	} {
		var raw []byte
		if bc.unit == "" {
			raw = []byte(`"` + strings.Repeat("lorem ipsum ", size/12) + `"`)
		} else {
			raw = []byte("[" + strings.Repeat(bc.unit, size/len(bc.unit)))
			raw[len(raw)-1] = ']'
		}
		want := referenceRaw(raw)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if got := countRaw(raw); got != want {
					b.Fatalf("%d tokens, want %d", got, want)
				}
			}
		})
	}
}
