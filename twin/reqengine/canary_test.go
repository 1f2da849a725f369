package reqengine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// fixture: one model on a baseline pool (us) and a candidate pool (us)
// behind canary "neo", whose rollout starts at 1m; an EU tenant and one
// without jurisdiction. share is the share of requests mirrored.
func fixture(t *testing.T, share float64, hold bool) (*Canaries, *sched.Core) {
	t.Helper()
	cfg := sched.Config{
		Tenants: []sched.Tenant{{Name: "any", Weight: 1}, {Name: "eu", Jurisdiction: "eu", Weight: 1}},
		Classes: []sched.Class{{Name: "interactive", Priority: 10}},
		Models:  []sched.Model{{Name: "m"}},
		Pools: []sched.Pool{
			{Name: "base", Jurisdiction: "us", PricePerHour: 4, Serves: []bool{true}, KVTokens: []int64{1e6}},
			{Name: "neo", Jurisdiction: "us", PricePerHour: 2, Serves: []bool{true}, KVTokens: []int64{1e6}},
		},
		Replicas: []sched.Replica{{Pool: 0, MaxBatch: 4}, {Pool: 1, MaxBatch: 4}},
		Policy:   "fifo", QueueLimit: 100, Strategy: "least-loaded", DeferFor: time.Minute,
		Canaries: []sched.CanaryRoute{{Name: "neo", Model: 0, Pools: []int{1}, Seed: 7, ShadowShare: share, ShadowSlots: 8,
			Rollout: sched.RolloutSpec{Start: time.Minute, Every: 10 * time.Second, Window: time.Minute, MinRequests: 1000,
				Steps: []sched.RolloutStep{{Share: 0.1, For: time.Minute}, {Share: 1}}}}},
	}
	core, err := sched.New(cfg)
	require.NoError(t, err)
	sc := &scenarios.Scenario{
		Tenants:  []scenarios.Tenant{{Name: "any"}, {Name: "eu", Jurisdiction: "eu"}},
		Canaries: []scenarios.Canary{{Name: "neo", Shadow: &scenarios.Shadow{CancelWithPrimary: true}}},
	}
	c := NewCanaries(sc, &cfg, hold)
	require.NotNil(t, c)
	return c, core
}

func TestNoCanariesNoEngine(t *testing.T) {
	require.Nil(t, NewCanaries(&scenarios.Scenario{}, &sched.Config{}, false))
}

// A failed attempt on the canary retries on the baseline, whether or not
// the schedule runs yet; a failed baseline attempt or copy does not touch
// the rule, nor does a canary attempt that answered.
func TestFailedCanaryAttemptRetriesOnBaseline(t *testing.T) {
	for _, hold := range []bool{false, true} {
		c, _ := fixture(t, 0, hold)
		for _, tc := range []struct {
			name     string
			req      sched.Request
			ok       bool
			noCanary bool
		}{
			{"failed on the canary", sched.Request{Route: 1}, false, true},
			{"answered on the canary", sched.Request{Route: 1}, true, false},
			{"failed on the baseline", sched.Request{Route: 0}, false, false},
			{"a failed copy", sched.Request{Route: 1, Shadow: true}, false, false},
		} {
			r := tc.req
			c.AttemptEnded(2*time.Minute, &r, 1, tc.ok, time.Minute, -1, false)
			require.Equal(t, tc.noCanary, r.NoCanary, "%s (held %v)", tc.name, hold)
		}
	}
}

// What an attempt's end tells its canary: time to first token and end to
// end from the attempt's offer (the wait for the route's replicas counts),
// 0 for a first token from before the offer (an earlier attempt's).
func TestAttemptEndedMeasuresFromTheOffer(t *testing.T) {
	c, _ := fixture(t, 0, false)
	r := sched.Request{Route: 1, Arrived: time.Second}
	c.AttemptEnded(5*time.Second, &r, 1, true, 2*time.Second, 2500*time.Millisecond, true)
	rep := c.Rollouts().Report(0)
	require.EqualValues(t, 1, rep.Canary.Succeeded)
	require.EqualValues(t, 1, rep.Canary.SLOMet)
	ttft, err := rep.Canary.TTFT.GetValueAtQuantile(0.5)
	require.NoError(t, err)
	require.InEpsilon(t, 0.5, ttft, 0.02, "first token 0.5 s after the offer")
	e2e, err := rep.Canary.E2E.GetValueAtQuantile(0.5)
	require.NoError(t, err)
	require.InEpsilon(t, 3.0, e2e, 0.02, "ended 3 s after the offer")

	r2 := sched.Request{Route: 1}
	c.AttemptEnded(9*time.Second, &r2, 1, true, 6*time.Second, 4*time.Second, false)
	rep = c.Rollouts().Report(0)
	require.EqualValues(t, 2, rep.Canary.Succeeded)
	low, err := rep.Canary.TTFT.GetValueAtQuantile(0)
	require.NoError(t, err)
	require.Zero(t, low, "a first token before the offer is not this attempt's")
}

// Held canaries do nothing until Start; from then on, their schedule
// counts from Start's origin on the driver's clock.
func TestHeldCanariesCountFromStart(t *testing.T) {
	c, core := fixture(t, 1, true)
	_, due := c.NextAt()
	require.False(t, due)
	require.Nil(t, c.Evaluate(time.Hour, core))
	_, _, ok := c.Mirror(0, core, &sched.Request{ID: 1})
	require.False(t, ok, "no copy before the canaries start")

	require.True(t, c.Start(10*time.Second))
	require.False(t, c.Start(20*time.Second), "a second start does nothing")
	at, due := c.NextAt()
	require.True(t, due)
	require.Equal(t, 70*time.Second, at, "the rollout's 1m start, from the origin at 10s")
	require.Empty(t, c.Evaluate(69*time.Second, core))
	ds := c.Evaluate(at, core)
	require.Len(t, ds, 1)
	require.Equal(t, sched.ActStart, ds[0].Action)
	require.Equal(t, time.Minute, ds[0].At, "decisions carry the rollouts' own clock")
	require.InDelta(t, 0.1, core.CanaryShare(0), 1e-9, "the decision's share is applied to the core")
}

// Copies get their own ID space, the original's model, tenant, class and
// lengths, and count as sent; a copy shed at once counts as shed.
func TestMirrorBuildsCopiesInTheirOwnIDSpace(t *testing.T) {
	c, core := fixture(t, 1, false)
	orig := sched.Request{ID: 3, Tenant: 0, Class: 0, Model: 0, Input: 100, Output: 20, Arrived: time.Second}
	require.NotEqual(t, sched.Rejected, core.Arrive(time.Second, &orig).Outcome)
	var ids []uint64
	for i := range 3 {
		sh, seq, ok := c.Mirror(2*time.Second, core, &orig)
		require.True(t, ok)
		require.EqualValues(t, i, seq)
		ids = append(ids, sh.ID)
		require.True(t, sh.Shadow)
		require.Equal(t, 1, sh.Route)
		require.Equal(t, sched.Request{ID: sh.ID, Tenant: 0, Model: 0, Served: 0, Input: 100, Output: 20,
			Arrived: 2 * time.Second, Shadow: true, Route: 1}, sh)
	}
	require.Equal(t, []uint64{ShadowIDBase, ShadowIDBase + 1, ShadowIDBase + 2}, ids)
	require.EqualValues(t, 3, c.Rollouts().Report(0).ShadowSent)

	c.ShadowEnded(&sched.Request{Route: 1, Shadow: true}, false)
	c.ShadowEnded(&sched.Request{Route: 1, Shadow: true}, true)
	rep := c.Rollouts().Report(0)
	require.EqualValues(t, 1, rep.ShadowShed)
	require.EqualValues(t, 1, rep.ShadowCancelled)
	require.True(t, c.CancelsWithPrimary(&sched.Request{Route: 1, Shadow: true}))
}

// A copy served outside its tenant's jurisdiction is counted; one of a
// tenant without jurisdiction never is.
func TestShadowResidency(t *testing.T) {
	c, _ := fixture(t, 1, false)
	c.ShadowDispatched(&sched.Request{Tenant: 1}, "us")
	c.ShadowDispatched(&sched.Request{Tenant: 1}, "eu")
	c.ShadowDispatched(&sched.Request{Tenant: 0}, "us")
	require.EqualValues(t, 1, c.Residency())
}

func TestMetSLO(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	d := func(n int) scenarios.Duration { return scenarios.Duration(ms(n)) }
	slo := scenarios.SLO{TTFT: d(500), TPOT: d(50), E2E: d(3000)}
	for _, tc := range []struct {
		name      string
		slo       scenarios.SLO
		ttft, e2e time.Duration
		output    int
		met       bool
	}{
		{"within all three", slo, ms(400), ms(2000), 33, true},
		{"first token late", slo, ms(501), ms(2000), 33, false},
		{"too long end to end", slo, ms(400), ms(3001), 20, false},
		{"tokens too slow", slo, ms(400), ms(2000), 20, false}, // 1600 ms / 19 = 84 ms
		{"one token: no time per token", slo, ms(400), ms(2900), 1, true},
		{"no objective", scenarios.SLO{}, ms(9e6), ms(9e6), 9, true},
	} {
		require.Equal(t, tc.met, MetSLO(tc.slo, tc.ttft, tc.e2e, tc.output), tc.name)
	}
}

// Held rollouts wait for StartCanaries; then their steps are the engine's
// wake-ups, counted from the origin the event gives, and each decision is
// in Ready.Rollouts with its share on the core.
func TestEngineEvaluatesCanaries(t *testing.T) {
	c, core := fixture(t, 0, true)
	e := NewEngine(core, sched.NewLifecycle(sched.RetryPolicy{}, false), nil, EngineConfig{Canaries: c})
	require.Equal(t, NoWake, e.WakeAt(), "held: nothing due")
	e.Step(5*time.Second, Event{Kind: StartCanaries, At: 5 * time.Second})
	at := e.WakeAt()
	require.Equal(t, 5*time.Second+time.Minute, at, "the rollout's start, from the origin")
	e.Step(at, Event{Kind: Tick})
	rd := drain(e)
	require.Len(t, rd.Rollouts, 1)
	require.InDelta(t, 0.1, rd.Rollouts[0].To, 1e-9)
	require.Greater(t, rd.WakeAt, at, "the next evaluation")
	e.Step(at, Event{Kind: StartCanaries, At: at})
	require.Equal(t, rd.WakeAt, e.WakeAt(), "a second start changes nothing")
}

// The engine mirrors a request admitted for the first time into the
// driver's record (NewCopy), starts the copy where the core dispatches
// it, ends it when the driver steps its attempt's end, and cancels a
// running copy with its original (the canary cancels with the primary):
// each end is in Ready.CopiesEnded, with how, and told to the rollout.
func TestEngineMirrorsAndEndsCopies(t *testing.T) {
	c, core := fixture(t, 1, false)
	var made []*Req
	e := NewEngine(core, sched.NewLifecycle(sched.RetryPolicy{}, false), nil, EngineConfig{Canaries: c,
		NewCopy: func(orig *Req, cp sched.Request, seq uint64) *Req {
			require.Equal(t, uint64(len(made)), seq)
			q := &Req{}
			made = append(made, q)
			return q
		}})
	arrive := func(now time.Duration, id uint64) (*Req, Ready) {
		q := &Req{Core: sched.Request{ID: id, Input: 10, Output: 10, Arrived: now}}
		e.Step(now, Event{Kind: Arrival, Req: q})
		return q, drain(e)
	}

	a, rd := arrive(time.Second, 1)
	require.Len(t, made, 1, "a copy of the admitted request")
	cp := made[0]
	require.True(t, cp.Core.Shadow)
	require.Len(t, rd.Starts, 2, "the original and its copy start")
	require.Equal(t, Running, cp.State())
	require.Equal(t, 1, core.Inflight(1), "the copy holds a slot on the candidate")
	e.Step(2*time.Second, Event{Kind: Answered, Req: cp, Replica: cp.Core.Replica, First: 1500 * time.Millisecond})
	rd = drain(e)
	require.Equal(t, []CopyEnd{{Req: cp, How: CopyCompleted}}, rd.CopiesEnded)
	require.Equal(t, Done, cp.State())
	require.Zero(t, core.Inflight(1), "the copy left the candidate")
	e.Step(3*time.Second, Event{Kind: Answered, Req: a, Replica: a.Core.Replica})
	require.Empty(t, drain(e).CopiesEnded, "an original whose copy ended ends alone")

	b, _ := arrive(4*time.Second, 2)
	require.Len(t, made, 2)
	bc := made[1]
	e.Step(5*time.Second, Event{Kind: Answered, Req: b, Replica: b.Core.Replica})
	rd = drain(e)
	require.Equal(t, []Cancel{{Req: bc, Leg: CopyLeg, Replica: 1}}, rd.Cancels, "the running copy is stopped")
	require.Equal(t, []CopyEnd{{Req: bc, How: CopyCancelled}}, rd.CopiesEnded)
	require.Zero(t, core.Inflight(1))
	rep := c.Rollouts().Report(0)
	require.EqualValues(t, 2, rep.ShadowSent)
	require.EqualValues(t, 1, rep.ShadowCancelled)
}
