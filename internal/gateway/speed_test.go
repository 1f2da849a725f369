package gateway

import (
	"context"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

func TestClock(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		speed   float64
		model   time.Duration // of a wall second after start
		wall10s time.Duration // wall time of 10 model seconds
	}{
		{1, time.Second, 10 * time.Second},
		{20, 20 * time.Second, 500 * time.Millisecond},
		{0.5, 500 * time.Millisecond, 20 * time.Second},
		{10_000, 10_000 * time.Second, time.Millisecond},
	} {
		c := clock{start: start, speed: tc.speed}
		assert.Equal(t, tc.model+time.Nanosecond, c.at(start.Add(time.Second)), "speed %g: at(start+1s)", tc.speed)
		assert.Equal(t, time.Nanosecond, c.at(start), "speed %g: at(start): never zero", tc.speed)
		assert.Equal(t, tc.wall10s, c.wall(10*time.Second), "speed %g: wall(10s)", tc.speed)
		assert.Equal(t, 10*time.Second, c.model(c.wall(10*time.Second)), "speed %g: model(wall(10s))", tc.speed)
	}
}

func TestNewSpeed(t *testing.T) {
	us := newFake(t)
	for _, tc := range []struct {
		speed float64
		ok    bool
	}{
		{0, true}, // 1
		{0.25, true},
		{1, true},
		{10_000, true},
		{-1, false},
		{10_000.5, false},
		{math.NaN(), false},
		{math.Inf(1), false},
	} {
		g, err := New(Config{Scenario: testScenario(t), Backends: map[string][]string{"use-h100-8b": {us.srv.URL}}, Speed: tc.speed})
		if !tc.ok {
			require.Error(t, err, "New(Speed %g)", tc.speed)
			assert.Contains(t, err.Error(), "speed", "New(Speed %g)", tc.speed)
			continue
		}
		require.NoError(t, err, "New(Speed %g)", tc.speed)
		g.Close()
	}
}

// Now runs at Speed model seconds per wall second.
func TestNowIsModelTime(t *testing.T) {
	us := newFake(t)
	const speed = 50
	before := time.Now()
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}}, func(c *Config) { c.Speed = speed })
	after := time.Now()
	for time.Since(after) < 20*time.Millisecond { // at least 20ms of wall time since the start
	}
	now := h.gw.Now()
	assert.GreaterOrEqual(t, now, speed*20*time.Millisecond, "Now after 20ms of wall time at speed %d", speed)
	assert.LessOrEqual(t, now, time.Duration(speed*float64(time.Since(before)))+time.Nanosecond)
}

// At speed 20, a dead backend probed every 5 s (model) with threshold 3 has
// its breaker opened by the third failed probe: 15 s of model time, 0.75 s
// of wall time.
func TestSpeedBreakerOpensInModelTime(t *testing.T) {
	us := newFake(t)
	us.unhealthy.Store(true)
	type event struct {
		at, wall time.Duration
		from, to sched.BreakerState
	}
	var mu sync.Mutex
	var events []event
	start := time.Now()
	obs := &Observer{Breaker: func(at time.Duration, replica int, pool string, from, to sched.BreakerState) {
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, 0, replica)
		assert.Equal(t, "use-h100-8b", pool)
		events = append(events, event{at, time.Since(start), from, to})
	}}
	newHarness(t, testScenario(t, "policy.health.probe_interval=5s", "policy.health.threshold=3", "policy.health.open_for=1h"),
		map[string][]string{"use-h100-8b": {us.srv.URL}}, func(c *Config) { c.Speed = 20; c.Observer = obs })
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) > 0
	}, 10*time.Second, 5*time.Millisecond, "breaker never opened")
	mu.Lock()
	e := events[0]
	mu.Unlock()
	assert.Equal(t, sched.Closed, e.from)
	assert.Equal(t, sched.Open, e.to)
	assert.GreaterOrEqual(t, e.at, 15*time.Second, "opened at model time %v, want after three probes 5s apart", e.at)
	assert.Less(t, e.at, 30*time.Second, "opened at model time %v", e.at)
	assert.GreaterOrEqual(t, e.wall, 750*time.Millisecond, "opened after %v of wall time, want >= 15s/20", e.wall)
	assert.Less(t, e.wall, 5*time.Second, "opened after %v of wall time: probes not compressed?", e.wall)
}

// The TTFT and end-to-end latencies are reported in model seconds.
func TestSpeedLatenciesInModelTime(t *testing.T) {
	const delay = 100 * time.Millisecond // wall time the backend takes
	for _, speed := range []float64{1, 20} {
		us := newFake(t)
		us.delay.Store(int64(delay))
		h := newHarness(t, testScenario(t, "policy.health.timeout=1h", "policy.health.probe_interval=1h"),
			map[string][]string{"use-h100-8b": {us.srv.URL}}, func(c *Config) { c.Speed = speed })
		resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		floor := speed * delay.Seconds()
		for _, name := range []string{"fleetdrill_gateway_ttft_seconds", "fleetdrill_gateway_e2e_seconds"} {
			got := h.histSum(name, nil)
			assert.GreaterOrEqual(t, got, floor, "speed %g: %s = %gs, want >= %gs (model time)", speed, name, got, floor)
			assert.Less(t, got, floor+speed*2, "speed %g: %s = %gs", speed, name, got)
		}
	}
}

// Durations from the scenario and the config are model time: a timer armed
// for d fires after d/Speed of wall time.
func TestSpeedDurationsAreModelTime(t *testing.T) {
	const speed = 100
	for _, tc := range []struct {
		name       string
		sets       []string
		prep       func(us *fake)
		queueTO    time.Duration
		block      bool // park one request first (max_batch 1)
		wantStatus int
		want       time.Duration // model time the request takes, at least
	}{
		{name: "class deadline", sets: []string{"classes.interactive.deadline=20s"},
			prep: func(us *fake) { us.mode.Store(modeBlock) }, queueTO: time.Hour,
			wantStatus: http.StatusGatewayTimeout, want: 20 * time.Second},
		{name: "queue timeout", sets: []string{"pools.use-h100-8b.max_batch=1"},
			prep: func(us *fake) { us.mode.Store(modeBlock) }, queueTO: 20 * time.Second, block: true,
			wantStatus: http.StatusServiceUnavailable, want: 20 * time.Second},
		{name: "upstream Retry-After", sets: []string{"policy.retries.max_attempts=2"},
			prep: func(us *fake) { us.throttleN.Store(1); us.retryHdr.Store("20") }, queueTO: time.Hour,
			wantStatus: http.StatusOK, want: 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us := newFake(t)
			tc.prep(us)
			sets := append([]string{"policy.health.timeout=1h", "policy.health.probe_interval=1h"}, tc.sets...)
			h := newHarness(t, testScenario(t, sets...), map[string][]string{"use-h100-8b": {us.srv.URL}},
				func(c *Config) { c.Speed = speed; withQueueTimeout(tc.queueTO)(c) })
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); wg.Wait() }()
			if tc.block {
				wg.Go(func() { _, _, _ = h.post(ctx, keyGlobal, chatBody(false, "x")) })
				<-us.started
			}
			t0 := time.Now()
			resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
			took := time.Since(t0)
			require.Equal(t, tc.wantStatus, resp.StatusCode)
			assert.GreaterOrEqual(t, took, tc.want/speed, "took %v of wall time, want >= %v/%d", took, tc.want, speed)
			assert.Less(t, took, tc.want/speed+3*time.Second, "took %v of wall time: not compressed?", took)
		})
	}
}

// Retry-After sent to clients is model seconds, as the upstream gave it.
func TestSpeedClientRetryAfterInModelSeconds(t *testing.T) {
	us := newFake(t)
	us.mode.Store(modeThrottle)
	us.retryHdr.Store("30")
	h := newHarness(t, testScenario(t, "policy.retries.max_attempts=1"), map[string][]string{"use-h100-8b": {us.srv.URL}},
		func(c *Config) { c.Speed = 100 })
	resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "30", resp.Header.Get("Retry-After"))
}
