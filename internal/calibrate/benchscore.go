package calibrate

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"

	"golang.org/x/sync/errgroup"
	"gonum.org/v1/gonum/optimize"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// BenchRow is one experiment, stage and metric: measured, predicted, and
// the signed relative error (predicted − measured) / measured.
type BenchRow struct {
	Experiment string  `json:"experiment"`
	Stage      string  `json:"stage"`
	Metric     string  `json:"metric"`
	Measured   float64 `json:"measured_ms"`
	Predicted  float64 `json:"predicted_ms"`
	Error      float64 `json:"error"`
}

// BenchSummary is a metric's median absolute error over experiments, on
// the whole run (stage -1), the way the sim-to-real study reports it.
type BenchSummary struct {
	Metric      string  `json:"metric"`
	Experiments int     `json:"experiments"`
	MedianAbs   float64 `json:"median_abs_error"`
	MeanSigned  float64 `json:"mean_signed_error"`
	Worst       float64 `json:"worst_abs_error"`
	WorstName   string  `json:"worst_experiment"`
}

// BenchScore is the twin scored on a set of experiments.
type BenchScore struct {
	// Coeffs are the coefficients every experiment ran with; null when
	// each ran with its GPU family's built-in ones.
	Coeffs *latency.Coeffs `json:"coefficients"`
	BenchFigures
	// Sustainable is the experiments' sustainable rates, in the order of
	// the setups, as far as AddSustainable (sustain.go) searched them.
	Sustainable []BenchSustainable `json:"sustainable,omitempty"`

	Predictions []*BenchPrediction `json:"-"`
}

// BenchFigures are the rows and summary of experiments scored against
// their predictions, however those were made (one set of coefficients for
// all, or one per cross-validation fold).
type BenchFigures struct {
	Rows    []BenchRow     `json:"rows"`
	Summary []BenchSummary `json:"summary"`
	// BackedUp counts the experiments where the twin's queue was still
	// growing at the end of a stage though the measurement's was not
	// (measured TTFT mean under measuredBackedUpMS); Names lists them.
	BackedUp      int      `json:"backed_up"`
	BackedUpNames []string `json:"backed_up_experiments"`
}

// measuredBackedUpMS: a measured stage whose TTFT mean passes this backed
// up on the real engine too (a queue that keeps up waits milliseconds).
const measuredBackedUpMS = 5000

// BuiltinCoeffs returns the built-in coefficients of an experiment's GPU
// family (latency.CoeffsFor).
func BuiltinCoeffs(s *BenchSetup) latency.Coeffs {
	c, _ := latency.CoeffsFor(s.Placement.GPU)
	return c
}

// replayAll replays every experiment, in parallel, each with the
// coefficients coeffs gives it.
func replayAll(ctx context.Context, setups []*BenchSetup, coeffs func(*BenchSetup) latency.Coeffs) ([]*BenchPrediction, error) {
	preds := make([]*BenchPrediction, len(setups))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, s := range setups {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			p, err := ReplayBenchmark(s, coeffs(s))
			preds[i] = p
			return err
		})
	}
	return preds, g.Wait()
}

// ScoreBenchmarks replays every experiment with coefficients c (nil: each
// experiment's built-in family coefficients) and compares each measured
// figure with the twin's.
func ScoreBenchmarks(ctx context.Context, setups []*BenchSetup, c *latency.Coeffs) (*BenchScore, error) {
	coeffs := BuiltinCoeffs
	if c != nil {
		coeffs = func(*BenchSetup) latency.Coeffs { return *c }
	}
	preds, err := replayAll(ctx, setups, coeffs)
	if err != nil {
		return nil, err
	}
	return &BenchScore{Coeffs: c, BenchFigures: benchFigures(setups, preds), Predictions: preds}, nil
}

// benchFigures scores each experiment's prediction (preds[i] is
// setups[i]'s) against its measurements: the rows, their summary and the
// backlog. ScoreBenchmarks and CrossValidate share it so that in-sample
// and cross-validated figures are computed the same way.
func benchFigures(setups []*BenchSetup, preds []*BenchPrediction) BenchFigures {
	var f BenchFigures
	f.Rows, f.BackedUpNames = benchRows(setups, preds)
	f.BackedUp = len(f.BackedUpNames)
	f.Summary = benchSummary(f.Rows)
	return f
}

// benchRows compares every measured stage figure with its prediction, in
// experiment, stage and metric order, and lists the experiments where the
// twin backed up though the engine did not.
func benchRows(setups []*BenchSetup, preds []*BenchPrediction) (rows []BenchRow, backedUp []string) {
	for i, s := range setups {
		p := preds[i]
		for _, st := range stageKeys(s.Measured) {
			for _, m := range BenchMetrics {
				meas, ok := s.Measured[st][m]
				if !ok || meas <= 0 {
					continue
				}
				pred, ok := p.Stages[st][m]
				if !ok {
					continue
				}
				rows = append(rows, BenchRow{Experiment: s.Name, Stage: st, Metric: m, Measured: round4(meas),
					Predicted: round4(pred), Error: round4((pred - meas) / meas)})
			}
		}
		for _, st := range p.BackedUp {
			if s.Measured[st]["ttft_mean"] < measuredBackedUpMS {
				backedUp = append(backedUp, s.Name)
				break
			}
		}
	}
	return rows, backedUp
}

// benchSummary is, per metric, the whole-run (stage -1) errors of rows
// summarised over experiments: the median absolute error the sim-to-real
// study reports, the mean signed error and the worst.
func benchSummary(rows []BenchRow) []BenchSummary {
	var out []BenchSummary
	for _, m := range BenchMetrics {
		var errs []float64
		sum := BenchSummary{Metric: m}
		for _, r := range rows {
			if r.Metric != m || r.Stage != "-1" {
				continue
			}
			errs = append(errs, math.Abs(r.Error))
			sum.MeanSigned += r.Error
			if math.Abs(r.Error) > sum.Worst {
				sum.Worst, sum.WorstName = math.Abs(r.Error), r.Experiment
			}
		}
		if len(errs) == 0 {
			continue
		}
		sum.Experiments = len(errs)
		sum.MedianAbs = round4(median(errs))
		sum.MeanSigned = round4(sum.MeanSigned / float64(len(errs)))
		sum.Worst = round4(sum.Worst)
		out = append(out, sum)
	}
	return out
}

// SummaryOf returns a metric's summary, and false when no experiment
// measured it.
func (sc *BenchFigures) SummaryOf(metric string) (BenchSummary, bool) {
	for _, s := range sc.Summary {
		if s.Metric == metric {
			return s, true
		}
	}
	return BenchSummary{}, false
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// fitWeights weighs the metrics in the fitting loss: the means and the
// tail of E2E carry the goals; TTFT, noisier and smaller, counts half.
var fitWeights = map[string]float64{
	"e2e_mean": 1, "itl_mean": 1, "e2e_p99": 1, "e2e_p90": 0.5,
	"ttft_mean": 0.5, "ttft_p90": 0.25, "ttft_p99": 0.25,
}

// benchLoss is the fitting objective: per experiment the weighted mean of
// squared log errors over its measured stages and metrics, then the mean
// over experiments, so that an experiment with more stages does not
// dominate (the root of it is an RMS of log errors).
func benchLoss(setups []*BenchSetup, preds []*BenchPrediction) float64 {
	total := 0.0
	for i, s := range setups {
		var sum, w float64
		// In a fixed order: a float sum's last bits depend on it, and the
		// fit compares these values.
		for _, st := range stageKeys(s.Measured) {
			ms := s.Measured[st]
			for _, m := range BenchMetrics {
				meas, ok := ms[m]
				wt := fitWeights[m]
				if !ok {
					continue
				}
				pred := preds[i].Stages[st][m]
				if wt == 0 || meas <= 0 || pred <= 0 {
					continue
				}
				e := math.Log(pred / meas)
				sum += wt * e * e
				w += wt
			}
		}
		if w > 0 {
			total += sum / w
		}
	}
	return math.Sqrt(total / float64(len(setups)))
}

// FitCoeffs fits the coefficients named in free (latency.EngineFitted when
// empty) jointly over the experiments, starting from start, by Nelder-Mead
// on their logarithms (they are all positive). It returns the coefficients and the loss (RMS of log errors).
func FitCoeffs(ctx context.Context, setups []*BenchSetup, start latency.Coeffs, free []string, evaluations int) (latency.Coeffs, float64, error) {
	x0, set, err := coeffSpace(start, free)
	if err != nil {
		return start, 0, err
	}
	var firstErr error
	objective := func(x []float64) float64 {
		c := set(x)
		if c.Check() != nil {
			return 1e6
		}
		preds, err := replayAll(ctx, setups, func(*BenchSetup) latency.Coeffs { return c })
		if err != nil {
			if firstErr == nil && ctx.Err() == nil {
				firstErr = err
			}
			return 1e6
		}
		return benchLoss(setups, preds)
	}
	res, err := optimize.Minimize(optimize.Problem{Func: objective}, x0,
		&optimize.Settings{FuncEvaluations: evaluations, Converger: &optimize.FunctionConverge{Absolute: 1e-5, Iterations: 40}},
		&optimize.NelderMead{SimplexSize: 0.4})
	if ctx.Err() != nil {
		return start, 0, ctx.Err()
	}
	if res == nil {
		if firstErr != nil {
			return start, 0, firstErr
		}
		return start, 0, fmt.Errorf("calibrate: fit: %w", err)
	}
	c := set(res.X)
	if res.F >= 1e6 && firstErr != nil {
		return start, 0, firstErr
	}
	return c, res.F, nil
}
