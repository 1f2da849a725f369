package calibrate

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/trace"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim/stats"
	"github.com/fleetdrill/fleetdrill/twin"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// Quantiles compares measured with predicted at the reported percentiles.
type Quantiles struct {
	Measured  Dist `json:"measured"`
	Predicted Dist `json:"predicted"`
	// RelErr is (predicted − measured) / measured per percentile; null
	// where the measured value is 0 and the predicted is not.
	RelErr RelDist `json:"rel_err"`
	// PerRequestMedianRelErr is the median over requests of
	// |predicted − measured| / max(measured, 50 ms) for that request.
	PerRequestMedianRelErr float64 `json:"per_request_median_rel_err"`
}

// Dist holds p50, p90, p95, p99.
type Dist struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// RelDist holds relative errors at p50, p90, p95, p99.
type RelDist struct {
	P50 *float64 `json:"p50"`
	P90 *float64 `json:"p90"`
	P95 *float64 `json:"p95"`
	P99 *float64 `json:"p99"`
}

// Point is one second of the running/waiting time series, measured and
// predicted.
type Point struct {
	T                float64 `json:"t_s"`
	RunningMeasured  int     `json:"running_measured"`
	RunningPredicted int     `json:"running_predicted"`
	WaitingMeasured  int     `json:"waiting_measured"`
	WaitingPredicted int     `json:"waiting_predicted"`
}

// Fidelity is how well the twin, with a profile, reproduces a run.
type Fidelity struct {
	Run      string                `json:"run"`
	Profile  scenarios.Profile     `json:"profile"`
	Requests int                   `json:"requests"`
	Metrics  map[string]*Quantiles `json:"metrics"` // ttft, tpot, e2e, queue_wait (seconds)
	Series   []Point               `json:"series"`

	// Per-request samples in seconds, for the plot's CDFs.
	samples map[string][2][]float64
}

// MaxE2EError is the larger relative error of p50 and p95 end-to-end
// latency: the figure the goal and --max-error are stated in.
func (f *Fidelity) MaxE2EError() float64 {
	e := f.Metrics["e2e"].RelErr
	if e.P50 == nil || e.P95 == nil {
		return math.Inf(1)
	}
	return math.Max(math.Abs(*e.P50), math.Abs(*e.P95))
}

// Samples returns the measured and predicted per-request values of a metric
// (ttft, tpot, e2e, queue_wait), in seconds.
func (f *Fidelity) Samples(metric string) (measured, predicted []float64) {
	s := f.samples[metric]
	return s[0], s[1]
}

// Replay runs run's exact arrivals and token counts through the twin with
// profile, on the run's engine settings (replicas, tensor parallelism, max
// sequences, chunk budget, KV capacity), and compares.
func Replay(ctx context.Context, run *Run, prof latency.Profile) (*Fidelity, error) {
	sim, err := newSimulator(run)
	if err != nil {
		return nil, err
	}
	defer sim.close()
	pred, series, err := sim.replay(ctx, prof, true)
	if err != nil {
		return nil, err
	}

	f := &Fidelity{Run: run.Name, Profile: ProfileYAML(prof), Requests: len(run.Requests),
		Metrics: map[string]*Quantiles{}, samples: map[string][2][]float64{}}
	type get func(i int) (meas, pred float64, ok bool)
	metrics := map[string]get{
		"ttft": func(i int) (float64, float64, bool) {
			l := pred[i]
			return run.Requests[i].TTFT(), (l.FirstToken - l.Arrived).Seconds(), true
		},
		"e2e": func(i int) (float64, float64, bool) {
			l := pred[i]
			return run.Requests[i].E2E(), (l.Done - l.Arrived).Seconds(), true
		},
		"tpot": func(i int) (float64, float64, bool) {
			r, l := &run.Requests[i], pred[i]
			if r.Output <= 1 {
				return 0, 0, false
			}
			return r.TPOT(), (l.Done - l.FirstToken).Seconds() / float64(r.Output-1), true
		},
		"queue_wait": func(i int) (float64, float64, bool) {
			l := pred[i]
			return run.Requests[i].QueueWait(), (l.Scheduled - l.Arrived).Seconds(), true
		},
	}
	for _, name := range []string{"ttft", "tpot", "e2e", "queue_wait"} {
		var m, p, rel stats.Sketch
		var ms, ps []float64
		for i := range run.Requests {
			mv, pv, ok := metrics[name](i)
			if !ok {
				continue
			}
			m.Add(mv)
			p.Add(pv)
			ms, ps = append(ms, mv), append(ps, pv)
			// Relative to the measured value, floored at 50 ms so that
			// near-zero waits do not turn a 20 ms difference into 10,000 %.
			rel.Add(math.Abs(pv-mv) / math.Max(mv, relFloor))
		}
		q := &Quantiles{Measured: dist(&m), Predicted: dist(&p), PerRequestMedianRelErr: round4(rel.Quantile(0.5))}
		q.RelErr = RelDist{P50: relErr(q.Predicted.P50, q.Measured.P50), P90: relErr(q.Predicted.P90, q.Measured.P90),
			P95: relErr(q.Predicted.P95, q.Measured.P95), P99: relErr(q.Predicted.P99, q.Measured.P99)}
		f.Metrics[name] = q
		f.samples[name] = [2][]float64{ms, ps}
	}
	f.Series = mergeSeries(run.Series, series)
	return f, nil
}

// relFloor is the smallest denominator of a per-request relative error.
const relFloor = 0.05

func dist(s *stats.Sketch) Dist {
	return Dist{P50: round4(s.Quantile(0.5)), P90: round4(s.Quantile(0.9)), P95: round4(s.Quantile(0.95)), P99: round4(s.Quantile(0.99))}
}

func relErr(pred, meas float64) *float64 {
	var e float64
	switch {
	case meas != 0:
		e = round4((pred - meas) / meas)
	case pred != 0:
		return nil // undefined: nothing measured to be relative to
	}
	return &e
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// mergeSeries lines the measured per-second series up with the predicted
// one. The measured ticks start when the engine started, the predicted at
// the first arrival; both are per second, so they are joined by index.
func mergeSeries(meas []Tick, pred []Point) []Point {
	n := max(len(meas), len(pred))
	out := make([]Point, n)
	for i := range n {
		out[i].T = float64(i + 1)
		if i < len(meas) {
			out[i].RunningMeasured, out[i].WaitingMeasured = meas[i].Running, meas[i].Waiting
		}
		if i < len(pred) {
			out[i].RunningPredicted, out[i].WaitingPredicted = pred[i].RunningPredicted, pred[i].WaitingPredicted
		}
	}
	return out
}

// simulator replays one run through the twin, again and again (the refining
// fit calls it for every candidate profile): the arrivals file is written
// once.
type simulator struct {
	run *Run
	pl  Placement
	dir string
}

func newSimulator(run *Run) (*simulator, error) {
	pl, err := Resolve(run.Engine)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fleetdrill-fidelity-*")
	if err != nil {
		return nil, err
	}
	if err := writeArrivals(filepath.Join(dir, "arrivals.jsonl"), run); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &simulator{run: run, pl: pl, dir: dir}, nil
}

func (s *simulator) close() { os.RemoveAll(s.dir) }

// run returns the twin's timeline of every request, in arrival order, and,
// with series, the per-second running and waiting counts.
func (s *simulator) replay(ctx context.Context, prof latency.Profile, series bool) ([]twin.RequestLog, []Point, error) {
	run := s.run
	sc := replayScenario(run, s.pl, prof, s.dir)
	pred := make([]twin.RequestLog, len(run.Requests))
	seen := make([]bool, len(run.Requests))
	var points []Point
	opts := twin.Options{
		OnComplete: func(l twin.RequestLog) {
			if int(l.ID) < len(pred) {
				pred[l.ID], seen[l.ID] = l, true
			}
		},
	}
	if series {
		opts.SampleEvery = time.Second
		opts.Sample = func(at time.Duration, queued int, reps []twin.ReplicaState) {
			p := Point{T: at.Seconds(), WaitingPredicted: queued}
			for _, r := range reps {
				p.RunningPredicted += r.Running
				p.WaitingPredicted += r.Waiting
			}
			points = append(points, p)
		}
	}
	rep, err := twin.Run(ctx, sc, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("calibrate: replay %s: %w", run.Name, err)
	}
	for i, ok := range seen {
		if !ok {
			return nil, nil, fmt.Errorf("calibrate: replay %s: request %d did not complete in the twin (report: %+v)", run.Name, i, rep.Requests)
		}
	}
	return pred, points, nil
}

// writeArrivals writes the run's arrivals and token counts as canonical
// JSONL, the twin's trace input.
func writeArrivals(path string, run *Run) error {
	w, err := trace.Create(path)
	if err != nil {
		return err
	}
	defer w.Abort()
	for i := range run.Requests {
		r := &run.Requests[i]
		rec := trace.Record{Time: time.Duration(math.Round(r.Arrived * 1e9)), Input: r.Input, Output: r.Output}
		if err := w.Write(&rec); err != nil {
			return err
		}
	}
	return w.Close()
}

// replayScenario is one pool shaped like the run's engine: DP replicas of
// TP GPUs, its max sequences, chunk budget and KV capacity, serving the
// arrivals in FIFO order without deadlines, quotas or queue limits.
func replayScenario(run *Run, pl Placement, prof latency.Profile, dir string) *scenarios.Scenario {
	e := run.Engine
	p := ProfileYAML(prof)
	p.MaxBatchedTokens = e.MaxBatchedTokens
	p.KVTokens = e.KVTokens
	if p.KVTokens == 0 {
		p.KVTokens = pl.KVTokens()
	}
	last := 0.0
	for _, r := range run.Requests {
		last = max(last, r.Arrived)
	}
	d := func(x time.Duration) scenarios.Duration { return scenarios.Duration(x) }
	m := pl.Model
	name := scenarioName(m.Name)
	precision := "bf16"
	if pl.bytesPerParam() == 1 {
		precision = "fp8"
	}
	const gib = 1 << 30
	// The scenario sizes weights per replica as parameters × precision; an
	// expert-parallel rank holds only its share of the experts.
	params := pl.weightBytesPerGPU() * float64(pl.TP) / pl.bytesPerParam()
	pool := scenarios.Pool{Name: "engine", Region: "lab", Provider: "lab", Accelerator: pl.GPU.Name,
		GPUsPerReplica: pl.TP, Replicas: max(e.DP, 1), Runtime: "vllm", Driver: "999", Models: []string{name},
		MaxBatch: e.MaxSeqs, Profiles: map[string]scenarios.Profile{name: p}}
	if ph := prof.Physics; ph != nil {
		// The physical model, derived as a scenario pool derives it, with
		// the run's own engine limits.
		c := ph.Coeffs()
		pool.GPU, pool.ModelConfig, pool.Coefficients = pl.GPU.Name, e.Model, &c
		if pl.EP > 1 {
			pool.ExpertParallel = pl.expertGPUs()
		}
		pool.Profiles = map[string]scenarios.Profile{name: {MaxBatchedTokens: p.MaxBatchedTokens, KVTokens: p.KVTokens}}
	}
	return &scenarios.Scenario{
		Schema: 1, Name: "fidelity-" + run.Name, Seed: 1, Dir: dir,
		Duration: d(time.Duration(last*float64(time.Second)) + time.Second), Drain: d(time.Hour),
		Regions: []scenarios.Region{{Name: "lab", Jurisdiction: "lab"}},
		Accelerators: []scenarios.Accelerator{{Name: pl.GPU.Name, MemoryGiB: pl.GPU.MemoryGB * 1e9 / gib, UsableFraction: 0.9,
			Precisions: []string{precision}}},
		Runtimes: []scenarios.Runtime{{Name: "vllm", Server: "vllm", Version: e.Version}},
		Models: []scenarios.Model{{Name: name, ParametersB: params / 1e9, Layers: m.Layers, KVHeads: max(m.KVHeads, 1),
			HeadDim: max(m.HeadDim, 1), Precision: precision, ContextLength: 1 << 20, Runtimes: []string{"vllm"}}},
		Pools:   []scenarios.Pool{pool},
		Tenants: []scenarios.Tenant{{Name: "bench", Weight: 1}},
		Classes: []scenarios.Class{{Name: "all"}},
		Workload: []scenarios.Stream{{Name: "run", Tenant: "bench", Class: "all", Model: name,
			Trace: &scenarios.TraceSource{Path: "arrivals.jsonl", Format: "canonical", TimeScale: 1, RateScale: 1}}},
		Policy: scenarios.Policy{Scheduler: "fifo", Admission: scenarios.Admission{QueueLimit: 1 << 30},
			Routing: scenarios.Routing{Strategy: "least-loaded"}, Jobs: scenarios.JobPolicy{MaxPoolShare: 0.5}},
	}
}

// ProfileYAML is a latency profile as a scenario writes it.
func ProfileYAML(p latency.Profile) scenarios.Profile {
	r := func(x float64) float64 { return math.Round(x*1e4) / 1e4 }
	return scenarios.Profile{StepBaseUS: r(p.StepBase), PerSeqUS: r(p.PerSeq), PerPrefillTokenUS: r(p.PerPrefillToken),
		PerKVTokenUS: r(p.PerKVToken), MinStepUS: r(p.MinStep), MaxBatchedTokens: p.MaxBatchedTokens, KVTokens: p.KVTokens}
}

// FromYAML is the latency profile a scenario profile (without ref) holds.
func FromYAML(p scenarios.Profile) latency.Profile {
	return latency.Profile{StepBase: p.StepBaseUS, PerSeq: p.PerSeqUS, PerPrefillToken: p.PerPrefillTokenUS,
		PerKVToken: p.PerKVTokenUS, MinStep: p.MinStepUS, MaxBatchedTokens: p.MaxBatchedTokens, KVTokens: p.KVTokens}
}

// scenarioName makes a model's name a valid scenario name: what follows
// the org, with characters a scenario name cannot hold turned into '-'.
func scenarioName(s string) string {
	s = s[strings.LastIndexAny(s, `/\`)+1:]
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			b[i] = '-'
		}
	}
	if len(b) == 0 || b[0] == '-' {
		b = append([]byte("m"), b...)
	}
	return string(b)
}
