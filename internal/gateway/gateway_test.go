package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

func TestRoutingAndStreaming(t *testing.T) {
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}})

	resp, body := h.mustPost(keyGlobal, chatBody(false, "hello"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"chat.completion"`) {
		t.Fatalf("non-streaming: %d %s", resp.StatusCode, body)
	}
	for k, want := range map[string]string{"X-Fleetdrill-Pool": "use-h100-8b", "X-Fleetdrill-Model": "llama-3.1-8b", "X-Fleetdrill-Attempts": "1"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	resp, body = h.mustPost(keyGlobal, chatBody(true, "hello"))
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("streaming: %d %q", resp.StatusCode, ct)
	}
	if !strings.Contains(body, "tok0") || !strings.Contains(body, "tok2") || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("streaming body not passed through: %q", body)
	}
	if got := us.hits.Load(); got != 2 {
		t.Errorf("backend hits = %d, want 2", got)
	}
	if got := h.metric("fleetdrill_gateway_requests_total", map[string]string{"tenant": "global", "class": "interactive", "outcome": "completed"}); got != 2 {
		t.Errorf("completed = %v, want 2", got)
	}
	if got := h.metric("fleetdrill_gateway_ttft_seconds", nil); got != 2 {
		t.Errorf("ttft samples = %v, want 2", got)
	}
	// Models.
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+keyGlobal)
	mr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	if mr.StatusCode != 200 || !strings.Contains(string(mb), `"llama-3.1-8b"`) {
		t.Errorf("/v1/models: %d %s", mr.StatusCode, mb)
	}
	// Unknown model.
	if resp, _ := h.mustPost(keyGlobal, `{"model":"nope","messages":[]}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown model: %d, want 404", resp.StatusCode)
	}
}

func TestUnauthorized(t *testing.T) {
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}})
	for _, key := range []string{"", "sk-wrong", keyGlobal + "x", keyGlobal[:len(keyGlobal)-1]} {
		if resp, _ := h.mustPost(key, chatBody(false, "hi")); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("key %q: %d, want 401", key, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/v1/models", nil)
	mr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	mr.Body.Close()
	if mr.StatusCode != http.StatusUnauthorized {
		t.Errorf("/v1/models without key: %d", mr.StatusCode)
	}
	if us.hits.Load() != 0 {
		t.Errorf("backend reached without a valid key")
	}
	if got := h.metric("fleetdrill_gateway_unauthorized_total", nil); got != 5 {
		t.Errorf("unauthorized = %v, want 5", got)
	}
}

// An EU tenant never reaches a US backend, even with the EU down; a global
// tenant does.
func TestResidency(t *testing.T) {
	us, eu := newFake(t), newFake(t)
	eu.mode.Store(modeFail)
	eu.unhealthy.Store(true)
	h := newHarness(t, testScenario(t, "policy.retries.max_attempts=3"),
		map[string][]string{"use-h100-8b": {us.srv.URL}, "euw-a100-8b": {eu.srv.URL}})
	h.gw.sc.Policy.Admission.QueueTimeout = scenarios.Duration(200 * time.Millisecond)
	for i := range 6 {
		resp, _ := h.mustPost(keyEU, chatBody(i%2 == 0, "bonjour"))
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("EU request %d served with the EU down", i)
		}
	}
	if got := us.hits.Load(); got != 0 {
		t.Fatalf("US backend saw %d EU requests", got)
	}
	if resp, _ := h.mustPost(keyGlobal, chatBody(false, "hello")); resp.StatusCode != http.StatusOK {
		t.Fatalf("global request: %d", resp.StatusCode)
	}
	if us.hits.Load() != 1 {
		t.Fatalf("global request did not reach the US")
	}
	if got := h.metric("fleetdrill_gateway_requests_total", map[string]string{"tenant": "bank-eu"}); got != 6 {
		t.Errorf("bank-eu requests = %v, want 6", got)
	}
}

func TestBreakerOpensAndProbesCloseIt(t *testing.T) {
	us := newFake(t)
	us.mode.Store(modeFail)
	us.unhealthy.Store(true)
	h := newHarness(t, testScenario(t, "policy.retries.max_attempts=1"), map[string][]string{"use-h100-8b": {us.srv.URL}})
	h.gw.sc.Policy.Admission.QueueTimeout = scenarios.Duration(100 * time.Millisecond)
	if resp, _ := h.mustPost(keyGlobal, chatBody(false, "x")); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("failing backend: %d, want 502", resp.StatusCode)
	}
	state := func() float64 {
		return h.metric("fleetdrill_breaker_state", map[string]string{"pool": "use-h100-8b", "replica": "0"})
	}
	// Open (1), or half-open (2) between a probe's trial and its failure.
	if s := state(); s == 0 {
		t.Fatalf("breaker closed after a failure at threshold 1")
	}
	us.mode.Store(modeOK)
	us.unhealthy.Store(false)
	eventually(t, "probes to close the breaker", func() bool { return state() == 0 })
	if resp, _ := h.mustPost(keyGlobal, chatBody(false, "x")); resp.StatusCode != http.StatusOK {
		t.Fatalf("after recovery: %d", resp.StatusCode)
	}
	if h.metric("fleetdrill_gateway_probes_total", map[string]string{"result": "ok"}) == 0 {
		t.Errorf("no successful probe counted")
	}
}

func TestRetryOn5xxToAnotherBackend(t *testing.T) {
	bad, good := newFake(t), newFake(t)
	bad.mode.Store(modeFail)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {bad.srv.URL, good.srv.URL}})
	resp, body := h.mustPost(keyGlobal, chatBody(false, "x"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if bad.hits.Load() != 1 || good.hits.Load() != 1 {
		t.Errorf("hits bad=%d good=%d, want 1 and 1", bad.hits.Load(), good.hits.Load())
	}
	if got := h.metric("fleetdrill_gateway_retries_total", nil); got != 1 {
		t.Errorf("retries = %v, want 1", got)
	}
	if got := resp.Header.Get("X-Fleetdrill-Attempts"); got != "2" {
		t.Errorf("X-Fleetdrill-Attempts = %q, want 2 (the failed one and the retry)", got)
	}
	if got := resp.Header.Get("X-Fleetdrill-Replica"); got != "1" {
		t.Errorf("X-Fleetdrill-Replica = %q, want 1 (the good backend)", got)
	}
}

func TestUpstream429IsRetriedThenPassedThrough(t *testing.T) {
	us := newFake(t)
	us.mode.Store(modeThrottle)
	h := newHarness(t, testScenario(t, "policy.retries.max_attempts=2"), map[string][]string{"use-h100-8b": {us.srv.URL}})
	resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if us.hits.Load() != 2 {
		t.Errorf("attempts = %d, want 2", us.hits.Load())
	}
	if s := h.metric("fleetdrill_breaker_state", nil); s != 0 {
		t.Errorf("a 429 opened the breaker")
	}
}

func TestClientCancelPropagatesUpstream(t *testing.T) {
	us := newFake(t)
	us.mode.Store(modeBlock)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}})
	for _, stream := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, _, err := h.post(ctx, keyGlobal, chatBody(stream, "x")); done <- err }()
		select {
		case <-us.started:
		case <-time.After(5 * time.Second):
			t.Fatal("request never reached the backend")
		}
		cancel()
		select {
		case <-us.cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("backend's request context was not cancelled")
		}
		<-done
	}
	eventually(t, "cancelled outcomes", func() bool {
		return h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "cancelled"}) == 2
	})
	if got := h.metric("fleetdrill_gateway_replica_inflight", nil); got != 0 {
		t.Errorf("core still holds %v requests: Finish was not called", got)
	}
}

// Under overload the core rejects with 429 + Retry-After, and every request
// is counted exactly once.
func TestOverload429AndAccounting(t *testing.T) {
	us := newFake(t)
	us.mode.Store(modeBlock)
	h := newHarness(t, testScenario(t, "pools.use-h100-8b.max_batch=2", "policy.admission.queue_limit=2",
		"policy.admission.deadline_check=false"), map[string][]string{"use-h100-8b": {us.srv.URL}})
	const n = 10
	var wg sync.WaitGroup
	codes := make(chan *http.Response, n)
	for range 4 { // 2 dispatched, 2 queued
		wg.Go(func() { resp, _ := h.mustPost(keyGlobal, chatBody(false, "x")); codes <- resp })
	}
	eventually(t, "the fleet to fill", func() bool {
		return h.metric("fleetdrill_queue_depth", nil) == 2 && len(us.started) == 2
	})
	for range n - 4 {
		resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("overloaded: %d, want 429", resp.StatusCode)
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
		}
	}
	us.Release()
	wg.Wait()
	close(codes)
	for resp := range codes {
		if resp.StatusCode != http.StatusOK {
			t.Errorf("admitted request: %d", resp.StatusCode)
		}
	}
	total := h.metric("fleetdrill_gateway_requests_total", nil)
	rejected := h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "rejected"})
	completed := h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "completed"})
	if total != n || rejected != n-4 || completed != 4 {
		t.Errorf("requests total=%v rejected=%v completed=%v, want %d, %d, 4", total, rejected, completed, n, n-4)
	}
}

// A tenant at its concurrency limit is refused; another tenant is not: no
// tenant spends another's quota.
func TestTenantQuotaIsolation(t *testing.T) {
	us, eu := newFake(t), newFake(t)
	us.mode.Store(modeBlock)
	eu.mode.Store(modeBlock)
	h := newHarness(t, testScenario(t, "tenants.bank-eu.max_concurrency=1"),
		map[string][]string{"use-h100-8b": {us.srv.URL}, "euw-a100-8b": {eu.srv.URL}})
	var wg sync.WaitGroup
	wg.Go(func() { h.mustPost(keyEU, chatBody(false, "x")) })
	<-eu.started
	resp, _ := h.mustPost(keyEU, chatBody(false, "x"))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("bank-eu over its concurrency: %d, want 429", resp.StatusCode)
	}
	for range 3 {
		wg.Go(func() { h.mustPost(keyGlobal, chatBody(false, "x")) })
	}
	for range 3 {
		select {
		case <-us.started:
		case <-eu.started: // global may be served anywhere
		case <-time.After(5 * time.Second):
			t.Fatal("global tenant was held back by bank-eu's quota")
		}
	}
	us.Release()
	eu.Release()
	wg.Wait()
}

// Prompts and keys never reach the logs or /metrics.
func TestCanaryNotLoggedOrExported(t *testing.T) {
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}})
	const canary = "CANARY-7f3a9c-prompt-text"
	h.mustPost(keyGlobal, chatBody(false, canary))
	h.mustPost(keyGlobal, chatBody(true, canary))
	h.mustPost("sk-unknown-"+canary, chatBody(false, canary))
	resp, err := http.Get(h.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "fleetdrill_gateway_requests_total") {
		t.Fatalf("/metrics lacks the request counter:\n%s", metrics)
	}
	logs := h.log.String()
	if !strings.Contains(logs, `"tenant":"global"`) {
		t.Fatalf("no request logged: %s", logs)
	}
	for _, secret := range []string{canary, keyGlobal} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs carry %q", secret)
		}
		if strings.Contains(string(metrics), secret) {
			t.Errorf("/metrics carries %q", secret)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	in, out, err := EstimateTokens([]byte(`{"model":"m","messages":[{"role":"user","content":"0123456789abcdef"}],"max_tokens":7}`), 256)
	// content is the JSON string "0123456789abcdef": 18 bytes → 5 tokens, + 4 per message.
	if err != nil || in != 9 || out != 7 {
		t.Errorf("EstimateTokens = %d, %d, %v; want 9, 7, nil", in, out, err)
	}
	_, out, _ = EstimateTokens([]byte(`{"model":"m","prompt":"x"}`), 256)
	if out != 256 {
		t.Errorf("default output = %d, want 256", out)
	}
}

func TestParseFiles(t *testing.T) {
	const k1, k2 = "sk-1-0123456789abcdef0123456789abcdef", "sk-2-0123456789abcdef0123456789abcdef"
	keys, err := ParseKeys(strings.NewReader("# tenants\nbank-eu " + k1 + "\n\nglobal " + k2 + "\n"))
	if err != nil || len(keys) != 2 || keys[1] != (Key{"global", k2}) {
		t.Errorf("ParseKeys = %v, %v", keys, err)
	}
	if _, err := ParseKeys(strings.NewReader("a " + k1 + "\nb " + k1 + "\n")); err == nil {
		t.Errorf("ParseKeys accepted a key for two tenants")
	}
	b, err := ParseBackends(strings.NewReader("p http://a:1/\np http://b:2\nq https://c\n"))
	if err != nil || len(b["p"]) != 2 || b["p"][0] != "openai+http://a:1" || len(b["q"]) != 1 {
		t.Errorf("ParseBackends = %v, %v", b, err)
	}
	if _, err := ParseBackends(strings.NewReader("p ftp://a\n")); err == nil {
		t.Errorf("ParseBackends accepted ftp")
	}
}

// A backend that goes silent under a stream (a black-holed route: no data,
// no close) fails the attempt after the health timeout, and the upstream
// request is cancelled, rather than hanging the client to its deadline.
func TestStalledStreamFailsAfterTheHealthTimeout(t *testing.T) {
	us := newFake(t)
	us.mode.Store(modeStall)
	var attempts atomic.Int32
	h := newHarness(t, testScenario(t, "policy.health.timeout=300ms", "classes.interactive.deadline=1h"),
		map[string][]string{"use-h100-8b": {us.srv.URL}}, func(c *Config) {
			c.Observer = &Observer{Attempt: func(_ time.Duration, _ int, _ string, status int, err bool) {
				if status == 0 && err {
					attempts.Add(1)
				}
			}}
		})
	start := time.Now()
	resp, body := h.mustPost(keyGlobal, chatBody(true, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode, "the headers went before the stall")
	require.Contains(t, body, "tok0")
	require.NotContains(t, body, "[DONE]", "a stalled stream does not end as if complete")
	require.True(t, strings.HasSuffix(body, "\n\ndata: {\"error\":{\"message\":\"the upstream broke off the stream before it finished\","+
		"\"type\":\"server_error\",\"param\":null,\"code\":\"upstream_error\"}}\n\n"), "it ends with an error event: %q", body)
	require.Less(t, time.Since(start), 10*time.Second)
	select {
	case <-us.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled upstream request was not cancelled")
	}
	eventually(t, "the failure counted", func() bool {
		return h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "failed"}) == 1
	})
	require.Equal(t, int32(1), attempts.Load(), "one failed attempt reported")
}

// TestStreamErrorEvents: an upstream's stream that ends cleanly but with
// its own error event is a failed attempt, never an answer (a stopping
// node, a lost container and vLLM's engine on a fatal error all fail their
// streams so). Before its first token nothing has reached the client, so
// the attempt is retried on another replica; after it the request fails
// with the upstream's error passed through. The breaker counts both.
func TestStreamErrorEvents(t *testing.T) {
	t.Run("first event: retried elsewhere", func(t *testing.T) {
		bad, good := newFake(t), newFake(t)
		bad.mode.Store(modeErrFirst)
		h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {bad.srv.URL, good.srv.URL}})
		resp, body := h.mustPost(keyGlobal, chatBody(true, "x"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, int64(1), bad.hits.Load())
		require.Equal(t, "1", resp.Header.Get("X-Fleetdrill-Replica"), "served by the good backend")
		require.NotContains(t, body, "shutting down", "nothing of the failed attempt reached the client")
		require.Contains(t, body, "[DONE]")
		require.Equal(t, 1.0, h.metric("fleetdrill_gateway_retries_total", nil))
		require.Equal(t, 1.0, h.metric("fleetdrill_gateway_attempts_total", map[string]string{"result": "error"}))
	})
	t.Run("after a token: failed, the upstream's error passed through", func(t *testing.T) {
		us := newFake(t)
		us.mode.Store(modeErrLater)
		h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}})
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/chat/completions", strings.NewReader(chatBody(true, "x")))
		req.Header.Set("Authorization", "Bearer "+keyGlobal)
		resp, err := h.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "the headers went with the first token")
		// The token reaches the client before the upstream fails.
		var got []byte
		buf := make([]byte, 4096)
		for !bytes.Contains(got, []byte("tok0")) {
			n, err := resp.Body.Read(buf)
			require.NoError(t, err)
			got = append(got, buf[:n]...)
		}
		us.Release()
		rest, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		body := string(got) + string(rest)
		require.Contains(t, body, "server shutting down")
		require.Equal(t, 1, strings.Count(body, `"error"`), "one error event, the upstream's: %q", body)
		require.Equal(t, int64(1), us.hits.Load(), "a stream with tokens out is not retried")
		// The handler counts the outcome before it returns, which is
		// before the client reads the end of the stream.
		require.Equal(t, 1.0, h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "failed"}))
		require.Equal(t, 1.0, h.metric("fleetdrill_gateway_attempts_total", map[string]string{"result": "error"}))
	})
	t.Run("no [DONE]: broken, the client told so", func(t *testing.T) {
		us := newFake(t)
		us.mode.Store(modeNoDone)
		h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}})
		resp, body := h.mustPost(keyGlobal, chatBody(true, "x"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, body, "tok0")
		require.Contains(t, body, "the upstream broke off the stream before it finished")
		require.Equal(t, 1.0, h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "failed"}))
	})
}

// TestErrorEvent: what errorEvent takes for an upstream's error event.
func TestErrorEvent(t *testing.T) {
	require.True(t, errorEvent([]byte("data: {\"error\": {\"message\": \"x\"}}\n\n")))
	require.True(t, errorEvent([]byte("data: {\"choices\":[]}\n\ndata:{\"object\":\"error\",\"message\":\"x\"}\n\n")), "a later event, no space")
	require.False(t, errorEvent([]byte(`data: {"choices":[{"delta":{"content":"data: {\"error\"}"}}]}`)), "a token's text")
	require.False(t, errorEvent([]byte("data: [DONE]\n\n")))
}

func TestNewRefusesMigration(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("default", []string{"policy.retries.migration_limit=1"})
	require.NoError(t, err)
	_, err = New(Config{Scenario: sc})
	require.ErrorContains(t, err, "cannot migrate a cut stream")
}
