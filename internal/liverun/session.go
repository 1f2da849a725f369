package liverun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/httpguard"
	"github.com/fleetdrill/fleetdrill/internal/inproc"
	"github.com/fleetdrill/fleetdrill/internal/livefleet"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Session is a live replay in progress. Start it, then either Wait for its
// result or, from a console, follow it with Snapshot, inject faults with
// Inject and EndFault, and stop it with Report. Close it in every case.
//
// Its methods mirror twin.Drill's, so a console drives either: the wall
// clock drives a live replay, so Advance and Step only report where it is,
// and it cannot pause.
type Session struct {
	opts    Options
	speed   float64
	sc      *scenarios.Scenario
	sets    []string
	rec     *twin.Recorder
	streams map[string]twin.StreamReport
	fl      *livefleet.Fleet
	h       *hybrid // the fleet as the replay sees it: nodes and external endpoints
	gw      *gateway.Gateway
	srv     *http.Server
	r       *replay
	// In-process (Options.InProcess): the transport to the gateway and
	// the nodes, and what stops the nodes.
	inproc    *inproc.Transport
	procs     *inprocNodes
	stopNodes context.CancelFunc
	log       *slog.Logger

	cancel context.CancelFunc
	stop   chan struct{}
	once   sync.Once
	done   chan struct{}
	end    time.Duration
	runErr error
	wallS  float64

	// Guarded by r.mu: operator faults and the console's timeline.
	ops      map[int]*operatorFault
	timeline []twin.TimelineEvent
	detected map[int]time.Duration

	reportOnce sync.Once
	report     *twin.Report
	reportErr  error
	closeOnce  sync.Once
}

type operatorFault struct {
	plan      twin.FaultPlan
	undo      livefleet.Undo
	injecting chan struct{} // closed once the fleet has the fault (nil: not async)
	timer     *time.Timer   // its scheduled end, or retirement
	ended     bool
}

// Start builds the fleet and the gateway and starts the replay.
func Start(ctx context.Context, opts Options) (_ *Session, err error) {
	speed := opts.Speed
	switch {
	case opts.InProcess && len(opts.Backends) > 0:
		return nil, fmt.Errorf("live: in-process nodes and external backends (--backend) do not mix")
	case opts.InProcess && speed == 0:
		speed = 1 // on a synctest clock, time costs nothing
	case len(opts.Backends) > 0 && speed == 0:
		speed = 1 // real GPUs do not run faster
	case len(opts.Backends) > 0 && speed != 1:
		return nil, fmt.Errorf("live: speed %g with external backends (--backend): real GPU servers run in real time; use --speed 1", speed)
	case speed == 0:
		speed = DefaultSpeed
	}
	if speed < 0 || speed > 1000 {
		return nil, fmt.Errorf("live: speed %g, want in (0, 1000]", speed)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sets, sc, err := liveScenario(opts)
	if err != nil {
		return nil, err
	}
	if err := checkPolicy(sc); err != nil {
		return nil, err
	}
	if err := checkExternal(sc, opts.Backends); err != nil {
		return nil, err
	}
	rec, err := twin.NewRecorder(sc)
	if err != nil {
		return nil, err
	}
	plans := rec.Faults()
	if err := checkFaults(plans); err != nil {
		return nil, err
	}
	var arrivals []twin.Arrival
	streams, err := twin.Arrivals(sc, func(a twin.Arrival) error { arrivals = append(arrivals, a); return nil })
	if err != nil {
		return nil, err
	}
	s := &Session{opts: opts, speed: speed, sc: sc, sets: sets, rec: rec, streams: streams, log: log,
		stop: make(chan struct{}), done: make(chan struct{}), ops: map[int]*operatorFault{}, detected: map[int]time.Duration{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	s.h = &hybrid{external: opts.Backends, disrupt: opts.AllowDisrupt}
	if opts.InProcess {
		// The in-process nodes are, to the hybrid, external endpoints
		// (faults on them go through the gateway's fault layer) that
		// fleetdrill starts itself.
		if s.h.external, err = s.startInProcess(sc, speed); err != nil {
			return nil, err
		}
		s.h.procs = s.procs
	}
	if err := s.h.checkExternalFaults(sc, plans); err != nil {
		return nil, err
	}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf(format, args...))
		}
	}
	if pools := emulatedPools(sc, s.h.external); len(pools) > 0 {
		what := "building the node image and starting"
		if opts.Image != "" {
			what = "starting"
		}
		n := 0
		for _, p := range sc.Pools {
			if slices.Contains(pools, p.Name) {
				n += p.Replicas // an autoscaled pool's others start when granted
			}
		}
		progress("%s %d emulated replica(s) in Docker for %d pool(s)", what, n, len(pools))
		if s.fl, err = livefleet.Build(ctx, livefleet.Options{Scenario: opts.Scenario, Sets: sets, Speed: speed, Pools: pools,
			Image: opts.Image, BuildLog: opts.BuildLog, Logger: log}); err != nil {
			return nil, err
		}
		// The twin's regional outage swallows connections (attempts fail
		// after the health timeout), as a black-holing route does: so does
		// the live one.
		s.fl.OutageMode = livefleet.OutageHang
	}
	s.h.fl = s.fl
	if err := s.h.mapReplicas(sc); err != nil {
		return nil, err
	}
	if len(s.h.nodes) != rec.Replicas() {
		return nil, fmt.Errorf("live: the fleet has %d replicas, the scenario %d (a harness bug)", len(s.h.nodes), rec.Replicas())
	}

	// The replay's exact lengths (x_fleetdrill) pass the gateway only with
	// this run's secret: no other client may set them.
	r := &replay{sc: sc, rec: rec, speed: speed, log: log, keys: map[int]string{}, secret: randomHex(32)}
	r.onEvent = func(ev twin.TimelineEvent) { s.timeline = append(s.timeline, ev) }
	s.r = r
	var keys []gateway.Key
	for i, t := range sc.Tenants {
		k := "sk-live-" + randomHex(16)
		r.keys[i] = k
		keys = append(keys, gateway.Key{Tenant: t.Name, Key: k})
	}
	obs := &gateway.Observer{
		Breaker: func(at time.Duration, replica int, pool string, from, to sched.BreakerState) {
			r.mark(func(t0 time.Duration) {
				rec.Breaker(at-t0, replica, from, to)
				if tr := (sched.Transition{Replica: replica, From: from, To: to, At: at - t0}); !tr.Trial() {
					s.timeline = append(s.timeline, twin.BreakerEvent(at-t0, pool, tr))
				}
				if to == sched.Open {
					s.noteDetection(at-t0, replica)
				}
			})
		},
		// An ejection detects the replica's faults as a breaker opening
		// does, in the twin too: it is how a latency-only brownout is
		// seen.
		Ejection: func(at time.Duration, e sched.Ejection, pool string) {
			r.mark(func(t0 time.Duration) {
				// The replay's clock, as every mark's: Until too, so
				// that the entry says how long it lasts.
				e.At = at - t0
				if !e.Returned {
					e.Until -= t0
				}
				rec.Ejection(e.At, e)
				s.timeline = append(s.timeline, twin.EjectionEvent(pool, e))
				if !e.Returned {
					s.noteDetection(e.At, e.Replica)
				}
			})
		},
		Attempt: func(at time.Duration, replica int, _ string, status int, _ bool) {
			if faults.DetectedByStatus(status) { // 429 a quota, 404 a retired model
				r.mark(func(t0 time.Duration) { rec.Refusal(at-t0, replica, status) })
			}
		},
		// A canary's decision goes on the report's timeline, with what
		// it says of the faults on its candidate (twin.Recorder.Canary).
		Canary: func(at time.Duration, d sched.RolloutDecision) {
			r.mark(func(t0 time.Duration) {
				rec.Canary(at-t0, d)
				s.timeline = append(s.timeline, twin.CanaryEvent(at-t0, d))
			})
		},
		Dispatch: func(at time.Duration, replica, tenant int, arrived time.Duration) {
			r.mark(func(t0 time.Duration) { rec.Dispatch(at-t0, replica, tenant, arrived-t0) })
		},
		// An autoscaled pool's scale, grant, refusal and replica-ready,
		// worded like a twin run's timeline; ev.At is on the replay's
		// clock (Autoscaling.Start at its t0).
		Autoscale: func(_ time.Duration, ev sched.ScalerEvent) {
			r.mark(func(time.Duration) {
				te := twin.Event(ev.At, ev.Kind, ev.Detail)
				rec.Event(te)
				s.timeline = append(s.timeline, te)
			})
		},
		Ladder: func(at time.Duration, ch sched.LadderChange) {
			r.mark(func(t0 time.Duration) {
				ev := twin.Event(at-t0, reqengine.ChangeKind(ch), ch.Detail)
				rec.Event(ev)
				s.timeline = append(s.timeline, ev)
			})
		},
		Throttled: func(at time.Duration, replica int, _ string, retryAfter time.Duration) {
			r.mark(func(t0 time.Duration) { rec.Throttled(at-t0, replica, retryAfter) })
		},
	}
	if s.gw, err = gateway.New(gateway.Config{Scenario: sc, Backends: s.h.backends(), Keys: keys, Seed: sc.Seed, ReplaySecret: r.secret,
		Speed: speed, Observer: obs, HoldCanaries: true, Transport: s.transport(),
		HoldAutoscale: true, Provisioner: provisioner{s.h}, Logger: log}); err != nil {
		return nil, err
	}
	if err := checkReplicas(sc, s.h, s.gw); err != nil {
		return nil, err
	}
	if len(opts.Backends) > 0 {
		// External servers must serve the pool's model under its name
		// before anything is sent to them.
		if err := s.gw.Backends().Check(ctx); err != nil {
			return nil, fmt.Errorf("live: %w", err)
		}
		// A server taking less than the scenario believes is said now:
		// its limit is what the gateway routes by from here on.
		for _, l := range s.gw.Backends().Limits() {
			if l.Lower() {
				progress("%s", l)
			}
		}
	}
	r.gw = s.gw
	if s.inproc != nil {
		s.inproc.Handle(gatewayHost, s.gw.Handler())
		r.url, r.client = "http://"+gatewayHost, &http.Client{Transport: s.inproc}
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		// The harness's own loopback server: fleetdrill's listener
		// limits, bar the connection cap (the replay opens as many as
		// it has requests in flight, and is the only client).
		lim := httpguard.Defaults()
		lim.MaxConns, lim.MaxConnsPerIP = 0, 0
		s.srv = lim.Server(s.gw.Handler())
		go func() { _ = s.srv.Serve(ln) }()
		r.url = "http://" + ln.Addr().String()
		r.client = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096,
			IdleConnTimeout: 90 * time.Second, DisableCompression: true}}
	}

	model := sc.Duration.D() + sc.Drain.D()
	progress("replaying %d requests over %v of model time at speed %g: about %v of wall time",
		len(arrivals), model, speed, time.Duration(float64(model)/speed).Round(time.Second))
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() {
		defer close(s.done)
		start := time.Now()
		s.end, s.runErr = r.run(runCtx, s.h, plans, arrivals, s.stop)
		s.runErr = errors.Join(s.runErr, s.undoOperatorFaults())
		s.wallS = time.Since(start).Seconds()
	}()
	return s, nil
}

// Wait waits for the replay to end and returns its result, with the twin's
// run and the comparison unless Options.NoTwin.
func (s *Session) Wait(ctx context.Context) (*Result, error) {
	select {
	case <-s.done:
	case <-ctx.Done():
		s.halt()
		<-s.done
		return nil, ctx.Err()
	}
	live, err := s.Report()
	if err != nil {
		return nil, err
	}
	res := &Result{Scenario: s.sc, Sets: s.sets, Speed: s.speed, Live: live, External: s.opts.Backends, WallS: s.wallS,
		Limits: s.gw.Backends().Limits()}
	if s.opts.NoTwin {
		return res, nil
	}
	_, twinSc, err := liveScenario(s.opts)
	if err != nil {
		return nil, err
	}
	if s.opts.Progress != nil {
		s.opts.Progress("running the twin on the same scenario, for the comparison")
	}
	// The twin routes by the servers' limits too (sched.Core.LimitContext,
	// the gateway's path): else it would serve what they refuse.
	if res.Twin, err = twin.Run(ctx, twinSc, twin.Options{ContextLimits: s.gw.Backends().ContextLimits()}); err != nil {
		return nil, fmt.Errorf("twin: %w", err)
	}
	res.Comparison = Compare(res.Twin, res.Live)
	return res, nil
}

// halt stops sending requests and waiting for them: what is running is in
// flight at the end.
func (s *Session) halt() { s.once.Do(func() { close(s.stop) }) }

// Close stops the replay if it runs and removes the gateway and the fleet.
func (s *Session) Close() {
	s.closeOnce.Do(func() {
		if s.r != nil && s.cancel != nil {
			s.halt()
			<-s.done
		}
		if s.cancel != nil {
			s.cancel()
		}
		if s.srv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = s.srv.Shutdown(sctx)
			cancel()
		}
		if s.gw != nil {
			s.gw.Close()
		}
		if s.r != nil && s.r.client != nil {
			s.r.client.CloseIdleConnections()
		}
		if s.fl != nil {
			_ = s.fl.Close(context.Background())
		}
		if s.stopNodes != nil {
			s.stopNodes()
		}
	})
}

// Now is model time since the replay began.
func (s *Session) Now() time.Duration {
	select {
	case <-s.done:
		return s.end
	default:
	}
	return s.r.now()
}

// End is when the replay stops waiting at the latest: duration plus drain.
func (s *Session) End() time.Duration {
	d := s.sc.Drain.D()
	if d == 0 {
		d = 10 * time.Minute
	}
	return s.sc.Duration.D() + d
}

// Done reports whether the replay has ended.
func (s *Session) Done() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Advance does nothing: the wall clock drives a live replay.
func (s *Session) Advance(time.Duration) {}

// Step reports where the replay is: it cannot be stepped.
func (s *Session) Step() (time.Duration, bool) { return s.Now(), !s.Done() }

// TimelineLen is the number of entries on the console's timeline so far.
func (s *Session) TimelineLen() int {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return len(s.timeline)
}

// Scenario is the scenario as the live fleet runs it; Sets the overrides
// that make it from the base scenario.
func (s *Session) Scenario() *scenarios.Scenario { return s.sc }

// Sets returns the overrides that make the live scenario from the base.
func (s *Session) Sets() []string { return slices.Clone(s.sets) }

// Live reports that the session runs on the wall clock (no pause, no step).
func (s *Session) Live() bool { return true }

// Inject injects a fault now, on the replicas a twin run would pick: a line of
// the fault syntax whose at= is replaced by now (a model retirement's
// notice starts now); with for=, it ends that much later.
func (s *Session) Inject(line string) (string, error) {
	if s.Done() {
		return "", errors.New("the replay has ended")
	}
	sp, err := faults.Parse(line)
	if err != nil {
		return "", err
	}
	if why := sp.LiveGap(); why != "" {
		return "", fmt.Errorf("%s: %s", sp.Kind, why)
	}
	now := s.Now()
	sp = sp.StartingAt(now)
	s.r.mu.Lock()
	plan, idx, err := s.rec.AddFault(sp)
	s.r.mu.Unlock()
	if err != nil {
		return "", err
	}
	op := &operatorFault{plan: plan}
	ctx := context.Background()
	if sp.Kind.Traits().FromNotice {
		if err := s.gw.SetRetiring(sp.Target.Model, true); err != nil {
			return "", err
		}
		op.timer = time.AfterFunc(s.r.wall(sp.At-now), func() {
			u, err := injectSpec(ctx, s.sc, s.h, s.gw, sp, plan.Replicas, s.r.routeChanged(idx, plan.Label))
			s.r.mu.Lock()
			op.undo = u
			s.r.mu.Unlock()
			if err != nil {
				s.log.Warn("retire", "fault", plan.Label, "err", err)
			}
		})
	} else {
		// The fleet's side (toxics, containers) can take a while under
		// load: the console's driver must not wait for it.
		op.injecting = make(chan struct{})
		go func() {
			defer close(op.injecting)
			u, err := injectSpec(ctx, s.sc, s.h, s.gw, sp, plan.Replicas, s.r.routeChanged(idx, plan.Label))
			s.r.mu.Lock()
			defer s.r.mu.Unlock()
			op.undo = u
			if err != nil {
				s.event(s.r.wallNow(), "inject-failed", fmt.Sprintf("%s: %v", plan.Label, err))
			}
		}()
	}
	s.r.mu.Lock()
	s.ops[idx] = op
	s.rec.FaultStarted(idx, now)
	s.r.spans = append(s.r.spans, faultSpan(s.sc, now, plan.Replicas))
	s.timeline = append(s.timeline, twin.FaultStartEvent(now, plan.Label, sp.String(), len(plan.Replicas), "by the operator"))
	s.r.mu.Unlock()
	if sp.For > 0 {
		time.AfterFunc(s.r.wall(sp.At+sp.For-now), func() { _ = s.EndFault(plan.Label) })
	}
	return plan.Label, nil
}

// EndFault ends an operator's fault now. (The scenario's own faults keep
// their schedule.)
func (s *Session) EndFault(label string) error {
	return s.endFault(context.Background(), label)
}

// endFault is EndFault with the undo's context (withFinalUndo once the
// replay is over).
func (s *Session) endFault(ctx context.Context, label string) error {
	now := s.Now()
	s.r.mu.Lock()
	var idx = -1
	for i, op := range s.ops {
		if op.plan.Label == label && !op.ended {
			idx = i
		}
	}
	if idx < 0 {
		s.r.mu.Unlock()
		return fmt.Errorf("no active fault %s injected from the console", label)
	}
	op := s.ops[idx]
	op.ended = true
	if op.timer != nil {
		op.timer.Stop()
	}
	injecting := op.injecting
	s.rec.SetFaultEnd(idx, now)
	s.rec.FaultEnded(idx, now)
	s.timeline = append(s.timeline, twin.FaultEndEvent(now, label))
	s.r.mu.Unlock()
	if injecting != nil {
		<-injecting
	}
	s.r.mu.Lock()
	undo := op.undo
	s.r.mu.Unlock()
	var err error
	if undo != nil {
		err = undo(ctx)
	}
	if op.plan.Spec.Kind.Traits().FromNotice {
		err = errors.Join(err, s.gw.SetRetiring(op.plan.Spec.Target.Model, false))
	}
	return err
}

func (s *Session) undoOperatorFaults() error {
	s.r.mu.Lock()
	var labels []string
	for _, op := range s.ops {
		if !op.ended {
			labels = append(labels, op.plan.Label)
		}
	}
	s.r.mu.Unlock()
	var errs []error
	for _, l := range labels {
		errs = append(errs, s.endFault(withFinalUndo(context.Background()), l))
	}
	return errors.Join(errs...)
}

// event adds to the console's timeline; called with r.mu held.
func (s *Session) event(at time.Duration, kind, detail string) {
	s.timeline = append(s.timeline, twin.Event(at, kind, detail))
}

// noteDetection marks the faults a breaker opening (or an ejection) on
// replica detects; called with r.mu held.
func (s *Session) noteDetection(at time.Duration, replica int) {
	for i, fp := range s.rec.Faults() {
		active := at >= fp.Start && (fp.End == 0 || at < fp.End)
		if _, ok := s.detected[i]; !ok && active && slices.Contains(fp.Replicas, replica) {
			s.detected[i] = at
			s.timeline = append(s.timeline, twin.DetectedEvent(at, fp.Label, fp.Start))
		}
	}
}

// Report stops the replay if it still runs and returns its report.
func (s *Session) Report() (*twin.Report, error) {
	s.reportOnce.Do(func() {
		s.halt()
		<-s.done
		if s.runErr != nil {
			s.reportErr = s.runErr
			return
		}
		// The canaries, from the gateway's rollouts and the faults as
		// injected: read under the gateway's lock, before r.mu (its
		// observer callbacks take r.mu under the gateway's lock).
		s.r.mu.Lock()
		spans := slices.Clone(s.r.spans)
		s.r.mu.Unlock()
		var canaries map[string]*twin.CanaryReport
		s.gw.CanaryInputs(func(ro *sched.Rollouts, cfg *sched.Config, residency uint64) {
			canaries = twin.CanaryReports(s.sc, ro, cfg, spans, residency)
		})
		// The autoscaled pools' scalers, up to the replay's end.
		scalers := map[string]twin.ScalerSnapshot{}
		s.gw.Autoscaling().Scalers(func(pool string, sc *sched.Scaler, now time.Duration) {
			scalers[pool] = twin.SnapshotScaler(sc, min(now, s.end))
		})
		s.r.mu.Lock()
		defer s.r.mu.Unlock()
		s.rec.SetCanaries(canaries)
		s.rec.SetAutoscaling(scalers)
		s.report, s.reportErr = s.rec.Report(s.end, s.streams)
		if s.reportErr != nil {
			s.reportErr = fmt.Errorf("live report: %w", s.reportErr)
		}
	})
	return s.report, s.reportErr
}

// Recorded returns every fault line as the replay ran it.
func (s *Session) Recorded() []string {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.rec.FaultLines()
}

// Snapshot is the replay's state now, from the gateway's view of the fleet.
func (s *Session) Snapshot() twin.Snapshot {
	now := s.Now()
	sc := s.sc
	snap := twin.Snapshot{Scenario: sc.Name, Seed: sc.Seed, Now: now, End: s.End(), Duration: sc.Duration.D(), Done: s.Done()}
	s.gw.Ladder(func(l *sched.Ladder) { snap.Degradation = twin.LadderView(l) })
	var replicaPool []int
	for pi := range sc.Pools {
		for range compile.PoolReplicas(&sc.Pools[pi]) {
			replicaPool = append(replicaPool, pi)
		}
	}
	views := map[string]*twin.AutoscaleState{}
	s.gw.Autoscaling().Scalers(func(pool string, sc *sched.Scaler, now time.Duration) { views[pool] = twin.AutoscaleView(sc, now) })
	defer func() {
		for i := range snap.Regions {
			for j := range snap.Regions[i].Pools {
				ps := &snap.Regions[i].Pools[j]
				ps.Autoscale = views[ps.Name]
			}
		}
	}()
	s.gw.View(func(core *sched.Core, cnow time.Duration) {
		snap.Regions = twin.FleetState(sc, core, cnow, replicaPool, nil, true)
		for m, model := range sc.Models {
			ms := twin.ModelState{Name: model.Name, Queue: core.QueueLen(m)}
			for t, tn := range sc.Tenants {
				rt := core.Explain(cnow, t, 0, m)
				st := twin.RouteState{Tenant: tn.Name, Fallback: rt.Fallback}
				if rt.Served >= 0 {
					st.Served = sc.Models[rt.Served].Name
				}
				for _, pi := range rt.Pools {
					st.Pools = append(st.Pools, sc.Pools[pi].Name)
				}
				for _, sk := range rt.Skipped {
					st.Skipped = append(st.Skipped, twin.ReasonCount{Reason: sk.Reason, Count: sk.Count})
				}
				ms.Routes = append(ms.Routes, st)
			}
			snap.Models = append(snap.Models, ms)
		}
	})
	// What waits for a first token at the gateway now, by class name:
	// read outside r.mu, as the gateway's locks come before it (its
	// observer callbacks take r.mu).
	waiting, tenantsWaiting := s.gw.Waiting(), s.gw.TenantsWaiting()
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	snap.Classes = s.rec.Recent(now, twin.DrillWindow)
	snap.Tenants = s.rec.RecentTenants(now, twin.DrillWindow)
	for _, tw := range tenantsWaiting {
		if ti := slices.IndexFunc(snap.Tenants, func(t twin.TenantState) bool { return t.Name == tw.Tenant }); ti >= 0 {
			snap.Tenants[ti].Waiting, snap.Tenants[ti].OldestWaiting = tw.Count, tw.Oldest
		}
	}
	ages := make([][]time.Duration, len(snap.Classes))
	for _, w := range waiting {
		if ci := slices.IndexFunc(snap.Classes, func(c twin.ClassState) bool { return c.Name == w.Class }); ci >= 0 {
			ages[ci] = w.Ages
		}
	}
	s.rec.AddWaiting(snap.Classes, now, twin.DrillWindow, ages)
	snap.Requests = s.rec.Counts()
	for i, fp := range s.rec.Faults() {
		fs := twin.FaultState{Label: fp.Label, Spec: fp.Spec.String(), Start: fp.Start, End: fp.End,
			Active: now >= fp.Start && (fp.End == 0 || now < fp.End), Detect: -1, Mitigate: -1, Recover: -1}
		if op, ok := s.ops[i]; ok {
			fs.Injected = true
			fs.Active = !op.ended
		}
		if d, ok := s.detected[i]; ok {
			fs.Detect = d - fp.Start
		}
		snap.Faults = append(snap.Faults, fs)
	}
	ev := s.timeline
	if len(ev) > 500 {
		ev = ev[len(ev)-500:]
	}
	snap.Events = slices.Clone(ev)
	return snap
}
