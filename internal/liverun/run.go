package liverun

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/livefleet"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// DefaultSpeed is the time compression when Options.Speed is 0.
const DefaultSpeed = 10

// Options configure Run.
type Options struct {
	// Scenario is a library name or a YAML file; Sets override it.
	Scenario string
	Sets     []string
	// Expect adds expectations to the scenario's (scoped ones included).
	Expect []string
	// Speed is model seconds per wall second; 0: DefaultSpeed.
	Speed float64
	// Replicas caps each pool's containers; 0: the scenario's replicas.
	Replicas int
	// Image runs an existing node image instead of building one.
	Image string
	// NoTwin skips the twin run and the comparison.
	NoTwin bool
	// Logger logs the harness's progress (never prompts or keys).
	Logger *slog.Logger
	// BuildLog receives the node image's build output.
	BuildLog io.Writer
}

// Result is a live run: its report, the twin's for the same scenario as the
// live fleet runs it, and their comparison.
type Result struct {
	// Scenario is the scenario as run: pools cut to the replicas the fleet
	// has, no cold starts (emulated nodes start warm).
	Scenario *scenarios.Scenario
	// Sets reproduce Scenario from the base scenario: pass them to
	// `fleetdrill run` to rerun the twin side alone.
	Sets       []string
	Speed      float64
	Live       *twin.Report
	Twin       *twin.Report // nil with NoTwin
	Comparison *Comparison  // nil with NoTwin
	// WallS is how long the replay took, fleet start-up excluded.
	WallS float64
}

// Run replays the scenario through a live fleet and returns its report.
func Run(ctx context.Context, opts Options) (*Result, error) {
	speed := opts.Speed
	if speed == 0 {
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

	fl, err := livefleet.Build(ctx, livefleet.Options{Scenario: opts.Scenario, Sets: sets, Speed: speed,
		Image: opts.Image, BuildLog: opts.BuildLog, Logger: log})
	if err != nil {
		return nil, err
	}
	defer fl.Close(context.WithoutCancel(ctx))
	// The twin's regional outage swallows connections (attempts fail after
	// the health timeout), as a black-holing route does: so does the live
	// one.
	fl.OutageMode = livefleet.OutageHang
	if len(fl.Nodes) != rec.Replicas() {
		return nil, fmt.Errorf("live: the fleet has %d nodes, the scenario %d replicas (a harness bug)", len(fl.Nodes), rec.Replicas())
	}

	r := &replay{sc: sc, rec: rec, speed: speed, log: log, keys: map[int]string{}}
	var keys []gateway.Key
	for i, t := range sc.Tenants {
		k := "sk-live-" + randomHex(16)
		r.keys[i] = k
		keys = append(keys, gateway.Key{Tenant: t.Name, Key: k})
	}
	obs := &gateway.Observer{
		Breaker: func(at time.Duration, replica int, _ string, from, to sched.BreakerState) {
			r.mark(func(t0 time.Duration) { rec.Breaker(at-t0, replica, from, to) })
		},
		Attempt: func(at time.Duration, replica int, _ string, status int, _ bool) {
			if status == http.StatusTooManyRequests || status == http.StatusNotFound {
				r.mark(func(t0 time.Duration) { rec.Refusal(at-t0, replica, status) })
			}
		},
	}
	gw, err := gateway.New(gateway.Config{Scenario: sc, Backends: fl.Backends(), Keys: keys, Seed: sc.Seed,
		Speed: speed, Observer: obs, QueueTimeout: sc.Duration.D() + sc.Drain.D()})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gw.Close()
		return nil, err
	}
	srv := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	r.gw, r.url = gw, "http://"+ln.Addr().String()
	r.client = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096,
		IdleConnTimeout: 90 * time.Second, DisableCompression: true}}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		gw.Close()
		r.client.CloseIdleConnections()
	}()

	start := time.Now()
	end, err := r.run(ctx, fl, plans, arrivals)
	if err != nil {
		return nil, err
	}
	live, err := rec.Report(end, streams)
	if err != nil {
		return nil, fmt.Errorf("live report: %w", err)
	}
	res := &Result{Scenario: sc, Sets: sets, Speed: speed, Live: live, WallS: time.Since(start).Seconds()}
	if opts.NoTwin {
		return res, nil
	}
	_, twinSc, err := liveScenario(opts)
	if err != nil {
		return nil, err
	}
	if res.Twin, err = twin.Run(ctx, twinSc, twin.Options{}); err != nil {
		return nil, fmt.Errorf("twin: %w", err)
	}
	res.Comparison = Compare(res.Twin, res.Live)
	return res, nil
}

// liveScenario loads the scenario as the live fleet will run it: pools that
// cannot run on an emulated node (service-time pools, pools without a
// latency profile) get no replicas, others at most opts.Replicas, and none
// starts cold. It returns the --set overrides that make it so.
func liveScenario(opts Options) ([]string, *scenarios.Scenario, error) {
	base, err := scenarios.LoadNamedWithSets(opts.Scenario, opts.Sets)
	if err != nil {
		return nil, nil, err
	}
	sets := append([]string(nil), opts.Sets...)
	for _, p := range base.Pools {
		n := p.Replicas
		if p.Service != nil || len(p.Profiles) == 0 {
			n = 0
		} else if opts.Replicas > 0 {
			n = min(n, opts.Replicas)
		}
		if n != p.Replicas {
			sets = append(sets, fmt.Sprintf("pools.%s.replicas=%d", p.Name, n))
		}
		if p.StartCold {
			sets = append(sets, fmt.Sprintf("pools.%s.start_cold=false", p.Name))
		}
	}
	sc, err := scenarios.LoadNamedWithSets(opts.Scenario, sets)
	if err != nil {
		return nil, nil, fmt.Errorf("live: %w", err)
	}
	sc.Expect = append(sc.Expect, opts.Expect...)
	return sets, sc, nil
}

// checkFaults refuses, before anything starts, faults the live fleet cannot
// emulate.
func checkFaults(plans []twin.FaultPlan) error {
	var errs []error
	for _, p := range plans {
		s := p.Spec
		var why string
		switch {
		case s.Target.Tenant != "":
			why = "tenant targets have no live emulation"
		case s.Kind == faults.ColdStartStorm:
			why = "cold-start storms have no live emulation (nodes cannot reload a model)"
		case s.Kind == faults.QuotaExhaustion && (s.QuotaRPM != 0 || s.QuotaTPM != 0):
			why = "the node emulates a quota of zero only"
		case s.Kind == faults.DriverUpgrade && s.Driver == "":
			why = "a runtime-only upgrade has no live emulation"
		case len(p.Replicas) == 0:
			why = "it hits no replica of the live fleet"
		}
		if why != "" {
			errs = append(errs, fmt.Errorf("fault %s (%s): %s; drop it with --set faults=[...] to run live", p.Label, s.String(), why))
		}
	}
	return errors.Join(errs...)
}

// replay is one live run in progress.
type replay struct {
	sc     *scenarios.Scenario
	rec    *twin.Recorder
	speed  float64
	log    *slog.Logger
	keys   map[int]string
	gw     *gateway.Gateway
	url    string
	client *http.Client

	mu      sync.Mutex // guards rec and t0
	t0      time.Duration
	started bool
	pending []func(t0 time.Duration) // marks before t0 was known
}

// mark records into the recorder with the replay's origin, or keeps the
// mark until the origin is known (probes run before the replay starts).
func (r *replay) mark(fn func(t0 time.Duration)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		r.pending = append(r.pending, fn)
		return
	}
	fn(r.t0)
}

// now is model time since the replay began.
func (r *replay) now() time.Duration {
	r.mu.Lock()
	t0 := r.t0
	r.mu.Unlock()
	return r.gw.Now() - t0
}

// wall converts a model duration to wall time.
func (r *replay) wall(d time.Duration) time.Duration { return time.Duration(float64(d) / r.speed) }

// sleepUntil waits until model time at; false when ctx ended first.
func (r *replay) sleepUntil(ctx context.Context, at time.Duration) bool {
	d := r.wall(at - r.now())
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// run replays the arrivals and the faults, waits for the drain, and returns
// when it stopped (model time).
func (r *replay) run(ctx context.Context, fl *livefleet.Fleet, plans []twin.FaultPlan, arrivals []twin.Arrival) (time.Duration, error) {
	r.mu.Lock()
	r.t0, r.started = r.gw.Now(), true
	for _, fn := range r.pending {
		fn(r.t0)
	}
	r.pending = nil
	r.mu.Unlock()

	// Requests get a context that the end of the drain cancels: what is
	// still running then is in flight at the end.
	reqCtx, stopRequests := context.WithCancel(ctx)
	defer stopRequests()
	faultCtx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()

	var faultErr error
	var fwg sync.WaitGroup
	fwg.Go(func() { faultErr = r.runFaults(faultCtx, fl, plans) })

	var wg sync.WaitGroup
	for _, a := range arrivals {
		if !r.sleepUntil(ctx, a.At) {
			break
		}
		wg.Go(func() { r.send(reqCtx, a) })
	}
	// Drain: wait for the requests, at most the scenario's drain.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	drain := r.sc.Drain.D()
	if drain == 0 {
		drain = 10 * time.Minute
	}
	deadline := time.NewTimer(r.wall(max(r.sc.Duration.D()+drain-r.now(), 0)))
	select {
	case <-done:
	case <-deadline.C:
	case <-ctx.Done():
	}
	deadline.Stop()
	end := r.now()
	stopRequests()
	<-done
	stopFaults()
	fwg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return end, faultErr
}

// runFaults injects each fault at its start on the twin's replicas and undoes
// it at its end; at return every fault injected has been undone.
func (r *replay) runFaults(ctx context.Context, fl *livefleet.Fleet, plans []twin.FaultPlan) error {
	type step struct {
		at   time.Duration
		fn   func(context.Context) error
		what string
	}
	var steps []step
	undos := make([]livefleet.Undo, len(plans))
	var errs []error
	for i, p := range plans {
		nodes := make([]*livefleet.Node, 0, len(p.Replicas))
		for _, ri := range p.Replicas {
			nodes = append(nodes, fl.Nodes[ri])
		}
		inject := func(ctx context.Context) error {
			u, err := fl.InjectOn(ctx, p.Spec, nodes)
			undos[i] = u
			return err
		}
		begin := func(ctx context.Context) error {
			r.mark(func(t0 time.Duration) { r.rec.FaultStarted(i, r.gw.Now()-t0) })
			if p.Spec.Kind == faults.ModelRetirement {
				// The notice: new requests go to fallbacks; the model goes
				// at spec.At.
				return r.gw.SetRetiring(p.Spec.Target.Model, true)
			}
			return inject(ctx)
		}
		steps = append(steps, step{at: p.Start, fn: begin, what: "start " + p.Label})
		if p.Spec.Kind == faults.ModelRetirement {
			steps = append(steps, step{at: p.Spec.At, fn: inject, what: "retire " + p.Label})
		}
		if p.End > 0 {
			steps = append(steps, step{at: p.End, what: "end " + p.Label, fn: func(ctx context.Context) error {
				var err error
				if undos[i] != nil {
					err = undos[i](ctx)
					undos[i] = nil
				}
				if p.Spec.Kind == faults.ModelRetirement {
					err = errors.Join(err, r.gw.SetRetiring(p.Spec.Target.Model, false))
				}
				r.mark(func(t0 time.Duration) { r.rec.FaultEnded(i, r.gw.Now()-t0) })
				return err
			}})
		}
	}
	slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(a.at, b.at) })
	for _, s := range steps {
		if !r.sleepUntil(ctx, s.at) {
			break
		}
		r.log.Info("fault", "step", s.what, "at", s.at)
		if err := s.fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.what, err))
		}
	}
	// Undo whatever is still injected, whatever happened.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for i, u := range undos {
		if u != nil {
			if err := u(uctx); err != nil {
				errs = append(errs, fmt.Errorf("undo %s: %w", plans[i].Label, err))
			}
		}
	}
	return errors.Join(errs...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
