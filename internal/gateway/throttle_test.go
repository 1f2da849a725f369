package gateway

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestThrottleSteersTheCore: a provider's 429 reaches the core, as a quota
// fault does in the twin. The request that met it is retried on the other
// pool, and while the Retry-After lasts no new request is sent to the
// throttled pool at all, though ordered routing prefers it.
func TestThrottleSteersTheCore(t *testing.T) {
	us, eu := newFake(t), newFake(t)
	us.throttleN.Store(1)
	us.retryHdr.Store("3600") // an hour of model time: it cannot run out during the test
	backends := map[string][]string{"use-h100-8b": {us.srv.URL}, "euw-a100-8b": {eu.srv.URL}}
	h := newHarness(t, testScenario(t, "policy.retries.max_attempts=2", "policy.health.threshold=10",
		"policy.routing.strategy=ordered"), backends)

	resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "euw-a100-8b", resp.Header.Get("X-Fleetdrill-Pool"), "the retry went to the other pool")
	require.Equal(t, "2", resp.Header.Get("X-Fleetdrill-Attempts"))

	for range 5 {
		resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "euw-a100-8b", resp.Header.Get("X-Fleetdrill-Pool"))
		require.Equal(t, "1", resp.Header.Get("X-Fleetdrill-Attempts"), "sent straight to the pool that has quota")
	}
	require.Equal(t, int64(1), us.hits.Load(), "the throttled pool got no request after its 429")
	// Both attempts of the first request carried one idempotency key; the
	// next request has its own.
	require.NotEmpty(t, us.keys[0])
	require.Equal(t, us.keys[0], eu.keys[0], "a retry carries its request's key")
	require.NotEqual(t, eu.keys[0], eu.keys[1])
	require.Equal(t, 1.0, h.metric("fleetdrill_gateway_attempts_total", map[string]string{"pool": "use-h100-8b", "result": "throttled"}))
	// Quota is not ill health: the breaker stays closed.
	require.Equal(t, 0.0, h.metric("fleetdrill_gateway_attempts_total", map[string]string{"pool": "use-h100-8b", "result": "error"}))
}
