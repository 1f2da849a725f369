package calibrate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// PhysicsProfile is the physical step-time model of a run's placement with
// coefficients c, as a profile Replay can use: the run's engine limits
// (chunk budget, KV capacity) apply on top, as replayScenario sets them.
func PhysicsProfile(run *Run, c latency.Coeffs) (latency.Profile, error) {
	pl, err := Resolve(run.Engine)
	if err != nil {
		return latency.Profile{}, err
	}
	return physicsProfile(run, pl, c)
}

// physicsProfile is PhysicsProfile on a placement already resolved: the
// fit builds one for every candidate.
func physicsProfile(run *Run, pl Placement, c latency.Coeffs) (latency.Profile, error) {
	ph, err := latency.NewPhysics(latency.Placement{GPU: pl.GPU, Model: pl.Model, TP: pl.TP, EP: pl.expertGPUs()}, c)
	if err != nil {
		return latency.Profile{}, fmt.Errorf("calibrate: %s: %w", run.Name, err)
	}
	return latency.Profile{Physics: ph, MinStep: 100, AsyncScheduling: true, MaxBatchedTokens: run.Engine.MaxBatchedTokens,
		Source: ph.String()}, nil
}

// RefineCoeffs fits the physical model's coefficients named in free (all
// when empty) to one measured run by replaying it through the twin, with
// the per-request objective Refine uses. A single dense run identifies the
// device's efficiencies and overheads, not tensor-parallel or MoE terms:
// fit those on runs that have them (or keep the family's).
func RefineCoeffs(ctx context.Context, run *Run, start latency.Coeffs, free []string, evaluations int) (latency.Coeffs, float64, error) {
	sim, err := newSimulator(run)
	if err != nil {
		return start, 0, err
	}
	defer sim.close()
	x0, set, err := coeffSpace(start, free)
	if err != nil {
		return start, 0, err
	}
	var failed error
	objective := func(x []float64) float64 {
		c := set(x)
		if failed != nil || c.Check() != nil {
			return 1e6
		}
		prof, err := physicsProfile(run, sim.pl, c)
		if err != nil {
			failed = err
			return 1e6
		}
		pred, _, err := sim.replay(ctx, prof, false)
		if err != nil {
			failed = err
			return 1e6
		}
		return loss(run, pred)
	}
	res, err := refineMinimize(objective, x0, evaluations)
	if failed != nil {
		return start, 0, failed
	}
	if err != nil {
		return start, 0, err
	}
	return set(res.X), res.F, nil
}

// coeffSpace maps the coefficients of start named in free (the engine's,
// latency.EngineFitted, when empty) to the unconstrained vector the fits
// search, and back: logarithms keep every coefficient positive. An
// override left at 0 (the device's measured figure) starts from 0.7 for
// an efficiency, 1 for a multiplier. The others stay at start's values.
func coeffSpace(start latency.Coeffs, free []string) (x0 []float64, set func([]float64) latency.Coeffs, err error) {
	var all []string
	for _, f := range start.Fields() {
		all = append(all, f.Name)
	}
	for _, f := range free {
		if !slices.Contains(all, f) {
			return nil, nil, fmt.Errorf("calibrate: no coefficient %q to fit; want some of %v", f, all)
		}
	}
	if len(free) == 0 {
		free = latency.EngineFitted
	}
	fitted := func(name string) bool { return slices.Contains(free, name) }
	for _, f := range start.Fields() {
		if fitted(f.Name) {
			v := *f.P
			if v == 0 && strings.HasSuffix(f.Name, "_eff") {
				v = 0.7
			} else if v == 0 && strings.HasSuffix(f.Name, "_x") {
				v = 1
			}
			x0 = append(x0, math.Log(max(v, 1e-3)))
		}
	}
	set = func(x []float64) latency.Coeffs {
		c := start
		j := 0
		for _, f := range c.Fields() {
			if fitted(f.Name) {
				*f.P = math.Exp(x[j])
				j++
			}
		}
		return c
	}
	return x0, set, nil
}
