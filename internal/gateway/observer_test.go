package gateway

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

type attemptCall struct {
	at      time.Duration
	replica int
	pool    string
	status  int
	err     bool
}

type breakerCall struct {
	at       time.Duration
	replica  int
	pool     string
	from, to sched.BreakerState
}

// recorder is an Observer that records its calls.
type recorder struct {
	mu       sync.Mutex
	attempts []attemptCall
	breakers []breakerCall
}

func (r *recorder) observer() *Observer {
	return &Observer{
		Attempt: func(at time.Duration, replica int, pool string, status int, err bool) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.attempts = append(r.attempts, attemptCall{at, replica, pool, status, err})
		},
		Breaker: func(at time.Duration, replica int, pool string, from, to sched.BreakerState) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.breakers = append(r.breakers, breakerCall{at, replica, pool, from, to})
		},
	}
}

func (r *recorder) snapshot() ([]attemptCall, []breakerCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]attemptCall(nil), r.attempts...), append([]breakerCall(nil), r.breakers...)
}

func TestObserverAttempt(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // connection refused from now on
	for _, tc := range []struct {
		name       string
		mode       int32
		dead       bool
		wantStatus int // of the attempt
		wantErr    bool
		wantClient int
	}{
		{"5xx", modeFail, false, 500, true, http.StatusBadGateway},
		{"429", modeThrottle, false, 429, false, http.StatusTooManyRequests},
		{"404 passed through", modeNotFound, false, 404, false, http.StatusNotFound},
		{"unreachable", modeOK, true, 0, true, http.StatusBadGateway},
		{"ok", modeOK, false, -1, false, http.StatusOK}, // -1: no call
	} {
		t.Run(tc.name, func(t *testing.T) {
			us := newFake(t)
			us.mode.Store(tc.mode)
			url := us.srv.URL
			if tc.dead {
				url = deadURL
			}
			var rec recorder
			h := newHarness(t, testScenario(t, "policy.retries.max_attempts=1", "policy.health.probe_interval=1h"),
				map[string][]string{"use-h100-8b": {url}}, func(c *Config) { c.Observer = rec.observer() })
			resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
			require.Equal(t, tc.wantClient, resp.StatusCode)
			attempts, _ := rec.snapshot()
			if tc.wantStatus < 0 {
				assert.Empty(t, attempts)
				return
			}
			require.Len(t, attempts, 1)
			a := attempts[0]
			assert.Equal(t, attemptCall{at: a.at, replica: 0, pool: "use-h100-8b", status: tc.wantStatus, err: tc.wantErr}, a)
			assert.Positive(t, a.at)
			assert.LessOrEqual(t, a.at, h.gw.Now())
		})
	}
}

// Every breaker transition is reported, in order, each from the state the
// last one left: closed → open on a failed request at threshold 1, then
// open → half-open → closed as probes find the backend healthy.
func TestObserverBreakerTransitions(t *testing.T) {
	us := newFake(t)
	us.mode.Store(modeFail) // requests fail; probes pass
	var rec recorder
	h := newHarness(t, testScenario(t, "policy.retries.max_attempts=1"), map[string][]string{"use-h100-8b": {us.srv.URL}},
		func(c *Config) { c.Observer = rec.observer() })
	resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	_, brs := rec.snapshot()
	require.NotEmpty(t, brs)
	assert.Equal(t, breakerCall{at: brs[0].at, replica: 0, pool: "use-h100-8b", from: sched.Closed, to: sched.Open}, brs[0])

	require.Eventually(t, func() bool {
		_, brs := rec.snapshot()
		return brs[len(brs)-1].to == sched.Closed
	}, 5*time.Second, 5*time.Millisecond, "breaker never closed again")
	_, brs = rec.snapshot()
	var sawHalfOpen bool
	for i, b := range brs {
		if i > 0 {
			assert.Equal(t, brs[i-1].to, b.from, "transition %d does not start where %d ended: %v", i, i-1, brs)
			assert.GreaterOrEqual(t, b.at, brs[i-1].at, "transition %d earlier than %d", i, i-1)
		}
		assert.NotEqual(t, b.from, b.to, "transition %d to the same state", i)
		sawHalfOpen = sawHalfOpen || b.to == sched.HalfOpen
	}
	assert.True(t, sawHalfOpen, "open → half-open not reported: %v", brs)
}

// ReplicaIndex maps a pool's URL position to the index X-Fleetdrill-Replica
// and the Observer use: pools in scenario order, URLs in order.
func TestReplicaIndex(t *testing.T) {
	us0, us1, eu := newFake(t), newFake(t), newFake(t)
	var rec recorder
	h := newHarness(t, testScenario(t, "policy.retries.max_attempts=1", "policy.health.probe_interval=1h"),
		map[string][]string{"use-h100-8b": {us0.srv.URL, us1.srv.URL}, "euw-a100-8b": {eu.srv.URL}},
		func(c *Config) { c.Observer = rec.observer() })
	for _, tc := range []struct {
		pool string
		i    int
		want int
	}{
		{"use-h100-8b", 0, 0},
		{"use-h100-8b", 1, 1},
		{"euw-a100-8b", 0, 2}, // the scenario lists use-h100-8b first
		{"euw-a100-8b", 1, -1},
		{"use-h100-8b", -1, -1},
		{"nope", 0, -1},
	} {
		assert.Equal(t, tc.want, h.gw.ReplicaIndex(tc.pool, tc.i), "ReplicaIndex(%q, %d)", tc.pool, tc.i)
	}
	// An EU tenant is served in the EU: the header names the same index.
	resp, _ := h.mustPost(keyEU, chatBody(false, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, strconv.Itoa(h.gw.ReplicaIndex("euw-a100-8b", 0)), resp.Header.Get("X-Fleetdrill-Replica"))
	assert.Equal(t, "euw-a100-8b", resp.Header.Get("X-Fleetdrill-Pool"))
	// And the Observer names a failing replica by the same index.
	eu.mode.Store(modeFail)
	resp, _ = h.mustPost(keyEU, chatBody(false, "x"))
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	attempts, _ := rec.snapshot()
	require.Len(t, attempts, 1)
	assert.Equal(t, h.gw.ReplicaIndex("euw-a100-8b", 0), attempts[0].replica)
	assert.Equal(t, "euw-a100-8b", attempts[0].pool)
}

// A replica slower than policy.health.outlier.max_latency is ejected, and
// returns after base_ejection: both reach the Observer, the ejection the
// counter, and the gauge follows. The absolute bound and one sample judge
// the slow replica alone, whatever the fast one's latency, so the test
// needs no peers' median; the pool has two replicas since its last one is
// never ejected.
func TestObserverEjection(t *testing.T) {
	const pool = "use-h100-8b"
	for _, tc := range []struct {
		name    string
		base    time.Duration // base_ejection
		returns bool          // wait for the return
	}{
		{"stays out", time.Hour, false},
		{"returns", 200 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slow, fast := newFake(t), newFake(t)
			// The slow replica takes 1s, over three times the bound, so that the
			// fast one, even on a starved machine, stays under it: were
			// it ejected first, the pool could eject no other.
			slow.delay.Store(int64(time.Second))
			var (
				mu  sync.Mutex
				got []sched.Ejection
			)
			h := newHarness(t, testScenario(t, "policy.retries.max_attempts=1", "policy.health.outlier.min_samples=1",
				"policy.health.outlier.max_latency=300ms", "policy.health.outlier.base_ejection="+tc.base.String()),
				map[string][]string{pool: {slow.srv.URL, fast.srv.URL}},
				func(c *Config) {
					c.Observer = &Observer{Ejection: func(at time.Duration, e sched.Ejection, p string) {
						mu.Lock()
						defer mu.Unlock()
						assert.Equal(t, pool, p)
						assert.Equal(t, e.At, at)
						got = append(got, e)
					}}
				})
			ri := h.gw.ReplicaIndex(pool, 0)
			// of returns the slow replica's ejections (returned false) or
			// returns (true) reported so far.
			of := func(returned bool) []sched.Ejection {
				mu.Lock()
				defer mu.Unlock()
				var out []sched.Ejection
				for _, e := range got {
					if e.Replica == ri && e.Returned == returned {
						out = append(out, e)
					}
				}
				return out
			}
			labels := map[string]string{"pool": pool}
			assert.Zero(t, h.metric("fleetdrill_gateway_ejections_total", labels), "zeroed at start")
			// Requests until the slow replica has served one: routing
			// may pick either.
			eventually(t, "the slow replica ejected", func() bool {
				resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
				require.Equal(t, http.StatusOK, resp.StatusCode)
				return len(of(false)) > 0
			})
			e := of(false)[0]
			assert.Greater(t, e.Latency, 300*time.Millisecond)
			assert.Equal(t, e.At+tc.base, e.Until, "the first ejection lasts base_ejection")
			assert.Equal(t, 1.0, h.metric("fleetdrill_gateway_ejections_total", labels))
			if !tc.returns {
				assert.Equal(t, 1.0, h.metric("fleetdrill_gateway_ejected_replicas", labels))
				return
			}
			// The return comes from the core's wake-up, no request needed.
			eventually(t, "the slow replica returned", func() bool { return len(of(true)) > 0 })
			assert.GreaterOrEqual(t, of(true)[0].At, e.Until)
			assert.Zero(t, h.metric("fleetdrill_gateway_ejected_replicas", labels))
			assert.Equal(t, 1.0, h.metric("fleetdrill_gateway_ejections_total", labels), "a return is not counted")
		})
	}
}
