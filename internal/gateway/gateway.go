package gateway

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Gateway is the live gateway. Create it with New, serve Handler, and Close
// it when the server has shut down.
type Gateway struct {
	sc *scenarios.Scenario
	// disagg: a model is served disaggregated, so a dispatch may carry a
	// prefill leg (prefill.go); without, forward never asks.
	disagg  bool
	cfg     Config
	log     *slog.Logger
	clk     clock
	obs     Observer
	reg     *prometheus.Registry
	metrics *metrics

	replicas []replica
	byPool   map[string][]int // pool → its replicas, in the order of its URLs
	models   map[string]int
	served   []string // models some replica serves, sorted
	classes  map[string]int
	defClass int
	be       *Backends   // the client, loads, start-up check (backends.go); under mu
	prober   *prober     // health probes and load scrapes (prober.go)
	faults   *FaultLayer // faults injected on the replicas (faultlayer.go); its own lock
	lim      *Limits     // keys, body limits and refusals (limits.go)
	first    awaiting    // requests waiting for their first token (waiting.go)

	// mu owns the core and everything below it. The parts split out that
	// change the core or live beside it (sched's jobs, copies, as, be)
	// hold a pointer to it and take it themselves: one lock, as before the
	// split, so a dispatch and a scaler's change are never torn apart.
	mu      sync.Mutex
	core    *sched.Core
	eng     *reqengine.Engine // the request engine (both drivers'): the core, the lifecycle, the ladder's judgement, the requests' timers
	calls   callTable         // the requests whose handlers run
	nextID  uint64
	nonce   string           // this gateway's, for idempotency keys unique across restarts
	lc      *sched.Lifecycle // requests' lives around the core (the engine's)
	wakeAt  time.Duration    // the request engine's wake-up (model time), a job of sched; reqengine.NoWake: none
	closed  bool
	report  *reporter         // breakers' transitions and failed attempts, to the log and the Observer (observer.go)
	ejected []bool            // per replica: out of routing as a latency outlier, as last reported
	ladder  *reqengine.Ladder // the degradation ladder (degrade.go); nil without one

	// Canaries (canary.go): the rollouts (nil without canaries) over the
	// core's configuration, their clock's origin; the shadow copies in the
	// core (shadow.go: set by New, then only read; the copies are under
	// mu).
	coreCfg sched.Config
	can     *reqengine.Canaries // the request engine's canaries (canary.go)
	copies  *shadowCopies

	// The autoscaled pools (autoscale.go): set by New, then only read;
	// their state is under mu.
	as *Autoscaling

	probeCancel context.CancelFunc // stops the probes and the ladder's evaluations
	probeCtx    context.Context    // theirs
	// sched runs the core's wake-up, the ladder, the canaries and the
	// scalers at their model times (schedule.go). Set by New, then only
	// read; its jobs read their due times under mu.
	sched   *schedule
	trials  sync.WaitGroup // probes sent as half-open breakers' trials
	rs      restarts       // replicas loading after a restart (restart.go); under mu
	probeWG sync.WaitGroup
}

type replica struct {
	pool     string
	pi       int    // the pool's index in the core's configuration
	region   string // the pool's
	url      string
	host     string // for the inflight metric: host:port, never userinfo or path
	model    int
	maxBatch int    // the core's: sequences it sends the replica at once
	kind     Kind   // what serves there (see Kind)
	health   string // the URL its probe GETs
}

type keyEntry struct {
	digest [sha256.Size]byte
	tenant int
}

// call is one client request as the driver tracks it: the request
// engine's record of it, and what the engine decided for it that its
// handler has not carried out yet.
// requestOf is the handler's record of a request whose engine record is
// q (call, and its Req, are each the first field).
func requestOf(q *reqengine.Req) *request { return (*request)(unsafe.Pointer(q)) }

type call struct {
	reqengine.Req               // must stay the first field (the engine's record)
	dispatched    time.Duration // model time of the last dispatch; set before its start is posted
	held          bool          // the core holds it (admitted, its attempt not ended)
	// notes are the engine's decisions for this request, in order, for
	// its handler (under mu); wake says there are some.
	notes []note
	wake  chan struct{}
}

// noteKind is what a note says.
type noteKind uint8

const (
	noteJudged  noteKind = iota + 1 // the ladder's verdict (its effect applied to Core)
	noteOffer                       // an offer to the core and what follows
	noteReoffer                     // back from a backoff: a retry or a deferral ending
	noteStart                       // start an attempt on replica
	noteHedge                       // start its duplicate on replica
	noteCancel                      // cancel an attempt of its hedge race
	noteAnswer                      // the outcome is decided
)

// note is one of the engine's decisions for a request, which its handler
// carries out (degrade.go, proxy.go).
type note struct {
	kind    noteKind
	judged  reqengine.Judged
	offer   reqengine.Offer
	retry   bool
	replica int
	cancel  reqengine.Cancel
	answer  reqengine.Answer
}

// callTable is the requests whose handlers run, by ID, and how many of
// them the core holds (queued or dispatched). Under mu.
type callTable struct {
	m              map[uint64]*call
	held, heldPeak int // held now, and most at once
}

// post hands n to the handler of the request whose core request is cr,
// if it still runs.
func (t *callTable) post(cr *sched.Request, n note) {
	if c := t.m[cr.ID]; c != nil {
		c.post(n)
	}
}

// hold counts c among the core's requests, once.
func (t *callTable) hold(c *call) {
	if !c.held {
		c.held = true
		t.held++
		t.heldPeak = max(t.heldPeak, t.held)
	}
}

// unhold counts c out of the core's requests.
func (t *callTable) unhold(c *call) {
	if c.held {
		c.held = false
		t.held--
	}
}

// post hands n to c's handler. Called with mu held.
func (c *call) post(n note) {
	c.notes = append(c.notes, n)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// New builds a gateway and starts its health probes.
func New(cfg Config) (*Gateway, error) {
	if cfg.Scenario == nil {
		return nil, errors.New("gateway: no scenario")
	}
	if !(cfg.Speed >= 0 && cfg.Speed <= MaxSpeed) {
		return nil, fmt.Errorf("gateway: speed %g, want in (0, %d] model seconds per wall second (0 means 1)", cfg.Speed, MaxSpeed)
	}
	if cfg.Speed == 0 {
		cfg.Speed = 1
	}
	if cfg.Scenario.Policy.Retries.MigrationLimit > 0 {
		return nil, errors.New("gateway: policy.retries.migration_limit: the live gateway cannot migrate a cut stream (it would splice a second answer onto one the client is reading); leave it 0 to run live")
	}
	sc := *cfg.Scenario
	sc.Pools = slices.Clone(sc.Pools)
	for pool := range cfg.Backends {
		if !slices.ContainsFunc(sc.Pools, func(p scenarios.Pool) bool { return p.Name == pool }) {
			return nil, fmt.Errorf("gateway: backends for pool %q, which the scenario lacks", pool)
		}
	}
	for i := range sc.Pools {
		ps := &sc.Pools[i]
		n := len(cfg.Backends[ps.Name])
		if a := ps.Autoscale; a != nil && n > 0 {
			// An autoscaled pool's backends are its replicas up to its
			// maximum; it starts with `replicas` of them.
			c := *a
			c.MaxReplicas, c.MinReplicas = n, min(c.MinReplicas, n)
			ps.Autoscale, ps.Replicas = &c, min(ps.Replicas, n)
		} else {
			ps.Autoscale, ps.Replicas = nil, n
		}
		ps.StartCold = false
	}
	core, err := compile.CoreConfig(&sc)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if len(core.Replicas) == 0 {
		return nil, errors.New("gateway: no backends: give at least one pool a replica URL")
	}
	if err := checkLadder(core); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{sc: &sc, cfg: cfg, log: cfg.Logger, clk: clock{start: time.Now(), speed: cfg.Speed}, reg: cfg.Registry,
		models: map[string]int{}, classes: map[string]int{}, calls: callTable{m: map[uint64]*call{}}, byPool: map[string][]int{},
		lc: sched.NewLifecycle(compile.RetryPolicy(&sc), sc.Policy.Retries.RetryRejected)}
	for _, m := range sc.Models {
		g.disagg = g.disagg || m.Disaggregation != nil
	}
	// Not from the seeded stream: keys must differ between two gateways
	// started with the same seed.
	var nb [6]byte
	_, _ = crand.Read(nb[:])
	g.nonce = hex.EncodeToString(nb[:])
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.reg == nil {
		g.reg = prometheus.NewRegistry()
	}
	if cfg.Observer != nil {
		g.obs = *cfg.Observer
	}
	if g.cfg.DefaultMaxTokens <= 0 {
		g.cfg.DefaultMaxTokens = 256
	}
	tr := cfg.Transport
	if tr == nil {
		tr = &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}
		if cfg.BackendCA != nil {
			tr.(*http.Transport).TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.BackendCA}
		}
	}
	if cfg.BackendKey != "" {
		if err := checkBackendKey(cfg.BackendKey); err != nil {
			return nil, err
		}
		tr = &keyedTransport{auth: "Bearer " + cfg.BackendKey, next: tr}
	}
	// Redirects are not followed: a backend's answer is passed on as it
	// is, and the backend key never goes to another host.
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, m := range sc.Models {
		g.models[m.Name] = i
	}
	for i, c := range sc.Classes {
		g.classes[c.Name] = i
	}
	if cfg.DefaultClass != "" {
		ci, ok := g.classes[cfg.DefaultClass]
		if !ok {
			return nil, fmt.Errorf("gateway: default class %q is not a scenario class", cfg.DefaultClass)
		}
		g.defClass = ci
	}
	var keys []keyEntry
	tenants := map[string]int{}
	for i, t := range sc.Tenants {
		tenants[t.Name] = i
	}
	for _, k := range cfg.Keys {
		ti, ok := tenants[k.Tenant]
		if !ok {
			return nil, fmt.Errorf("gateway: key for tenant %q, which the scenario lacks", k.Tenant)
		}
		if k.Key == "" {
			return nil, fmt.Errorf("gateway: empty key for tenant %q", k.Tenant)
		}
		d, _, err := keyDigest(k.Key)
		if err != nil {
			return nil, fmt.Errorf("gateway: key for tenant %q: %w", k.Tenant, err)
		}
		keys = append(keys, keyEntry{digest: d, tenant: ti})
	}
	// Replicas in the core's order: pools in scenario order, a pool's
	// replicas in the order of its URLs.
	next := map[int]int{}
	for _, r := range core.Replicas {
		p := sc.Pools[r.Pool].Name
		kind, u, err := ParseBackend(cfg.Backends[p][next[r.Pool]])
		if err != nil {
			return nil, fmt.Errorf("gateway: pool %s: %w", p, err)
		}
		next[r.Pool]++
		pu, err := url.Parse(u)
		if err != nil {
			return nil, fmt.Errorf("gateway: pool %s: %w", p, err)
		}
		g.byPool[p] = append(g.byPool[p], len(g.replicas))
		g.replicas = append(g.replicas, replica{pool: p, pi: r.Pool, region: sc.Pools[r.Pool].Region, url: u, host: pu.Host, model: r.Model,
			maxBatch: r.MaxBatch, kind: kind, health: u + kindSpecs[kind].health})
		if name := sc.Models[r.Model].Name; !slices.Contains(g.served, name) {
			g.served = append(g.served, name)
		}
	}
	slices.Sort(g.served)
	// Before the backends, which ask it which replicas run; its scalers
	// come once the core is built, ctx and kick once the gateway's are.
	g.metrics = newMetrics(g)
	g.as = &Autoscaling{mu: &g.mu, clk: g.clk, log: g.log, metrics: g.metrics, prov: cfg.Provisioner,
		onEvent: g.obs.Autoscale, wg: &g.probeWG, step: g.stepLocked, of: make([]*asRef, len(g.replicas))}
	g.rs = restarts{Restarts: reqengine.NewRestarts(len(g.replicas)), cut: make([]func(), len(g.replicas))}
	g.be = newBackends(g.replicas, g.sc, g.clk, client, cfg.BackendKey != "", &g.mu, g.probedLocked)
	g.faults = newFaultLayer(g.replicas, g.models, sc.Name, g.log, g.clk, cfg.Seed, client.Do)
	g.report = &reporter{replicas: g.replicas, log: g.log, obs: g.obs, clk: g.clk,
		breakers: make([]sched.BreakerState, len(g.replicas))}
	g.ejected = make([]bool, len(g.replicas))
	g.core, err = sched.New(core)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	// Evaluated every sched.LadderEvery of model time, and at least a
	// millisecond of wall time apart.
	g.ladder = reqengine.NewLadder(core, g.clk.now(), g.clk.model(time.Millisecond))
	g.coreCfg = core
	// Backends.Check lowers a pool's largest request to what its servers
	// publish, through the core: the one check every decision reads.
	g.be.log, g.be.limitCore = g.log, g.core.LimitContext
	g.be.kvTokens = make([][]int64, len(core.Pools))
	for i, p := range core.Pools {
		g.be.kvTokens[i] = slices.Clone(p.KVTokens)
	}
	g.can = reqengine.NewCanaries(g.sc, &g.coreCfg, cfg.HoldCanaries)
	if err := g.as.init(&sc, g.core, g.byPool, g.replicas, cfg.Seed, cfg.HoldAutoscale); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	// No ladder draw: the cache's is the only one, and checkLadder refuses
	// cached-answers. Arrivals never end: a gateway serves until closed.
	g.eng = reqengine.NewEngine(g.core, g.lc, g.ladder, reqengine.EngineConfig{Seed: cfg.Seed,
		QueueTimeout: sc.Policy.Admission.QueueTimeout.D(), HedgeAfter: sc.Policy.Routing.HedgeAfter.D(),
		Canaries: g.can, Scaling: g.as.scaling, Restarts: g.rs.Restarts,
		NewCopy: func(o *reqengine.Req, cp sched.Request, seq uint64) *reqengine.Req {
			return g.copies.newCopy(o, cp, seq)
		}})
	limitDefaults(&g.cfg)
	// The core's refusal for a tenant's concurrency is final, and can be
	// made before the body is read, unless retry_rejected retries it
	// until a slot frees or a degradation ladder may defer or shed the
	// request first: then it must reach the core.
	var coreFull func(tenant, class int) (time.Duration, bool)
	if !sc.Policy.Retries.RetryRejected && g.ladder == nil {
		coreFull = func(tenant, class int) (time.Duration, bool) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.core.TenantFull(g.clk.now(), tenant, class)
		}
	}
	var limErr error
	g.lim, limErr = newLimits(&g.cfg, g.sc, keys, g.metrics, g.log, coreFull, g.reg)
	if err := errors.Join(g.metrics.register(g.reg), limErr); err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	// Before probeCtx: a half-open breaker's trial (deliver) is the
	// prober's from then on.
	g.prober = &prober{be: g.be, down: g.faults.downState, clk: g.clk,
		every: g.sc.Policy.Health.ProbeInterval.D(), timeout: g.sc.Policy.Health.Timeout.D(),
		probes: g.metrics.probes, scrapeErrors: g.metrics.scrapeErrors,
		observe: g.observe,
		loaded: func(now time.Duration, i int, l Load) {
			if blocked, changed := g.be.noteLoad(now, i, l); changed {
				g.core.SetBlocked(now, i, blocked)
			}
			g.deliver(now)
		}}
	// Before the prober starts: what it delivers may kick the schedule.
	// The jobs in the order they fire when due together: the core's
	// wake-up first.
	jobs := []job{{due: func() time.Duration {
		if g.wakeAt >= 0 {
			return g.wakeAt
		}
		return noDue
	}, fire: g.onWake}}
	g.sched = newSchedule(&g.mu, g.clk, jobs...)
	// The ladder's, the canaries' and the scalers' first evaluations.
	g.wakeAt = g.eng.WakeAt()
	ctx, cancel := context.WithCancel(context.Background())
	g.probeCtx, g.probeCancel = ctx, cancel
	g.as.ctx = ctx
	// Before the prober starts: what it delivers may dispatch a copy.
	g.copies = &shadowCopies{mu: &g.mu, core: g.core, can: g.can, sc: g.sc, replicas: g.replicas, clk: g.clk,
		nonce: g.nonce, counted: g.metrics.shadows, ctx: ctx, call: g.call, step: g.stepLocked,
		inFlight: map[uint64]*shadow{}}
	g.probeWG.Add(1)
	go func() {
		defer g.probeWG.Done()
		g.prober.loop(ctx)
	}()
	g.probeWG.Add(1)
	go func() {
		defer g.probeWG.Done()
		g.sched.run(ctx)
	}()
	return g, nil
}

// Registry returns the registry the gateway's metrics are on.
func (g *Gateway) Registry() *prometheus.Registry { return g.reg }

// Close stops the probes, the ladder's and the canaries' evaluations, the
// shadow copies in flight and the wake-up timer and
// closes idle upstream connections. Call it after the HTTP server has shut down.
func (g *Gateway) Close() {
	g.mu.Lock()
	g.probeCancel()
	g.mu.Unlock()
	g.probeWG.Wait()
	g.trials.Wait()
	g.copies.wg.Wait()
	g.mu.Lock()
	g.closed = true
	g.wakeAt = 0
	g.mu.Unlock()
	g.be.client.CloseIdleConnections()
}

// Now returns the core's clock: model time since the gateway started (wall
// time × Config.Speed). Observer callbacks are stamped with it.
func (g *Gateway) Now() time.Duration { return g.clk.now() }

// ReplicaIndex returns the index of a replica, as X-Fleetdrill-Replica and
// the Observer name it: the replica at position i of pool's URLs in
// Config.Backends. Replicas are numbered across the fleet in the core's
// order: the scenario's pools in order, each pool's replicas in the order
// of its URLs. It returns -1 when the pool has no such replica.
func (g *Gateway) ReplicaIndex(pool string, i int) int {
	rs := g.byPool[pool]
	if i < 0 || i >= len(rs) {
		return -1
	}
	return rs[i]
}

// SetRetiring announces model's retirement (on) or withdraws the notice, as
// the twin does when a model-retirement fault's notice starts: new requests
// for the model go to its fallbacks first (when policy.routing.fallback is
// on and the class's quality floor accepts them), and to the model only
// when no fallback can take them. Requests already queued or running are
// left where they are.
func (g *Gateway) SetRetiring(model string, on bool) error {
	m, ok := g.models[model]
	if !ok {
		return fmt.Errorf("gateway: retiring %q: not a model of scenario %s", model, g.sc.Name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.core.SetRetiring(m, on)
	return nil
}

// SetServes gives pool the model to serve, or takes it away (a driver
// upgrade the compatibility registry says the pool cannot run it on, as
// the twin's upgradeDriver does): the core routes the model's requests
// elsewhere, and those queued for it with no pool left are offered again.
// It returns the route table's version after the change, and whether
// there was one.
func (g *Gateway) SetServes(pool, model string, on bool) (version int, changed bool, err error) {
	m, ok := g.models[model]
	if !ok {
		return 0, false, fmt.Errorf("gateway: serves %q: not a model of scenario %s", model, g.sc.Name)
	}
	pi := slices.IndexFunc(g.sc.Pools, func(p scenarios.Pool) bool { return p.Name == pool })
	if pi < 0 {
		return 0, false, fmt.Errorf("gateway: serves on %q: not a pool of scenario %s", pool, g.sc.Name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.core.Serves(pi, m) == on {
		return 0, false, nil
	}
	now := g.clk.now()
	g.core.SetServes(pi, m, on)
	version = g.core.Ready().RouteVersion
	g.log.Info("route change", "pool", pool, "model", model, "serves", on, "route_version", version)
	g.deliver(now)
	return version, true, nil
}

// deliver carries out the request engine's Ready (gathering first what the
// core decided on a direct call: a hedge, a copy, a probe, a route
// change): breaker transitions and outlier ejections are logged, counted
// and reported, each request's decisions posted to its handler, and the
// wake-up timer armed. Called with mu held after every engine or core
// call, with the now that call was given.
func (g *Gateway) deliver(now time.Duration) {
	g.eng.Collect(now)
	rd := g.eng.Ready()
	for _, tr := range rd.Transitions {
		g.report.breaker(now, tr.Replica, tr.To)
		if tr.To == sched.HalfOpen && g.probeCtx != nil && g.probeCtx.Err() == nil && g.probedLocked(tr.Replica) {
			// The trial is a probe, sent now (see sched's breakers).
			// Close cancels probeCtx with mu held, so no Add follows
			// its Wait.
			g.trials.Add(1)
			go func() { defer g.trials.Done(); g.prober.probe(g.probeCtx, tr.Replica) }()
		}
	}
	for _, e := range rd.Ejections {
		rep := g.replicas[e.Replica]
		g.log.Info("outlier", "pool", rep.pool, "replica", e.Replica, "backend", rep.host, "ejection", e.String())
		g.ejected[e.Replica] = !e.Returned
		if !e.Returned {
			g.metrics.ejections.WithLabelValues(rep.pool).Inc()
		}
		if g.obs.Ejection != nil {
			g.obs.Ejection(now, e, rep.pool)
		}
	}
	for _, ch := range rd.Changes {
		g.laddered(now, ch)
	}
	for _, d := range rd.Rollouts {
		g.rolledOut(now, d)
	}
	g.rs.taken = append(g.rs.taken, rd.Restarted...)
	g.rs.done = append(g.rs.done, rd.Loaded...)
	if len(rd.Scaling)+len(rd.ScalerEvents) > 0 {
		// Before the starts: one may be on a replica just made routable.
		g.as.carry(now, rd.Scaling, rd.ScalerEvents)
	}
	// A hedge race's loser first: its slot may be among those the
	// starts below take.
	for _, c := range rd.Cancels {
		if c.Leg == reqengine.CopyLeg {
			g.copies.cancel(c.Req.Core.ID)
			continue
		}
		g.calls.post(&c.Req.Core, note{kind: noteCancel, cancel: c})
	}
	for _, c := range rd.CopiesEnded {
		g.copies.ended(c)
	}
	for _, j := range rd.Judged {
		g.calls.post(&j.Req.Core, note{kind: noteJudged, judged: j})
	}
	for _, o := range rd.Offers {
		if c := g.calls.m[o.Req.Core.ID]; c != nil && o.Next.Action == sched.Wait {
			g.calls.hold(c)
		}
		g.calls.post(&o.Req.Core, note{kind: noteOffer, offer: o})
	}
	for _, ro := range rd.Reoffered {
		g.calls.post(&ro.Req.Core, note{kind: noteReoffer, retry: ro.Retry})
	}
	for _, d := range rd.Starts {
		if d.Req.Shadow {
			g.copies.dispatched(d)
			continue
		}
		if c := g.calls.m[d.Req.ID]; c != nil {
			c.dispatched = now
			if g.obs.Dispatch != nil {
				g.obs.Dispatch(now, d.Replica, d.Req.Tenant, d.Req.Arrived)
			}
			c.post(note{kind: noteStart, replica: d.Replica})
		}
	}
	for _, h := range rd.Hedges {
		g.calls.post(h.Req, note{kind: noteHedge, replica: h.Replica})
	}
	for _, a := range rd.Answers {
		if c := g.calls.m[a.Req.Core.ID]; c != nil {
			g.calls.unhold(c)
			c.post(note{kind: noteAnswer, answer: a})
		}
		// Out of flight at the instant its outcome is decided, however
		// long its answer then takes to write.
		g.eng.Release(a.Req)
	}
	at := rd.WakeAt
	g.eng.Advance()
	if g.closed {
		return
	}
	if at >= 0 && (g.wakeAt < 0 || at < g.wakeAt) {
		g.wakeAt = at
		g.sched.kick() // the schedule reads its due times again
	}
}

// onWake is the engine's wake-up (Ready.WakeAt), run by the schedule.
func (g *Gateway) onWake() {
	g.mu.Lock()
	g.wakeAt = reqengine.NoWake
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.stepLocked(g.clk.now(), reqengine.Event{Kind: reqengine.Tick})
	g.as.export() // a sync may move the series without an action
	// Restarted replicas whose load is over: their cuts end outside mu
	// (the fault layer's lock is never taken with it).
	done := g.rs.done
	g.rs.done = nil
	var cuts []func()
	for _, r := range done {
		if c := g.rs.cut[r]; c != nil {
			cuts = append(cuts, c)
			g.rs.cut[r] = nil
		}
	}
	g.mu.Unlock()
	g.loaded(done, cuts)
}

// step tells the request engine what happened to a request now, and
// carries out what it decided.
func (g *Gateway) step(ev reqengine.Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stepLocked(g.clk.now(), ev)
}

// stepLocked is step with mu held, at now. An attempt's end observed on a
// replica reports its breaker's state first: the core moves an open
// breaker to half-open lazily, and reading it makes that step a
// transition of its own.
func (g *Gateway) stepLocked(now time.Duration, ev reqengine.Event) {
	if (ev.Observed && ev.Replica >= 0 && ev.How != sched.AttemptThrottled) || ev.Kind == reqengine.Probe {
		g.report.breaker(now, ev.Replica, g.core.Breaker(now, ev.Replica))
	}
	g.eng.Step(now, ev)
	if ev.Kind == reqengine.AttemptFailed {
		if c := g.calls.m[ev.Req.Core.ID]; c != nil {
			g.calls.unhold(c) // the core let go of it; an offer holds it again
		}
	}
	g.deliver(now)
}

// next waits for the engine's next decision for q, and returns it; false
// when q's context ended first, which ends q in the engine (its client
// gone, or its deadline passed).
func (g *Gateway) next(ctx context.Context, q *request) (note, bool) {
	for {
		g.mu.Lock()
		if len(q.c.notes) > 0 {
			n := q.c.notes[0]
			q.c.notes[0] = note{}
			q.c.notes = q.c.notes[1:]
			g.mu.Unlock()
			return n, true
		}
		g.mu.Unlock()
		select {
		case <-q.c.wake:
		case <-ctx.Done():
			g.gone(ctx, q)
			return note{}, false
		}
	}
}

// gone ends q in the engine, if it has not ended: its context ended (the
// class deadline, or the client went away), wherever it was; from its
// handler's exit, a handler that panicked. A canary request whose
// deadline passed while it waited for the candidate tells its rollout (an
// expiry in the queue); a client gone tells it nothing.
func (g *Gateway) gone(ctx context.Context, q *request) {
	deadline := errors.Is(ctx.Err(), context.DeadlineExceeded)
	g.mu.Lock()
	st := q.c.State()
	// Under the lock: a rollback moves a waiting request to the baseline.
	onCanary := q.c.Core.Route > 0
	g.mu.Unlock()
	if st == reqengine.Done {
		return
	}
	if st == reqengine.Held && deadline && onCanary {
		g.attemptEnded(q, -1, false)
	}
	g.step(reqengine.Event{Kind: reqengine.Gone, Req: &q.c.Req, Deadline: deadline})
}

// throttle tells the core that replica r's provider answered 429 asking
// for retryAfter (model time): its pool takes nothing until then.
func (g *Gateway) throttle(r int, retryAfter time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clk.now()
	g.report.throttled(g.core, now, r, retryAfter)
	g.deliver(now)
}

// observe steps a probe of replica r to the engine: its breaker hears of
// it. Called with mu held.
func (g *Gateway) observe(now time.Duration, r int, ok bool) {
	g.stepLocked(now, reqengine.Event{Kind: reqengine.Probe, Replica: r, Healthy: ok})
}

// Handler returns the gateway's HTTP handler.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", g.serveCompletion)
	mux.HandleFunc("POST /v1/completions", g.serveCompletion)
	mux.HandleFunc("GET /v1/models", g.serveModels)
	// {id...}: a model id may hold slashes (org/name), sent unescaped.
	mux.HandleFunc("GET /v1/models/{id...}", g.serveModel)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	if !g.cfg.MetricsApart {
		mux.Handle("GET /metrics", MetricsHandler(g.reg))
	}
	return mux
}
