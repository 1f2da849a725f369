package sched

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fixture: two models (big falls back to small), pools in us and eu, two
// replicas each with a batch of 2.
func fixture(mod func(*Config)) *Core {
	cfg := Config{
		Tenants: []Tenant{{Name: "any", Weight: 1}, {Name: "eu", Jurisdiction: "eu", Weight: 1}},
		Classes: []Class{{Name: "interactive", Priority: 10}, {Name: "batch", Priority: 1, Deferrable: true}},
		Models:  []Model{{Name: "small"}, {Name: "big", Fallbacks: []int{0}}},
		Pools: []Pool{
			{Name: "us", Jurisdiction: "us", PricePerHour: 4, Serves: []bool{true, true}, KVTokens: []int64{1e6, 1e6}},
			{Name: "eu", Jurisdiction: "eu", PricePerHour: 2, Serves: []bool{true, false}, KVTokens: []int64{1e6, 0}},
		},
		Replicas: []Replica{
			{Pool: 0, Model: 0, MaxBatch: 2}, {Pool: 0, Model: 1, MaxBatch: 2},
			{Pool: 1, Model: 0, MaxBatch: 2},
		},
		Policy: "fifo", QueueLimit: 2, Strategy: "least-loaded", DeferFor: time.Minute,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return c
}

var nextID uint64

func req(tenant, class, model int) *Request {
	nextID++
	return &Request{ID: nextID, Tenant: tenant, Class: class, Model: model, Input: 100, Output: 10}
}

func TestDispatchQueueAndRejectWhenFull(t *testing.T) {
	c := fixture(nil)
	// Model big has one replica of batch 2: two dispatch, two queue, the
	// fifth is refused.
	var reqs []*Request
	var got []Outcome
	for range 5 {
		r := req(0, 0, 1)
		reqs = append(reqs, r)
		got = append(got, c.Arrive(0, r).Outcome)
	}
	require.Equal(t, []Outcome{Dispatched, Dispatched, Queued, Queued, Rejected}, got)
	require.Equal(t, 2, c.QueueLen(1))

	require.Len(t, take(c).Dispatches, 2, "the two dispatched at once")

	// Finishing one dispatches the oldest queued request to the freed slot.
	c.Finish(time.Second, reqs[0])
	rd := take(c)
	require.Len(t, rd.Dispatches, 1)
	require.Equal(t, reqs[2], rd.Dispatches[0].Req)
	require.Equal(t, 1, rd.Dispatches[0].Replica)
	require.Empty(t, take(c).Dispatches, "Advance forgets what was taken")
}

func TestFallbackWhenQueueFull(t *testing.T) {
	c := fixture(func(cfg *Config) { cfg.Fallback = true })
	for range 4 {
		c.Arrive(0, req(0, 0, 1))
	}
	r := req(0, 0, 1)
	d := c.Arrive(0, r)
	require.Equal(t, Dispatched, d.Outcome)
	require.True(t, r.Fallback)
	require.Equal(t, 0, r.Served, "served by the fallback model")
}

func TestResidency(t *testing.T) {
	c := fixture(nil)
	// The eu tenant cannot use big at all: it is served only in us.
	d := c.Arrive(0, req(1, 0, 1))
	require.Equal(t, Rejected, d.Outcome)
	require.Equal(t, ReasonNoRoute, d.Reason)
	require.Equal(t, "2 pools skipped: 1 outside jurisdiction eu, 1 not serving big", d.Detail)

	// For small it goes to the eu pool only, even when us is idle.
	r := req(1, 0, 0)
	require.Equal(t, Dispatched, c.Arrive(0, r).Outcome)
	require.Equal(t, 2, r.Replica)
	r2, r3 := req(1, 0, 0), req(1, 0, 0)
	c.Arrive(0, r2)
	require.Equal(t, Queued, c.Arrive(0, r3).Outcome, "eu replica full: wait rather than leave eu")

	// A us replica freeing up must not take the eu-bound request.
	u := req(0, 0, 0)
	c.Arrive(0, u)
	take(c)
	c.Finish(time.Second, u)
	require.Empty(t, take(c).Dispatches)
	require.Equal(t, 1, c.QueueLen(0))
}

func TestIgnoreResidencyLeaks(t *testing.T) {
	c := fixture(func(cfg *Config) { cfg.IgnoreResidency = true })
	r := req(1, 0, 1)
	require.Equal(t, Dispatched, c.Arrive(0, r).Outcome)
	require.Equal(t, 1, r.Replica, "a deliberately broken policy routes eu traffic to us")
}

func TestLeastLoadedAndCheapest(t *testing.T) {
	c := fixture(nil)
	a, b := req(0, 0, 0), req(0, 0, 0)
	c.Arrive(0, a)
	c.Arrive(0, b)
	require.NotEqual(t, a.Replica, b.Replica, "least-loaded spreads")

	c = fixture(func(cfg *Config) { cfg.Strategy = "cheapest" })
	a, b = req(0, 0, 0), req(0, 0, 0)
	c.Arrive(0, a)
	c.Arrive(0, b)
	require.Equal(t, 2, a.Replica)
	require.Equal(t, 2, b.Replica, "cheapest fills the eu pool first")
}

func TestTenantConcurrencyAndCohortBorrowing(t *testing.T) {
	c := fixture(func(cfg *Config) {
		cfg.Tenants[0].MaxConcurrency = 1
		cfg.Tenants[1].MaxConcurrency = 1
		cfg.QueueLimit = 100
	})
	_, full := c.TenantFull(0, 0, 0)
	require.False(t, full, "no request in flight")
	require.Equal(t, Dispatched, c.Arrive(0, req(0, 0, 0)).Outcome)
	ra, full := c.TenantFull(0, 0, 0)
	require.True(t, full, "at its concurrency: TenantFull says so before the offer")
	_, full = c.TenantFull(0, 0, 1)
	require.False(t, full, "a deferrable class would wait, not be refused")
	d := c.Arrive(0, req(0, 0, 0))
	require.Equal(t, Rejected, d.Outcome)
	require.Equal(t, ReasonTenantConcurrency, d.Reason)
	require.Equal(t, d.RetryAfter, ra, "the same Retry-After as the offer's refusal")
	_, full = c.TenantFull(0, 1, 0)
	require.False(t, full, "another tenant is not full")

	// In a cohort, the idle member's slot can be borrowed...
	c = fixture(func(cfg *Config) {
		cfg.Tenants[0].MaxConcurrency, cfg.Tenants[0].Cohort = 1, "team"
		cfg.Tenants[1].MaxConcurrency, cfg.Tenants[1].Cohort = 1, "team"
		cfg.QueueLimit = 100
	})
	require.Equal(t, Dispatched, c.Arrive(0, req(0, 0, 0)).Outcome)
	_, full = c.TenantFull(0, 0, 0)
	require.False(t, full, "a cohort slot to borrow")
	require.Equal(t, Dispatched, c.Arrive(0, req(0, 0, 0)).Outcome, "borrowed from the idle member")
	_, full = c.TenantFull(0, 0, 0)
	require.True(t, full)
	require.Equal(t, Rejected, c.Arrive(0, req(0, 0, 0)).Outcome, "the cohort is at its summed quota")
	// ...and the lender reclaims: it is admitted while under its own quota.
	require.NotEqual(t, Rejected, c.Arrive(0, req(1, 0, 0)).Outcome)
}

func TestTenantTokenBucket(t *testing.T) {
	c := fixture(func(cfg *Config) {
		cfg.Tenants[0].TokensPerMinute = 220 // two requests of 110 tokens
		cfg.QueueLimit = 100
	})
	require.NotEqual(t, Rejected, c.Arrive(0, req(0, 0, 0)).Outcome)
	require.NotEqual(t, Rejected, c.Arrive(0, req(0, 0, 0)).Outcome)
	d := c.Arrive(0, req(0, 0, 0))
	require.Equal(t, ReasonTenantTokens, d.Reason)
	require.Equal(t, 30*time.Second, d.RetryAfter, "110 tokens at 220/min take 30s to refill")
	require.NotEqual(t, Rejected, c.Arrive(30*time.Second, req(0, 0, 0)).Outcome)
}

func TestDeferrableClassIsDeferred(t *testing.T) {
	c := fixture(nil)
	for range 4 {
		c.Arrive(0, req(0, 1, 1))
	}
	d := c.Arrive(0, req(0, 1, 1))
	require.Equal(t, Deferred, d.Outcome)
	require.Equal(t, ReasonQueueFull, d.Reason)
	require.GreaterOrEqual(t, d.RetryAfter, time.Minute)
}

func TestBlockedReplicaGetsNothingUntilItClears(t *testing.T) {
	c := fixture(func(cfg *Config) { cfg.QueueLimit = 10 })
	c.SetBlocked(0, 1, true)
	r := req(0, 0, 1)
	require.Equal(t, Queued, c.Arrive(0, r).Outcome)
	c.SetBlocked(time.Second, 1, false)
	rd := take(c)
	require.Len(t, rd.Dispatches, 1)
	require.Equal(t, r, rd.Dispatches[0].Req)
}

func TestProviderQuotaWakesCore(t *testing.T) {
	c := fixture(func(cfg *Config) {
		cfg.Pools[0].RequestsPerMinute = 1
		cfg.QueueLimit = 10
	})
	require.Equal(t, Dispatched, c.Arrive(0, req(0, 0, 1)).Outcome)
	require.Equal(t, Queued, c.Arrive(0, req(0, 0, 1)).Outcome, "quota spent: wait")
	at := take(c).WakeAt
	require.Equal(t, time.Minute, at)
	c.Tick(at)
	rd := take(c)
	require.Len(t, rd.Dispatches, 1)
	require.Zero(t, rd.WakeAt, "nothing waits on the quota any more")
}

func TestDeadlineInfeasibleRejectedAtArrival(t *testing.T) {
	c := fixture(func(cfg *Config) { cfg.DeadlineCheck = true; cfg.QueueLimit = 100 })
	// Teach the core a dispatch interval of about 10s for model big.
	var held []*Request
	for i := range 20 {
		now := time.Duration(i) * 10 * time.Second
		r := req(0, 0, 1)
		c.Arrive(now, r)
		held = append(held, r)
		if len(held) > 1 {
			c.Finish(now, held[0])
			held = held[1:]
		}
	}
	// Fill the replica and queue a few so the predicted wait is long.
	for range 5 {
		c.Arrive(200*time.Second, req(0, 0, 1))
	}
	r := req(0, 0, 1)
	r.Deadline = 201 * time.Second
	d := c.Arrive(200*time.Second, r)
	require.Equal(t, Rejected, d.Outcome)
	require.Equal(t, ReasonDeadline, d.Reason)
}

func TestFinishQueuedRequestRemovesIt(t *testing.T) {
	c := fixture(func(cfg *Config) { cfg.QueueLimit = 10 })
	for range 2 {
		c.Arrive(0, req(0, 0, 1))
	}
	r := req(0, 0, 1)
	require.Equal(t, Queued, c.Arrive(0, r).Outcome)
	c.Finish(time.Second, r) // its deadline expired while queued
	require.Zero(t, c.QueueLen(1))
	c.Finish(time.Second, r) // twice is a no-op
	require.Zero(t, c.QueueLen(1))
}

// TestFinishNeverOfferedIsANoOp: a request the core never took (the
// ladder refused it before its first offer, a cache answered it) names
// replica 0 and queue 0 by its zero value; finishing it must not free a
// slot of replica 0 that another request holds. (It did: replica 0 then
// took more than its batch, and the twin's routing parted from the
// gateway's after every shed.)
func TestFinishNeverOfferedIsANoOp(t *testing.T) {
	c := fixture(func(cfg *Config) { cfg.QueueLimit = 10 })
	for range 4 { // model small: replicas 0 and 2, a batch of 2 each
		require.Equal(t, Dispatched, c.Arrive(0, req(0, 0, 0)).Outcome)
	}
	take(c)
	queued := req(0, 0, 0)
	require.Equal(t, Queued, c.Arrive(0, queued).Outcome, "both replicas of model small are full")
	shed := req(0, 0, 0) // refused before it reached the core
	c.Finish(time.Second, shed)
	require.Empty(t, take(c).Dispatches, "no slot was freed")
	require.Equal(t, 1, c.QueueLen(0), "and the queue is untouched")
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(Config{Strategy: "random", QueueLimit: 1})
	require.ErrorContains(t, err, `routing strategy "random"`)
	_, err = New(Config{Strategy: "cheapest"})
	require.ErrorContains(t, err, "queue limit")
}

func TestRefusedRequestsCostNoTokens(t *testing.T) {
	// Only what is dispatched or queued is charged: deferrals for a full
	// queue must not drain the tenant's bucket.
	c := fixture(func(cfg *Config) { cfg.Tenants[0].TokensPerMinute = 1100 }) // ten requests' worth
	var got []Outcome
	for range 10 {
		got = append(got, c.Arrive(0, req(0, 1, 1)).Outcome)
	}
	require.Equal(t, []Outcome{Dispatched, Dispatched, Queued, Queued, Deferred, Deferred, Deferred, Deferred, Deferred, Deferred}, got)
	// Six tokens' worth of requests remain for an idle model.
	for range 2 {
		require.Equal(t, Dispatched, c.Arrive(0, req(0, 0, 0)).Outcome)
	}
}

func TestBreakerOpensOnFailuresAndRecoversThroughHalfOpen(t *testing.T) {
	c := fixture(func(cfg *Config) {
		cfg.Health = Health{Threshold: 2, OpenFor: 10 * time.Second}
		cfg.QueueLimit = 10
	})
	// Model big has one replica (1). Two failures open its breaker, and ask
	// for a wake-up when it may go half-open.
	c.Observe(time.Second, 1, false)
	require.Empty(t, take(c).Transitions)
	c.Observe(2*time.Second, 1, false)
	require.Equal(t, []Transition{{Replica: 1, From: Closed, To: Open, At: 2 * time.Second}}, take(c).Transitions)
	require.Equal(t, Queued, c.Arrive(3*time.Second, req(0, 0, 1)).Outcome, "no route while open")

	// A success while open is too early to trust.
	c.Observe(5*time.Second, 1, true)
	require.Empty(t, take(c).Transitions)
	require.Equal(t, Open, c.Breaker(5*time.Second, 1))

	// After OpenFor a probe succeeds: half-open, then closed, and the
	// queued request is dispatched.
	require.Equal(t, HalfOpen, c.Breaker(12*time.Second, 1))
	c.Observe(12*time.Second, 1, true)
	rd := take(c)
	require.Equal(t, []Transition{{Replica: 1, From: Open, To: HalfOpen, At: 12 * time.Second},
		{Replica: 1, From: HalfOpen, To: Closed, At: 12 * time.Second}}, rd.Transitions)
	require.Len(t, rd.Dispatches, 1, "closing the breaker dispatches the queued request")
}

// A half-open breaker's trial is the driver's probe: no request is routed
// to it until the probe answers; a success closes it and the queued
// requests go there, a failure opens it again.
func TestHalfOpenWaitsForItsProbe(t *testing.T) {
	c := fixture(func(cfg *Config) {
		cfg.Health = Health{Threshold: 1, OpenFor: time.Second}
		cfg.QueueLimit = 10
	})
	c.Observe(0, 1, false)
	require.Equal(t, HalfOpen, c.Breaker(2*time.Second, 1))
	c.Observe(2*time.Second, 1, false) // the probe failed: open again
	require.Equal(t, Open, c.Breaker(2*time.Second, 1))
	require.Equal(t, HalfOpen, c.Breaker(4*time.Second, 1))
	require.Equal(t, Queued, c.Arrive(4*time.Second, req(0, 0, 1)).Outcome, "no request is the trial")
	take(c)
	c.Observe(4*time.Second, 1, true) // the probe passed
	rd := take(c)
	require.Equal(t, Closed, c.Breaker(4*time.Second, 1))
	require.Len(t, rd.Dispatches, 1, "closed: the queued request goes")
}

func TestFallbackRespectsQualityFloor(t *testing.T) {
	c := fixture(func(cfg *Config) {
		cfg.Fallback = true
		cfg.Models[0].Quality, cfg.Models[1].Quality = 0.6, 0.9
		cfg.Classes[0].QualityFloor = 0.8
	})
	for range 4 {
		c.Arrive(0, req(0, 0, 1))
	}
	d := c.Arrive(0, req(0, 0, 1))
	require.Equal(t, Rejected, d.Outcome, "the small model is below the floor: no fallback")
	require.Equal(t, ReasonQueueFull, d.Reason)
}

// TooLarge says a no-route refusal is the request's size alone: some pool
// that serves its chain in its jurisdiction would take a smaller one.
func TestTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		mod                   func(*Config)
		tenant, model, output int
		wantLimit             int64
		wantOK                bool
	}{
		{name: "fits", tenant: 0, model: 0, output: 10},
		{name: "every pool too small", tenant: 0, model: 0, output: 2e6, wantLimit: 1e6, wantOK: true},
		{name: "the largest pool's limit", tenant: 0, model: 0, output: 3e6, wantLimit: 2e6, wantOK: true,
			mod: func(cfg *Config) { cfg.Pools[0].KVTokens[0] = 2e6 }},
		{name: "the pool in the jurisdiction too small, the other outside it", tenant: 1, model: 0, output: 2e6,
			wantLimit: 1e6, wantOK: true},
		{name: "residency: the only pool serving the model is outside", tenant: 1, model: 1, output: 2e6},
		{name: "residency, small enough", tenant: 1, model: 1, output: 10},
		{name: "a fallback in the jurisdiction would take a smaller one", tenant: 1, model: 1, output: 2e6,
			wantLimit: 1e6, wantOK: true, mod: func(cfg *Config) { cfg.Fallback = true }},
		{name: "a fallback below the quality floor does not count", tenant: 1, model: 1, output: 2e6,
			mod: func(cfg *Config) {
				cfg.Fallback = true
				cfg.Models[0].Quality, cfg.Models[1].Quality = 0.6, 0.9
				cfg.Classes[0].QualityFloor = 0.8
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fixture(tc.mod)
			r := req(tc.tenant, 0, tc.model)
			r.Output = tc.output
			limit, ok := c.TooLarge(r)
			require.Equal(t, tc.wantOK, ok, "TooLarge ok")
			require.Equal(t, tc.wantLimit, limit, "TooLarge limit")
			d := c.Arrive(0, r)
			if ok {
				require.Equal(t, ReasonNoRoute, d.Reason, "too large is a no-route refusal")
				require.Greater(t, int64(r.Input+r.Output), limit)
			}
		})
	}
}

// take returns a copy of what the core decided since the last Advance, and
// advances it.
func take(c *Core) Ready {
	rd := c.Ready()
	rd.Dispatches = slices.Clone(rd.Dispatches)
	rd.Transitions = slices.Clone(rd.Transitions)
	rd.Unroutable = slices.Clone(rd.Unroutable)
	rd.ShadowsShed = slices.Clone(rd.ShadowsShed)
	c.Advance()
	return rd
}

// TestReadyKeepsEveryDecisionUntilAdvance: outputs accumulate across calls.
// A breaker closing on a success dispatches a queued request, and the
// finishing request that succeeded frees a slot for the next one: both
// dispatches are in Ready, though they came from two calls (when each call
// reset the last one's dispatches, the first was lost: the core held the
// request as running and no driver started it).
func TestReadyKeepsEveryDecisionUntilAdvance(t *testing.T) {
	c := fixture(func(cfg *Config) {
		cfg.Health = Health{Threshold: 1, OpenFor: 10 * time.Second}
		cfg.QueueLimit = 10
	})
	r1 := req(0, 0, 1)
	require.Equal(t, Dispatched, c.Arrive(0, r1).Outcome)
	c.Observe(time.Second, 1, false) // a probe fails: open
	r2, r3 := req(0, 0, 1), req(0, 0, 1)
	require.Equal(t, Queued, c.Arrive(2*time.Second, r2).Outcome)
	require.Equal(t, Queued, c.Arrive(2*time.Second, r3).Outcome)
	rd := take(c)
	require.Len(t, rd.Dispatches, 1)
	require.Len(t, rd.Transitions, 1)

	c.Observe(12*time.Second, 1, true) // r1 answered after OpenFor: closed, r2 fills the free slot
	c.Finish(12*time.Second, r1)       // r1's slot goes to r3
	rd = take(c)
	require.Equal(t, []Transition{{Replica: 1, From: Open, To: HalfOpen, At: 11 * time.Second},
		{Replica: 1, From: HalfOpen, To: Closed, At: 12 * time.Second}}, rd.Transitions)
	require.Len(t, rd.Dispatches, 2)
	require.Equal(t, r2, rd.Dispatches[0].Req)
	require.Equal(t, r3, rd.Dispatches[1].Req)
	require.False(t, c.HasReady())
}

// An open breaker goes half-open on its own timer: opening it asks for a
// wake-up OpenFor later, and at that Tick the transition is reported (the
// driver probes the replica on it), with no probe or answer heard in
// between; the queued request waits for the probe's result.
func TestBreakerHalfOpensOnItsOwnTimer(t *testing.T) {
	c := fixture(func(cfg *Config) {
		cfg.QueueLimit = 10
		cfg.Health = Health{Threshold: 1, OpenFor: 10 * time.Second}
	})
	c.Observe(time.Second, 1, false)
	rd := take(c)
	require.Equal(t, []Transition{{Replica: 1, From: Closed, To: Open, At: time.Second}}, rd.Transitions)
	require.Equal(t, 11*time.Second, rd.WakeAt, "the breaker's timer")
	r := req(0, 0, 1)
	require.Equal(t, Queued, c.Arrive(2*time.Second, r).Outcome)
	take(c)
	c.Tick(11 * time.Second)
	rd = take(c)
	require.Equal(t, []Transition{{Replica: 1, From: Open, To: HalfOpen, At: 11 * time.Second}}, rd.Transitions)
	require.Empty(t, rd.Dispatches, "the probe is the trial, not the queued request")
	c.Observe(11*time.Second+50*time.Millisecond, 1, true)
	rd = take(c)
	require.Len(t, rd.Dispatches, 1)
	require.Equal(t, r, rd.Dispatches[0].Req)
}
