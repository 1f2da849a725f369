package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Canaries and shadow traffic, live. What to do is the request engine's
// (reqengine.Canaries, which the twin drives too): the rollouts' clock and
// decisions, what an attempt's end tells them, the retry of a failed
// canary attempt on the baseline, the shadow copies' IDs and accounting;
// the engine evaluates the rollouts at its wake-ups, mirrors an original
// admitted for the first time, ends each copy and cancels one with its
// original. The gateway carries it out:
//
//   - logs, counts and reports each decision (Ready.Rollouts: rolledOut);
//   - says when every attempt of an original ended (ok or failed, on which
//     replica, its first byte, whether it met its class's SLO);
//   - holds each copy the engine makes (shadow.go: EngineConfig.NewCopy)
//     and sends it while the core holds it dispatched: the same body, its
//     answer read and discarded, its end stepped back. A copy is never
//     answered to a client and never counted in the request series, the
//     tenant's quotas or the lifecycle; its figures go to the canary's and
//     to fleetdrill_shadow_requests_total (Ready.CopiesEnded, with how it
//     ended); a running copy the engine cancels with its primary is
//     stopped (Ready.Cancels).
//
// NB: a copy holds a goroutine only while the core holds it dispatched,
// and the core dispatches at most ShadowSlots copies per canary at once;
// a queued copy is a map entry, so copies never grow the gateway's
// goroutines beyond that bound, whatever the load.

// StartCanaries starts the canaries' schedule with its origin at, on the
// gateway's clock (Now): a canary's start and steps, and the times its
// report gives, count from there. Only with Config.HoldCanaries; a second
// call does nothing.
func (g *Gateway) StartCanaries(at time.Duration) {
	if g.can == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stepLocked(g.clk.now(), reqengine.Event{Kind: reqengine.StartCanaries, At: at})
}

// rolledOut logs, counts and reports a rollout's decision (the engine
// applied its share to the core).
func (g *Gateway) rolledOut(now time.Duration, d sched.RolloutDecision) {
	g.log.Info("canary", "canary", d.Name, "action", d.Action, "from", d.From, "to", d.To, "why", d.Why)
	g.metrics.canaryShare.WithLabelValues(d.Name).Set(d.To)
	g.metrics.canaryDecisions.WithLabelValues(d.Name, d.Action).Inc()
	if g.obs.Canary != nil {
		g.obs.Canary(now, d)
	}
}

// attemptEnded feeds the rollouts an attempt of q's original on replica
// rep that ended now: answered (ok) or not. A failed canary attempt's
// retry goes to the baseline.
func (g *Gateway) attemptEnded(q *request, rep int, ok bool) {
	if g.can == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clk.now()
	c := &q.c
	first := time.Duration(-1) // none
	if q.ttft > 0 {
		first = c.Core.Arrived + q.ttft // q.ttft counts from arrival
	}
	met := ok && reqengine.MetSLO(g.sc.Classes[c.Core.Class].SLO, q.ttft, now-c.Core.Arrived, c.Core.Output)
	g.can.AttemptEnded(now, &c.Core, rep, ok, c.Offered, first, met)
}

// cancelledAttempt feeds the rollouts an attempt whose request's context
// ended under it: a failure when its deadline passed (the twin's expiry
// of a running request), nothing when its client went away.
func (g *Gateway) cancelledAttempt(ctx context.Context, q *request, rep int) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		g.attemptEnded(q, rep, false)
	}
}

// CanaryInputs calls fn, under the gateway's lock, with what a canary
// report is built from (twin.CanaryReports): the rollouts, the core's
// configuration and the shadow copies served outside their tenant's
// jurisdiction. fn must only read and return quickly. It is not called
// without canaries.
func (g *Gateway) CanaryInputs(fn func(ro *sched.Rollouts, cfg *sched.Config, shadowResidency uint64)) {
	if g.can == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g.can.Rollouts(), &g.coreCfg, g.can.Residency())
}

// CanaryShare is canary name's share of eligible traffic now; false when
// the scenario has no such canary.
func (g *Gateway) CanaryShare(name string) (float64, bool) {
	for k, c := range g.sc.Canaries {
		if c.Name == name {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.core.CanaryShare(k), true
		}
	}
	return 0, false
}
