package twin

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/fleet"
	"github.com/fleetdrill/fleetdrill/twin/latency"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// plan is a scenario resolved into indexes, profiles and the core's
// configuration: everything a run needs that does not change while it runs.
type plan struct {
	sc       *scenarios.Scenario
	registry *fleet.Registry
	retry    sched.RetryPolicy
	core     sched.Config

	models   map[string]int
	tenants  map[string]int
	classes  map[string]int
	pools    []poolPlan
	replicas []replicaPlan
	streams  []streamPlan
}

type poolPlan struct {
	spec      *scenarios.Pool
	region    scenarios.Region
	verdicts  []fleet.Verdict   // per model
	profiles  []latency.Profile // per model; zero when untested
	service   *scenarios.Service
	firstRepl int
}

type replicaPlan struct {
	pool  int
	model int
}

type streamPlan struct {
	spec   *scenarios.Stream
	tenant int
	class  int
	model  int
}

// build resolves a validated scenario. The loader has checked references and
// ranges; build reports what only the twin can judge (a pool that can serve
// none of its models, a profile reference the table lacks), all at once.
func build(sc *scenarios.Scenario) (*plan, error) {
	scenarios.ApplyDefaults(sc)
	p := &plan{
		sc:      sc,
		models:  map[string]int{},
		tenants: map[string]int{},
		classes: map[string]int{},
	}
	var errs []error

	for i, m := range sc.Models {
		p.models[m.Name] = i
	}
	p.registry = Registry(sc)
	p.retry = RetryPolicy(sc)

	for i, t := range sc.Tenants {
		p.tenants[t.Name] = i
		w := t.Weight
		if w <= 0 {
			w = 1
		}
		p.core.Tenants = append(p.core.Tenants, sched.Tenant{Name: t.Name, Jurisdiction: t.Jurisdiction, Weight: w,
			TokensPerMinute: t.TokensPerMinute, MaxConcurrency: t.MaxConcurrency, Cohort: t.Cohort})
	}
	for i, c := range sc.Classes {
		p.classes[c.Name] = i
		p.core.Classes = append(p.core.Classes, sched.Class{Name: c.Name, Priority: c.Priority, Deferrable: c.Deferrable,
			QualityFloor: c.QualityFloor})
	}
	for _, m := range sc.Models {
		var fb []int
		for _, f := range m.Fallbacks {
			if j, ok := p.models[f]; ok {
				fb = append(fb, j)
			}
		}
		p.core.Models = append(p.core.Models, sched.Model{Name: m.Name, Fallbacks: fb, Quality: m.Quality})
	}

	regions := map[string]scenarios.Region{}
	for _, r := range sc.Regions {
		regions[r.Name] = r
	}
	for pi := range sc.Pools {
		ps := &sc.Pools[pi]
		pp := poolPlan{spec: ps, region: regions[ps.Region], service: ps.Service, firstRepl: len(p.replicas)}
		fp := fleet.Pool{Name: ps.Name, Region: ps.Region, Accelerator: ps.Accelerator, GPUsPerReplica: ps.GPUsPerReplica,
			Runtime: ps.Runtime, Driver: ps.Driver, Models: ps.Models, Profiles: map[string]latency.Profile{},
			Service: ps.Service != nil}
		pp.profiles = make([]latency.Profile, len(sc.Models))
		profs, perrs := PoolProfiles(sc, ps, fmt.Sprintf("pools[%d]", pi))
		errs = append(errs, perrs...)
		for _, name := range slices.Sorted(maps.Keys(profs)) {
			prof := profs[name]
			fp.Profiles[name] = prof
			if mi, ok := p.models[name]; ok {
				pp.profiles[mi] = prof
			}
		}
		cp := sched.Pool{Name: ps.Name, Jurisdiction: pp.region.Jurisdiction,
			PricePerHour:      ps.PricePerGPUHour * float64(ps.GPUsPerReplica),
			Serves:            make([]bool, len(sc.Models)),
			KVTokens:          make([]int64, len(sc.Models)),
			RequestsPerMinute: ps.Quota.RequestsPerMinute, TokensPerMinute: ps.Quota.TokensPerMinute}
		pp.verdicts = make([]fleet.Verdict, len(sc.Models))
		servesAny := false
		for mi, m := range sc.Models {
			v := p.registry.Check(&fp, m.Name)
			pp.verdicts[mi] = v
			if !slices.Contains(ps.Models, m.Name) {
				continue
			}
			if ps.Service != nil {
				// A service-time pool has no memory model: any request fits.
				v.Servable, v.Tested, v.KVTokens = true, true, 1<<62
				pp.verdicts[mi] = v
			}
			if v.Servable && (v.Tested || sc.Policy.Routing.AllowUntested) {
				cp.Serves[mi] = true
				cp.KVTokens[mi] = v.KVTokens
				servesAny = true
				if !v.Tested {
					// An untested pairing routed by policy runs on the
					// profile of the pool's first tested model, if any.
					pp.profiles[mi] = firstProfile(pp.profiles)
				}
			}
		}
		if !servesAny && ps.Replicas > 0 {
			var why []string
			for _, name := range ps.Models {
				why = append(why, name+": "+pp.verdicts[p.models[name]].String())
			}
			errs = append(errs, fmt.Errorf("pools[%d] (%s) can serve none of its models: %v", pi, ps.Name, why))
		}
		p.core.Pools = append(p.core.Pools, cp)
		// Replicas serve the pool's routable models in turn.
		var serve []int
		for _, name := range ps.Models {
			if mi := p.models[name]; cp.Serves[mi] {
				serve = append(serve, mi)
			}
		}
		for r := 0; r < PoolReplicas(ps) && len(serve) > 0; r++ {
			mi := serve[r%len(serve)]
			maxBatch := ps.MaxBatch
			if ps.Service != nil {
				maxBatch = 1
			}
			p.replicas = append(p.replicas, replicaPlan{pool: pi, model: mi})
			// An autoscaled pool's replicas beyond those it starts with
			// are absent until provisioned (autoscale.go).
			p.core.Replicas = append(p.core.Replicas, sched.Replica{Pool: pi, Model: mi, MaxBatch: maxBatch,
				Absent: r >= ps.Replicas})
		}
		p.pools = append(p.pools, pp)
	}

	for si := range sc.Workload {
		st := &sc.Workload[si]
		p.streams = append(p.streams, streamPlan{spec: st, tenant: p.tenants[st.Tenant], class: p.classes[st.Class], model: p.models[st.Model]})
	}

	pol := sc.Policy
	p.core.Policy = pol.Scheduler
	p.core.Aging = pol.Aging.D()
	p.core.QueueLimit = pol.Admission.QueueLimit
	p.core.DeadlineCheck = pol.Admission.DeadlineCheck
	p.core.RetryAfter = pol.Admission.RetryAfter.D()
	p.core.DeferFor = pol.Admission.DeferFor.D()
	p.core.Strategy = sched.Strategy(pol.Routing.Strategy)
	p.core.Fallback = pol.Routing.Fallback
	p.core.IgnoreResidency = pol.Routing.IgnoreResidency
	p.core.Health = sched.Health{Threshold: pol.Health.Threshold, OpenFor: pol.Health.OpenFor.D()}
	o := pol.Health.Outlier
	p.core.Outlier = sched.Outlier{Disabled: o.Disabled, Factor: o.Factor, MaxLatency: o.MaxLatency.D(), MinExcess: o.MinExcess.D(),
		MinSamples: o.MinSamples, BaseEjection: o.BaseEjection.D(), MaxShare: o.MaxEjectionShare}
	p.core.LatencyHalfLife = pol.Routing.LatencyHalfLife.D()
	p.core.Ladder = rungs(pol.Degradation, p.classes, p.models)
	p.core.Canaries = canaryRoutes(sc, p)
	applyDefaults(&p.core, sc)
	return p, errors.Join(errs...)
}

// rungs resolves the degradation ladder's steps to the core's indexes.
func rungs(steps []scenarios.DegradeStep, classes, models map[string]int) []sched.Rung {
	var out []sched.Rung
	for _, st := range steps {
		out = append(out, sched.Rung{
			Name: st.Name, Action: st.Action, RecoverBelow: st.RecoverBelow, Hold: st.Hold.D(),
			Trigger: sched.Trigger{QueueWait: st.Trigger.QueueWait.D(), Saturation: st.Trigger.Saturation,
				ErrorRate: st.Trigger.ErrorRate},
			Class: classes[st.Class], Model: models[st.Model], MaxOutput: st.MaxOutputTokens,
			HitRate: st.HitRate, CacheAge: st.CacheAge.D(),
		})
	}
	return out
}

// applyDefaults fills what an unvalidated (hand-built) scenario may leave
// empty; the loader sets the same defaults.
func applyDefaults(c *sched.Config, sc *scenarios.Scenario) {
	if c.Policy == "" {
		c.Policy = "fifo"
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = 1000
	}
	if c.DeferFor <= 0 {
		c.DeferFor = time.Minute
	}
	if c.Strategy == "" {
		c.Strategy = "least-loaded"
	}
	_ = sc
}

func firstProfile(ps []latency.Profile) latency.Profile {
	for _, p := range ps {
		if p.MaxBatchedTokens > 0 {
			return p
		}
	}
	return latency.Profile{}
}

// Registry is the compatibility registry of a scenario's accelerators,
// runtimes and models: the rules by which the twin (and the emulated node,
// when a driver changes) decide whether a pool can serve a model.
func Registry(sc *scenarios.Scenario) *fleet.Registry {
	accels := make([]fleet.Accelerator, len(sc.Accelerators))
	for i, a := range sc.Accelerators {
		accels[i] = fleet.Accelerator{Name: a.Name, MemoryGiB: a.MemoryGiB, UsableFraction: a.UsableFraction, Precisions: a.Precisions}
	}
	runtimes := make([]fleet.Runtime, len(sc.Runtimes))
	for i, r := range sc.Runtimes {
		runtimes[i] = fleet.Runtime{Name: r.Name, Server: r.Server, Version: r.Version, CUDA: r.CUDA, MinDriver: r.MinDriver}
	}
	models := make([]fleet.Model, len(sc.Models))
	for i, m := range sc.Models {
		models[i] = fleet.Model{Name: m.Name, ParametersB: m.ParametersB, Layers: m.Layers, KVHeads: m.KVHeads,
			HeadDim: m.HeadDim, Precision: m.Precision, ContextLength: m.ContextLength, Runtimes: m.Runtimes,
			MinDriver: m.MinDriver, Quality: m.Quality, Fallbacks: m.Fallbacks}
	}
	return fleet.NewRegistry(accels, runtimes, models)
}

// RetryPolicy is the scenario's retry policy (policy.retries) as the twin
// and the live gateway apply it.
func RetryPolicy(sc *scenarios.Scenario) sched.RetryPolicy {
	rt := sc.Policy.Retries
	return sched.RetryPolicy{MaxAttempts: rt.MaxAttempts, Backoff: rt.Backoff.D(), MaxBackoff: rt.MaxBackoff.D(),
		Budget: rt.Budget, IgnoreRetryAfter: rt.IgnoreRetryAfter}
}

// ResolveProfile turns a scenario profile (a built-in reference with
// overrides, or explicit numbers) into a latency profile. The emulated node
// (internal/node) resolves its pool's profile with it, so the node and the
// twin time the same pool the same way.
func ResolveProfile(sp scenarios.Profile) (latency.Profile, error) { return resolveProfile(sp) }

func resolveProfile(sp scenarios.Profile) (latency.Profile, error) {
	var p latency.Profile
	if sp.Ref != "" {
		b, ok := latency.Builtin(sp.Ref)
		if !ok {
			return p, fmt.Errorf("ref %q is not a built-in profile (have %v)", sp.Ref, latency.BuiltinRefs())
		}
		p = b
	} else {
		p.Source = "scenario"
	}
	set := func(dst *float64, v float64) {
		if v != 0 {
			*dst = v
		}
	}
	set(&p.StepBase, sp.StepBaseUS)
	set(&p.PerSeq, sp.PerSeqUS)
	set(&p.PerPrefillToken, sp.PerPrefillTokenUS)
	set(&p.PerKVToken, sp.PerKVTokenUS)
	set(&p.MinStep, sp.MinStepUS)
	if sp.MaxBatchedTokens > 0 {
		p.MaxBatchedTokens = sp.MaxBatchedTokens
	}
	if sp.KVTokens > 0 {
		p.KVTokens = sp.KVTokens
	}
	if p.MaxBatchedTokens == 0 {
		p.MaxBatchedTokens = 8192
	}
	if p.StepBase <= 0 && p.MinStep <= 0 {
		return p, fmt.Errorf("a profile needs ref or step_base_us > 0")
	}
	return p, nil
}
