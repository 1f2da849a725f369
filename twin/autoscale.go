package twin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim/stats"
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
// change nothing on replicas: acquire reads the active ones.
const (
	RefusedReservation = "reservation" // reservation used and the burst cap reached
	RefusedStockout    = "stockout"    // the provider has no capacity (fault stockout)
	RefusedQuota       = "quota"       // the account's GPU quota (fault quota-cap)
)

// repState is an autoscaled replica's place in its life.
type repState uint8

const (
	repAbsent       repState = iota // not provisioned
	repProvisioning                 // granted, the instance not yet up
	repWarming                      // up, loading its model
	repServing                      // routable
	repDraining                     // released, finishing what it has
)

// scaler is one autoscaled pool's state in a run.
type scaler struct {
	pool     int
	name     string
	as       *sched.Autoscaler
	acq      scenarios.Acquisition
	burstCap int // on-demand replicas beyond the reservation; -1: no cap
	reps     []int

	state    []repState // per entry of reps
	reserved []bool     // holds a reserved replica
	askedAt  []time.Duration
	upAt     []time.Duration // provisioned: paid from then
	gen      []int           // bumped on release: stale timers do nothing

	requested int // the count asked for (the HPA's spec.replicas)
	askedFrom []time.Duration
	retryAt   time.Duration
	lastBusy  float64
	lastSync  time.Duration
	// The provider's last refusal, for the console: how many, when, why.
	lastRefused    int
	lastRefusedAt  time.Duration
	lastRefusedWhy string

	rep       *AutoscaleReport
	toServing stats.Sketch
	// Replica-hours paid for, within the scenario's duration; and up to
	// the run's end (the drain included), for the pool's utilization.
	reservedHours, burstHours, upHours float64
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
	// Series is the pool's replicas at each change.
	Series []ReplicaCount `json:"series"`
}

// ReplicaCount is an autoscaled pool's replicas at a moment: asked for,
// provisioning (granted, not up), warming (loading), serving and
// draining.
type ReplicaCount struct {
	TS           float64 `json:"ts"`
	Requested    int     `json:"requested"`
	Provisioning int     `json:"provisioning"`
	Warming      int     `json:"warming"`
	Serving      int     `json:"serving"`
	Draining     int     `json:"draining"`
}

// autoscaledReplicas is how many replicas build gives pool ps: its
// autoscaling maximum, or its count.
func autoscaledReplicas(ps *scenarios.Pool) int {
	if a := ps.Autoscale; a != nil {
		return max(ps.Replicas, a.MaxReplicas)
	}
	return ps.Replicas
}

// initAutoscale builds a scaler for each autoscaled pool.
func (r *runner) initAutoscale() error {
	for pi := range r.p.pools {
		ps := r.p.pools[pi].spec
		if ps.Autoscale == nil {
			continue
		}
		as, err := sched.NewAutoscaler(scenarios.AutoscalePolicy(ps.Autoscale))
		if err != nil {
			return fmt.Errorf("pool %s: autoscale: %w", ps.Name, err)
		}
		sc := &scaler{pool: pi, name: ps.Name, as: as, burstCap: -1,
			rep: &AutoscaleReport{MinServing: ps.Replicas, MaxServing: ps.Replicas,
				// Every reason, so that an expectation may name one that
				// never happened (it is checked before the run).
				RefusedBy: map[string]uint64{RefusedReservation: 0, RefusedStockout: 0, RefusedQuota: 0}}}
		if q := ps.Acquisition; q != nil {
			sc.acq = *q
			if q.Burst != nil {
				sc.burstCap = *q.Burst
			}
		}
		for i := range r.replicas {
			if r.replicas[i].pool == pi {
				sc.reps = append(sc.reps, i)
			}
		}
		n := len(sc.reps)
		sc.state, sc.reserved = make([]repState, n), make([]bool, n)
		sc.askedAt, sc.upAt, sc.gen = make([]time.Duration, n), make([]time.Duration, n), make([]int, n)
		for k := range n {
			if k < ps.Replicas {
				// The starting replicas hold the reservation first.
				sc.state[k], sc.reserved[k] = repServing, k < sc.acq.Reserved
			}
			r.replicas[sc.reps[k]].absent = k >= ps.Replicas
		}
		sc.requested = ps.Replicas
		sc.as.Seed(0, ps.Replicas)
		r.scalers = append(r.scalers, sc)
	}
	if len(r.scalers) > 0 {
		r.acqRand = r.s.Rand("acquisition")
	}
	return nil
}

// startAutoscale schedules each scaler's first sync.
func (r *runner) startAutoscale() {
	for _, sc := range r.scalers {
		sc.record(0)
		period := sc.as.Policy().SyncPeriod
		var sync func()
		sync = func() {
			r.syncScaler(sc)
			if r.s.Now()+period <= r.end && (r.lc.Live() > 0 || !r.afterArrivals()) {
				r.s.After(period, sync)
			}
		}
		r.s.At(period, sync)
	}
}

// metric measures sc's pool for its autoscaler.
func (r *runner) metric(sc *scaler) float64 {
	now := r.s.Now()
	pol := sc.as.Policy()
	n := max(sc.requested, 1)
	switch pol.Metric {
	case sched.MetricQueue, sched.MetricWait:
		queued, wait := 0, time.Duration(0)
		for m, serves := range r.p.core.Pools[sc.pool].Serves {
			if serves {
				queued += r.core.QueueLen(m)
				wait = max(wait, r.core.PredictedWait(m))
			}
		}
		if pol.Metric == sched.MetricWait {
			return wait.Seconds()
		}
		return float64(queued) / float64(n)
	}
	// Utilization: busy slots averaged since the last sync, over the
	// replicas asked for (those not serving yet count as idle, as the
	// HPA counts a pod not ready on a scale-up).
	busy := r.core.PoolBusy(now, sc.pool)
	slots := float64(n) * float64(r.p.core.Replicas[sc.reps[0]].MaxBatch) * (now - sc.lastSync).Seconds()
	u := 0.0
	if slots > 0 {
		u = (busy - sc.lastBusy) / slots
	}
	sc.lastBusy, sc.lastSync = busy, now
	return u
}

// syncScaler is one sync period's evaluation of sc.
func (r *runner) syncScaler(sc *scaler) {
	now := r.s.Now()
	// Released replicas whose work has finished are gone.
	for k, st := range sc.state {
		if st == repDraining && r.core.Inflight(sc.reps[k]) == 0 {
			r.gone(sc, k, now)
		}
	}
	metric := r.metric(sc)
	n, changed := sc.as.Evaluate(now, sc.requested, metric)
	if changed {
		dir := "up"
		if n > sc.requested {
			sc.rep.ScaleUps++
		} else {
			sc.rep.ScaleDowns++
			dir = "down"
		}
		r.event(now, "scale", fmt.Sprintf("pool %s: scale %s %d → %d (%s %.3g, target %.3g)",
			sc.name, dir, sc.requested, n, sc.as.Policy().Metric, metric, sc.as.Policy().Target))
		if n < sc.requested {
			r.releaseReplicas(sc, sc.requested-n, now)
		}
		sc.requested = n
	}
	r.acquire(sc, now)
	sc.record(now)
}

// live counts sc's replicas granted and not released.
func (sc *scaler) live() (n, reserved, burst int) {
	for k, st := range sc.state {
		if st == repProvisioning || st == repWarming || st == repServing {
			n++
			if sc.reserved[k] {
				reserved++
			} else {
				burst++
			}
		}
	}
	return n, reserved, burst
}

// acquire asks the provider for what sc wants and has not been granted:
// the reservation first, then on demand up to the burst cap, less what an
// active stockout or quota-cap refuses.
func (r *runner) acquire(sc *scaler, now time.Duration) {
	n, heldRes, heldBurst := sc.live()
	want := sc.requested - n
	if want <= 0 || now < sc.retryAt {
		return
	}
	for len(sc.askedFrom) < want {
		sc.askedFrom = append(sc.askedFrom, now)
	}
	sc.rep.Asked += uint64(want)
	refused := map[string]int{}
	res := min(want, max(sc.acq.Reserved-heldRes, 0))
	onDemand := want - res
	if sc.burstCap >= 0 && onDemand > sc.burstCap-heldBurst {
		capped := max(sc.burstCap-heldBurst, 0)
		refused[RefusedReservation] += onDemand - capped
		onDemand = capped
	}
	grant, stocked := 1.0, false
	factor := 1.0
	quota := math.MaxInt
	for _, f := range r.faults {
		if !f.active || !slices.Contains(f.pools, sc.pool) {
			continue
		}
		switch f.spec.Kind {
		case faults.Stockout:
			grant, stocked = min(grant, f.spec.Grant), true
		case faults.SlowProvisioning:
			factor *= f.spec.Factor
		case faults.QuotaCap:
			quota = min(quota, r.freeGPUs(f))
		}
	}
	if stocked {
		// Each replica asked is granted with the stockout's share, drawn
		// on the acquisition stream: a share of a one-replica ask is a
		// chance, not a floor of zero.
		g := 0
		for range onDemand {
			if grant > 0 && r.acqRand.Float64() < grant {
				g++
			}
		}
		refused[RefusedStockout] += onDemand - g
		onDemand = g
	}
	if quota < math.MaxInt {
		fit := max(quota, 0) / max(r.p.pools[sc.pool].spec.GPUsPerReplica, 1)
		if res+onDemand > fit {
			over := res + onDemand - fit
			cut := min(over, onDemand)
			onDemand -= cut
			res -= over - cut
			refused[RefusedQuota] += over
		}
	}
	for range res {
		r.grant(sc, true, 1, now)
	}
	for range onDemand {
		r.grant(sc, false, factor, now)
	}
	sc.rep.Granted += uint64(res + onDemand)
	sc.rep.Reserved += uint64(res)
	if res+onDemand > 0 {
		r.event(now, "grant", fmt.Sprintf("pool %s: %d of %d replicas granted (%d reserved)", sc.name, res+onDemand, want, res))
	}
	total := 0
	var whys []string
	for _, why := range []string{RefusedReservation, RefusedStockout, RefusedQuota} {
		if k := refused[why]; k > 0 {
			total += k
			whys = append(whys, why)
			sc.rep.RefusedBy[why] += uint64(k)
			r.event(now, "refused", fmt.Sprintf("pool %s: %d replicas refused (%s)", sc.name, k, why))
		}
	}
	if total > 0 {
		sc.rep.Refused += uint64(total)
		sc.lastRefused, sc.lastRefusedAt, sc.lastRefusedWhy = total, now, strings.Join(whys, ", ")
		retry := sc.acq.RetryAfter.D()
		if retry <= 0 {
			retry = sc.as.Policy().SyncPeriod
		}
		sc.retryAt = now + retry
		r.s.At(sc.retryAt, func() {
			r.acquire(sc, r.s.Now())
			sc.record(r.s.Now())
		})
	}
}

// freeGPUs is what quota-cap fault f leaves of its provider's GPUs: its
// cap less the GPUs of every replica of the provider's pools that is held
// (a fixed pool's, and an autoscaled pool's granted and not yet gone).
func (r *runner) freeGPUs(f *faultRT) int {
	used := 0
	for pi := range r.p.pools {
		ps := r.p.pools[pi].spec
		if ps.Provider != f.spec.Target.Provider {
			continue
		}
		held := ps.Replicas
		for _, sc := range r.scalers {
			if sc.pool == pi {
				held = 0
				for _, st := range sc.state {
					if st != repAbsent {
						held++
					}
				}
			}
		}
		used += held * ps.GPUsPerReplica
	}
	return f.spec.GPUs - used
}

// grant provisions one replica of sc: at once from the reservation, or
// after a drawn delay on demand; then it loads its model.
func (r *runner) grant(sc *scaler, reserved bool, factor float64, now time.Duration) {
	k := slices.Index(sc.state, repAbsent)
	if k < 0 {
		return // validation keeps requested within max_replicas
	}
	sc.state[k], sc.reserved[k] = repProvisioning, reserved
	sc.askedAt[k] = sc.askedFrom[0]
	sc.askedFrom = sc.askedFrom[1:]
	g := sc.gen[k]
	delay := time.Duration(0)
	if d := sc.acq.Delay; d != nil && !reserved {
		delay = time.Duration(float64(drawDelay(r.acqRand, d)) * factor)
	}
	r.s.After(delay, func() {
		if sc.gen[k] == g {
			r.provisioned(sc, k)
		}
	})
}

// provisioned: replica k of sc is up and loads its model.
func (r *runner) provisioned(sc *scaler, k int) {
	now := r.s.Now()
	ri := sc.reps[k]
	sc.state[k], sc.upAt[k] = repWarming, now
	rt := &r.replicas[ri]
	rt.absent, rt.loading = false, true
	r.core.SetReady(now, ri, false)
	r.core.SetPresent(now, ri, true)
	r.pools[sc.pool].ColdStarts++
	g := sc.gen[k]
	r.s.After(r.p.pools[sc.pool].spec.ColdStart.D(), func() {
		if sc.gen[k] != g {
			return
		}
		now := r.s.Now()
		sc.state[k] = repServing
		rt.loading = false
		r.core.SetReady(now, ri, true)
		sc.toServing.Add((now - sc.askedAt[k]).Seconds())
		r.event(now, "replica-ready", fmt.Sprintf("pool %s: replica %d serving, %v after it was asked for", sc.name, k, now-sc.askedAt[k]))
		sc.record(now)
		r.dispatch()
	})
	sc.record(now)
}

// releaseReplicas gives back n of sc's replicas: what has not arrived first, then
// the newest.
func (r *runner) releaseReplicas(sc *scaler, n int, now time.Duration) {
	live, _, _ := sc.live()
	pending := min(max(sc.requested-live, 0), n)
	sc.askedFrom = sc.askedFrom[:max(len(sc.askedFrom)-pending, 0)]
	n -= pending
	for _, st := range []repState{repProvisioning, repWarming, repServing} {
		for k := len(sc.state) - 1; k >= 0 && n > 0; k-- {
			if sc.state[k] != st {
				continue
			}
			n--
			sc.gen[k]++
			ri := sc.reps[k]
			if st == repProvisioning {
				sc.state[k] = repAbsent
				continue // never up: nothing paid
			}
			r.replicas[ri].loading = false
			r.core.SetPresent(now, ri, false)
			sc.state[k] = repDraining
			if r.core.Inflight(ri) == 0 {
				r.gone(sc, k, now)
			}
		}
	}
}

// gone: replica k of sc has drained and is handed back; it is paid for
// until now.
func (r *runner) gone(sc *scaler, k int, now time.Duration) {
	sc.state[k] = repAbsent
	r.replicas[sc.reps[k]].absent = true
	sc.pay(k, now, r.duration)
}

// pay adds replica k's paid time from its provisioning to until, within
// the scenario's duration.
func (sc *scaler) pay(k int, until, duration time.Duration) {
	sc.reservedHours, sc.burstHours, sc.upHours = sc.paid(k, until, duration, sc.reservedHours, sc.burstHours, sc.upHours)
}

// paid adds replica k's paid time up to until to the given hours.
func (sc *scaler) paid(k int, until, duration time.Duration, res, burst, up float64) (float64, float64, float64) {
	up += (until - sc.upAt[k]).Hours()
	h := (min(until, duration) - min(sc.upAt[k], duration)).Hours()
	if sc.reserved[k] {
		return res + h, burst, up
	}
	return res, burst + h, up
}

// record appends sc's counts to its series when they changed.
func (sc *scaler) record(now time.Duration) {
	c := ReplicaCount{TS: round(now.Seconds(), 6), Requested: sc.requested}
	for _, st := range sc.state {
		switch st {
		case repProvisioning:
			c.Provisioning++
		case repWarming:
			c.Warming++
		case repServing:
			c.Serving++
		case repDraining:
			c.Draining++
		}
	}
	s := sc.rep.Series
	if n := len(s); n > 0 {
		last := s[n-1]
		last.TS = c.TS
		if last == c {
			return
		}
		if s[n-1].TS == c.TS {
			s = s[:n-1]
		}
	}
	sc.rep.Series = append(s, c)
	sc.rep.MinServing = min(sc.rep.MinServing, c.Serving)
	sc.rep.MaxServing = max(sc.rep.MaxServing, c.Serving)
}

// view is sc's counts now, for a snapshot (PoolState.Autoscale).
func (sc *scaler) view() *AutoscaleState {
	a := &AutoscaleState{Requested: sc.requested, Refused: sc.rep.Refused,
		LastRefused: sc.lastRefused, LastRefusedAt: sc.lastRefusedAt, LastRefusedWhy: sc.lastRefusedWhy}
	for _, st := range sc.state {
		switch st {
		case repProvisioning:
			a.Provisioning++
		case repWarming:
			a.Warming++
		case repServing:
			a.Serving++
		case repDraining:
			a.Draining++
		}
	}
	return a
}

// drawDelay draws a provisioning delay.
func drawDelay(rng *rand.Rand, d *scenarios.Delay) time.Duration {
	mean := d.Mean.D().Seconds()
	var s float64
	switch d.Distribution {
	case "exponential":
		s = rng.ExpFloat64() * mean
	case "lognormal":
		// Mean m: mu = ln m − σ²/2.
		sigma := d.Sigma
		s = math.Exp(math.Log(mean) - sigma*sigma/2 + sigma*rng.NormFloat64())
	default:
		s = mean
	}
	return time.Duration(s * float64(time.Second))
}

// autoscaleReports finishes each scaler's report at end, and sets its
// pool's cost in rep from the replicas paid for rather than a fixed count.
func (r *runner) autoscaleReports(rep *Report) {
	if len(r.scalers) == 0 {
		return
	}
	rep.Autoscaling = map[string]*AutoscaleReport{}
	for _, sc := range r.scalers {
		// The replicas still held are paid for up to now; the report may
		// be assembled more than once (a skeleton before the run), so
		// this adds to copies.
		resH, burstH, upH := sc.reservedHours, sc.burstHours, sc.upHours
		for k, st := range sc.state {
			if st == repWarming || st == repServing || st == repDraining {
				resH, burstH, upH = sc.paid(k, r.s.Now(), r.duration, resH, burstH, upH)
			}
		}
		ps := r.p.pools[sc.pool].spec
		price := ps.PricePerGPUHour * float64(ps.GPUsPerReplica)
		burstPrice := price
		if sc.acq.BurstPrice > 0 {
			burstPrice *= sc.acq.BurstPrice
		}
		ar := sc.rep
		ar.ToServing = sc.toServing.Summary()
		ar.ReservedHours, ar.BurstHours = round(resH, 6), round(burstH, 6)
		ar.ReservedCost = round(resH*price, 6)
		ar.BurstCost = round(burstH*burstPrice, 6)
		pr := rep.Pools[ps.Name]
		if upH > 0 {
			// Busy over the replica-time there was, not over max_replicas.
			pr.Utilization = round(pr.BusyGPUHours/float64(ps.GPUsPerReplica)/upH, 6)
		}
		rep.Cost.Total += ar.ReservedCost + ar.BurstCost - pr.Cost
		pr.Cost = round(ar.ReservedCost+ar.BurstCost, 6)
		rep.Autoscaling[ps.Name] = ar
	}
	rep.Cost.Total = round(rep.Cost.Total, 6)
	if r.tally.succeeded > 0 {
		rep.Cost.PerSuccessfulTask = round(rep.Cost.Total/float64(r.tally.succeeded), 9)
	}
}
