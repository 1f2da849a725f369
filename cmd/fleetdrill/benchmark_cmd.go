package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/benchmark"
)

func newBenchmarkCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "benchmark",
		Short: "Build benchmark experiment files from published results",
		Long: `Benchmark experiments (docs/fidelity.md gives the format) are what fleetdrill calibrate
--benchmark fits the physical model to and fleetdrill fidelity --benchmark scores it on.`,
	}
	var kind, into, out string
	imp := &cobra.Command{
		Use:   "import RESULT... --kind vllm-bench-serve|inference-perf --into EXPERIMENT.json",
		Short: "Put a load generator's result files into an experiment's measured figures",
		Long: `Read the result files a load generator wrote and put their latencies into an experiment's
measured_ms: the JSON of vllm bench serve --save-result (one run at one rate: it fills stage 0
and the whole run of a one-stage experiment), or inference-perf's stage_<N>_lifecycle_metrics.json
(stage N) and summary_lifecycle_metrics.json (the whole run). The experiment file describes the
hardware, engine and workload; a result whose load it cannot describe (another rate or arrival
process, a concurrency cap, a ramp-up) is refused. Writes --out, or --into in place.`,
		Example: `  fleetdrill benchmark import result.json --kind vllm-bench-serve --into my-h100-8b.json
  fleetdrill benchmark import reports/stage_0_lifecycle_metrics.json reports/summary_lifecycle_metrics.json \
      --kind inference-perf --into my-run.json --out my-run.measured.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if into == "" {
				return &exitError{code: exitInvalid, err: fmt.Errorf("--into: required: the experiment file the figures go into")}
			}
			e, err := benchmark.Load(into)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			w := cmd.OutOrStdout()
			for _, res := range args {
				stages, err := benchmark.Import(kind, res, e)
				if err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
				fmt.Fprintf(w, "%s: stages %v\n", res, stages)
			}
			dst := out
			if dst == "" {
				dst = into
			}
			if err := e.Write(dst); err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("--out: %w", err)}
			}
			fmt.Fprintf(w, "wrote %s\n", dst)
			return nil
		},
	}
	f := imp.Flags()
	f.StringVar(&kind, "kind", benchmark.KindVLLMBenchServe, "result format: vllm-bench-serve or inference-perf")
	f.StringVar(&into, "into", "", "the experiment `FILE` (JSON) the figures go into")
	f.StringVar(&out, "out", "", "write the experiment to `FILE` instead of --into")
	cmd.AddCommand(imp)
	return cmd
}
