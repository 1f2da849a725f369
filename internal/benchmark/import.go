package benchmark

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// The kinds of result file Import reads.
const (
	KindVLLMBenchServe = "vllm-bench-serve" // vllm bench serve --save-result
	KindInferencePerf  = "inference-perf"   // stage_<N>_ or summary_lifecycle_metrics.json
)

// inference-perf names its reports by stage; the name is the only place a
// stage report says which stage it is.
var (
	inferencePerfStage   = regexp.MustCompile(`^stage_([0-9]+)_lifecycle_metrics\.json$`)
	inferencePerfSummary = "summary_lifecycle_metrics.json"
)

// Import reads the result file at resultPath (kind KindVLLMBenchServe or
// KindInferencePerf) and puts its figures into base.Measured, replacing
// what was there for that stage. It returns the stage keys it filled:
//
//   - a vllm bench serve result is one run at one rate: base must have one
//     stage, and the figures fill stage 0 and the whole run (-1), which are
//     the same run;
//   - an inference-perf stage report fills the stage its file name gives
//     (stage_<N>_lifecycle_metrics.json), and the summary report fills the
//     whole run; with a one-stage base either fills both.
//
// It refuses a result whose load base cannot describe (a rate or arrival
// process other than the stage's, a concurrency cap, a ramp-up) and leaves
// base unchanged on any error.
func Import(kind, resultPath string, base *Experiment) ([]int, error) {
	if base == nil {
		return nil, fmt.Errorf("%s: no base experiment to import into", resultPath)
	}
	if err := base.Validate(); err != nil {
		return nil, fmt.Errorf("base experiment %s:\n%w", base.Name, err)
	}
	data, err := os.ReadFile(resultPath)
	if err != nil {
		return nil, err
	}
	var (
		m      Metrics
		info   StageInfo
		stages []int
	)
	single := len(base.Workload.Stages) == 1
	switch kind {
	case KindVLLMBenchServe:
		m, info, err = FromVLLMBenchServe(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", resultPath, err)
		}
		if info.RampUp != "" {
			return nil, fmt.Errorf("%s: ramp_up_strategy %s: a ramped rate is not a stage of constant rate; import runs at a fixed --request-rate",
				resultPath, info.RampUp)
		}
		if info.Arrivals == "" {
			// inference-perf does not record its arrival process; vLLM
			// does, and "" there means gamma-distributed gaps.
			return nil, fmt.Errorf("%s: burstiness other than 1 (Poisson) or inf (constant) gives gamma-distributed arrivals, "+
				"which an experiment cannot describe", resultPath)
		}
		if !single {
			return nil, fmt.Errorf("%s: a vllm bench serve run is one stage, but %s has %d (workload.stages); import into a one-stage experiment",
				resultPath, base.Name, len(base.Workload.Stages))
		}
		stages = []int{0, WholeRun}
	case KindInferencePerf:
		m, info, err = FromInferencePerf(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", resultPath, err)
		}
		stage, err := inferencePerfStageOf(resultPath, info, len(base.Workload.Stages))
		if err != nil {
			return nil, err
		}
		stages = []int{stage}
		if single {
			stages = []int{0, WholeRun}
		}
	default:
		return nil, fmt.Errorf("%s: unknown result kind %q; want %s or %s", resultPath, kind, KindVLLMBenchServe, KindInferencePerf)
	}
	if err := checkLoad(resultPath, info, base, stages[0]); err != nil {
		return nil, err
	}

	measured := make(Measured, len(base.Measured)+len(stages))
	maps.Copy(measured, base.Measured)
	for _, s := range stages {
		measured[s] = maps.Clone(m)
	}
	candidate := *base
	candidate.Measured = measured
	if err := candidate.Validate(); err != nil {
		return nil, fmt.Errorf("%s: the imported figures do not fit %s:\n%w", resultPath, base.Name, err)
	}
	base.Measured = measured
	return stages, nil
}

// inferencePerfStageOf is the stage an inference-perf report covers, from
// its file name, checked against what the report itself says.
func inferencePerfStageOf(path string, info StageInfo, nStages int) (int, error) {
	name := filepath.Base(path)
	if sub := inferencePerfStage.FindStringSubmatch(name); sub != nil {
		stage, err := strconv.Atoi(sub[1])
		if err != nil || stage >= nStages {
			return 0, fmt.Errorf("%s: stage %s, but the experiment has %d stages (workload.stages)", path, sub[1], nStages)
		}
		if info.Summary {
			return 0, fmt.Errorf("%s: named as a stage report, but its load_summary has no requested_rate, as a summary report would", path)
		}
		return stage, nil
	}
	if name == inferencePerfSummary || info.Summary {
		return WholeRun, nil
	}
	if nStages == 1 {
		return 0, nil
	}
	return 0, fmt.Errorf("%s: cannot tell which stage this report covers; keep inference-perf's names "+
		"stage_<N>_lifecycle_metrics.json and %s", path, inferencePerfSummary)
}

// checkLoad refuses a result whose load differs from the experiment's: the
// figures would be scored against a load that did not produce them.
func checkLoad(path string, info StageInfo, base *Experiment, stage int) error {
	if info.MaxConcurrency > 0 {
		return fmt.Errorf("%s: the run capped requests in flight at %d; an experiment's load is open-loop "+
			"(arrivals at a rate), so these figures cannot be scored against one", path, info.MaxConcurrency)
	}
	if math.IsInf(info.Rate, 1) {
		return fmt.Errorf("%s: request_rate inf sends every request at once; an experiment's stages need a finite rate", path)
	}
	if info.Arrivals != "" && info.Arrivals != base.Workload.Arrivals {
		return fmt.Errorf("%s: arrivals were %s, but %s says workload.arrivals %s; fix one of them",
			path, info.Arrivals, base.Name, base.Workload.Arrivals)
	}
	if stage == WholeRun || info.Rate == 0 {
		return nil
	}
	want := base.Workload.Stages[stage].Rate
	if math.Abs(info.Rate-want) > 1e-9*math.Max(1, want) {
		return fmt.Errorf("%s: the run's rate was %s req/s, but %s has workload.stages[%d].rate %s; fix one of them",
			path, formatFloat(info.Rate), base.Name, stage, formatFloat(want))
	}
	return nil
}
