package twin

import (
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Snapshot is the state of a drill at one instant of simulated time, for a
// console to draw: the router's view of the fleet (breakers, not the fault
// schedule), recent latency against the SLOs, queues, routes and what the
// scheduler decided and why. It is a value: the drill builds a fresh one
// each time, and the receiver may keep it.
type Snapshot struct {
	Scenario string
	Seed     uint64
	Now      time.Duration // simulated time
	End      time.Duration // when the run ends (duration + drain)
	Duration time.Duration // when arrivals stop
	Done     bool          // the run has ended

	Regions []RegionState
	Classes []ClassState
	Models  []ModelState
	// Tenants: per tenant, in the scenario's order, how it fares now.
	Tenants []TenantState
	// Degradation is the ladder's state: engaged rungs, bottom first; nil
	// without a ladder.
	Degradation *LadderState
	Faults      []FaultState    // every fault so far, scenario's and injected
	Events      []TimelineEvent // the timeline so far, oldest first
	Requests    Counts          // the whole run so far (warm-up excluded)
	Rejections  map[string]uint64
}

// RegionState is a region and its pools.
type RegionState struct {
	Name         string
	Jurisdiction string
	Pools        []PoolState
}

// PoolState is one pool as the router sees it.
//
// For an autoscaled pool, Replicas, Up, Open, Utilization and Slots count
// only the replicas provisioned now (warming or serving; not those asked
// for and not yet up, nor those released and draining); Autoscale says
// what its scaler asks for and holds.
type PoolState struct {
	Name, Provider string
	Models         []string // the models it serves now
	Replicas       int
	// Up counts replicas the router would send work to (breaker closed or
	// half-open, loaded); Open those whose breaker is open.
	Up, Open int
	// Health is "healthy" (every replica up), "degraded" (some) or "down"
	// (none), from the router's view.
	Health string
	// Utilization is the share of replicas with a batch running now;
	// Running and Waiting count sequences in the replicas' batches and
	// queues; Inflight counts requests the router has placed here.
	Utilization      float64
	Running, Waiting int
	Inflight         int
	Dispatched       uint64 // so far
	// Slots are the requests the router may place here at once (replicas
	// × max_batch): Inflight/Slots is the pool's saturation, the share of
	// its batch slots in use, which Utilization (any batch running) is not.
	Slots int
	// Canary names the canary whose candidate the pool is ("" for none)
	// and CanaryShare its share of eligible traffic now.
	Canary      string
	CanaryShare float64
	// Role is the pool's part in disaggregated serving: "prefill",
	// "decode" or "" (it prefills its own prompts). A prefill pool's
	// Inflight counts the prompts it computes; a decode pool's Link is its
	// replicas' inbound KV links now (nil for the others).
	Role string
	Link *LinkState
	// Autoscale is the pool's scaler now; nil for a pool that does not
	// autoscale (and for a live fleet, which does not yet).
	Autoscale *AutoscaleState
}

// AutoscaleState is an autoscaled pool's replicas now, as its scaler
// counts them, and what the provider has refused.
type AutoscaleState struct {
	// Requested is what the pool asks for (the HPA's spec.replicas);
	// Provisioning those granted and not yet up, Warming those up and
	// loading their model, Serving those routable, Draining those
	// released and finishing their work.
	Requested, Provisioning, Warming, Serving, Draining int
	// Refused counts the replicas the provider refused so far (each ask
	// of a retried replica counts); LastRefused is how many it refused at
	// its last refusal, LastRefusedAt when, and LastRefusedWhy why
	// (RefusedStockout, RefusedQuota, RefusedReservation, joined by ", "
	// when more than one).
	Refused        uint64
	LastRefused    int
	LastRefusedAt  time.Duration
	LastRefusedWhy string
}

// Short is the replicas the pool asks for that the provider has not
// granted: refused, and asked again after the retry.
func (a AutoscaleState) Short() int {
	return max(a.Requested-a.Provisioning-a.Warming-a.Serving, 0)
}

// OnTheWay is the replicas asked for that do not serve yet: short,
// provisioning or warming.
func (a AutoscaleState) OnTheWay() int {
	return max(a.Requested-a.Serving, 0)
}

// Saturation is the share of the pool's batch slots in use (0 without
// slots).
func (p PoolState) Saturation() float64 {
	if p.Slots <= 0 {
		return 0
	}
	return float64(p.Inflight) / float64(p.Slots)
}

// ClassState is one request class over the recent window.
type ClassState struct {
	Name string
	// SLO targets, zero when the class has none.
	SLOTTFT, SLOE2E time.Duration
	// Over the last Window of simulated time: p99 of TTFT and end-to-end
	// latency of requests completed (0 without any), SLO attainment of
	// requests finished (1 without any), rejected and deferred per second.
	Window                    time.Duration
	TTFTP99, E2EP99           time.Duration
	Attainment                float64
	RejectedPS, DeferredPS    float64
	Completed, Finished       uint64 // in the window
	TotalArrived, TotalSLOMet uint64
	// The class's requests waiting now for their first token (queued,
	// deferred, retrying or running without one): how many, the age of
	// the oldest, and the TTFT p99 over the window's completed requests
	// and these at their current age. Completed requests alone hide an
	// outage while it lasts (the requests it holds have not completed);
	// this p99 breaches the moment they wait past the objective.
	Waiting        int
	OldestWaiting  time.Duration
	TTFTP99Waiting time.Duration
}

// TTFTP99Now is the worse of the completed requests' TTFT p99 and the one
// that counts the waiting ones (0 where a driver does not report them).
func (c ClassState) TTFTP99Now() time.Duration { return max(c.TTFTP99, c.TTFTP99Waiting) }

// TenantState is one tenant over the recent window (Window, as its
// classes'): where its requests were served and how they fared, for the
// console's tenant pane. Figures are the tenant's own, never its
// requests' content.
type TenantState struct {
	Name string
	// Jurisdiction is where its requests must be served ("": anywhere).
	Jurisdiction string
	// Over the window: SLO attainment of its finished requests (1 without
	// any), and its requests finished, completed, refused (rejected),
	// timed out and failed. Lost = Rejected + TimedOut + Failed.
	Attainment                 float64
	Finished, Completed        uint64
	Rejected, TimedOut, Failed uint64
	// Its requests waiting for their first token now, and the oldest's age.
	Waiting       int
	OldestWaiting time.Duration
	// Served counts its completions in the window by where they were
	// served, most first: Pool, its Region, and the Model that answered
	// (Fallback when it is not the model asked for).
	Served []TenantServed
}

// Lost is the tenant's requests in the window that got no answer.
func (t TenantState) Lost() uint64 { return t.Rejected + t.TimedOut + t.Failed }

// TenantServed is where some of a tenant's requests were served.
type TenantServed struct {
	Pool, Region, Model string
	Fallback            bool
	Count               uint64
}

// ModelState is one model's queue and route.
type ModelState struct {
	Name  string
	Queue int // requests waiting in the gateway's queue for it
	// Routes: per tenant, where its requests for the model go now and why
	// pools were skipped.
	Routes []RouteState
}

// RouteState explains where one tenant's requests for a model go now.
type RouteState struct {
	Tenant string
	// Served is the model requests are served by now: the model itself,
	// a fallback, or "" when nothing can serve them.
	Served   string
	Fallback bool
	// Pools that can take the request now, and the skipped ones counted
	// by reason ("2 outside jurisdiction eu", "1 circuit open").
	Pools   []string
	Skipped []ReasonCount
}

// ReasonCount is a reason and how many times it applied.
type ReasonCount struct {
	Reason string
	Count  int
}

// LadderState is the degradation ladder now.
type LadderState struct {
	Steps   []string // every rung, bottom first
	Engaged int      // rungs engaged
}

// LadderView is ladder l's state now, for a snapshot
// (Snapshot.Degradation): the twin's and the live console's.
func LadderView(l *sched.Ladder) *LadderState {
	ls := &LadderState{Engaged: l.Engaged()}
	for _, r := range l.Rungs() {
		ls.Steps = append(ls.Steps, r.Name)
	}
	return ls
}

// FaultState is one fault of the drill.
type FaultState struct {
	Label  string
	Spec   string
	Start  time.Duration
	End    time.Duration // 0: open-ended
	Active bool
	// From its start, -1 until it happens (recovery: from its end).
	Detect, Mitigate, Recover time.Duration
	Injected                  bool // by the operator, not the scenario
	// NotMitigatedFor names a tenant the fault displaced after its
	// detection and that nothing has served elsewhere yet ("": none); while
	// one is, Mitigate is -1 however much other traffic moved.
	NotMitigatedFor string
}

// LinkState is a decode pool's inbound KV links now: the transfers on
// them (moving or in their latency), and the bandwidth per replica and
// the latency per transfer they run at, against their own (a degraded
// link runs below it).
type LinkState struct {
	Transfers            int
	BandwidthGBs, OwnGBs float64
	Latency, OwnLatency  time.Duration
}

// ReplicaLoad is what a snapshot knows of one replica beyond the router's
// view: whether it is loading a model, the work in its engine, and a
// decode replica's inbound KV link (nil for the others).
type ReplicaLoad struct {
	Loading          bool
	Running, Waiting int
	Link             *LinkState
}

// FleetState is the fleet by region from the router's view at now, for
// the snapshot of a drill or of a live session. replicaPool[ri] is replica
// ri's pool index in sc.Pools. load, when set, tells what each replica's
// engine runs; without it (a live fleet, whose engines are remote) a
// replica with requests in flight counts as busy. Pools with no replicas
// are left out when skipEmpty; regions with no pools always are.
func FleetState(sc *scenarios.Scenario, core *sched.Core, now time.Duration, replicaPool []int, load func(ri int) ReplicaLoad, skipEmpty bool) []RegionState {
	var out []RegionState
	for _, reg := range sc.Regions {
		rs := RegionState{Name: reg.Name, Jurisdiction: reg.Jurisdiction}
		for pi, p := range sc.Pools {
			if p.Region != reg.Name || skipEmpty && p.Replicas == 0 {
				continue
			}
			ps := PoolState{Name: p.Name, Provider: p.Provider, Replicas: p.Replicas, Slots: p.Replicas * p.MaxBatch}
			if p.Role == "prefill" || p.Role == "decode" {
				ps.Role = p.Role
			}
			if k, ok := core.CanaryOf(pi); ok {
				ps.Canary, ps.CanaryShare = sc.Canaries[k].Name, core.CanaryShare(k)
			}
			for m, model := range sc.Models {
				// A prefill pool serves no client: its models are those
				// it prefills.
				if core.Serves(pi, m) || ps.Role == "prefill" && slices.Contains(p.Models, model.Name) {
					ps.Models = append(ps.Models, model.Name)
				}
			}
			if p.Autoscale != nil {
				// Only the replicas provisioned now are the pool's.
				ps.Replicas = 0
				for ri, rp := range replicaPool {
					if rp == pi && core.Present(ri) {
						ps.Replicas++
					}
				}
				ps.Slots = ps.Replicas * p.MaxBatch
			}
			busy := 0
			for ri, rp := range replicaPool {
				if rp != pi || !core.Present(ri) {
					continue
				}
				var l ReplicaLoad
				if load != nil {
					l = load(ri)
				}
				switch {
				case core.BreakerView(now, ri) == sched.Open:
					ps.Open++
				case core.ReplicaReady(ri) && !l.Loading:
					ps.Up++
				}
				n := core.Inflight(ri)
				ps.Inflight += n
				ps.Running += l.Running
				ps.Waiting += l.Waiting
				if k := l.Link; k != nil {
					// The pool's: transfers summed, rates those of its
					// replicas (alike, but for a fault on some: the slowest).
					if ps.Link == nil {
						ps.Link = &LinkState{BandwidthGBs: k.BandwidthGBs, OwnGBs: k.OwnGBs, Latency: k.Latency, OwnLatency: k.OwnLatency}
					}
					ps.Link.Transfers += k.Transfers
					ps.Link.BandwidthGBs = min(ps.Link.BandwidthGBs, k.BandwidthGBs)
					ps.Link.Latency = max(ps.Link.Latency, k.Latency)
				}
				if load != nil && l.Running > 0 || load == nil && n > 0 {
					busy++
				}
			}
			switch {
			case ps.Replicas > 0 && ps.Up == ps.Replicas:
				ps.Health = "healthy"
			case ps.Up > 0:
				ps.Health = "degraded"
			default:
				ps.Health = "down"
			}
			if ps.Replicas > 0 {
				ps.Utilization = float64(busy) / float64(ps.Replicas)
			}
			rs.Pools = append(rs.Pools, ps)
		}
		if len(rs.Pools) > 0 { // a region with no pools (one to buy into, say) has nothing to show
			out = append(out, rs)
		}
	}
	return out
}
