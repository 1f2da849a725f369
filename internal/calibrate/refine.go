package calibrate

import (
	"context"
	"math"

	"gonum.org/v1/gonum/optimize"

	"github.com/fleetdrill/fleetdrill/twin"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// Refine improves a profile by simulation, the way BLIS and Dynamo's
// planner calibrate: it replays the run through the twin and minimises,
// with gonum's Nelder–Mead over the logarithms of the four coefficients
// (which keeps them positive), the mean absolute log-ratio of predicted to
// measured per-request end-to-end latency and TPOT, plus half that of TTFT
// (offset by 50 ms so that near-zero TTFTs do not dominate). The linear fit
// is the starting point; the interval equations it solves assume steps
// spread evenly through an interval, which a busy engine's prefill bursts
// break, and refining in the twin itself removes that approximation.
//
// It is deterministic: Nelder–Mead draws nothing at random, and every
// replay is.
func Refine(ctx context.Context, run *Run, start latency.Profile, evaluations int) (latency.Profile, float64, error) {
	sim, err := newSimulator(run)
	if err != nil {
		return start, 0, err
	}
	defer sim.close()

	floors := [4]float64{100, 0.1, 0.01, 1e-4} // µs: a zero coefficient starts here
	x0 := make([]float64, 4)
	for j, c := range [4]float64{start.StepBase, start.PerSeq, start.PerPrefillToken, start.PerKVToken} {
		x0[j] = math.Log(math.Max(c, floors[j]))
	}
	profile := func(x []float64) latency.Profile {
		p := start
		p.StepBase, p.PerSeq, p.PerPrefillToken, p.PerKVToken = math.Exp(x[0]), math.Exp(x[1]), math.Exp(x[2]), math.Exp(x[3])
		return p
	}
	var failed error
	objective := func(x []float64) float64 {
		if failed != nil {
			return math.Inf(1)
		}
		pred, _, err := sim.replay(ctx, profile(x), false)
		if err != nil {
			failed = err
			return math.Inf(1)
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
	best := profile(res.X)
	best.Source = start.Source + ", refined by replay"
	return best, res.F, nil
}

// loss is the refinement objective for predicted timelines.
func loss(run *Run, pred []twin.RequestLog) float64 {
	sum, n := 0.0, 0
	lr := func(p, m float64) float64 { return math.Abs(math.Log(p / m)) }
	for i := range run.Requests {
		r, l := &run.Requests[i], pred[i]
		e2e := (l.Done - l.Arrived).Seconds()
		ttft := (l.FirstToken - l.Arrived).Seconds()
		if r.E2E() <= 0 || e2e <= 0 {
			continue
		}
		sum += lr(e2e, r.E2E()) + 0.5*lr(ttft+0.05, r.TTFT()+0.05)
		if r.Output > 1 && r.TPOT() > 0 {
			tpot := (l.Done - l.FirstToken).Seconds() / float64(r.Output-1)
			if tpot > 0 {
				sum += lr(tpot, r.TPOT())
			}
		}
		n++
	}
	if n == 0 {
		return math.Inf(1)
	}
	return sum / float64(n)
}

// refineMinimize is the search both replay refinements (a linear profile,
// the physical model's coefficients) run: Nelder–Mead over log
// coefficients, stopping after evaluations replays or when the loss stops
// moving. It fails only when there is no result at all.
func refineMinimize(objective func([]float64) float64, x0 []float64, evaluations int) (*optimize.Result, error) {
	res, err := optimize.Minimize(optimize.Problem{Func: objective}, x0,
		&optimize.Settings{FuncEvaluations: evaluations, Converger: &optimize.FunctionConverge{Absolute: 1e-4, Iterations: 20}},
		&optimize.NelderMead{SimplexSize: 0.3})
	if res == nil {
		return nil, err
	}
	return res, nil
}
