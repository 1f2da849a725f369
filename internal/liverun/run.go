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
	"net/http"
	"slices"
	"sync"
	"time"

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
	// Backends are external endpoints (pool → "KIND+URL" per replica, as
	// the gateway's --backend): those pools are served there, real GPU
	// servers fleetdrill never starts or stops, the others by emulated
	// nodes. With any, the replay runs in real time (Speed 1): real GPUs
	// do not run faster.
	Backends map[string][]string
	// InProcess serves every pool from emulated nodes in this process,
	// reached with no socket (internal/inproc), as is the gateway: a run
	// that a testing/synctest bubble can hold on its fake clock, with no
	// container and no Docker. Faults on the nodes go through the
	// gateway's fault layer, as on external endpoints; Speed defaults to
	// 1. It does not mix with Backends.
	InProcess bool
	// AllowDisrupt is the operator's command that stops and starts an
	// external endpoint (run as `sh -c` with FLEETDRILL_ACTION=stop|start,
	// FLEETDRILL_POOL, FLEETDRILL_BACKEND); without it a fault that must
	// stop one (node-loss) is refused before anything starts.
	AllowDisrupt string
	// Logger logs the harness's progress (never prompts or keys).
	Logger *slog.Logger
	// BuildLog receives the node image's build output.
	BuildLog io.Writer
	// Progress, when set, hears each long stage as it starts (building
	// the image, starting the fleet, the replay, the twin's run), in a
	// few words: a terminal shows it, so minutes of work are never silent.
	Progress func(stage string)
}

// Result is a live run: its report, the twin's for the same scenario as the
// live fleet runs it, and their comparison.
type Result struct {
	// Scenario is the scenario as run: pools cut to the replicas the fleet
	// has, no cold starts (emulated nodes start warm).
	Scenario *scenarios.Scenario
	// Sets reproduce Scenario from the base scenario: pass them to
	// `fleetdrill run` to rerun the twin side alone.
	Sets  []string
	Speed float64
	Live  *twin.Report
	// External are the pools served by external endpoints (real servers),
	// as given: what the comparison checks the twin against.
	External map[string][]string
	// Limits are what the external servers publish of the longest
	// request they take (vLLM's max_model_len, TGI's max_total_tokens),
	// read at start; the gateway, and the twin compared with it, route
	// by the smaller of each and the scenario's (gateway.ServerLimit).
	Limits     []gateway.ServerLimit
	Twin       *twin.Report // nil with NoTwin
	Comparison *Comparison  // nil with NoTwin
	// WallS is how long the replay took, fleet start-up excluded.
	WallS float64
}

// Run replays the scenario through a live fleet and returns its report.
func Run(ctx context.Context, opts Options) (*Result, error) {
	s, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Wait(ctx)
}

// liveScenario loads the scenario as the live fleet will run it: pools that
// cannot run on an emulated node (service-time pools, pools with neither a
// latency profile nor a derived one) get no replicas, others at most opts.Replicas, and none
// starts cold. It returns the --set overrides that make it so.
func liveScenario(opts Options) ([]string, *scenarios.Scenario, error) {
	base, err := scenarios.LoadNamedWithSets(opts.Scenario, opts.Sets)
	if err != nil {
		return nil, nil, err
	}
	sets := append([]string(nil), opts.Sets...)
	for _, p := range base.Pools {
		n := p.Replicas
		ext, isExt := opts.Backends[p.Name]
		switch {
		case isExt && p.Autoscale != nil:
			// An autoscaled pool's endpoints are the replicas it may
			// have: its maximum, and no more at the start or floor.
			m := len(ext)
			n = min(n, m)
			sets = append(sets, fmt.Sprintf("pools.%s.autoscale.max_replicas=%d", p.Name, m),
				fmt.Sprintf("pools.%s.autoscale.min_replicas=%d", p.Name, min(p.Autoscale.MinReplicas, m)))
		case isExt:
			n = len(ext) // an external pool has the replicas it has
		case p.Service != nil || (len(p.Profiles) == 0 && !p.Derives()):
			n = 0
			if p.Autoscale != nil {
				sets = append(sets, fmt.Sprintf("pools.%s.autoscale=null", p.Name), fmt.Sprintf("pools.%s.acquisition=null", p.Name))
			}
		case opts.Replicas > 0 && p.Autoscale == nil:
			// An autoscaled pool keeps its bounds: its scaler decides.
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

// checkPolicy refuses, by name and before anything starts, the parts of a
// scenario's policy the live gateway does not carry out: run live, they
// would be dropped silently and the comparison with the twin would compare
// two policies.
//
// Canaries and their shadow traffic run live (the gateway's canary.go), to
// emulated and external candidates alike: nothing of them is refused.
func checkPolicy(sc *scenarios.Scenario) error {
	var errs []error
	if sc.Policy.Retries.MigrationLimit > 0 {
		errs = append(errs, errors.New("policy.retries.migration_limit: the live gateway cannot migrate a cut stream (it would splice a second answer onto one the client is reading); run it on the twin, or --set policy.retries.migration_limit=0"))
	}
	// The gateway runs the ladder (reqengine.Ladder, the twin's too), bar the
	// rung it has nothing to serve from.
	for i, st := range sc.Policy.Degradation {
		if st.Action == sched.CachedAnswers {
			errs = append(errs, fmt.Errorf("policy.degradation[%d] (%s): cached-answers cannot run live: the gateway has no answer cache; drop the rung with --set 'policy.degradation=[...]' to run live", i, st.Name))
		}
	}
	return errors.Join(errs...)
}

// checkFaults refuses, before anything starts, faults the live fleet cannot
// emulate (faults.Spec.LiveGap).
func checkFaults(plans []twin.FaultPlan) error {
	var errs []error
	for _, p := range plans {
		why := p.Spec.LiveGap()
		if why == "" && len(p.Replicas) == 0 {
			why = "it hits no replica of the live fleet"
		}
		if why != "" {
			errs = append(errs, fmt.Errorf("fault %s (%s): %s; drop it with --set faults=[...] to run live", p.Label, p.Spec.String(), why))
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
	secret string // the gateway's Config.ReplaySecret, sent with every request
	gw     *gateway.Gateway
	url    string
	client *http.Client

	mu      sync.Mutex               // guards rec and t0
	onEvent func(twin.TimelineEvent) // a console's timeline; called with mu held
	t0      time.Duration
	started bool
	pending []func(t0 time.Duration) // marks before t0 was known
	// spans are the faults as injected (replay time, the pools their
	// replicas are in), for the canaries' time to rollback.
	spans []twin.FaultSpan
}

// faultSpan is a fault injected at at on replicas, as the canaries' report
// reads it.
func faultSpan(sc *scenarios.Scenario, at time.Duration, replicas []int) twin.FaultSpan {
	sp := twin.FaultSpan{Start: at}
	names := replicaPools(sc)
	for _, ri := range replicas {
		if ri < 0 || ri >= len(names) {
			continue
		}
		pi := slices.IndexFunc(sc.Pools, func(p scenarios.Pool) bool { return p.Name == names[ri] })
		if pi >= 0 && !slices.Contains(sp.Pools, pi) {
			sp.Pools = append(sp.Pools, pi)
		}
	}
	return sp
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

// wallNow is model time since the replay began, for a caller holding mu.
func (r *replay) wallNow() time.Duration { return r.gw.Now() - r.t0 }

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
func (r *replay) run(ctx context.Context, fl *hybrid, plans []twin.FaultPlan, arrivals []twin.Arrival, stop <-chan struct{}) (time.Duration, error) {
	r.mu.Lock()
	r.t0, r.started = r.gw.Now(), true
	for _, fn := range r.pending {
		fn(r.t0)
	}
	r.pending = nil
	t0 := r.t0
	r.mu.Unlock()
	// The canaries' schedule counts from the replay's start, as the
	// twin's from its run's (outside mu: the gateway's lock comes first).
	r.gw.StartCanaries(t0)
	r.gw.Autoscaling().Start(t0)

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
	sendCtx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	go func() {
		select {
		case <-stop:
			stopSending()
		case <-sendCtx.Done():
		}
	}()
	for _, a := range arrivals {
		if !r.sleepUntil(sendCtx, a.At) {
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
		// Then to the next whole twin.RunSlice, the twin's end: what
		// follows the last request shortly is in both reports.
		if rest := r.sc.Duration.D() + drain - r.now(); rest > 0 {
			next := (r.now()/twin.RunSlice + 1) * twin.RunSlice
			wait := time.NewTimer(r.wall(min(next-r.now(), rest)))
			select {
			case <-wait.C:
			case <-ctx.Done():
			case <-stop:
			}
			wait.Stop()
		}
	case <-deadline.C:
	case <-ctx.Done():
	case <-stop:
	}
	deadline.Stop()
	end := r.now()
	// The report reads the scalers as they stood at the end.
	r.gw.Autoscaling().Stop()
	stopRequests()
	<-done
	stopFaults()
	fwg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return end, faultErr
}

// runFaults injects each fault at its start on the twin's replicas (injectSpec:
// the gateway's fault layer and the fleet) and undoes it at its end; at
// return every fault injected has been undone.
func (r *replay) runFaults(ctx context.Context, fl *hybrid, plans []twin.FaultPlan) error {
	type step struct {
		at   time.Duration
		fn   func(context.Context) error
		what string
	}
	var steps []step
	undos := make([]livefleet.Undo, len(plans))
	var errs []error
	for i, p := range plans {
		notice := p.Spec.Kind.Traits().FromNotice
		inject := func(ctx context.Context) error {
			u, err := injectSpec(ctx, r.sc, fl, r.gw, p.Spec, p.Replicas, r.routeChanged(i, p.Label))
			undos[i] = u
			return err
		}
		begin := func(ctx context.Context) error {
			r.mark(func(t0 time.Duration) {
				at := r.gw.Now() - t0
				r.rec.FaultStarted(i, at)
				r.spans = append(r.spans, faultSpan(r.sc, at, p.Replicas))
				if r.onEvent != nil {
					r.onEvent(twin.FaultStartEvent(at, p.Label, p.Spec.String(), len(p.Replicas), ""))
				}
			})
			if notice {
				// The notice: new requests go to fallbacks; the model goes
				// at spec.At.
				return r.gw.SetRetiring(p.Spec.Target.Model, true)
			}
			return inject(ctx)
		}
		steps = append(steps, step{at: p.Start, fn: begin, what: "start " + p.Label})
		if notice {
			steps = append(steps, step{at: p.Spec.At, fn: inject, what: "retire " + p.Label})
		}
		if p.End > 0 {
			steps = append(steps, step{at: p.End, what: "end " + p.Label, fn: func(ctx context.Context) error {
				var err error
				if undos[i] != nil {
					err = undos[i](ctx)
					undos[i] = nil
				}
				if notice {
					err = errors.Join(err, r.gw.SetRetiring(p.Spec.Target.Model, false))
				}
				r.mark(func(t0 time.Duration) {
					at := r.gw.Now() - t0
					r.rec.FaultEnded(i, at)
					if r.onEvent != nil {
						r.onEvent(twin.FaultEndEvent(at, p.Label))
					}
				})
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
	// A fault with no end holds to the replay's end (ctx is cancelled
	// then), as in the twin: not only to the last step.
	<-ctx.Done()
	// Undo whatever is still injected, whatever happened.
	uctx, cancel := context.WithTimeout(withFinalUndo(context.WithoutCancel(ctx)), time.Minute)
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

// routeChanged records fault i's route changes (a driver upgrade's) as
// the twin's timeline has them, and on the console's.
func (r *replay) routeChanged(i int, label string) routeChanged {
	return func(model, pool string, reasons []string, version int) {
		at := r.gw.Now()
		r.mark(func(t0 time.Duration) {
			detail := twin.RouteChange(label, model, pool, reasons, version)
			r.rec.RouteChange(at-t0, i, detail, len(reasons) > 0)
			if r.onEvent != nil {
				r.onEvent(twin.Event(at-t0, "route-change", detail))
			}
		})
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
