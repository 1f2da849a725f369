package calibrate

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/optimize"

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
	ph, err := latency.NewPhysics(latency.Placement{GPU: pl.GPU, Model: pl.Model, TP: pl.TP, EP: pl.EP}, c)
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
	pl, err := Resolve(run.Engine)
	if err != nil {
		return start, 0, err
	}
	sim, err := newSimulator(run, pl)
	if err != nil {
		return start, 0, err
	}
	defer sim.close()
	var names []string
	for _, f := range start.Fields() {
		if len(free) == 0 || slices.Contains(free, f.Name) {
			names = append(names, f.Name)
		}
	}
	if len(names) < max(len(free), 1) {
		return start, 0, fmt.Errorf("calibrate: --free %v: want coefficient names of %v", free, coeffNames(start))
	}
	set := func(x []float64) latency.Coeffs {
		c := start
		j := 0
		for _, f := range c.Fields() {
			if slices.Contains(names, f.Name) {
				*f.P = fromLog(f.Name, x[j])
				j++
			}
		}
		return c
	}
	var x0 []float64
	for _, f := range start.Fields() {
		if slices.Contains(names, f.Name) {
			x0 = append(x0, toLog(f.Name, *f.P))
		}
	}
	var failed error
	objective := func(x []float64) float64 {
		c := set(x)
		if failed != nil || c.Check() != nil {
			return 1e6
		}
		prof, err := PhysicsProfile(run, c)
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
	res, err := optimize.Minimize(optimize.Problem{Func: objective}, x0,
		&optimize.Settings{FuncEvaluations: evaluations, Converger: &optimize.FunctionConverge{Absolute: 1e-4, Iterations: 20}},
		&optimize.NelderMead{SimplexSize: 0.3})
	if failed != nil {
		return start, 0, failed
	}
	if err != nil && res == nil {
		return start, 0, err
	}
	return set(res.X), res.F, nil
}

// toLog and fromLog map a coefficient to the unconstrained space the fits
// search: logarithms keep every coefficient positive; moe_imbalance is
// fitted as its excess over 1.
func toLog(name string, v float64) float64 {
	if name == "moe_imbalance" {
		v--
	}
	return math.Log(max(v, 1e-3))
}

func fromLog(name string, x float64) float64 {
	if name == "moe_imbalance" {
		return 1 + math.Exp(x)
	}
	return math.Exp(x)
}

func coeffNames(c latency.Coeffs) []string {
	var out []string
	for _, f := range c.Fields() {
		out = append(out, f.Name)
	}
	return out
}
