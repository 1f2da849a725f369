package compile

import (
	"fmt"
	"maps"
	"slices"

	"github.com/fleetdrill/fleetdrill/internal/modelfile"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// DerivedPlacement resolves a pool's gpu, model_config, precision and
// tensor-parallel degree into a placement. Errors name the key and say
// what to fix.
func DerivedPlacement(sc *scenarios.Scenario, pl *scenarios.Pool) (latency.Placement, error) {
	var out latency.Placement
	if pl.ModelConfig == "" {
		return out, fmt.Errorf("model_config: missing; a derived profile needs the model's shape: a Hugging Face config.json path or a shipped model (%v)", latency.ModelNames())
	}
	name, key := pl.GPUName()
	g, err := latency.LookupGPU(name)
	if err != nil {
		return out, fmt.Errorf("%s: %w", key, err)
	}
	m, err := modelfile.Resolve(pl.ModelConfig, sc.Dir)
	if err != nil {
		return out, fmt.Errorf("model_config: %w", err)
	}
	out = pl.Placement(g, m)
	if err := out.Normalize(); err != nil {
		return out, err
	}
	return out, nil
}

// DerivedProfile is the profile the physical model gives a pool: with
// coefficients c (nil: its family's built-in ones), the KV capacity its
// memory leaves at usable (vLLM's gpu_memory_utilization), and vLLM's
// default chunk budget for the GPU.
func DerivedProfile(pl latency.Placement, c *latency.Coeffs, usable float64) (latency.Profile, error) {
	coeffs, how := latency.CoeffsFor(pl.GPU)
	if c != nil {
		coeffs, how = *c, "the scenario's coefficients"
	}
	ph, err := latency.NewPhysics(pl, coeffs)
	if err != nil {
		return latency.Profile{}, err
	}
	kv := pl.KVTokens(usable)
	if kv < 1 {
		return latency.Profile{}, fmt.Errorf("the weights of %s (%.1f GB per GPU) leave no KV cache on %d × %s at %.0f %% of memory; want more tensor_parallel or fp8",
			pl.Model.Name, pl.WeightBytesPerGPU()/1e9, pl.TP, pl.GPU.Name, 100*usable)
	}
	_, chunk := latency.EngineDefaults(pl.GPU)
	return latency.Profile{Physics: ph, MinStep: 100, MaxBatchedTokens: chunk, KVTokens: kv, AsyncScheduling: true,
		Source: ph.String() + "; " + how}, nil
}

// PoolProfiles resolves a pool's latency profiles: the ones it gives
// (built-in references, overrides or numbers) and, when it asks for one, the
// derived profile of its model without a given profile. Keys are model
// names; errors name the key at fault, under at (e.g. "pools[2]").
func PoolProfiles(sc *scenarios.Scenario, ps *scenarios.Pool, at string) (map[string]latency.Profile, []error) {
	out := map[string]latency.Profile{}
	var errs []error
	derives := ps.Derives()
	for _, name := range slices.Sorted(maps.Keys(ps.Profiles)) {
		if derives && ps.Profiles[name].LimitsOnly() {
			continue // the derived profile's engine limits, below
		}
		prof, err := resolveProfile(ps.Profiles[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.profiles.%s: %w", at, name, err))
			continue
		}
		out[name] = prof
	}
	if !derives {
		return out, errs
	}
	pl, err := DerivedPlacement(sc, ps)
	if err != nil {
		return out, append(errs, fmt.Errorf("%s.%w", at, err))
	}
	usable := 0.9
	for _, a := range sc.Accelerators {
		if a.Name == ps.Accelerator && a.UsableFraction > 0 {
			usable = a.UsableFraction
		}
	}
	prof, err := DerivedProfile(pl, ps.Coefficients, usable)
	if err != nil {
		return out, append(errs, fmt.Errorf("%s.model_config: %w", at, err))
	}
	for _, name := range ps.Models {
		if _, ok := out[name]; ok {
			continue
		}
		p := prof
		if lim, ok := ps.Profiles[name]; ok {
			if lim.MaxBatchedTokens > 0 {
				p.MaxBatchedTokens = lim.MaxBatchedTokens
			}
			if lim.KVTokens > 0 {
				p.KVTokens = lim.KVTokens
			}
			if lim.MinStepUS > 0 {
				p.MinStep = lim.MinStepUS
			}
		}
		out[name] = p
	}
	return out, errs
}
