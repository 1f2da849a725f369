package sched

import (
	"fmt"
	"math"
	"time"
)

// The autoscaler, written once for both drivers: the Kubernetes HPA's rule
// (and KEDA's, for queue depth), so that a user can transcribe the policy
// they run.
//
// Every SyncPeriod the driver measures the pool's metric and hands it, with
// the replica count it last asked for, to Evaluate:
//
//	desired = ceil(current × metric / target)
//
// skipped (desired = current) while metric/target is within Tolerance of 1.
// The recommendation is clamped to [Min, Max], then stabilized as the HPA
// does: a scale-down takes the highest recommendation over the last
// DownStabilization (so a dip in load does not release capacity that will
// be needed again), a scale-up the lowest over the last UpStabilization.
// Last, the step is limited to UpMax replicas up and DownMax down per
// evaluation. The driver carries the decision out (asks its provider for
// replicas, or drains them) and keeps `current` as what it asked for, not
// what serves: as the HPA counts a pod that is not ready yet as idle on a
// scale-up, the driver divides the busy slots by the replicas asked for,
// so that capacity already on its way is not asked for twice.
//
//	a, err := sched.NewAutoscaler(policy)
//	a.Seed(now, current)                         // the count it starts at
//	n, changed := a.Evaluate(now, current, metric)
//
// Like the core, an Autoscaler reads no clock and draws no random number;
// it is not safe for concurrent use.

// Autoscale metrics.
const (
	// MetricUtilization is the pool's busy batch-slot share: requests in
	// flight ÷ (replicas × max batch), averaged over the sync period.
	MetricUtilization = "utilization"
	// MetricQueue is the requests waiting for the pool's model per
	// replica (KEDA's queue-length scaler).
	MetricQueue = "queue"
	// MetricWait is the core's predicted wait for the pool's model, in
	// seconds; its target is a duration.
	MetricWait = "wait"
)

// AutoscaleMetrics lists the metrics, for validation and docs.
var AutoscaleMetrics = []string{MetricUtilization, MetricQueue, MetricWait}

// AutoscalePolicy is one pool's autoscaling policy, defaults applied by
// the scenario loader (the HPA's: sync 15 s, scale-down stabilization 5 m,
// tolerance 0.1, up 4 replicas per sync).
type AutoscalePolicy struct {
	Metric string
	// Target: a share for utilization, requests per replica for queue,
	// seconds for wait.
	Target float64
	Min    int
	Max    int

	SyncPeriod        time.Duration
	UpStabilization   time.Duration
	DownStabilization time.Duration
	Tolerance         float64
	UpMax             int // replicas per evaluation; 0: no limit
	DownMax           int // replicas per evaluation; 0: no limit
}

// Validate says what is wrong with the policy, naming the field.
func (p AutoscalePolicy) Validate() error {
	known := false
	for _, m := range AutoscaleMetrics {
		known = known || p.Metric == m
	}
	switch {
	case !known:
		return fmt.Errorf("metric %q: want one of %v", p.Metric, AutoscaleMetrics)
	case !(p.Target > 0) || math.IsInf(p.Target, 0):
		return fmt.Errorf("target %v: want a positive number", p.Target)
	case p.Metric == MetricUtilization && p.Target > 1:
		return fmt.Errorf("target %v: a utilization target is a share in (0,1]", p.Target)
	case p.Min < 1:
		return fmt.Errorf("min_replicas %d: want at least 1 (the metrics are per replica)", p.Min)
	case p.Max < p.Min:
		return fmt.Errorf("max_replicas %d: want at least min_replicas (%d)", p.Max, p.Min)
	case p.SyncPeriod <= 0:
		return fmt.Errorf("sync_period %v: want a positive duration", p.SyncPeriod)
	case p.UpStabilization < 0 || p.DownStabilization < 0:
		return fmt.Errorf("stabilization windows (%v up, %v down): want durations ≥ 0", p.UpStabilization, p.DownStabilization)
	case p.Tolerance < 0 || p.Tolerance >= 1:
		return fmt.Errorf("tolerance %v: want a share in [0,1)", p.Tolerance)
	case p.UpMax < 0 || p.DownMax < 0:
		return fmt.Errorf("scale_up_max %d, scale_down_max %d: want replica counts ≥ 0 (0: no limit)", p.UpMax, p.DownMax)
	}
	return nil
}

// recommendation is one evaluation's clamped, unstabilized count.
type recommendation struct {
	at time.Duration
	n  int
}

// Autoscaler is one pool's autoscaling state: the recent recommendations
// the stabilization windows read.
type Autoscaler struct {
	p    AutoscalePolicy
	recs []recommendation // oldest first, pruned to the longer window
}

// NewAutoscaler returns an autoscaler for a valid policy.
func NewAutoscaler(p AutoscalePolicy) (*Autoscaler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Autoscaler{p: p}, nil
}

// Seed records current as a recommendation at now, as the HPA does when it
// first sees its target, so that the first scale-down waits a full
// scale-down window rather than acting on the first measurement.
func (a *Autoscaler) Seed(now time.Duration, current int) {
	a.recs = append(a.recs, recommendation{now, current})
}

// Policy returns the autoscaler's policy.
func (a *Autoscaler) Policy() AutoscalePolicy { return a.p }

// Recommend is the HPA rule alone: ceil(current × metric/target), current
// inside the tolerance, clamped to [Min, Max]. A current of 0 (no replica
// to measure) recommends Min.
func (a *Autoscaler) Recommend(current int, metric float64) int {
	n := current
	if current > 0 && !math.IsNaN(metric) {
		ratio := metric / a.p.Target
		if math.Abs(ratio-1) > a.p.Tolerance {
			// The epsilon keeps an exact product (10 × 0.7/0.7) from
			// rounding up past itself.
			n = int(math.Ceil(float64(current)*ratio - 1e-9))
		}
	}
	return min(max(n, a.p.Min), a.p.Max)
}

// Evaluate records this evaluation's recommendation and returns the
// replica count the pool should have, and whether it differs from
// current.
func (a *Autoscaler) Evaluate(now time.Duration, current int, metric float64) (int, bool) {
	rec := a.Recommend(current, metric)
	a.recs = append(a.recs, recommendation{now, rec})
	keep := max(a.p.UpStabilization, a.p.DownStabilization)
	drop := 0
	for drop < len(a.recs)-1 && now-a.recs[drop].at > keep {
		drop++
	}
	a.recs = a.recs[drop:]

	up, down := rec, rec
	for _, r := range a.recs {
		if now-r.at <= a.p.UpStabilization {
			up = min(up, r.n)
		}
		if now-r.at <= a.p.DownStabilization {
			down = max(down, r.n)
		}
	}
	n := current
	if n < up {
		n = up
	}
	if n > down {
		n = down
	}
	if a.p.UpMax > 0 {
		n = min(n, current+a.p.UpMax)
	}
	if a.p.DownMax > 0 {
		n = max(n, current-a.p.DownMax)
	}
	// A current outside [Min, Max] (the bounds changed) is brought in
	// whatever the limits.
	n = min(max(n, a.p.Min), a.p.Max)
	return n, n != current
}
