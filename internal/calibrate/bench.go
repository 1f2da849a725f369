package calibrate

// This file replays published benchmark experiments (aggregate results of
// a load generator against one engine) through the twin's engine model with
// the physical step-time model, and scores the prediction per stage and
// metric. It is what `fleetdrill calibrate --benchmark` fits to and what
// `fleetdrill fidelity --benchmark` reports.

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/fleetdrill/fleetdrill/sim/stats"
	"github.com/fleetdrill/fleetdrill/twin/engine"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// BenchStage is one load stage: open-loop arrivals at Rate per second for
// Duration.
type BenchStage struct {
	Rate     float64
	Duration time.Duration
}

// BenchWorkload is a shared-prefix load generator's profile (inference-perf's
// shared_prefix data generator): NumPrompts system prompts of SystemLen
// tokens, each request one of them followed by QuestionLen tokens of its
// own, asking for OutputLen tokens.
type BenchWorkload struct {
	Constant    bool // evenly spaced arrivals; false is Poisson
	Stages      []BenchStage
	SystemLen   int
	QuestionLen int
	OutputLen   int
	NumPrompts  int
	Seed        uint64
}

// BenchSetup is one experiment as the replay needs it: the placement, the
// engine's limits, the workload and what was measured.
type BenchSetup struct {
	Name             string
	Placement        latency.Placement
	DP               int // engine replicas behind the load generator
	MaxSeqs          int
	MaxBatchedTokens int
	KVTokens         int // per replica; 0 derives it from memory
	BlockSize        int
	PrefixCaching    bool
	Workload         BenchWorkload
	// Measured figures in ms: stage index ("-1" the whole run) → metric
	// (ttft_mean, e2e_p99, itl_mean, …).
	Measured map[string]map[string]float64
}

// BenchMetrics are the metrics a replay predicts, in the order reports
// list them.
var BenchMetrics = []string{"ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99", "itl_mean",
	"e2e_mean", "e2e_p50", "e2e_p90", "e2e_p99", "tpot_mean"}

// BenchPrediction is the twin's figures for one experiment.
type BenchPrediction struct {
	// Stages: stage index ("-1" the whole run) → metric → ms.
	Stages map[string]map[string]float64
	// BackedUp lists the stages at whose end the twin's queue was long and
	// still growing: more requests waiting for the engine than arrive in
	// one second, and more than at the stage's midpoint.
	BackedUp []string
	// Requests generated, and per stage ("-1" all) how many the figures
	// cover: every request is counted once, in the stage it arrived in.
	Requests int
	Counts   map[string]int
}

// benchReq is one generated request and what the engine made of it.
type benchReq struct {
	seq         engine.Seq
	arrived     time.Duration // at the client
	stage       int
	first, done time.Duration
	finished    bool
}

type benchSink struct {
	reqs  []benchReq
	twice int // Done reported again for a finished request: a bug
}

func (b *benchSink) FirstToken(s *engine.Seq, at time.Duration) { b.reqs[s.Tag].first = at }
func (b *benchSink) Done(s *engine.Seq, at time.Duration) {
	r := &b.reqs[s.Tag]
	if r.finished {
		b.twice++
	}
	r.done, r.finished = at, true
}
func (b *benchSink) Preempted(*engine.Seq, time.Duration) {}
func (b *benchSink) Dropped(*engine.Seq, time.Duration)   {}

// generate draws the experiment's requests: arrivals per stage (seeded, so
// a replay is deterministic), each request's system prompt chosen uniformly.
func (w BenchWorkload) generate(blockSize int) []benchReq {
	rng := rand.New(rand.NewPCG(w.Seed, 0x6265_6e63_6800))
	var reqs []benchReq
	start := time.Duration(0)
	sys := w.SystemLen
	prompt := sys + w.QuestionLen
	for si, st := range w.Stages {
		end := start + st.Duration
		t := start
		for {
			gap := 1 / st.Rate
			if !w.Constant {
				gap = rng.ExpFloat64() / st.Rate
			}
			t += time.Duration(gap * float64(time.Second))
			if t >= end {
				break
			}
			g := uint64(rng.IntN(max(w.NumPrompts, 1)))
			id := uint64(len(reqs))
			var blocks []uint64
			if blockSize > 0 {
				blocks = make([]uint64, prompt/blockSize)
				for j := range blocks {
					if (j+1)*blockSize <= sys {
						blocks[j] = g<<32 | uint64(j) // the system prompt's blocks: shared
					} else {
						blocks[j] = 1<<63 | id<<20 | uint64(j) // the question's: this request's own
					}
				}
			}
			reqs = append(reqs, benchReq{arrived: t, stage: si,
				seq: engine.Seq{Tag: len(reqs), Prompt: max(prompt, 1), Output: max(w.OutputLen, 1), Blocks: blocks}})
		}
		start = end
	}
	return reqs
}

// ReplayBenchmark replays one experiment through the twin's engine with the
// physical step-time model built from coefficients c.
func ReplayBenchmark(s *BenchSetup, c latency.Coeffs) (*BenchPrediction, error) {
	return replayBenchmark(s, c, false)
}

// backsUp is the twin's backlog criterion for a stage: at its end more
// requests wait for the engine than arrive in a second, and more than at
// its midpoint (a queue that is long and still growing).
func backsUp(st BenchStage, mid, end int) bool {
	return float64(end) > st.Rate && end > mid
}

// replayBenchmark is ReplayBenchmark; with stopAtBackup it gives up at the
// first stage end where the twin backs up and returns a prediction with
// only BackedUp and Requests set: a search for the sustainable rate needs
// no more, and draining an overloaded queue costs as much as filling it.
func replayBenchmark(s *BenchSetup, c latency.Coeffs, stopAtBackup bool) (*BenchPrediction, error) {
	ph, err := latency.NewPhysics(s.Placement, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	kv := s.KVTokens
	if kv <= 0 {
		kv = s.Placement.KVTokens(0.9)
	}
	if kv < 1 {
		return nil, fmt.Errorf("%s: the weights of %s leave no KV cache on %d × %s", s.Name, s.Placement.Model.Name, s.Placement.TP, s.Placement.GPU.Name)
	}
	block := s.BlockSize
	if block <= 0 {
		block = 16
	}
	prof := latency.Profile{Physics: ph, MaxBatchedTokens: max(s.MaxBatchedTokens, 1), MinStep: 100, AsyncScheduling: true}
	dp := max(s.DP, 1)
	reps := make([]*engine.Replica, dp)
	for i := range reps {
		if reps[i], err = engine.New(engine.Config{Profile: prof, MaxSeqs: max(s.MaxSeqs, 1), KVTokens: int64(kv),
			PrefixCaching: s.PrefixCaching, BlockTokens: block}); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	bs := 0
	if s.PrefixCaching {
		bs = block
	}
	sink := &benchSink{reqs: s.Workload.generate(bs)}
	reqs := sink.reqs
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%s: the workload generates no requests (stages %+v)", s.Name, s.Workload.Stages)
	}
	for i := range reqs {
		if !reps[0].Fits(reqs[i].seq.Prompt, reqs[i].seq.Output) {
			return nil, fmt.Errorf("%s: a request of %d+%d tokens does not fit the KV cache of %d tokens", s.Name, reqs[i].seq.Prompt, reqs[i].seq.Output, kv)
		}
	}
	overhead := latency.US(ph.RequestOverhead())

	// Stage ends and midpoints, to see whether the queue is growing.
	var marks []time.Duration
	var t0 time.Duration
	for _, st := range s.Workload.Stages {
		marks = append(marks, t0+st.Duration/2, t0+st.Duration)
		t0 += st.Duration
	}
	waitingAt := make([]int, len(marks))
	mi := 0
	waiting := func(now time.Duration) int {
		n := 0
		for i := range reqs {
			r := &reqs[i]
			if r.arrived+overhead <= now && !r.seq.Admitted {
				n++
			}
		}
		return n
	}

	next := 0 // next request to arrive at the engine
	for {
		// The earliest of: the next arrival, the next replica event.
		at, kind := time.Duration(math.MaxInt64), -1
		if next < len(reqs) {
			at, kind = reqs[next].arrived+overhead, dp
		}
		for i, r := range reps {
			if t, busy := r.Next(); busy && t < at {
				at, kind = t, i
			}
		}
		for mi < len(marks) && (kind < 0 || marks[mi] <= at) {
			waitingAt[mi] = waiting(marks[mi])
			if si := mi / 2; stopAtBackup && mi%2 == 1 && backsUp(s.Workload.Stages[si], waitingAt[mi-1], waitingAt[mi]) {
				return &BenchPrediction{BackedUp: []string{fmt.Sprint(si)}, Requests: len(reqs)}, nil
			}
			mi++
		}
		if kind < 0 {
			break
		}
		if kind == dp {
			r := &reqs[next]
			best := 0
			for i := 1; i < dp; i++ {
				if reps[i].Load() < reps[best].Load() {
					best = i
				}
			}
			reps[best].Add(at, &r.seq)
			next++
			continue
		}
		reps[kind].Advance(at, sink)
	}
	for i := range reqs {
		if !reqs[i].finished {
			return nil, fmt.Errorf("%s: request %d never finished in the replay", s.Name, i)
		}
	}
	if sink.twice > 0 {
		return nil, fmt.Errorf("%s: %d requests finished twice in the replay", s.Name, sink.twice)
	}

	p := &BenchPrediction{Stages: map[string]map[string]float64{}, Requests: len(reqs), Counts: map[string]int{}}
	for i := range reqs {
		p.Counts[strconv.Itoa(reqs[i].stage)]++
		p.Counts["-1"]++
	}
	for si := -1; si < len(s.Workload.Stages); si++ {
		p.Stages[fmt.Sprint(si)] = stageMetrics(reqs, si)
	}
	for si, st := range s.Workload.Stages {
		if backsUp(st, waitingAt[2*si], waitingAt[2*si+1]) {
			p.BackedUp = append(p.BackedUp, fmt.Sprint(si))
		}
	}
	return p, nil
}

// stageMetrics computes a stage's figures (all stages for -1) in ms: TTFT
// and E2E from the client's send time, ITL as the mean gap between tokens
// over all the stage's streamed tokens.
func stageMetrics(reqs []benchReq, stage int) map[string]float64 {
	var ttft, e2e, tpot stats.Sketch
	var gaps, n float64
	for i := range reqs {
		r := &reqs[i]
		if stage >= 0 && r.stage != stage {
			continue
		}
		ttft.Add(ms(r.first - r.arrived))
		e2e.Add(ms(r.done - r.arrived))
		if out := r.seq.Output; out > 1 {
			gaps += ms(r.done - r.first)
			n += float64(out - 1)
			tpot.Add(ms(r.done-r.first) / float64(out-1))
		}
	}
	if ttft.Count() == 0 {
		return map[string]float64{}
	}
	m := map[string]float64{
		"ttft_mean": ttft.Mean(), "ttft_p50": ttft.Quantile(0.5), "ttft_p90": ttft.Quantile(0.9), "ttft_p99": ttft.Quantile(0.99),
		"e2e_mean": e2e.Mean(), "e2e_p50": e2e.Quantile(0.5), "e2e_p90": e2e.Quantile(0.9), "e2e_p99": e2e.Quantile(0.99),
	}
	if n > 0 {
		m["itl_mean"] = gaps / n
		m["tpot_mean"] = tpot.Mean()
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// stageKeys returns a prediction's or measurement's stage keys in order:
// "-1" (the whole run) first, then 0, 1, ….
func stageKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	num := func(k string) int {
		n, err := strconv.Atoi(k)
		if err != nil {
			return math.MaxInt
		}
		return n
	}
	slices.SortFunc(ks, func(a, b string) int { return cmp.Compare(num(a), num(b)) })
	return ks
}
