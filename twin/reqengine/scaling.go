package reqengine

import (
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Autoscaling, as both drivers run it: each autoscaled pool's sched.Scaler
// (the HPA's rule, the provider's grants and refusals, provisioning and
// loading) and what its transitions do to the core — a provisioned replica
// is present but not routable, a loaded one routable once its instance
// answers, a released one takes no new work, a gone one is absent — and
// what the scaler measures and is offered. The engine runs the scalers at
// their due times (Tick) and hears of the instances through Step
// (InstanceUp, InstanceFailed); what they decide for the instances is in
// Ready.Scaling, their timeline entries in Ready.ScalerEvents. The
// driver's part is the instances themselves (the twin's engines; the
// gateway's containers), its timeline or log, and the acquisition faults
// on a pool (Acquirer: what the provider would answer is the world's).

// Acquirer is what a driver says of a pool's provider: the acquisition
// faults (stockout, quota-cap, slow-provisioning) on the pool now, in the
// order they were injected. The engine reads it when a scaler asks, as
// raft reads its Storage: a read of the world, not a decision.
type Acquirer interface {
	Acquisition() []faults.Spec
}

// ScaleKind is what Ready.Scaling asks of a replica's instance.
type ScaleKind uint8

const (
	// ScaleStart: the replica is granted; start its instance (its model
	// loads). Unless the pool's instances answer once started (Add's
	// instant), the driver steps InstanceUp when it answers, or
	// InstanceFailed.
	ScaleStart ScaleKind = iota + 1
	// ScaleRoutable: the replica serves from now; the core routes to it.
	ScaleRoutable
	// ScaleReleased: it takes no new work and drains.
	ScaleReleased
	// ScaleGone: it is handed back; its instance stops.
	ScaleGone
)

// ScaleAction is one of Ready.Scaling: Kind, for replica K of autoscaled
// pool Pool (the core's pool index), the core's replica Replica.
type ScaleAction struct {
	Kind    ScaleKind
	Pool    int
	K       int
	Replica int
}

// ScalerEvent is a scaler's decision or change for the timeline or the
// log (At on the scalers' clock: Scaling.Clock), of pool Pool.
type ScalerEvent struct {
	Pool int
	sched.ScalerEvent
}

// Scaling is a run's autoscaled pools.
type Scaling struct {
	Pools   []*ScaledPool
	sc      *scenarios.Scenario
	fixed   func(pool int) int // a fixed pool's replicas
	origin  time.Duration      // the scalers' clock's origin on the driver's
	started bool               // held until StartScaling, else from time 0
	stopped bool               // StopScaling: frozen
	// Set by the engine that runs them: where their decisions go, and
	// whether the run is quiet (nothing live, nothing to come).
	rd    *Ready
	quiet func() bool
}

// ScaledPool is one autoscaled pool: its Scaler and the core's replicas it
// scales. It is the Scaler's sched.ScalerEnv.
type ScaledPool struct {
	Scaler *sched.Scaler
	Pool   int   // the core's pool index
	Reps   []int // the pool's replicas, the core's indexes, in order
	acq    Acquirer
	s      *Scaling
	core   *sched.Core
	now    time.Duration // the driver's now, during a call
	// instant: an instance answers once started (the twin's; a gateway's
	// without a Provisioner).
	instant bool
	// Per replica: its instance answers (up), its model's load is over
	// and it waits for its instance (loaded).
	up, loaded []bool
}

// NewScaling returns the autoscaled pools of sc, with fixed giving a
// pool's replicas where it is not autoscaled (a quota-cap counts them
// against its provider's GPUs). Held, the scalers wait for the
// StartScaling event; otherwise they run from time 0.
func NewScaling(sc *scenarios.Scenario, fixed func(pool int) int, held bool) *Scaling {
	return &Scaling{sc: sc, fixed: fixed, started: !held, rd: &Ready{}, quiet: func() bool { return false }}
}

// Add adds autoscaled pool pool (the core's index), its replicas reps (the
// first `serving` of them up at the start), scaled by s, on core; acq says
// which acquisition faults are on the pool, and instant whether an
// instance answers once started.
func (x *Scaling) Add(core *sched.Core, pool int, reps []int, serving int, s *sched.Scaler, acq Acquirer, instant bool) *ScaledPool {
	p := &ScaledPool{Scaler: s, Pool: pool, Reps: reps, acq: acq, instant: instant, s: x, core: core,
		up: make([]bool, len(reps)), loaded: make([]bool, len(reps))}
	for k := range min(serving, len(reps)) {
		p.up[k] = true
	}
	x.Pools = append(x.Pools, p)
	return p
}

// start starts held scalers with their clock's origin on the driver's
// clock: their syncs, and the times their reports give, count from there.
// A second start does nothing.
func (x *Scaling) start(origin time.Duration) {
	if x.started {
		return
	}
	x.origin, x.started = origin, true
}

// Clock is the scalers' clock at now, the driver's.
func (x *Scaling) Clock(now time.Duration) time.Duration { return now - x.origin }

// NextAt is when a scaler is next due, on the driver's clock; ok is false
// when none is.
func (x *Scaling) NextAt() (at time.Duration, ok bool) {
	if !x.started || x.stopped {
		return 0, false
	}
	for _, p := range x.Pools {
		if n := p.Scaler.NextAt(); n >= 0 && (!ok || x.origin+n < at) {
			at, ok = x.origin+n, true
		}
	}
	return at, ok
}

// advance does what is due of every scaler at now (the driver's clock),
// in pool order.
func (x *Scaling) advance(now time.Duration) {
	if !x.started || x.stopped {
		return
	}
	for _, p := range x.Pools {
		p.advance(now)
	}
}

// PoolName is the name of the core's pool pi.
func (x *Scaling) PoolName(pi int) string { return x.sc.Pools[pi].Name }

// of is the autoscaled pool holding the core's replica ri, and its index
// there; nil when ri is in no autoscaled pool.
func (x *Scaling) of(ri int) (*ScaledPool, int) {
	for _, p := range x.Pools {
		for k, r := range p.Reps {
			if r == ri {
				return p, k
			}
		}
	}
	return nil, -1
}

// Held is what pool pi holds of its provider: its scaler's granted
// replicas, or a fixed pool's.
func (x *Scaling) Held(pi int) int {
	for _, p := range x.Pools {
		if p.Pool == pi {
			return p.Scaler.Held()
		}
	}
	return x.fixed(pi)
}

// advance does what is due of the pool's scaler at now (the driver's
// clock).
func (p *ScaledPool) advance(now time.Duration) {
	p.now = now
	p.Scaler.Advance(p.Now(), p)
}

// Now is the scalers' clock at the call in progress.
func (p *ScaledPool) Now() time.Duration { return p.s.Clock(p.now) }

// up: replica k's instance answers, at now; it serves if its model has
// loaded.
func (p *ScaledPool) instanceUp(now time.Duration, k int) {
	p.now = now
	p.up[k] = true
	if p.loaded[k] {
		p.serve(k)
	}
}

// instanceFailed: replica k's instance did not start, at now; it is
// handed back.
func (p *ScaledPool) instanceFailed(now time.Duration, k int) {
	p.now = now
	p.Scaler.Failed(p.Now(), k, p)
}

// IsUp says whether replica k's instance answers.
func (p *ScaledPool) IsUp(k int) bool { return p.up[k] }

// Measure implements sched.ScalerEnv.
func (p *ScaledPool) Measure() (busy float64, queued int, wait time.Duration) {
	return p.core.ScalerMeasure(p.now, p.Pool)
}

// Inflight implements sched.ScalerEnv.
func (p *ScaledPool) Inflight(k int) int { return p.core.Inflight(p.Reps[k]) }

// Quiet implements sched.ScalerEnv.
func (p *ScaledPool) Quiet() bool { return p.s.quiet() }

// Offer implements sched.ScalerEnv: the provider's answer under the
// acquisition faults on the pool, a quota-cap's free GPUs counted from
// what every pool of its provider holds.
func (p *ScaledPool) Offer() sched.Offer {
	o := sched.NoFaults
	for _, spec := range p.acq.Acquisition() {
		o = compile.OfferUnder(o, spec, func() int { return compile.FreeGPUs(p.s.sc, spec, p.s.Held) })
	}
	return o
}

// Provisioned implements sched.ScalerEnv: the replica is present, not
// routable, while its instance starts and its model loads.
func (p *ScaledPool) Provisioned(k int) {
	ri := p.Reps[k]
	p.core.SetReady(p.now, ri, false)
	p.core.SetPresent(p.now, ri, true)
	p.loaded[k] = false
	if !p.up[k] {
		p.act(ScaleStart, k)
		p.up[k] = p.instant
	}
}

// Loaded implements sched.ScalerEnv: the replica serves once its instance
// answers.
func (p *ScaledPool) Loaded(k int) {
	if !p.up[k] {
		p.loaded[k] = true
		return
	}
	p.serve(k)
}

// serve routes to replica k from now.
func (p *ScaledPool) serve(k int) {
	p.loaded[k] = false
	p.core.SetReady(p.now, p.Reps[k], true)
	p.Scaler.Serving(p.Now(), k, p)
	p.act(ScaleRoutable, k)
}

// Released implements sched.ScalerEnv.
func (p *ScaledPool) Released(k int) {
	p.core.SetPresent(p.now, p.Reps[k], false)
	p.act(ScaleReleased, k)
}

// Gone implements sched.ScalerEnv.
func (p *ScaledPool) Gone(k int) {
	p.up[k], p.loaded[k] = false, false
	p.core.SetPresent(p.now, p.Reps[k], false)
	p.act(ScaleGone, k)
}

// Event implements sched.ScalerEnv.
func (p *ScaledPool) Event(ev sched.ScalerEvent) {
	p.s.rd.ScalerEvents = append(p.s.rd.ScalerEvents, ScalerEvent{Pool: p.Pool, ScalerEvent: ev})
}

// act puts what the scaler decided for replica k's instance in Ready.
func (p *ScaledPool) act(kind ScaleKind, k int) {
	p.s.rd.Scaling = append(p.s.rd.Scaling, ScaleAction{Kind: kind, Pool: p.Pool, K: k, Replica: p.Reps[k]})
}
