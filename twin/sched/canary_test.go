package sched

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// canaryFixture: model 0 served by a baseline pool "base" (us, 2 replicas
// of batch 4) and a candidate "neo" (us, 1 replica of batch 4), plus an
// eu pool; tenants any, eu-bound and us-bound; canary 0 moves model 0 to
// neo.
func canaryFixture(mod func(*Config)) *Core {
	cfg := Config{
		Tenants: []Tenant{{Name: "any", Weight: 1}, {Name: "eu", Jurisdiction: "eu", Weight: 1, MaxConcurrency: 1},
			{Name: "us", Jurisdiction: "us", Weight: 1, MaxConcurrency: 1}},
		Classes: []Class{{Name: "interactive", Priority: 10}, {Name: "batch", Priority: 1}},
		Models:  []Model{{Name: "m"}},
		Pools: []Pool{
			{Name: "base", Jurisdiction: "us", PricePerHour: 4, Serves: []bool{true}, KVTokens: []int64{1e6}},
			{Name: "neo", Jurisdiction: "us", PricePerHour: 2, Serves: []bool{true}, KVTokens: []int64{1e6}},
			{Name: "eu", Jurisdiction: "eu", PricePerHour: 4, Serves: []bool{true}, KVTokens: []int64{1e6}},
		},
		Replicas: []Replica{{Pool: 0, MaxBatch: 4}, {Pool: 0, MaxBatch: 4}, {Pool: 1, MaxBatch: 4}, {Pool: 2, MaxBatch: 4}},
		Policy:   "fifo", QueueLimit: 100, Strategy: "least-loaded", DeferFor: time.Minute,
		Canaries: []CanaryRoute{{Name: "neo", Model: 0, Pools: []int{1}, Seed: 7}},
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

func poolOf(c *Core, r *Request) int {
	if r.Replica < 0 {
		return -1
	}
	return c.cfg.Replicas[r.Replica].Pool
}

func TestCandidateIsReachableOnlyThroughItsCanary(t *testing.T) {
	c := canaryFixture(nil)
	// Share 0: the baseline takes everything, and waits for room rather
	// than spill onto the idle candidate.
	var on []int
	for range 14 { // the baseline (us and eu) has 12 slots
		r := req(0, 0, 0)
		c.Arrive(0, r)
		on = append(on, poolOf(c, r))
		require.Zero(t, r.Route)
	}
	require.NotContains(t, on, 1, "nothing reached the candidate at share 0")
	require.Equal(t, 0, c.Inflight(2))
	require.Positive(t, c.QueueLen(0), "the baseline's overflow queued for the baseline")
}

func TestCanaryShareIsASeededDrawPerRequest(t *testing.T) {
	c := canaryFixture(func(cfg *Config) { cfg.QueueLimit = 1 << 20 })
	c.SetCanaryShare(0, 0, 0.05)
	const n = 20000
	canary := 0
	routes := map[uint64]int{}
	for i := range n {
		r := &Request{ID: uint64(i + 1), Tenant: 0, Model: 0, Input: 10, Output: 10}
		c.Arrive(0, r)
		routes[r.ID] = r.Route
		if r.Route == 1 {
			canary++
		}
		c.Finish(0, r)
		take(c)
	}
	// Binomial(n, 0.05): mean 1000, sd 30.8; five sd either side.
	require.InDelta(t, n*0.05, float64(canary), 5*math.Sqrt(n*0.05*0.95))
	// The same request (a retry) draws the same route.
	for _, id := range []uint64{1, 2, 3, 500, 19999} {
		r := &Request{ID: id, Tenant: 0, Model: 0, Input: 10, Output: 10}
		c.Arrive(0, r)
		require.Equal(t, routes[id], r.Route, "request %d", id)
		c.Finish(0, r)
	}
}

func TestIneligibleTrafficStaysOnTheBaseline(t *testing.T) {
	c := canaryFixture(func(cfg *Config) {
		cfg.Canaries[0].Classes = []bool{true, false} // interactive only
	})
	c.SetCanaryShare(0, 0, 1)
	cases := []struct {
		name          string
		tenant, class int
		want          int
	}{
		{"eligible", 0, 0, 1},
		{"us-bound, candidate in us", 2, 0, 1},
		{"other class", 0, 1, 0},
		{"eu-bound: no candidate in eu", 1, 0, 0},
	}
	for _, tc := range cases {
		r := req(tc.tenant, tc.class, 0)
		c.Arrive(time.Second, r)
		require.Equal(t, tc.want, r.Route, tc.name)
		if tc.want == 1 {
			require.Equal(t, 1, poolOf(c, r), tc.name)
		} else {
			require.NotEqual(t, 1, poolOf(c, r), tc.name)
		}
		c.Finish(time.Second, r)
		take(c)
	}
}

func TestRetryAfterACanaryFailureGoesToTheBaseline(t *testing.T) {
	c := canaryFixture(nil)
	c.SetCanaryShare(0, 0, 1)
	r := req(0, 0, 0)
	c.Arrive(0, r)
	require.Equal(t, 1, poolOf(c, r))
	c.Finish(time.Second, r)
	r.NoCanary = true
	c.Arrive(2*time.Second, r)
	require.Zero(t, r.Route)
	require.Equal(t, 0, poolOf(c, r))
}

func TestRollbackMovesQueuedCanaryRequestsToTheBaseline(t *testing.T) {
	c := canaryFixture(nil)
	c.SetCanaryShare(0, 0, 1)
	for range 6 { // the candidate has 4 slots: 2 queue for it
		require.NotEqual(t, Rejected, c.Arrive(0, req(0, 0, 0)).Outcome)
	}
	take(c)
	require.Equal(t, 2, c.QueueLen(0))
	c.SetCanaryShare(time.Second, 0, 0)
	rd := take(c)
	require.Len(t, rd.Dispatches, 2, "the baseline had room: both dispatched at once")
	for _, d := range rd.Dispatches {
		require.Zero(t, d.Req.Route)
		require.Equal(t, 0, c.cfg.Replicas[d.Replica].Pool)
	}
	require.Zero(t, c.QueueLen(0))
	// What was running on the candidate finishes there.
	require.Equal(t, 4, c.Inflight(2))
}

func TestShadowCopiesAreBoundedAndFirstShed(t *testing.T) {
	c := canaryFixture(func(cfg *Config) {
		cfg.Canaries[0].ShadowShare = 1
		cfg.Canaries[0].ShadowSlots = 2
	})
	orig := req(1, 0, 0) // eu-bound: never mirrored to a us candidate
	_, ok := c.Shadow(orig)
	require.False(t, ok, "residency: no copy for a tenant the candidate may not serve")

	orig = req(1, 0, 0)
	orig.Tenant = 0
	k, ok := c.Shadow(orig)
	require.True(t, ok)
	require.Zero(t, k)

	// A copy where no candidate may serve it is refused, not queued.
	eu := &Request{ID: 1 << 62, Tenant: 1, Model: 0, Input: 10, Output: 10, Shadow: true, Route: 1}
	require.Equal(t, Rejected, c.Arrive(0, eu).Outcome)

	// Copies take at most two of the candidate's four slots, queue behind a
	// limit of two, and are refused beyond it; none holds a tenant slot
	// (tenant us has a concurrency of 1).
	var outs []Outcome
	var copies []*Request
	for range 5 {
		sh := &Request{ID: 1<<62 + nextID, Tenant: 2, Model: 0, Input: 10, Output: 10, Shadow: true, Route: 1}
		nextID++
		outs = append(outs, c.Arrive(0, sh).Outcome)
		copies = append(copies, sh)
	}
	require.Equal(t, []Outcome{Dispatched, Dispatched, Queued, Queued, Rejected}, outs)
	for _, sh := range copies[:2] {
		require.Equal(t, 1, poolOf(c, sh))
	}
	require.Equal(t, 2, c.ShadowsRunning(0))
	require.Zero(t, c.QueueLen(0), "copies are not the model's queue")
	take(c)

	// A canary request that must wait sheds the queued copies.
	c.SetCanaryShare(0, 0, 1)
	for range 3 {
		c.Arrive(0, req(0, 0, 0)) // two fill the candidate, the third waits
	}
	rd := take(c)
	require.ElementsMatch(t, copies[2:4], rd.ShadowsShed)

	// Finishing a copy frees its slot for the waiting canary request, not
	// for another copy.
	c.Finish(time.Second, copies[0])
	rd = take(c)
	require.Len(t, rd.Dispatches, 1)
	require.False(t, rd.Dispatches[0].Req.Shadow)
	require.Equal(t, 1, c.ShadowsRunning(0))
}

// Residency holds for every canary and shadow request: across random
// fleets, tenants and shares, no request or copy lands on a pool outside
// its tenant's jurisdiction.
func TestCanaryResidencyProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	jurs := []string{"eu", "us", "apac"}
	for trial := range 200 {
		var pools []Pool
		var replicas []Replica
		for p := range 2 + rng.IntN(4) {
			pools = append(pools, Pool{Name: "p", Jurisdiction: jurs[rng.IntN(3)], Serves: []bool{true}, KVTokens: []int64{1e6}})
			for range 1 + rng.IntN(2) {
				replicas = append(replicas, Replica{Pool: p, MaxBatch: 1 + rng.IntN(3)})
			}
		}
		cand := []int{len(pools) - 1}
		tenants := []Tenant{{Name: "any", Weight: 1}}
		for _, j := range jurs {
			tenants = append(tenants, Tenant{Name: j, Jurisdiction: j, Weight: 1})
		}
		cfg := Config{Tenants: tenants, Classes: []Class{{Name: "c"}}, Models: []Model{{Name: "m"}}, Pools: pools,
			Replicas: replicas, Policy: "fifo", QueueLimit: 1000, Strategy: "least-loaded",
			Canaries: []CanaryRoute{{Name: "x", Model: 0, Pools: cand, Seed: uint64(trial), ShadowShare: 0.5, ShadowSlots: 2}}}
		c, err := New(cfg)
		require.NoError(t, err)
		c.SetCanaryShare(0, 0, rng.Float64())
		var live []*Request
		check := func(rd Ready) {
			for _, d := range rd.Dispatches {
				tj := tenants[d.Req.Tenant].Jurisdiction
				pj := pools[replicas[d.Replica].Pool].Jurisdiction
				require.True(t, tj == "" || tj == pj, "trial %d: tenant %q served in %q (shadow %v)", trial, tj, pj, d.Req.Shadow)
				require.Equal(t, d.Req.Route > 0 && d.Req.Model == 0 && !d.Req.Fallback, replicas[d.Replica].Pool == cand[0],
					"trial %d: a candidate pool serves its canary only", trial)
			}
		}
		for i := range 60 {
			now := time.Duration(i) * time.Second
			r := &Request{ID: uint64(i + 1), Tenant: rng.IntN(len(tenants)), Model: 0, Input: 10, Output: 10}
			if c.Arrive(now, r).Outcome != Rejected {
				live = append(live, r)
				if _, ok := c.Shadow(r); ok {
					sh := &Request{ID: 1<<62 + uint64(i), Tenant: r.Tenant, Model: 0, Input: 10, Output: 10, Shadow: true, Route: 1}
					if c.Arrive(now, sh).Outcome != Rejected {
						live = append(live, sh)
					}
				}
			}
			check(take(c))
			if len(live) > 0 && rng.IntN(2) == 0 {
				j := rng.IntN(len(live))
				c.Finish(now, live[j])
				live = append(live[:j], live[j+1:]...)
				check(take(c))
			}
			if rng.IntN(20) == 0 {
				c.SetCanaryShare(now, 0, rng.Float64()*float64(rng.IntN(2)))
				check(take(c))
			}
		}
	}
}

func TestConfigRefusesAPoolInTwoCanaries(t *testing.T) {
	cfg := Config{Models: []Model{{Name: "m"}}, Pools: []Pool{{Name: "a", Serves: []bool{true}, KVTokens: []int64{1}}},
		Policy: "fifo", QueueLimit: 1, Strategy: "least-loaded",
		Canaries: []CanaryRoute{{Name: "x", Pools: []int{0}}, {Name: "y", Pools: []int{0}}}}
	_, err := New(cfg)
	require.ErrorContains(t, err, "already a candidate")
}

// A canary request the candidate cannot take (every breaker open past its
// deadline, with deadline checks on) is served by the baseline, not
// refused.
func TestCanaryUnavailableFallsBackToTheBaseline(t *testing.T) {
	c := canaryFixture(func(cfg *Config) {
		cfg.DeadlineCheck = true
		cfg.Health = Health{Threshold: 1, OpenFor: time.Hour}
	})
	c.SetCanaryShare(0, 0, 1)
	c.Observe(0, 2, false) // the candidate's one replica: its breaker opens
	take(c)
	r := req(0, 0, 0)
	r.Deadline = time.Minute
	d := c.Arrive(time.Second, r)
	require.Equal(t, Dispatched, d.Outcome)
	require.Zero(t, r.Route)
	require.NotEqual(t, 1, poolOf(c, r))
}

// A canary request the candidate cannot take goes to its own model's
// baseline before any fallback model.
func TestCanaryFallsBackToTheBaselineBeforeAFallbackModel(t *testing.T) {
	c := canaryFixture(func(cfg *Config) {
		cfg.Fallback = true
		cfg.DeadlineCheck = true
		cfg.Health = Health{Threshold: 1, OpenFor: time.Hour}
		cfg.Models = []Model{{Name: "m", Fallbacks: []int{1}}, {Name: "small"}}
		for i := range cfg.Pools {
			cfg.Pools[i].Serves = []bool{true, false}
			cfg.Pools[i].KVTokens = []int64{1e6, 0}
		}
		cfg.Pools = append(cfg.Pools, Pool{Name: "small", Jurisdiction: "us", Serves: []bool{false, true}, KVTokens: []int64{0, 1e6}})
		cfg.Replicas = append(cfg.Replicas, Replica{Pool: 3, Model: 1, MaxBatch: 4})
	})
	c.SetCanaryShare(0, 0, 1)
	c.Observe(0, 2, false)
	take(c)
	r := req(0, 0, 0)
	r.Deadline = time.Minute
	require.Equal(t, Dispatched, c.Arrive(time.Second, r).Outcome)
	require.False(t, r.Fallback, "served by its own model")
	require.Zero(t, r.Served)
	require.Zero(t, poolOf(c, r), "on the baseline")
}

// The window reads the whole window: at an evaluation on a bucket
// boundary, the attempts of the last Window, not 7/8 of it.
func TestRolloutWindowCoversTheWholeWindow(t *testing.T) {
	spec := baseSpec()
	spec.Window = 80 * time.Second
	_, ro := rolloutFixture(spec)
	for i := range 120 { // one attempt a second up to the evaluation at 2m
		ro.Observe(time.Duration(i)*time.Second, &Request{ID: uint64(i), Route: 1}, 2, true, time.Second, time.Second, true)
	}
	f := ro.cs[0].window(1, 120*time.Second)
	require.GreaterOrEqual(t, f.attempts, uint64(80))
	require.LessOrEqual(t, f.attempts, uint64(90), "at most a bucket more")
}
