package twin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim"
	"github.com/fleetdrill/fleetdrill/twin/engine"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Options tune a run without changing what it computes. (Sample, Metrics
// and OnComplete observe; Sample adds kernel events, so the report's event
// count includes them, where Metrics adds none.)
type Options struct {
	// Progress, if set, is called now and then with the fraction of
	// simulated time done (0..1). It runs on the simulation goroutine.
	Progress func(frac float64)
	// Version is recorded in the report's run section.
	Version string
	// OnComplete, if set, receives every completed request's timeline, in
	// completion order, for per-request comparisons (fleetdrill fidelity).
	// Requests are numbered in arrival order from 0.
	OnComplete func(RequestLog)
	// OnEjection, if set, receives every latency outlier ejection and
	// return as the core decides it, in time order: what a gateway's
	// Observer.Ejection reports, for feeding a Recorder.
	OnEjection func(sched.Ejection)
	// Sample, if set with SampleEvery, is called every SampleEvery of
	// simulated time with each replica's state, for time series.
	Sample      func(at time.Duration, queued int, replicas []ReplicaState)
	SampleEvery time.Duration
	// Metrics, if set, records the run's operational series every
	// Metrics.Step of simulated time (see metrics.go). It reads the run
	// between events and schedules none: the report is the same with it
	// as without.
	Metrics *Metrics
	// ContextLimits lower pools' largest request below the scenario's
	// (sched.Core.LimitContext): what live servers published, so that a
	// hybrid run's twin refuses what the gateway refuses.
	ContextLimits []sched.ContextLimit
}

// RequestLog is one completed request's timeline, all in simulated time.
type RequestLog struct {
	ID            uint64
	Input, Output int
	Arrived       time.Duration
	Dispatched    time.Duration // left the gateway's queue for a replica
	Scheduled     time.Duration // first admitted into the replica's batch
	FirstToken    time.Duration
	Done          time.Duration
	// Replica served it (the plan's index: pools in scenario order, each
	// pool's replicas in order), and Served is the model that answered.
	Replica, Served int
}

// ReplicaState is a replica's state at a sample.
type ReplicaState struct {
	Running, Waiting int   // sequences in the batch, and queued at the replica
	KVUsed, KVTokens int64 // KV tokens reserved, and the capacity
}

// Run simulates the scenario and returns its report. The scenario must have
// been validated by the scenarios package; keys it leaves at zero take their
// defaults (scenarios.ApplyDefaults, which Run applies to sc). Run fails when the scenario
// cannot be built, when an expectation names no report value, or when the
// accounting invariant breaks (a twin bug). A failed expectation is not an
// error: see Report.Passed.
func Run(ctx context.Context, sc *scenarios.Scenario, opts Options) (*Report, error) {
	start := time.Now()
	r, err := prepare(sc)
	if err != nil {
		return nil, err
	}
	for _, l := range opts.ContextLimits {
		r.core.LimitContext(l.Pool, l.Model, l.Tokens)
	}
	r.onComplete = opts.OnComplete
	r.onEjection = opts.OnEjection
	if opts.Sample != nil && opts.SampleEvery > 0 {
		startSampling(r.s, r.core, r.replicas, len(sc.Models), r.end,
			func() bool { return r.lc.Live() > 0 || !r.afterArrivals() }, opts.Sample, opts.SampleEvery)
	}
	if m := opts.Metrics; m != nil {
		if err := m.init(); err != nil {
			r.closeSources()
			return nil, err
		}
		r.metrics = recordMetrics(m, r)
		defer m.finish()
	}
	if err := r.run(ctx, opts.Progress); err != nil {
		return nil, err
	}
	rep, err := r.final()
	if err != nil {
		return nil, err
	}
	rep.Run = RunInfo{WallS: round(time.Since(start).Seconds(), 3), Version: opts.Version}
	return rep, nil
}

// prepare builds a runner for sc. Expectations are checked against the
// report's shape before the run, so a typo fails in milliseconds, not after
// an hour of simulation.
func prepare(sc *scenarios.Scenario) (*runner, error) {
	p, err := build(sc)
	if err != nil {
		return nil, err
	}
	r, err := newRunner(p)
	if err != nil {
		return nil, err
	}
	// An empty report with every group and pool: the expectations' paths.
	if err := r.assemble().evaluate(sc.Expect); err != nil {
		r.closeSources()
		return nil, err
	}
	return r, nil
}

// final is the report of the run so far, its accounting checked and its
// expectations evaluated.
func (r *runner) final() (*Report, error) {
	if r.doubleStarts > 0 {
		return nil, fmt.Errorf("twin: %d dispatches of requests already started (a twin bug: exactly-once broken)", r.doubleStarts)
	}
	rep := r.report()
	if err := rep.CheckAccounting(); err != nil {
		return nil, err
	}
	if err := rep.evaluate(r.p.sc.Expect); err != nil {
		return nil, err
	}
	return rep, nil
}

// runner is one run in progress: the kernel, the core, the replicas, the
// requests in flight and the accumulators of the report.
type runner struct {
	p    *plan
	s    *sim.Sim
	core *sched.Core

	replicas []replicaRT
	sources  []source
	pending  []arrival // each stream's next arrival
	fires    []func()  // each stream's arrival callback, bound once
	err      error     // a source failed: the run stops with it
	svcRand  *rand.Rand

	reqs []*request // slab; requests are reused once finished
	free []int
	next uint64 // request ids

	// eng is the request engine (reqengine.Engine): every decision on a
	// request between its arrival and its answer; the runner carries them
	// out. lc is its lifecycle (retries, their budget, what admitted
	// means), read for the run's liveness.
	eng *reqengine.Engine
	lc  *sched.Lifecycle

	warmup, duration, end time.Duration

	coreWake   sim.Timer
	coreWakeAt time.Duration
	onWake     func() // steps Tick; bound once, so that arming the wake-up allocates nothing

	tally
	pools       []*PoolReport
	residency   residencyTally // dispatches outside their tenant's jurisdiction
	timelineLog                // the timeline as it is written (timelinelog.go)

	done   []*request   // completions collected during an engine Advance
	firsts []firstToken // first tokens produced during an engine Advance
	hedges HedgeReport
	pd     *disaggWorld // disaggregated serving (disagg.go); nil without
	// migrations counts the measured requests' cut streams migrated
	// (policy.retries.migration_limit).
	migrations uint64

	seqPool                     // pooled engine sequences
	work        reqengine.Ready // the engine's decisions being carried out (see dispatch)
	dispatching bool

	onArrive   func(*request) // tests: observe every arrival
	recent     *recent        // a drill's recent window per class; nil in Run
	onComplete func(RequestLog)
	streams    []StreamReport
	metrics    *metricsRec // Options.Metrics; nil: off (see metrics.go)
	demand     *demand     // the demand forecast (forecast.go)

	jobs   jobsRT
	ladder *reqengine.Ladder
	// Canaries (canary.go): the request engine's rollouts and copies.
	canaries   *reqengine.Canaries
	shadowRand *rand.Rand // copies' fault fates and service times: never the clients' draws
	ladderRand *rand.Rand

	*faultWorld      // the faults' ground truth (faults.go)
	doubleStarts int // dispatches of a request not waiting: a twin bug, fails the run

	scalers []*scaler // autoscaled pools (autoscale.go)
	scaling *reqengine.Scaling
}

type replicaRT struct {
	eng     *engine.Replica // nil for a service-time pool
	timer   sim.Timer
	timerAt time.Duration
	pool    int
	model   int

	// Service-time pools: one request at a time.
	svcBusy  time.Duration // accumulated busy time
	svcStart time.Duration
	svcReq   *request
	blocked  bool
	loading  bool   // loading its model (cold start): not serving, not for jobs
	absent   bool   // an autoscaled pool's replica not provisioned (autoscale.go)
	onTimer  func() // bound once: the engine's timer allocates nothing
}

type reqState uint8

// The runner's view of a request: what it carries out for it. Whether a
// request waiting to be offered again is a retry or a deferral is the
// engine's (reqengine.Req.Retrying), not kept here twice.
const (
	stNew reqState = iota
	stWaiting
	stRunning
	stFailing // an attempt is failing (its error is on the way)
	stBackoff // the engine offers it again later (a deferral or a retry)
	stDone
)

type request struct {
	// The engine's record of the request, its core request first: it must
	// stay the first field (owner converts a core request back).
	reqengine.Req
	seq      *engine.Seq // the current attempt's sequence (pooled: see newSeq)
	idx      int
	stream   int
	measured bool
	state    reqState

	deadline     sim.Timer
	dispatchedAt time.Duration
	firstAt      time.Duration
	held         bool        // finished, but an engine holds its sequence until Dropped
	rejected     bool        // finished by a rejection
	hedgeSeq     *engine.Seq // a hedged duplicate attempt's sequence, on hedgeAt
	hedgeAt      int
	hedgeStart   sim.Timer // a duplicate's start delayed by injected latency, on hedgeAt
	attemptTimer sim.Timer
	startTimer   sim.Timer // a dispatch delayed by injected latency
	startAt      int       // the replica startTimer starts it on
	// shadow: a copy mirrored to a canary's candidate (canary.go); the
	// request engine links it to its original.
	shadow    bool
	offeredAt time.Duration // when the current attempt was offered to the core
	canary    int           // the canary (index + 1) an attempt was dispatched on; 0: none

	// cutGen is what its last cut stream had generated, migrated into its
	// next attempt's prompt (RetryPolicy.MigrationLimit); migrated the
	// migrations its attempts have taken so.
	cutGen, migrated int
	// pd is its remote prefill (disagg.go), nil for a request of a model
	// served aggregated: a pointer, so that the slab entry every request
	// takes does not grow with it.
	pd *pdReq

	// Callbacks bound to this slab entry once, so that arming a deadline or
	// a hedge allocates nothing.
	onDeadline, onStart func()
}

func newRunner(p *plan) (*runner, error) {
	sc := p.sc
	r := &runner{
		p:           p,
		s:           sim.New(sim.Config{Seed: sc.Seed}),
		warmup:      sc.Warmup.D(),
		duration:    sc.Duration.D(),
		tally:       newTally(sc),
		timelineLog: timelineLog{firstSeen: map[string]bool{}},
	}
	drain := sc.Drain.D()
	if drain == 0 {
		drain = 10 * time.Minute
	}
	r.end = r.duration + drain
	cfg := p.core
	if sc.Policy.Routing.PrefixAffinity {
		cfg.PrefixHits = func(cr *sched.Request, ri int) int {
			eng := r.replicas[ri].eng
			blocks := r.owner(cr).seq.Blocks
			if eng == nil || len(blocks) == 0 {
				return 0
			}
			return eng.PrefixHits(blocks)
		}
	}
	core, err := sched.New(cfg)
	if err != nil {
		return nil, err
	}
	r.core = core
	r.svcRand = r.s.Rand("service")
	for i, rp := range p.replicas {
		pp := &p.pools[rp.Pool]
		rt := replicaRT{pool: rp.Pool, model: rp.Model}
		if pp.Spec.Service == nil {
			prof := pp.Profiles[rp.Model]
			kv := pp.Verdicts[rp.Model].KVTokens
			eng, err := engine.New(engine.Config{Profile: prof, MaxSeqs: pp.Spec.MaxBatch, KVTokens: kv,
				PrefixCaching: pp.Spec.PrefixCaching})
			if err != nil {
				return nil, fmt.Errorf("pool %s, replica %d: %w", pp.Spec.Name, i, err)
			}
			rt.eng = eng
		}
		r.replicas = append(r.replicas, rt)
	}
	for i := range r.replicas {
		r.replicas[i].onTimer = func() { r.advance(i) }
	}
	if r.pd, err = newDisagg(r); err != nil {
		return nil, err
	}
	r.streams = make([]StreamReport, len(p.streams))
	if r.sources, err = openSources(p, r.s.Rand, r.duration, r.streams); err != nil {
		return nil, err
	}
	r.pools = newPoolReports(p)
	r.faultWorld = &faultWorld{p: p, s: r.s, core: r.core, replicas: r.replicas, pools: r.pools, jobs: &r.jobs,
		end: r.end, log: &r.timelineLog, dispatch: r.dispatch, failWork: r.failReplicaWork,
		seed: r.p.sc.Seed, ended: r.tally.ended,
		live: func() bool { return r.lc.Live() > 0 || !r.afterArrivals() }}
	if r.pd != nil {
		r.faultWorld.stateChanged = r.pd.applyRates
	}
	r.jobs = jobsRT{p: p, s: r.s, core: r.core, replicas: r.replicas, pools: r.pools, end: r.end,
		down:  r.faultWorld.down,
		event: r.event, dispatch: r.dispatch,
		fail: func(err error) {
			if r.err == nil {
				r.err = err
			}
		}}
	if err := r.jobs.init(r.duration); err != nil {
		r.closeSources()
		return nil, err
	}
	r.lc = sched.NewLifecycle(p.retry, sc.Policy.Retries.RetryRejected)
	r.ladderRand = r.s.Rand("degradation")
	r.ladder = reqengine.NewLadder(r.p.core, 0, sched.LadderEvery)
	if err := r.initAutoscale(); err != nil {
		r.closeSources()
		return nil, err
	}
	r.initRollouts()
	r.faultWorld.restarts = reqengine.NewRestarts(len(r.replicas))
	r.eng = reqengine.NewEngine(r.core, r.lc, r.ladder, reqengine.EngineConfig{Seed: sc.Seed,
		QueueTimeout: sc.Policy.Admission.QueueTimeout.D(), LadderDraw: r.ladderRand.Float64,
		HedgeAfter: sc.Policy.Routing.HedgeAfter.D(),
		Canaries:   r.canaries, Scaling: r.scaling, ArrivalsEnd: r.duration,
		Restarts: r.faultWorld.restarts, Holds: r.jobs.holds, NewCopy: r.newCopy})
	r.faultWorld.eng = r.eng
	r.onWake = func() { r.step(reqengine.Event{Kind: reqengine.Tick}) }
	if err := r.faultWorld.initFaults(); err != nil {
		r.closeSources()
		return nil, err
	}
	r.demand = newDemand(len(sc.Classes), ForecastWindow, r.duration)
	if err := r.initWindows(r.faultSpans()); err != nil {
		r.closeSources()
		return nil, err
	}
	return r, nil
}

func (r *runner) run(ctx context.Context, progress func(float64)) error {
	r.start()
	defer r.closeSources()
	for t := slice; ; t += slice {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r.err != nil {
			return r.err
		}
		until := min(t, r.end)
		var done bool
		if r.metrics != nil {
			done = r.metrics.runTo(until, r.runTo)
		} else {
			done = r.runTo(until)
		}
		if progress != nil {
			progress(float64(until) / float64(r.end))
		}
		if done {
			break
		}
	}
	return r.err
}

// start schedules what a run begins with: cold starts, the first arrival of
// each stream, jobs, the ladder, the faults, probes and the run's marks.
func (r *runner) start() {
	s := r.s
	// Cold pools load their model first.
	for i := range r.replicas {
		pp := &r.p.pools[r.replicas[i].pool]
		// An autoscaled pool's absent replicas load when they are
		// provisioned (autoscale.go), not now.
		if pp.Spec.StartCold && !r.replicas[i].absent {
			r.core.SetReady(0, i, false)
			r.replicas[i].loading = true
			s.At(pp.Spec.ColdStart.D(), func() { r.replicaReady(i) })
			r.pools[r.replicas[i].pool].ColdStarts++
		}
	}
	for _, pp := range r.p.pools {
		if pp.Spec.StartCold && pp.Spec.Replicas > 0 {
			r.event(0, "cold-start", fmt.Sprintf("pool %s: %d replicas loading (%v)", pp.Spec.Name, pp.Spec.Replicas, pp.Spec.ColdStart.D()))
		}
	}
	r.pending = make([]arrival, len(r.sources))
	for i := range r.sources {
		r.fires = append(r.fires, func() { r.arrive(i) })
		r.schedule(i)
	}
	r.jobs.start()
	r.scheduleFaults()
	// The ladder's, the canaries' and the scalers' first evaluations are
	// the request engine's wake-ups.
	r.armWake()
	// The gateway probes its replicas whether or not the scenario has
	// faults, as a real one does: a drill may inject one at any time, and
	// its run must match the scenario that lists it.
	r.s.At(r.p.sc.Policy.Health.ProbeInterval.D(), r.probe)
	if r.warmup > 0 {
		s.At(r.warmup, func() { r.addEvent(warmupEndEvent(s.Now())) })
	}
	s.At(r.duration, func() { r.addEvent(arrivalsEndEvent(s.Now())) })
}

// slice is how far the run advances between checks of cancellation,
// progress, a failed source and the end of the drain. The run ends early
// at the first slice boundary with nothing left to do, so a drill advances
// by the same boundaries.
const slice = RunSlice

// runTo runs the simulation to until, a slice boundary or the end, and
// reports whether the run is over there.
func (r *runner) runTo(until time.Duration) bool {
	r.s.RunUntil(until)
	return until == r.end || (r.lc.Live() == 0 && r.afterArrivals())
}

// schedule draws stream i's next arrival and schedules it.
func (r *runner) schedule(i int) {
	a, ok, err := r.sources[i].next()
	if err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("workload %s: %w", r.p.streams[i].spec.Name, err)
		}
		return
	}
	if ok {
		r.pending[i] = a
		r.s.At(a.at, r.fires[i])
	}
}

func (r *runner) closeSources() {
	for _, src := range r.sources {
		if err := src.close(); err != nil && r.err == nil {
			r.err = err
		}
	}
	for _, src := range r.jobs.sources {
		if err := src.close(); err != nil && r.err == nil {
			r.err = err
		}
	}
	r.sources, r.jobs.sources = nil, nil
}

// afterArrivals reports whether no stream will produce another request.
func (r *runner) afterArrivals() bool { return r.s.Now() >= r.duration }

func (r *runner) replicaReady(i int) {
	r.replicas[i].loading = false
	r.core.SetReady(r.s.Now(), i, true)
	r.dispatch()
	rt := &r.replicas[i]
	pp := &r.p.pools[rt.pool]
	// One timeline entry per pool, when its last cold replica is ready.
	last := pp.FirstReplica
	for j := range r.replicas {
		if r.replicas[j].pool == rt.pool {
			last = j
		}
	}
	if i == last {
		r.event(r.s.Now(), "ready", fmt.Sprintf("pool %s: replicas loaded", pp.Spec.Name))
	}
}

// arrive creates the next request of stream i and schedules the one after.
func (r *runner) arrive(i int) {
	now := r.s.Now()
	a := r.pending[i]
	r.schedule(i)
	sp := &r.p.streams[i]
	tenant, class, model := sp.tenant, sp.class, sp.model
	if a.tenant >= 0 {
		tenant = a.tenant
	}
	if a.class >= 0 {
		class = a.class
	}
	if a.model >= 0 {
		model = a.model
	}
	req := r.alloc()
	cls := &r.p.sc.Classes[class]
	// Served is the model until the core routes it elsewhere: a cached
	// answer never reaches the core, and is no fallback.
	req.Core = sched.Request{ID: r.next, Tenant: tenant, Class: class, Model: model, Served: model,
		Input: a.in, Output: a.out, Arrived: now}
	r.next++
	deadline := cls.Deadline.D()
	if a.deadline > 0 {
		deadline = a.deadline
	}
	if deadline > 0 {
		req.Core.Deadline = now + deadline
		req.deadline = r.s.At(req.Core.Deadline, req.onDeadline)
	}
	req.seq = r.newSeq()
	*req.seq = engine.Seq{Tag: req.idx, Prompt: a.in, Output: a.out, Blocks: a.blocks}
	r.streams[i].Requests++
	req.stream = i
	r.demand.arrive(class, now, a.in+a.out)
	if r.onArrive != nil {
		r.onArrive(req)
	}
	req.measured = now >= r.warmup
	req.Counted = req.measured
	if req.measured {
		r.count(req, func(c *Counts) { c.Arrived++ })
	}
	r.step(reqengine.Event{Kind: reqengine.Arrival, Req: &req.Req})
}

// step tells the request engine what happened now, and carries out what
// it decided.
func (r *runner) step(ev reqengine.Event) {
	r.eng.Step(r.s.Now(), ev)
	r.dispatch()
}

// offered counts and logs an offer of req to the core, and what its
// lifecycle said follows (the engine has done it), before the dispatches
// the offer caused start.
func (r *runner) offered(o *reqengine.Offer) {
	req := r.owner(&o.Req.Core)
	now := r.s.Now()
	req.offeredAt = o.Req.Offered
	r.metrics.offered(req)
	next := o.Next
	switch next.Action {
	case sched.Wait:
		if next.FirstAdmit && req.measured {
			r.count(req, func(c *Counts) { c.Admitted++ })
		}
		req.state = stWaiting
	case sched.Reoffer:
		if next.Retry {
			r.noteRejectedRetry(next.Reason, now)
			req.state = stBackoff
			break
		}
		if req.measured {
			r.count(req, func(c *Counts) { c.Deferred++ })
		}
		r.recent.deferred(req.Core.Class, now)
		r.noteDeferral(next.Reason, now)
		req.state = stBackoff
	}
}

// admitted carries out what follows an admission once its dispatches
// started: a queued request may preempt a batch job, and a first
// admission may be mirrored to a canary's candidate.
func (r *runner) admitted(o *reqengine.Offer) {
	if o.Next.Action != sched.Wait {
		return
	}
	req := r.owner(&o.Req.Core)
	if o.Decision.Outcome == sched.Queued {
		r.jobs.preemptFor(req.Core.Served)
	}
}

// answered records an outcome the engine decided.
func (r *runner) answered(a *reqengine.Answer) {
	req := r.owner(&a.Req.Core)
	switch a.Outcome {
	case reqengine.Completed:
		r.finish(req, a.Replica, Completed, "")
	case reqengine.Refused:
		if req.measured {
			r.rejections[a.Reason]++
		}
		r.note(a.Reason, a.Detail, r.s.Now())
		req.rejected = true
		r.metrics.rejected(req, a.Reason)
		r.finish(req, a.Replica, Rejected, a.Reason)
	case reqengine.Failed:
		r.finish(req, a.Replica, Failed, "")
	case reqengine.QueueTimedOut:
		if req.Core.Route > 0 {
			r.observeAttempt(req, -1, false, false) // it waited for the canary's candidate in vain
		}
		r.finish(req, a.Replica, TimedOut, "")
	default:
		r.finish(req, a.Replica, TimedOut, "")
	}
}

// dispatch carries out the request engine's Ready (gathering first what
// the core decided on a direct call: a hedge, a copy, a probe): breaker
// transitions go on the timeline, the ladder's verdicts and the offers
// are counted, dispatched requests start on their replicas, and outcomes
// are recorded. Carrying one out can make the engine decide more (a
// replica unblocks, an attempt fails at once); those join the same work
// lists, so no decision is lost or handled twice.
func (r *runner) dispatch() {
	r.eng.Collect(r.s.Now())
	r.take()
	if r.dispatching {
		return
	}
	r.dispatching = true
	for len(r.work.Restarted)+len(r.work.Loaded)+len(r.work.Transitions)+len(r.work.Changes)+len(r.work.Rollouts)+len(r.work.ScalerEvents)+len(r.work.Scaling)+
		len(r.work.Judged)+len(r.work.Offers)+len(r.work.Reoffered)+len(r.work.Cancels)+len(r.work.Starts)+len(r.work.Hedges)+len(r.work.CopiesEnded)+len(r.work.Answers) > 0 {
		carry(&r.work.Restarted, r.faultWorld.restarted)
		carry(&r.work.Loaded, func(ri int) { r.replicas[ri].loading = false })
		carry(&r.work.Transitions, r.breakerChanged)
		carry(&r.work.Changes, r.laddered)
		carry(&r.work.Rollouts, r.rolledOut)
		carry(&r.work.ScalerEvents, func(ev reqengine.ScalerEvent) { r.event(ev.At, ev.Kind, ev.Detail) })
		// Before the starts: one may be on a replica just made routable.
		carry(&r.work.Scaling, r.scaled)
		carry(&r.work.Judged, r.judged)
		for i := 0; i < len(r.work.Reoffered); i++ {
			if req := r.owner(&r.work.Reoffered[i].Req.Core); req.measured && r.work.Reoffered[i].Retry {
				r.count(req, func(c *Counts) { c.Retries++ })
			}
		}
		r.work.Reoffered = r.work.Reoffered[:0]
		// The offers taken so far are counted before the dispatches
		// start and carried out after: those this carrying out adds wait
		// for the next round.
		no := len(r.work.Offers)
		for i := 0; i < no; i++ {
			r.offered(&r.work.Offers[i])
		}
		carry(&r.work.Cancels, r.cancelled)
		carry(&r.work.CopiesEnded, r.copyEnded)
		carry(&r.work.Starts, r.startDispatched)
		carry(&r.work.Hedges, r.startHedge)
		for i := 0; i < no; i++ {
			r.admitted(&r.work.Offers[i])
		}
		r.work.Offers = r.work.Offers[:copy(r.work.Offers, r.work.Offers[no:])]
		for i := 0; i < len(r.work.Answers); i++ {
			r.answered(&r.work.Answers[i])
		}
		r.work.Answers = r.work.Answers[:0]
		r.take()
	}
	r.dispatching = false
	// Filling a replica can spend a provider quota and ask for a wake-up.
	r.armWake()
}

// carry carries out each entry of *list with f, in order — those f's
// carrying out appends included (the engine may decide more meanwhile) —
// then empties the list.
func carry[T any](list *[]T, f func(T)) {
	for i := 0; i < len(*list); i++ {
		f((*list)[i])
	}
	*list = (*list)[:0]
}

// take moves the engine's Ready into the runner's work lists.
func (r *runner) take() {
	if !r.eng.HasReady() {
		return
	}
	r.eng.AppendTo(&r.work)
	for _, e := range r.work.Ejections {
		r.ejected(e)
	}
	r.work.Ejections = r.work.Ejections[:0]
}

// startDispatched starts a request the core dispatched: on its replica, or
// failed or delayed as the ground truth has it.
func (r *runner) startDispatched(x sched.Dispatch) {
	now := r.s.Now()
	req := r.owner(x.Req)
	if req.state != stWaiting {
		// Only a waiting request can start; anything else is a
		// dispatch carried out twice: a twin bug, which fails the run.
		r.doubleStarts++
		return
	}
	rt := &r.replicas[x.Replica]
	req.state = stRunning
	req.dispatchedAt = now
	if req.shadow {
		r.startShadow(req, x.Replica)
		return
	}
	if req.Core.Route > 0 {
		req.canary = req.Core.Route
	}
	r.metrics.routed(req)
	r.pools[rt.pool].Dispatched++
	if req.measured {
		r.residency.dispatch(r.p, req.Core.Tenant, rt.pool)
	}
	if r.faultState != nil {
		if fate := r.faultAtDispatch(req, x.Replica); fate.fail {
			r.failAttempt(req, x.Replica, fate)
			return
		} else if fate.delay > 0 {
			req.startAt = x.Replica
			req.startTimer = r.s.After(fate.delay, req.onStart)
			return
		}
	}
	r.startOn(req, x.Replica)
}

// completeCached answers a request from the cache: a lookup of 10 ms, no
// replica, no queue.
func (r *runner) completeCached(req *request) {
	req.Core.Replica = -1
	r.s.After(10*time.Millisecond, func() {
		req.firstAt = r.s.Now()
		r.complete(req)
	})
}

// startOn starts a dispatched request on its replica.
func (r *runner) startOn(req *request, ri int) {
	if req.state != stRunning || req.Core.Replica != ri {
		return // it expired while the injected latency delayed it
	}
	rt := &r.replicas[ri]
	if rt.eng == nil {
		r.serve(ri, req)
		return
	}
	if req.seq.Held() {
		// An earlier attempt's sequence is still in a failed replica's
		// step: leave it to that engine (Dropped frees it) and start
		// afresh.
		old := req.seq
		req.seq = r.newSeq()
		*req.seq = engine.Seq{Tag: req.idx, Prompt: old.Prompt, Output: old.Output, Blocks: old.Blocks}
		req.held = false
	} else if req.Life.Attempts > 1 {
		// A retry starts over: what an earlier attempt generated is lost.
		*req.seq = engine.Seq{Tag: req.idx, Prompt: req.seq.Prompt, Output: req.seq.Output, Blocks: req.seq.Blocks}
	}
	if req.Life.Migrations > req.migrated {
		// Its stream was cut and migrated: what it had generated is now
		// prompt, and it generates the rest.
		req.migrated = req.Life.Migrations
		req.seq.Prompt += req.cutGen
		req.seq.Output = max(req.seq.Output-req.cutGen, 1)
	}
	if r.pd != nil {
		if req.pd != nil {
			*req.pd = pdReq{} // an earlier attempt's (or request's) is over
		}
		if p := req.Core.Prefilling(); p >= 0 {
			r.pd.start(req, p)
			return
		}
		r.pd.local(req)
	}
	rt.eng.Add(r.s.Now(), req.seq)
	r.rearm(ri)
}

// serve starts a request on a service-time replica.
func (r *runner) serve(i int, req *request) {
	rt := &r.replicas[i]
	svc := r.p.pools[rt.pool].Spec.Service
	d := svc.Mean.D()
	if svc.Distribution == "exponential" {
		rng := r.svcRand
		if req.shadow {
			rng = r.shadowRand // copies never move the clients' draws
		}
		d = time.Duration(rng.ExpFloat64() * float64(d))
	}
	rt.svcReq = req
	rt.svcStart = r.s.Now()
	rt.timer = r.s.After(d, func() {
		rt.svcBusy += r.s.Now() - rt.svcStart
		rt.svcReq = nil
		req.firstAt = r.s.Now()
		r.complete(req)
	})
}

// rearm points replica i's timer at its engine's next event, and passes the
// engine's back-pressure on to the core.
func (r *runner) rearm(i int) {
	rt := &r.replicas[i]
	if b := rt.eng.Blocked(); b != rt.blocked {
		rt.blocked = b
		r.core.SetBlocked(r.s.Now(), i, b)
		defer r.dispatch()
	}
	next, busy := rt.eng.Next()
	if busy && rt.timer.Pending() && rt.timerAt == next {
		return
	}
	rt.timer.Stop()
	if !busy {
		return
	}
	rt.timerAt = next
	rt.timer = r.s.At(next, rt.onTimer)
}

// advance completes replica i's segment.
func (r *runner) advance(i int) {
	rt := &r.replicas[i]
	rt.eng.Advance(r.s.Now(), r)
	if r.pd != nil {
		if len(r.pd.prefilled) > 0 {
			r.pd.moved()
			defer r.dispatch() // a prefill slot freed
		}
		if r.pd.waiting[i].Len() > 0 {
			r.pd.pull(i) // the step may have freed KV for a pull
		}
	}
	done := r.done
	r.done = r.done[:0]
	r.rearm(i)
	firsts := r.firsts
	r.firsts = r.firsts[:0]
	for _, f := range firsts {
		r.eng.Step(r.s.Now(), reqengine.Event{Kind: reqengine.FirstToken, Req: &f.req.Req, Duplicate: f.duplicate})
	}
	if r.eng.HasReady() {
		r.dispatch() // a race decided: its loser is cancelled
	}
	for _, req := range done {
		r.complete(req)
	}
}

// FirstToken implements engine.Sink. The request engine hears of it after
// the engine's step (see advance): with a hedge in flight, the first
// attempt to produce a token wins.
func (r *runner) FirstToken(s *engine.Seq, at time.Duration) {
	req := r.reqs[s.Tag]
	switch {
	case s == req.seq && req.firstAt == 0:
		req.firstAt = at
		if !req.shadow && req.HedgePending() {
			r.firsts = append(r.firsts, firstToken{req, false})
		}
	case s == req.hedgeSeq && req.firstAt == 0:
		req.firstAt = at
		r.firsts = append(r.firsts, firstToken{req, true})
	}
}

// Done implements engine.Sink.
func (r *runner) Done(s *engine.Seq, _ time.Duration) {
	req := r.reqs[s.Tag]
	switch {
	case s == req.seq || s == req.hedgeSeq:
		// A hedge that finishes in the step it won settles first (see
		// advance), and the request completes on it.
		r.done = append(r.done, req)
	case req.pd != nil && s == req.pd.seq:
		r.pd.done(req) // a remote prefill is over
	default:
		r.freeSeq(s) // an abandoned attempt ran to its end: recycle it
	}
}

// Preempted implements engine.Sink; the engine counts preemptions.
func (r *runner) Preempted(*engine.Seq, time.Duration) {}

// Dropped implements engine.Sink: a cancelled request has left its replica
// and can be reused.
func (r *runner) Dropped(s *engine.Seq, _ time.Duration) {
	req := r.reqs[s.Tag]
	if req.seq != s {
		// An abandoned attempt's sequence (the request moved on, or the
		// slab entry now holds another request): only the sequence is
		// ours to recycle.
		r.freeSeq(s)
		return
	}
	if req.held {
		req.held = false
		if req.state == stDone {
			r.release(req)
		}
	}
}

// seqPool recycles engine sequences. Sequences are owned by the request's
// current attempt, or by an engine until it drops a cancelled one, and
// return to the pool from whichever lets go last. The runner embeds it:
// the hedges and copies take their sequences from it too.
type seqPool struct{ seqs []*engine.Seq }

// newSeq takes an engine sequence from the pool.
func (sp *seqPool) newSeq() *engine.Seq {
	if n := len(sp.seqs); n > 0 {
		s := sp.seqs[n-1]
		sp.seqs = sp.seqs[:n-1]
		return s
	}
	return new(engine.Seq)
}

func (sp *seqPool) freeSeq(s *engine.Seq) {
	*s = engine.Seq{}
	sp.seqs = append(sp.seqs, s)
}

func (r *runner) complete(req *request) {
	now := r.s.Now()
	if req.state != stRunning {
		return
	}
	if req.shadow {
		// Its answer is discarded; its figures are its canary's.
		r.step(reqengine.Event{Kind: reqengine.Answered, Req: &req.Req, Replica: req.Core.Replica, First: req.firstAt})
		return
	}
	sv := served{class: req.Core.Class, tenant: req.Core.Tenant, arrived: req.Core.Arrived,
		ttft: req.firstAt - req.Core.Arrived, e2e: now - req.Core.Arrived, wait: req.dispatchedAt - req.Core.Arrived,
		output: req.Core.Output, fallback: req.Core.Fallback}
	if ri := req.Core.Replica; ri >= 0 {
		sv.pool = r.p.pools[r.replicas[ri].pool].Spec.Name
	}
	if r.onComplete != nil {
		sched := req.dispatchedAt
		if req.seq.Admitted {
			sched = req.seq.Scheduled
		}
		r.onComplete(RequestLog{ID: req.Core.ID, Input: req.Core.Input, Output: req.Core.Output,
			Arrived: req.Core.Arrived, Dispatched: req.dispatchedAt, Scheduled: sched, FirstToken: req.firstAt, Done: now,
			Replica: req.Core.Replica, Served: req.Core.Served})
	}
	r.pd.completed(req)
	met := r.tally.complete(&sv, req.measured)
	r.metrics.completed(req, &sv)
	r.recent.complete(req.Core.Class, now, sv.ttft, sv.e2e, met)
	if r.recent != nil {
		pool := -1
		if ri := req.Core.Replica; ri >= 0 {
			pool = r.replicas[ri].pool
		}
		r.recent.tenantEnded(req.Core.Tenant, now, Completed, met, pool, req.Core.Served, req.Core.Served != req.Core.Model)
	}
	ri := req.Core.Replica
	if ri >= 0 {
		r.observeAttempt(req, ri, true, met)
		r.noteServed(req, ri)
		if r.pd != nil && r.p.links[req.Core.Served] != nil {
			p := -1 // prefilled on ri
			if req.pd != nil && req.pd.movedAt > 0 {
				p = req.pd.at
			}
			r.notePrefilled(req, p)
		}
	}
	r.noteOutcome(req, met, false)
	r.noteEnding(req, Completed, "", met)
	r.step(reqengine.Event{Kind: reqengine.Answered, Req: &req.Req, Replica: ri, Observed: ri >= 0,
		Latency: req.firstAt - req.dispatchedAt})
}

// expire handles a deadline: what carries out the request is stopped
// wherever it is, and the engine ends it.
func (r *runner) expire(req *request) {
	now := r.s.Now()
	switch req.state {
	case stRunning:
		r.observeAttempt(req, req.Core.Replica, false, false)
		r.pd.abort(req, false)
		rt := &r.replicas[req.Core.Replica]
		if rt.eng != nil {
			rt.eng.Cancel(now, req.seq)
			// A running sequence leaves the engine at the end of its
			// step: until Dropped, the request must not be reused.
			req.held = req.seq.Held()
			r.rearm(req.Core.Replica)
		} else {
			rt.timer.Stop()
			rt.svcBusy += now - rt.svcStart
			rt.svcReq = nil
		}
	case stFailing:
		req.attemptTimer.Stop()
	case stWaiting:
		if req.Core.Route > 0 {
			r.observeAttempt(req, -1, false, false) // it waited for the canary's candidate in vain
		}
	case stDone:
		return
	}
	r.step(reqengine.Event{Kind: reqengine.Gone, Req: &req.Req, Deadline: true})
}

// finish records a request's outcome, releases what it holds in the core
// (which may dispatch others), and recycles it. A request that ends without
// an answer (failed, rejected, timed out) misses its SLO in the fault
// windows it arrived in and is lost to the faults active now.
func (r *runner) finish(req *request, ri int, res Result, reason string) {
	if req.state == stDone {
		return
	}
	outcome, answered := res.count, res == Completed
	req.state = stDone
	r.demand.finish(req.Core.Class, r.s.Now(), r.s.Now()-req.Core.Arrived)
	r.metrics.finished(req, outcome, answered)
	req.deadline.Stop()
	req.attemptTimer.Stop()
	req.startTimer.Stop()
	if !answered {
		r.noteOutcome(req, false, true)
		r.noteEnding(req, res, reason, false)
		r.recent.unanswered(req.Core.Class, r.s.Now(), req.rejected)
		r.recent.tenantEnded(req.Core.Tenant, r.s.Now(), res, false, -1, 0, false)
	}
	if req.measured {
		r.count(req, outcome)
	}
	r.dropHedge(req)
	if ri >= 0 {
		r.jobs.drained(ri)
	}
	if !req.held {
		r.release(req)
	}
}

// armWake keeps one kernel timer at the request engine's wake-up. A
// pending one that is due no later is kept: a Tick with nothing due does
// nothing, and stopping and re-arming a kernel timer whenever the
// wake-up moves later (the core's comes and goes between the ladder's,
// the canaries' and the scalers' evaluations) costs more than the early
// Tick.
func (r *runner) armWake() {
	at := r.eng.WakeAt()
	if at == reqengine.NoWake || (r.coreWake.Pending() && r.coreWakeAt <= at) {
		return
	}
	r.coreWake.Stop()
	r.coreWakeAt = at
	r.coreWake = r.s.At(at, r.onWake)
}

func (r *runner) count(req *request, f func(*Counts)) {
	r.tally.count(req.Core.Class, req.Core.Tenant, req.Core.Arrived, f)
}

func (r *runner) owner(cr *sched.Request) *request {
	// NB: core is request's first field.
	return (*request)(unsafePointer(cr))
}

func (r *runner) alloc() *request { return r.entry() }

// entry takes a slab entry: a freed one, or a new one.
func (r *runner) entry() *request {
	if n := len(r.free); n > 0 {
		i := r.free[n-1]
		r.free = r.free[:n-1]
		req := r.reqs[i]
		*req = request{idx: i, onDeadline: req.onDeadline, onStart: req.onStart}
		return req
	}
	req := &request{idx: len(r.reqs)}
	req.onDeadline = func() { r.expire(req) }
	req.onStart = func() { r.startOn(req, req.startAt) }
	r.reqs = append(r.reqs, req)
	return req
}

func (r *runner) release(req *request) {
	if !req.shadow {
		r.eng.Release(&req.Req) // a copy is no client's request (see mirror)
	}
	if req.seq != nil {
		r.freeSeq(req.seq)
		req.seq = nil
	}
	r.free = append(r.free, req.idx)
}

// report assembles the final report.
func (r *runner) report() *Report {
	r.jobs.atEnd()
	// Whatever is still alive is in flight at the end.
	for _, req := range r.reqs {
		if req.state != stDone && req.measured {
			r.count(req, func(c *Counts) { c.InFlightAtEnd++ })
			r.tally.ended(req.Core.Tenant, req.Core.Model, req.Core.Arrived, false, true)
		}
	}
	return r.assemble()
}

// assemble builds the report: what the live Recorder reports the same way
// (assembleReport), then what only the twin knows.
func (r *runner) assemble() *Report {
	end := r.s.Now()
	rep := assembleReport(r.p, &r.tally, r.faults, end, r.pools)
	rep.Events = r.s.Events()
	rep.Hedges = r.hedges
	rep.Disaggregation = r.pd.report()
	rep.Migrations = r.migrations
	rep.Degradation = degradationReport(r.ladder, r.s.Now())
	rep.Canaries = r.canaryReports()
	rep.Forecast = r.demand.final(r.s.Now(), r.p.sc.Classes)
	r.residency.into(rep, r.p)
	rep.Timeline = append(rep.Timeline, r.timeline...)
	for i := range r.p.pools {
		poolUse(r.p, r.replicas, i, r.pools[i], end)
	}
	for _, sc := range r.scalers {
		autoscaleInto(rep, r.p.pools[sc.pool].Spec, SnapshotScaler(sc.sc, r.s.Now()), &r.tally)
	}
	for i, st := range r.p.sc.Workload {
		rep.Workload[st.Name] = r.streams[i]
	}
	for i, js := range r.p.sc.Jobs {
		jr := r.jobs.reports[i]
		jr.Wait = jr.wait.Summary()
		jr.GPUHoursUsed, jr.GPUHoursWasted = round(jr.GPUHoursUsed, 6), round(jr.GPUHoursWasted, 6)
		rep.Jobs[js.Name] = jr
	}
	return rep
}

// poolUse fills pr, pool i's report, with what its replicas' engines did
// until end: busy time, preemptions, steps and prefix-cache hits.
func poolUse(p *plan, replicas []replicaRT, i int, pr *PoolReport, end time.Duration) {
	pp := &p.pools[i]
	var busy time.Duration
	var lookups, hits uint64
	pr.Preemptions, pr.Steps = 0, 0
	for j := range replicas {
		rt := &replicas[j]
		switch {
		case rt.pool != i:
		case rt.eng != nil:
			busy += rt.eng.BusyTime
			pr.Preemptions += rt.eng.Preemptions
			pr.Steps += rt.eng.Steps
			l, h := rt.eng.PrefixStats()
			lookups += l
			hits += h
		default:
			busy += rt.svcBusy
		}
	}
	pr.PrefixBlocks = lookups
	if lookups > 0 {
		pr.PrefixHitRate = round(float64(hits)/float64(lookups), 6)
	}
	if n := pp.Spec.Replicas; n > 0 && end > 0 {
		pr.Utilization = round(busy.Seconds()/(float64(n)*end.Seconds()), 6)
	}
	pr.BusyGPUHours = round(busy.Hours()*float64(pp.Spec.GPUsPerReplica), 6)
}

// startSampling calls fn every period with every replica's state and the
// core's queues of models, until the end of the run (end, or nothing live).
func startSampling(s *sim.Sim, core *sched.Core, replicas []replicaRT, models int, end time.Duration, live func() bool,
	fn func(time.Duration, int, []ReplicaState), period time.Duration) {
	states := make([]ReplicaState, len(replicas))
	var tick func()
	tick = func() {
		for i := range replicas {
			rt := &replicas[i]
			if rt.eng == nil {
				n := 0
				if rt.svcReq != nil {
					n = 1
				}
				states[i] = ReplicaState{Running: n}
				continue
			}
			states[i] = ReplicaState{Running: rt.eng.Running(), Waiting: rt.eng.Load() - rt.eng.Running(),
				KVUsed: rt.eng.KVUsed(), KVTokens: rt.eng.KVCapacity()}
		}
		queued := 0
		for m := range models {
			queued += core.QueueLen(m)
		}
		fn(s.Now(), queued, states)
		if s.Now()+period <= end && live() {
			s.After(period, tick)
		}
	}
	s.At(period, tick)
}

// RunSlice is the granularity of a run's end: after its arrivals, a run
// ends at the first whole RunSlice of its time by which every request has
// ended (the drain's end at the latest), so that what happens shortly after
// the last request (a breaker closing, an ejection ending) is in its report.
// A live replay ends by the same rule.
const RunSlice = time.Minute
