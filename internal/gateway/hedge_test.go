package gateway

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHedgeWinsOnASecondReplica: with policy.routing.hedge_after, a request
// whose replica has not answered after that long gets a duplicate on a
// second replica the core picks; the first to answer wins and the other
// is cancelled (reqengine.SettleHedge).
func TestHedgeWinsOnASecondReplica(t *testing.T) {
	us, eu := newFake(t), newFake(t)
	us.mode.Store(modeBlock) // never answers until cancelled
	backends := map[string][]string{"use-h100-8b": {us.srv.URL}, "euw-a100-8b": {eu.srv.URL}}
	h := newHarness(t, testScenario(t, "policy.routing.strategy=ordered", "policy.routing.hedge_after=50ms",
		"policy.health.threshold=10"), backends)

	resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "euw-a100-8b", resp.Header.Get("X-Fleetdrill-Pool"), "the duplicate answered")
	require.Equal(t, "won", resp.Header.Get("X-Fleetdrill-Hedged"))
	require.Equal(t, "1", resp.Header.Get("X-Fleetdrill-Attempts"), "a hedge is not a retry")
	<-us.started
	<-us.cancelled // the loser is cancelled, not left running
	require.Equal(t, 1.0, h.metric("fleetdrill_gateway_hedges_total", map[string]string{"result": "sent"}))
	require.Equal(t, 1.0, h.metric("fleetdrill_gateway_hedges_total", map[string]string{"result": "won"}))
	// The core ends up holding nothing: both slots are released (the
	// handler finishes after the client has read the answer).
	eventually(t, "both slots released", func() bool {
		h.gw.mu.Lock()
		defer h.gw.mu.Unlock()
		n := h.gw.calls.held
		for r := range h.gw.replicas {
			n += h.gw.core.Inflight(r)
		}
		return n == 0
	})
}

// TestNoHedgeWhenTheAnswerComesFirst: an answer within hedge_after sends no
// duplicate.
func TestNoHedgeWhenTheAnswerComesFirst(t *testing.T) {
	us, eu := newFake(t), newFake(t)
	backends := map[string][]string{"use-h100-8b": {us.srv.URL}, "euw-a100-8b": {eu.srv.URL}}
	h := newHarness(t, testScenario(t, "policy.routing.strategy=ordered", "policy.routing.hedge_after=1h"), backends)
	for range 3 {
		resp, _ := h.mustPost(keyGlobal, chatBody(true, "x"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Empty(t, resp.Header.Get("X-Fleetdrill-Hedged"))
	}
	require.Equal(t, 0.0, h.metric("fleetdrill_gateway_hedges_total", map[string]string{"result": "sent"}))
	require.Zero(t, eu.hits.Load())
}

// TestFailedHedgeLeavesTheFirstAttempt: a duplicate that fails is dropped
// (its breaker hears of it); the first attempt's answer is the answer.
func TestFailedHedgeLeavesTheFirstAttempt(t *testing.T) {
	us, eu := newFake(t), newFake(t)
	us.mode.Store(modeBlock)
	eu.mode.Store(modeFail)
	backends := map[string][]string{"use-h100-8b": {us.srv.URL}, "euw-a100-8b": {eu.srv.URL}}
	h := newHarness(t, testScenario(t, "policy.routing.strategy=ordered", "policy.routing.hedge_after=50ms",
		"policy.health.threshold=10"), backends)
	done := make(chan *http.Response, 1)
	go func() {
		resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
		done <- resp
	}()
	<-us.started
	eventually(t, "the duplicate failed", func() bool {
		return h.metric("fleetdrill_gateway_attempts_total", map[string]string{"pool": "euw-a100-8b", "result": "error"}) == 1
	})
	us.Release() // the first attempt answers
	resp := <-done
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "use-h100-8b", resp.Header.Get("X-Fleetdrill-Pool"))
	require.Empty(t, resp.Header.Get("X-Fleetdrill-Hedged"))
	require.Equal(t, 0.0, h.metric("fleetdrill_gateway_hedges_total", map[string]string{"result": "won"}))
}
