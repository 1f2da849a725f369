package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
)

// rawAnswer is what a raw request got: the status (0: the server closed
// the connection without an answer).
type rawAnswer struct {
	status int
	body   string
}

// sendRaw writes req on a fresh connection to addr, then reads one answer
// or the close. bound only guards against a hang.
func sendRaw(t *testing.T, addr, req string, bound time.Duration) rawAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, req); err != nil {
		// The server may close before it has read all of a huge request.
		return rawAnswer{}
	}
	_ = conn.SetReadDeadline(time.Now().Add(bound))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("no answer and no close within %v: the server hangs", bound)
		}
		return rawAnswer{} // closed unanswered
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return rawAnswer{resp.StatusCode, string(b)}
}

// post is a raw POST of body to the chat endpoint with the global key.
func rawPost(body string, extra ...string) string {
	h := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyGlobal + "\r\n" +
		"Content-Type: application/json\r\nConnection: close\r\n"
	for _, e := range extra {
		h += e + "\r\n"
	}
	return h + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
}

// The hostile-input corpus: malformed and nested JSON, invalid UTF-8, NaN
// and huge numbers, huge headers and bodies, slow clients and request
// smuggling attempts. Each gets a 4xx or has its connection closed — never
// a 5xx (bar the 501 RFC 9112 prescribes for a transfer coding the server
// does not know, which Go's server sends before any handler runs), never a
// hang — and the backend sees none of them. The gateway is
// served as `fleetdrill gateway` serves it (httpguard), with short
// timeouts.
func TestHostileInputs(t *testing.T) {
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}},
		func(c *Config) { c.MaxBodyBytes = 64 << 10 })
	lim := httpguard.Defaults()
	lim.ReadHeaderTimeout, lim.BodyTimeout, lim.MaxHeaderBytes = 300*time.Millisecond, 300*time.Millisecond, 8<<10
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := lim.Server(h.gw.Handler())
	go func() { _ = srv.Serve(lim.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	const model = `"model":"llama-3.1-8b"`
	msg := func(content string) string {
		return `{` + model + `,"messages":[{"role":"user","content":` + content + `}]}`
	}
	tests := []struct {
		name string
		req  string
		// want is the status; 0 means the server may close the connection
		// unanswered instead of answering 4xx.
		want int
	}{
		{"malformed JSON", rawPost(`{"model":`), 400},
		{"trailing garbage", rawPost(msg(`"hi"`) + `}}`), 400},
		{"nested 30k deep", rawPost(msg(strings.Repeat("[", 30_000) + strings.Repeat("]", 30_000))), 400},
		{"nested objects", rawPost(msg(strings.Repeat(`{"a":`, 10_500) + "1" + strings.Repeat("}", 10_500))), 400},
		{"invalid UTF-8 in the prompt", rawPost(msg("\"\xff\xfe\xc3\x28\"")), 400},
		{"invalid UTF-8 in a key", rawPost(`{` + model + ",\"\xff\":1}"), 400},
		{"NaN", rawPost(`{` + model + `,"max_tokens":NaN}`), 400},
		{"Infinity", rawPost(`{` + model + `,"max_tokens":Infinity}`), 400},
		{"1e400", rawPost(`{` + model + `,"max_tokens":1e400}`), 400},
		{"max int64 tokens", rawPost(`{` + model + `,"max_tokens":9223372036854775807,"n":8,"messages":[]}`), 400},
		{"max int64 completion tokens", rawPost(`{` + model + `,"max_completion_tokens":9223372036854775807,"messages":[]}`), 400},
		{"huge integer", rawPost(`{` + model + `,"max_tokens":` + strings.Repeat("9", 5000) + `}`), 400},
		{"negative n", rawPost(`{` + model + `,"n":-1,"messages":[]}`), 400},
		{"wrong types", rawPost(`{"model":5,"messages":"x","stream":"yes"}`), 400},
		{"null body", rawPost(`null`), 404},
		{"empty body", rawPost(``), 400},
		{"not JSON at all", rawPost("\x00\x01\x02"), 400},
		{"huge header", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n", 431},
		{"many headers", "GET /v1/models HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-A: b\r\n", 4000) + "\r\n", 431},
		{"huge body announced", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyGlobal +
			"\r\nContent-Length: 104857600\r\n\r\n{", 413},
		{"huge chunked body", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyGlobal +
			"\r\nTransfer-Encoding: chunked\r\n\r\n20000\r\n" + strings.Repeat("a", 0x20000) + "\r\n0\r\n\r\n", 413},
		{"chunk size overflow", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyGlobal +
			"\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nabc", 400},
		{"slow headers", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", 0},
		{"slow body", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyGlobal +
			"\r\nContent-Length: 1000\r\n\r\n{\"model\"", 0},
		{"smuggling: Content-Length and chunked", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyGlobal +
			"\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"smuggling: two Content-Lengths", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyGlobal +
			"\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\n{}", 400},
		{"smuggling: space before colon", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length : 2\r\n\r\n{}", 400},
		{"smuggling: obsolete line folding", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n 0\r\n\r\n{}", 400},
		{"unknown transfer coding", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", http.StatusNotImplemented},
		{"no Host", "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 400},
		{"garbage request line", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400},
		{"NUL in a header", "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\x00b\r\n\r\n", 400},
		{"unknown key", "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + strings.Repeat("k", 4000) + "\r\n\r\n", 401},
		{"wrong method", "DELETE /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		// The mux answers an unclean path with a redirect to its clean
		// form (here /etc/passwd, which the gateway does not serve).
		{"path traversal", "GET /v1/models/../../etc/passwd HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyGlobal + "\r\n\r\n", http.StatusTemporaryRedirect},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := sendRaw(t, addr, tc.req, 30*time.Second)
			switch {
			case got.status >= 500 && got.status != tc.want:
				t.Fatalf("status %d (5xx): %s", got.status, got.body)
			case tc.want == 0 && got.status != 0 && (got.status < 400 || got.status >= 500):
				t.Fatalf("status %d, want 4xx or the connection closed", got.status)
			case tc.want != 0 && got.status != tc.want:
				t.Fatalf("status %d, want %d: %s", got.status, tc.want, got.body)
			}
		})
	}
	if n := us.hits.Load(); n != 0 {
		t.Errorf("the backend saw %d hostile requests, want 0", n)
	}
	// The gateway still serves.
	if resp, _ := h.mustPost(keyGlobal, chatBody(false, "x")); resp.StatusCode != http.StatusOK {
		t.Errorf("after the corpus: %d, want 200", resp.StatusCode)
	}
}
