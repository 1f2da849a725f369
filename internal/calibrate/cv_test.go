package calibrate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// TestCVFoldsOfTrainVal: which committed experiments each fold holds out.
// By model, a model's runs at any TP degree and workload go together
// (Mistral-Nemo's TP1 and TP2 runs are one fold).
func TestCVFoldsOfTrainVal(t *testing.T) {
	setups := loadTrainVal(t)
	tests := []struct {
		by   CVGroup
		want map[string][]string
	}{
		{CVByModel, map[string][]string{
			"llama-4-scout-17b-16e-instruct-fp8-dynamic": {"17-llama-4-scout-17b-16e-tp2-general-lite-2-1",
				"20-llama-4-scout-17b-16e-tp2-codegen-2", "21-llama-4-scout-17b-16e-tp2-roleplay-2",
				"48-llama-4-scout-17b-16e-tp2-reasoning-lite-2-1"},
			"llama-2-7b-hf":              {"20260217-155451-llama-2-7b-tp1-codegen", "67-llama-2-7b-hf-tp1-reasoning-lite-1-1"},
			"llama-3.1-70b-instruct":     {"60-llama-3-1-70b-tp4-general-lite-4-1", "61-llama-3-1-70b-tp4-codegen-4-1"},
			"mistral-nemo-instruct-2407": {"62-mistral-nemo-12b-tp2-general-lite-2-1", "63-mistral-nemo-12b-tp1-codegen-1-1"},
			"qwen2.5-7b-instruct":        {"64-qwen2-5-7b-instruct-tp1-roleplay-1-1", "66-qwen2-5-7b-instruct-tp1-reasoning-lite-1-1"},
			"yi-34b":                     {"65-01-ai-yi-34b-tp2-general-lite-2-1"},
		}},
		{CVByExperiment, func() map[string][]string {
			m := map[string][]string{}
			for _, s := range setups {
				m[s.Name] = []string{s.Name}
			}
			return m
		}()},
	}
	for _, tt := range tests {
		t.Run(string(tt.by), func(t *testing.T) {
			names, folds := cvFolds(setups, tt.by)
			got := map[string][]string{}
			for k, f := range folds {
				for _, i := range f {
					got[names[k]] = append(got[names[k]], setups[i].Name)
				}
			}
			require.Equal(t, tt.want, got)
			require.Len(t, names, len(tt.want), "one fold per group, no group twice")
		})
	}
}

// TestCrossValidateHoldsOut: with the fit stood in for (it returns its
// start, the built-in coefficients), no fold fits on what it holds out,
// every experiment is held out once, and the cross-validated figures are
// exactly the built-in coefficients' ScoreBenchmarks figures: the two
// share one computation.
func TestCrossValidateHoldsOut(t *testing.T) {
	setups := loadTrainVal(t)
	start := BuiltinCoeffs(setups[0])
	for _, by := range CVGroups {
		t.Run(string(by), func(t *testing.T) {
			var fitted [][]string
			fit := func(_ context.Context, train []*BenchSetup, c latency.Coeffs, _ []string, _ int) (latency.Coeffs, float64, error) {
				var names []string
				for _, s := range train {
					names = append(names, s.Name)
				}
				fitted = append(fitted, names)
				return c, 0.1, nil
			}
			res, err := crossValidate(context.Background(), setups, start, []string{"step_us"}, 5, by, fit)
			require.NoError(t, err)
			require.Len(t, fitted, len(res.Folds)+1, "one fit per fold, then one on all")
			require.Len(t, fitted[len(fitted)-1], len(setups))

			heldOnce := map[string]int{}
			for k, f := range res.Folds {
				require.Equal(t, fitted[k], f.FitOn, "the fold reports what it was fitted on")
				require.Len(t, append(f.FitOn, f.HeldOut...), len(setups))
				for _, h := range f.HeldOut {
					require.NotContains(t, fitted[k], h, "fold %s fits on the experiment it holds out", f.Group)
					heldOnce[h]++
				}
			}
			for _, s := range setups {
				require.Equal(t, 1, heldOnce[s.Name], s.Name)
			}

			builtin, err := ScoreBenchmarks(context.Background(), setups, nil)
			require.NoError(t, err)
			require.Equal(t, builtin.BenchFigures, res.CrossValidated)
			require.Equal(t, builtin.BenchFigures, res.InSample.BenchFigures)
			for _, m := range []string{"e2e_mean", "itl_mean", "e2e_p99", "ttft_mean"} {
				require.Equal(t, 1.0, res.Ratio[m], m)
			}
		})
	}
}

// coeffField is a coefficient by its name in latency.Coeffs.Fields(), the
// interface the fit works through.
func coeffField(t *testing.T, c *latency.Coeffs, name string) *float64 {
	t.Helper()
	for _, f := range c.Fields() {
		if f.Name == name {
			return f.P
		}
	}
	require.FailNow(t, "no coefficient "+name)
	return nil
}

// cvSetups are three short synthetic experiments "measured" by replaying
// coefficients the fit does not start from.
func cvSetups(t *testing.T) []*BenchSetup {
	t.Helper()
	truth, _ := latency.CoeffsFor(latency.GPU{Family: "hopper"})
	*coeffField(t, &truth, "step_us") *= 1.5
	return measuredBy(t, truth, 20*time.Second, 2, 4, 6)
}

// TestCrossValidateRuns: a real fit with a tiny budget runs, gives the
// same result twice, and scores every experiment exactly once.
func TestCrossValidateRuns(t *testing.T) {
	setups := cvSetups(t)
	start := BuiltinCoeffs(setups[0])
	run := func() *CVResult {
		res, err := CrossValidate(context.Background(), setups, start, []string{"step_us"}, 4, CVByExperiment)
		require.NoError(t, err)
		return res
	}
	res := run()
	require.Equal(t, res, run(), "same inputs, same result")

	require.Len(t, res.Folds, 3)
	seen := map[string]int{}
	for _, r := range res.CrossValidated.Rows {
		if r.Stage == "-1" && r.Metric == "e2e_mean" {
			seen[r.Experiment]++
		}
	}
	require.Equal(t, map[string]int{"small-0": 1, "small-1": 1, "small-2": 1}, seen)
	for _, f := range res.Folds {
		require.Positive(t, f.Loss)
		require.NotEqual(t, *coeffField(t, &start, "step_us"), *coeffField(t, &f.Coeffs, "step_us"), "fold %s fitted step_us", f.Group)
	}
	s, ok := res.CrossValidated.SummaryOf("e2e_mean")
	require.True(t, ok)
	require.Equal(t, 3, s.Experiments)
	require.Contains(t, res.Ratio, "e2e_mean")
}

func TestCrossValidateErrors(t *testing.T) {
	setups := cvSetups(t)
	start := BuiltinCoeffs(setups[0])
	tests := []struct {
		name   string
		setups []*BenchSetup
		by     CVGroup
		want   string
	}{
		{"one model", setups, CVByModel, "at least two models, to fit on the others while one is held out; the 3 given all run llama-3.1-8b"},
		{"one experiment", setups[:1], CVByExperiment, "at least two experiments"},
		{"unknown grouping", setups, "gpu", `"gpu" is not a cross-validation grouping; use model`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CrossValidate(context.Background(), tt.setups, start, []string{"step_us"}, 3, tt.by)
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err := ParseCVGroup("models")
	require.ErrorContains(t, err, "use model (leave one model out) or experiment")
}
