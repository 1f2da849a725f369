package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/node"
	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// limitSpeed runs the nodes and the gateway of these tests faster than
// real time: a 16-token answer takes milliseconds.
const limitSpeed = 100

// startVLLMNode runs, on loopback, an emulated node of sc's pool answering
// as vLLM, with maxLen as its --max-model-len (0: its KV capacity): a real
// HTTP server with a real limit, published on /v1/models and enforced
// with vLLM's 400.
func startVLLMNode(t *testing.T, sc *scenarios.Scenario, pool string, maxLen int64) string {
	t.Helper()
	cfg, err := node.FromScenario(sc, pool)
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	cfg.Speed, cfg.Registerer, cfg.Gatherer = limitSpeed, reg, reg
	cfg.Flavor, cfg.MaxModelLen = node.FlavorVLLM, maxLen
	n, err := node.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = n.Run(ctx) }()
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() { srv.Close(); cancel(); <-n.Stopped() })
	return "vllm+" + srv.URL
}

// errorBody is an OpenAI error body.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    any     `json:"code"`
	} `json:"error"`
}

// A replay against servers configured with a 1,024-token context, the
// scenario believing 131,072 (the replicas' KV capacity): the gateway
// reads each server's max_model_len at start, says so, and routes by it.
// A request longer than every server that may serve it takes is the
// client's 400 context_length_exceeded naming the servers' limit, never a
// backend failure; with a pool whose servers take it, it goes there.
func TestServerContextLimitWins(t *testing.T) {
	sc := testScenario(t, "policy.health.probe_interval=1h")
	const limit = 1024
	short := chatBody(false, strings.Repeat("a", 400)) // ~110 tokens
	long := chatBody(false, strings.Repeat("a", 6000)) // ~1,500 tokens

	// replay sends n requests, every other one too long for limit, and
	// counts the answers by outcome and pool.
	type tally struct {
		outcomes, pools map[string]int
		tooLong         []*http.Response
		tooLongBodies   []string
	}
	replay := func(t *testing.T, h *harness, n int) tally {
		tl := tally{outcomes: map[string]int{}, pools: map[string]int{}}
		for i := range n {
			body := short
			if i%2 == 1 {
				body = long
			}
			resp, b := h.mustPost(keyGlobal, body)
			tl.outcomes[resp.Header.Get(hdrOutcome)]++
			if resp.StatusCode == http.StatusOK {
				tl.pools[resp.Header.Get("X-Fleetdrill-Pool")+map[bool]string{true: "/long", false: "/short"}[i%2 == 1]]++
			}
			if i%2 == 1 && resp.StatusCode != http.StatusOK {
				tl.tooLong, tl.tooLongBodies = append(tl.tooLong, resp), append(tl.tooLongBodies, b)
			}
		}
		return tl
	}

	t.Run("no pool takes it", func(t *testing.T) {
		us, eu := startVLLMNode(t, sc, "use-h100-8b", limit), startVLLMNode(t, sc, "euw-a100-8b", limit)
		h := newHarness(t, sc, map[string][]string{"use-h100-8b": {us}, "euw-a100-8b": {eu}},
			func(c *Config) { c.Speed = limitSpeed })
		require.NoError(t, h.gw.Backends().Check(context.Background()))

		// Start-up says which server's limit is below the scenario's.
		lims := h.gw.Backends().Limits()
		require.Len(t, lims, 2)
		for _, l := range lims {
			assert.Equal(t, int64(limit), l.Tokens)
			assert.Greater(t, l.Scenario, int64(limit), "the scenario's KV capacity")
			assert.True(t, l.Lower())
			assert.Contains(t, l.String(), "model llama-3.1-8b takes at most 1024 tokens (GET /v1/models max_model_len)")
		}
		assert.Contains(t, h.log.String(), `"server_limit":1024`)
		assert.Len(t, h.gw.Backends().ContextLimits(), 2)

		tl := replay(t, h, 40)
		assert.Equal(t, map[string]int{outCompleted: 20, outRejected: 20}, tl.outcomes, "no request failed")
		require.Len(t, tl.tooLong, 20)
		for i, resp := range tl.tooLong {
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			// Refused by the gateway, before any server saw it.
			assert.Equal(t, "no-compatible-pool", resp.Header.Get(hdrReason))
			var e errorBody
			require.NoError(t, json.Unmarshal([]byte(tl.tooLongBodies[i]), &e), tl.tooLongBodies[i])
			assert.Equal(t, "context_length_exceeded", e.Error.Code)
			assert.Equal(t, "invalid_request_error", e.Error.Type)
			require.NotNil(t, e.Error.Param)
			assert.Equal(t, "messages", *e.Error.Param)
			assert.Contains(t, e.Error.Message, "maximum context length is 1024 tokens")
		}
		// No attempt failed at a backend: nothing long was sent to one.
		assert.Zero(t, h.metric("fleetdrill_gateway_attempts_total", map[string]string{"result": "error"}))
		assert.Zero(t, h.metric(signals.Breaker.Name, nil), "no breaker opened")
	})

	t.Run("another pool takes it", func(t *testing.T) {
		us, eu := startVLLMNode(t, sc, "use-h100-8b", limit), startVLLMNode(t, sc, "euw-a100-8b", 0)
		h := newHarness(t, sc, map[string][]string{"use-h100-8b": {us}, "euw-a100-8b": {eu}},
			func(c *Config) { c.Speed = limitSpeed })
		require.NoError(t, h.gw.Backends().Check(context.Background()))
		require.Len(t, h.gw.Backends().ContextLimits(), 1, "only the US server's limit is below the scenario's")

		tl := replay(t, h, 40)
		assert.Equal(t, map[string]int{outCompleted: 40}, tl.outcomes)
		assert.Equal(t, 20, tl.pools["euw-a100-8b/long"], "every long request went to the pool that takes it: %v", tl.pools)
		assert.Zero(t, tl.pools["use-h100-8b/long"])
		assert.Positive(t, tl.pools["use-h100-8b/short"], "short requests still go to the limited pool: %v", tl.pools)
	})
}

// Where a server publishes its limit: vLLM and SGLang on /v1/models
// (max_model_len), TGI on /info (max_total_tokens); an OpenAI-compatible
// server that publishes none leaves the scenario's alone.
func TestServerLimitSources(t *testing.T) {
	serve := func(models, info string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/v1/models":
				_, _ = io.WriteString(w, models)
			case "/info":
				if info == "" {
					w.WriteHeader(http.StatusNotFound)
					return
				}
				_, _ = io.WriteString(w, info)
			default:
				_, _ = io.WriteString(w, "ok")
			}
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	const card = `{"object":"list","data":[{"id":"llama-3.1-8b","object":"model","owned_by":"sglang","max_model_len":4096}]}`
	const plain = `{"object":"list","data":[{"id":"llama-3.1-8b","object":"model"}]}`
	// TGI 2.x's /info (max_input_tokens; max_input_length before it).
	const info = `{"model_id":"meta-llama/Llama-3.1-8B-Instruct","max_input_tokens":2047,"max_total_tokens":2048,"version":"2.4.0"}`
	for _, tc := range []struct {
		name, backend string
		want          int64
		source        string
	}{
		{"sglang", "sglang+" + serve(card, ""), 4096, "GET /v1/models max_model_len"},
		{"tgi", "tgi+" + serve(plain, info), 2048, "GET /info max_total_tokens"},
		{"openai", serve(plain, ""), 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {tc.backend}})
			require.NoError(t, h.gw.Backends().Check(context.Background()))
			lims := h.gw.Backends().Limits()
			if tc.want == 0 {
				assert.Empty(t, lims)
				return
			}
			require.Len(t, lims, 1)
			assert.Equal(t, tc.want, lims[0].Tokens)
			assert.Equal(t, tc.source, lims[0].Source)
			assert.Equal(t, "use-h100-8b", lims[0].Pool)
		})
	}
	t.Run("tgi without /info", func(t *testing.T) {
		h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {"tgi+" + serve(plain, "")}})
		require.ErrorContains(t, h.gw.Backends().Check(context.Background()), "GET /info: status 404")
	})
}

// A backend's 4xx for the request's own fault goes to the client as it
// came, body and all: a refusal (outcome rejected), not retried, and no
// failure of the backend (its breaker stays closed however many come).
// Here the gateway was not told the server's limit (no start-up check):
// the server's own 400 is what the client reads.
func TestBackendClientErrorPassesThrough(t *testing.T) {
	sc := testScenario(t, "policy.health.probe_interval=1h")
	t.Run("vllm context length", func(t *testing.T) {
		us := startVLLMNode(t, sc, "use-h100-8b", 1024)
		h := newHarness(t, sc, map[string][]string{"use-h100-8b": {us}}, func(c *Config) { c.Speed = limitSpeed })
		long := chatBody(false, strings.Repeat("a", 6000))
		for range 12 { // well past any breaker's consecutive-failure threshold
			resp, body := h.mustPost(keyGlobal, long)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
			assert.Equal(t, outRejected, resp.Header.Get(hdrOutcome))
			assert.Equal(t, reasonUpstreamInvalid, resp.Header.Get(hdrReason))
			assert.Equal(t, "1", resp.Header.Get(hdrAttempts), "not retried")
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e), body)
			assert.Equal(t, "BadRequestError", e.Error.Type, "vLLM's own body")
			assert.Contains(t, e.Error.Message, "maximum context length is 1024 tokens")
		}
		resp, body := h.mustPost(keyGlobal, chatBody(false, "short"))
		require.Equal(t, http.StatusOK, resp.StatusCode, "the replica still serves: %s", body)
		assert.Zero(t, h.metric("fleetdrill_gateway_attempts_total", map[string]string{"result": "error"}))
		assert.Zero(t, h.metric(signals.Breaker.Name, nil), "no breaker opened")
	})
	for _, status := range []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			const answer = `{"object":"error","message":"the server's own words","type":"BadRequestError","param":null,"code":`
			var hits atomic.Int64
			url := newFakeHandler(t, func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = io.WriteString(w, answer+strconv.Itoa(status)+"}")
			})
			h := newHarness(t, sc, map[string][]string{"use-h100-8b": {url}})
			resp, body := h.mustPost(keyGlobal, chatBody(false, "x"))
			assert.Equal(t, status, resp.StatusCode)
			assert.Equal(t, answer+strconv.Itoa(status)+"}", body, "passed through as it came")
			assert.Equal(t, outRejected, resp.Header.Get(hdrOutcome))
			assert.Equal(t, int64(1), hits.Load(), "not retried")
		})
	}
	// Not the request's fault: a 404 (the model gone from the backend)
	// and a 408 (the server timed out) are the fleet's.
	for _, status := range []int{http.StatusNotFound, http.StatusRequestTimeout} {
		assert.False(t, clientFault(status), "%d", status)
	}
}
