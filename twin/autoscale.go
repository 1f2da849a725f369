package twin

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim/stats"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Autoscaling in the twin: capacity that arrives late, in part, or not at
// all.
//
// An autoscaled pool is built at max_replicas; the replicas beyond
// `replicas` start absent (sched.Replica.Absent), so the core neither
// routes to them nor counts them, and their engines idle. Every
// sync_period the runner measures the pool's metric and runs the core's
// Autoscaler (sched.Autoscaler, the HPA's rule), which sets the count the
// pool asks for: `requested`, the HPA's spec.replicas. What the provider
// has not yet granted is asked for at once and again after each refusal's
// retry-after, like a pending pod the cluster autoscaler keeps trying to
// place. A grant comes from the reservation first (no provisioning delay),
// then on demand up to the burst cap, after a provisioning delay drawn
// from the "acquisition" stream; either then loads its model (cold_start)
// before the core may route to it. A scale-down cancels what has not
// arrived, then releases replicas, newest first: a released replica takes
// no new work and is gone once what it has in flight finishes (seen at the
// next sync, so it is paid for up to one sync period longer than it
// works).
//
// A replica is paid for from when it is provisioned (the instance runs,
// loading included) until it is gone, at the pool's price, times
// burst_price beyond the reservation: the pool's cost in the report then
// follows the replicas over time rather than a fixed count.

// Reasons a provider refuses a scale-up (AutoscaleReport.RefusedBy). The
// acquisition faults (stockout, quota-cap, slow-provisioning: effects.go)
// change nothing on replicas: the scaler reads the active ones when it
// asks.
const (
	RefusedReservation = sched.RefusedReservation
	RefusedStockout    = sched.RefusedStockout
	RefusedQuota       = sched.RefusedQuota
)

// scaler is one autoscaled pool in a run: the request engine's
// (reqengine.ScaledPool: the core's Scaler and what its transitions do to
// the core), and the twin's side of it: the replicas' engines (scaled:
// what Ready.Scaling asks of them), the timeline, and the acquisition
// faults on the pool (reqengine.Acquirer).
type scaler struct {
	r    *runner
	pool int
	sc   *sched.Scaler
	eng  *reqengine.ScaledPool
}

// AutoscaleReport is what one autoscaled pool did (Report.Autoscaling).
type AutoscaleReport struct {
	// Counts at the end of the run's arrivals... and their extremes.
	MinServing int `json:"min_serving"`
	MaxServing int `json:"max_serving"`
	// ScaleUps and ScaleDowns count the autoscaler's decisions.
	ScaleUps   uint64 `json:"scale_ups"`
	ScaleDowns uint64 `json:"scale_downs"`
	// Asked is the replicas asked of the provider (each ask of a retried
	// replica counts), Granted those it granted (Reserved of them from
	// the reservation), Refused those it refused, by reason in RefusedBy.
	Asked     uint64            `json:"asked"`
	Granted   uint64            `json:"granted"`
	Reserved  uint64            `json:"reserved"`
	Refused   uint64            `json:"refused"`
	RefusedBy map[string]uint64 `json:"refused_by"`
	// ToServing is the time from a replica being first asked for to its
	// serving, in seconds.
	ToServing stats.Summary `json:"to_serving"`
	// The pool's cost split (in Report.Pools[pool].Cost together), and
	// the replica-hours behind it.
	ReservedHours float64 `json:"reserved_replica_hours"`
	BurstHours    float64 `json:"burst_replica_hours"`
	ReservedCost  float64 `json:"reserved_cost"`
	BurstCost     float64 `json:"burst_cost"`
	// The pool's shortfall within the scenario's duration: the seconds it
	// served fewer replicas than it asked for (serving < requested),
	// those replicas times the seconds (∫ requested − serving dt), and
	// its longest short stretch.
	ShortS        float64 `json:"short_s"`
	ShortReplicaS float64 `json:"short_replica_s"`
	LongestShortS float64 `json:"longest_short_s"`
	// Tenants is what the shortfall did to each tenant the pool may
	// serve: SLO attainment of its requests that arrived while the pool
	// was short and while it was not (ShortfallTenant; measured requests).
	Tenants map[string]ShortfallTenant `json:"tenants"`
	// Series is the pool's replicas at each change.
	Series []ReplicaCount `json:"series"`
}

// ReplicaCount is an autoscaled pool's replicas at a moment: asked for,
// provisioning (granted, not up), warming (loading), serving and
// draining.
type ReplicaCount = sched.ReplicaCount

// initAutoscale builds a scaler for each autoscaled pool.
func (r *runner) initAutoscale() error {
	r.scaling = reqengine.NewScaling(r.p.sc, func(pi int) int { return r.p.pools[pi].Spec.Replicas }, false)
	for pi := range r.p.pools {
		ps := r.p.pools[pi].Spec
		if ps.Autoscale == nil {
			continue
		}
		var reps []int
		for i := range r.replicas {
			if r.replicas[i].pool == pi {
				reps = append(reps, i)
			}
		}
		cfg := compile.ScalerConfig(ps, r.p.core.Replicas[reps[0]].MaxBatch, r.duration, r.s.Rand(compile.AcquisitionStream(ps.Name)))
		s, err := sched.NewScaler(cfg, r.duration)
		if err != nil {
			return fmt.Errorf("pool %s: autoscale: %w", ps.Name, err)
		}
		for k, ri := range reps {
			r.replicas[ri].absent = k >= ps.Replicas
		}
		sc := &scaler{r: r, pool: pi, sc: s}
		// A simulated replica's engine answers once started.
		sc.eng = r.scaling.Add(r.core, pi, reps, ps.Replicas, s, sc, true)
		// A request is counted when it ends, after its arrival: the
		// series so far has the pool's counts then.
		r.tally.watchShortfall(r.p, pi, func(t time.Duration) bool { return ShortAt(s.Tally().Series, t) })
		r.scalers = append(r.scalers, sc)
	}
	return nil
}

// scaled carries out what a scaler decided for a replica's engine: a
// replica started idles until its model has loaded (the twin counts it a
// cold start); one serving, released or gone takes that state. The core
// routes to a serving one already (the request engine made it ready).
func (r *runner) scaled(a reqengine.ScaleAction) {
	rt := &r.replicas[a.Replica]
	switch a.Kind {
	case reqengine.ScaleStart:
		rt.absent, rt.loading = false, true
		r.pools[a.Pool].ColdStarts++
	case reqengine.ScaleRoutable, reqengine.ScaleReleased:
		rt.loading = false
	case reqengine.ScaleGone:
		rt.absent = true
	}
}

// Acquisition implements reqengine.Acquirer: the acquisition faults
// active on the pool, in the scenario's order.
func (sc *scaler) Acquisition() []faults.Spec {
	var on []faults.Spec
	for _, f := range sc.r.faults {
		if f.active && slices.Contains(f.pools, sc.pool) {
			on = append(on, f.spec)
		}
	}
	return on
}

// view is the scaler's counts now, for a snapshot (PoolState.Autoscale).
func (sc *scaler) view() *AutoscaleState { return AutoscaleView(sc.sc, sc.r.s.Now()) }

// AutoscaleView is scaler s's counts at now, for a snapshot
// (PoolState.Autoscale): the twin's and the live console's.
func AutoscaleView(s *sched.Scaler, now time.Duration) *AutoscaleState {
	c, t := s.Counts(now), s.Tally()
	return &AutoscaleState{Requested: c.Requested, Provisioning: c.Provisioning, Warming: c.Warming,
		Serving: c.Serving, Draining: c.Draining, Refused: t.Refused,
		LastRefused: t.LastRefused, LastRefusedAt: t.LastRefusedAt, LastRefusedWhy: t.LastRefusedWhy}
}

// ScalerSnapshot is what a Scaler did up to a moment: its tally and the
// replica-hours paid for (see sched.Scaler.Paid), copied, so that a report
// may be made of it while the Scaler goes on.
type ScalerSnapshot struct {
	Tally                              sched.ScalerTally
	ReservedHours, BurstHours, UpHours float64
}

// SnapshotScaler copies what s did up to now.
func SnapshotScaler(s *sched.Scaler, now time.Duration) ScalerSnapshot {
	t := s.Tally()
	t.RefusedBy, t.ToServing, t.Series = maps.Clone(t.RefusedBy), slices.Clone(t.ToServing), slices.Clone(t.Series)
	res, burst, up := s.Paid(now)
	return ScalerSnapshot{Tally: t, ReservedHours: res, BurstHours: burst, UpHours: up}
}

// autoscaleInto adds pool ps's scaler, as snap has it, to rep: its section
// of rep.Autoscaling (its shortfall from snap's series, its tenants' from
// t), and the pool's cost and utilization from the replicas paid for; t's
// successful requests give the cost per success. The live report is made
// by the same code.
func autoscaleInto(rep *Report, ps *scenarios.Pool, snap ScalerSnapshot, t *tally) {
	succeeded := t.succeeded
	if rep.Autoscaling == nil {
		rep.Autoscaling = map[string]*AutoscaleReport{}
	}
	resH, burstH, upH := snap.ReservedHours, snap.BurstHours, snap.UpHours
	price := ps.PricePerGPUHour * float64(ps.GPUsPerReplica)
	burstPrice := price
	if q := ps.Acquisition; q != nil && q.BurstPrice > 0 {
		burstPrice *= q.BurstPrice
	}
	st := snap.Tally
	var sk stats.Sketch
	for _, d := range st.ToServing {
		sk.Add(d.Seconds())
	}
	ar := &AutoscaleReport{MinServing: st.MinServing, MaxServing: st.MaxServing, ScaleUps: st.ScaleUps, ScaleDowns: st.ScaleDowns,
		Asked: st.Asked, Granted: st.Granted, Reserved: st.Reserved, Refused: st.Refused, RefusedBy: maps.Clone(st.RefusedBy),
		ToServing: sk.Summary(), Series: slices.Clone(st.Series),
		ReservedHours: round(resH, 6), BurstHours: round(burstH, 6),
		ReservedCost: round(resH*price, 6), BurstCost: round(burstH*burstPrice, 6),
		Tenants: t.shortfallTenants(ps.Name)}
	short, replicaS, longest := shortfallOf(st.Series, t.sc.Duration.D().Seconds())
	ar.ShortS, ar.ShortReplicaS, ar.LongestShortS = round(short, 6), round(replicaS, 6), round(longest, 6)
	if pr := rep.Pools[ps.Name]; pr != nil {
		if upH > 0 {
			// Busy over the replica-time there was, not over max_replicas.
			pr.Utilization = round(pr.BusyGPUHours/float64(max(ps.GPUsPerReplica, 1))/upH, 6)
		}
		rep.Cost.Total += ar.ReservedCost + ar.BurstCost - pr.Cost
		pr.Cost = round(ar.ReservedCost+ar.BurstCost, 6)
	}
	rep.Autoscaling[ps.Name] = ar
	rep.Cost.Total = round(rep.Cost.Total, 6)
	if succeeded > 0 {
		rep.Cost.PerSuccessfulTask = round(rep.Cost.Total/float64(succeeded), 9)
	}
}
