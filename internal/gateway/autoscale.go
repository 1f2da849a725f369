package gateway

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Autoscaling, live: each autoscaled pool's sched.Scaler (the twin's, the
// same code) runs on the gateway's clock. The pool's backends are its
// replicas up to max_replicas; those beyond `replicas` start absent, and
// the core routes to none of them until the scaler has one granted,
// provisioned (the Provisioner starts its instance: a container) and
// loaded (cold_start of model time, and the instance answering). The
// scaler draws its grants and delays from the stream the twin's draws
// from (compile.AcquisitionStream, seeded with Config.Seed), and asks the
// provider under the acquisition faults injected with
// InjectAcquisition: with the same measurements the live pool is granted,
// refused and served as the twin's is.

// Provisioner starts and stops the instances of autoscaled pools'
// replicas: replica k of pool is the pool's k-th backend.
type Provisioner interface {
	// Start starts the instance and returns once it answers (or fails).
	Start(ctx context.Context, pool string, k int) error
	// Stop stops it; it may be started again.
	Stop(ctx context.Context, pool string, k int) error
}

// gwScaler is one autoscaled pool's scaler and the gateway as its driver
// (sched.ScalerEnv). Its methods run with g.mu held.
type gwScaler struct {
	g    *Gateway
	pool string
	pi   int   // the core's pool index
	reps []int // the pool's replicas, the gateway's indexes
	s    *sched.Scaler
	// Per replica of the pool: its instance answers (up), its model's
	// load is over but the instance did not answer yet (loaded), and a
	// generation bumped when it is handed back (a late Start is stale).
	up, loaded []bool
	gen        []int
	// started: a Start is queued or done since the last Stop; op is the
	// done channel of the replica's last queued Start or Stop: each waits
	// for the one before, so a replica's instance is never started and
	// stopped at once.
	started []bool
	op      []chan struct{}
	// acq is the acquisition faults injected on the pool.
	acq map[int]faults.Spec
	// exported is the asks counted on the metrics, by outcome.
	exported map[string]uint64
}

// asRef is an autoscaled replica: its scaler and its index in the pool.
type asRef struct {
	sc *gwScaler
	k  int
}

// initAutoscale builds a scaler for each autoscaled pool of sc (the
// gateway's copy, its replicas cut to the backends); called by New.
func (g *Gateway) initAutoscale(sc *scenarios.Scenario) error {
	g.asOf = make([]*asRef, len(g.replicas))
	// A replay's scalers ask nothing after its arrivals, as the twin's; a
	// gateway serving for real scales as long as it runs.
	end := time.Duration(math.MaxInt64)
	if g.cfg.HoldAutoscale {
		end = sc.Duration.D()
	}
	for pi := range sc.Pools {
		ps := &sc.Pools[pi]
		if ps.Autoscale == nil || len(g.byPool[ps.Name]) == 0 {
			continue
		}
		reps := g.byPool[ps.Name]
		cfg := compile.ScalerConfig(ps, g.replicas[reps[0]].maxBatch, end,
			rand.New(sim.NewSource(g.cfg.Seed, compile.AcquisitionStream(ps.Name))))
		s, err := sched.NewScaler(cfg, sc.Duration.D())
		if err != nil {
			return fmt.Errorf("pool %s: autoscale: %w", ps.Name, err)
		}
		n := len(reps)
		as := &gwScaler{g: g, pool: ps.Name, pi: pi, reps: reps, s: s,
			up: make([]bool, n), loaded: make([]bool, n), gen: make([]int, n), started: make([]bool, n), op: make([]chan struct{}, n), acq: map[int]faults.Spec{}, exported: map[string]uint64{}}
		for k, ri := range reps {
			g.asOf[ri] = &asRef{as, k}
			// The starting replicas are running, as a fixed pool's are.
			as.up[k] = k < ps.Replicas
			as.started[k] = as.up[k]
		}
		g.scalers = append(g.scalers, as)
	}
	if len(g.scalers) > 0 {
		g.asStarted = !g.cfg.HoldAutoscale
	}
	return nil
}

// asNow is the scalers' clock: model time since their origin. Called with
// mu held.
func (g *Gateway) asNow(now time.Duration) time.Duration { return now - g.asOrigin }

// StartAutoscale starts the scalers with their origin at, on the gateway's
// clock (Now): their syncs and the times their reports give count from
// there. Only with Config.HoldAutoscale; a second call does nothing.
func (g *Gateway) StartAutoscale(at time.Duration) {
	if len(g.scalers) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.asStarted {
		return
	}
	g.asOrigin, g.asStarted = at, true
	g.kickSchedule()
}

// StopAutoscale freezes the scalers where they stand: a replay's end,
// after which its report reads them. Replicas keep serving; nothing more
// is asked, provisioned, loaded or released.
func (g *Gateway) StopAutoscale() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asStopped = true
}

// advanceScalers does what is due of every scaler, in pool order.
func (g *Gateway) advanceScalers() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || !g.asStarted || g.asStopped || g.probeCtx.Err() != nil {
		return
	}
	now := g.asNow(g.now())
	// Replicas made routable in this pass serve from its instant: two
	// loaded together are one change of the pool's timeline, as in the
	// twin's.
	g.asAt, g.asAdvancing = now, true
	for _, as := range g.scalers {
		as.s.Advance(now, as)
		as.export()
	}
	g.asAdvancing = false
	g.deliver(g.now())
}

// export sets the pool's autoscaling series.
func (as *gwScaler) export() {
	c := as.s.Counts(0)
	m := as.g.metrics
	for i, n := range []int{c.Requested, c.Provisioning, c.Warming, c.Serving, c.Draining} {
		m.autoscaleReplicas.WithLabelValues(as.pool, signals.AutoscaleStates[i]).Set(float64(n))
	}
	t := as.s.Tally()
	add := func(outcome string, n uint64) {
		if d := n - as.exported[outcome]; d > 0 {
			m.autoscaleAsks.WithLabelValues(as.pool, outcome).Add(float64(d))
			as.exported[outcome] = n
		}
	}
	add("granted", t.Granted)
	for _, why := range sched.RefusalReasons {
		add("refused_"+why, t.RefusedBy[why])
	}
}

// Measure implements sched.ScalerEnv.
func (as *gwScaler) Measure() (busy float64, queued int, wait time.Duration) {
	return as.g.core.ScalerMeasure(as.g.now(), as.pi)
}

// Inflight implements sched.ScalerEnv.
func (as *gwScaler) Inflight(k int) int { return as.g.core.Inflight(as.reps[k]) }

// Quiet implements sched.ScalerEnv: a gateway scales until its end.
func (as *gwScaler) Quiet() bool { return false }

// Offer implements sched.ScalerEnv: the acquisition faults injected on
// the pool, as the twin's scaler reads its active ones.
func (as *gwScaler) Offer() sched.Offer {
	o := sched.NoFaults
	for _, id := range slices.Sorted(maps.Keys(as.acq)) {
		o = compile.OfferUnder(o, as.acq[id], func() int {
			return compile.FreeGPUs(as.g.sc, as.acq[id], as.g.heldReplicas)
		})
	}
	return o
}

// heldReplicas is what pool pi holds of its provider: its scaler's
// granted replicas, or a fixed pool's backends.
func (g *Gateway) heldReplicas(pi int) int {
	for _, as := range g.scalers {
		if as.pi == pi {
			return as.s.Held()
		}
	}
	return len(g.byPool[g.sc.Pools[pi].Name])
}

// Provisioned implements sched.ScalerEnv: the replica's instance starts
// and its model loads; the core counts it, without routing to it.
func (as *gwScaler) Provisioned(k int) {
	g, ri := as.g, as.reps[k]
	now := g.now()
	g.core.SetReady(now, ri, false)
	g.core.SetPresent(now, ri, true)
	as.loaded[k] = false
	if as.up[k] || g.cfg.Provisioner == nil {
		as.up[k] = true
		return
	}
	gen := as.gen[k]
	as.started[k] = true
	as.queue(k, func(ctx context.Context) {
		err := g.cfg.Provisioner.Start(ctx, as.pool, k)
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.closed || as.gen[k] != gen || g.probeCtx.Err() != nil {
			return // handed back meanwhile (its Stop is queued), or closing
		}
		if err != nil {
			// Only the error's first line: a container's output stays
			// in the log.
			msg, _, _ := strings.Cut(err.Error(), "\n")
			g.log.Warn("autoscale: replica did not start", "pool", as.pool, "replica", k, "err", err)
			as.Event(sched.ScalerEvent{At: g.asNow(g.now()), Kind: "replica-failed",
				Detail: fmt.Sprintf("pool %s: replica %d did not start: %s", as.pool, k, msg)})
			as.started[k] = false
			as.s.Failed(g.asNow(g.now()), k, as)
			as.export()
			return
		}
		as.up[k] = true
		if as.loaded[k] {
			as.serve(k)
		}
	})
}

// queue runs op for replica k after the replica's last queued op, in a
// goroutine the gateway's Close waits for. Called with mu held.
func (as *gwScaler) queue(k int, op func(ctx context.Context)) {
	g := as.g
	prev, done := as.op[k], make(chan struct{})
	as.op[k] = done
	g.probeWG.Add(1)
	go func() {
		defer g.probeWG.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		// A Stop outlives a closing gateway (its instance must go); a
		// Start does not.
		op(g.probeCtx)
	}()
}

// Loaded implements sched.ScalerEnv: the replica serves once its instance
// answers.
func (as *gwScaler) Loaded(k int) {
	if !as.up[k] {
		as.loaded[k] = true
		return
	}
	as.serve(k)
}

// serve routes to replica k from now.
func (as *gwScaler) serve(k int) {
	g, ri := as.g, as.reps[k]
	now := g.now()
	as.loaded[k] = false
	g.core.SetReady(now, ri, true)
	at := g.asNow(now)
	if g.asAdvancing {
		at = g.asAt
	}
	as.s.Serving(at, k, as)
	as.export()
	g.deliver(now)
}

// Released implements sched.ScalerEnv: no new work for the replica.
func (as *gwScaler) Released(k int) {
	as.g.core.SetPresent(as.g.now(), as.reps[k], false)
}

// Gone implements sched.ScalerEnv: the replica's instance is stopped
// (after its Start, if that still runs).
func (as *gwScaler) Gone(k int) {
	g := as.g
	as.gen[k]++
	as.loaded[k], as.up[k] = false, false
	g.core.SetPresent(g.now(), as.reps[k], false)
	if g.cfg.Provisioner == nil || !as.started[k] {
		return
	}
	as.started[k] = false
	as.queue(k, func(ctx context.Context) {
		if err := g.cfg.Provisioner.Stop(context.WithoutCancel(ctx), as.pool, k); err != nil {
			g.log.Warn("autoscale: replica did not stop", "pool", as.pool, "replica", k, "err", err)
		}
	})
}

// Event implements sched.ScalerEnv: the log, and the observer.
func (as *gwScaler) Event(ev sched.ScalerEvent) {
	g := as.g
	g.log.Info("autoscale", "pool", as.pool, "kind", ev.Kind, "detail", ev.Detail)
	if g.obs.Autoscale != nil {
		g.obs.Autoscale(g.now(), ev)
	}
}

// probed says whether replica i is probed: an autoscaled replica only
// while its instance runs. Called with mu held.
func (g *Gateway) probed(i int) bool {
	ref := g.asOf[i]
	if ref == nil {
		return true
	}
	st := ref.sc.s.State(ref.k)
	return ref.sc.up[ref.k] && (st == sched.RepServing || st == sched.RepDraining || st == sched.RepWarming)
}

// InjectAcquisition makes the providers of pools answer their scalers'
// asks under spec (stockout, quota-cap, slow-provisioning) until the
// returned function removes it.
func (g *Gateway) InjectAcquisition(pools []string, spec faults.Spec) (func(), error) {
	if spec.Kind.Traits().Live&faults.LiveAcquisition == 0 {
		return nil, fmt.Errorf("gateway: %s is not an acquisition fault", spec.Kind)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextAcq++
	id := g.nextAcq
	g.log.Info("autoscale: acquisition fault injected", "fault", spec.String(), "pools", pools, "id", id)
	var on []*gwScaler
	for _, p := range pools {
		for _, as := range g.scalers {
			if as.pool == p {
				as.acq[id] = spec
				on = append(on, as)
			}
		}
	}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.log.Info("autoscale: acquisition fault removed", "fault", spec.String(), "id", id)
		for _, as := range on {
			delete(as.acq, id)
		}
	}, nil
}

// Autoscalers calls fn with each autoscaled pool's scaler and the
// scalers' clock now, under the gateway's lock: for a report or a
// console. fn must only read.
func (g *Gateway) Autoscalers(fn func(pool string, s *sched.Scaler, now time.Duration)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, as := range g.scalers {
		fn(as.pool, as.s, g.asNow(g.now()))
	}
}
