package compile

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// An autoscaled pool's configuration, and the acquisition faults' effect on
// what its provider offers: what the twin (twin/autoscale.go) and the live
// gateway (internal/gateway/autoscale.go) both build their sched.Scaler from
// and feed it.

// PoolReplicas is how many replicas pool ps has in the core's numbering
// (Compile's, and the live fleet's): its autoscaling maximum, or its count.
func PoolReplicas(ps *scenarios.Pool) int {
	if a := ps.Autoscale; a != nil {
		return max(ps.Replicas, a.MaxReplicas)
	}
	return ps.Replicas
}

// ScalerConfig is pool ps's sched.ScalerConfig, drawing from rng (the
// pool's AcquisitionStream): what the twin and the live gateway both
// build their Scaler from.
func ScalerConfig(ps *scenarios.Pool, maxBatch int, end time.Duration, rng *rand.Rand) sched.ScalerConfig {
	cfg := sched.ScalerConfig{Pool: ps.Name, Policy: scenarios.AutoscalePolicy(ps.Autoscale), Draw: rng.Float64,
		Replicas: ps.Replicas, Max: PoolReplicas(ps), BurstCap: -1,
		ColdStart: ps.ColdStart.D(), GPUsPerReplica: ps.GPUsPerReplica, MaxBatch: maxBatch, End: end}
	if q := ps.Acquisition; q != nil {
		cfg.Reserved, cfg.RetryAfter = q.Reserved, q.RetryAfter.D()
		if q.Burst != nil {
			cfg.BurstCap = *q.Burst
		}
		if d := q.Delay; d != nil {
			cfg.Delay = func() time.Duration { return drawDelay(rng, d) }
		}
	}
	return cfg
}

// AcquisitionStream is the name of pool's acquisition stream (its
// stockout grants and provisioning delays): one per pool, so that one
// pool's asks never change another's draws, and the live gateway draws
// what the twin does (sim.NewSource(seed, name)).
func AcquisitionStream(pool string) string { return "acquisition/" + pool }

// OfferUnder is o with acquisition fault spec's effect added (a fault of
// another kind changes nothing); free is what a quota-cap leaves the
// account, asked only for one.
func OfferUnder(o sched.Offer, spec faults.Spec, free func() int) sched.Offer {
	if eff, ok := acquisitionEffects[spec.Kind]; ok {
		return eff(o, spec, free)
	}
	return o
}

// acquisitionEffects is what each acquisition fault does to a provider's
// offer: a row exactly for each kind whose faults.Traits.OnAcquisition
// (TestAcquisitionEffectsMatchTraits).
var acquisitionEffects = map[faults.Kind]func(o sched.Offer, spec faults.Spec, free func() int) sched.Offer{
	faults.Stockout: func(o sched.Offer, spec faults.Spec, _ func() int) sched.Offer {
		if !o.Stocked || spec.Grant < o.Grant {
			o.Grant = spec.Grant
		}
		o.Stocked = true
		return o
	},
	faults.SlowProvisioning: func(o sched.Offer, spec faults.Spec, _ func() int) sched.Offer {
		o.Factor *= spec.Factor
		return o
	},
	faults.QuotaCap: func(o sched.Offer, _ faults.Spec, free func() int) sched.Offer {
		o.FreeGPUs = min(o.FreeGPUs, free())
		return o
	},
}

// FreeGPUs is what quota-cap spec leaves of its provider's GPUs in sc,
// when pool i holds held(i) replicas.
func FreeGPUs(sc *scenarios.Scenario, spec faults.Spec, held func(pool int) int) int {
	used := 0
	for pi, ps := range sc.Pools {
		if ps.Provider == spec.Target.Provider {
			used += held(pi) * ps.GPUsPerReplica
		}
	}
	return spec.GPUs - used
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
