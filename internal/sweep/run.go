package sweep

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/workers"
	"github.com/fleetdrill/fleetdrill/twin"
)

// Schema is the version of the shard and report JSON layouts.
const Schema = 1

// Figure is one number a run reports, named by its path in
// `fleetdrill run --json` where it has one.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Result is one run's figures.
type Result struct {
	Index   int      `json:"index"`
	Point   string   `json:"point"`
	Seed    uint64   `json:"seed"`
	Figures []Figure `json:"figures"`
}

// Shard is what one `sweep run` writes: the results of the runs whose index
// mod Shards is Shard.
type Shard struct {
	Schema   int      `json:"schema"`
	SpecHash string   `json:"spec_hash"`
	Scenario string   `json:"scenario"`
	Points   []Point  `json:"points"`
	Seeds    []uint64 `json:"seeds"`
	Shard    int      `json:"shard"`
	Shards   int      `json:"shards"`
	Results  []Result `json:"results"`
	Run      RunInfo  `json:"run"`
}

// RunInfo is the part of a shard allowed to differ between identical runs;
// the merged report leaves it out.
type RunInfo struct {
	WallS    float64 `json:"wall_s"`
	Parallel int     `json:"parallel"`
	Version  string  `json:"version"`
}

// Options say how to run a shard.
type Options struct {
	Shard, Shards int // 0 and 1: every run
	Parallel      int // runs at a time; 0: GOMAXPROCS
	Version       string
	// Progress, if set, is called after each run (serialised).
	Progress func(done, total int)
}

// Indexes is the run indexes of shard of shards, out of total.
func Indexes(shard, shards, total int) []int {
	var out []int
	for i := shard; i < total; i += shards {
		out = append(out, i)
	}
	return out
}

// RunShard runs the runs of one shard, Parallel at a time. It stops at the
// first failed run.
func RunShard(ctx context.Context, s *Spec, opts Options) (*Shard, error) {
	if opts.Shards == 0 {
		opts.Shards = 1
	}
	if opts.Shards < 1 || opts.Shard < 0 || opts.Shard >= opts.Shards {
		return nil, fmt.Errorf("sweep: shard %d of %d: want 0 <= shard < shards", opts.Shard, opts.Shards)
	}
	start := time.Now()
	idx := Indexes(opts.Shard, opts.Shards, s.Runs())
	parallel := workers.Count(opts.Parallel, len(idx))
	results := make([]Result, len(idx))
	if err := workers.Run(ctx, len(idx), parallel, func(ctx context.Context, k int) error {
		r, err := s.runOne(ctx, idx[k], opts.Version)
		results[k] = r
		return err
	}, opts.Progress); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sweep: %w", err)
		}
		return nil, err
	}
	return &Shard{
		Schema: Schema, SpecHash: s.Hash, Scenario: s.ScenarioName,
		Points: s.Points, Seeds: s.Seeds, Shard: opts.Shard, Shards: opts.Shards,
		Results: results,
		Run: RunInfo{
			WallS:    math.Round(time.Since(start).Seconds()*1000) / 1000,
			Parallel: parallel, Version: opts.Version,
		},
	}, nil
}

// RunError is the failure of one run.
type RunError struct {
	Point string
	Seed  uint64
	Err   error
}

func (e *RunError) Error() string {
	return fmt.Sprintf("sweep: point %s, seed %d: %v", e.Point, e.Seed, e.Err)
}

func (e *RunError) Unwrap() error { return e.Err }

func (s *Spec) runOne(ctx context.Context, i int, version string) (Result, error) {
	p, seed := s.Points[i/len(s.Seeds)], s.Seeds[i%len(s.Seeds)]
	fail := func(err error) (Result, error) { return Result{}, &RunError{Point: p.Name, Seed: seed, Err: err} }
	sc, err := s.load(i)
	if err != nil {
		return fail(err)
	}
	classes := make([]string, len(sc.Classes))
	for j, c := range sc.Classes {
		classes[j] = c.Name
	}
	rep, err := twin.Run(ctx, sc, twin.Options{Version: version})
	if err != nil {
		return fail(err)
	}
	figs, err := Figures(rep, classes)
	if err != nil {
		return fail(err)
	}
	return Result{Index: i, Point: p.Name, Seed: seed, Figures: figs}, nil
}

// Figures reads the figures a sweep keeps from a report; classes is the
// scenario's class order.
func Figures(rep *twin.Report, classes []string) ([]Figure, error) {
	var out []Figure
	add := func(name string, v float64) { out = append(out, Figure{name, v}) }
	rq := rep.Requests
	add("requests.arrived", float64(rq.Arrived))
	add("requests.completed", float64(rq.Completed))
	add("requests.rejected", float64(rq.Rejected))
	add("requests.failed", float64(rq.Failed))
	add("requests.timed_out", float64(rq.TimedOut))
	add("requests.cancelled", float64(rq.Cancelled))
	for _, c := range classes {
		g, ok := rep.Classes[c]
		if !ok || g == nil {
			return nil, fmt.Errorf("report has no class %q", c)
		}
		pre := "classes." + c + "."
		add(pre+"ttft_s.p50", g.TTFT.P50)
		add(pre+"ttft_s.p99", g.TTFT.P99)
		add(pre+"e2e_s.p50", g.E2E.P50)
		add(pre+"e2e_s.p99", g.E2E.P99)
		add(pre+"slo_attainment", g.SLOAttainment.Or(0))
	}
	add("cost.total", rep.Cost.Total)
	add("cost.per_successful_task", rep.Cost.PerSuccessfulTask)
	passed := 0
	for _, e := range rep.Expectations {
		if e.Pass {
			passed++
		}
	}
	add("expectations.passed", float64(passed))
	add("expectations.failed", float64(len(rep.Expectations)-passed))
	for _, f := range out {
		if math.IsNaN(f.Value) || math.IsInf(f.Value, 0) {
			return nil, fmt.Errorf("%s is %v; want a finite number (a twin bug)", f.Name, f.Value)
		}
	}
	return out, nil
}
