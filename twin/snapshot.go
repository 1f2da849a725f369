package twin

import "time"

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
}
