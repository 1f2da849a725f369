// Package plan searches a scenario's pool replica counts — today's pools
// and the purchasable pool types it lists — for the cheapest fleet that
// meets every expectation of the scenario, healthy and through each of a
// list of failures, at each of several demand levels, and dates the orders
// that close the gap to today's fleet by each type's lead time.
//
// The search relies on monotonicity (more replicas never hurt an SLO): it
// finds a passing upper bound by doubling the scenario's counts, then runs a
// coordinate descent, bisecting each pool's count (most expensive GPU-hour
// first) to the least that passes with the others fixed, until a sweep
// changes nothing. Every run is cached by (replicas, demand, fault) and kept.
// The result is a fleet from which no single pool can give up a replica; it
// is not guaranteed to be the global minimum when pools substitute for one
// another (see docs/planning.md). A purchasable type starts the search with
// enough replicas to carry its models' load alone, so that when it is
// cheaper the descent trims the dearer pools first and keeps it.
//
// A pool whose lead time would bring new replicas after a level's date is
// held at today's count for that level; when no such fleet passes, the
// level is searched again with every pool free and marked late.
//
// An autoscaled pool is searched by what an architect buys for it: its
// reservation, held warm. Its count N sets replicas, autoscale.min_replicas
// and acquisition.reserved to N together (max_replicas to at least N), so
// the N replicas run all along and are paid whether used or not; what the
// autoscaler adds beyond them is on demand, paid as used, and measured by
// the runs (autoscaling.<pool>.burst_cost). A candidate's cost is then its
// committed cost plus the mean on-demand cost of its healthy runs.
//
// With Config.Seeds > 1 every candidate runs at the scenario's seed and the
// ones after it, the same seeds for every candidate (common random
// numbers: a stockout's grants, drawn per replica, differ from seed to
// seed), and passes only if every seed passes.
package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fleetdrill/fleetdrill/internal/shell"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// Loader parses the scenario with extra --set overrides.
type Loader func(sets []string) (*scenarios.Scenario, error)

// Config is what to plan.
type Config struct {
	Demands  []float64 // demand multipliers; empty means [1]
	Survive  []string  // fault lines a plan must survive, each separately
	Parallel int       // runs at a time; 0 means GOMAXPROCS
	// MaxReplicas caps each pool's count in the search; 0 means
	// max(64, 4 × the scenario's count).
	MaxReplicas int
	// MinAttainment, when > 0, adds "CLASS.slo_attainment >= MinAttainment"
	// for every class a stream sends to, to the scenario's expectations
	// in the healthy runs: latency objectives alone are met by a fleet of
	// zero that rejects everything. Runs with a survived fault check only
	// the scenario's own expectations (a regional outage loses requests
	// before it is detected, whatever the fleet).
	MinAttainment float64
	Version       string
	// Today is the day orders can first be placed; zero means the current
	// UTC date. NeededBy[i] is the date demand level i must be served
	// from; a missing or zero entry means Today.
	Today    time.Time
	NeededBy []time.Time
	// Command is the `fleetdrill run` command line (scenario and the
	// user's --set flags but expect=, which each verify command states
	// itself) the plan's verify commands extend.
	Command string
	// KeepCommitted never plans fewer replicas than today's in a pool:
	// today's capacity is paid for (sunk) and the plan only adds to it.
	KeepCommitted bool
	// Seeds is how many seeds each candidate runs at: the scenario's and
	// the Seeds−1 after it. 0 means 1.
	Seeds int
}

// Pool is a pool as the plan sees it.
type Pool struct {
	Name           string  `json:"name"`
	Committed      int     `json:"committed"` // replicas in the scenario today
	GPUsPerReplica int     `json:"gpus_per_replica"`
	PricePerGPUH   float64 `json:"price_per_gpu_hour"`
	// Purchasable is a type from the scenario's purchasable: list, with
	// no replicas today.
	Purchasable bool `json:"purchasable,omitempty"`
	// BoughtBySet: a purchasable type the user's --set bought; the plan
	// counts it as today's (committed) capacity.
	BoughtBySet  bool    `json:"bought_by_set,omitempty"`
	LeadTimeDays float64 `json:"lead_time_days"`
	MinTermDays  float64 `json:"min_term_days"`
	MaxReplicas  int     `json:"max_replicas,omitempty"` // the provider's limit; 0 none
	// Autoscaled: the pool has autoscale:, and its count is its
	// reservation held warm (replicas = min_replicas = reserved);
	// Committed is then today's min_replicas, the floor that runs always.
	Autoscaled   bool `json:"autoscaled,omitempty"`
	maxAutoscale int  // the scenario's autoscale.max_replicas
	leadTime     time.Duration
	models       []string
	path         string // the pool's --set path, e.g. pools[1] or purchasable[0]
}

// ReplicaHour is the cost of one replica for an hour.
func (pl Pool) ReplicaHour() float64 { return float64(pl.GPUsPerReplica) * pl.PricePerGPUH }

// Order is capacity to buy for one demand level: replicas to add to a pool
// and by when to order them.
type Order struct {
	Pool     string `json:"pool"`
	Replicas int    `json:"replicas"`
	// OrderBy is the level's date less the pool's lead time; Arrives is
	// when an order placed today serves. Late: OrderBy is before today.
	OrderBy string `json:"order_by"`
	Arrives string `json:"arrives_if_ordered_today"`
	Late    bool   `json:"late,omitempty"`
	// Commitment is what the order binds to: replicas × GPUs × price ×
	// the minimum term in hours (0 for pay-as-you-go).
	Commitment float64 `json:"commitment"`
}

// Point is one evaluated candidate: a replica vector at a demand level
// under one failure ("" is the healthy case).
type Point struct {
	Replicas []int   `json:"replicas"`
	Demand   float64 `json:"demand"`
	Fault    string  `json:"fault"`
	Seed     uint64  `json:"seed"`
	Pass     bool    `json:"pass"`
	// CostPerHour is the replicas' committed cost plus OnDemand, this
	// run's on-demand (burst) cost of autoscaled pools per hour of the
	// scenario's duration.
	CostPerHour float64  `json:"cost_per_hour"`
	OnDemand    float64  `json:"on_demand_per_hour,omitempty"`
	PerTask     float64  `json:"cost_per_successful_task"`
	Attainment  float64  `json:"slo_attainment"` // the worst class's
	Failed      []string `json:"failed,omitempty"`
	Err         string   `json:"error,omitempty"`
	WallS       float64  `json:"wall_s"`
	exps        []twin.Expectation
	done        chan struct{}
}

// Binding is the constraint that stops one pool from giving up a replica.
type Binding struct {
	Pool  string  `json:"pool"`
	Fault string  `json:"fault"` // "" healthy
	Seed  uint64  `json:"seed"`  // the seed it fails at (the first, of several)
	Expr  string  `json:"expr"`
	Value float64 `json:"value_at_one_fewer"`
	// NoData says why the figure had no value at one fewer (Value is then
	// meaningless): no request finished in its window, a time that never
	// came.
	NoData    string  `json:"no_data,omitempty"`
	Threshold float64 `json:"threshold"`
	// Headroom is the binding expectation's margin at the planned fleet
	// (threshold minus value for <, value minus threshold for >), and
	// HeadroomRel that margin over the threshold.
	Headroom    float64 `json:"headroom"`
	HeadroomRel float64 `json:"headroom_rel"`
}

// Level is the plan at one demand multiplier.
type Level struct {
	Demand      float64 `json:"demand"`
	Feasible    bool    `json:"feasible"`
	Replicas    []int   `json:"replicas,omitempty"`
	CostPerHour float64 `json:"cost_per_hour"`
	// OnDemand is the part of CostPerHour autoscaled pools spend on
	// demand beyond their reservations: the mean over the seeds of the
	// healthy runs' burst cost per hour. The rest is committed.
	OnDemand   float64   `json:"on_demand_per_hour,omitempty"`
	PerTask    float64   `json:"cost_per_successful_task"` // the healthy run's
	Gap        []int     `json:"gap,omitempty"`            // replicas to add to today's, per pool
	Bindings   []Binding `json:"bindings,omitempty"`       // one per pool that cannot shrink
	NeededBy   string    `json:"needed_by"`                // the date this demand must be served from
	Orders     []Order   `json:"orders,omitempty"`         // what to buy, dated
	Commitment float64   `json:"commitment"`               // Σ orders' commitments
	// Late: no fleet that can arrive by NeededBy meets every expectation;
	// this plan is the cheapest once its orders arrive.
	Late bool `json:"late,omitempty"`
	// Verify repeats the planned fleet's runs, one command per case
	// (healthy first, then each survived fault): Config.Command with
	// the plan's overrides.
	Verify []string `json:"verify,omitempty"`
	// Upper is the passing fleet the descent started from: the full grid
	// the search pruned runs from each pool's floor to it (Grid runs).
	Upper []int   `json:"upper_bound,omitempty"`
	Runs  int     `json:"runs"`      // twin runs this level took
	Grid  float64 `json:"grid_runs"` // runs a full grid to the upper bound would take
	Note  string  `json:"note,omitempty"`
}

// Checks are the expectations the runs of one case check, where they are
// not the scenario's own.
type Checks struct {
	Case   string   `json:"case"` // "healthy" or "with FAULT"
	Expect []string `json:"expect"`
}

// caseExpect is what a case's runs check: the scenario's expectations,
// less those scoped to a fault the case does not run ("during
// regional-outage(us-east): …" means nothing in the healthy run, where the
// twin would refuse it), and "after recovery" when it runs no fault.
func caseExpect(sc *scenarios.Scenario, fault string) ([]string, error) {
	lines := slices.Clip(sc.Faults)
	if fault != "" {
		lines = append(lines, fault)
	}
	labels, err := twin.FaultLabels(lines)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range sc.Expect {
		ex, err := scenarios.ParseExpectation(e)
		if err != nil {
			return nil, err // validated with the scenario
		}
		fault := ex.Fault
		if l, ok := faultFigure(ex.LHS); ok && ex.Scope == "" {
			fault = l // faults.<label>.… reads a fault's own figures
		}
		switch {
		case fault == "":
		case fault == "recovery" && len(labels) == 0:
			continue
		case fault != "recovery" && !slices.Contains(labels, fault):
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// faultFigure reads the label from a fault's figure, faults.<label>.<name>
// (a label such as regional-outage(us-east) holds no dot).
func faultFigure(lhs string) (label string, ok bool) {
	rest, ok := strings.CutPrefix(lhs, "faults.")
	if !ok {
		return "", false
	}
	label, _, ok = strings.Cut(rest, ".")
	return label, ok
}

// Result is a plan.
type Result struct {
	Scenario string   `json:"scenario"`
	Pools    []Pool   `json:"pools"`
	Faults   []string `json:"survive"`
	Seeds    []uint64 `json:"seeds"`            // every candidate ran at each; a pass is a pass at all
	Checks   []Checks `json:"checks,omitempty"` // cases that check other than the scenario's expectations
	Levels   []Level  `json:"levels"`
	Points   []*Point `json:"points"`
	Runs     int      `json:"runs"`
	Wall     float64  `json:"wall_s"`
	Parallel int      `json:"parallel"`
	// Aggregated is, for a scenario with disaggregated models, the same
	// plan with every model served aggregated (its prefill and decode
	// pools all prefilling their own prompts): one level per demand, so
	// that the plan can say whether disaggregation pays. Nil otherwise.
	Aggregated []Level   `json:"aggregated,omitempty"`
	Today      string    `json:"today"`
	Started    time.Time `json:"-"`
	p          *planner
}

// ScaleSets are the overrides that multiply every workload stream's rate by
// k (scenarios.ScaleWorkloadSets).
func ScaleSets(sc *scenarios.Scenario, k float64) []string { return scenarios.ScaleWorkloadSets(sc, k) }

// InvalidError is a plan that cannot start: the scenario, a demand or a
// fault line is invalid.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

type planner struct {
	load   Loader
	base   *scenarios.Scenario
	cfg    Config
	pools  []Pool
	today  time.Time
	cases  []string            // "" then each survived fault
	seeds  []uint64            // the scenario's seed, then the Seeds−1 after it
	expect map[string][]string // by case, the expectations its runs check where not the scenario's
	sem    chan struct{}
	mu     sync.Mutex
	cache  map[string]*Point
	points []*Point
	runs   int
}

// Run plans. The scenario's own faults stay in every run; each survived
// fault is added to them in a run of its own.
func Run(ctx context.Context, load Loader, cfg Config) (*Result, error) {
	start := time.Now()
	base, err := load(nil)
	if err != nil {
		return nil, &InvalidError{Err: err}
	}
	if len(base.Pools) == 0 {
		return nil, fmt.Errorf("plan: scenario %s has no pools", base.Name)
	}
	if len(cfg.Demands) == 0 {
		cfg.Demands = []float64{1}
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = runtime.GOMAXPROCS(0)
	}
	if cfg.Seeds < 0 {
		return nil, &InvalidError{Err: fmt.Errorf("plan: --seeds %d: want >= 1", cfg.Seeds)}
	}
	today := cfg.Today
	if today.IsZero() {
		today = time.Now().UTC()
	}
	today = DateOf(today)
	p := &planner{load: load, base: base, cfg: cfg, cases: append([]string{""}, cfg.Survive...),
		sem: make(chan struct{}, cfg.Parallel), cache: map[string]*Point{}, today: today}
	for i := range max(cfg.Seeds, 1) {
		p.seeds = append(p.seeds, base.Seed+uint64(i))
	}
	// Today's pools, then every purchasable type (one bought by --set
	// counts as committed at that many).
	var all []scenarios.Pool
	var boughtBySet []string
	for i, pl := range base.Pools {
		if !base.Bought(i) {
			all = append(all, pl)
		} else {
			boughtBySet = append(boughtBySet, pl.Name)
		}
	}
	today0 := len(all)
	for i, pl := range append(all, base.Purchasable...) {
		pp := Pool{Name: pl.Name, Committed: pl.Replicas, GPUsPerReplica: pl.GPUsPerReplica, PricePerGPUH: pl.PricePerGPUHour,
			Purchasable: i >= today0, models: pl.Models, path: fmt.Sprintf("pools[%d]", i)}
		if pp.Purchasable {
			pp.path = fmt.Sprintf("purchasable[%d]", i-today0)
			pp.BoughtBySet = slices.Contains(boughtBySet, pl.Name)
		}
		// A purchasable type keeps its replicas-only search: bought 0
		// times it is not in the fleet, where an autoscaled pool needs
		// min_replicas >= 1.
		if a := pl.Autoscale; a != nil && !pp.Purchasable {
			pp.Autoscaled, pp.Committed, pp.maxAutoscale = true, a.MinReplicas, a.MaxReplicas
		}
		if pu := pl.Purchase; pu != nil {
			pp.leadTime = pu.LeadTime.D()
			pp.LeadTimeDays = pu.LeadTime.D().Hours() / 24
			pp.MinTermDays = pu.MinTerm.D().Hours() / 24
			pp.MaxReplicas = pu.MaxReplicas
		}
		p.pools = append(p.pools, pp)
	}
	var floor []string
	if cfg.MinAttainment > 0 {
		seen := map[string]bool{}
		for _, s := range base.Workload {
			if s.Class != "" && !seen[s.Class] {
				seen[s.Class] = true
				floor = append(floor, fmt.Sprintf("%s.slo_attainment >= %g", s.Class, cfg.MinAttainment))
			}
		}
	}
	p.expect = map[string][]string{}
	kept := map[string]bool{}
	for _, f := range p.cases {
		exps, err := caseExpect(base, f)
		if err != nil {
			return nil, &InvalidError{Err: fmt.Errorf("plan: %s: %w", caseName(f), err)}
		}
		for _, e := range exps {
			kept[e] = true
		}
		if f == "" {
			for _, e := range floor {
				if !slices.Contains(exps, e) { // the scenario may state the floor itself
					exps = append(exps, e)
				}
			}
		}
		if !slices.Equal(exps, base.Expect) {
			p.expect[f] = exps
		}
	}
	for i, e := range base.Expect {
		if !kept[e] {
			return nil, &InvalidError{Err: fmt.Errorf("plan: expect[%d] %q is scoped to a fault no run of the plan injects; want the label of a scenario fault or of a --survive fault (kind(target), e.g. regional-outage(us-east))", i, e)}
		}
	}
	var checks []Checks
	// Check every fault line and demand before the search: a typo should
	// fail in milliseconds.
	for _, d := range cfg.Demands {
		if d <= 0 {
			return nil, fmt.Errorf("plan: --demand %g: want > 0", d)
		}
		for _, f := range p.cases {
			if _, err := load(p.sets(p.committed(), d, f)); err != nil {
				return nil, &InvalidError{Err: fmt.Errorf("plan: demand %g, %s: %w", d, caseName(f), err)}
			}
		}
	}
	// Faults are checked when the twin builds the run: run today's fleet
	// first (the search starts there anyway), and take a failure to build
	// as invalid input.
	pts, err := p.all(ctx, p.committed(), cfg.Demands[0])
	if err != nil {
		return nil, err
	}
	for _, pt := range pts {
		if pt.Err != "" {
			return nil, &InvalidError{Err: fmt.Errorf("plan: %s at today's fleet: %s", caseName(pt.Fault), pt.Err)}
		}
	}
	for _, f := range p.cases {
		if exps, ok := p.expect[f]; ok {
			checks = append(checks, Checks{Case: caseName(f), Expect: exps})
		}
	}
	res := &Result{Scenario: base.Name, Pools: p.pools, Faults: cfg.Survive, Seeds: p.seeds, Checks: checks, Parallel: cfg.Parallel,
		Today: today.Format(time.DateOnly), Started: start}
	res.Levels = make([]Level, len(cfg.Demands))
	g, gctx := errgroup.WithContext(ctx)
	var agg *Result
	if sets := AggregateSets(base); len(sets) > 0 {
		// Whether disaggregation pays: the same search over the same
		// pools, every one prefilling its own prompts, beside this one
		// (a search waits on its runs one bisection step at a time, so
		// the two share the workers' idle time).
		g.Go(func() error {
			var err error
			agg, err = Run(gctx, func(extra []string) (*scenarios.Scenario, error) {
				return load(append(slices.Clip(sets), extra...))
			}, cfg)
			if err != nil {
				return fmt.Errorf("plan: the aggregated comparison: %w", err)
			}
			return nil
		})
	}
	for i, d := range cfg.Demands {
		need := today
		if i < len(cfg.NeededBy) && !cfg.NeededBy[i].IsZero() {
			need = DateOf(cfg.NeededBy[i])
		}
		g.Go(func() error {
			lv, err := p.level(gctx, d, need)
			res.Levels[i] = lv
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	res.p = p
	res.Points = p.points
	res.Runs = p.runs
	if agg != nil {
		res.Aggregated = agg.Levels
		res.Runs += agg.Runs
	}
	res.Wall = time.Since(start).Seconds()
	return res, nil
}

// AggregateSets are the overrides that serve every disaggregated model of
// sc aggregated on the same pools: no disaggregation block, every prefill
// and decode pool prefilling its own prompts. Empty when no model is
// disaggregated.
func AggregateSets(sc *scenarios.Scenario) []string {
	var sets []string
	for _, m := range sc.Models {
		if m.Disaggregation != nil {
			sets = append(sets, "models."+m.Name+".disaggregation=null")
		}
	}
	if len(sets) == 0 {
		return nil
	}
	for _, pl := range sc.Pools {
		if pl.Role == "prefill" || pl.Role == "decode" {
			sets = append(sets, "pools."+pl.Name+".role=both")
		}
		if pl.KVLoadFailurePolicy != "" {
			sets = append(sets, "pools."+pl.Name+".kv_load_failure_policy=")
		}
	}
	return sets
}

// DateOf truncates t to its UTC date: plans work in whole days.
func DateOf(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func (p *planner) committed() []int {
	x := make([]int, len(p.pools))
	for i, pl := range p.pools {
		x[i] = pl.Committed
	}
	return x
}

// CostPerHour is the committed cost, Σ replicas × GPUs per replica × price
// per GPU-hour: an autoscaled pool's count is its reservation, paid for
// used or not. What it spends on demand is measured (eval).
func (p *planner) costPerHour(x []int) float64 {
	c := 0.0
	for i, pl := range p.pools {
		c += float64(x[i]) * pl.ReplicaHour()
	}
	return c
}

// sets are the overrides that run x at demand with fault: a purchasable
// type given replicas joins the fleet when the scenario loads.
func (p *planner) sets(x []int, demand float64, fault string) []string {
	var sets []string
	for i, pl := range p.pools {
		sets = append(sets, fmt.Sprintf("%s.replicas=%d", pl.path, x[i]))
		if pl.Autoscaled {
			// The reservation, held warm: the autoscaler never goes
			// below it, and its grants beyond it are on demand.
			sets = append(sets, fmt.Sprintf("%s.autoscale.min_replicas=%d", pl.path, x[i]),
				fmt.Sprintf("%s.autoscale.max_replicas=%d", pl.path, max(pl.maxAutoscale, x[i])),
				fmt.Sprintf("%s.acquisition.reserved=%d", pl.path, x[i]))
		}
	}
	sets = append(sets, ScaleSets(p.base, demand)...)
	if exps, ok := p.expect[fault]; ok {
		b := jsonText(exps)
		sets = append(sets, "expect="+string(b))
	}
	if fault != "" {
		faults := append(slices.Clip(p.base.Faults), fault)
		b := jsonText(faults) // JSON is YAML
		sets = append(sets, "faults="+string(b))
	}
	return sets
}

// jsonText is a list of strings as JSON, with < and > as they are (they
// are common in expectations, and the text goes on command lines).
func jsonText(list []string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(list) // a []string always encodes
	return bytes.TrimSpace(b.Bytes())
}

func key(x []int, demand float64, fault string) string {
	var b strings.Builder
	for _, v := range x {
		b.WriteString(strconv.Itoa(v))
		b.WriteByte(',')
	}
	fmt.Fprintf(&b, "|%g|%s", demand, fault)
	return b.String()
}

// eval runs one case at the seed p.seeds[si], or returns it from the cache
// (waiting for a run in progress). A run that fails to build counts as not
// passing.
func (p *planner) eval(ctx context.Context, x []int, demand float64, fault string, si int) (*Point, error) {
	k := key(x, demand, fault) + "|" + strconv.Itoa(si)
	p.mu.Lock()
	if pt, ok := p.cache[k]; ok {
		p.mu.Unlock()
		select {
		case <-pt.done:
			return pt, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	pt := &Point{Replicas: slices.Clone(x), Demand: demand, Fault: fault, Seed: p.seeds[si], CostPerHour: p.costPerHour(x), done: make(chan struct{})}
	p.cache[k] = pt
	p.points = append(p.points, pt)
	p.runs++
	p.mu.Unlock()
	defer close(pt.done)

	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.sem }()
	t0 := time.Now()
	sets := p.sets(x, demand, fault)
	if si > 0 {
		sets = append(sets, "seed="+strconv.FormatUint(p.seeds[si], 10))
	}
	sc, err := p.load(sets)
	if err != nil {
		return nil, err // checked at the committed fleet: a planner bug
	}
	// A type bought 0 times is in the fleet at 0 replicas, as today's
	// pools are at 0: a --survive fault on it (or on its region) then has
	// a pool to hit and nothing to lose, instead of failing to build.
	for _, pt := range sc.Purchasable {
		if !slices.ContainsFunc(sc.Pools, func(q scenarios.Pool) bool { return q.Name == pt.Name }) {
			pt.Replicas = 0
			sc.Pools = append(sc.Pools, pt)
		}
	}
	rep, err := twin.Run(ctx, sc, twin.Options{Version: p.cfg.Version})
	pt.WallS = time.Since(t0).Seconds()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		pt.Err = err.Error()
		return pt, nil
	}
	pt.Pass = rep.Passed()
	pt.PerTask = rep.Cost.PerSuccessfulTask
	if h := sc.Duration.D().Hours(); h > 0 {
		for _, name := range slices.Sorted(maps.Keys(rep.Autoscaling)) {
			pt.OnDemand += rep.Autoscaling[name].BurstCost / h
		}
		pt.CostPerHour += pt.OnDemand
	}
	pt.Attainment = 1
	for _, g := range rep.Classes {
		if g.Arrived > 0 {
			pt.Attainment = min(pt.Attainment, g.SLOAttainment.Or(0)) // nothing finished: nothing met
		}
	}
	pt.exps = rep.Expectations
	for _, e := range rep.Expectations {
		if !e.Pass {
			pt.Failed = append(pt.Failed, e.Expr)
		}
	}
	return pt, nil
}

// passes runs x at demand under every case, in parallel, and reports
// whether all pass.
func (p *planner) passes(ctx context.Context, x []int, demand float64) (bool, error) {
	pts, err := p.all(ctx, x, demand)
	if err != nil {
		return false, err
	}
	for _, pt := range pts {
		if !pt.Pass {
			return false, nil
		}
	}
	return true, nil
}

// all runs x at demand under every case at every seed: point c×seeds+s is
// case c at seed s.
func (p *planner) all(ctx context.Context, x []int, demand float64) ([]*Point, error) {
	ns := len(p.seeds)
	pts := make([]*Point, len(p.cases)*ns)
	g, gctx := errgroup.WithContext(ctx)
	for c, f := range p.cases {
		for si := range ns {
			g.Go(func() error {
				pt, err := p.eval(gctx, x, demand, f, si)
				pts[c*ns+si] = pt
				return err
			})
		}
	}
	return pts, g.Wait()
}

// onDemand is x's mean on-demand cost per hour over the healthy runs at
// every seed: what its autoscaled pools spend beyond their reservations.
func (p *planner) onDemand(ctx context.Context, x []int, demand float64) (float64, error) {
	sum := 0.0
	for si := range p.seeds {
		pt, err := p.eval(ctx, x, demand, "", si)
		if err != nil {
			return 0, err
		}
		sum += pt.OnDemand
	}
	return sum / float64(len(p.seeds)), nil
}

// cost is x's cost per hour: committed plus the mean on demand.
func (p *planner) cost(ctx context.Context, x []int, demand float64) (float64, error) {
	od, err := p.onDemand(ctx, x, demand)
	return p.costPerHour(x) + od, err
}

// reserveMore tries, for each autoscaled pool, reserving k more replicas
// while k of them cost less per hour than x spends on demand: a bigger
// reservation can be cheaper when bursts are dear (burst_price) or long.
// It keeps the cheapest passing fleet in x and reports whether it moved.
func (p *planner) reserveMore(ctx context.Context, x []int, demand float64, maxR []int) (bool, error) {
	moved := false
	for i, pl := range p.pools {
		if !pl.Autoscaled {
			continue
		}
		best, err := p.cost(ctx, x, demand)
		if err != nil {
			return false, err
		}
		od := best - p.costPerHour(x)
		var pick []int
		for k := 1; float64(k)*pl.ReplicaHour() < od && x[i]+k <= maxR[i]; k++ {
			y := slices.Clone(x)
			y[i] += k
			ok, err := p.passes(ctx, y, demand)
			if err != nil {
				return false, err
			}
			if !ok {
				continue
			}
			c, err := p.cost(ctx, y, demand)
			if err != nil {
				return false, err
			}
			if c < best-1e-9 {
				best, pick = c, y
			}
		}
		if pick != nil {
			copy(x, pick)
			moved = true
		}
	}
	return moved, nil
}

// level plans one demand level, needed from need.
func (p *planner) level(ctx context.Context, demand float64, need time.Time) (Level, error) {
	caps, held := p.caps(need)
	lv, err := p.search(ctx, demand, caps)
	if err != nil {
		return lv, err
	}
	if !lv.Feasible && len(held) > 0 {
		free, _ := p.caps(time.Time{})
		late, err := p.search(ctx, demand, free)
		if err != nil {
			return lv, err
		}
		if late.Feasible {
			late.Late = true
			late.Note = fmt.Sprintf("no fleet that can arrive by %s meets every expectation (%s held at today's count by lead time); this is the cheapest once its orders arrive",
				need.Format(time.DateOnly), strings.Join(held, ", "))
			lv = late
		} else {
			lv.Note += fmt.Sprintf("; nor with %s free of lead time: %s", strings.Join(held, ", "), late.Note)
		}
	}
	lv.NeededBy = need.Format(time.DateOnly)
	lv.Runs = p.levelRuns(demand)
	if lv.Feasible {
		for _, f := range p.cases {
			lv.Verify = append(lv.Verify, p.verify(lv.Replicas, demand, f))
		}
		for i, pl := range p.pools {
			if lv.Gap[i] <= 0 {
				continue
			}
			o := Order{Pool: pl.Name, Replicas: lv.Gap[i],
				OrderBy:    need.Add(-pl.leadTime).Format(time.DateOnly),
				Arrives:    DateOf(p.today.Add(pl.leadTime + scenarios.Day - 1)).Format(time.DateOnly),
				Late:       need.Add(-pl.leadTime).Before(p.today),
				Commitment: float64(lv.Gap[i]) * pl.ReplicaHour() * pl.MinTermDays * 24}
			lv.Orders = append(lv.Orders, o)
			lv.Commitment += o.Commitment
		}
	}
	return lv, nil
}

// verify is the command line that runs x at demand with fault.
func (p *planner) verify(x []int, demand float64, fault string) string {
	var b strings.Builder
	b.WriteString(p.cfg.Command)
	if p.cfg.Command == "" {
		b.WriteString("fleetdrill run " + shell.Quote(p.base.Name))
	}
	sets := p.sets(x, demand, fault)
	if _, ok := p.expect[fault]; !ok {
		// The case checks the scenario's own expectations: say them, so
		// the command carries one expect, the plan's (Config.Command
		// leaves the user's out).
		sets = append(sets, "expect="+string(jsonText(p.base.Expect)))
	}
	for _, s := range sets {
		b.WriteString(" --set " + shell.Quote(s))
	}
	return b.String()
}

// caps are each pool's most replicas for a level needed from need: the
// provider's limit, or --max-replicas (default max(64, 4 × today's)); a
// pool whose new replicas would arrive after need is held at today's
// count, and named in held. A zero need holds nothing.
func (p *planner) caps(need time.Time) (caps []int, held []string) {
	caps = make([]int, len(p.pools))
	for i, pl := range p.pools {
		caps[i] = p.cfg.MaxReplicas
		if caps[i] <= 0 {
			caps[i] = max(64, 4*pl.Committed)
		}
		if pl.MaxReplicas > 0 {
			caps[i] = min(caps[i], pl.MaxReplicas)
		}
		caps[i] = max(caps[i], pl.Committed)
		if !need.IsZero() && p.today.Add(pl.leadTime).After(need) && caps[i] > pl.Committed {
			caps[i] = pl.Committed
			held = append(held, pl.Name)
		}
	}
	return caps, held
}

// start is where the upper-bound search begins: today's fleet, and each
// purchasable type allowed any at enough replicas to carry alone what
// today's pools serving its models carry (at least 1).
func (p *planner) start(caps []int) []int {
	x := p.committed()
	for i, pl := range p.pools {
		if !pl.Purchasable || caps[i] == 0 {
			continue
		}
		n := 0
		for _, b := range p.pools {
			if b.Purchasable {
				continue
			}
			for _, m := range pl.models {
				if slices.Contains(b.models, m) {
					n += b.Committed
					break
				}
			}
		}
		x[i] = max(x[i], min(max(1, n), caps[i]))
	}
	return x
}

// search finds the cheapest passing fleet within caps at demand.
func (p *planner) search(ctx context.Context, demand float64, maxR []int) (Level, error) {
	lv := Level{Demand: demand}
	n := len(p.pools)
	// An upper bound that passes: the start, doubled until it does.
	x := p.start(maxR)
	for {
		ok, err := p.passes(ctx, x, demand)
		if err != nil {
			return lv, err
		}
		if ok {
			break
		}
		grown := false
		for i := range x {
			y := min(max(1, 2*x[i]), maxR[i])
			grown = grown || y != x[i]
			x[i] = y
		}
		if !grown {
			lv.Note = fmt.Sprintf("no fleet up to %v replicas meets every expectation", maxR)
			pts, err := p.all(ctx, x, demand)
			if err != nil {
				return lv, err
			}
			for _, pt := range pts {
				for _, e := range pt.exps {
					if !e.Pass {
						lv.Note += fmt.Sprintf("; at %v %s: %s (%s)", x, caseName(pt.Fault), e.Expr, measured(e))
					}
				}
				if pt.Err != "" {
					lv.Note += fmt.Sprintf("; at %v %s: %s", x, caseName(pt.Fault), pt.Err)
				}
			}
			return lv, nil
		}
	}
	upper := slices.Clone(x)

	// Coordinate descent, the most expensive replica first.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := p.pools[a].ReplicaHour(), p.pools[b].ReplicaHour()
		switch {
		case ca > cb:
			return -1
		case ca < cb:
			return 1
		}
		return 0
	})
	for improved := true; improved; {
		if err := p.descend(ctx, x, demand, order); err != nil {
			return lv, err
		}
		// The descent stops where no pool can give up a replica alone;
		// pools serving the same model substitute for one another, so
		// also try trading a replica of a dearer pool for cheaper ones.
		var err error
		if improved, err = p.exchange(ctx, x, demand, maxR, order); err != nil {
			return lv, err
		}
	}
	// The descent minimises the committed cost; a pool that bursts
	// may cost less with more reserved. Such a fleet passes (more
	// replicas) and lowers the cost, so no descent undoes it.
	if _, err := p.reserveMore(ctx, x, demand, maxR); err != nil {
		return lv, err
	}

	lv.Feasible = true
	lv.Replicas = x
	od, err := p.onDemand(ctx, x, demand)
	if err != nil {
		return lv, err
	}
	lv.OnDemand = od
	lv.CostPerHour = p.costPerHour(x) + od
	healthy, err := p.eval(ctx, x, demand, "", 0)
	if err != nil {
		return lv, err
	}
	lv.PerTask = healthy.PerTask
	for i, pl := range p.pools {
		lv.Gap = append(lv.Gap, x[i]-pl.Committed)
	}
	// The binding constraints: for each pool, what fails with one fewer.
	final, err := p.all(ctx, x, demand)
	if err != nil {
		return lv, err
	}
	for i := range p.pools {
		if x[i] <= p.floor(i) {
			continue
		}
		y := slices.Clone(x)
		y[i]--
		pts, err := p.all(ctx, y, demand)
		if err != nil {
			return lv, err
		}
		if b, ok := p.binding(i, pts, final); ok {
			lv.Bindings = append(lv.Bindings, b)
		}
	}
	// Exchanges may take a pool past the bound it started from: the grid
	// reaches the plan too.
	for i := range upper {
		upper[i] = max(upper[i], x[i])
	}
	lv.Upper = upper
	lv.Grid = float64(len(p.cases) * len(p.seeds))
	for i, u := range upper {
		lv.Grid *= float64(u - p.floor(i) + 1)
	}
	return lv, nil
}

// descend bisects each pool's count in turn, in order, to the least that
// passes with the others fixed, until a sweep changes nothing. x passes on
// entry and on return.
func (p *planner) descend(ctx context.Context, x []int, demand float64, order []int) error {
	for changed := true; changed; {
		changed = false
		for _, i := range order {
			lo, hi := p.floor(i)-1, x[i] // x[i] passes; find the least passing in (lo, hi]
			for hi-lo > 1 {
				mid := (lo + hi) / 2
				y := slices.Clone(x)
				y[i] = mid
				ok, err := p.passes(ctx, y, demand)
				if err != nil {
					return err
				}
				if ok {
					hi = mid
				} else {
					lo = mid
				}
			}
			if hi != x[i] {
				x[i], changed = hi, true
			}
		}
	}
	return nil
}

// exchange tries, dearest pool first, to trade one replica of pool i for
// k replicas of a cheaper pool j that serves one of its models, for the
// least k that passes while k of j still cost less than one of i. It
// applies the first trade that passes to x and reports whether it found
// one: each trade lowers the cost, so repeating terminates.
func (p *planner) exchange(ctx context.Context, x []int, demand float64, maxR, order []int) (bool, error) {
	for _, i := range order {
		if x[i] <= p.floor(i) {
			continue
		}
		ci := p.pools[i].ReplicaHour()
		for _, j := range slices.Backward(order) {
			cj := p.pools[j].ReplicaHour()
			if j == i || cj >= ci || !p.substitutes(i, j) {
				continue
			}
			for k := 1; float64(k)*cj < ci && x[j]+k <= maxR[j]; k++ {
				y := slices.Clone(x)
				y[i]--
				y[j] += k
				ok, err := p.passes(ctx, y, demand)
				if err != nil {
					return false, err
				}
				if ok {
					copy(x, y)
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// substitutes reports whether pools i and j serve a model in common.
func (p *planner) substitutes(i, j int) bool {
	for _, m := range p.pools[i].models {
		if slices.Contains(p.pools[j].models, m) {
			return true
		}
	}
	return false
}

// floor is the fewest replicas pool i may have: today's with
// KeepCommitted, else 0; an autoscaled pool's at least 1 (min_replicas
// must be).
func (p *planner) floor(i int) int {
	f := 0
	if p.cfg.KeepCommitted {
		f = p.pools[i].Committed
	}
	if p.pools[i].Autoscaled {
		f = max(f, 1)
	}
	return f
}

// binding picks, among the expectations that fail with one fewer replica of
// pool i, the one with the least headroom at the planned fleet.
func (p *planner) binding(i int, fewer, final []*Point) (Binding, bool) {
	best, found := Binding{}, false
	for c, pt := range fewer {
		if pt.Pass {
			continue
		}
		if pt.Err != "" {
			b := Binding{Pool: p.pools[i].Name, Fault: pt.Fault, Seed: pt.Seed, Expr: "the run fails: " + pt.Err, Headroom: math.NaN(), HeadroomRel: math.NaN()}
			if !found {
				best, found = b, true
			}
			continue
		}
		for j, e := range pt.exps {
			if e.Pass {
				continue
			}
			b := Binding{Pool: p.pools[i].Name, Fault: pt.Fault, Seed: pt.Seed, Expr: e.Expr, Value: e.Value, NoData: e.NoData, Headroom: math.NaN(), HeadroomRel: math.NaN()}
			if ex, err := scenarios.ParseExpectation(e.Expr); err == nil {
				b.Threshold = ex.Value
				// No headroom from a value that was not measured.
				if j < len(final[c].exps) && final[c].exps[j].NoData == "" {
					v := final[c].exps[j].Value
					switch ex.Op {
					case "<", "<=":
						b.Headroom = ex.Value - v
					case ">", ">=":
						b.Headroom = v - ex.Value
					}
					if ex.Value != 0 && !math.IsNaN(b.Headroom) {
						b.HeadroomRel = b.Headroom / math.Abs(ex.Value)
					}
				}
			}
			if !found || (!math.IsNaN(b.HeadroomRel) && (math.IsNaN(best.HeadroomRel) || b.HeadroomRel < best.HeadroomRel)) {
				best, found = b, true
			}
		}
	}
	return best, found
}

func (p *planner) levelRuns(demand float64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pt := range p.points {
		if pt.Demand == demand {
			n++
		}
	}
	return n
}

// measured is an expectation's value for the plan's text, or why it has
// none.
func measured(e twin.Expectation) string {
	if e.NoData != "" {
		return "no data: " + e.NoData
	}
	return fmt.Sprintf("value %.4g", e.Value)
}
