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
