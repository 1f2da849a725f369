package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/calibrate"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// goalMetrics are the metrics the benchmark summary leads with: the ones
// the sim-to-real study publishes.
var goalMetrics = []string{"e2e_mean", "e2e_p99", "ttft_mean", "itl_mean"}

// benchFitInput is what calibrate --benchmark fits from: the experiments,
// one GPU family's, and the starting coefficients.
type benchFitInput struct {
	setups []*calibrate.BenchSetup
	family string
	start  latency.Coeffs
	how    string // where start comes from
	free   []string
}

// loadBenchFitInput loads the experiments and the start: --start's file
// ("neutral": latency.NeutralCoeffs), else the built-in coefficients, or, when neutral (a cross-validation),
// latency.NeutralCoeffs: a fold must not start from figures fitted on the
// model it holds out.
func loadBenchFitInput(paths []string, start, free string, neutral bool) (*benchFitInput, error) {
	setups, err := calibrate.LoadSetups(paths...)
	if err != nil {
		return nil, &exitError{code: exitInvalid, err: err}
	}
	family := setups[0].Placement.GPU.Family
	for _, s := range setups[1:] {
		if s.Placement.GPU.Family != family {
			return nil, &exitError{code: exitInvalid, err: fmt.Errorf("--benchmark: %s runs on %s (%s) and %s on %s (%s): coefficients are fitted per GPU family; calibrate each family on its own",
				setups[0].Name, setups[0].Placement.GPU.Name, family, s.Name, s.Placement.GPU.Name, s.Placement.GPU.Family)}
		}
	}
	in := &benchFitInput{setups: setups, family: family}
	in.start, in.how = latency.CoeffsFor(setups[0].Placement.GPU)
	if neutral {
		in.start, in.how = latency.NeutralCoeffs, "the neutral start (kernels as measured, round overheads: fitted on nothing)"
	}
	if start == "neutral" {
		in.start, in.how = latency.NeutralCoeffs, "the neutral start (kernels as measured, round overheads: fitted on nothing)"
	} else if start != "" {
		f, err := calibrate.ReadCoeffsFile(start)
		if err != nil {
			return nil, &exitError{code: exitInvalid, err: fmt.Errorf("--start: %w", err)}
		}
		in.start, in.how = f.Coefficients, start
	}
	if free != "" {
		in.free = strings.Split(free, ",")
	}
	return in, nil
}

// calibrateBenchmarks fits the physical model's coefficients jointly over
// benchmark experiments (`calibrate --benchmark`).
func calibrateBenchmarks(cmd *cobra.Command, paths []string, start, free string, evals int, out string) error {
	in, err := loadBenchFitInput(paths, start, free, false)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "fitting %d experiments (%s family) from %s, %d replays at most\n", len(in.setups), in.family, in.how, evals)
	fitted, loss, err := calibrate.FitCoeffs(cmd.Context(), in.setups, in.start, in.free, evals)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	sc, err := calibrate.ScoreBenchmarks(cmd.Context(), in.setups, &fitted)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	fmt.Fprintf(w, "loss (RMS of log errors over experiments) %.4f\n", loss)
	writeCoeffs(w, fitted)
	fmt.Fprintln(w, "\nin-sample (the experiments it was fitted on):")
	writeBenchSummary(w, sc)
	if out != "" {
		if err := writeBenchCoeffsFile(w, out, in, evals, loss, sc, nil); err != nil {
			return err
		}
	}
	return nil
}

// writeBenchCoeffsFile writes the fit on all experiments (sc scores it
// in-sample) and, when cv is not nil, its cross-validated figures.
func writeBenchCoeffsFile(w io.Writer, out string, in *benchFitInput, evals int, loss float64, sc *calibrate.BenchScore, cv *calibrate.CVResult) error {
	f := &calibrate.CoeffsFile{Family: in.family, Coefficients: roundCoeffs(*sc.Coeffs), Fit: calibrate.CoeffsFit{
		Method:      "Nelder-Mead (gonum) on log coefficients; loss: per experiment the weighted mean of squared log errors of its measured stage figures, then the RMS over experiments",
		Free:        in.free,
		Evaluations: evals, Loss: round4(loss), InSample: map[string]float64{}, BackedUp: sc.BackedUp}}
	for _, s := range in.setups {
		f.CalibratedOn = append(f.CalibratedOn, s.Name)
	}
	for _, s := range sc.Summary {
		f.Fit.InSample[s.Metric] = s.MedianAbs
	}
	if cv != nil {
		f.Fit.CVBy = string(cv.By)
		f.Fit.CrossValidated = map[string]float64{}
		for _, s := range cv.CrossValidated.Summary {
			f.Fit.CrossValidated[s.Metric] = s.MedianAbs
		}
	}
	if err := calibrate.WriteCoeffsFile(out, f); err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("--out: %w", err)}
	}
	fmt.Fprintf(w, "wrote %s\n", out)
	return nil
}

// crossValidateBenchmarks fits the coefficients once per held-out group
// and once on all experiments, and prints the cross-validated figures next
// to the in-sample ones (`calibrate --benchmark --cv`).
func crossValidateBenchmarks(cmd *cobra.Command, paths []string, start, free string, evals int, by calibrate.CVGroup, out, jsonPath string) error {
	in, err := loadBenchFitInput(paths, start, free, true)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "cross-validating the fit by %s over %d experiments (%s family) from %s, %d replays at most per fit\n",
		by, len(in.setups), in.family, in.how, evals)
	res, err := calibrate.CrossValidate(cmd.Context(), in.setups, in.start, in.free, evals, by)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	writeCVFolds(w, res)
	fmt.Fprintf(w, "\nfit on all %d experiments: loss %.4f\n", len(in.setups), res.Loss)
	writeCoeffs(w, res.Coeffs)
	fmt.Fprintln(w)
	writeCVSummary(w, res)
	if jsonPath != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
			return &exitError{code: exitInvalid, err: fmt.Errorf("--json: %w", err)}
		}
		fmt.Fprintf(w, "wrote %s\n", jsonPath)
	}
	if out != "" {
		return writeBenchCoeffsFile(w, out, in, evals, res.Loss, res.InSample, res)
	}
	return nil
}

// writeCVFolds prints, per fold, the group held out and its experiments'
// whole-run E2E and ITL mean errors under the coefficients fitted without
// them.
func writeCVFolds(w io.Writer, res *calibrate.CVResult) {
	errs := map[string]map[string]float64{}
	for _, r := range res.CrossValidated.Rows {
		if r.Stage != "-1" {
			continue
		}
		if errs[r.Experiment] == nil {
			errs[r.Experiment] = map[string]float64{}
		}
		errs[r.Experiment][r.Metric] = r.Error
	}
	fig := func(e, m string) string {
		if v, ok := errs[e][m]; ok {
			return fmt.Sprintf("%+.1f%%", 100*v)
		}
		return "—"
	}
	for k, f := range res.Folds {
		fmt.Fprintf(w, "fold %d/%d, %s held out (fitted on %d, loss %.4f):", k+1, len(res.Folds), f.Group, len(f.FitOn), f.Loss)
		for _, e := range f.HeldOut {
			fmt.Fprintf(w, " %s E2E mean %s ITL mean %s;", e, fig(e, "e2e_mean"), fig(e, "itl_mean"))
		}
		fmt.Fprintln(w)
	}
}

// writeCVSummary prints each metric's in-sample and cross-validated
// median |error| and their ratio.
func writeCVSummary(w io.Writer, res *calibrate.CVResult) {
	fmt.Fprintf(w, "%-10s %-22s %-28s %s\n", "metric", "in-sample median |err|", "cross-validated median |err|", "ratio")
	for _, cv := range res.CrossValidated.Summary {
		in, ok := res.InSample.SummaryOf(cv.Metric)
		if !ok {
			continue
		}
		ratio := "—"
		if r, ok := res.Ratio[cv.Metric]; ok {
			ratio = fmt.Sprintf("%.2f", r)
		}
		fmt.Fprintf(w, "%-10s %-22s %-28s %s\n", cv.Metric, fmt.Sprintf("%.1f%%", 100*in.MedianAbs), fmt.Sprintf("%.1f%%", 100*cv.MedianAbs), ratio)
	}
	fmt.Fprintf(w, "backs up where the engine kept up: in-sample %d, cross-validated %d", res.InSample.BackedUp, res.CrossValidated.BackedUp)
	if len(res.CrossValidated.BackedUpNames) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(res.CrossValidated.BackedUpNames, ", "))
	}
	fmt.Fprintln(w)
}

func roundCoeffs(c latency.Coeffs) latency.Coeffs {
	for _, f := range c.Fields() {
		*f.P = roundSig(*f.P, 5)
	}
	return c
}

// roundSig rounds x to n significant digits.
func roundSig(x float64, n int) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	p := math.Pow(10, float64(n)-math.Ceil(math.Log10(math.Abs(x))))
	return math.Round(x*p) / p
}

func writeCoeffs(w io.Writer, c latency.Coeffs) {
	var parts []string
	for _, f := range c.Fields() {
		parts = append(parts, fmt.Sprintf("%s %.4g", f.Name, *f.P))
	}
	fmt.Fprintf(w, "coefficients: %s\n", strings.Join(parts, ", "))
}

// fidelityBenchmarks scores the twin on benchmark experiments
// (`fidelity --benchmark`).
func fidelityBenchmarks(cmd *cobra.Command, paths []string, profile, jsonPath string, maxErr, maxTTFT float64, sustainable bool) error {
	setups, err := calibrate.LoadSetups(paths...)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	var c *latency.Coeffs
	how := "the built-in coefficients of each experiment's GPU family"
	if profile != "" {
		f, err := calibrate.ReadCoeffsFile(profile)
		if err != nil {
			return &exitError{code: exitInvalid, err: fmt.Errorf("--profile: %w", err)}
		}
		c, how = &f.Coefficients, profile
	}
	sc, err := calibrate.ScoreBenchmarks(cmd.Context(), setups, c)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	// Without --sustainable only the experiments that back up at their own
	// load are searched (below 1×, cheap): the failure rule needs no more.
	if err := sc.AddSustainable(cmd.Context(), setups, sustainable); err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "fidelity of the twin on %d benchmark experiments, with %s\n\n", len(setups), how)
	writeBenchRows(w, sc)
	fmt.Fprintln(w)
	writeBenchSummary(w, sc)
	if sustainable {
		fmt.Fprintln(w)
		writeBenchSustainable(w, sc)
	}
	if jsonPath != "" {
		b, err := json.MarshalIndent(sc, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
			return &exitError{code: exitInvalid, err: fmt.Errorf("--json: %w", err)}
		}
	}
	var fails []string
	if maxErr > 0 {
		for _, m := range []string{"e2e_mean", "e2e_p99", "itl_mean"} {
			if s, ok := sc.SummaryOf(m); ok && s.MedianAbs > maxErr {
				fails = append(fails, fmt.Sprintf("%s median |error| %.1f%% > %.1f%%", m, 100*s.MedianAbs, 100*maxErr))
			}
		}
		if names := sc.Collapsed(); len(names) > 0 {
			fails = append(fails, fmt.Sprintf("the twin backs up on %d experiments the engine kept up with: %s", len(names), collapsedRates(sc, names)))
		}
	}
	if maxTTFT > 0 {
		if s, ok := sc.SummaryOf("ttft_mean"); ok && s.MedianAbs > maxTTFT {
			fails = append(fails, fmt.Sprintf("ttft_mean median |error| %.1f%% > %.1f%%", 100*s.MedianAbs, 100*maxTTFT))
		}
	}
	if len(fails) > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s", strings.Join(fails, "; "))}
	}
	return nil
}

// writeBenchRows prints each experiment's whole-run figures for the goal
// metrics: measured, twin, signed error.
func writeBenchRows(w io.Writer, sc *calibrate.BenchScore) {
	fmt.Fprintf(w, "%-48s", "experiment (whole run; ms: measured → twin, error)")
	for _, m := range goalMetrics {
		fmt.Fprintf(w, " %-27s", m)
	}
	fmt.Fprintln(w)
	byExp := map[string]map[string]calibrate.BenchRow{}
	var order []string
	for _, r := range sc.Rows {
		if r.Stage != "-1" {
			continue
		}
		if byExp[r.Experiment] == nil {
			byExp[r.Experiment] = map[string]calibrate.BenchRow{}
			order = append(order, r.Experiment)
		}
		byExp[r.Experiment][r.Metric] = r
	}
	for _, e := range order {
		name := e
		if len(name) > 47 {
			name = name[:46] + "…"
		}
		fmt.Fprintf(w, "%-48s", name)
		for _, m := range goalMetrics {
			r, ok := byExp[e][m]
			if !ok {
				fmt.Fprintf(w, " %-27s", "—")
				continue
			}
			fmt.Fprintf(w, " %-27s", fmt.Sprintf("%s → %s %+.1f%%", msFig(r.Measured), msFig(r.Predicted), 100*r.Error))
		}
		fmt.Fprintln(w)
	}
}

func writeBenchSummary(w io.Writer, sc *calibrate.BenchScore) {
	fmt.Fprintf(w, "%-10s %-12s %-18s %-14s %s\n", "metric", "experiments", "median |error|", "mean error", "worst")
	for _, s := range sc.Summary {
		fmt.Fprintf(w, "%-10s %-12d %-18s %-14s %.1f%% (%s)\n", s.Metric, s.Experiments,
			fmt.Sprintf("%.1f%%", 100*s.MedianAbs), fmt.Sprintf("%+.1f%%", 100*s.MeanSigned), 100*s.Worst, s.WorstName)
	}
	names := sc.Collapsed()
	fmt.Fprintf(w, "backs up where the engine kept up: %d", len(names))
	if len(names) > 0 {
		fmt.Fprintf(w, " (%s)", collapsedRates(sc, names))
	}
	fmt.Fprintln(w)
}

// collapsedRates names experiments with their offered rate and the twin's
// sustainable rate, where it was searched.
func collapsedRates(sc *calibrate.BenchScore, names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n
		for _, b := range sc.Sustainable {
			if b.Experiment == n {
				parts[i] += fmt.Sprintf(" (offered %s req/s, twin sustains %s)", rateFig(b.Offered), sustainableFig(b))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// writeBenchSustainable prints each experiment's offered rate against the
// twin's sustainable rate; "✗" marks where the twin backs up though the
// engine kept up.
func writeBenchSustainable(w io.Writer, sc *calibrate.BenchScore) {
	fmt.Fprintf(w, "%-48s %-14s %-24s %-10s %s\n", "experiment", "offered req/s", "twin sustainable req/s", "headroom", "measured kept up")
	for _, b := range sc.Sustainable {
		name := b.Experiment
		if len(name) > 47 {
			name = name[:46] + "…"
		}
		head := fmt.Sprintf("%.2f×", b.Headroom)
		if b.AtLeast {
			head = "≥ " + head
		}
		kept := "no"
		if b.MeasuredKeptUp {
			kept = "yes"
		}
		if b.Collapses {
			kept += "  ✗ the twin backs up"
		}
		fmt.Fprintf(w, "%-48s %-14s %-24s %-10s %s\n", name, rateFig(b.Offered), sustainableFig(b), head, kept)
	}
}

func sustainableFig(b calibrate.BenchSustainable) string {
	if b.AtLeast {
		return "≥ " + rateFig(b.Sustainable)
	}
	if b.Sustainable == 0 {
		return fmt.Sprintf("< %s", rateFig(b.Offered*calibrate.SustainableFloor))
	}
	return rateFig(b.Sustainable)
}

// rateFig prints a rate with three significant figures.
func rateFig(x float64) string { return fmt.Sprintf("%.3g", x) }

// msFig prints milliseconds with three significant figures, and whole
// milliseconds from 1000 up (no exponents).
func msFig(x float64) string {
	if math.Abs(x) >= 1000 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.3g", x)
}

// physicsFree is what one dense measured run identifies: the device's
// efficiencies and overheads (not tensor-parallel or MoE terms).
const physicsFree = "compute_eff,weight_eff,kv_eff,step_us,seq_us"

// calibratePhysicsRun fits the physical model's coefficients to one
// measured run (`calibrate RUN_DIR --physics`).
func calibratePhysicsRun(cmd *cobra.Command, run *calibrate.Run, start, free string, evals int, out string) error {
	pl, err := calibrate.Resolve(run.Engine)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	c, how := latency.CoeffsFor(pl.GPU)
	if start != "" {
		f, err := calibrate.ReadCoeffsFile(start)
		if err != nil {
			return &exitError{code: exitInvalid, err: fmt.Errorf("--start: %w", err)}
		}
		c, how = f.Coefficients, start
	}
	if free == "" {
		free = physicsFree
	}
	freeList := strings.Split(free, ",")
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "fitting %s on %s (%s family) from %s, %d replays at most\n", free, run.Name, pl.GPU.Family, how, evals)
	fitted, loss, err := calibrate.RefineCoeffs(cmd.Context(), run, c, freeList, evals)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	prof, err := calibrate.PhysicsProfile(run, fitted)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	fid, err := calibrate.Replay(cmd.Context(), run, prof)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	writeCoeffs(w, fitted)
	fmt.Fprintf(w, "  in-sample replay: end-to-end p50/p95 within %.1f%% (loss %.4f)\n", 100*fid.MaxE2EError(), loss)
	if out != "" {
		f := &calibrate.CoeffsFile{Family: pl.GPU.Family, Engine: "vllm " + run.Engine.Version, Coefficients: roundCoeffs(fitted),
			CalibratedOn: []string{run.Name}, Fit: calibrate.CoeffsFit{
				Method:      "Nelder-Mead (gonum) on log coefficients; loss: mean absolute log-ratio of per-request E2E and TPOT (plus half of TTFT) when the run is replayed through the twin",
				Free:        freeList,
				Evaluations: evals, Loss: round4(loss), InSample: map[string]float64{"e2e_p50_p95_max": round4(fid.MaxE2EError())}}}
		if err := calibrate.WriteCoeffsFile(out, f); err != nil {
			return &exitError{code: exitInvalid, err: fmt.Errorf("--out: %w", err)}
		}
		fmt.Fprintf(w, "wrote %s\n", out)
	}
	return nil
}
