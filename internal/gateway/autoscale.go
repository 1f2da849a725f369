package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Autoscaling, live: each autoscaled pool's scaler and what it does to the
// core are the request engine's (reqengine.Scaling), run at the engine's
// wake-ups; the gateway carries out what Ready.Scaling asks of the
// instances and steps their answers (InstanceUp, InstanceFailed). The pool's backends are its replicas up to
// max_replicas; those beyond `replicas` start absent, and the core routes
// to none of them until the scaler has one granted, provisioned (the
// Provisioner starts its instance: a container) and loaded (cold_start of
// model time, and the instance answering). The scaler draws its grants and
// delays from the run's stream (compile.AcquisitionStream, seeded with
// Config.Seed), and asks the provider under the acquisition faults
// injected with InjectAcquisition: given the same measurements, a live
// pool is granted, refused and served as a simulated one.

// Provisioner starts and stops the instances of autoscaled pools'
// replicas: replica k of pool is the pool's k-th backend.
type Provisioner interface {
	// Start starts the instance and returns once it answers (or fails).
	Start(ctx context.Context, pool string, k int) error
	// Stop stops it; it may be started again.
	Stop(ctx context.Context, pool string, k int) error
}

// Autoscaling is the gateway's autoscaled pools: their scalers, whether
// they run, the acquisition faults injected on them. Get it with
// Gateway.Autoscaling. The scalers change the core (a replica made
// routable, drained, gone), so everything here is under the gateway's
// lock, as the core is.
type Autoscaling struct {
	// Set by New, then only read.
	mu      *sync.Mutex // the gateway's: it guards the core and all of Autoscaling's state below
	clk     clock
	log     *slog.Logger
	metrics *metrics
	onEvent func(now time.Duration, ev sched.ScalerEvent) // Observer.Autoscale; nil: none
	prov    Provisioner                                   // Config.Provisioner; nil: a backend is taken to be up
	// wg is the gateway's probeWG: Close waits for the instances' starts
	// and stops as for its probes. ctx is the gateway's probeCtx, which
	// Close cancels (with mu held) before it waits, and before it marks
	// the gateway closed: a cancelled ctx is a closing gateway.
	wg  *sync.WaitGroup
	ctx context.Context
	// step steps the request engine and carries out its Ready
	// (Gateway.stepLocked); called with mu held.
	step func(now time.Duration, ev reqengine.Event)

	// Guarded by mu. scaling, scalers and of are set by New, then only
	// read (their contents change under mu).
	scaling *reqengine.Scaling // the request engine's scaled pools
	scalers []*gwScaler        // one per autoscaled pool, in pool order
	of      []*asRef           // per replica: its scaler (nil: not autoscaled)
	nextAcq int                // the last acquisition fault's id
}

// gwScaler is one autoscaled pool: the request engine's
// (reqengine.ScaledPool: the core's Scaler and what its transitions do to
// the core) and the gateway's side of it: the instances (what
// Ready.Scaling asks of them), the log and metrics, the acquisition faults
// injected (reqengine.Acquirer). Its methods run with a.mu held.
type gwScaler struct {
	a    *Autoscaling
	pool string
	pi   int // the core's pool index
	s    *sched.Scaler
	eng  *reqengine.ScaledPool
	// gen, per replica of the pool, is bumped when it is handed back (a
	// late Start is stale).
	gen []int
	// started: a Start is queued or done since the last Stop; op is the
	// done channel of the replica's last queued Start or Stop: each waits
	// for the one before, so a replica's instance is never started and
	// stopped at once.
	started []bool
	op      []chan struct{}
	// acq is the acquisition faults injected on the pool, by id.
	acq map[int]faults.Spec
	// exported is the asks counted on the metrics, by outcome.
	exported map[string]uint64
}

// asRef is an autoscaled replica: its scaler and its index in the pool.
type asRef struct {
	sc *gwScaler
	k  int
}

// init builds a scaler for each autoscaled pool of sc (the gateway's
// copy, its replicas cut to the backends) on core; called by New. The
// scalers draw from the run's stream (seed); held, they wait for Start
// and end with the scenario.
func (a *Autoscaling) init(sc *scenarios.Scenario, core *sched.Core, byPool map[string][]int, replicas []replica,
	seed uint64, held bool) error {
	a.scaling = reqengine.NewScaling(sc, func(pi int) int { return len(byPool[sc.Pools[pi].Name]) }, held)
	// A replay's scalers ask nothing after its arrivals, as a run's do; a
	// gateway serving for real scales as long as it runs.
	end := time.Duration(math.MaxInt64)
	if held {
		end = sc.Duration.D()
	}
	for pi := range sc.Pools {
		ps := &sc.Pools[pi]
		if ps.Autoscale == nil || len(byPool[ps.Name]) == 0 {
			continue
		}
		reps := byPool[ps.Name]
		cfg := compile.ScalerConfig(ps, replicas[reps[0]].maxBatch, end,
			rand.New(sim.NewSource(seed, compile.AcquisitionStream(ps.Name))))
		s, err := sched.NewScaler(cfg, sc.Duration.D())
		if err != nil {
			return fmt.Errorf("pool %s: autoscale: %w", ps.Name, err)
		}
		n := len(reps)
		as := &gwScaler{a: a, pool: ps.Name, pi: pi, s: s,
			gen: make([]int, n), started: make([]bool, n), op: make([]chan struct{}, n), acq: map[int]faults.Spec{}, exported: map[string]uint64{}}
		// The starting replicas are running, as a fixed pool's are.
		// Without a Provisioner a backend is taken to be up once started.
		as.eng = a.scaling.Add(core, pi, reps, ps.Replicas, s, as, a.prov == nil)
		for k, ri := range reps {
			a.of[ri] = &asRef{as, k}
			as.started[k] = as.eng.IsUp(k)
		}
		a.scalers = append(a.scalers, as)
	}
	return nil
}

// Autoscaling returns the gateway's autoscaled pools.
func (g *Gateway) Autoscaling() *Autoscaling { return g.as }

// Start starts the scalers with their origin at, on the gateway's clock
// (Gateway.Now): their syncs and the times their reports give count from
// there. Only with Config.HoldAutoscale; a second call does nothing.
func (a *Autoscaling) Start(at time.Duration) {
	if len(a.scalers) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.step(a.clk.now(), reqengine.Event{Kind: reqengine.StartScaling, At: at})
}

// Stop freezes the scalers where they stand: a replay's end, after which
// its report reads them. Replicas keep serving; nothing more is asked,
// provisioned, loaded or released.
func (a *Autoscaling) Stop() {
	if len(a.scalers) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.step(a.clk.now(), reqengine.Event{Kind: reqengine.StopScaling})
}

// carry carries out what the scalers decided (Ready.Scaling), logs their
// timeline entries, and sets the series. Called with mu held.
func (a *Autoscaling) carry(now time.Duration, acts []reqengine.ScaleAction, evs []reqengine.ScalerEvent) {
	for _, ev := range evs {
		a.event(now, a.scaling.PoolName(ev.Pool), ev.ScalerEvent)
	}
	for _, act := range acts {
		for _, as := range a.scalers {
			if as.pi != act.Pool {
				continue
			}
			switch act.Kind {
			case reqengine.ScaleStart:
				as.start(act.K)
			case reqengine.ScaleGone:
				as.gone(act.K)
			}
		}
	}
	a.export()
}

// export sets every pool's autoscaling series. Called with mu held.
func (a *Autoscaling) export() {
	for _, as := range a.scalers {
		as.export()
	}
}

// export sets the pool's autoscaling series.
func (as *gwScaler) export() {
	c := as.s.Counts(0)
	m := as.a.metrics
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

// Acquisition implements reqengine.Acquirer: the acquisition faults
// injected on the pool, in the order they were.
func (as *gwScaler) Acquisition() []faults.Spec {
	var on []faults.Spec
	for _, id := range slices.Sorted(maps.Keys(as.acq)) {
		on = append(on, as.acq[id])
	}
	return on
}

// start carries out a ScaleStart: the Provisioner starts the replica's
// instance, in the background, and the engine hears when it answers (it
// routes to it once its model has loaded too) or fails. Without a
// Provisioner the backend is taken to be up (the engine knows: Add's
// instant).
func (as *gwScaler) start(k int) {
	a := as.a
	if a.prov == nil {
		return
	}
	gen := as.gen[k]
	as.started[k] = true
	as.queue(k, func(ctx context.Context) {
		err := a.prov.Start(ctx, as.pool, k)
		a.mu.Lock()
		defer a.mu.Unlock()
		if as.gen[k] != gen || a.ctx.Err() != nil {
			return // handed back meanwhile (its Stop is queued), or closing
		}
		now := a.clk.now()
		if err != nil {
			// Only the error's first line: a container's output stays
			// in the log.
			msg, _, _ := strings.Cut(err.Error(), "\n")
			a.log.Warn("autoscale: replica did not start", "pool", as.pool, "replica", k, "err", err)
			a.event(now, as.pool, sched.ScalerEvent{At: a.scaling.Clock(now), Kind: "replica-failed",
				Detail: fmt.Sprintf("pool %s: replica %d did not start: %s", as.pool, k, msg)})
			as.started[k] = false
			a.step(now, reqengine.Event{Kind: reqengine.InstanceFailed, Replica: as.eng.Reps[k]})
			return
		}
		// Routable now if its model has loaded.
		a.step(now, reqengine.Event{Kind: reqengine.InstanceUp, Replica: as.eng.Reps[k]})
	})
}

// queue runs op for replica k after the replica's last queued op, in a
// goroutine the gateway's Close waits for. Called with mu held.
func (as *gwScaler) queue(k int, op func(ctx context.Context)) {
	a := as.a
	prev, done := as.op[k], make(chan struct{})
	as.op[k] = done
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		// A Stop outlives a closing gateway (its instance must go); a
		// Start does not.
		op(a.ctx)
	}()
}

// gone carries out a ScaleGone: the replica's instance is stopped (after
// its start, if that still runs).
func (as *gwScaler) gone(k int) {
	a := as.a
	as.gen[k]++
	if a.prov == nil || !as.started[k] {
		return
	}
	as.started[k] = false
	as.queue(k, func(ctx context.Context) {
		if err := a.prov.Stop(context.WithoutCancel(ctx), as.pool, k); err != nil {
			a.log.Warn("autoscale: replica did not stop", "pool", as.pool, "replica", k, "err", err)
		}
	})
}

// event is a scaler's timeline entry: the log, and the observer.
func (a *Autoscaling) event(now time.Duration, pool string, ev sched.ScalerEvent) {
	a.log.Info("autoscale", "pool", pool, "kind", ev.Kind, "detail", ev.Detail)
	if a.onEvent != nil {
		a.onEvent(now, ev)
	}
}

// probed says whether replica i is probed: an autoscaled replica only
// while its instance runs. Called with mu held.
func (a *Autoscaling) probed(i int) bool {
	ref := a.of[i]
	if ref == nil {
		return true
	}
	st := ref.sc.s.State(ref.k)
	return ref.sc.eng.IsUp(ref.k) && (st == sched.RepServing || st == sched.RepDraining || st == sched.RepWarming)
}

// InjectAcquisition makes the providers of pools answer their scalers'
// asks under spec (stockout, quota-cap, slow-provisioning) until the
// returned function removes it.
func (a *Autoscaling) InjectAcquisition(pools []string, spec faults.Spec) (func(), error) {
	if spec.Kind.Traits().Live&faults.LiveAcquisition == 0 {
		return nil, fmt.Errorf("gateway: %s is not an acquisition fault", spec.Kind)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nextAcq++
	id := a.nextAcq
	a.log.Info("autoscale: acquisition fault injected", "fault", spec.String(), "pools", pools, "id", id)
	var on []*gwScaler
	for _, p := range pools {
		for _, as := range a.scalers {
			if as.pool == p {
				as.acq[id] = spec
				on = append(on, as)
			}
		}
	}
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.log.Info("autoscale: acquisition fault removed", "fault", spec.String(), "id", id)
		for _, as := range on {
			delete(as.acq, id)
		}
	}, nil
}

// Scalers calls fn with each autoscaled pool's scaler and the scalers'
// clock now, under the gateway's lock: for a report or a console. fn must
// only read.
func (a *Autoscaling) Scalers(fn func(pool string, s *sched.Scaler, now time.Duration)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, as := range a.scalers {
		fn(as.pool, as.s, a.scaling.Clock(a.clk.now()))
	}
}
