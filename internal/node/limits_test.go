package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// errorOf is the fleetdrill flavor's error body.
type errorOf struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func readError(t *testing.T, resp *http.Response) errorOf {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e errorOf
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("status %d, body %q: %v", resp.StatusCode, b, err)
	}
	return e
}

// A token count a client states that would overflow input + output (the
// tester's one-request hang) is refused with a 400 naming where it came
// from and the range; a count within the range but past the model's
// context is vLLM's context_length_exceeded. Neither reaches the engine:
// a normal request after them completes, the KV gauge never goes
// negative, and /healthz stays 200.
func TestStatedCountsBounded(t *testing.T) {
	h := start(t, Config{Speed: 50, KVTokens: 4096})
	maxInt := "9223372036854775807"
	for _, tc := range []struct {
		name     string
		body     string
		hdr      []string
		code     string
		contains string
	}{
		{"input header at max int64", `{"model":"` + testModel + `","messages":[{"content":"hi"}],"max_tokens":4}`,
			[]string{HeaderInputTokens, maxInt}, "invalid_value",
			"X-Fleetdrill-Input-Tokens: got 9223372036854775807, want an integer in [1, 2147483647]"},
		{"input header past int64", `{"model":"` + testModel + `","messages":[{"content":"hi"}]}`,
			[]string{HeaderInputTokens, strings.Repeat("9", 40)}, "invalid_value", // quoted in part
			`X-Fleetdrill-Input-Tokens: got "999999999999999999999999...", want an integer in [1, 2147483647]`},
		{"input header zero", `{"model":"` + testModel + `","messages":[{"content":"hi"}]}`,
			[]string{HeaderInputTokens, "0"}, "invalid_value", "want an integer in [1, 2147483647]"},
		{"output header at max int64", `{"model":"` + testModel + `","messages":[{"content":"hi"}]}`,
			[]string{HeaderOutputTokens, maxInt}, "invalid_value", "X-Fleetdrill-Output-Tokens: got 9223372036854775807"},
		{"x_fleetdrill.input_tokens at max int64", `{"model":"` + testModel + `","messages":[{"content":"hi"}],"x_fleetdrill":{"input_tokens":` + maxInt + `}}`,
			nil, "invalid_value", "x_fleetdrill.input_tokens: got 9223372036854775807, want an integer in [1, 2147483647]"},
		{"x_fleetdrill.input_tokens negative", `{"model":"` + testModel + `","messages":[{"content":"hi"}],"x_fleetdrill":{"input_tokens":-5}}`,
			nil, "invalid_value", "x_fleetdrill.input_tokens: got -5"},
		{"x_fleetdrill.input_tokens past int64", `{"model":"` + testModel + `","messages":[{"content":"hi"}],"x_fleetdrill":{"input_tokens":9223372036854775808}}`,
			nil, "invalid_body", "field x_fleetdrill.input_tokens has the wrong type"},
		{"x_fleetdrill.output_tokens at max int64", `{"model":"` + testModel + `","messages":[{"content":"hi"}],"x_fleetdrill":{"output_tokens":` + maxInt + `}}`,
			nil, "invalid_value", "x_fleetdrill.output_tokens: got 9223372036854775807, want an integer in [1, 1048576]"},
		{"within the range, past the context", `{"model":"` + testModel + `","messages":[{"content":"hi"}],"max_tokens":4,"x_fleetdrill":{"input_tokens":2147483647}}`,
			nil, "context_length_exceeded", "2147483647 input + 4 output tokens exceed the model's maximum context length of 4096 tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.postRaw(t, "/v1/chat/completions", tc.body, tc.hdr...)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", resp.StatusCode)
			}
			e := readError(t, resp)
			if e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.contains) {
				t.Errorf("error %+v, want code %s and a message containing %q", e.Error, tc.code, tc.contains)
			}
			// The next request is served, and the node says it serves.
			ok := h.post(t, "/v1/chat/completions", chatBody("hello", 3, false))
			io.Copy(io.Discard, ok.Body)
			ok.Body.Close()
			if ok.StatusCode != http.StatusOK {
				t.Fatalf("the request after: status %d, want 200", ok.StatusCode)
			}
			hz, _ := h.get(t, "/healthz")
			if hz.StatusCode != http.StatusOK {
				t.Errorf("/healthz %d, want 200", hz.StatusCode)
			}
		})
	}
	waitFor(t, "the KV freed", func() bool {
		return series(t, h.reg, "fleetdrill_node_kv_used_tokens", map[string]string{"model": testModel}, false) == 0
	})
	if got := series(t, h.reg, "fleetdrill_node_refused_total", map[string]string{"reason": refuseBadValue}, false); got != 7 {
		t.Errorf("refused_total{invalid-value} = %v, want 7", got)
	}
	if got := series(t, h.reg, "fleetdrill_node_refused_total", map[string]string{"reason": refuseContext}, false); got != 1 {
		t.Errorf("refused_total{context-exceeded} = %v, want 1", got)
	}
}

// The node reads a body as the gateway does (openai.DecodeRequest): not
// UTF-8, bytes after the JSON value, more than one choice: 400 in the
// flavor's words, with the param at fault where there is one, and counted
// by reason.
func TestRequestValidation(t *testing.T) {
	for _, fl := range Flavors {
		t.Run(string(fl), func(t *testing.T) {
			h := start(t, Config{Speed: 50, Flavor: fl})
			msg := `"messages":[{"role":"user","content":"hi"}]`
			for _, tc := range []struct {
				name, body, param, contains string
			}{
				{"invalid UTF-8 in the prompt", "{\"model\":\"" + testModel + "\",\"messages\":[{\"content\":\"\xff\xfe\"}]}", "", "not valid UTF-8"},
				{"trailing bytes", `{"model":"` + testModel + `",` + msg + `}}`, "", "not valid JSON"},
				{"a second value", `{"model":"` + testModel + `",` + msg + `} {}`, "", "not valid JSON"},
				{"n=1000", `{"model":"` + testModel + `",` + msg + `,"n":1000}`, "n", "n must be 1"},
				{"n=2", `{"model":"` + testModel + `",` + msg + `,"n":2}`, "n", "n must be 1"},
				{"best_of=3", `{"model":"` + testModel + `",` + msg + `,"best_of":3}`, "best_of", "best_of must be 1"},
				{"n=0", `{"model":"` + testModel + `",` + msg + `,"n":0}`, "n", "n must be 1"},
			} {
				resp := h.postRaw(t, "/v1/chat/completions", tc.body)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest {
					t.Errorf("%s: status %d, want 400 (%s)", tc.name, resp.StatusCode, b)
					continue
				}
				var got map[string]any
				if err := json.Unmarshal(b, &got); err != nil {
					t.Fatalf("%s: body %q: %v", tc.name, b, err)
				}
				inner, _ := got["error"].(map[string]any)
				if fl == FlavorVLLM08 {
					inner = got
				}
				if m, _ := inner["message"].(string); !strings.Contains(m, tc.contains) {
					t.Errorf("%s: message %q, want it to contain %q", tc.name, m, tc.contains)
				}
				if fl.vllm() {
					var want any
					if tc.param != "" {
						want = tc.param
					}
					if inner["type"] != "BadRequestError" || inner["code"] != float64(400) || inner["param"] != want {
						t.Errorf("%s: %s, want vLLM's BadRequestError, code 400, param %v", tc.name, b, want)
					}
				}
			}
			// n=1 and best_of=1 are one choice: served.
			resp := h.postRaw(t, "/v1/chat/completions", `{"model":"`+testModel+`",`+msg+`,"n":1,"best_of":1,"max_tokens":2}`)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("n=1: status %d, want 200", resp.StatusCode)
			}
			if got := series(t, h.reg, "fleetdrill_node_refused_total", map[string]string{"reason": refuseBadBody}, false); got != 3 {
				t.Errorf("refused_total{invalid-body} = %v, want 3", got)
			}
			if got := series(t, h.reg, "fleetdrill_node_refused_total", map[string]string{"reason": refuseBadValue}, false); got != 4 {
				t.Errorf("refused_total{invalid-value} = %v, want 4", got)
			}
		})
	}
}

// A body over MaxBodyBytes is a 413; while the bodies being read fill
// MaxInflightBodyBytes, the next is a 429 with Retry-After, and is served
// once the first is read. Each is counted by reason.
func TestBodyBudget(t *testing.T) {
	const maxBody = 4 << 10
	h := start(t, Config{Speed: 50, MaxBodyBytes: maxBody, MaxInflightBodyBytes: maxBody})
	big := `{"model":"` + testModel + `","messages":[{"content":"` + strings.Repeat("a", maxBody) + `"}]}`
	resp := h.postRaw(t, "/v1/chat/completions", big)
	if e := readError(t, resp); resp.StatusCode != http.StatusRequestEntityTooLarge || e.Error.Code != "request_too_large" {
		t.Errorf("a body over the limit: %d %+v, want 413 request_too_large", resp.StatusCode, e.Error)
	}

	// A client that announces a maximum-size body and sends part of it
	// holds the whole budget while the node reads it.
	body := `{"model":"` + testModel + `","max_tokens":2,"messages":[{"content":"` + strings.Repeat("b", maxBody-80) + `"}]}`
	conn, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:100])
	waitFor(t, "the first body reserved", func() bool { return h.node.body.InFlight() == int64(len(body)) })

	resp = h.postRaw(t, "/v1/chat/completions", `{"model":"`+testModel+`","messages":[{"content":"x"}]}`)
	if e := readError(t, resp); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		e.Error.Code != "rate_limit_exceeded" {
		t.Errorf("with the budget full: %d Retry-After %q %+v, want 429, 1, rate_limit_exceeded",
			resp.StatusCode, resp.Header.Get("Retry-After"), e.Error)
	}
	if _, err := io.WriteString(conn, body[100:]); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // guards a hang only
	first, err := http.ReadResponse(bufioReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	first.Body.Close()
	if first.StatusCode != http.StatusOK {
		t.Errorf("the first request: %d, want 200", first.StatusCode)
	}
	if got := h.node.body.InFlight(); got != 0 {
		t.Errorf("in-flight body bytes %d once every body is counted, want 0", got)
	}
	resp = h.post(t, "/v1/chat/completions", chatBody("x", 2, false))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("after: %d, want 200", resp.StatusCode)
	}
	for reason, want := range map[string]float64{refuseTooLarge: 1, refuseBodyBudget: 1} {
		if got := series(t, h.reg, "fleetdrill_node_refused_total", map[string]string{"reason": reason}, false); got != want {
			t.Errorf("refused_total{%s} = %v, want %v", reason, got, want)
		}
	}
	if got := series(t, h.reg, "fleetdrill_node_requests_total", map[string]string{"code": strconv.Itoa(http.StatusTooManyRequests)}, false); got != 1 {
		t.Errorf("requests_total{code=429} = %v, want 1", got)
	}
}

// postRaw posts body as it is (bytes a JSON encoder would not write).
func (h *harness) postRaw(t testing.TB, path, body string, hdr ...string) *http.Response {
	t.Helper()
	return h.postBytes(context.Background(), t, path, []byte(body), hdr...)
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
