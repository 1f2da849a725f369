package gateway

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every answer says what happened, so a replay driver can account for each
// request in a run's report's terms.
func TestOutcomeHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		prep func(us, eu *fake)
		park string // a key whose request is parked on a blocked backend first
		key  string
		body string // "" chatBody

		wantStatus     int
		wantOutcome    string
		wantReason     string // "" absent
		wantAttempts   string
		wantQueueWait  bool
		wantRetryAfter bool
	}{
		{name: "completed", key: keyGlobal,
			wantStatus: http.StatusOK, wantOutcome: "completed", wantAttempts: "1", wantQueueWait: true},
		{name: "completed after a retry", key: keyGlobal,
			prep:       func(us, _ *fake) { us.throttleN.Store(1) },
			wantStatus: http.StatusOK, wantOutcome: "completed", wantAttempts: "2", wantQueueWait: true},
		{name: "rejected: tenant quota", sets: []string{"tenants.bank-eu.max_concurrency=1"}, key: keyEU,
			prep: func(_, eu *fake) { eu.mode.Store(modeBlock) }, park: keyEU,
			wantStatus: http.StatusTooManyRequests, wantOutcome: "rejected", wantReason: "tenant-concurrency",
			wantAttempts: "1", wantRetryAfter: true},
		{name: "rejected: queue full", sets: []string{"pools.euw-a100-8b.max_batch=1", "policy.admission.queue_limit=1"}, key: keyEU,
			prep: func(_, eu *fake) { eu.mode.Store(modeBlock) }, park: keyEU, // and one more queued, below
			wantStatus: http.StatusTooManyRequests, wantOutcome: "rejected", wantReason: "queue-full",
			wantAttempts: "1", wantRetryAfter: true},
		{name: "rejected: too large", key: keyEU, // larger than any replica's KV cache: 400 context_length_exceeded
			body:       `{"model":"llama-3.1-8b","max_tokens":1000000000,"messages":[{"role":"user","content":"x"}]}`,
			wantStatus: http.StatusBadRequest, wantOutcome: "rejected", wantReason: "no-compatible-pool", wantAttempts: "1"},
		{name: "rejected: no route", key: keyEU, sets: []string{"pools.euw-a100-8b.region=us-east", // no pool in the EU
			"workload.bank-eu.tenant=global", "workload.health-eu.tenant=global"},
			wantStatus: http.StatusServiceUnavailable, wantOutcome: "rejected", wantReason: "no-compatible-pool", wantAttempts: "1"},
		{name: "a 429 steers the retry to the other pool", key: keyGlobal,
			prep:       func(us, _ *fake) { us.mode.Store(modeThrottle) },
			wantStatus: http.StatusOK, wantOutcome: "completed", wantAttempts: "2", wantQueueWait: true},
		{name: "rejected: upstream quota", key: keyGlobal,
			prep:       func(us, eu *fake) { us.mode.Store(modeThrottle); eu.mode.Store(modeThrottle) },
			wantStatus: http.StatusTooManyRequests, wantOutcome: "rejected", wantReason: "upstream-quota",
			wantAttempts: "2", wantRetryAfter: true},
		{name: "rejected: the EU pool down past the deadline", key: keyEU, // its breaker opens at the first failure
			sets: []string{"policy.health.threshold=1", "policy.health.open_for=1m",
				"policy.admission.deadline_check=true", "classes.interactive.deadline=30s"},
			prep:       func(_, eu *fake) { eu.mode.Store(modeFail) },
			wantStatus: http.StatusServiceUnavailable, wantOutcome: "rejected", wantReason: "jurisdiction-unavailable",
			wantAttempts: "2", wantRetryAfter: true},
		{name: "failed: upstream 5xx", key: keyGlobal,
			prep:       func(us, _ *fake) { us.mode.Store(modeFail) },
			wantStatus: http.StatusBadGateway, wantOutcome: "failed", wantAttempts: "2"},
		{name: "failed: upstream 404 passed through", key: keyGlobal,
			prep:       func(us, _ *fake) { us.mode.Store(modeNotFound) },
			wantStatus: http.StatusNotFound, wantOutcome: "failed", wantAttempts: "1", wantQueueWait: true},
		{name: "timed out: deadline", sets: []string{"classes.interactive.deadline=100ms"}, key: keyGlobal,
			prep:       func(us, _ *fake) { us.mode.Store(modeBlock) },
			wantStatus: http.StatusGatewayTimeout, wantOutcome: "timed_out", wantAttempts: "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us, eu := newFake(t), newFake(t)
			if tc.prep != nil {
				tc.prep(us, eu)
			}
			backends := map[string][]string{"use-h100-8b": {us.srv.URL}, "euw-a100-8b": {eu.srv.URL}}
			// Ordered routing sends global requests, retries included, to
			// the US pool (listed first) while it has room, so a failing US
			// backend is not bypassed through the EU.
			sets := append([]string{"policy.retries.max_attempts=2", "policy.health.threshold=10",
				"policy.routing.strategy=ordered"}, tc.sets...)
			h := newHarness(t, testScenario(t, sets...), backends)
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); wg.Wait() }()
			if tc.park != "" {
				wg.Go(func() { _, _, _ = h.post(ctx, tc.park, chatBody(false, "x")) })
				<-eu.started
				if tc.wantReason == "queue-full" {
					wg.Go(func() { _, _, _ = h.post(ctx, tc.park, chatBody(false, "x")) })
					eventually(t, "a queued request", func() bool { return h.metric("fleetdrill_queue_depth", nil) == 1 })
				}
			}
			body := tc.body
			if body == "" {
				body = chatBody(false, "x")
			}
			resp, _ := h.mustPost(tc.key, body)
			require.Equal(t, tc.wantStatus, resp.StatusCode)
			hd := resp.Header
			assert.Equal(t, tc.wantOutcome, hd.Get("X-Fleetdrill-Outcome"))
			assert.Equal(t, tc.wantReason, hd.Get("X-Fleetdrill-Reason"))
			_, hasReason := hd["X-Fleetdrill-Reason"]
			assert.Equal(t, tc.wantReason != "", hasReason, "X-Fleetdrill-Reason present")
			assert.Equal(t, tc.wantAttempts, hd.Get("X-Fleetdrill-Attempts"))
			assert.Empty(t, hd.Get("X-Fleetdrill-Deferrals"), "no deferral")
			// Admitted as a report counts it: the core dispatched or queued
			// the request; a refusal at its only offer never was.
			refusedAtOffer := tc.wantOutcome == "rejected" && tc.wantAttempts == "1"
			assert.Equal(t, !refusedAtOffer, hd.Get("X-Fleetdrill-Admitted") == "1", "X-Fleetdrill-Admitted %q", hd.Get("X-Fleetdrill-Admitted"))
			if tc.wantRetryAfter {
				s, err := strconv.Atoi(hd.Get("Retry-After"))
				assert.NoError(t, err, "Retry-After %q", hd.Get("Retry-After"))
				assert.GreaterOrEqual(t, s, 1)
			}
			if !tc.wantQueueWait {
				assert.Empty(t, hd.Get("X-Fleetdrill-Queue-Wait"))
				assert.Empty(t, hd.Get("X-Fleetdrill-Pool"))
				return
			}
			qw, err := strconv.ParseFloat(hd.Get("X-Fleetdrill-Queue-Wait"), 64)
			require.NoError(t, err, "X-Fleetdrill-Queue-Wait %q", hd.Get("X-Fleetdrill-Queue-Wait"))
			if tc.wantAttempts == "1" {
				// Dispatched at once: the wait is the gateway's own
				// handling since the client's send (body read, parse).
				assert.Less(t, qw, 1.0, "dispatched at once")
				assert.GreaterOrEqual(t, qw, 0.0)
			} else {
				// A request arrives once: the answering attempt's wait
				// counts from the client's send, as a report counts it
				// (first attempt and backoff included).
				assert.Positive(t, qw, "waited through the first attempt and the backoff")
			}
			assert.NotEmpty(t, hd.Get("X-Fleetdrill-Pool"))
			assert.NotEmpty(t, hd.Get("X-Fleetdrill-Replica"))
			assert.NotEmpty(t, hd.Get("X-Fleetdrill-Model"))
			// The outcome header agrees with the metric.
			assert.Equal(t, 1.0, h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": tc.wantOutcome}))
		})
	}
}

// X-Fleetdrill-Queue-Wait is the model time between the last offer to the
// core and the dispatch: a request queued behind another waits until it
// finishes.
func TestQueueWaitHeader(t *testing.T) {
	const speed = 10
	us := newFake(t)
	us.mode.Store(modeBlock)
	h := newHarness(t, testScenario(t, "pools.use-h100-8b.max_batch=1", "policy.health.timeout=1h"),
		map[string][]string{"use-h100-8b": {us.srv.URL}}, func(c *Config) { c.Speed = speed })
	var wg sync.WaitGroup
	wg.Go(func() { h.mustPost(keyGlobal, chatBody(false, "first")) })
	<-us.started
	var resp *http.Response
	wg.Go(func() { resp, _ = h.mustPost(keyGlobal, chatBody(false, "second")) })
	eventually(t, "the second request to queue", func() bool { return h.metric("fleetdrill_queue_depth", nil) == 1 })
	queued := time.Now()
	time.Sleep(50 * time.Millisecond) // let it wait: 0.5 s of model time
	us.Release()
	wg.Wait()
	waited := time.Since(queued)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	qw, err := strconv.ParseFloat(resp.Header.Get("X-Fleetdrill-Queue-Wait"), 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, qw, 0.5, "queue wait %gs (model), want >= 50ms × %d", qw, speed)
	assert.LessOrEqual(t, qw, waited.Seconds()*speed+0.5, "queue wait %gs (model)", qw)
}
