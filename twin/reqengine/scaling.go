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
// what the scaler measures and is offered. The driver's part is the
// instances (the twin's engines; the gateway's containers), its timeline
// or log, and which acquisition faults are on: ScalingWorld.

// ScalingWorld is a driver's side of one autoscaled pool.
type ScalingWorld interface {
	// Start: replica k's instance is granted and starts loading its
	// model. It reports whether the instance answers already (the twin's
	// do at once); else the driver calls ScaledPool.Up when it does, or
	// ScaledPool.Failed.
	Start(k int) (up bool)
	// Routable: replica k serves from now (the driver dispatches to it).
	Routable(k int)
	// Released: replica k takes no new work and drains. Gone: it is
	// handed back (its instance stops).
	Released(k int)
	Gone(k int)
	// Acquisition lists the acquisition faults (stockout, quota-cap,
	// slow-provisioning) on the pool now, in the order they were injected.
	Acquisition() []faults.Spec
	// Quiet says the run has nothing more to scale for.
	Quiet() bool
	// Event is a decision or change for the timeline or the log.
	Event(ev sched.ScalerEvent)
}

// Scaling is a run's autoscaled pools.
type Scaling struct {
	Pools  []*ScaledPool
	sc     *scenarios.Scenario
	fixed  func(pool int) int // a fixed pool's replicas
	origin time.Duration      // the scalers' clock's origin on the driver's
}

// ScaledPool is one autoscaled pool: its Scaler and the core's replicas it
// scales. It is the Scaler's sched.ScalerEnv.
type ScaledPool struct {
	Scaler *sched.Scaler
	Pool   int   // the core's pool index
	Reps   []int // the pool's replicas, the core's indexes, in order
	world  ScalingWorld
	s      *Scaling
	core   *sched.Core
	now    time.Duration // the driver's now, during a call
	// Per replica: its instance answers (up), its model's load is over
	// and it waits for its instance (loaded).
	up, loaded []bool
}

// NewScaling returns the autoscaled pools of sc (nil when none), with
// fixed giving a pool's replicas where it is not autoscaled (a quota-cap
// counts them against its provider's GPUs).
func NewScaling(sc *scenarios.Scenario, fixed func(pool int) int) *Scaling {
	return &Scaling{sc: sc, fixed: fixed}
}

// Add adds autoscaled pool pool (the core's index), its replicas reps (the
// first `serving` of them up at the start), scaled by s, on core, with w
// the driver's side.
func (x *Scaling) Add(core *sched.Core, pool int, reps []int, serving int, s *sched.Scaler, w ScalingWorld) *ScaledPool {
	p := &ScaledPool{Scaler: s, Pool: pool, Reps: reps, world: w, s: x, core: core,
		up: make([]bool, len(reps)), loaded: make([]bool, len(reps))}
	for k := range min(serving, len(reps)) {
		p.up[k] = true
	}
	x.Pools = append(x.Pools, p)
	return p
}

// Start sets the scalers' clock's origin on the driver's clock: their
// syncs, and the times their reports give, count from there.
func (x *Scaling) Start(origin time.Duration) { x.origin = origin }

// Clock is the scalers' clock at now, the driver's.
func (x *Scaling) Clock(now time.Duration) time.Duration { return now - x.origin }

// NextAt is when a scaler is next due, on the driver's clock; ok is false
// when none is.
func (x *Scaling) NextAt() (at time.Duration, ok bool) {
	for _, p := range x.Pools {
		if n := p.Scaler.NextAt(); n >= 0 && (!ok || x.origin+n < at) {
			at, ok = x.origin+n, true
		}
	}
	return at, ok
}

// Advance does what is due of every scaler at now (the driver's clock),
// in pool order.
func (x *Scaling) Advance(now time.Duration) {
	for _, p := range x.Pools {
		p.Advance(now)
	}
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

// Advance does what is due of the pool's scaler at now (the driver's
// clock).
func (p *ScaledPool) Advance(now time.Duration) {
	p.now = now
	p.Scaler.Advance(p.Now(), p)
}

// Now is the scalers' clock at the call in progress.
func (p *ScaledPool) Now() time.Duration { return p.s.Clock(p.now) }

// Up: replica k's instance answers, at now; it serves if its model has
// loaded.
func (p *ScaledPool) Up(now time.Duration, k int) {
	p.now = now
	p.up[k] = true
	if p.loaded[k] {
		p.serve(k)
	}
}

// Failed: replica k's instance did not start, at now; it is handed back.
func (p *ScaledPool) Failed(now time.Duration, k int) {
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
func (p *ScaledPool) Quiet() bool { return p.world.Quiet() }

// Offer implements sched.ScalerEnv: the provider's answer under the
// acquisition faults on the pool, a quota-cap's free GPUs counted from
// what every pool of its provider holds.
func (p *ScaledPool) Offer() sched.Offer {
	o := sched.NoFaults
	for _, spec := range p.world.Acquisition() {
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
		p.up[k] = p.world.Start(k)
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
	p.world.Routable(k)
}

// Released implements sched.ScalerEnv.
func (p *ScaledPool) Released(k int) {
	p.core.SetPresent(p.now, p.Reps[k], false)
	p.world.Released(k)
}

// Gone implements sched.ScalerEnv.
func (p *ScaledPool) Gone(k int) {
	p.up[k], p.loaded[k] = false, false
	p.core.SetPresent(p.now, p.Reps[k], false)
	p.world.Gone(k)
}

// Event implements sched.ScalerEnv.
func (p *ScaledPool) Event(ev sched.ScalerEvent) { p.world.Event(ev) }
