package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/fleet"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// FromScenario returns the part of a Config that describes pool: its models
// with their profiles and KV capacity, its driver and max batch, and a
// compatibility check that applies the twin's registry rules
// (fleet.Registry.Check: runtime, driver minimums of runtime and model,
// precision, memory fit) to the pool as it would be with the node's current
// driver. A model the pool lists without a profile runs on the pool's first
// profile, as the twin runs an untested pairing.
func FromScenario(sc *scenarios.Scenario, pool string) (Config, error) {
	var cfg Config
	i := slices.IndexFunc(sc.Pools, func(p scenarios.Pool) bool { return p.Name == pool })
	if i < 0 {
		names := make([]string, len(sc.Pools))
		for j, p := range sc.Pools {
			names[j] = p.Name
		}
		return cfg, fmt.Errorf("node: scenario %s has no pool %q (have %s)", sc.Name, pool, strings.Join(names, ", "))
	}
	ps := sc.Pools[i]
	reg := registryOf(sc)
	fp := fleet.Pool{Name: ps.Name, Region: ps.Region, Accelerator: ps.Accelerator, GPUsPerReplica: ps.GPUsPerReplica,
		Runtime: ps.Runtime, Driver: ps.Driver, Models: ps.Models, Profiles: map[string]latency.Profile{},
		Service: ps.Service != nil}
	var errs []error
	var first *latency.Profile
	for _, name := range ps.Models {
		sp, ok := ps.Profiles[name]
		if !ok {
			continue
		}
		prof, err := resolveProfile(sp)
		if err != nil {
			errs = append(errs, fmt.Errorf("node: pools[%d].profiles.%s: %w", i, name, err))
			continue
		}
		fp.Profiles[name] = prof
		if first == nil {
			first = &prof
		}
	}
	if first == nil && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("node: pool %s has no latency profile to emulate (a service-time pool cannot run on a node)", ps.Name))
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	for _, name := range ps.Models {
		prof, ok := fp.Profiles[name]
		if !ok {
			prof = *first
		}
		v := reg.Check(&fp, name)
		cfg.Models = append(cfg.Models, Model{Name: name, Profile: prof, KVTokens: v.KVTokens})
	}
	cfg.Driver = ps.Driver
	cfg.MaxBatch = ps.MaxBatch
	cfg.Compat = func(model, driver string) error {
		p := fp
		p.Driver = driver
		v := reg.Check(&p, model)
		if !v.Servable {
			return errors.New(strings.Join(v.Reasons, "; "))
		}
		return nil
	}
	return cfg, nil
}

func registryOf(sc *scenarios.Scenario) *fleet.Registry {
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

// resolveProfile turns a scenario profile (a built-in reference with
// overrides, or explicit numbers) into a latency profile, by the same rules
// as the twin (twin/build.go resolveProfile, which is unexported).
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
