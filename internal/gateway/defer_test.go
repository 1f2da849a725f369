package gateway

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A deferrable class is deferred, not rejected, and offered again after the
// core's retry-after (sched.Lifecycle), until it is admitted, its deadline
// passes, or its client goes away. The trigger: the global tenant's token
// rate of 30 a minute. A request costs 21 tokens (5 estimated in, 16 out),
// so after the first the bucket holds 9 and the second must wait 24 s of
// model time for 21; the core defers it for 1 s at a time meanwhile. The
// speed leaves the second request 480 ms of wall time to arrive before the
// bucket refills (at 500 it had 48 ms, and a loaded CI machine missed it).
func TestDeferral(t *testing.T) {
	quota := []string{"tenants.global.tokens_per_minute=30", "policy.admission.retry_after=1s",
		"policy.admission.defer_for=1s", "policy.health.timeout=1h", "policy.health.probe_interval=1h"}
	for _, tc := range []struct {
		name          string
		sets          []string
		speed         float64
		clientTimeout time.Duration // 0: none

		wantStatus   int // 0: no answer (the client went away)
		wantOutcome  string
		wantReason   string
		wantDeferred bool
	}{
		{name: "served after deferrals", sets: []string{"classes.interactive.deferrable=true", "classes.interactive.deadline=1h"},
			speed: 50, wantStatus: http.StatusOK, wantOutcome: "completed", wantDeferred: true},
		{name: "deadline while deferred", sets: []string{"classes.interactive.deferrable=true", "classes.interactive.deadline=5s"},
			speed: 100, wantStatus: http.StatusGatewayTimeout, wantOutcome: "timed_out", wantDeferred: true},
		{name: "client gone while deferred", sets: []string{"classes.interactive.deferrable=true", "classes.interactive.deadline=1h"},
			speed: 1, clientTimeout: 100 * time.Millisecond, wantOutcome: "cancelled", wantDeferred: true},
		{name: "not deferrable: rejected", sets: []string{"classes.interactive.deadline=1h"},
			speed: 50, wantStatus: http.StatusTooManyRequests, wantOutcome: "rejected", wantReason: "tenant-token-rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us := newFake(t)
			h := newHarness(t, testScenario(t, append(quota, tc.sets...)...), map[string][]string{"use-h100-8b": {us.srv.URL}},
				func(c *Config) { c.Speed = tc.speed; withQueueTimeout(time.Hour)(c) })
			first, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
			require.Equal(t, http.StatusOK, first.StatusCode)
			require.Empty(t, first.Header.Get("X-Fleetdrill-Deferrals"))

			ctx := context.Background()
			if tc.clientTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.clientTimeout)
				defer cancel()
			}
			resp, _, err := h.post(ctx, keyGlobal, chatBody(false, "x"))
			deferrals := func() float64 {
				return h.metric("fleetdrill_gateway_deferrals_total", map[string]string{"tenant": "global", "class": "interactive", "reason": "tenant-token-rate"})
			}
			outcome := func() float64 {
				return h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": tc.wantOutcome})
			}
			if tc.wantStatus == 0 {
				require.Error(t, err, "the client gave up")
				eventually(t, "the cancelled outcome", func() bool { return outcome() == 1 })
				assert.GreaterOrEqual(t, deferrals(), 1.0)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantStatus, resp.StatusCode)
			assert.Equal(t, tc.wantOutcome, resp.Header.Get("X-Fleetdrill-Outcome"))
			assert.Equal(t, tc.wantReason, resp.Header.Get("X-Fleetdrill-Reason"))
			want := 1.0
			if tc.wantOutcome == "completed" {
				want = 2 // the first too
			}
			assert.Equal(t, want, outcome(), "requests_total{outcome=%s}", tc.wantOutcome)
			if !tc.wantDeferred {
				assert.Empty(t, resp.Header.Get("X-Fleetdrill-Deferrals"))
				assert.Zero(t, deferrals())
				return
			}
			n, err := strconv.Atoi(resp.Header.Get("X-Fleetdrill-Deferrals"))
			require.NoError(t, err, "X-Fleetdrill-Deferrals %q", resp.Header.Get("X-Fleetdrill-Deferrals"))
			// At least one deferral; at most one per model second of the
			// wait (or of the deadline).
			assert.GreaterOrEqual(t, n, 1)
			assert.LessOrEqual(t, n, 25)
			assert.Equal(t, float64(n), deferrals(), "the header and the metric agree")
			// Each offer to the core is an attempt (sched.Life.Offers): one per
			// deferral, and the last that was admitted.
			offers := n
			if tc.wantStatus == http.StatusOK {
				offers++
			}
			assert.Equal(t, strconv.Itoa(offers), resp.Header.Get("X-Fleetdrill-Attempts"))
		})
	}
}
