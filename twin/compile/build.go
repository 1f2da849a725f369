package compile

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/fleet"
	"github.com/fleetdrill/fleetdrill/twin/kvlink"
	"github.com/fleetdrill/fleetdrill/twin/latency"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Plan is a scenario compiled: the compatibility registry, the retry
// policy, the scheduler core's configuration, and the indexes and per-pool
// verdicts and profiles behind it. Everything in it holds for the whole run;
// the twin runs it in virtual time, the live gateway and node configure
// themselves from the parts they need (CoreConfig, Registry, PoolProfiles).
type Plan struct {
	Scenario *scenarios.Scenario
	Registry *fleet.Registry
	Retry    sched.RetryPolicy
	Core     sched.Config

	// The index of each model, tenant and class by name, in scenario
	// order (the core's numbering).
	Models  map[string]int
	Tenants map[string]int
	Classes map[string]int
	// Pools in scenario order, and the core's replicas in order (a pool's
	// are contiguous, from its FirstReplica).
	Pools    []Pool
	Replicas []Replica
	// Links is, per model, the P/D link of a model served disaggregated
	// (nil for the others).
	Links []*Link
}

// Link is a disaggregated model's KV link as a run drives it: the figures
// per GPU of a decode replica (its kind's, or the scenario's measured
// ones) and the KV bytes one prompt token carries.
type Link struct {
	Spec            kvlink.Spec
	KVBytesPerToken float64
}

// Bandwidth is the link's bytes per second into a decode replica of gpus
// GPUs (each receives its own shard).
func (l *Link) Bandwidth(gpus int) float64 { return l.Spec.BandwidthGBs * 1e9 * float64(max(gpus, 1)) }

// LinkOf is model m's P/D link (its kind's figures, or the scenario's
// measured ones, and the KV bytes one prompt token carries); nil when m is
// not served disaggregated.
func LinkOf(m *scenarios.Model) (*Link, error) {
	d := m.Disaggregation
	if d == nil {
		return nil, nil
	}
	spec, err := kvlink.Lookup(d.Link.Kind)
	if err != nil {
		err = fmt.Errorf("models[%s].disaggregation.link: %w", m.Name, err)
	}
	if d.Link.BandwidthGBs > 0 {
		spec.BandwidthGBs, spec.Source = d.Link.BandwidthGBs, "the scenario's link.bandwidth_gbs"
	}
	if d.Link.Latency > 0 {
		spec.Latency = d.Link.Latency.D()
	}
	bytes, _ := fleet.PrecisionBytes(m.Precision)
	return &Link{Spec: spec, KVBytesPerToken: latency.KVBytesPerToken(m.Layers, m.KVHeads, m.HeadDim, 1, 1) * bytes}, err
}

// Pool is one pool of a Plan.
type Pool struct {
	Spec         *scenarios.Pool
	Region       scenarios.Region
	Verdicts     []fleet.Verdict   // per model
	Profiles     []latency.Profile // per model; zero when untested
	FirstReplica int               // the index of its first replica in Plan.Replicas
}

// Replica is one replica of a Plan: its pool and the model it serves.
type Replica struct {
	Pool, Model int
}

// Compile resolves a validated scenario, applying its defaults
// (scenarios.ApplyDefaults) to sc. The loader has checked references and
// ranges; Compile reports what only a resolved fleet can judge (a pool that
// can serve none of its models, a profile reference the table lacks), all at
// once, with the Plan built as far as it goes.
func Compile(sc *scenarios.Scenario) (*Plan, error) {
	scenarios.ApplyDefaults(sc)
	p := &Plan{
		Scenario: sc,
		Models:   map[string]int{},
		Tenants:  map[string]int{},
		Classes:  map[string]int{},
	}
	var errs []error

	for i, m := range sc.Models {
		p.Models[m.Name] = i
	}
	p.Registry = Registry(sc)
	p.Retry = RetryPolicy(sc)

	for i, t := range sc.Tenants {
		p.Tenants[t.Name] = i
		w := t.Weight
		if w <= 0 {
			w = 1
		}
		p.Core.Tenants = append(p.Core.Tenants, sched.Tenant{Name: t.Name, Jurisdiction: t.Jurisdiction, Weight: w,
			TokensPerMinute: t.TokensPerMinute, MaxConcurrency: t.MaxConcurrency, Cohort: t.Cohort})
	}
	for i, c := range sc.Classes {
		p.Classes[c.Name] = i
		p.Core.Classes = append(p.Core.Classes, sched.Class{Name: c.Name, Priority: c.Priority, Deferrable: c.Deferrable,
			QualityFloor: c.QualityFloor})
	}
	for _, m := range sc.Models {
		var fb []int
		for _, f := range m.Fallbacks {
			if j, ok := p.Models[f]; ok {
				fb = append(fb, j)
			}
		}
		cm := sched.Model{Name: m.Name, Fallbacks: fb, Quality: m.Quality}
		if d := m.Disaggregation; d != nil {
			cm.Disagg = &sched.Disagg{Mode: deciderModes[d.Decider], MaxLocalPrefill: d.MaxLocalPrefillLength, MaxPrefillQueue: d.MaxPrefillQueueSize}
		}
		link, err := LinkOf(&m)
		if err != nil {
			errs = append(errs, err)
		}
		p.Core.Models = append(p.Core.Models, cm)
		p.Links = append(p.Links, link)
	}

	regions := map[string]scenarios.Region{}
	for _, r := range sc.Regions {
		regions[r.Name] = r
	}
	for pi := range sc.Pools {
		ps := &sc.Pools[pi]
		pp := Pool{Spec: ps, Region: regions[ps.Region], FirstReplica: len(p.Replicas)}
		fp := fleet.Pool{Name: ps.Name, Region: ps.Region, Accelerator: ps.Accelerator, GPUsPerReplica: ps.GPUsPerReplica,
			Runtime: ps.Runtime, Driver: ps.Driver, Models: ps.Models, Profiles: map[string]latency.Profile{},
			Service: ps.Service != nil}
		pp.Profiles = make([]latency.Profile, len(sc.Models))
		profs, perrs := PoolProfiles(sc, ps, fmt.Sprintf("pools[%d]", pi))
		errs = append(errs, perrs...)
		for _, name := range slices.Sorted(maps.Keys(profs)) {
			prof := profs[name]
			fp.Profiles[name] = prof
			if mi, ok := p.Models[name]; ok {
				pp.Profiles[mi] = prof
			}
		}
		cp := sched.Pool{Name: ps.Name, Jurisdiction: pp.Region.Jurisdiction,
			PricePerHour:      ps.PricePerGPUHour * float64(ps.GPUsPerReplica),
			Serves:            make([]bool, len(sc.Models)),
			KVTokens:          make([]int64, len(sc.Models)),
			RequestsPerMinute: ps.Quota.RequestsPerMinute, TokensPerMinute: ps.Quota.TokensPerMinute}
		pp.Verdicts = make([]fleet.Verdict, len(sc.Models))
		servesAny := false
		for mi, m := range sc.Models {
			v := p.Registry.Check(&fp, m.Name)
			pp.Verdicts[mi] = v
			if !slices.Contains(ps.Models, m.Name) {
				continue
			}
			if ps.Service != nil {
				// A service-time pool has no memory model: any request fits.
				v.Servable, v.Tested, v.KVTokens = true, true, 1<<62
				pp.Verdicts[mi] = v
			}
			if v.Servable && (v.Tested || sc.Policy.Routing.AllowUntested) {
				cp.Serves[mi] = true
				cp.KVTokens[mi] = v.KVTokens
				servesAny = true
				if !v.Tested {
					// An untested pairing routed by policy runs on the
					// profile of the pool's first tested model, if any.
					pp.Profiles[mi] = firstProfile(pp.Profiles)
				}
			}
		}
		if !servesAny && ps.Replicas > 0 {
			var why []string
			for _, name := range ps.Models {
				why = append(why, name+": "+pp.Verdicts[p.Models[name]].String())
			}
			errs = append(errs, fmt.Errorf("pools[%d] (%s) can serve none of its models: %v", pi, ps.Name, why))
		}
		// Replicas serve the pool's routable models in turn.
		var serve []int
		for _, name := range ps.Models {
			if mi := p.Models[name]; cp.Serves[mi] {
				serve = append(serve, mi)
			}
		}
		if ps.Role == "prefill" {
			// Its replicas run their models, for the decode pools:
			// no client is routed to them.
			cp.Prefill = true
			clear(cp.Serves)
		}
		p.Core.Pools = append(p.Core.Pools, cp)
		for r := 0; r < PoolReplicas(ps) && len(serve) > 0; r++ {
			mi := serve[r%len(serve)]
			maxBatch := ps.MaxBatch
			if ps.Service != nil {
				maxBatch = 1
			}
			p.Replicas = append(p.Replicas, Replica{Pool: pi, Model: mi})
			// An autoscaled pool's replicas beyond those it starts with
			// are absent until provisioned (its driver's scaler:
			// ScalerConfig).
			p.Core.Replicas = append(p.Core.Replicas, sched.Replica{Pool: pi, Model: mi, MaxBatch: maxBatch,
				Absent: r >= ps.Replicas})
		}
		p.Pools = append(p.Pools, pp)
	}

	// Each decode pool takes its prompts from the prefill pools of its
	// region (validation has checked there is one per model).
	for pi := range sc.Pools {
		if sc.Pools[pi].Role != "decode" {
			continue
		}
		for qi := range sc.Pools {
			if sc.Pools[qi].Role == "prefill" && sc.Pools[qi].Region == sc.Pools[pi].Region {
				p.Core.Pools[pi].PrefillPools = append(p.Core.Pools[pi].PrefillPools, qi)
			}
		}
	}

	pol := sc.Policy
	p.Core.Policy = pol.Scheduler
	p.Core.Aging = pol.Aging.D()
	p.Core.QueueLimit = pol.Admission.QueueLimit
	p.Core.DeadlineCheck = pol.Admission.DeadlineCheck
	p.Core.RetryAfter = pol.Admission.RetryAfter.D()
	p.Core.DeferFor = pol.Admission.DeferFor.D()
	p.Core.Strategy = sched.Strategy(pol.Routing.Strategy)
	p.Core.Fallback = pol.Routing.Fallback
	p.Core.IgnoreResidency = pol.Routing.IgnoreResidency
	p.Core.Health = sched.Health{Threshold: pol.Health.Threshold, OpenFor: pol.Health.OpenFor.D()}
	o := pol.Health.Outlier
	p.Core.Outlier = sched.Outlier{Disabled: o.Disabled, Factor: o.Factor, MaxLatency: o.MaxLatency.D(), MinExcess: o.MinExcess.D(),
		MinSamples: o.MinSamples, BaseEjection: o.BaseEjection.D(), MaxShare: o.MaxEjectionShare}
	p.Core.LatencyHalfLife = pol.Routing.LatencyHalfLife.D()
	p.Core.Ladder = rungs(pol.Degradation, p.Classes, p.Models)
	p.Core.Canaries = canaryRoutes(sc, p)
	applyDefaults(&p.Core, sc)
	return p, errors.Join(errs...)
}

// deciderModes maps a disaggregation decider to the core's mode.
var deciderModes = map[string]sched.DisaggMode{"always": sched.DisaggAlways, "conditional": sched.DisaggConditional, "never": sched.DisaggNever}

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

// RetryPolicy is the scenario's retry policy (policy.retries), which the twin
// and the live gateway apply it.
func RetryPolicy(sc *scenarios.Scenario) sched.RetryPolicy {
	rt := sc.Policy.Retries
	return sched.RetryPolicy{MaxAttempts: rt.MaxAttempts, Backoff: rt.Backoff.D(), MaxBackoff: rt.MaxBackoff.D(),
		Budget: rt.Budget, IgnoreRetryAfter: rt.IgnoreRetryAfter, MigrationLimit: rt.MigrationLimit}
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
