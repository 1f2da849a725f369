package calibrate

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/benchmark"
	"github.com/fleetdrill/fleetdrill/internal/modelfile"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// SetupFromExperiment resolves a benchmark experiment's GPU (the spec
// table) and model (its config.json) into what the replay needs. Errors
// name the experiment's file and what to fix.
func SetupFromExperiment(e *benchmark.Experiment) (*BenchSetup, error) {
	gpu, err := latency.LookupGPU(e.GPU)
	if err != nil {
		return nil, fmt.Errorf("%s: gpu: %w", e.Name, err)
	}
	m, err := modelfile.Load(e.ModelConfigPath())
	if err != nil {
		return nil, fmt.Errorf("%s: model_config: %w", e.Name, err)
	}
	pl := latency.Placement{GPU: gpu, Model: m, TP: max(e.TensorParallel, 1), Precision: e.Precision,
		KVDtype: e.Engine.KVCacheDtype}
	if e.Engine.EnableExpertParallel && m.IsMoE() {
		pl.EP = pl.TP * max(e.DP, 1)
	}
	if err := pl.Normalize(); err != nil {
		return nil, fmt.Errorf("%s: %w", e.Name, err)
	}
	block := e.Engine.BlockSize
	if block <= 0 {
		block = benchmark.DefaultBlockSize
	}
	s := &BenchSetup{Name: e.Name, Placement: pl, DP: max(e.DP, 1), MaxSeqs: e.Engine.MaxNumSeqs,
		MaxBatchedTokens: e.Engine.MaxNumBatchedTokens, KVTokens: e.Engine.TotalKVBlocks * block, BlockSize: block,
		PrefixCaching: e.Engine.PrefixCaching,
		Measured:      map[string]map[string]float64{}}
	seqs, chunk := latency.EngineDefaults(gpu)
	if s.MaxSeqs <= 0 {
		s.MaxSeqs = seqs
	}
	if s.MaxBatchedTokens <= 0 {
		s.MaxBatchedTokens = chunk
	}
	sp := e.Workload.SharedPrefix
	w := BenchWorkload{Constant: e.Workload.Arrivals == benchmark.ArrivalsConstant, SystemLen: sp.SystemPromptLen,
		QuestionLen: sp.QuestionLen, OutputLen: sp.OutputLen, NumPrompts: max(sp.NumUniqueSystemPrompts, 1), Seed: 42}
	if e.Workload.Seed != nil {
		w.Seed = uint64(*e.Workload.Seed)
	}
	for _, st := range e.Workload.Stages {
		w.Stages = append(w.Stages, BenchStage{Rate: st.Rate, Duration: time.Duration(st.DurationS * float64(time.Second))})
	}
	s.Workload = w
	for st, ms := range e.Measured {
		s.Measured[strconv.Itoa(st)] = map[string]float64(ms)
	}
	return s, nil
}

// LoadSetups loads benchmark experiment files (or directories of them).
func LoadSetups(paths ...string) ([]*BenchSetup, error) {
	exps, err := benchmark.LoadAll(paths...)
	if err != nil {
		return nil, err
	}
	var out []*BenchSetup
	for _, e := range exps {
		s, err := SetupFromExperiment(e)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
