package compare

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/workers"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// Loader returns the scenario under test, freshly parsed, with its
// scheduler set to policy (or, comparing Variants, the named variant's
// overrides applied) and its seed to seed. Run calls it once per run,
// from several goroutines at once: every run gets a scenario of its own,
// because a *scenarios.Scenario is mutable and twin.Run may keep pointers
// into it for the length of the run.
//
// The command builds one from the scenario's bytes and ParseWithSets with
// the user's overrides followed by policy.scheduler=<policy> (or the
// variant's overrides) and seed=<seed>.
type Loader func(policy string, seed uint64) (*scenarios.Scenario, error)

// Variant is a named set of overrides of the scenario (PATH=VALUE, as
// --set takes them), compared as a policy is: e.g. an autoscaling target
// or a reservation size. A variant with no overrides is the scenario as
// it is.
type Variant struct {
	Name string
	Sets []string
}

// Config says what to compare.
type Config struct {
	// Scenario names the scenario in the output.
	Scenario string
	// Policies are the schedulers to compare; the first is the baseline
	// every other is tested against. At least one, no duplicates.
	Policies []string
	// Variants, when given, are compared instead of Policies (which must
	// then be empty): the columns are the variants' names, the first the
	// baseline, and the Loader is called with a variant's name.
	Variants []Variant
	// FirstSeed and Seeds: each policy runs with the seeds FirstSeed,
	// FirstSeed+1, …, FirstSeed+Seeds−1. The same seed gives every policy
	// the same arrivals and token counts (common random numbers), which is
	// what makes the paired test valid.
	FirstSeed uint64
	Seeds     int
	// Parallel is how many runs go at once; 0 means runtime.GOMAXPROCS(0).
	// It changes the wall time, never the result.
	Parallel int
	// Version is recorded in Result.Run.
	Version string
	// Progress, if set, is called after each run with the number of runs
	// done and the total. Calls are serialised but come from the workers'
	// goroutines, in completion order.
	Progress func(done, total int)
}

// Result is a finished comparison. Everything but Run is a pure function of
// the Config (less Parallel and Progress) and the scenario: runs finishing
// in another order change nothing.
type Result struct {
	Scenario string
	Policies []string // the columns, the baseline first: the policies, or the variants' names
	// Variants are the variants compared, nil when policies are.
	Variants []Variant
	Seeds    []uint64
	// Groups are the scenario's classes, in the scenario's order, then the
	// fleet-wide metrics (Group.Class false).
	Groups []Group
	Run    RunInfo
}

// RunInfo is the only part of a Result allowed to differ between identical
// comparisons.
type RunInfo struct {
	Wall     time.Duration
	Parallel int
	Version  string
}

// Group is the metrics of one class, or of the whole fleet.
type Group struct {
	Name    string // the class name, or "fleet"
	Class   bool
	Metrics []Metric
}

// Metric is one metric under every policy.
type Metric struct {
	Name     string // the report path under classes.<class>, e.g. ttft_s.p99; or a fleet metric
	Better   Better
	Policies []PolicyStats // indexed like Result.Policies
}

// PolicyStats is one metric under one policy, over the seeds.
type PolicyStats struct {
	Values []float64 // one per seed, indexed like Result.Seeds
	Summary
	// VsBaseline is nil for the baseline itself, and when there is a
	// single seed (no test is possible).
	VsBaseline *Comparison
}

// Comparison tests one policy's values against the baseline's.
//
// NB: the verdict uses the paired test. Run gives every policy the same
// seeds, so run i of each policy saw the same arrivals; the per-seed
// difference cancels the noise the policies share, and the paired test is
// far more powerful than Welch's, which ignores the pairing. Welch's p is
// kept for readers who want the unpaired answer.
type Comparison struct {
	Diff   float64 // mean(policy) − mean(baseline)
	Paired Test
	Welch  Test
}

// P is the p-value the verdict uses: the paired test's.
func (c *Comparison) P() float64 { return c.Paired.P }

// Significant reports whether the difference is significant at Alpha.
func (c *Comparison) Significant() bool { return c.Paired.Significant() }

// RunError is the failure of one run.
type RunError struct {
	Policy string // the policy, or the variant's name
	// Variant is the variant that failed, nil comparing policies.
	Variant *Variant
	Seed    uint64
	Err     error
}

func (e *RunError) Error() string {
	if e.Variant != nil {
		return fmt.Sprintf("variant %s, seed %d: %v", e.Policy, e.Seed, e.Err)
	}
	return fmt.Sprintf("policy %s, seed %d: %v", e.Policy, e.Seed, e.Err)
}

func (e *RunError) Unwrap() error { return e.Err }

// Run runs every policy over every seed, Parallel runs at a time, and
// compares them. It stops at the first failed run, or when ctx is done; a
// failed run is returned as a *RunError.
func Run(ctx context.Context, load Loader, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var variants []Variant
	if len(cfg.Variants) > 0 {
		// From here on the columns are named as policies are.
		variants = slices.Clone(cfg.Variants)
		cfg.Policies = nil
		for _, v := range variants {
			cfg.Policies = append(cfg.Policies, v.Name)
		}
	}
	start := time.Now()
	seeds := make([]uint64, cfg.Seeds)
	for i := range seeds {
		seeds[i] = cfg.FirstSeed + uint64(i)
	}
	total := len(cfg.Policies) * len(seeds)
	parallel := workers.Count(cfg.Parallel, total)

	// Run i is policy i/len(seeds), seed i%len(seeds); its sample goes to
	// samples[i] whichever worker finishes it when, so the result does not
	// depend on completion order.
	samples := make([]sample, total)
	err := workers.Run(ctx, total, parallel, func(ctx context.Context, i int) error {
		pol, seed := cfg.Policies[i/len(seeds)], seeds[i%len(seeds)]
		s, err := runOne(ctx, load, pol, seed, cfg.Version, variants != nil)
		if err != nil {
			re := &RunError{Policy: pol, Seed: seed, Err: err}
			if variants != nil {
				re.Variant = &variants[i/len(seeds)]
			}
			return re
		}
		samples[i] = s
		return nil
	}, cfg.Progress)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("compare: %w", err)
		}
		return nil, err
	}

	res, err := assemble(cfg, seeds, samples)
	if err != nil {
		return nil, err
	}
	res.Variants = variants
	res.Run = RunInfo{Wall: time.Since(start), Parallel: parallel, Version: cfg.Version}
	return res, nil
}

func (cfg *Config) validate() error {
	var errs []error
	if len(cfg.Variants) > 0 {
		if len(cfg.Policies) > 0 {
			errs = append(errs, errors.New("both policies and variants; want one or the other (a variant may set policy.scheduler)"))
		}
		for i, v := range cfg.Variants {
			if v.Name == "" {
				errs = append(errs, fmt.Errorf("variant %d has no name; want one", i))
			}
			if j := slices.IndexFunc(cfg.Variants, func(w Variant) bool { return w.Name == v.Name }); j < i {
				errs = append(errs, fmt.Errorf("variant %q given twice; want each name once", v.Name))
			}
		}
	} else if len(cfg.Policies) == 0 {
		errs = append(errs, errors.New("no policies; want at least one (the first is the baseline)"))
	}
	for i, p := range cfg.Policies {
		if j := slices.Index(cfg.Policies, p); j < i {
			errs = append(errs, fmt.Errorf("policy %q given twice; want each policy once", p))
		}
	}
	if cfg.Seeds < 1 {
		errs = append(errs, fmt.Errorf("seeds: got %d, want >= 1", cfg.Seeds))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	return nil
}

// runOne loads a fresh scenario for (policy, seed), runs it, and keeps its
// metrics.
func runOne(ctx context.Context, load Loader, policy string, seed uint64, version string, variant bool) (sample, error) {
	sc, err := load(policy, seed)
	if err != nil {
		return sample{}, err
	}
	// The loader is the command's; check that it did what it was asked,
	// or the comparison would silently compare something else. (What a
	// variant overrides is the loader's to apply; the seed is not.)
	if variant && sc.Seed != seed {
		return sample{}, fmt.Errorf("the loader returned a scenario with seed %d; want %d", sc.Seed, seed)
	}
	if !variant && (sc.Policy.Scheduler != policy || sc.Seed != seed) {
		return sample{}, fmt.Errorf("the loader returned a scenario with scheduler %q and seed %d; want %q and %d",
			sc.Policy.Scheduler, sc.Seed, policy, seed)
	}
	classes := make([]string, len(sc.Classes))
	for i, c := range sc.Classes {
		classes[i] = c.Name
	}
	rep, err := twin.Run(ctx, sc, twin.Options{Version: version})
	if err != nil {
		return sample{}, err
	}
	return extract(rep, classes)
}

// assemble computes the statistics from the samples, in index order.
func assemble(cfg Config, seeds []uint64, samples []sample) (*Result, error) {
	n := len(seeds)
	classes := samples[0].classes
	scaled := samples[0].scaled
	for i, s := range samples {
		if !slices.Equal(s.classes, classes) {
			return nil, fmt.Errorf("compare: %s, seed %d has classes %v, but %s, seed %d has %v; want the same classes in every run",
				cfg.Policies[i/n], seeds[i%n], s.classes, cfg.Policies[0], seeds[0], classes)
		}
		if !slices.Equal(s.scaled, scaled) {
			return nil, fmt.Errorf("compare: %s, seed %d has autoscaled pools %v, but %s, seed %d has %v; want the same in every run",
				cfg.Policies[i/n], seeds[i%n], s.scaled, cfg.Policies[0], seeds[0], scaled)
		}
	}
	res := &Result{Scenario: cfg.Scenario, Policies: slices.Clone(cfg.Policies), Seeds: seeds}
	// values collects one metric for every policy, seeds in order.
	values := func(get func(sample) float64) [][]float64 {
		out := make([][]float64, len(cfg.Policies))
		for p := range out {
			out[p] = make([]float64, n)
			for s := range n {
				out[p][s] = get(samples[p*n+s])
			}
		}
		return out
	}
	for c, name := range classes {
		g := Group{Name: name, Class: true}
		for m, def := range classMetrics {
			g.Metrics = append(g.Metrics, newMetric(def.name, def.better, values(func(s sample) float64 { return s.class[c][m] })))
		}
		res.Groups = append(res.Groups, g)
	}
	g := Group{Name: "fleet"}
	for m, def := range fleetMetrics {
		g.Metrics = append(g.Metrics, newMetric(def.name, def.better, values(func(s sample) float64 { return s.fleet[m] })))
	}
	for p, pool := range scaled {
		for m, def := range scaleMetrics {
			g.Metrics = append(g.Metrics, newMetric("autoscaling."+pool+"."+def.name, def.better, values(func(s sample) float64 { return s.scale[p][m] })))
		}
	}
	res.Groups = append(res.Groups, g)
	return res, nil
}

// newMetric summarises each policy's values and tests every policy but the
// first against the first.
func newMetric(name string, better Better, vals [][]float64) Metric {
	m := Metric{Name: name, Better: better}
	for p, v := range vals {
		ps := PolicyStats{Values: v, Summary: Summarize(v)}
		if p > 0 {
			ps.VsBaseline = compareTo(vals[0], v)
		}
		m.Policies = append(m.Policies, ps)
	}
	return m
}

// compareTo tests other against base, seed by seed; nil when there are
// fewer than two seeds.
func compareTo(base, other []float64) *Comparison {
	paired, err := Paired(base, other)
	if err != nil {
		return nil
	}
	welch, err := Welch(base, other)
	if err != nil {
		return nil
	}
	return &Comparison{Diff: mean(other) - mean(base), Paired: paired, Welch: welch}
}
