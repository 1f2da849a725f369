// Package hostiletest is the hostile-input corpus both of fleetdrill's
// OpenAI listeners must survive, the gateway's and the emulated node's:
// malformed and nested JSON, invalid UTF-8, NaN and huge numbers, huge
// headers and bodies, slow clients and request-smuggling attempts, sent
// raw over TCP to a real listener. Each gets a 4xx or has its connection
// closed — never a 5xx (bar the 501 RFC 9112 prescribes for a transfer
// coding the server does not know, which Go's server sends before any
// handler runs), never a hang.
package hostiletest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Target is a listener under test and what the corpus needs of it. Serve
// it as its command does (httpguard's Server and Listener), with short
// header and body timeouts (the slow-client cases wait for them), a
// header limit under 64 KiB and a body limit under 100 MiB and 128 KiB.
type Target struct {
	Addr string
	// Key is the bearer key the listener wants on /v1.
	Key string
	// Model is a model it serves.
	Model string
	// Want overrides a case's status by its name, where the server's own
	// rule differs (the node answers a body naming no model 400, the
	// gateway 404).
	Want map[string]int
}

// Case is one raw request and the status it must get; 0: the server may
// close the connection unanswered instead of answering 4xx. Closes: the
// answer must say Connection: close and the server close the connection
// after it.
type Case struct {
	Name   string
	Req    string
	Want   int
	Closes bool
}

// Post is a raw POST of body to the chat endpoint with key, closing the
// connection after, with extra header lines.
func Post(key, body string, extra ...string) string {
	h := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + "\r\n" +
		"Content-Type: application/json\r\nConnection: close\r\n"
	for _, e := range extra {
		h += e + "\r\n"
	}
	return h + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
}

// Cases is the corpus for tg.
func Cases(tg Target) []Case {
	key := tg.Key
	model := `"model":"` + tg.Model + `"`
	post := func(body string) string { return Post(key, body) }
	msg := func(content string) string {
		return `{` + model + `,"messages":[{"role":"user","content":` + content + `}]}`
	}
	auth := "\r\nAuthorization: Bearer " + key
	cs := []Case{
		{"malformed JSON", post(`{"model":`), 400, false},
		{"trailing garbage", post(msg(`"hi"`) + `}}`), 400, false},
		{"nested 30k deep", post(msg(strings.Repeat("[", 30_000) + strings.Repeat("]", 30_000))), 400, false},
		{"nested objects", post(msg(strings.Repeat(`{"a":`, 10_500) + "1" + strings.Repeat("}", 10_500))), 400, false},
		{"invalid UTF-8 in the prompt", post(msg("\"\xff\xfe\xc3\x28\"")), 400, false},
		{"invalid UTF-8 in a key", post(`{` + model + ",\"\xff\":1}"), 400, false},
		{"NaN", post(`{` + model + `,"max_tokens":NaN}`), 400, false},
		{"Infinity", post(`{` + model + `,"max_tokens":Infinity}`), 400, false},
		{"1e400", post(`{` + model + `,"max_tokens":1e400}`), 400, false},
		{"max int64 tokens", post(`{` + model + `,"max_tokens":9223372036854775807,"n":8,"messages":[]}`), 400, false},
		{"max int64 completion tokens", post(`{` + model + `,"max_completion_tokens":9223372036854775807,"messages":[]}`), 400, false},
		{"huge integer", post(`{` + model + `,"max_tokens":` + strings.Repeat("9", 5000) + `}`), 400, false},
		{"negative n", post(`{` + model + `,"n":-1,"messages":[]}`), 400, false},
		{"n=1000", post(msg(`"hi"`)[:len(msg(`"hi"`))-1] + `,"n":1000}`), 400, false},
		{"wrong types", post(`{"model":5,"messages":"x","stream":"yes"}`), 400, false},
		{"null body", post(`null`), 404, false},
		{"empty body", post(``), 400, false},
		{"not JSON at all", post("\x00\x01\x02"), 400, false},
		{"huge header", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n", 431, false},
		{"many headers", "GET /v1/models HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-A: b\r\n", 4000) + "\r\n", 431, false},
		{"huge body announced", "POST /v1/chat/completions HTTP/1.1\r\nHost: x" + auth +
			"\r\nContent-Length: 104857600\r\n\r\n{", 413, false},
		{"huge chunked body", "POST /v1/chat/completions HTTP/1.1\r\nHost: x" + auth +
			"\r\nTransfer-Encoding: chunked\r\n\r\n20000\r\n" + strings.Repeat("a", 0x20000) + "\r\n0\r\n\r\n", 413, false},
		{"chunk size overflow", "POST /v1/chat/completions HTTP/1.1\r\nHost: x" + auth +
			"\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nabc", 400, false},
		{"slow headers", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", 0, false},
		{"slow body", "POST /v1/chat/completions HTTP/1.1\r\nHost: x" + auth +
			"\r\nContent-Length: 1000\r\n\r\n{\"model\"", 0, false},
		{"smuggling: Content-Length and chunked", "POST /v1/chat/completions HTTP/1.1\r\nHost: x" + auth +
			"\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 400, true},
		// A non-empty chunked body: framed by its Content-Length, "9\r\n" would
		// be the body and the rest a second request.
		{"smuggling: Content-Length and a chunked body", "POST /v1/chat/completions HTTP/1.1\r\nHost: x" + auth +
			"\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n{\"model\":\r\n0\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 400, true},
		{"smuggling: two Content-Lengths", "POST /v1/chat/completions HTTP/1.1\r\nHost: x" + auth +
			"\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}", 400, false},
		{"smuggling: space before colon", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length : 2\r\n\r\n{}", 400, false},
		{"smuggling: obsolete line folding", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n 0\r\n\r\n{}", 400, false},
		{"unknown transfer coding", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", http.StatusNotImplemented, false},
		{"no Host", "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 400, false},
		{"garbage request line", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, false},
		{"NUL in a header", "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\x00b\r\n\r\n", 400, false},
		{"unknown key", "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + strings.Repeat("k", 4000) + "\r\n\r\n", 401, false},
		{"wrong method", "DELETE /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n", 405, false},
		// The mux answers an unclean path with a redirect to its clean
		// form (here /etc/passwd, which neither server serves).
		{"path traversal", "GET /v1/models/../../etc/passwd HTTP/1.1\r\nHost: x" + auth + "\r\n\r\n", http.StatusTemporaryRedirect, false},
	}
	for i := range cs {
		if w, ok := tg.Want[cs[i].Name]; ok {
			cs[i].Want = w
		}
	}
	return cs
}

// Run sends each case to tg, as a subtest, and checks its answer.
func Run(t *testing.T, tg Target, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			got := Send(t, tg.Addr, tc.Req, 30*time.Second)
			switch {
			case got.Status >= 500 && got.Status != tc.Want:
				t.Fatalf("status %d (5xx): %s", got.Status, got.Body)
			case tc.Want == 0 && got.Status != 0 && (got.Status < 400 || got.Status >= 500):
				t.Fatalf("status %d, want 4xx or the connection closed", got.Status)
			case tc.Want != 0 && got.Status != tc.Want:
				t.Fatalf("status %d, want %d: %s", got.Status, tc.Want, got.Body)
			}
			if tc.Closes && (!got.Close || !got.Closed) {
				t.Errorf("Connection: close %v, connection closed after %v; want both (RFC 9112 §6.1)", got.Close, got.Closed)
			}
		})
	}
}

// Answer is what a raw request got: the status (0: the server closed the
// connection without an answer), the body's start, whether the answer
// said Connection: close, and whether the server then closed.
type Answer struct {
	Status        int
	Body          string
	Close, Closed bool
}

// Send writes req on a fresh connection to addr, then reads one answer or
// the close, and after an answer whether the server closes the
// connection. bound only guards against a hang.
func Send(t testing.TB, addr, req string, bound time.Duration) Answer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, req); err != nil {
		// The server may close before it has read all of a huge request.
		return Answer{}
	}
	_ = conn.SetReadDeadline(time.Now().Add(bound))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			t.Fatalf("no answer and no close within %v: the server hangs", bound)
		}
		return Answer{} // closed unanswered
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a := Answer{Status: resp.StatusCode, Body: string(b), Close: resp.Close} // Close: "Connection: close"
	if a.Close {
		// The server closes: EOF, not a timeout (nor a second answer to a
		// smuggled request).
		_, err := br.ReadByte()
		ne, timeout := errors.AsType[net.Error](err)
		a.Closed = err != nil && !(timeout && ne.Timeout())
	}
	return a
}
