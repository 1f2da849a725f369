package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request beyond a pool's provider quota waits in the core's queue and is
// dispatched when the quota refills, by the core's WakeAt timer alone: no
// other arrival, no probe (the probe interval is an hour) and no finishing
// request nudges the core. At one request a minute, the second request waits
// about 60 s of model time: 0.3 s of wall time at speed 200.
func TestQuotaRefillWakesTheCore(t *testing.T) {
	const speed = 200
	us := newFake(t)
	h := newHarness(t, testScenario(t, "pools.use-h100-8b.quota.requests_per_minute=1", "policy.health.probe_interval=1h",
		"policy.health.timeout=1h", "classes.interactive.deadline=1h"),
		map[string][]string{"use-h100-8b": {us.srv.URL}}, func(c *Config) { c.Speed = speed; withQueueTimeout(time.Hour)(c) })

	resp, _ := h.mustPost(keyGlobal, chatBody(false, "first"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	first, err := strconv.ParseFloat(resp.Header.Get("X-Fleetdrill-Queue-Wait"), 64)
	require.NoError(t, err)
	// Its wait counts from the client's send: the gateway's own handling,
	// a millisecond of wall time, is a fraction of a model second here.
	assert.Less(t, first, 5.0, "the first request is within the quota")

	t0 := time.Now()
	resp, _ = h.mustPost(keyGlobal, chatBody(false, "second"))
	took := time.Since(t0)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	qw, err := strconv.ParseFloat(resp.Header.Get("X-Fleetdrill-Queue-Wait"), 64)
	require.NoError(t, err)
	// The quota refills one request a minute: at least 55 s of model time
	// (it began refilling at the first dispatch), and no more than the
	// model time the request took in all, whatever the machine's load.
	assert.GreaterOrEqual(t, qw, 55.0, "queue wait %gs (model): the quota refills one request a minute", qw)
	assert.LessOrEqual(t, qw, took.Seconds()*speed+1, "queue wait %gs (model) within the %v of wall time it took", qw, took)
	assert.GreaterOrEqual(t, took, 55*time.Second/speed, "served after %v of wall time", took)
	assert.Equal(t, 2.0, h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "completed"}))
	assert.Zero(t, h.metric("fleetdrill_gateway_probes_total", nil), "a probe nudged the core")
	assert.EqualValues(t, 2, us.hits.Load())
}

// A flood far beyond what admission allows is refused at once with 429 and
// Retry-After; the core never holds more than the bound (max_batch +
// queue_limit); and when the flood is over and the gateway closed, no
// goroutine is left behind. The requests are served in-process (the
// handler called from 2,000 goroutines) to stay within the race detector's
// goroutine limit; the upstream is a real HTTP server whose one replica
// holds every request until released.
func TestOverloadIsBounded(t *testing.T) {
	const (
		n        = 2000
		maxBatch = 2
		queue    = 8
		bound    = maxBatch + queue
	)
	us := newFake(t)
	us.mode.Store(modeBlock)
	base := runtime.NumGoroutine()
	h := newHarness(t, testScenario(t, "pools.use-h100-8b.max_batch="+strconv.Itoa(maxBatch),
		"policy.admission.queue_limit="+strconv.Itoa(queue), "policy.health.timeout=1h"),
		map[string][]string{"use-h100-8b": {us.srv.URL}}, func(c *Config) { withQueueTimeout(time.Hour)(c) })
	handler := h.gw.Handler()
	body := chatBody(false, "flood")

	type result struct {
		status     int
		retryAfter string
		outcome    string
		took       time.Duration
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+keyGlobal)
			rec := httptest.NewRecorder()
			t0 := time.Now()
			handler.ServeHTTP(rec, req)
			results <- result{rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("X-Fleetdrill-Outcome"), time.Since(t0)}
		})
	}
	close(start)
	// Everything beyond the bound is refused while the admitted requests
	// are still held upstream.
	refused := 0
	for refused < n-bound {
		select {
		case r := <-results:
			require.Equal(t, http.StatusTooManyRequests, r.status, "a request was answered before the upstream let any go")
			s, err := strconv.Atoi(r.retryAfter)
			require.NoError(t, err, "Retry-After %q", r.retryAfter)
			require.GreaterOrEqual(t, s, 1)
			require.Equal(t, "rejected", r.outcome)
			require.Less(t, r.took, 5*time.Second, "a refusal took %v", r.took)
			refused++
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d of %d requests refused", refused, n-bound)
		}
	}
	h.gw.mu.Lock()
	held, live := h.gw.calls.held, h.gw.lc.Live()
	h.gw.mu.Unlock()
	assert.Equal(t, bound, held, "requests the core holds")
	assert.Equal(t, bound, live, "requests the gateway tracks")
	assert.Equal(t, float64(queue), h.metric("fleetdrill_queue_depth", nil))

	us.Release()
	wg.Wait()
	close(results)
	served := 0
	for r := range results {
		assert.Equal(t, http.StatusOK, r.status)
		served++
	}
	assert.Equal(t, bound, served)
	h.gw.mu.Lock()
	assert.LessOrEqual(t, h.gw.calls.heldPeak, bound, "the core held more than the admission bound")
	assert.Zero(t, h.gw.calls.held)
	assert.Zero(t, h.gw.lc.Live())
	assert.Empty(t, h.gw.calls.m)
	h.gw.mu.Unlock()
	assert.Equal(t, float64(n-bound), h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "rejected"}))

	h.close()
	requireGoroutinesBack(t, base)
}

// requireGoroutinesBack waits until the goroutine count is back to base
// (one more is tolerated: a runtime or testing goroutine may come and go).
func requireGoroutinesBack(t *testing.T, base int) {
	t.Helper()
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base+1 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A gateway's whole life (start, serve every kind of answer, Close, server
// shutdown) leaves no goroutine behind.
func TestNoGoroutineLeakAfterShutdown(t *testing.T) {
	us, eu := newFake(t), newFake(t)
	base := runtime.NumGoroutine()
	var rec recorder
	h := newHarness(t, testScenario(t, "tenants.bank-eu.max_concurrency=1", "classes.interactive.deferrable=true",
		"policy.admission.defer_for=1s", "policy.admission.retry_after=1s"),
		map[string][]string{"use-h100-8b": {us.srv.URL}, "euw-a100-8b": {eu.srv.URL}},
		func(c *Config) { c.Speed = 10; c.Observer = rec.observer() })
	for i := range 10 { // completed, streamed or not
		resp, _ := h.mustPost(keyGlobal, chatBody(i%2 == 0, "x"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	us.throttleN.Store(1) // retried
	resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// bank-eu at its concurrency: the next is deferred; a third gives up.
	eu.mode.Store(modeBlock)
	var wg sync.WaitGroup
	wg.Go(func() { h.mustPost(keyEU, chatBody(false, "parked")) })
	<-eu.started
	var deferred *http.Response
	wg.Go(func() { deferred, _ = h.mustPost(keyEU, chatBody(true, "deferred")) })
	eventually(t, "a deferral", func() bool { return h.metric("fleetdrill_gateway_deferrals_total", nil) >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, _, err := h.post(ctx, keyEU, chatBody(false, "gives up"))
	cancel()
	require.Error(t, err)
	eu.Release()
	wg.Wait()
	require.Equal(t, http.StatusOK, deferred.StatusCode)
	require.NotEmpty(t, deferred.Header.Get("X-Fleetdrill-Deferrals"))

	us.mode.Store(modeFail) // failed, wherever it is retried
	eu.mode.Store(modeFail)
	resp, _ = h.mustPost(keyGlobal, chatBody(false, "x"))
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	attempts, _ := rec.snapshot()
	require.NotEmpty(t, attempts)
	h.close()
	h.srv.Client().CloseIdleConnections()
	requireGoroutinesBack(t, base)
}
