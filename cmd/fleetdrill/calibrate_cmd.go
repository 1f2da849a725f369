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
)

func newCalibrateCmd() *cobra.Command {
	var (
		out, requests, gpu, model string
		tp, dp, maxSeqs, chunk    int
		evals                     int
		benchmarks                []string
		start, free, cv, jsonPath string
		physics                   bool
	)
	cmd := &cobra.Command{
		Use:   "calibrate RUN_DIR",
		Short: "Fit the twin's step-time profile to a measured serving run",
		Long: `Fit the twin's step-time profile (step base, per sequence, per prefill token, per KV token)
to a measured vLLM run: a directory with meta.json, requests.jsonl and timeseries.csv
(the layout of shared/profiles/vllm_measured_llmservingsim). The linear least-squares fit
over decode and prefill intervals is refined by replaying the run through the twin.

With --requests FILE, calibrate from a generic CSV or JSONL of measured requests instead
(arrival, input_tokens, output_tokens, ttft, e2e in seconds; optional queue_wait), with the
engine described by --gpu, --model, --tp, --dp, --max-seqs and --max-batched-tokens.

With --benchmark FILE|DIR (repeatable), fit the coefficients of the physical step-time model
(docs/profiles.md) jointly to published aggregate results instead: benchmark experiment files
(docs/fidelity.md gives the format), each replayed through the twin for every candidate. All
experiments must run on one GPU family; --out writes the coefficients for fidelity --profile
and a scenario pool's coefficients key.

With --benchmark and --cv model|experiment, cross-validate the fit as well: once per model
(its runs at every TP degree and workload together) or per experiment, fit on all the other
experiments and predict the held-out ones, then print the in-sample and cross-validated median
|error| per metric side by side. --json writes every fold, both scores and their ratio; --out
writes the fit on all experiments with the cross-validated figures. Each fold costs a fit: expect
(groups + 1) × --refine-evals replays.`,
		Example: `  fleetdrill calibrate ../shared/profiles/vllm_measured_llmservingsim/RTXPRO6000_Llama-3.1-8B --out pro6000-8b.yaml
  fleetdrill calibrate --requests gateway.csv --gpu RTXPRO6000 --model meta-llama/Llama-3.1-8B --max-seqs 128 --out my.yaml
  fleetdrill calibrate --benchmark internal/benchmark/testdata/simtoreal --out hopper.yaml
  fleetdrill calibrate --benchmark internal/benchmark/testdata/simtoreal --cv model --json cv.json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(benchmarks) > 0 {
				if len(args) > 0 || requests != "" {
					return &exitError{code: exitInvalid, err: fmt.Errorf("give --benchmark, RUN_DIR or --requests FILE, one of them")}
				}
				if physics {
					return &exitError{code: exitInvalid, err: fmt.Errorf("--physics: --benchmark always fits the physical model; leave --physics out")}
				}
				if cv != "" {
					by, err := calibrate.ParseCVGroup(cv)
					if err != nil {
						return &exitError{code: exitInvalid, err: fmt.Errorf("--cv: %w", err)}
					}
					return crossValidateBenchmarks(cmd, benchmarks, start, free, evals, by, out, jsonPath)
				}
				if jsonPath != "" {
					return &exitError{code: exitInvalid, err: fmt.Errorf("--json writes a cross-validation: add --cv model or --cv experiment")}
				}
				return calibrateBenchmarks(cmd, benchmarks, start, free, evals, out)
			}
			if cv != "" || jsonPath != "" {
				return &exitError{code: exitInvalid, err: fmt.Errorf("--cv and --json cross-validate a benchmark fit: use them with --benchmark")}
			}
			if !physics && (start != "" || free != "") {
				return &exitError{code: exitInvalid, err: fmt.Errorf("--start and --free set the physical model's coefficients: use them with --benchmark or --physics")}
			}
			var run *calibrate.Run
			var err error
			switch {
			case requests != "" && len(args) == 0:
				run, err = calibrate.LoadRequests(requests, calibrate.Engine{GPU: gpu, Model: model, TP: tp, DP: dp,
					MaxSeqs: maxSeqs, MaxBatchedTokens: chunk})
			case requests == "" && len(args) == 1:
				run, err = calibrate.LoadRun(args[0])
			default:
				err = fmt.Errorf("give RUN_DIR or --requests FILE, not both or neither")
			}
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			if physics {
				return calibratePhysicsRun(cmd, run, start, free, evals, out)
			}
			pf, fit, err := calibrateRun(cmd, run, evals)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			w := cmd.OutOrStdout()
			p := pf.Profile
			fmt.Fprintf(w, "calibrated %s: %d requests, %d decode and %d prefill intervals\n", run.Name, len(run.Requests), fit.DecodeRows, fit.PrefillRows)
			fmt.Fprintf(w, "  step_base_us %.1f  per_seq_us %.3f  per_prefill_token_us %.4f  per_kv_token_us %.5f  max_batched_tokens %d  kv_tokens %d\n",
				p.StepBaseUS, p.PerSeqUS, p.PerPrefillTokenUS, p.PerKVTokenUS, p.MaxBatchedTokens, p.KVTokens)
			fmt.Fprintf(w, "  linear fit residuals (relative): decode RMS %.3f, median %.3f; prefill RMS %.3f, median %.3f\n",
				fit.DecodeRMSRel, fit.DecodeMedianRel, fit.PrefillRMSRel, fit.PrefillMedianRel)
			fmt.Fprintf(w, "  in-sample replay: end-to-end p50/p95 within %.1f%%\n", 100*pf.Fit.InSampleE2EMaxErr)
			if out != "" {
				if err := calibrate.WriteProfileFile(out, pf); err != nil {
					return &exitError{code: exitInvalid, err: fmt.Errorf("--out: %w", err)}
				}
				fmt.Fprintf(w, "wrote %s\n", out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "write the profile to `FILE` (YAML)")
	f.StringVar(&requests, "requests", "", "calibrate from a generic CSV/JSONL of measured requests")
	f.StringVar(&gpu, "gpu", "", "with --requests: the GPU, a name or alias in twin/latency/gpus.go (e.g. RTXPRO6000, H100, A100-80GB)")
	f.StringVar(&model, "model", "", "with --requests: the model, the Hugging Face name of a config in twin/latency/models (e.g. meta-llama/Llama-3.1-8B, Qwen/Qwen3-32B) or the path to its config.json")
	f.IntVar(&tp, "tp", 1, "with --requests: tensor-parallel degree")
	f.IntVar(&dp, "dp", 1, "with --requests: data-parallel replicas")
	f.IntVar(&maxSeqs, "max-seqs", 256, "with --requests: the engine's max_num_seqs")
	f.IntVar(&chunk, "max-batched-tokens", 2048, "with --requests: the engine's max_num_batched_tokens")
	f.IntVar(&evals, "refine-evals", 150, "replays the refining fit may use (0: linear fit only; with --benchmark, replays of the whole set)")
	f.StringArrayVar(&benchmarks, "benchmark", nil, "fit the physical model to benchmark experiment `FILE`s or directories of them (repeatable)")
	f.StringVar(&start, "start", "", "with --benchmark or --physics: start from the coefficients in `FILE`, or neutral (every in-engine factor 1, round overheads: fitted on nothing; --cv starts there) (default: the built-in ones)")
	f.StringVar(&free, "free", "", "with --benchmark or --physics: fit only these coefficients, comma-separated (e.g. request_us,kv_eff; default: all with --benchmark, the device's efficiencies and overheads with --physics)")
	f.StringVar(&cv, "cv", "", "with --benchmark: also cross-validate the fit, holding out one `GROUP` at a time: model or experiment")
	f.StringVar(&jsonPath, "json", "", "with --cv: write the cross-validation (folds, in-sample and cross-validated scores) to `FILE` (JSON)")
	f.BoolVar(&physics, "physics", false, "fit the physical model's coefficients to RUN_DIR (a device's efficiencies and overheads) instead of a linear profile")
	return cmd
}

// calibrateRun fits, refines and checks a profile in-sample.
func calibrateRun(cmd *cobra.Command, run *calibrate.Run, evals int) (*calibrate.ProfileFile, *calibrate.Fit, error) {
	fit, err := calibrate.FitProfile(run)
	if err != nil {
		return nil, nil, err
	}
	prof := fit.Profile
	method := "linear least squares over decode and prefill intervals (gonum QR, non-negative active set)"
	var loss float64
	if evals > 0 {
		if prof, loss, err = calibrate.Refine(cmd.Context(), run, fit.Profile, evals); err != nil {
			return nil, nil, err
		}
		method += ", refined by replay (gonum Nelder-Mead on per-request log errors)"
	}
	fid, err := calibrate.Replay(cmd.Context(), run, prof)
	if err != nil {
		return nil, nil, err
	}
	e := run.Engine
	kvSource := "measured (num_gpu_blocks × block_size)"
	if prof.KVTokens == 0 {
		// Not recorded by the run: derive it, so the profile carries the
		// engine's capacity either way.
		if pl, err := calibrate.Resolve(e); err == nil {
			prof.KVTokens = pl.KVTokens()
			kvSource = "derived from memory (docs/fidelity.md)"
		}
	}
	pf := &calibrate.ProfileFile{
		Profile: calibrate.ProfileYAML(prof),
		CalibratedOn: calibrate.Calibration{Run: run.Name, GPU: e.GPU, Model: e.Model, TP: e.TP, DP: e.DP, MaxSeqs: e.MaxSeqs, Vllm: e.Version,
			KVSource: kvSource},
		Fit: calibrate.FitSummary{Method: method, DecodeIntervals: fit.DecodeRows, PrefillIntervals: fit.PrefillRows,
			LinearDecodeRMS: round4(fit.DecodeRMSRel), LinearPrefillRMS: round4(fit.PrefillRMSRel), PinnedAtZero: fit.Pinned,
			ReplayLoss: round4(loss), InSampleE2EMaxErr: round4(fid.MaxE2EError())},
	}
	return pf, fit, nil
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

func newFidelityCmd() *cobra.Command {
	var (
		profile, jsonPath, plotPath string
		maxErr, maxTTFT             float64
		benchmarks                  []string
		sustainable                 bool
	)
	cmd := &cobra.Command{
		Use:   "fidelity (RUN_DIR --profile FILE | --benchmark FILE...)",
		Short: "Replay a measured run through the twin and compare",
		Long: `Replay a measured run's exact arrivals and token counts through the twin with a profile
(from fleetdrill calibrate) and compare predicted with measured TTFT, TPOT, end-to-end
latency and queue wait, per request and at p50/p90/p95/p99, and the running/waiting series.

When the run's GPU, model or parallelism differ from the profile's calibration, the profile
is first transferred to them by the roofline (see docs/fidelity.md): an out-of-sample check.
Exits 1 when --max-error is set and the p50 or p95 end-to-end error exceeds it.

With --benchmark FILE|DIR (repeatable), score the physical model on published benchmark
experiments instead (docs/fidelity.md gives the format): each is replayed through the twin and
every measured stage figure compared. --profile then names a coefficients file (calibrate
--benchmark --out); without it each GPU family's built-in coefficients are used. --json writes,
per experiment, stage and metric, measured, predicted and signed error, and the summary: the
median absolute error per metric and the experiments where the twin backs up though vLLM did not.
--max-error fails (exit 1) when the median |error| of E2E mean, E2E p99 or ITL mean exceeds it or
the twin backs up where vLLM kept up, naming those experiments with their offered rate and the
twin's sustainable rate; --max-ttft-error does the same for TTFT mean. --sustainable finds every
experiment's sustainable rate in the twin (the highest rate, all stages scaled alike, at which
its queue stays bounded) and prints it against the offered rate: about 8 replays an experiment
at the sustainable load, so some 30 times the cost of the scoring.`,
		Example: `  fleetdrill fidelity ../shared/profiles/vllm_measured_llmservingsim/RTX4090_Llama-3.1-8B \
      --profile pro6000-8b.yaml --json fid.json --plot fid.png --max-error 0.15
  fleetdrill fidelity --benchmark internal/benchmark/testdata/simtoreal --json bench.json --max-error 0.08
  fleetdrill fidelity --benchmark internal/benchmark/testdata/simtoreal --sustainable`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(benchmarks) > 0 {
				if len(args) > 0 {
					return &exitError{code: exitInvalid, err: fmt.Errorf("give RUN_DIR or --benchmark, not both")}
				}
				if plotPath != "" {
					return &exitError{code: exitInvalid, err: fmt.Errorf("--plot: a benchmark has no per-request samples to draw; use --json")}
				}
				return fidelityBenchmarks(cmd, benchmarks, profile, jsonPath, maxErr, maxTTFT, sustainable)
			}
			if sustainable {
				return &exitError{code: exitInvalid, err: fmt.Errorf("--sustainable: a measured run has no load stages to scale; use it with --benchmark")}
			}
			if len(args) != 1 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("give RUN_DIR (a measured run) or --benchmark FILE")}
			}
			if profile == "" {
				return &exitError{code: exitInvalid, err: fmt.Errorf("--profile: required; write one with fleetdrill calibrate --out")}
			}
			run, err := calibrate.LoadRun(args[0])
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			var prof calibrate.LatencyProfile
			var how string
			if calibrate.IsCoeffsFile(profile) {
				cf, err := calibrate.ReadCoeffsFile(profile)
				if err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
				if prof, err = calibrate.PhysicsProfile(run, cf.Coefficients); err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
				how = fmt.Sprintf("the physical model with %s (calibrated on %s)", profile, strings.Join(cf.CalibratedOn, ", "))
			} else {
				pf, err := calibrate.ReadProfileFile(profile)
				if err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
				if prof, how, err = profileFor(pf, run); err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
			}
			fid, err := calibrate.Replay(cmd.Context(), run, prof)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "fidelity of the twin on %s (%d requests), profile %s\n\n", run.Name, fid.Requests, how)
			writeFidelity(w, fid)
			if jsonPath != "" {
				b, err := json.MarshalIndent(fid, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
					return &exitError{code: exitInvalid, err: fmt.Errorf("--json: %w", err)}
				}
			}
			if plotPath != "" {
				if err := calibrate.Plot(plotPath, fid); err != nil {
					return &exitError{code: exitInvalid, err: fmt.Errorf("--plot: %w", err)}
				}
			}
			if maxErr > 0 && fid.MaxE2EError() > maxErr {
				return &exitError{code: exitFailed, err: fmt.Errorf("end-to-end p50/p95 error %.1f%% exceeds --max-error %.1f%%",
					100*fid.MaxE2EError(), 100*maxErr)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&profile, "profile", "", "profile `FILE` written by fleetdrill calibrate")
	f.StringVar(&jsonPath, "json", "", "write the comparison to `FILE` (JSON)")
	f.StringVar(&plotPath, "plot", "", "draw CDFs and time series to `FILE` (.png or .svg)")
	f.Float64Var(&maxErr, "max-error", 0, "fail (exit 1) when the p50 or p95 end-to-end relative error exceeds this, e.g. 0.1 (with --benchmark: the median |error| of E2E mean, E2E p99 or ITL mean, or any backlog)")
	f.Float64Var(&maxTTFT, "max-ttft-error", 0, "with --benchmark: fail (exit 1) when the median |error| of TTFT mean exceeds this")
	f.StringArrayVar(&benchmarks, "benchmark", nil, "score the twin on benchmark experiment `FILE`s or directories of them (repeatable)")
	f.BoolVar(&sustainable, "sustainable", false, "with --benchmark: find and print each experiment's sustainable rate in the twin (about 30 times the scoring's cost)")
	return cmd
}

// profileFor returns the profile to replay run with: the file's, on the
// run's own engine limits, transferred when the run is another placement.
func profileFor(pf *calibrate.ProfileFile, run *calibrate.Run) (prof calibrate.LatencyProfile, how string, err error) {
	prof = pf.Latency()
	from, err := calibrate.Resolve(pf.CalibratedOn.Engine())
	if err != nil {
		return prof, "", err
	}
	to, err := calibrate.Resolve(run.Engine)
	if err != nil {
		return prof, "", err
	}
	how = fmt.Sprintf("calibrated on %s (in-sample)", pf.CalibratedOn.Run)
	if !from.Equal(to) {
		prof = calibrate.Transfer(prof, from, to)
		how = fmt.Sprintf("calibrated on %s, transferred from %s/%s to %s/%s (out-of-sample)", pf.CalibratedOn.Run,
			from.GPU.Name, from.Model.Name, to.GPU.Name, to.Model.Name)
	}
	prof.MaxBatchedTokens = run.Engine.MaxBatchedTokens
	prof.KVTokens = run.Engine.KVTokens
	return prof, how, nil
}

func writeFidelity(w io.Writer, fid *calibrate.Fidelity) {
	pct := func(p *float64) string {
		if p == nil {
			return "    n/a"
		}
		return fmt.Sprintf("%+6.1f%%", 100**p)
	}
	fmt.Fprintf(w, "%-11s %-28s %-28s %-36s %s\n", "metric", "measured p50/p95/p99 (s)", "twin p50/p95/p99 (s)", "error p50 / p90 / p95 / p99", "per-request median |error|")
	for _, m := range []string{"ttft", "tpot", "e2e", "queue_wait"} {
		q := fid.Metrics[m]
		fmt.Fprintf(w, "%-11s %-28s %-28s %-36s %.1f%%\n", m,
			fmt.Sprintf("%.4g / %.4g / %.4g", q.Measured.P50, q.Measured.P95, q.Measured.P99),
			fmt.Sprintf("%.4g / %.4g / %.4g", q.Predicted.P50, q.Predicted.P95, q.Predicted.P99),
			fmt.Sprintf("%s %s %s %s", pct(q.RelErr.P50), pct(q.RelErr.P90), pct(q.RelErr.P95), pct(q.RelErr.P99)),
			100*q.PerRequestMedianRelErr)
	}
	fmt.Fprintf(w, "\nend-to-end p50/p95: max |error| %.1f%%\n", 100*fid.MaxE2EError())
}
