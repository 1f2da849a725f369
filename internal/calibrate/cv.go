package calibrate

import (
	"context"
	"fmt"
	"slices"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// CVGroup is what cross-validation holds out in each fold.
type CVGroup string

const (
	// CVByModel holds out every experiment of one model at a time (its
	// TP and workload variants together): the coefficients must then
	// predict a model they were not fitted on, the question a new model
	// asks of them.
	CVByModel CVGroup = "model"
	// CVByExperiment holds out one experiment at a time.
	CVByExperiment CVGroup = "experiment"
)

// CVGroups are the allowed groupings, in the order help lists them.
var CVGroups = []CVGroup{CVByModel, CVByExperiment}

// ParseCVGroup reads a grouping's name.
func ParseCVGroup(s string) (CVGroup, error) {
	for _, g := range CVGroups {
		if string(g) == s {
			return g, nil
		}
	}
	return "", fmt.Errorf("%q is not a cross-validation grouping; use %s (leave one model out) or %s (leave one experiment out)",
		s, CVByModel, CVByExperiment)
}

// key is the group an experiment falls in.
func (g CVGroup) key(s *BenchSetup) string {
	if g == CVByModel {
		// The model's config name: runs of one model at other TP degrees
		// or workloads share their weights and shapes, so holding out one
		// of them alone would leak the model into the fit.
		return s.Placement.Model.Name
	}
	return s.Name
}

// CVFold is one fold: the group held out, the coefficients fitted on the
// rest, and the fit's loss on those.
type CVFold struct {
	Group   string         `json:"group"`
	HeldOut []string       `json:"held_out"`
	FitOn   []string       `json:"fit_on"`
	Coeffs  latency.Coeffs `json:"coefficients"`
	Loss    float64        `json:"loss"`
}

// CVResult is a cross-validation of the coefficient fit: every experiment
// scored by coefficients fitted without its group, next to the in-sample
// score of the fit on all of them.
type CVResult struct {
	By          CVGroup  `json:"by"`
	Free        []string `json:"free,omitempty"`
	Evaluations int      `json:"evaluations"`
	Folds       []CVFold `json:"folds"`
	// Coeffs and Loss are the fit on every experiment, what calibrate
	// --out writes; InSample scores the experiments with them.
	Coeffs   latency.Coeffs `json:"coefficients"`
	Loss     float64        `json:"loss"`
	InSample *BenchScore    `json:"in_sample"`
	// CrossValidated scores each experiment with its own fold's
	// coefficients (Folds has them), summarised as InSample is.
	CrossValidated BenchFigures `json:"cross_validated"`
	// Ratio is, per metric, the cross-validated median |error| over the
	// in-sample one: how much of the in-sample accuracy is fit, not model.
	// A metric whose in-sample median is zero has none.
	Ratio map[string]float64 `json:"ratio"`
}

// cvFolds groups the experiments, groups in order of their first
// experiment: fold i holds out the indices folds[i].
func cvFolds(setups []*BenchSetup, by CVGroup) (names []string, folds [][]int) {
	at := map[string]int{}
	for i, s := range setups {
		k := by.key(s)
		j, ok := at[k]
		if !ok {
			j = len(names)
			at[k] = j
			names = append(names, k)
			folds = append(folds, nil)
		}
		folds[j] = append(folds[j], i)
	}
	return names, folds
}

// fitFunc is FitCoeffs' signature; tests stand in for it.
type fitFunc func(ctx context.Context, setups []*BenchSetup, start latency.Coeffs, free []string, evaluations int) (latency.Coeffs, float64, error)

// CrossValidate fits the coefficients named in free (all when empty) once
// per group of experiments (by model or by experiment) on every other
// experiment, starting each fit from start with at most evals replays of
// the set, and scores the held-out group's experiments with them. It also
// fits on all experiments and scores them in-sample, for comparison. Folds
// run one after another (each fit replays in parallel) and the result
// depends only on the inputs.
func CrossValidate(ctx context.Context, setups []*BenchSetup, start latency.Coeffs, free []string, evals int, by CVGroup) (*CVResult, error) {
	return crossValidate(ctx, setups, start, free, evals, by, FitCoeffs)
}

func crossValidate(ctx context.Context, setups []*BenchSetup, start latency.Coeffs, free []string, evals int, by CVGroup, fit fitFunc) (*CVResult, error) {
	if _, err := ParseCVGroup(string(by)); err != nil {
		return nil, fmt.Errorf("calibrate: cross-validation: %w", err)
	}
	names, folds := cvFolds(setups, by)
	if len(folds) < 2 {
		if by == CVByModel && len(setups) > 0 {
			return nil, fmt.Errorf("calibrate: cross-validation by model needs experiments of at least two models, to fit on the others while one is held out; the %d given all run %s (use --cv experiment, or add experiments of other models)",
				len(setups), names[0])
		}
		return nil, fmt.Errorf("calibrate: cross-validation needs at least two experiments, to fit on the others while one is held out; got %d", len(setups))
	}
	res := &CVResult{By: by, Free: free, Evaluations: evals}
	preds := make([]*BenchPrediction, len(setups))
	for k, held := range folds {
		var train, test []*BenchSetup
		fold := CVFold{Group: names[k]}
		for i, s := range setups {
			if slices.Contains(held, i) {
				test = append(test, s)
				fold.HeldOut = append(fold.HeldOut, s.Name)
			} else {
				train = append(train, s)
				fold.FitOn = append(fold.FitOn, s.Name)
			}
		}
		c, loss, err := fit(ctx, train, start, free, evals)
		if err != nil {
			return nil, fmt.Errorf("calibrate: cross-validation, fold %s: %w", names[k], err)
		}
		fold.Coeffs, fold.Loss = c, round4(loss)
		p, err := replayAll(ctx, test, func(*BenchSetup) latency.Coeffs { return c })
		if err != nil {
			return nil, fmt.Errorf("calibrate: cross-validation, fold %s: %w", names[k], err)
		}
		for j, i := range held {
			preds[i] = p[j]
		}
		res.Folds = append(res.Folds, fold)
	}
	// In experiment order, as ScoreBenchmarks lists them.
	res.CrossValidated = benchFigures(setups, preds)

	c, loss, err := fit(ctx, setups, start, free, evals)
	if err != nil {
		return nil, fmt.Errorf("calibrate: cross-validation, fit on all experiments: %w", err)
	}
	res.Coeffs, res.Loss = c, round4(loss)
	if res.InSample, err = ScoreBenchmarks(ctx, setups, &c); err != nil {
		return nil, err
	}
	res.Ratio = map[string]float64{}
	for _, cv := range res.CrossValidated.Summary {
		if in, ok := res.InSample.SummaryOf(cv.Metric); ok && in.MedianAbs > 0 {
			res.Ratio[cv.Metric] = round4(cv.MedianAbs / in.MedianAbs)
		}
	}
	return res, nil
}
