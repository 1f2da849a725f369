package reqengine

import (
	"math"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// ShadowIDBase keeps shadow copies' IDs apart from the requests' (which
// count up from 0 in both drivers).
const ShadowIDBase = 1 << 62

// Canaries are a scenario's canary rollouts as a driver runs them. The
// routing (who goes to the candidate) is the core's and the schedule and
// triggers are sched.Rollouts'; Canaries adds what both drivers did
// around them: the rollouts' clock origin, applying decisions to the core,
// feeding them each attempt's end, and the shadow copies' lifecycle.
//
// A shadow copy is no client's request: the driver never answers it and
// never counts it in the request tallies, quotas or the lifecycle; its
// figures go to its canary's report only.
type Canaries struct {
	sc        *scenarios.Scenario
	ro        *sched.Rollouts
	origin    time.Duration // the rollouts' time 0 on the driver's clock
	started   bool
	sent      uint64 // copies built
	residency uint64 // copies dispatched outside their tenant's jurisdiction
}

// NewCanaries builds the rollouts of cfg's canaries (cfg is the core's
// configuration compiled from sc); nil when sc has none. Held (started
// false) until Start when hold is set; otherwise started at time 0.
func NewCanaries(sc *scenarios.Scenario, cfg *sched.Config, hold bool) *Canaries {
	ro := sched.NewRollouts(cfg)
	if ro == nil {
		return nil
	}
	return &Canaries{sc: sc, ro: ro, started: !hold}
}

// Start starts the rollouts' schedule with its origin at (the driver's
// clock): a canary's start and steps, and the times its report gives,
// count from there. It reports false when they had started already.
func (c *Canaries) Start(at time.Duration) bool {
	if c.started {
		return false
	}
	c.origin, c.started = at, true
	return true
}

// Started reports whether the schedule runs.
func (c *Canaries) Started() bool { return c.started }

// NextAt is when Evaluate next has something to do, on the driver's clock;
// false when nothing is due (not started, or no step left).
func (c *Canaries) NextAt() (time.Duration, bool) {
	if !c.started {
		return 0, false
	}
	next := c.ro.NextAt()
	if next == math.MaxInt64 {
		return 0, false
	}
	return c.origin + next, true
}

// Evaluate runs the rollouts' due evaluations at now and applies each
// decision's share to the core; the driver records and logs the decisions
// it returns, then dispatches (a share of 0 moves the canary's queued
// requests to the baseline).
func (c *Canaries) Evaluate(now time.Duration, core *sched.Core) []sched.RolloutDecision {
	if !c.started {
		return nil
	}
	ds := c.ro.Evaluate(now - c.origin)
	for _, d := range ds {
		core.SetCanaryShare(now, d.Canary, d.To)
	}
	return ds
}

// AttemptEnded tells the rollouts that an attempt of req ended at now on
// replica (-1: it waited for the canary's candidate in vain), answered
// (ok) or not. offered is when the attempt was offered to the core (a
// copy's: its arrival), since the wait for the route's replicas counts as
// it does against the class's SLO; first is when its first token came (a
// value before offered: none, or an earlier attempt's, and the time to
// first token is recorded as 0). met is whether the request met its
// class's objectives (MetSLO); false for a copy.
//
// A failed attempt on a canary is retried on the baseline (req.NoCanary):
// the canary costs the client latency, never its answer.
func (c *Canaries) AttemptEnded(now time.Duration, req *sched.Request, replica int, ok bool, offered, first time.Duration, met bool) {
	if !ok && !req.Shadow && req.Route > 0 {
		req.NoCanary = true
	}
	if !c.started {
		return
	}
	var ttft time.Duration
	if first >= offered {
		ttft = first - offered
	}
	c.ro.Observe(now-c.origin, req, replica, ok, ttft, now-offered, met)
}

// Mirror returns the shadow copy of orig, an original admitted for the
// first time at now, when the core sends one to a canary's candidate:
// the same model, tenant, class and lengths, its own ID, arrived now. The
// engine offers it to the core in the driver's record (EngineConfig.NewCopy).
// seq numbers the copy among those sent (an idempotency key).
func (c *Canaries) Mirror(now time.Duration, core *sched.Core, orig *sched.Request) (sh sched.Request, seq uint64, ok bool) {
	if !c.started {
		return sched.Request{}, 0, false
	}
	k, ok := core.Shadow(orig)
	if !ok {
		return sched.Request{}, 0, false
	}
	seq = c.sent
	c.sent++
	c.ro.ShadowSent(k)
	return sched.Request{ID: ShadowIDBase + seq, Tenant: orig.Tenant, Class: orig.Class,
		Model: orig.Model, Served: orig.Model, Input: orig.Input, Output: orig.Output, Arrived: now,
		Shadow: true, Route: k + 1}, seq, true
}

// ShadowDispatched records a copy dispatched to a replica of a region of
// jurisdiction ("": none): a copy served outside its tenant's
// jurisdiction is counted, as the residency check reports it.
func (c *Canaries) ShadowDispatched(sh *sched.Request, jurisdiction string) {
	if tj := c.sc.Tenants[sh.Tenant].Jurisdiction; tj != "" && jurisdiction != tj {
		c.residency++
	}
}

// ShadowEnded records a copy that did not run to its end: shed (refused,
// or dropped from its queue) or cancelled with its original or at the
// end. A copy that ran to its end is told with AttemptEnded instead.
func (c *Canaries) ShadowEnded(sh *sched.Request, cancelled bool) {
	c.ro.ShadowEnded(sh.Route-1, cancelled)
}

// CancelsWithPrimary reports whether copy sh ends when its original does
// (its canary's shadow.cancel_with_primary).
func (c *Canaries) CancelsWithPrimary(sh *sched.Request) bool {
	sp := c.sc.Canaries[sh.Route-1].Shadow
	return sp != nil && sp.CancelWithPrimary
}

// Rollouts are the controllers, for the canary reports.
func (c *Canaries) Rollouts() *sched.Rollouts { return c.ro }

// Residency is how many copies were dispatched outside their tenant's
// jurisdiction.
func (c *Canaries) Residency() uint64 { return c.residency }

// MetSLO reports whether a request that answered with these timings (from
// its arrival) and output tokens met every objective of slo: time to first
// token, end to end, and time per output token after the first (not
// judged for a one-token answer).
func MetSLO(slo scenarios.SLO, ttft, e2e time.Duration, output int) bool {
	tpotOK := slo.TPOT == 0 || output <= 1 || (e2e-ttft)/time.Duration(output-1) <= slo.TPOT.D()
	return (slo.TTFT == 0 || ttft <= slo.TTFT.D()) && (slo.E2E == 0 || e2e <= slo.E2E.D()) && tpotOK
}
