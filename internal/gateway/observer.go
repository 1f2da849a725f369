package gateway

import (
	"log/slog"
	"time"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Observer receives the gateway's decisions as they happen, stamped with the
// core's clock (model time since the gateway started, see [Gateway.Now]). A
// replica is named by its index, as in the X-Fleetdrill-Replica header (see
// [Gateway.ReplicaIndex]). Callbacks run on request and probe goroutines,
// some with the gateway's lock held: they must be quick and must not call
// the gateway. A nil field is not called.
type Observer struct {
	// Breaker is called on every circuit-breaker transition. An open
	// breaker goes half-open on its own timer, policy.health.open_for
	// after it opened (see twin/sched's health.go); its
	// trial is a health probe the gateway sends at once, not a user's
	// request, so a failed trial shows as open → half-open → open.
	Breaker func(at time.Duration, replica int, pool string, from, to sched.BreakerState)
	// Ejection is called when the core ejects a replica from routing as
	// a latency outlier (policy.health.outlier) and when it returns
	// (e.Returned). Breakers count failures only: an ejection is how a
	// replica that answers every request, slowly, is seen, so a harness
	// counts it as a detection (twin.Recorder.Ejection).
	Ejection func(at time.Duration, e sched.Ejection, pool string)
	// Attempt is called on every upstream attempt that failed: status 0
	// for a transport error, a timeout waiting for response headers
	// (policy.health.timeout) or a response broken midway, else the HTTP
	// status the upstream answered (429, 404, 503, other 5xx or 4xx). err
	// is true when the failure counts against the replica's breaker (0 and
	// 5xx), false when the upstream answered but refused (429 is quota, not
	// ill health; other 4xx are passed through). An attempt the client
	// cancelled is not reported.
	Attempt func(at time.Duration, replica int, pool string, status int, err bool)
	// Throttled is called when a provider's 429 on replica throttles its
	// pool anew (sched.Core.Throttled): the pool takes nothing for
	// retryAfter.
	Throttled func(at time.Duration, replica int, pool string, retryAfter time.Duration)
	// Dispatch is called on every dispatch of a request to a replica by
	// the core (a retry's again; a hedged duplicate's and a shadow copy's
	// not): a run's report counts them per pool, and those outside their
	// tenant's jurisdiction (tenant is its index in the scenario, arrived
	// when the request arrived, on the gateway's clock).
	Dispatch func(at time.Duration, replica, tenant int, arrived time.Duration)
	// Ladder is called when the degradation ladder engages or releases a
	// rung; change.Detail is the twin's timeline text for it.
	Ladder func(at time.Duration, change sched.LadderChange)
	// Canary is called on every decision of a canary's rollout (start,
	// step-up, promote, hold, resume, rollback), once the gateway has
	// applied its share. d.At is on the canaries' clock (see
	// Config.HoldCanaries), at on the gateway's, as every callback's.
	Canary func(at time.Duration, d sched.RolloutDecision)
	// Autoscale is called on every entry an autoscaled pool's scaler puts
	// on the timeline (scale, grant, refused, replica-ready). ev.At is on
	// the scalers' clock (see Config.HoldAutoscale), at on the gateway's.
	Autoscale func(at time.Duration, ev sched.ScalerEvent)
}

// View calls fn with the scheduler core and the core's clock, under the
// gateway's lock: for a console reading queues, breakers and routes. fn
// must only read (BreakerView, Explain, QueueLen, Inflight, Serves, Ready:
// never Breaker, which advances state) and return quickly: requests wait
// for the lock meanwhile.
func (g *Gateway) View(fn func(core *sched.Core, now time.Duration)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g.core, g.clk.now())
}

// reporter tells the log and the Observer what the core and the attempts
// say of the replicas' health: breaker transitions (as last reported, so
// each is told once) and failed attempts.
type reporter struct {
	// Read-only after New.
	replicas []replica
	log      *slog.Logger
	obs      Observer
	clk      clock

	breakers []sched.BreakerState // as last reported, per replica; guarded by the gateway's lock (Gateway.mu)
}

// throttled tells the core that replica r's provider answered 429 asking
// for retryAfter, and logs and reports it when it throttles the pool anew.
// Called with the gateway's lock held.
func (rp *reporter) throttled(core *sched.Core, now time.Duration, r int, retryAfter time.Duration) {
	if !core.Throttled(now, r, retryAfter) {
		return
	}
	rp.log.Info("throttled", "pool", rp.replicas[r].pool, "replica", r, "retry_after", retryAfter)
	if rp.obs.Throttled != nil {
		rp.obs.Throttled(now, r, rp.replicas[r].pool, retryAfter)
	}
}

// breaker logs and reports replica r's breaker when its state differs
// from the one last reported. Called with the gateway's lock held.
func (rp *reporter) breaker(now time.Duration, r int, to sched.BreakerState) {
	from := rp.breakers[r]
	if from == to {
		return
	}
	rp.breakers[r] = to
	rep := rp.replicas[r]
	rp.log.Info("breaker", "pool", rep.pool, "replica", r, "backend", rep.host, "from", from.String(), "to", to.String())
	if rp.obs.Breaker != nil {
		rp.obs.Breaker(now, r, rep.pool, from, to)
	}
}

// attemptFailed reports a failed upstream attempt to the observer. It
// reads nothing mutable: no lock.
func (rp *reporter) attemptFailed(r, status int, err bool) {
	if rp.obs.Attempt != nil {
		rp.obs.Attempt(rp.clk.now(), r, rp.replicas[r].pool, status, err)
	}
}
