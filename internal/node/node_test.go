package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

const testModel = "llama-3.1-8b"

func testProfile(t testing.TB) latency.Profile {
	t.Helper()
	p, ok := latency.Builtin("h100-sxm/llama-3.1-8b/tp1")
	if !ok {
		t.Fatal("built-in profile h100-sxm/llama-3.1-8b/tp1 missing")
	}
	return p
}

// lockedBuffer is a log sink safe for concurrent handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type harness struct {
	node  *Node
	srv   *httptest.Server
	admin *httptest.Server
	reg   *prometheus.Registry
	logs  *lockedBuffer
	stop  func()
	// stopEngine ends the node's loop and leaves its servers up.
	stopEngine func()
}

const testToken = "s3cret-admin-token"

// start runs a node (one model unless cfg names some) with its API and
// admin servers; everything stops at the end of the test.
func start(t testing.TB, cfg Config) *harness {
	t.Helper()
	if len(cfg.Models) == 0 {
		cfg.Models = []Model{{Name: testModel, Profile: testProfile(t), MinDriver: "550"}}
	}
	if cfg.Driver == "" {
		cfg.Driver = "550.127.05"
	}
	h := &harness{reg: prometheus.NewPedanticRegistry(), logs: &lockedBuffer{}}
	cfg.Registerer, cfg.Gatherer = h.reg, h.reg
	cfg.Logger = slog.New(slog.NewTextHandler(h.logs, nil))
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.node = n
	ctx, cancel := context.WithCancel(context.Background())
	go n.Run(ctx)
	h.stopEngine = cancel
	h.srv = httptest.NewServer(n.Handler())
	h.admin = httptest.NewServer(n.AdminHandler(testToken))
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			h.srv.CloseClientConnections()
			h.srv.Close()
			h.admin.Close()
			cancel()
			<-n.Stopped()
		})
	}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) post(t testing.TB, path string, body any, hdr ...string) *http.Response {
	t.Helper()
	return h.postCtx(context.Background(), t, path, body, hdr...)
}

func (h *harness) postCtx(ctx context.Context, t testing.TB, path string, body any, hdr ...string) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	return h.postBytes(ctx, t, path, b, hdr...)
}

// postBytes posts body's bytes as they are, with hdr's name-value pairs.
func (h *harness) postBytes(ctx context.Context, t testing.TB, path string, body []byte, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

func (h *harness) adminDo(t testing.TB, method, token string, body any) (*http.Response, Faults) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.admin.URL+"/admin/faults", rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s /admin/faults: %v", method, err)
	}
	defer resp.Body.Close()
	var f Faults
	if resp.StatusCode == http.StatusOK {
		json.NewDecoder(resp.Body).Decode(&f)
	}
	return resp, f
}

func chatBody(prompt string, maxTokens int, stream bool) map[string]any {
	return map[string]any{"model": testModel, "stream": stream, "max_tokens": maxTokens,
		"messages": []map[string]any{{"role": "user", "content": prompt}}}
}

// sse reads a stream: the data payloads and when each arrived.
type event struct {
	data string
	at   time.Time
}

func readSSE(t testing.TB, r io.Reader) []event {
	t.Helper()
	var evs []event
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			evs = append(evs, event{d, time.Now()})
		}
	}
	return evs
}

// tokensOf returns the content events (one per token) of a chat stream.
func tokensOf(t testing.TB, evs []event) []event {
	t.Helper()
	var toks []event
	for _, e := range evs {
		if e.data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Text  *string `json:"text"`
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatalf("chunk %q: %v", e.data, err)
		}
		for _, ch := range c.Choices {
			if s := ch.Delta.Content; s != nil && *s != "" {
				toks = append(toks, e)
			}
			if s := ch.Text; s != nil && *s != "" {
				toks = append(toks, e)
			}
		}
	}
	return toks
}

func TestChatStreamFollowsModel(t *testing.T) {
	h := start(t, Config{})
	const out = 30
	t0 := time.Now()
	resp := h.post(t, "/v1/chat/completions", map[string]any{"model": testModel, "stream": true, "max_tokens": out,
		"stream_options": map[string]any{"include_usage": true},
		"messages":       []map[string]any{{"role": "user", "content": "hello there"}}})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := readSSE(t, resp.Body)
	if len(evs) == 0 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %v", evs)
	}
	if !strings.Contains(evs[0].data, `"role":"assistant"`) {
		t.Errorf("first chunk %q, want the assistant role", evs[0].data)
	}
	usage := evs[len(evs)-2].data
	if !strings.Contains(usage, `"usage":{"prompt_tokens":3,"completion_tokens":30,"total_tokens":33}`) {
		t.Errorf("usage chunk %q, want prompt 3 (11 chars / 4) and completion 30", usage)
	}
	toks := tokensOf(t, evs)
	if len(toks) != out {
		t.Fatalf("got %d tokens, want exactly %d", len(toks), out)
	}
	// The model: ~7.6 ms per decode step. The node never releases a token
	// early, so lower bounds are safe; tokens must arrive spread over the
	// decode, not in one burst at the end.
	p := testProfile(t)
	step := latency.US(p.StepBase)
	if spread := toks[out-1].at.Sub(toks[0].at); spread < time.Duration(out-1)*step/2 {
		t.Errorf("tokens spread over %v, want >= %v (half the modelled decode)", spread, time.Duration(out-1)*step/2)
	}
	if mid := toks[out/2].at; !mid.Before(toks[out-1].at) || !toks[0].at.Before(mid) {
		t.Errorf("tokens did not arrive incrementally: first %v, middle %v, last %v", toks[0].at.Sub(t0), mid.Sub(t0), toks[out-1].at.Sub(t0))
	}
}

func TestTTFTGrowsWithPrompt(t *testing.T) {
	ttft := func(input int) time.Duration {
		h := start(t, Config{})
		t0 := time.Now()
		resp := h.post(t, "/v1/completions", map[string]any{"model": testModel, "prompt": "x", "max_tokens": 2, "stream": true,
			"x_fleetdrill": map[string]any{"input_tokens": input}})
		defer resp.Body.Close()
		toks := tokensOf(t, readSSE(t, resp.Body))
		if len(toks) != 2 {
			t.Fatalf("input %d: got %d tokens, want 2", input, len(toks))
		}
		return toks[0].at.Sub(t0)
	}
	short, long := ttft(10), ttft(8000)
	if long <= short {
		t.Errorf("TTFT with 8000 input tokens %v <= with 10 tokens %v", long, short)
	}
	prefill := latency.US(testProfile(t).PerPrefillToken * 8000)
	if long < prefill {
		t.Errorf("TTFT with 8000 input tokens %v, below the modelled prefill %v", long, prefill)
	}
}

func TestNonStreaming(t *testing.T) {
	h := start(t, Config{Speed: 4})
	for _, tc := range []struct {
		path string
		body map[string]any
		hdr  []string
		in   int
		out  int
	}{
		{"/v1/chat/completions", chatBody("abcd efgh", 5, false), nil, 3, 5},
		{"/v1/completions", map[string]any{"model": testModel, "prompt": "0123456789012345", "max_tokens": 4}, nil, 4, 4},
		{"/v1/completions", map[string]any{"model": testModel, "prompt": []int{1, 2, 3, 4, 5, 6, 7}}, []string{HeaderOutputTokens, "3"}, 7, 3},
		{"/v1/chat/completions", chatBody("hi", 5, false), []string{HeaderInputTokens, "123"}, 123, 5},
		{"/v1/chat/completions", map[string]any{"model": testModel, "max_completion_tokens": 2,
			"messages": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": "12345678"}}}}}, nil, 2, 2},
	} {
		resp := h.post(t, tc.path, tc.body, tc.hdr...)
		var got struct {
			Object  string `json:"object"`
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
				Message      struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", tc.path, resp.StatusCode)
		}
		if got.Usage.PromptTokens != tc.in || got.Usage.CompletionTokens != tc.out {
			t.Errorf("%s %v: usage %+v, want prompt %d completion %d", tc.path, tc.body, got.Usage, tc.in, tc.out)
		}
		text := got.Choices[0].Text + got.Choices[0].Message.Content
		if words := len(strings.Fields(text)); words != tc.out {
			t.Errorf("%s: %d words of filler, want %d", tc.path, words, tc.out)
		}
	}
}

func TestBadRequests(t *testing.T) {
	h := start(t, Config{KVTokens: 1000})
	for _, tc := range []struct {
		name string
		body any
		code int
	}{
		{"no model", map[string]any{"messages": []any{map[string]any{"content": "x"}}}, 400},
		{"no messages", map[string]any{"model": testModel}, 400},
		{"zero max tokens", chatBody("x", 0, false), 400},
		{"too long for KV", chatBody(strings.Repeat("x", 4000), 100, false), 400},
		{"unknown model", map[string]any{"model": "gpt-9", "messages": []any{map[string]any{"content": "x"}}}, 404},
	} {
		resp := h.post(t, "/v1/chat/completions", tc.body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.code)
		}
	}
	resp, err := h.srv.Client().Get(h.srv.URL + "/v1/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/chat/completions: status %d, want 405", resp.StatusCode)
	}
}

func TestHealthAndModels(t *testing.T) {
	h := start(t, Config{Models: []Model{{Name: "a", Profile: testProfile(t)}, {Name: "b", Profile: testProfile(t)}}})
	resp, err := h.srv.Client().Get(h.srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: status %d", resp.StatusCode)
	}
	models := func() []string {
		resp, err := h.srv.Client().Get(h.srv.URL + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l struct {
			Object string
			Data   []struct{ ID string }
		}
		json.NewDecoder(resp.Body).Decode(&l)
		var ids []string
		for _, m := range l.Data {
			ids = append(ids, m.ID)
		}
		return ids
	}
	if got := strings.Join(models(), ","); got != "a,b" {
		t.Errorf("/v1/models = %s, want a,b", got)
	}
	h.adminDo(t, http.MethodPost, testToken, map[string]any{"retire": []string{"a"}})
	if got := strings.Join(models(), ","); got != "b" {
		t.Errorf("/v1/models after retiring a = %s, want b", got)
	}
	h.stop()
	// After the loop stops the handler still answers, unhealthy.
	rec := httptest.NewRecorder()
	h.node.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("/healthz after stop: status %d, want 503", rec.Code)
	}
}

// min_tokens raises a default output length, must not exceed a requested
// one, and must not be negative (vLLM's checks); ignore_eos is accepted.
func TestMinTokens(t *testing.T) {
	h := start(t, Config{Speed: 20, DefaultMaxTokens: 4})
	for _, tc := range []struct {
		name  string
		extra map[string]any
		code  int
		out   int
	}{
		{"default length", nil, 200, 4},
		{"min_tokens raises the default", map[string]any{"min_tokens": 9}, 200, 9},
		{"min_tokens below the default", map[string]any{"min_tokens": 2}, 200, 4},
		{"min_tokens up to max_tokens", map[string]any{"min_tokens": 3, "max_tokens": 3}, 200, 3},
		{"min_tokens over max_tokens", map[string]any{"min_tokens": 4, "max_tokens": 3}, 400, 0},
		{"min_tokens over max_completion_tokens", map[string]any{"min_tokens": 4, "max_completion_tokens": 3}, 400, 0},
		{"negative min_tokens", map[string]any{"min_tokens": -1}, 400, 0},
		{"ignore_eos", map[string]any{"ignore_eos": true, "max_tokens": 2}, 200, 2},
		{"ignore_eos not a bool", map[string]any{"ignore_eos": "yes"}, 400, 0},
	} {
		body := chatBody("x", 0, false)
		delete(body, "max_tokens")
		for k, v := range tc.extra {
			body[k] = v
		}
		resp := h.post(t, "/v1/chat/completions", body)
		var got struct {
			Usage struct {
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != tc.code || got.Usage.Completion != tc.out {
			t.Errorf("%s: status %d, %d tokens; want %d, %d", tc.name, resp.StatusCode, got.Usage.Completion, tc.code, tc.out)
		}
	}
}
