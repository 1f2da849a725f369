package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/internal/promtest"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// Fake backend modes.
const (
	modeOK       int32 = iota
	modeFail           // 500
	modeThrottle       // 429 Retry-After: 0.01
	modeBlock          // wait for the request's context, or release
	modeNotFound       // 404
	modeStall          // stream one token, then nothing until the request ends
	modeBreak          // answer one token (or part of a body), then break the connection
	modeErrFirst       // stream an error event first, as a stopping server fails a stream before its first token
	modeErrLater       // stream one token, then an error event; both end cleanly, with no [DONE]
	modeNoDone         // stream one token and end cleanly, with no [DONE]
)

// fake is an OpenAI-compatible backend.
type fake struct {
	srv       *httptest.Server
	mode      atomic.Int32
	unhealthy atomic.Bool
	hits      atomic.Int64
	delay     atomic.Int64 // wall nanoseconds before answering
	throttleN atomic.Int64 // answer this many requests 429 first, whatever the mode
	retryHdr  atomic.Value // string: Retry-After of a 429; default "0.01"
	lastModel atomic.Value // string: the "model" of the last request body
	metrics   atomic.Value // string: its /metrics exposition; "": 404
	keyMu     sync.Mutex
	keys      []string      // the Idempotency-Key of every request, in order
	lastBody  atomic.Value  // string: the last request body
	lastHdr   atomic.Value  // http.Header: the last request's headers
	auth      atomic.Value  // string: the Authorization every request must carry; "": none
	badAuth   atomic.Int64  // requests refused 401 for their Authorization
	usage     atomic.Value  // string: the usage object of a non-streamed answer; "": none
	started   chan struct{} // one per blocked request
	cancelled chan struct{} // one per blocked request whose context ended
	release   chan struct{}
	once      sync.Once
}

func newFake(t testing.TB) *fake {
	f := &fake{started: make(chan struct{}, 1024), cancelled: make(chan struct{}, 1024), release: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() { f.Release(); f.srv.Close() })
	return f
}

func (f *fake) Release() { f.once.Do(func() { close(f.release) }) }

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	// Every path, probes and scrapes too: a backend started with a key
	// wants exactly the gateway's, and one without wants none (a tenant's
	// key must never reach a backend).
	if want, _ := f.auth.Load().(string); r.Header.Get("Authorization") != want {
		f.badAuth.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"Unauthorized"}`)
		return
	}
	switch r.URL.Path {
	case "/healthz", "/health", "/v1/models":
		// Every kind's health path; /v1/models lists the test scenario's
		// models (the default kind, openai, probes it).
		if f.unhealthy.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if r.URL.Path == "/v1/models" {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"llama-3.1-8b","object":"model"},{"id":"llama-3.1-70b","object":"model"}]}`)
			return
		}
		_, _ = io.WriteString(w, "ok")
		return
	case "/metrics":
		if m, _ := f.metrics.Load().(string); m != "" {
			_, _ = io.WriteString(w, m)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.hits.Add(1)
	f.keyMu.Lock()
	f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
	f.keyMu.Unlock()
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &req)
	f.lastModel.Store(req.Model)
	f.lastBody.Store(string(body))
	f.lastHdr.Store(r.Header.Clone())
	if d := f.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	mode := f.mode.Load()
	if f.throttleN.Add(-1) >= 0 {
		mode = modeThrottle
	}
	switch mode {
	case modeNotFound:
		w.WriteHeader(http.StatusNotFound)
		return
	case modeFail:
		w.WriteHeader(http.StatusInternalServerError)
		return
	case modeThrottle:
		ra, _ := f.retryHdr.Load().(string)
		if ra == "" {
			ra = "0.01"
		}
		w.Header().Set("Retry-After", ra)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	case modeBlock:
		f.started <- struct{}{}
		select {
		case <-r.Context().Done():
			f.cancelled <- struct{}{}
			return
		case <-f.release:
		}
	}
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		if mode == modeStall {
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok0\"}}]}\n\n")
			fl.Flush()
			<-r.Context().Done()
			f.cancelled <- struct{}{}
			return
		}
		if mode == modeBreak {
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok0\"}}]}\n\n")
			fl.Flush()
			panic(http.ErrAbortHandler) // the connection breaks: no end of the chunked body
		}
		if mode == modeNoDone {
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok0\"}}]}\n\n")
			return
		}
		if mode == modeErrFirst || mode == modeErrLater {
			if mode == modeErrLater {
				_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok0\"}}]}\n\n")
				fl.Flush()
				<-f.release // until the test's client has read the token
			}
			// The node's and vLLM's shape of a server shutting down.
			_, _ = io.WriteString(w, `data: {"error": {"message": "server shutting down", "type": "ServiceUnavailable", "param": null, "code": 503}}`+"\n\n")
			return
		}
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d\"}}]}\n\n", i)
			fl.Flush()
		}
		if req.StreamOptions.IncludeUsage {
			// As OpenAI: a last chunk with no choices and the usage.
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[],"+
				"\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,\"total_tokens\":8}}\n\n", req.Model)
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if mode == modeBreak {
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.`)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	usage := ""
	if u, _ := f.usage.Load().(string); u != "" {
		usage = `,"usage":` + u
	}
	fmt.Fprintf(w, `{"id":"x","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]%s}`, req.Model, usage)
}

// Test keys.
const (
	keyEU     = "sk-eu-0123456789abcdef"
	keyGlobal = "sk-global-0123456789abcdef"
)

// testScenario is the eu-residency library scenario (pools use-h100-8b in
// the US, euw-a100-8b in the EU; tenants bank-eu and health-eu bound to the
// EU, global anywhere) with fast health checks and retries.
func testScenario(t testing.TB, sets ...string) *scenarios.Scenario {
	t.Helper()
	return libraryScenario(t, "eu-residency", sets...)
}

// libraryScenario is a library scenario with testScenario's fast health
// checks and retries, then sets.
func libraryScenario(t testing.TB, name string, sets ...string) *scenarios.Scenario {
	t.Helper()
	data, err := scenarios.Source(name)
	if err != nil {
		t.Fatal(err)
	}
	base := []string{
		"policy.health.probe_interval=50ms", "policy.health.timeout=2s",
		"policy.health.threshold=1", "policy.health.open_for=100ms",
		"policy.retries.backoff=1ms", "policy.retries.max_backoff=5ms",
	}
	sc, err := scenarios.ParseWithSets(name+".yaml", data, append(base, sets...))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

type harness struct {
	t   testing.TB
	gw  *Gateway
	srv *httptest.Server
	reg *prometheus.Registry
	log *bytes.Buffer
}

// newHarness starts a gateway on sc in front of backends, its config
// adjusted by opts, and serves it.
func newHarness(t testing.TB, sc *scenarios.Scenario, backends map[string][]string, opts ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, reg: prometheus.NewPedanticRegistry(), log: &bytes.Buffer{}}
	cfg := Config{Scenario: sc, Backends: backends, Registry: h.reg, Seed: 1,
		Keys:   []Key{{"bank-eu", keyEU}, {"global", keyGlobal}},
		Logger: slog.New(slog.NewJSONHandler(&lockedWriter{w: h.log}, nil))}
	if sc.Policy.Admission.QueueTimeout == 0 {
		withQueueTimeout(5 * time.Second)(&cfg) // a queued test request does not hang
	}
	for _, o := range opts {
		o(&cfg)
	}
	gw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.gw = gw
	h.srv = httptest.NewServer(gw.Handler())
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	h.srv.Close()
	h.gw.Close()
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func chatBody(stream bool, prompt string) string {
	b, _ := json.Marshal(map[string]any{"model": "llama-3.1-8b", "stream": stream, "max_tokens": 16,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	return string(b)
}

func (h *harness) post(ctx context.Context, key, body string) (*http.Response, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func (h *harness) mustPost(key, body string) (*http.Response, string) {
	h.t.Helper()
	resp, b, err := h.post(context.Background(), key, body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, b
}

// metric returns the value of the series of name whose labels include
// want, summed over the matching series.
func (h *harness) metric(name string, want map[string]string) float64 {
	h.t.Helper()
	return promtest.Value(h.t, h.reg, name, want, false)
}

// histSum returns the sum of the observations of histogram name, over the
// series whose labels include want.
func (h *harness) histSum(name string, want map[string]string) float64 {
	h.t.Helper()
	return promtest.Value(h.t, h.reg, name, want, true)
}

// postAs posts a chat request with the given class header ("" for none) and
// body.
func (h *harness) postAs(key, class, body string) (*http.Response, string) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	if class != "" {
		req.Header.Set("X-Fleetdrill-Class", class)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func chatBodyFor(model, prompt string) string {
	b, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 16,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	return string(b)
}

// eventually polls cond for up to 5s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// withQueueTimeout sets the scenario's policy.admission.queue_timeout, on
// a copy of the scenario.
func withQueueTimeout(d time.Duration) func(*Config) {
	return func(c *Config) {
		sc := *c.Scenario
		sc.Policy.Admission.QueueTimeout = scenarios.Duration(d)
		c.Scenario = &sc
	}
}
