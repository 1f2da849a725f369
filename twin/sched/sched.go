// Package sched is the scheduler core: admission (tenant quotas with cohort
// borrowing, bounded queues, deadline feasibility), the per-model waiting
// queues under a dispatch policy, and routing to compatible replicas under
// residency, capability and provider-quota constraints, with fallback along a
// model's chain.
//
// It is a pure, clock-agnostic state machine: every input carries now, and it
// answers with decisions. When it needs to act later (a provider quota
// refills), it says so through [Ready.WakeAt] and the driver calls
// [Core.Tick] then. It must not import sim, read a clock, draw random
// numbers, start goroutines or do I/O: the twin drives it in virtual time and
// the live gateway on the wall clock.
//
// # Usage
//
//	c, err := sched.New(cfg)
//	d := c.Arrive(now, req)       // admit, queue, reject, defer, or fail
//	c.Finish(now, other)          // completed, cancelled or timed out
//	rd := c.Ready()               // everything decided since the last Advance:
//	                              // dispatches, breaker transitions, unroutable
//	                              // requests, the wake-up, the route version
//	... carry rd out ...
//	c.Advance()
//
// Outputs accumulate in Ready until Advance, so no decision is lost between
// two calls or carried out twice.
//
// Beside the core, and as pure, two pieces both drivers share: a request's
// life around it (lifecycle.go: waits, deferrals, retries and their budget)
// and the degradation ladder (ladder.go: which rungs are engaged, and what
// they do to a new request).
package sched

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/fleetdrill/fleetdrill/twin/dispatch"
)

// Outcome is what admission decided for a request.
type Outcome uint8

const (
	Dispatched Outcome = iota + 1 // sent to a replica at once
	Queued                        // waiting in its model's queue
	Rejected                      // refused; retryable after RetryAfter
	Deferred                      // deferrable class: offer it again later
)

func (o Outcome) String() string {
	return [...]string{"", "dispatched", "queued", "rejected", "deferred"}[o]
}

// Rejection reasons, counted in reports.
const (
	ReasonTenantConcurrency = "tenant-concurrency"
	ReasonTenantTokens      = "tenant-token-rate"
	ReasonQueueFull         = "queue-full"
	ReasonDeadline          = "deadline-infeasible"
	ReasonNoRoute           = "no-compatible-pool"
)

// Decision is the answer to Arrive.
type Decision struct {
	Outcome    Outcome
	Reason     string        // for Rejected and Deferred
	RetryAfter time.Duration // for Rejected and Deferred: when to try again
	Detail     string        // for ReasonNoRoute: why each pool was skipped, with counts
}

// Request is a request as the core sees it. The driver owns it and must not
// change its fields while the core holds it (queued or dispatched).
type Request struct {
	// item must stay the first field: itemOwner converts a queued
	// *dispatch.Item back to its Request.
	item dispatch.Item

	ID       uint64
	Tenant   int // index into Config.Tenants
	Class    int // index into Config.Classes
	Model    int // requested model, index into Config.Models
	Input    int // prompt tokens
	Output   int // output tokens (the twin knows them; a gateway uses max_tokens)
	Arrived  time.Duration
	Deadline time.Duration // absolute; 0: none

	// Route versions (canary.go). Shadow marks a copy the driver mirrors
	// to a canary's candidate, with Route that canary's (index + 1);
	// NoCanary sends a retry to the baseline.
	Shadow   bool
	NoCanary bool
	// Route is set by the core for an original: the canary it was drawn
	// onto (index + 1), or 0 for the baseline.
	Route int

	// Set by the core.
	Served   int  // model actually served (differs from Model after fallback)
	Replica  int  // replica index while dispatched, else -1
	Hedge    int  // replica of a hedged duplicate attempt, else -1 (see Hedge)
	Fallback bool // served by a fallback model

	queue int // index of the queue holding it, -1 when not queued
	// offered: the core has taken it (admission, a queue, a replica). A
	// request's zero value names replica 0 and queue 0, so Finish on one
	// never offered (refused by the ladder before it, answered from a
	// cache) must not release a slot it never held.
	offered bool
	hedged  bool // Hedge holds a slot
	prefill int  // replica + 1 computing its prompt remotely (disagg.go); 0: none
	admitd  bool
	borrow  bool // holds a concurrency slot borrowed from its cohort
}

// Tenant is a tenant's quotas.
type Tenant struct {
	Name            string
	Jurisdiction    string // "" = anywhere
	Weight          float64
	TokensPerMinute float64 // 0 = unlimited
	MaxConcurrency  int     // 0 = unlimited
	Cohort          string
}

// Class is a request class.
type Class struct {
	Name       string
	Priority   int
	Deferrable bool
	// QualityFloor is the lowest model quality the class accepts from a
	// fallback: a smaller model below it is never substituted.
	QualityFloor float64
}

// Model is a model and its fallback chain (indexes into Config.Models).
type Model struct {
	Name      string
	Fallbacks []int
	Quality   float64
	// Disagg makes the model served disaggregated (disagg.go); nil: every
	// replica that serves it prefills its own prompts.
	Disagg *Disagg
}

// Pool is a pool as routing sees it.
type Pool struct {
	Name         string
	Jurisdiction string
	PricePerHour float64 // per replica
	// Serves[m] is true when the pool may serve model m (compatible, and
	// tested unless the policy allows untested pairings).
	Serves []bool
	// KVTokens[m] is a replica's KV capacity for model m, bounding the
	// largest request it can ever complete.
	KVTokens []int64
	// Provider quota: 0 = unlimited.
	RequestsPerMinute float64
	TokensPerMinute   float64
	// Route is the canary whose candidate the pool is (index + 1), set
	// by New from Config.Canaries; 0: the baseline.
	Route int
	// Prefill marks a prefill pool of a disaggregated model (disagg.go):
	// its replicas serve no client, so Serves is false for every model.
	Prefill bool
	// PrefillPools are, for a decode pool of a disaggregated model, the
	// prefill pools of its region that compute its prompts.
	PrefillPools []int
}

// Replica is one replica's routing view.
type Replica struct {
	Pool     int
	Model    int
	MaxBatch int
	// Absent starts the replica not provisioned (see SetPresent): an
	// autoscaled pool's replicas beyond those it starts with.
	Absent bool
}

// Config is the core's static configuration.
type Config struct {
	Tenants  []Tenant
	Classes  []Class
	Models   []Model
	Pools    []Pool
	Replicas []Replica

	Policy     string        // dispatch policy, see dispatch.Policies
	Aging      time.Duration // priority policy
	QueueLimit int           // per model queue (all residency classes together)
	// DeadlineCheck rejects at arrival a request that no pool that may
	// serve it is expected to start before its deadline: throttled by its
	// provider, breakers open or replicas down past it, or the queue ahead
	// draining too slowly at those pools' dispatch rate (feasible.go).
	DeadlineCheck bool
	RetryAfter    time.Duration // fixed hint; 0: the predicted wait, at least 1s
	DeferFor      time.Duration
	Strategy      Strategy
	Fallback      bool
	// IgnoreResidency routes regardless of jurisdiction: a deliberately
	// broken policy, to show what residency checks catch.
	IgnoreResidency bool
	// PrefixHits, when set, turns on prefix-affinity routing: it returns
	// how many leading prompt blocks of req replica r holds cached, and
	// pick prefers the replica with most, then the least loaded. It must
	// be a pure function of the replicas' state (the twin reads its
	// engines' caches). Routing then scans every replica with room:
	// O(replicas), the price of the option.
	PrefixHits func(req *Request, replica int) int

	// Health configures the circuit breakers (see health.go).
	Health Health
	// Outlier configures latency outlier ejection (see outlier.go).
	Outlier Outlier
	// LatencyHalfLife is how fast a pool's latency estimate decays toward
	// zero when it gets no samples, so that lowest-latency routing tries
	// it again (see estimate); default 30s.
	LatencyHalfLife time.Duration

	// Canaries are the route versions (canary.go, rollout.go).
	Canaries []CanaryRoute

	// Ladder is the degradation ladder, bottom rung first (see ladder.go).
	// The core itself does not read it: the drivers run it beside the
	// core, from NewLadder.
	Ladder []Rung
}

// Strategy is a routing strategy: how pick chooses among the replicas that
// may take a request.
type Strategy string

// The routing strategies.
const (
	// LeastLoaded: the replica with the lowest in-flight share (least
	// queue).
	LeastLoaded Strategy = "least-loaded"
	// Cheapest: the cheapest pool, least loaded within it.
	Cheapest Strategy = "cheapest"
	// RoundRobin: pools in turn, least loaded within each.
	RoundRobin Strategy = "round-robin"
	// Ordered: pools in declared order, primary first, the next only when
	// the ones before have no room (primary/secondary).
	Ordered Strategy = "ordered"
	// LowestLatency: the lowest predicted latency, the pool's observed
	// time from dispatch to first token (an EWMA fed by ObserveLatency,
	// decayed while the pool gets no samples) scaled by load.
	LowestLatency Strategy = "lowest-latency"
)

// Strategies are the routing strategies' names, the one list scenarios
// validate against.
var Strategies = []string{string(LeastLoaded), string(Cheapest), string(RoundRobin), string(Ordered), string(LowestLatency)}

// score is a replica's routing score under s (lower wins), with load its
// in-flight share; round-robin does not score (it takes the first pool in
// turn with room).
func (s Strategy) score(pool int, p *Pool, latency, load float64) float64 {
	// The pool-level term dominates: a pool's load (at most 1) only
	// breaks ties within a price or an order.
	const dominant = 1e3
	switch s {
	case Cheapest:
		return p.PricePerHour*dominant + load
	case Ordered:
		return float64(pool)*dominant + load
	case LowestLatency:
		return latency * (1 + load)
	}
	return load
}

// Dispatch is a decision to start a request on a replica.
type Dispatch struct {
	Req     *Request
	Replica int
}

// Core is the scheduler core.
type Core struct {
	cfg Config

	tenants []tenantState
	cohorts map[string][]int // cohort → member tenants, sorted

	// queues holds one dispatch queue per (route version, residency
	// key), laid out densely (queueAt); keys lists the residency keys
	// (tenant jurisdictions, "" for anywhere), tenantKey each tenant's and
	// poolKeys those each pool may serve, as indexes into keys: a queue is
	// found by arithmetic, where a map keyed by strings cost a hash at
	// every arrival and every dispatch.
	queues    []queueState
	keys      []string
	tenantKey []int
	poolKeys  [][]int
	modelQLen []int // queued requests per model, all residency keys

	replicas []replicaState
	groups   []group
	groupsOf [][]int // model → its groups, by pool order
	pools    []poolState
	rr       []int // round-robin cursor per model

	dispatches  []Dispatch
	disagg      []disaggState // per model
	disaggAny   bool          // a model is served disaggregated: the hot paths check nothing otherwise
	fillScratch []int
	wakeAt      time.Duration
	cands       []int // scratch for pickByPrefix
	health      Health
	outlier     Outlier
	halfLife    time.Duration
	refs        []peerRef // per model: the peers' median latency (outlier.go)
	peers       []peerSet // per model: the replicas it is the median of (peers.go)
	// Per replica, dense: its routing key (rankKey) and its position in
	// its group's heap.
	rank []uint64
	hpos []int32
	plat []float64 // its latency EWMA, as its model's peerSet orders it
	// recent holds each replica's window: its last Outlier.MinSamples
	// latency samples, MinSamples per replica (outlier.go)
	recent   []float64
	retiring []bool // per model: announced for retirement (SetRetiring)

	// Per-model dispatch rate estimate for predicted waits: an EWMA of the
	// interval between dispatches.
	lastDispatch []time.Duration
	interval     []float64 // seconds, EWMA

	// feas is per group what deadline feasibility knows of it: its own
	// dispatch rate, and since when it has been down (feasible.go).
	feas []groupFeas

	// Outputs since the last Advance (see Ready).
	transitions  []Transition
	ejections    []Ejection
	unroutable   []*Request
	routeVersion int

	// Route versions (canary.go): per canary, its share and the shadow
	// copies running; copies shed since the last Advance.
	canaryShare    []float64
	shadowInflight []int
	shadowsShed    []*Request

	// Skipped counts, per reason, why pools were passed over when routing,
	// for the "why" view: "3 pools skipped: 2 outside jurisdiction eu, 1
	// quota exhausted".
	Skipped map[string]uint64
}

type queueState struct {
	q     dispatch.Queue
	model int
	key   string
	route int
}

type tenantState struct {
	tokens   float64 // token bucket level
	last     time.Duration
	inflight int
	borrowed int
}

type replicaState struct {
	Replica
	inflight int
	ready    bool
	absent   bool  // not provisioned (see SetPresent)
	blocked  bool  // the replica pushed back (see SetBlocked)
	group    int   // index into Core.groups
	peer     uint8 // in its model's peerSet: peerNone, peerLo or peerHi (peers.go)
	ppos     int32 // its position there
	br       breaker
	out      outlierState
}

// hasRoom reports whether the replica takes a request now and has a free
// slot (availability.go judges the first).
func (rs *replicaState) hasRoom() bool {
	return !rs.blocked && rs.inflight < rs.MaxBatch && rs.routable()
}

type poolState struct {
	reqTokens, tokTokens float64 // provider quota buckets
	last                 time.Duration
	latency              float64 // EWMA of dispatch to first token, seconds, at latencyAt
	latencyAt            time.Duration
	// inflight is the requests dispatched to the pool's replicas and not
	// finished; busy integrates it over time (slot-seconds) up to busyAt,
	// for PoolBusy.
	inflight int
	busy     float64
	busyAt   time.Duration
	// throttledUntil: the provider answered 429 with a Retry-After that
	// ends then (see Throttled); the pool takes nothing before.
	throttledUntil time.Duration
}

// New builds a core. Every replica starts ready; use SetReady for replicas
// that are loading.
func New(cfg Config) (*Core, error) {
	if !slices.Contains(Strategies, string(cfg.Strategy)) {
		return nil, fmt.Errorf("sched: routing strategy %q, want one of %s", cfg.Strategy, strings.Join(Strategies, ", "))
	}
	if cfg.QueueLimit <= 0 {
		return nil, fmt.Errorf("sched: queue limit %d, want >= 1", cfg.QueueLimit)
	}
	// The core changes its pools as faults play out (SetServes,
	// SetPoolQuota); the caller's Config must keep what was configured, so
	// that a fault's end can restore it.
	cfg.Pools = slices.Clone(cfg.Pools)
	for i := range cfg.Pools {
		cfg.Pools[i].Serves = slices.Clone(cfg.Pools[i].Serves)
		cfg.Pools[i].KVTokens = slices.Clone(cfg.Pools[i].KVTokens) // LimitContext lowers them
		cfg.Pools[i].Route = 0
	}
	if err := canaryPools(&cfg); err != nil {
		return nil, err
	}
	c := &Core{
		cfg:          cfg,
		tenants:      make([]tenantState, len(cfg.Tenants)),
		cohorts:      map[string][]int{},
		modelQLen:    make([]int, len(cfg.Models)),
		disagg:       make([]disaggState, len(cfg.Models)),
		disaggAny:    slices.ContainsFunc(cfg.Models, func(m Model) bool { return m.Disagg != nil }),
		replicas:     make([]replicaState, len(cfg.Replicas)),
		rank:         make([]uint64, len(cfg.Replicas)),
		hpos:         make([]int32, len(cfg.Replicas)),
		plat:         make([]float64, len(cfg.Replicas)),
		groupsOf:     make([][]int, len(cfg.Models)),
		pools:        make([]poolState, len(cfg.Pools)),
		rr:           make([]int, len(cfg.Models)),
		lastDispatch: make([]time.Duration, len(cfg.Models)),
		interval:     make([]float64, len(cfg.Models)),
		Skipped:      map[string]uint64{},

		canaryShare:    make([]float64, len(cfg.Canaries)),
		shadowInflight: make([]int, len(cfg.Canaries)),
	}
	c.health = cfg.Health
	if c.health.Threshold <= 0 {
		c.health.Threshold = 3
	}
	if c.health.OpenFor <= 0 {
		c.health.OpenFor = 10 * time.Second
	}
	c.outlier = cfg.Outlier
	if err := c.outlier.setDefaults(); err != nil {
		return nil, err
	}
	c.recent = make([]float64, len(cfg.Replicas)*c.outlier.MinSamples)
	c.halfLife = cfg.LatencyHalfLife
	if c.halfLife < 0 {
		return nil, fmt.Errorf("sched: latency half-life %v, want >= 0 (0: the default)", c.halfLife)
	}
	if c.halfLife == 0 {
		c.halfLife = DefaultLatencyHalfLife
	}
	c.refs = make([]peerRef, len(cfg.Models))
	c.peers = make([]peerSet, len(cfg.Models))
	for i, t := range cfg.Tenants {
		c.tenants[i].tokens = t.TokensPerMinute
		if t.Cohort != "" {
			c.cohorts[t.Cohort] = append(c.cohorts[t.Cohort], i)
		}
	}
	for i, p := range cfg.Pools {
		c.pools[i] = poolState{reqTokens: p.RequestsPerMinute, tokTokens: p.TokensPerMinute}
	}
	for i, r := range cfg.Replicas {
		c.replicas[i] = replicaState{Replica: r, ready: !r.Absent, absent: r.Absent}
		gi := -1
		for _, j := range c.groupsOf[r.Model] {
			if c.groups[j].pool == r.Pool {
				gi = j
			}
		}
		if gi < 0 {
			gi = len(c.groups)
			c.groups = append(c.groups, group{pool: r.Pool, model: r.Model})
			c.groupsOf[r.Model] = append(c.groupsOf[r.Model], gi)
		}
		c.replicas[i].group = gi
		c.hpos[i] = int32(len(c.groups[gi].heap))
		c.groups[gi].heap = append(c.groups[gi].heap, i)
	}
	for i := range c.replicas {
		c.rank[i] = c.rankKey(i)
	}
	c.feas = make([]groupFeas, len(c.groups))
	// Residency keys: "" plus every tenant jurisdiction, sorted, so queue
	// indexes do not depend on map order.
	keys := []string{""}
	for _, t := range cfg.Tenants {
		if t.Jurisdiction != "" && !slices.Contains(keys, t.Jurisdiction) {
			keys = append(keys, t.Jurisdiction)
		}
	}
	slices.Sort(keys)
	var weights []float64
	aging := time.Duration(0)
	switch cfg.Policy {
	case dispatch.WFQ:
		for _, t := range cfg.Tenants {
			weights = append(weights, t.Weight)
		}
	case dispatch.Priority:
		aging = cfg.Aging
	}
	// Route versions: the baseline for every model, and each canary's
	// own and shadow queues for its model.
	type route struct{ model, route int }
	var routes []route
	for m := range cfg.Models {
		routes = append(routes, route{m, 0})
	}
	for k, cr := range cfg.Canaries {
		routes = append(routes, route{cr.Model, k + 1}, route{cr.Model, -(k + 1)})
	}
	// The layout queueAt reads: route slot by route slot, the keys in
	// order within each.
	for _, rt := range routes {
		for _, k := range keys {
			q, err := dispatch.New(dispatch.Config{Policy: cfg.Policy, Aging: aging, Weights: weights})
			if err != nil {
				return nil, fmt.Errorf("sched: %w", err)
			}
			c.queues = append(c.queues, queueState{q: q, model: rt.model, key: k, route: rt.route})
		}
	}
	c.keys = keys
	c.tenantKey = make([]int, len(cfg.Tenants))
	for i, t := range cfg.Tenants {
		c.tenantKey[i] = slices.Index(keys, t.Jurisdiction)
	}
	c.poolKeys = make([][]int, len(cfg.Pools))
	for i, p := range cfg.Pools {
		c.poolKeys[i] = c.residencyKeys(p.Jurisdiction)
	}
	return c, nil
}

// queueAt returns the index of the queue of model m, residency key k (an
// index into keys) and route version route (0 the baseline, k+1 canary
// k's own requests, -(k+1) its shadow copies); false when there is none
// (a route version of another model).
func (c *Core) queueAt(m, k, route int) (int, bool) {
	slot := m
	switch {
	case route > 0:
		slot = len(c.cfg.Models) + 2*(route-1)
	case route < 0:
		slot = len(c.cfg.Models) + 2*(-route-1) + 1
	}
	qi := slot*len(c.keys) + k
	if m < 0 || m >= len(c.cfg.Models) || qi < 0 || qi >= len(c.queues) {
		return 0, false
	}
	if q := &c.queues[qi]; q.model != m || q.route != route {
		return 0, false
	}
	return qi, true
}

// Ready is everything the core decided since the last Advance that the
// driver must carry out, in the manner of etcd's raft.Ready: the one
// channel of the core's outputs. Read it after calling the core, carry it
// out, and call Advance; the slices are the core's, valid until Advance.
type Ready struct {
	// Dispatches are requests to start, each on its replica, in the
	// order decided.
	Dispatches []Dispatch
	// Transitions are the breaker state changes results and probes
	// caused (Observe), for the timeline and the logs.
	Transitions []Transition
	// Ejections are replicas taken out of routing as latency outliers,
	// or returned (see outlier.go), for the timeline and the logs.
	Ejections []Ejection
	// Unroutable are queued requests whose model no pool serves any more
	// (SetServes): the core has let go of their queue place; the driver
	// offers them again, to their fallback chain or a refusal.
	Unroutable []*Request
	// ShadowsShed are shadow copies shed from their queue (a canary
	// request had to wait): the core has let go of them; the driver ends
	// them as shed.
	ShadowsShed []*Request
	// WakeAt is when the core wants Tick (a quota refills, a throttle
	// ends); 0: nothing waits on time. It is state, not an event: it
	// stays until Tick.
	WakeAt time.Duration
	// RouteVersion counts changes to the route table (which pools serve
	// which models), for the timeline.
	RouteVersion int
}

// Ready returns what the core decided since the last Advance.
func (c *Core) Ready() Ready {
	return Ready{Dispatches: c.dispatches, Transitions: c.transitions, Ejections: c.ejections, Unroutable: c.unroutable,
		ShadowsShed: c.shadowsShed, WakeAt: c.wakeAt, RouteVersion: c.routeVersion}
}

// WakeAt is Ready's WakeAt, without the rest.
func (c *Core) WakeAt() time.Duration { return c.wakeAt }

// HasReady reports whether Ready holds anything to carry out (WakeAt aside).
func (c *Core) HasReady() bool {
	return len(c.dispatches)+len(c.transitions)+len(c.ejections)+len(c.unroutable)+len(c.shadowsShed) > 0
}

// Advance tells the core the driver has taken the last Ready: its
// dispatches, transitions and unroutable requests are forgotten, so none is
// carried out twice. Copy what you need first: the slices are reused.
func (c *Core) Advance() {
	c.dispatches = c.dispatches[:0]
	c.transitions = c.transitions[:0]
	c.ejections = c.ejections[:0]
	clear(c.unroutable)
	c.unroutable = c.unroutable[:0]
	clear(c.shadowsShed)
	c.shadowsShed = c.shadowsShed[:0]
}

// QueueLen returns the number of requests waiting for model m.
func (c *Core) QueueLen(m int) int { return c.modelQLen[m] }

// Inflight returns the requests dispatched to replica r and not finished.
func (c *Core) Inflight(r int) int { return c.replicas[r].inflight }

// SetReady marks a replica ready (it can take requests) or not (loading,
// down). Marking it ready may dispatch queued requests to it.
func (c *Core) SetReady(now time.Duration, r int, ready bool) {
	c.replicas[r].ready = ready
	c.fix(r)
	if ready {
		c.fill(now, r)
	}
}

// SetPresent provisions replica r (present) or releases it. A replica
// that is not present is no part of the fleet: the core routes nothing to
// it and Saturation and the pool views do not count it, so an autoscaled
// pool can be configured at its largest and grow and shrink inside it.
// Provisioning does not make it ready: the driver calls SetReady once it
// has loaded (cold start). Releasing it sends it nothing new; what it has
// in flight finishes (Finish), which is the drain.
func (c *Core) SetPresent(now time.Duration, r int, present bool) {
	c.replicas[r].absent = !present
	c.fix(r)
	if present {
		c.fill(now, r)
	}
}

// poolSlots adds d to pool pi's requests in flight at now.
func (c *Core) poolSlots(now time.Duration, pi, d int) {
	ps := &c.pools[pi]
	ps.busy += float64(ps.inflight) * (now - ps.busyAt).Seconds()
	ps.busyAt, ps.inflight = now, ps.inflight+d
}

// ScalerMeasure is what pool pi's autoscaler measures at now
// (ScalerEnv.Measure): its busy slot-seconds so far (PoolBusy), the
// requests waiting for the models it serves, and their longest predicted
// wait.
func (c *Core) ScalerMeasure(now time.Duration, pi int) (busy float64, queued int, wait time.Duration) {
	for m, serves := range c.cfg.Pools[pi].Serves {
		if serves {
			queued += c.QueueLen(m)
			wait = max(wait, c.PredictedWait(m))
		}
	}
	return c.PoolBusy(now, pi), queued, wait
}

// PoolBusy returns pool pi's busy batch slots integrated up to now, in
// slot-seconds: the difference between two calls, divided by the slots
// and the time between them, is the pool's mean utilization over that
// time, the autoscaler's utilization metric (an instant's count is too
// noisy to scale on; the HPA's metrics are averages too).
func (c *Core) PoolBusy(now time.Duration, pi int) float64 {
	ps := &c.pools[pi]
	return ps.busy + float64(ps.inflight)*(now-ps.busyAt).Seconds()
}

// Present reports whether replica r is provisioned (see SetPresent).
func (c *Core) Present(r int) bool { return !c.replicas[r].absent }

// SetBlocked records a replica's back-pressure: blocked when it could not
// admit everything sent to it at its last step (KV cache or batch full).
// The core sends a blocked replica nothing, so requests wait in the
// gateway's queues, where the dispatch policy orders them, rather than in
// the engine's FIFO. Unblocking may dispatch queued requests.
func (c *Core) SetBlocked(now time.Duration, r int, blocked bool) {
	rs := &c.replicas[r]
	was := rs.blocked
	rs.blocked = blocked
	c.fix(r)
	if was && !blocked {
		c.fill(now, r)
	}
}

// Arrive offers a request to admission. Dispatches holds the resulting
// dispatch, if any.
func (c *Core) Arrive(now time.Duration, req *Request) Decision {
	req.offered = true
	req.Replica = -1
	req.Hedge = -1
	req.hedged = false
	req.queue = -1
	req.Served = req.Model
	req.Fallback = false
	if req.Shadow {
		return c.arriveShadow(now, req)
	}
	req.Route = 0
	if !req.NoCanary && len(c.cfg.Canaries) > 0 {
		req.Route = c.drawRoute(req)
	}
	// On the canary only the requested model is tried: should the
	// candidate not take it (down past its deadline, its queue full), the
	// baseline does, its own model first, as if it had been drawn there.
	// A canary costs a request latency, never its answer, nor its model.
	d := c.arrive(now, req, req.Route > 0)
	if req.Route > 0 && (d.Outcome == Rejected || d.Outcome == Deferred) &&
		d.Reason != ReasonTenantConcurrency && d.Reason != ReasonTenantTokens {
		req.Route = 0
		d = c.arrive(now, req, false)
	}
	return d
}

// arrive is Arrive on the route version drawn: admission, then the model
// chain.
func (c *Core) arrive(now time.Duration, req *Request, modelOnly bool) Decision {
	req.Served = req.Model
	req.Fallback = false
	cls := c.cfg.Classes[req.Class]

	if d, ok := c.admitTenant(now, req, cls); !ok {
		return d
	}

	// Route: the requested model, then its fallbacks when allowed.
	fallbacks := c.cfg.Models[req.Model].Fallbacks
	if !c.cfg.Fallback || modelOnly {
		fallbacks = nil
	}
	routable := false
	// The refusal should no model of the chain take req: the earliest
	// expected start among those that could not start it before its
	// deadline; its reason names an outage (or a throttle) only when
	// that is what kept every model of the chain from it, a slow queue or
	// a full one otherwise.
	var infeasibleWhy string
	var infeasibleWait time.Duration
	allDown := true
	// A model announced for retirement is tried last: its fallbacks first.
	last := c.retiring != nil && c.retiring[req.Model] && len(fallbacks) > 0
	for j := 0; j <= len(fallbacks); j++ {
		i := j
		if last {
			i = (j + 1) % (len(fallbacks) + 1)
		}
		m := req.Model
		if i > 0 {
			m = fallbacks[i-1]
			if c.cfg.Models[m].Quality < cls.QualityFloor {
				continue // below the class's quality floor: never substituted
			}
		}
		if !c.canEverServe(req, m, nil) {
			continue
		}
		routable = true
		req.Served, req.Fallback = m, i > 0
		if c.queuedFor(req, m) == 0 {
			if r := c.pick(now, req, m); r >= 0 {
				c.chargeTokens(now, req)
				c.start(now, req, r)
				return Decision{Outcome: Dispatched}
			}
		}
		if c.modelQLen[m] < c.cfg.QueueLimit {
			// Deadline feasibility from what the pools that may serve it
			// can do now (feasible.go); when this model cannot start it
			// in time, the next of the chain may.
			if why, wait, bad := c.infeasible(now, req, m); bad {
				if infeasibleWhy == "" || wait < infeasibleWait {
					infeasibleWhy, infeasibleWait = why, wait
				}
				allDown = allDown && why != ReasonDeadline
				continue
			}
			c.chargeTokens(now, req)
			c.enqueue(now, req, m)
			if rt := c.routeFor(req, m); rt > 0 {
				// A canary request waits: its shadows are the first shed.
				c.shedShadows(now, rt-1)
			}
			return Decision{Outcome: Queued}
		}
		// Queue full: try the next model in the chain.
		allDown = false
	}
	c.releaseTenant(req)
	req.Served, req.Fallback = req.Model, false
	if !routable {
		return Decision{Outcome: Rejected, Reason: ReasonNoRoute, RetryAfter: 0, Detail: c.noRouteDetail(req, cls, fallbacks)}
	}
	if infeasibleWhy != "" {
		if !allDown {
			infeasibleWhy = ReasonDeadline
		}
		return c.refuse(req, cls, infeasibleWhy, infeasibleWait)
	}
	return c.refuse(req, cls, ReasonQueueFull, c.predictedWait(req.Model))
}

// noRouteDetail says, for the operator, why no model of req's chain could
// be served: per model, why each pool was skipped, or that the model is
// below the class's quality floor. Built only for a refusal: the fast path
// allocates nothing. The model is named only when there is a chain.
func (c *Core) noRouteDetail(req *Request, cls Class, fallbacks []int) string {
	parts := make([]string, 0, len(fallbacks)+1)
	for i := 0; i <= len(fallbacks); i++ {
		m := req.Model
		var part string
		if i > 0 {
			m = fallbacks[i-1]
		}
		if i > 0 && c.cfg.Models[m].Quality < cls.QualityFloor {
			part = SkipQuality
		} else {
			var why skipCounts
			c.canEverServe(req, m, &why)
			part = why.String()
		}
		if len(fallbacks) > 0 {
			part = c.cfg.Models[m].Name + ": " + part
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// TooLarge reports whether size alone keeps req from every route, so that
// a smaller request would have one: no pool can ever take it (Arrive
// refuses it with ReasonNoRoute), and at least one pool that serves a
// model of its chain (the requested model, and its fallbacks above the
// class's quality floor when fallback is on) in its tenant's jurisdiction
// is skipped only for its size (SkipTooSmall); every such pool is. limit
// is the most tokens (input plus output) one of them holds. A request no
// pool serves there (not serving, outside the jurisdiction) is not too
// large: ok is false, as it is for a request some pool can take. It only
// reads the configuration.
func (c *Core) TooLarge(req *Request) (limit int64, ok bool) {
	cls := c.cfg.Classes[req.Class]
	tj := c.cfg.Tenants[req.Tenant].Jurisdiction
	tokens := int64(req.Input + req.Output)
	fallbacks := c.cfg.Models[req.Model].Fallbacks
	if !c.cfg.Fallback {
		fallbacks = nil
	}
	for i := 0; i <= len(fallbacks); i++ {
		m := req.Model
		if i > 0 {
			if m = fallbacks[i-1]; c.cfg.Models[m].Quality < cls.QualityFloor {
				continue
			}
		}
		for pi := range c.cfg.Pools {
			p := &c.cfg.Pools[pi]
			switch c.poolFits(p, m, tj, tokens, 0) {
			case "":
				return 0, false
			case SkipTooSmall:
				limit, ok = max(limit, p.KVTokens[m]), true
			}
		}
	}
	return limit, ok
}

// ContextLimit is the largest request (input plus output tokens) a pool's
// replicas take for a model, as their server says (see LimitContext).
type ContextLimit struct {
	Pool, Model int
	Tokens      int64
}

// LimitContext lowers the largest request pool p's replicas take for model
// m to tokens (input plus output) when that is below what the core was
// configured with: a live server publishes its own limit (vLLM's
// max_model_len), which may be smaller than the KV capacity the scenario
// gives the pool. Every check of a request's size — arrival, dispatch,
// deadline feasibility, TooLarge, Explain — reads the pool's KVTokens, so
// the server's limit reaches them all through this one place. It returns
// the limit in force; tokens < 1 or a pool or model out of range changes
// nothing. Call it before requests arrive: a request already queued is
// not re-checked.
func (c *Core) LimitContext(p, m int, tokens int64) int64 {
	if p < 0 || p >= len(c.cfg.Pools) || m < 0 || m >= len(c.cfg.Pools[p].KVTokens) {
		return 0
	}
	kv := &c.cfg.Pools[p].KVTokens[m]
	if tokens > 0 && tokens < *kv {
		*kv = tokens
	}
	return *kv
}

// refuse rejects, or defers a deferrable class.
func (c *Core) refuse(req *Request, cls Class, reason string, wait time.Duration) Decision {
	retry := c.cfg.RetryAfter
	if retry == 0 {
		retry = max(wait, time.Second)
	}
	if cls.Deferrable {
		return Decision{Outcome: Deferred, Reason: reason, RetryAfter: max(c.cfg.DeferFor, retry)}
	}
	return Decision{Outcome: Rejected, Reason: reason, RetryAfter: retry}
}

// Finish releases what a dispatched or queued request holds: its replica
// slot or its queue place, and its tenant's concurrency. Freed capacity may
// dispatch queued requests (see Dispatches). Finishing a request the core
// does not hold is a no-op.
func (c *Core) Finish(now time.Duration, req *Request) {
	if !req.offered {
		return // never taken: nothing to release
	}
	if req.queue >= 0 {
		qs := &c.queues[req.queue]
		if qs.q.Remove(&req.item) && qs.route >= 0 {
			c.modelQLen[qs.model]--
		}
		req.queue = -1
	}
	c.releaseTenant(req)
	if req.hedged {
		c.EndHedge(now, req, false)
	}
	if req.prefill != 0 {
		c.PrefillDone(now, req)
	}
	if r := req.Replica; r >= 0 {
		req.Replica = -1
		if req.Shadow {
			c.shadowInflight[req.Route-1]--
		}
		c.replicas[r].inflight--
		c.poolSlots(now, c.replicas[r].Pool, -1)
		c.fix(r)
		c.fill(now, r)
	}
}

// Tick retries dispatch everywhere; the driver calls it at WakeAt.
func (c *Core) Tick(now time.Duration) {
	c.wakeAt = 0
	c.returnEjected(now)
	c.advanceBreakers(now)
	for r := range c.replicas {
		c.fill(now, r)
	}
}

// fill dispatches queued requests to replica r while it has room.
func (c *Core) fill(now time.Duration, r int) {
	rs := &c.replicas[r]
	if c.disaggAny && c.cfg.Pools[rs.Pool].Prefill {
		// A prefill replica takes nothing from the queues itself; its room
		// (a slot freed, a breaker closed, back from loading) is the
		// decode replicas' waiting for one.
		c.fillDecode(now, rs.Model)
		return
	}
	for rs.hasRoom() {
		req := c.nextFor(now, r)
		if req == nil {
			return
		}
		c.start(now, req, r)
	}
}

// nextFor pops the request replica r should take next: across the queues
// it may serve (its model, residency keys it satisfies), the head with the
// highest class priority, then the earliest deadline, then the earliest
// arrival. A head that cannot run on r (too large, provider quota) is left
// for another replica.
func (c *Core) nextFor(now time.Duration, r int) *Request {
	rs := &c.replicas[r]
	pool := &c.cfg.Pools[rs.Pool]
	if req := c.nextOn(now, r, pool.Route); req != nil || pool.Route == 0 {
		return req
	}
	// A candidate replica with nothing of its canary's own takes a shadow
	// copy while copies hold fewer than their slots.
	k := pool.Route - 1
	if c.shadowInflight[k] >= c.cfg.Canaries[k].ShadowSlots {
		return nil
	}
	return c.nextOn(now, r, -pool.Route)
}

// nextOn is nextFor over the queues of one route version.
func (c *Core) nextOn(now time.Duration, r, route int) *Request {
	rs := &c.replicas[r]
	pool := &c.cfg.Pools[rs.Pool]
	if c.disaggAny && !c.decodeGate(now, rs.Model, rs.Pool) {
		return nil
	}
	var best *Request
	bestQ := -1
	for _, k := range c.poolKeys[rs.Pool] {
		qi, ok := c.queueAt(rs.Model, k, route)
		if !ok {
			continue
		}
		it := c.queues[qi].q.Peek(now)
		if it == nil {
			continue
		}
		req := c.reqOf(it)
		// Residency is the queue key's: only queues this pool may serve
		// are looked at.
		if c.poolFits(pool, rs.Model, "", int64(req.Input+req.Output), -1) != "" || !c.poolQuotaOK(now, rs.Pool, req) {
			continue
		}
		if best == nil || c.before(req, best) {
			best, bestQ = req, qi
		}
	}
	if best == nil {
		return nil
	}
	c.queues[bestQ].q.Pop(now)
	if route >= 0 {
		c.modelQLen[rs.Model]--
	}
	best.queue = -1
	return best
}

func (c *Core) before(a, b *Request) bool {
	pa, pb := c.cfg.Classes[a.Class].Priority, c.cfg.Classes[b.Class].Priority
	if pa != pb {
		return pa > pb
	}
	da, db := deadlineKey(a.Deadline), deadlineKey(b.Deadline)
	if da != db {
		return da < db
	}
	if a.Arrived != b.Arrived {
		return a.Arrived < b.Arrived
	}
	return a.ID < b.ID
}

func deadlineKey(d time.Duration) time.Duration {
	if d == 0 {
		return math.MaxInt64
	}
	return d
}

// residencyKeys returns the queue keys (indexes into keys) a replica in
// jurisdiction j may serve: requests that may go anywhere, and those
// bound to j; every key where residency is ignored.
func (c *Core) residencyKeys(j string) []int {
	if c.cfg.IgnoreResidency {
		all := make([]int, len(c.keys))
		for i := range all {
			all[i] = i
		}
		return all
	}
	if k := slices.Index(c.keys, j); j != "" && k >= 0 {
		return []int{0, k}
	}
	return []int{0} // keys[0] is "": sorted, it comes first
}

func (c *Core) reqOf(it *dispatch.Item) *Request {
	// NB: item is Request's first field, so the pointers coincide. This
	// keeps the queues free of a side table from items to requests.
	return (*Request)(unsafe.Pointer(it))
}

func (c *Core) queuedFor(req *Request, m int) int {
	return c.queues[c.queueOf(req, m)].q.Len()
}

// queueOf is the queue req joins for model m: its residency key and route
// version (a shadow's own).
func (c *Core) queueOf(req *Request, m int) int {
	rt := c.routeFor(req, m)
	if req.Shadow {
		rt = -req.Route
	}
	qi, ok := c.queueAt(m, c.tenantKey[req.Tenant], rt)
	if !ok {
		// Every model has its baseline queues and every canary its own
		// and its shadows': a miss is a bug in the caller.
		panic(fmt.Sprintf("sched: no queue for model %d route %d", m, rt))
	}
	return qi
}

func (c *Core) enqueue(now time.Duration, req *Request, m int) {
	qi := c.queueOf(req, m)
	req.item = dispatch.Item{
		ID: req.ID, Tenant: req.Tenant, Priority: c.cfg.Classes[req.Class].Priority,
		Arrived: req.Arrived, Deadline: req.Deadline, Cost: float64(req.Input + req.Output),
	}
	c.queues[qi].q.Push(now, &req.item)
	req.offered = true
	req.queue = qi
	if !req.Shadow {
		c.modelQLen[m]++
	}
}

// occupy takes one of replica r's slots at now: a dispatch's, or a
// remote prefill's (disagg.go). On a half-open breaker it is the trial.
func (c *Core) occupy(now time.Duration, r int) {
	rs := &c.replicas[r]
	rs.inflight++
	c.poolSlots(now, rs.Pool, 1)
	if rs.br.state == HalfOpen {
		rs.br.trial = true
	}
	c.fix(r)
}

// start dispatches req to replica r.
func (c *Core) start(now time.Duration, req *Request, r int) {
	rs := &c.replicas[r]
	// occupy's, written out: this is every dispatch's path, and the call
	// cost BenchmarkReplayHour 4 % (measured, alternating binaries).
	rs.inflight++
	c.poolSlots(now, rs.Pool, 1)
	if rs.br.state == HalfOpen {
		rs.br.trial = true
	}
	c.fix(r)
	req.offered = true
	req.Replica = r
	if req.Shadow {
		c.shadowInflight[req.Route-1]++
	}
	c.chargePool(now, rs.Pool, req)
	if c.disaggAny {
		if p := c.prefillFor(now, req, rs.Model, rs.Pool); p >= 0 {
			c.takePrefill(now, req, p)
		}
	}
	if !req.Shadow {
		// A copy is not the queue's progress: the dispatch rates behind
		// predicted waits (Retry-After) and deadline checks leave it out.
		m := rs.Model
		if c.lastDispatch[m] > 0 {
			gap := (now - c.lastDispatch[m]).Seconds()
			c.interval[m] = 0.9*c.interval[m] + 0.1*gap
		}
		c.lastDispatch[m] = now
		c.noteDispatch(now, r)
	}
	c.dispatches = append(c.dispatches, Dispatch{Req: req, Replica: r})
}

// PredictedWait is predictedWait for the drivers: the autoscaler's wait
// metric.
func (c *Core) PredictedWait(m int) time.Duration { return c.predictedWait(m) }

// predictedWait estimates how long a request joining model m's queue now
// waits: the requests ahead times the mean interval between dispatches.
func (c *Core) predictedWait(m int) time.Duration {
	return time.Duration(float64(c.modelQLen[m]+1) * c.interval[m] * float64(time.Second))
}

// canEverServe reports whether some pool could serve req with model m at
// all (capability, residency, size). With why set it counts why each pool
// is skipped; with why nil it returns at the first pool that fits.
func (c *Core) canEverServe(req *Request, m int, why *skipCounts) bool {
	tj := c.cfg.Tenants[req.Tenant].Jurisdiction
	ok := false
	for i := range c.cfg.Pools {
		skip := c.poolFits(&c.cfg.Pools[i], m, tj, int64(req.Input+req.Output), c.routeFor(req, m))
		if skip == "" {
			if why == nil {
				return true
			}
			ok = true
			continue
		}
		// The reasons are built only when asked for: this runs on every
		// arrival, and concatenation allocates.
		switch {
		case why == nil:
		case skip == SkipNotServing:
			why.add(SkipNotServing + " " + c.cfg.Models[m].Name)
		case skip == SkipJurisdiction:
			why.add(SkipJurisdiction + " " + tj)
		default:
			why.add(skip)
		}
	}
	return ok
}

// poolFits is the one check of whether pool p can ever take a request of
// model m from a tenant bound to jurisdiction tj ("" for none) needing
// tokens of KV (< 0: not asked), in the order reports name the reasons: ""
// when it can, else the Skip reason. Arrival, dispatch, prefix routing,
// the queues' next pick and Explain all ask it, so they cannot disagree.
func (c *Core) poolFits(p *Pool, m int, tj string, tokens int64, route int) string {
	switch {
	case !p.Serves[m]:
		return SkipNotServing
	case route >= 0 && p.Route != route:
		return SkipRoute
	case tj != "" && p.Jurisdiction != tj && !c.cfg.IgnoreResidency:
		return SkipJurisdiction
	case tokens >= 0 && tokens > p.KVTokens[m]:
		return SkipTooSmall
	}
	return ""
}

// pick chooses a ready replica with room for req running model m, or -1.
// Constraints (residency, size, provider quota) are the same for every
// replica of a pool, so they are checked once per pool, and each pool's
// least-loaded replica is the top of its heap: routing costs O(pools + log
// replicas), not O(replicas).
func (c *Core) pick(now time.Duration, req *Request, m int) int {
	if c.cfg.PrefixHits != nil {
		return c.pickByPrefix(now, req, m)
	}
	tj := c.cfg.Tenants[req.Tenant].Jurisdiction
	best := -1
	var bestScore float64
	groups := c.groupsOf[m]
	n := len(groups)
	start := 0
	if c.cfg.Strategy == RoundRobin && n > 0 {
		start = c.rr[m] % n
	}
	for k := range n {
		g := &c.groups[groups[(start+k)%n]]
		p := &c.cfg.Pools[g.pool]
		if len(g.heap) == 0 || !p.Serves[m] {
			continue
		}
		r := g.heap[0]
		rs := &c.replicas[r]
		if !rs.hasRoom() {
			continue // the least-loaded replica is full: all are
		}
		if c.disaggAny && !c.decodeGate(now, m, g.pool) {
			continue
		}
		if c.poolFits(p, m, tj, int64(req.Input+req.Output), c.routeFor(req, m)) != "" {
			continue
		}
		if !c.poolQuotaOK(now, g.pool, req) {
			c.Skipped[SkipQuota]++
			continue
		}
		if c.cfg.Strategy == RoundRobin {
			// Rotate across pools; within a pool the least loaded.
			c.rr[m] = (start + k + 1) % n
			return r
		}
		lat := 0.0
		if c.cfg.Strategy == LowestLatency {
			lat = c.estimate(now, &c.pools[g.pool])
		}
		score := c.cfg.Strategy.score(g.pool, p, lat, float64(rs.inflight)/float64(rs.MaxBatch))
		if best < 0 || score < bestScore {
			best, bestScore = r, score
		}
	}
	return best
}

// pickByPrefix is pick with prefix affinity under bounded load: among the
// replicas with room in eligible pools, those whose load is within a
// quarter (plus one request) of the least loaded are candidates, and the
// one holding most of the prompt's leading blocks wins, then the least
// loaded, then the lowest index. Unbounded affinity piles a popular prefix
// onto one replica and loses in queueing what it saves in prefill; the
// bound is the consistent-hashing-with-bounded-loads idea (Mirrokni,
// Thorup and Zadimoghaddam, 2018).
func (c *Core) pickByPrefix(now time.Duration, req *Request, m int) int {
	tj := c.cfg.Tenants[req.Tenant].Jurisdiction
	c.cands = c.cands[:0]
	minLoad := math.Inf(1)
	for _, gi := range c.groupsOf[m] {
		g := &c.groups[gi]
		p := &c.cfg.Pools[g.pool]
		if c.poolFits(p, m, tj, int64(req.Input+req.Output), c.routeFor(req, m)) != "" || !c.poolQuotaOK(now, g.pool, req) ||
			(c.disaggAny && !c.decodeGate(now, m, g.pool)) {
			continue
		}
		minLoad = c.gatherRoom(g, minLoad)
	}
	return c.mostPrefix(req, minLoad)
}

// gatherRoom adds group g's replicas with room to cands and returns the
// least load among them and minLoad: prefix routing's candidates.
func (c *Core) gatherRoom(g *group, minLoad float64) float64 {
	for _, r := range g.heap {
		if rs := &c.replicas[r]; rs.hasRoom() {
			c.cands = append(c.cands, r)
			minLoad = min(minLoad, float64(rs.inflight))
		}
	}
	return minLoad
}

// mostPrefix picks among cands, whose least load is minLoad, those within
// a quarter (plus one) of it, the one holding most of req's leading blocks,
// then the least loaded, then the lowest index; -1 for none.
func (c *Core) mostPrefix(req *Request, minLoad float64) int {
	best, bestHits := -1, -1
	bound := minLoad*1.25 + 1
	for _, r := range c.cands {
		if float64(c.replicas[r].inflight) > bound {
			continue
		}
		hits := c.cfg.PrefixHits(req, r)
		if best < 0 || hits > bestHits || (hits == bestHits && c.lessReplica(r, best)) {
			best, bestHits = r, hits
		}
	}
	return best
}

// group is the replicas of one pool serving one model, in a min-heap by
// (unavailable, inflight, index): its top is the pool's best replica.
type group struct {
	pool, model int
	heap        []int
}

// lessReplica orders replicas for routing: usable (not blocked, routable)
// first, then the fewest requests in flight, then the lowest index. It
// compares their keys (rankKey), kept in a dense array by fix: a routing
// heap's sift then reads 8 bytes per replica, not its whole state, which
// at 32,768 replicas is the difference between cache hits and misses
// (issue 35).
func (c *Core) lessReplica(a, b int) bool { return c.rank[a] < c.rank[b] }

// rankKey is replica r's routing order as one number: unusable in the top
// bit, then its requests in flight, then its index, so that comparing keys
// is comparing (unusable, inflight, index) in that order.
func (c *Core) rankKey(r int) uint64 {
	rs := &c.replicas[r]
	var k uint64
	if rs.blocked || !rs.routable() {
		k = 1 << 63
	}
	return k | uint64(min(rs.inflight, 1<<31-1))<<32 | uint64(uint32(r))
}

// fix restores replica r's position in its group's heap after its load or
// availability changed. Every change to what rankKey reads calls it, so
// the keys are always current.
func (c *Core) fix(r int) {
	c.rank[r] = c.rankKey(r)
	g := &c.groups[c.replicas[r].group]
	i := int(c.hpos[r])
	// Up.
	for i > 0 {
		p := (i - 1) / 2
		if !c.lessReplica(g.heap[i], g.heap[p]) {
			break
		}
		c.swap(g, i, p)
		i = p
	}
	// Down.
	n := len(g.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if l+1 < n && c.lessReplica(g.heap[l+1], g.heap[l]) {
			m = l + 1
		}
		if !c.lessReplica(g.heap[m], g.heap[i]) {
			break
		}
		c.swap(g, i, m)
		i = m
	}
}

func (c *Core) swap(g *group, i, j int) {
	g.heap[i], g.heap[j] = g.heap[j], g.heap[i]
	c.hpos[g.heap[i]] = int32(i)
	c.hpos[g.heap[j]] = int32(j)
}

// admitTenant applies the tenant's concurrency and token-rate quotas, with
// cohort borrowing. On success the request holds a concurrency slot; its
// tokens are charged only once it is dispatched or queued (chargeTokens),
// so a request refused further on costs its tenant nothing.
func (c *Core) admitTenant(now time.Duration, req *Request, cls Class) (Decision, bool) {
	t := &c.cfg.Tenants[req.Tenant]
	ts := &c.tenants[req.Tenant]
	if t.TokensPerMinute > 0 {
		// A request larger than the bucket's burst waits for a full
		// bucket rather than forever.
		cost := min(float64(req.Input+req.Output), t.TokensPerMinute)
		c.refillTenant(now, req.Tenant)
		if ts.tokens < cost && c.lendable(now, req.Tenant) < cost-ts.tokens {
			rate := t.TokensPerMinute / 60
			wait := time.Duration((cost - ts.tokens) / rate * float64(time.Second))
			return c.refuse(req, cls, ReasonTenantTokens, wait), false
		}
	}
	if t.MaxConcurrency > 0 && ts.inflight >= t.MaxConcurrency {
		if !c.borrowSlot(req.Tenant) {
			// NB: while every pool that may serve the tenant is down (an
			// outage in its jurisdiction, its provider's throttle), its
			// requests wait holding its slots, so the limit is where the
			// outage shows; the refusal names the outage, and hints when
			// the first pool is expected back.
			if why, back, down := c.chainDown(now, req); down {
				return c.refuse(req, cls, why, back-now), false
			}
			return c.refuse(req, cls, ReasonTenantConcurrency, time.Second), false
		}
		req.borrow = true
		ts.borrowed++
	}
	ts.inflight++
	req.admitd = true
	return Decision{}, true
}

// TenantFull reports whether a request of tenant i in class cls offered
// now would be refused for the tenant's concurrency (ReasonTenantConcurrency),
// with the Retry-After it would carry: the tenant holds its
// MaxConcurrency and its cohort has no slot to lend, and the class does not
// defer (a deferrable request would wait instead). The gateway asks before
// it reads a request's body, so a tenant at its limit costs no memory. It
// is not full while every pool in the tenant's jurisdiction is down: Arrive
// then refuses for the outage, which depends on the model the body names.
// It changes nothing but what the core has seen of its pools' health.
func (c *Core) TenantFull(now time.Duration, i, cls int) (retryAfter time.Duration, full bool) {
	t := &c.cfg.Tenants[i]
	if t.MaxConcurrency == 0 || c.tenants[i].inflight < t.MaxConcurrency || c.borrowSlot(i) {
		return 0, false
	}
	if c.jurisdictionDown(now, t.Jurisdiction) {
		return 0, false
	}
	d := c.refuse(&Request{}, c.cfg.Classes[cls], ReasonTenantConcurrency, time.Second)
	return d.RetryAfter, d.Outcome == Rejected
}

// chargeTokens takes an admitted request's tokens from its tenant's bucket,
// borrowing the shortfall from cohort peers (admitTenant checked it can).
func (c *Core) chargeTokens(now time.Duration, req *Request) {
	t := &c.cfg.Tenants[req.Tenant]
	if t.TokensPerMinute == 0 {
		return
	}
	ts := &c.tenants[req.Tenant]
	cost := min(float64(req.Input+req.Output), t.TokensPerMinute)
	if ts.tokens >= cost {
		ts.tokens -= cost
		return
	}
	c.borrowTokens(now, req.Tenant, cost-ts.tokens)
	ts.tokens = 0
}

// borrowSlot reports whether tenant i may exceed its concurrency with a slot
// another cohort member is not using. Lenders keep priority: a member under
// its own quota is always admitted (reclaiming), and borrowing stops while
// the cohort as a whole is at its summed quota.
func (c *Core) borrowSlot(i int) bool {
	t := &c.cfg.Tenants[i]
	if t.Cohort == "" {
		return false
	}
	total, used := 0, 0
	for _, j := range c.cohorts[t.Cohort] {
		mc := c.cfg.Tenants[j].MaxConcurrency
		if mc == 0 {
			continue
		}
		total += mc
		used += c.tenants[j].inflight
	}
	return used < total
}

// lendable is how many tokens tenant i's cohort peers can lend: each keeps
// half of its burst in reserve for itself.
func (c *Core) lendable(now time.Duration, i int) float64 {
	t := &c.cfg.Tenants[i]
	if t.Cohort == "" {
		return 0
	}
	avail := 0.0
	for _, j := range c.cohorts[t.Cohort] {
		if j == i || c.cfg.Tenants[j].TokensPerMinute == 0 {
			continue
		}
		c.refillTenant(now, j)
		avail += max(0, c.tenants[j].tokens-c.cfg.Tenants[j].TokensPerMinute/2)
	}
	return avail
}

// borrowTokens takes need tokens from cohort peers' buckets above their
// reserve, in cohort order.
func (c *Core) borrowTokens(now time.Duration, i int, need float64) {
	t := &c.cfg.Tenants[i]
	for _, j := range c.cohorts[t.Cohort] {
		if j == i || c.cfg.Tenants[j].TokensPerMinute == 0 || need <= 0 {
			continue
		}
		c.refillTenant(now, j)
		spare := max(0, c.tenants[j].tokens-c.cfg.Tenants[j].TokensPerMinute/2)
		take := min(spare, need)
		c.tenants[j].tokens -= take
		need -= take
	}
}

func (c *Core) refillTenant(now time.Duration, i int) {
	t := &c.cfg.Tenants[i]
	ts := &c.tenants[i]
	if now > ts.last {
		ts.tokens = min(t.TokensPerMinute, ts.tokens+t.TokensPerMinute/60*(now-ts.last).Seconds())
		ts.last = now
	}
}

func (c *Core) releaseTenant(req *Request) {
	if !req.admitd {
		return
	}
	req.admitd = false
	ts := &c.tenants[req.Tenant]
	ts.inflight--
	if req.borrow {
		req.borrow = false
		ts.borrowed--
	}
}

// poolQuotaOK checks the provider's request and token rate quotas for one
// more request, scheduling a wake-up for when they refill if not.
func (c *Core) poolQuotaOK(now time.Duration, pi int, req *Request) bool {
	if t := c.pools[pi].throttledUntil; now < t {
		if c.wakeAt == 0 || t < c.wakeAt {
			c.wakeAt = t
		}
		return false
	}
	p := &c.cfg.Pools[pi]
	if p.RequestsPerMinute == 0 && p.TokensPerMinute == 0 {
		return true
	}
	c.refillPool(now, pi)
	ps := &c.pools[pi]
	need := float64(req.Input + req.Output)
	okReq := p.RequestsPerMinute == 0 || ps.reqTokens >= 1
	okTok := p.TokensPerMinute == 0 || ps.tokTokens >= min(need, p.TokensPerMinute)
	if okReq && okTok {
		return true
	}
	wait := time.Duration(0)
	if !okReq {
		wait = max(wait, time.Duration((1-ps.reqTokens)/(p.RequestsPerMinute/60)*float64(time.Second)))
	}
	if !okTok {
		wait = max(wait, time.Duration((min(need, p.TokensPerMinute)-ps.tokTokens)/(p.TokensPerMinute/60)*float64(time.Second)))
	}
	at := now + max(wait, time.Millisecond)
	if c.wakeAt == 0 || at < c.wakeAt {
		c.wakeAt = at
	}
	return false
}

func (c *Core) chargePool(now time.Duration, pi int, req *Request) {
	p := &c.cfg.Pools[pi]
	if p.RequestsPerMinute == 0 && p.TokensPerMinute == 0 {
		return
	}
	c.refillPool(now, pi)
	ps := &c.pools[pi]
	if p.RequestsPerMinute > 0 {
		ps.reqTokens--
	}
	if p.TokensPerMinute > 0 {
		ps.tokTokens -= float64(req.Input + req.Output)
	}
}

func (c *Core) refillPool(now time.Duration, pi int) {
	ps := &c.pools[pi]
	if now > ps.last {
		ps.reqTokens, ps.tokTokens = c.poolBuckets(now, pi)
		ps.last = now
	}
}

// poolBuckets is what pool pi's request and token buckets hold at now,
// refilled since their last update without changing them: the one refill
// rule of the dispatch path and of QuotaSpent's view.
func (c *Core) poolBuckets(now time.Duration, pi int) (req, tok float64) {
	p := &c.cfg.Pools[pi]
	ps := &c.pools[pi]
	req, tok = ps.reqTokens, ps.tokTokens
	if now > ps.last {
		dt := (now - ps.last).Seconds()
		req = min(p.RequestsPerMinute, req+p.RequestsPerMinute/60*dt)
		tok = min(p.TokensPerMinute, tok+p.TokensPerMinute/60*dt)
	}
	return req, tok
}

// skipCounts counts why pools were skipped, for a readable rejection.
type skipCounts struct {
	reasons []string
	counts  []int
}

func (s *skipCounts) add(reason string) {
	for i, r := range s.reasons {
		if r == reason {
			s.counts[i]++
			return
		}
	}
	s.reasons = append(s.reasons, reason)
	s.counts = append(s.counts, 1)
}

func (s *skipCounts) String() string {
	total := 0
	parts := make([]string, len(s.reasons))
	for i, r := range s.reasons {
		total += s.counts[i]
		parts[i] = fmt.Sprintf("%d %s", s.counts[i], r)
	}
	return fmt.Sprintf("%d pools skipped: %s", total, strings.Join(parts, ", "))
}
