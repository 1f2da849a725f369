package scenarios

import (
	"time"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Defaults for fields a scenario may leave out. Each is what the zero value
// of its field means; docs/scenarios.md lists them with the fields.
const (
	DefaultDrain           = 10 * time.Minute
	DefaultTenantWeight    = 1.0
	DefaultQueueLimit      = 1000
	DefaultDeferFor        = time.Minute
	DefaultRoutingStrategy = "least-loaded"
	DefaultDiurnalPeriod   = 24 * time.Hour
	DefaultMaxPoolShare    = 0.5

	// The HPA's defaults (its default behavior and the controller's
	// --horizontal-pod-autoscaler-sync-period and tolerance).
	DefaultAutoscaleSync      = 15 * time.Second
	DefaultScaleDownStabilize = 5 * time.Minute
	DefaultAutoscaleTolerance = 0.1
	DefaultScaleUpMax         = 4
	DefaultDelaySigma         = 0.5
)

// applyDefaults fills zero fields with their defaults. It runs after
// decoding and before validation, so that validation sees what the twin will
// run, and it is idempotent, so that printing a parsed scenario and parsing
// it again gives the same scenario.
// ApplyDefaults fills the keys s leaves at zero with their defaults, as the
// loader does. It is idempotent; the twin calls it so that a scenario built
// in Go (not loaded) runs with the same defaults, rather than with, say, a
// zero probe interval.
func ApplyDefaults(s *Scenario) { applyDefaults(s) }

func applyDefaults(s *Scenario) {
	if s.Drain == 0 {
		s.Drain = Duration(DefaultDrain)
	}
	for i := range s.Tenants {
		if s.Tenants[i].Weight == 0 {
			s.Tenants[i].Weight = DefaultTenantWeight
		}
	}
	for _, pools := range [][]Pool{s.Pools, s.Purchasable} {
		for i := range pools {
			// A service-time pool serves one request per replica at a time
			// (see Pool.Service); saying max_batch: 1 again would be noise.
			if p := &pools[i]; p.Service != nil && p.MaxBatch == 0 {
				p.MaxBatch = 1
			}
			// tensor_parallel is gpus_per_replica under the name a derived
			// profile's readers know it by.
			if p := &pools[i]; p.TensorParallel > 0 && p.GPUsPerReplica == 0 {
				p.GPUsPerReplica = p.TensorParallel
			}
			if a := pools[i].Autoscale; a != nil {
				if a.SyncPeriod == 0 {
					a.SyncPeriod = Duration(DefaultAutoscaleSync)
				}
				if a.ScaleDownStabilization == nil {
					d := Duration(DefaultScaleDownStabilize)
					a.ScaleDownStabilization = &d
				}
				if a.Tolerance == nil {
					t := DefaultAutoscaleTolerance
					a.Tolerance = &t
				}
				if a.ScaleUpMax == 0 {
					a.ScaleUpMax = DefaultScaleUpMax
				}
			}
			if q := pools[i].Acquisition; q != nil {
				if q.BurstPrice == 0 {
					q.BurstPrice = 1
				}
				if d := q.Delay; d != nil && d.Distribution == "lognormal" && d.Sigma == 0 {
					d.Sigma = DefaultDelaySigma
				}
			}
		}
	}
	for i := range s.Workload {
		if d := s.Workload[i].Diurnal; d != nil && d.Period == 0 {
			d.Period = Duration(DefaultDiurnalPeriod)
		}
		if tr := s.Workload[i].Trace; tr != nil {
			if tr.TimeScale == 0 {
				tr.TimeScale = 1
			}
			if tr.RateScale == 0 {
				tr.RateScale = 1
			}
		}
	}
	for i := range s.Jobs {
		if tr := s.Jobs[i].Trace; tr != nil && tr.TimeScale == 0 {
			tr.TimeScale = 1
		}
	}
	if s.Policy.Jobs.MaxPoolShare == 0 {
		s.Policy.Jobs.MaxPoolShare = DefaultMaxPoolShare
	}
	h := &s.Policy.Health
	if h.ProbeInterval == 0 {
		h.ProbeInterval = Duration(10 * time.Second)
	}
	if h.Timeout == 0 {
		h.Timeout = Duration(5 * time.Second)
	}
	if h.Threshold == 0 {
		h.Threshold = 3
	}
	if h.OpenFor == 0 {
		h.OpenFor = Duration(10 * time.Second)
	}
	if o := &h.Outlier; !o.Disabled {
		if o.Factor == 0 {
			o.Factor = sched.DefaultOutlierFactor
		}
		if o.MinExcess == 0 {
			o.MinExcess = Duration(sched.DefaultOutlierMinExcess)
		}
		if o.MinSamples == 0 {
			o.MinSamples = sched.DefaultOutlierMinSamples
		}
		if o.BaseEjection == 0 {
			o.BaseEjection = Duration(sched.DefaultOutlierEjection)
		}
		if o.MaxEjectionShare == 0 {
			o.MaxEjectionShare = sched.DefaultOutlierMaxShare
		}
	}
	for i := range s.Canaries {
		canaryDefaults(&s.Canaries[i])
	}
	for i := range s.Policy.Degradation {
		d := &s.Policy.Degradation[i]
		if d.RecoverBelow == 0 {
			d.RecoverBelow = 0.5
		}
		if d.Hold == 0 {
			d.Hold = Duration(time.Minute)
		}
	}
	rt := &s.Policy.Retries
	if rt.MaxAttempts == 0 {
		rt.MaxAttempts = 3
	}
	if rt.Backoff == 0 {
		rt.Backoff = Duration(500 * time.Millisecond)
	}
	if rt.MaxBackoff == 0 {
		rt.MaxBackoff = Duration(10 * time.Second)
	}
	if rt.Budget == 0 {
		rt.Budget = 0.2
	}
	a := &s.Policy.Admission
	if a.QueueLimit == 0 {
		a.QueueLimit = DefaultQueueLimit
	}
	if a.DeferFor == 0 {
		a.DeferFor = Duration(DefaultDeferFor)
	}
	if s.Policy.Routing.Strategy == "" {
		s.Policy.Routing.Strategy = DefaultRoutingStrategy
	}
	if s.Policy.Routing.LatencyHalfLife == 0 {
		s.Policy.Routing.LatencyHalfLife = Duration(sched.DefaultLatencyHalfLife)
	}
}
