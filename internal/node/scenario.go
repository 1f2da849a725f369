package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/fleet"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// FromScenario returns the part of a Config that describes pool: its models
// with their profiles and KV capacity, its driver and max batch, and a
// compatibility check that applies the twin's registry rules
// (fleet.Registry.Check: runtime, driver minimums of runtime and model,
// precision, memory fit) to the pool as it would be with the node's current
// driver. A model the pool lists without a profile runs on the pool's first
// profile: an untested pairing runs as the pool's first (twin/compile).
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
	reg := compile.Registry(sc)
	fp := fleet.Pool{Name: ps.Name, Region: ps.Region, Accelerator: ps.Accelerator, GPUsPerReplica: ps.GPUsPerReplica,
		Runtime: ps.Runtime, Driver: ps.Driver, Models: ps.Models, Profiles: map[string]latency.Profile{},
		Service: ps.Service != nil}
	var errs []error
	var first *latency.Profile
	profs, perrs := compile.PoolProfiles(sc, &ps, fmt.Sprintf("pools[%d]", i))
	for _, err := range perrs {
		errs = append(errs, fmt.Errorf("node: %w", err))
	}
	for _, name := range ps.Models {
		prof, ok := profs[name]
		if !ok {
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
	if ps.Role == "prefill" || ps.Role == "decode" {
		// Its part in disaggregated serving: the link of the first
		// disaggregated model it serves (a node has one inbound link; a
		// pool serving two disaggregated models on different links would
		// get the first's).
		for _, name := range ps.Models {
			mi := slices.IndexFunc(sc.Models, func(m scenarios.Model) bool { return m.Name == name })
			if mi < 0 || sc.Models[mi].Disaggregation == nil {
				continue
			}
			l, err := compile.LinkOf(&sc.Models[mi])
			if err != nil {
				return cfg, fmt.Errorf("node: %w", err)
			}
			cfg.KV = &KVConfig{Role: ps.Role, BytesPerToken: l.KVBytesPerToken, Lease: ps.KVLeaseDuration.D(),
				Bandwidth: l.Bandwidth(ps.GPUsPerReplica), Latency: l.Spec.Latency, GPUs: ps.GPUsPerReplica,
				FailurePolicy: ps.KVLoadFailurePolicy}
			break
		}
	}
	cfg.Driver = ps.Driver
	cfg.MaxBatch = ps.MaxBatch
	cfg.Pool, cfg.Region = ps.Name, ps.Region
	for _, c := range sc.Classes {
		cfg.Classes = append(cfg.Classes, c.Name)
	}
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
