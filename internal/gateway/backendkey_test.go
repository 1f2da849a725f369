package gateway

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

const testBackendKey = "sk-backend-0123456789abcdef0123456789"

// Every upstream request carries the gateway's backend key when it has
// one, and no Authorization when it has none: completions streamed or not,
// a hedge, the health probes of both kinds of health path, the load scrape
// and the model check. The tenant's own key never reaches a backend.
func TestBackendKey(t *testing.T) {
	for _, tc := range []struct {
		name, key string
	}{
		{"no backend key", ""},
		{"a backend key", testBackendKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := ""
			if tc.key != "" {
				want = "Bearer " + tc.key
			}
			us, eu := newFake(t), newFake(t)
			for _, f := range []*fake{us, eu} {
				f.auth.Store(want) // anything else is a 401, counted in badAuth
			}
			us.metrics.Store("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"llama-3.1-8b\"} 3\n" +
				"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"llama-3.1-8b\"} 0\n")
			// us is a vllm backend (probed at /health, its /metrics read),
			// eu an openai one (probed at /v1/models); ordered routing sends
			// to us first, so a hedge goes to eu.
			backends := map[string][]string{"use-h100-8b": {"vllm+" + us.srv.URL}, "euw-a100-8b": {eu.srv.URL}}
			h := newHarness(t, testScenario(t, "policy.routing.strategy=ordered", "policy.routing.hedge_after=50ms",
				"policy.health.probe_interval=20ms", "policy.health.threshold=10"), backends,
				func(c *Config) { c.BackendKey = tc.key })

			require.NoError(t, h.gw.Backends().Check(context.Background()))
			eventually(t, "probes of both pools and the load read", func() bool {
				return h.metric("fleetdrill_gateway_probes_total", map[string]string{"pool": "use-h100-8b", "result": "ok"}) >= 2 &&
					h.metric("fleetdrill_gateway_probes_total", map[string]string{"pool": "euw-a100-8b", "result": "ok"}) >= 2 &&
					h.metric("fleetdrill_gateway_backend_requests", map[string]string{"state": "running"}) == 3
			})
			for _, stream := range []bool{false, true} {
				resp, body := h.mustPost(keyGlobal, chatBody(stream, "x"))
				require.Equal(t, http.StatusOK, resp.StatusCode, "stream %v: %s", stream, body)
				require.Equal(t, "use-h100-8b", resp.Header.Get("X-Fleetdrill-Pool"))
				require.Equal(t, want, us.lastHdr.Load().(http.Header).Get("Authorization"), "stream %v", stream)
			}

			us.mode.Store(modeBlock) // the first attempt hangs: the hedge on eu answers
			resp, body := h.mustPost(keyGlobal, chatBody(false, "x"))
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			require.Equal(t, "won", resp.Header.Get("X-Fleetdrill-Hedged"))
			require.Equal(t, want, eu.lastHdr.Load().(http.Header).Get("Authorization"))

			require.Zero(t, us.badAuth.Load(), "requests to us without the backend key, or with another")
			require.Zero(t, eu.badAuth.Load(), "requests to eu without the backend key, or with another")
			require.Zero(t, h.metric("fleetdrill_gateway_probes_total", map[string]string{"result": "error"}))
			require.Zero(t, h.metric("fleetdrill_gateway_backend_scrape_errors_total", nil))
		})
	}
}

// A backend that wants a key the gateway does not send is named at start,
// with what to do.
func TestCheckBackendsNamesTheBackendKey(t *testing.T) {
	for _, tc := range []struct {
		name, key, want string
	}{
		{"no backend key", "", "status 401: the backend wants an API key, and the gateway has none to send"},
		{"another key", "sk-another-0123456789abcdef0123456789", "status 401: the backend refused the gateway's backend key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us := newFake(t)
			us.auth.Store("Bearer " + testBackendKey)
			h := newHarness(t, testScenario(t, "policy.health.probe_interval=1h"),
				map[string][]string{"use-h100-8b": {"vllm+" + us.srv.URL}}, func(c *Config) { c.BackendKey = tc.key })
			err := h.gw.Backends().Check(context.Background())
			require.ErrorContains(t, err, "pool use-h100-8b backend")
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "sk-")
		})
	}
}

// A key that no header can carry is refused at New, not by every request.
func TestBackendKeyWithANewline(t *testing.T) {
	_, err := New(Config{Scenario: testScenario(t), Backends: map[string][]string{"use-h100-8b": {"http://127.0.0.1:1"}},
		BackendKey: testBackendKey + "\n"})
	require.ErrorContains(t, err, "backend key holds a control character")
}

// A backend that refuses the gateway's key (401) is the gateway's
// misconfiguration, not the client's: the attempt fails as a 5xx would,
// and the client gets 502 upstream_error saying so, never a 401 that
// reads as its own key being wrong.
func TestBackendRefusesTheGatewaysKey(t *testing.T) {
	us := newFake(t)
	us.auth.Store("Bearer sk-another-key-0123456789abcdef0123")
	// One attempt: retries would trip the breaker and end in a queue
	// timeout, which hides the message.
	h := newHarness(t, testScenario(t, "policy.retries.max_attempts=1"), map[string][]string{"use-h100-8b": {us.srv.URL}},
		func(c *Config) { c.BackendKey = testBackendKey })
	resp, body := h.mustPost(keyGlobal, chatBody(false, "x"))
	require.Equal(t, http.StatusBadGateway, resp.StatusCode, body)
	wantErrorCode(t, body, "upstream_error")
	require.Contains(t, body, "backend key")
	require.Equal(t, "failed", resp.Header.Get(hdrOutcome))
	require.Positive(t, h.metric("fleetdrill_gateway_attempts_total", map[string]string{"pool": "use-h100-8b", "result": "error"}))
}
