package gateway

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Canaries and shadow traffic, live. What to do is the request engine's
// (reqengine.Canaries, which the twin drives too): the rollouts' clock and
// decisions, what an attempt's end tells them, the retry of a failed
// canary attempt on the baseline, the shadow copies' IDs and accounting.
// The gateway carries it out:
//
//   - evaluates the rollouts at their NextAt, in model time, on its canary
//     loop: each decision logged, counted, reported to the Observer;
//   - says when every attempt of an original ended (ok or failed, on which
//     replica, its first byte, whether it met its class's SLO);
//   - sends an original's shadow copy, once first admitted, when the
//     engine builds one: the same body, sent upstream while the core holds
//     it, its answer read and discarded. A copy is never answered to a client and never
//     counted in the request series, the tenant's quotas or the
//     lifecycle; its figures go to the canary's (Rollouts.Observe and
//     ShadowEnded) and to fleetdrill_shadow_requests_total. When the
//     canary's shadow cancels with its primary, the copy is cancelled
//     when the original ends.
//
// NB: a copy holds a goroutine only while the core holds it dispatched,
// and the core dispatches at most ShadowSlots copies per canary at once;
// a queued copy is a map entry, so copies never grow the gateway's
// goroutines beyond that bound, whatever the load.

// Outcomes of a shadow copy, each counted once when it ends.
const (
	shadowCompleted = "completed"
	shadowFailed    = "failed"
	shadowShed      = "shed"
	shadowCancelled = "cancelled"
)

// shadow is one copy in the core (queued or dispatched). Its fields are
// guarded by the gateway's mu, bar q and body, which are set before the
// copy is offered and then only read.
type shadow struct {
	k   int // the canary
	req sched.Request
	// dispatched is when the core dispatched it, on the gateway's clock
	// (model time) and on the wall's.
	dispatched     time.Duration
	dispatchedWall time.Time
	q              request // what call needs: path, body, stream, class, the key
	running        bool
	// cancelled: its original ended and its canary cancels copies with
	// their primary; stop ends a running copy's call.
	cancelled bool
	stop      context.CancelFunc
	ended     bool
}

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
	if !g.can.Start(at) {
		return
	}
	g.sched.kick()
}

// evaluateCanaries runs the rollouts' due evaluations and applies their
// decisions.
func (g *Gateway) evaluateCanaries() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	now := g.clk.now()
	for _, d := range g.can.Evaluate(now, g.core) {
		g.log.Info("canary", "canary", d.Name, "action", d.Action, "from", d.From, "to", d.To, "why", d.Why)
		g.metrics.canaryShare.WithLabelValues(d.Name).Set(d.To)
		g.metrics.canaryDecisions.WithLabelValues(d.Name, d.Action).Inc()
		if g.obs.Canary != nil {
			g.obs.Canary(now, d)
		}
	}
	// A share of 0 moves the canary's queued requests to the baseline,
	// which may dispatch them.
	g.deliver(now)
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
		first = c.req.Arrived + q.ttft // q.ttft counts from arrival
	}
	met := ok && reqengine.MetSLO(g.sc.Classes[c.req.Class].SLO, q.ttft, now-c.req.Arrived, c.req.Output)
	g.can.AttemptEnded(now, &c.req, rep, ok, c.offered, first, met)
}

// waitedInVain feeds the rollouts a canary request that timed out waiting
// for the candidate (replica -1): an expiry in the queue, to a rollout;
// nothing when its client went away (gone).
func (g *Gateway) waitedInVain(q *request, gone bool) {
	if gone || g.can == nil {
		return
	}
	g.mu.Lock()
	// Under the lock: a rollback moves a waiting request to the baseline.
	onCanary := q.c.req.Route > 0
	g.mu.Unlock()
	if onCanary {
		g.attemptEnded(q, -1, false)
	}
}

// cancelledAttempt feeds the rollouts an attempt whose request's context
// ended under it: a failure when its deadline passed (the twin's expiry
// of a running request), nothing when its client went away.
func (g *Gateway) cancelledAttempt(ctx context.Context, q *request, rep int) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		g.attemptEnded(q, rep, false)
	}
}

// mirror sends a copy of q, an original just admitted for the first time,
// to a canary's candidate when the core says so.
func (g *Gateway) mirror(q *request) {
	if g.can == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.probeCtx.Err() != nil {
		return
	}
	now := g.clk.now()
	cp, seq, ok := g.can.Mirror(now, g.core, &q.c.req)
	if !ok {
		return
	}
	sh := &shadow{k: cp.Route - 1, req: cp}
	// The same body, its own idempotency key: an upstream that
	// deduplicates must not answer the copy with the original's answer.
	sh.q = request{path: q.path, body: q.body, stream: q.stream, tenant: q.tenant, class: q.class, model: q.model,
		served: g.sc.Models[q.c.req.Model].Name}
	sh.q.c.life.Key = g.nonce + "-shadow-" + strconv.FormatUint(seq, 10)
	// Its ID is what the fault layer draws its fate from, as for any
	// attempt (sched.AttemptFate).
	sh.q.c.req = cp
	q.shadow = sh
	g.shadows[sh.req.ID] = sh
	if !g.can.OfferShadow(now, g.core, &sh.req) {
		g.letGoShadowLocked(sh, shadowShed) // shed at once: the engine knows
	}
	g.deliver(now)
}

// primaryDone ends q's copy with q when its canary cancels copies with
// their primary. Called once q has its answer.
func (g *Gateway) primaryDone(q *request) {
	if q.shadow == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	sh := q.shadow
	q.shadow = nil
	if sh.ended || !g.can.CancelsWithPrimary(&sh.req) {
		return
	}
	if !sh.running {
		now := g.clk.now()
		g.core.Finish(now, &sh.req) // out of its queue
		g.endShadowLocked(sh, shadowCancelled)
		g.deliver(now)
		return
	}
	sh.cancelled = true
	sh.stop() // its goroutine ends it
}

// startShadow sends a copy the core dispatched to replica rep. Called
// from deliver, with mu held.
func (g *Gateway) startShadow(sh *shadow, rep int) {
	if g.probeCtx == nil || g.probeCtx.Err() != nil {
		// Closing: the copy is not sent (nobody waits for it).
		g.endShadowLocked(sh, shadowCancelled)
		return
	}
	g.can.ShadowDispatched(&sh.req, g.jurisdiction(rep))
	sh.running = true
	ctx, stop := context.WithCancel(g.probeCtx)
	sh.stop = stop
	sh.dispatched, sh.dispatchedWall = g.clk.now(), time.Now()
	// Close cancels probeCtx with mu held, so no Add follows its Wait.
	g.shadowWG.Add(1)
	go func() {
		defer g.shadowWG.Done()
		defer stop()
		ok, first := g.sendShadow(ctx, sh, rep)
		g.shadowDone(sh, rep, ok, first)
	}()
}

// jurisdiction is replica rep's pool's region's jurisdiction ("": none).
func (g *Gateway) jurisdiction(rep int) string {
	for _, r := range g.sc.Regions {
		if r.Name == g.replicas[rep].region {
			return r.Jurisdiction
		}
	}
	return ""
}

// sendShadow sends a copy to replica rep and reads its answer to the end,
// discarding it: ok when it answered 2xx in full; first is when its first
// bytes came (zero: none). A copy waits no longer than its class's
// deadline.
func (g *Gateway) sendShadow(ctx context.Context, sh *shadow, rep int) (ok bool, first time.Time) {
	if d := g.sc.Classes[sh.req.Class].Deadline.D(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.clk.wall(d))
		defer cancel()
	}
	u := g.call(ctx, &sh.q, rep, sh.q.body, false)
	defer u.close()
	if !u.answered() {
		return false, time.Time{}
	}
	first = u.firstAt
	if u.eof {
		return u.resp.StatusCode < 300, first
	}
	// The rest, read and dropped; a backend silent for the health
	// timeout has died under the copy, as under an original.
	stall := time.AfterFunc(g.clk.wall(g.sc.Policy.Health.Timeout.D()), u.cancel)
	defer stall.Stop()
	buf := *u.bp
	for {
		_, err := u.resp.Body.Read(buf)
		if err == io.EOF {
			return u.resp.StatusCode < 300, first
		}
		if err != nil {
			return false, first
		}
		stall.Reset(g.clk.wall(g.sc.Policy.Health.Timeout.D()))
	}
}

// shadowDone ends a copy that was sent: its figures go to its canary
// unless it was cancelled (with its primary, or by Close).
func (g *Gateway) shadowDone(sh *shadow, rep int, ok bool, first time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clk.now()
	switch {
	case sh.cancelled || g.probeCtx.Err() != nil:
		g.endShadowLocked(sh, shadowCancelled)
	default:
		at := time.Duration(-1) // its first bytes, model time (none)
		if ok && !first.IsZero() {
			at = sh.dispatched + g.clk.model(first.Sub(sh.dispatchedWall))
		}
		g.can.AttemptEnded(now, &sh.req, rep, ok, sh.req.Arrived, at, false)
		outcome := shadowFailed
		if ok {
			outcome = shadowCompleted
		}
		g.endShadowLocked(sh, outcome)
	}
	g.core.Finish(now, &sh.req)
	if !g.closed {
		g.deliver(now)
	}
}

// endShadowLocked lets go of a copy that ended with outcome: a shed or
// cancelled one counts as such for its canary (a completed or failed one
// was observed). It does not tell the core. Called with mu held.
func (g *Gateway) endShadowLocked(sh *shadow, outcome string) {
	if sh.ended {
		return
	}
	switch outcome {
	case shadowShed:
		g.can.ShadowEnded(&sh.req, false)
	case shadowCancelled:
		g.can.ShadowEnded(&sh.req, true)
	}
	g.letGoShadowLocked(sh, outcome)
}

// letGoShadowLocked forgets a copy that ended with outcome, the request
// engine told. Called with mu held.
func (g *Gateway) letGoShadowLocked(sh *shadow, outcome string) {
	if sh.ended {
		return
	}
	sh.ended = true
	delete(g.shadows, sh.req.ID)
	g.metrics.shadows.WithLabelValues(g.sc.Canaries[sh.k].Name, outcome).Inc()
}

// deliverShadow sends a copy the core dispatched. Called from deliver
// with mu held; it reports whether d was a copy's.
func (g *Gateway) deliverShadow(d sched.Dispatch) bool {
	sh, ok := g.shadows[d.Req.ID]
	if !ok {
		return false
	}
	g.startShadow(sh, d.Replica)
	return true
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
