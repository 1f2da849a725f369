package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBackend(t *testing.T) {
	for _, tc := range []struct {
		in       string
		kind     Kind
		url, err string
	}{
		{in: "http://10.0.0.5:8000/", kind: KindOpenAI, url: "http://10.0.0.5:8000"},
		{in: "vllm+http://10.0.0.5:8000", kind: KindVLLM, url: "http://10.0.0.5:8000"},
		{in: "sglang+https://gpu-3.internal:30000/v1base", kind: KindSGLang, url: "https://gpu-3.internal:30000/v1base"},
		{in: "tgi+http://h:80", kind: KindTGI, url: "http://h:80"},
		{in: "fleetdrill+http://127.0.0.1:9001", kind: KindFleetdrill, url: "http://127.0.0.1:9001"},
		{in: "ollama+http://h:11434", err: `backend kind "ollama", want one of openai, vllm, sglang, tgi, fleetdrill`},
		{in: "vllm+ftp://h", err: "base URL must be http(s)"},
		{in: "http://user:p+w@h:1", kind: KindOpenAI, url: "http://user:p+w@h:1"}, // a '+' after the scheme is not a kind
	} {
		kind, u, err := ParseBackend(tc.in)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.kind, kind, tc.in)
		assert.Equal(t, tc.url, u, tc.in)
	}
	b := map[string][]string{}
	require.NoError(t, AddBackend(b, "use-h100-8b=vllm+http://10.0.0.5:8000"))
	require.Equal(t, []string{"vllm+http://10.0.0.5:8000"}, b["use-h100-8b"])
	require.ErrorContains(t, AddBackend(b, "vllm+http://10.0.0.5:8000"), "want POOL=[KIND+]URL")
}

// A kind gets only the extensions it takes: a real server never sees the
// emulated node's x_fleetdrill, and one without vLLM's sampling extensions
// never sees ignore_eos or min_tokens.
func TestKindAdaptsTheBody(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":8,"ignore_eos":true,"min_tokens":8,"x_fleetdrill":{"input_tokens":3,"output_tokens":8}}`)
	has := func(b []byte, field string) bool { return strings.Contains(string(b), `"`+field+`"`) }
	for _, tc := range []struct {
		kind                  Kind
		fleetdrill, samplings bool
	}{
		{KindFleetdrill, true, true},
		{KindVLLM, false, true},
		{KindSGLang, false, true},
		{KindTGI, false, false},
		{KindOpenAI, false, false},
	} {
		out := tc.kind.adapt(body)
		assert.Equal(t, tc.fleetdrill, has(out, "x_fleetdrill"), "%s x_fleetdrill", tc.kind)
		assert.Equal(t, tc.samplings, has(out, "ignore_eos"), "%s ignore_eos", tc.kind)
		assert.Equal(t, tc.samplings, has(out, "min_tokens"), "%s min_tokens", tc.kind)
		assert.True(t, has(out, "max_tokens"), "%s keeps the rest", tc.kind)
	}
	plain := []byte(`{"model":"m"}`)
	require.Same(t, &plain[0], &KindTGI.adapt(plain)[0], "a body without extensions is left as it is")
}

// The load series of each kind, as the servers name them (vLLM 0.8+
// kv_cache_usage_perc and the older gpu_cache_usage_perc; SGLang; TGI,
// which has no KV usage).
func TestParseLoad(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		text string
		want Load
		ok   bool
	}{
		{KindVLLM, `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="llama-3.1-8b"} 7
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="llama-3.1-8b"} 2
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="llama-3.1-8b"} 0.42
`, Load{Running: 7, Waiting: 2, KVUsage: 0.42}, true},
		{KindVLLM, `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} 1
vllm:num_requests_running{model_name="b"} 2
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="a"} 0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="a"} 0.1
`, Load{Running: 3, Waiting: 0, KVUsage: 0.1}, true},
		{KindSGLang, `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 5
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 1
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.28
`, Load{Running: 5, Waiting: 1, KVUsage: 0.28}, true},
		{KindTGI, `# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 4
# TYPE tgi_queue_size gauge
tgi_queue_size 0
`, Load{Running: 4, KVUsage: -1}, true},
		{KindVLLM, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3\n", Load{KVUsage: -1}, false},
	} {
		got, ok, err := tc.kind.parseLoad(strings.NewReader(tc.text))
		require.NoError(t, err, tc.kind)
		assert.Equal(t, tc.ok, ok, tc.kind)
		assert.Equal(t, tc.want, got, tc.kind)
	}
	_, _, err := KindVLLM.parseLoad(strings.NewReader("not { an exposition"))
	require.Error(t, err)
}

// A vLLM backend is probed at /health, its load is read from its metrics
// and shows on the gateway's series, and an engine that queues requests
// takes no more from the gateway until it stops queueing.
func TestVLLMBackendLoadIsReadAndPushesBack(t *testing.T) {
	us := newFake(t)
	us.metrics.Store(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="llama-3.1-8b"} 3
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="llama-3.1-8b"} 4
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="llama-3.1-8b"} 0.9
`)
	h := newHarness(t, testScenario(t, "policy.health.probe_interval=20ms"),
		map[string][]string{"use-h100-8b": {"vllm+" + us.srv.URL}})
	eventually(t, "the load read", func() bool {
		return h.metric("fleetdrill_gateway_backend_requests", map[string]string{"state": "waiting"}) == 4
	})
	require.Equal(t, 3.0, h.metric("fleetdrill_gateway_backend_requests", map[string]string{"state": "running"}))
	require.Equal(t, 0.9, h.metric("fleetdrill_gateway_backend_kv_cache_usage_ratio", nil))
	require.Equal(t, Load{Running: 3, Waiting: 4, KVUsage: 0.9}, withoutAt(h.gw.Backends().Loads()[0]))

	// Queueing in its engine: a new request waits in the gateway's queue.
	done := make(chan *http.Response, 1)
	go func() {
		resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
		done <- resp
	}()
	eventually(t, "the request queued in the gateway", func() bool {
		return h.metric("fleetdrill_queue_depth", nil) == 1
	})
	require.Zero(t, us.hits.Load(), "nothing sent to an engine that queues")
	us.metrics.Store(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="llama-3.1-8b"} 1
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="llama-3.1-8b"} 0
`)
	resp := <-done
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 0.0, h.metric("fleetdrill_gateway_backend_scrape_errors_total", nil))
}

func withoutAt(l Load) Load { l.At = 0; return l }

// Each kind is probed at its own health path: a vLLM-compatible server that
// has no /healthz stays healthy.
func TestProbesUseTheKindsHealthPath(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		path string
	}{{KindVLLM, "/health"}, {KindSGLang, "/health"}, {KindTGI, "/health"}, {KindOpenAI, "/v1/models"}, {KindFleetdrill, "/healthz"}} {
		seen := make(chan string, 64)
		srv := newPathServer(t, tc.path, seen)
		h := newHarness(t, testScenario(t, "policy.health.probe_interval=10ms", "policy.health.threshold=1"),
			map[string][]string{"use-h100-8b": {string(tc.kind) + "+" + srv}})
		eventually(t, "probes", func() bool {
			return h.metric("fleetdrill_gateway_probes_total", map[string]string{"result": "ok"}) >= 3
		})
		require.Zero(t, h.metric("fleetdrill_gateway_probes_total", map[string]string{"result": "error"}), "%s", tc.kind)
		require.Equal(t, tc.path, <-seen, "%s", tc.kind)
		h.close()
	}
}

// Backends.Check names the pool, the backend and the model a backend does
// not serve.
func TestCheckBackends(t *testing.T) {
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {"vllm+" + us.srv.URL}})
	require.NoError(t, h.gw.Backends().Check(context.Background()))

	other := newPathServer(t, "/v1/models", nil)
	h2 := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {"vllm+" + other}})
	err := h2.gw.Backends().Check(context.Background())
	require.ErrorContains(t, err, "pool use-h100-8b backend")
	require.ErrorContains(t, err, "does not serve model llama-3.1-8b (it serves: meta-llama/Llama-3.1-8B-Instruct)")
	require.ErrorContains(t, err, "--served-model-name llama-3.1-8b")
}

// newPathServer is a server that answers 200 on okPath only (a model list
// on /v1/models naming a model the test scenario does not have), 404
// elsewhere, and sends every path it is asked for to seen (when not nil).
func newPathServer(t *testing.T, okPath string, seen chan<- string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen != nil {
			select {
			case seen <- r.URL.Path:
			default:
			}
		}
		switch r.URL.Path {
		case "/v1/models":
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model"}]}`)
		case okPath:
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A non-streamed answer's headers come with the whole answer: one that
// takes longer than the health timeout is a long healthy generation, not a
// failed attempt (four long answers used to open the only replica's
// breaker). A stream's headers come at once, and still must.
func TestLongNonStreamingAnswerIsNotAFailure(t *testing.T) {
	us := newFake(t)
	us.delay.Store(int64(300 * time.Millisecond)) // wall time, before the headers
	h := newHarness(t, testScenario(t, "policy.health.timeout=100ms", "policy.health.threshold=1",
		"policy.health.probe_interval=1h", "policy.retries.max_attempts=1"), map[string][]string{"use-h100-8b": {us.srv.URL}})
	for range 2 {
		resp, _ := h.mustPost(keyGlobal, chatBody(false, "a long answer"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "1", resp.Header.Get("X-Fleetdrill-Attempts"))
	}
	require.Zero(t, h.metric("fleetdrill_gateway_attempts_total", map[string]string{"result": "error"}))

	resp, _ := h.mustPost(keyGlobal, chatBody(true, "a stream that sends no headers"))
	require.NotEqual(t, http.StatusOK, resp.StatusCode, "a stream without headers within the health timeout fails")
	require.Positive(t, h.metric("fleetdrill_gateway_attempts_total", map[string]string{"result": "error"}))
}
