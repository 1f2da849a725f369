package plan

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/sweep"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// The plan's search is sequential (each bisection step depends on the one
// before), so it runs on the local cores. What a cluster can do is the
// exhaustive check the search avoids: every fleet from each pool's floor to
// the level's upper bound, under every case. GridSpec writes that grid as a
// sweep spec (docs/sweeps.md); CheckGrid reads the merged sweep and says
// whether some fleet of the grid is cheaper than the plan's.

// gridPoint names a grid entry: level and case indices, before the sets.
func gridPoint(level, c int) string { return fmt.Sprintf("level=%d,case=%d", level, c) }

// GridSpec is the sweep spec of every feasible level's full grid: one grid
// entry per (level, case), the pools' replica counts varying from floor to
// upper bound, the level's demand and the case's fault and expectations as
// one-valued parameters, over the plan's seeds (a fleet passes when its
// expectations.failed is 0 at every seed). scenario is the spec's scenario: a library name, or a path
// relative to where the spec will be written; sets are the user's.
func GridSpec(r *Result, scenario string, sets []string) ([]byte, error) {
	if r.p == nil {
		return nil, fmt.Errorf("plan: the result has no planner (read from JSON?)")
	}
	p := r.p
	if err := gridCanBuild(p); err != nil {
		return nil, err
	}
	for _, pl := range p.pools {
		if pl.Autoscaled {
			return nil, fmt.Errorf("pool %s is autoscaled: the plan sets its replicas, autoscale.min_replicas and acquisition.reserved together, which a sweep grid (each key varied on its own) cannot; check it with --seeds instead", pl.Name)
		}
	}
	root := &yaml.Node{Kind: yaml.MappingNode}
	add := func(m *yaml.Node, k string, v *yaml.Node) {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
	}
	str := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Value: s, Style: yaml.DoubleQuotedStyle}
	}
	list := func(vals ...string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, v := range vals {
			e := str(v)
			if _, err := strconv.ParseUint(v, 10, 64); err == nil {
				e.Style = 0 // a count or a seed reads better bare
			}
			n.Content = append(n.Content, e)
		}
		return n
	}
	add(root, "scenario", str(scenario))
	// The spec's seeds carry the seed (the sweep refuses seed= in sets).
	sets = slices.DeleteFunc(slices.Clone(sets), func(s string) bool {
		k, _, _ := strings.Cut(s, "=")
		return strings.TrimSpace(k) == "seed"
	})
	if len(sets) > 0 {
		n := list(sets...)
		n.Style = 0
		add(root, "sets", n)
	}
	points := &yaml.Node{Kind: yaml.SequenceNode}
	runs := 0
	for li, lv := range r.Levels {
		if !lv.Feasible {
			continue
		}
		for ci, f := range p.cases {
			grid := &yaml.Node{Kind: yaml.MappingNode}
			n := 1
			for i, pl := range p.pools {
				var vals []string
				for v := p.floor(i); v <= lv.Upper[i]; v++ {
					vals = append(vals, strconv.Itoa(v))
				}
				n *= len(vals)
				add(grid, pl.path+".replicas", list(vals...))
			}
			for _, s := range p.sets(lv.Upper, lv.Demand, f)[len(p.pools):] {
				k, v, _ := strings.Cut(s, "=")
				add(grid, k, list(v))
			}
			entry := &yaml.Node{Kind: yaml.MappingNode}
			add(entry, "name", str(gridPoint(li, ci)))
			add(entry, "grid", grid)
			points.Content = append(points.Content, entry)
			runs += n
		}
	}
	if len(points.Content) == 0 {
		return nil, fmt.Errorf("plan: no demand level has a plan, so there is no grid to check")
	}
	add(root, "points", points)
	var seeds []string
	for _, s := range p.seeds {
		seeds = append(seeds, strconv.FormatUint(s, 10))
	}
	add(root, "seeds", list(seeds...))
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The full grid fleetdrill plan %s pruned: %d runs. Run it with\n#   fleetdrill sweep run FILE --out results  (or fleetdrill sweep FILE --emit k8s ...)\n# then check the plan against it with the same plan arguments and --check-grid results.\n", r.Scenario, runs)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// gridCanBuild refuses a grid whose runs would not build outside the
// planner: the plan puts a type bought 0 times in the fleet at 0 replicas,
// so a failure on it (or on a region only such types are in) has a pool
// to hit; a plain `fleetdrill run` leaves the type out, and the fault then
// hits nothing.
func gridCanBuild(p *planner) error {
	for _, f := range p.cfg.Survive {
		sp, err := faults.Parse(f)
		if err != nil {
			return err
		}
		t := sp.Target
		for _, pl := range p.pools {
			if pl.Purchasable && pl.Committed == 0 && t.Pool == pl.Name {
				return fmt.Errorf("--survive %q hits the purchasable type %s, which a grid run buying none of it leaves out of the fleet; the grid cannot check this plan", f, pl.Name)
			}
		}
		if t.Region != "" && !slices.ContainsFunc(p.base.Pools, func(q scenarios.Pool) bool { return q.Region == t.Region }) {
			return fmt.Errorf("--survive %q hits region %s, where only purchasable types are; a grid run buying none of them has no pool there, so the grid cannot check this plan", f, t.Region)
		}
	}
	return nil
}

// GridCheck is one level's plan against the cheapest fleet of its grid
// that passes every case.
type GridCheck struct {
	Demand   float64 `json:"demand"`
	Fleets   int     `json:"fleets"`  // replica vectors in the grid
	Passing  int     `json:"passing"` // of which pass every case
	Best     []int   `json:"best"`
	BestCost float64 `json:"best_cost_per_hour"`
	PlanCost float64 `json:"plan_cost_per_hour"`
	// Cheaper: the grid holds a passing fleet cheaper than the plan's (the
	// search's local optimum is not the grid's).
	Cheaper bool `json:"cheaper"`
}

// CheckGrid reads a merged sweep of GridSpec's spec and finds, per level,
// the cheapest fleet that passes every case (no expectation failed).
func CheckGrid(r *Result, rep *sweep.Report) ([]GridCheck, error) {
	p := r.p
	if p == nil {
		return nil, fmt.Errorf("plan: the result has no planner")
	}
	path := map[string]int{}
	for i, pl := range p.pools {
		path[pl.path+".replicas"] = i
	}
	type fleet struct {
		x     []int
		cases int
		pass  bool
	}
	byLevel := map[int]map[string]*fleet{}
	for _, a := range rep.Aggregates {
		head, _, ok := strings.Cut(a.Point, ":")
		var li, ci int
		if _, err := fmt.Sscanf(head, "level=%d,case=%d", &li, &ci); !ok || err != nil || li >= len(r.Levels) || ci >= len(p.cases) {
			return nil, fmt.Errorf("plan: sweep point %q is not a point of this plan's grid", a.Point)
		}
		var pt *sweep.Point
		for k := range rep.Points {
			if rep.Points[k].Name == a.Point {
				pt = &rep.Points[k]
				break
			}
		}
		if pt == nil {
			return nil, fmt.Errorf("plan: sweep point %q has no sets", a.Point)
		}
		x := make([]int, len(p.pools))
		for _, s := range pt.Sets {
			k, v, _ := strings.Cut(s, "=")
			if i, ok := path[k]; ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("plan: sweep point %q: %q is not a count", a.Point, s)
				}
				x[i] = n
			}
		}
		failed := -1.0
		for _, f := range a.Figures {
			if f.Name == "expectations.failed" && f.N > 0 {
				failed = f.Mean
			}
		}
		if failed < 0 {
			return nil, fmt.Errorf("plan: sweep point %q has no expectations.failed figure (its run failed?)", a.Point)
		}
		if byLevel[li] == nil {
			byLevel[li] = map[string]*fleet{}
		}
		k := key(x, 0, "")
		fl := byLevel[li][k]
		if fl == nil {
			fl = &fleet{x: x, pass: true}
			byLevel[li][k] = fl
		}
		fl.cases++
		fl.pass = fl.pass && failed == 0
	}
	var out []GridCheck
	for li, lv := range r.Levels {
		if !lv.Feasible {
			continue
		}
		fleets := byLevel[li]
		if len(fleets) == 0 {
			return nil, fmt.Errorf("plan: the sweep has no runs of demand ×%g; was it made by plan --emit-grid with these arguments?", lv.Demand)
		}
		gc := GridCheck{Demand: lv.Demand, Fleets: len(fleets), PlanCost: lv.CostPerHour}
		for _, k := range slices.Sorted(maps.Keys(fleets)) {
			fl := fleets[k]
			if fl.cases != len(p.cases) {
				return nil, fmt.Errorf("plan: fleet %v of demand ×%g ran %d of %d cases; the sweep is incomplete", fl.x, lv.Demand, fl.cases, len(p.cases))
			}
			if !fl.pass {
				continue
			}
			gc.Passing++
			if c := p.costPerHour(fl.x); gc.Best == nil || c < gc.BestCost || c == gc.BestCost && slices.Compare(fl.x, gc.Best) < 0 {
				gc.Best, gc.BestCost = fl.x, c
			}
		}
		gc.Cheaper = gc.Best != nil && gc.BestCost < lv.CostPerHour-1e-9
		out = append(out, gc)
	}
	return out, nil
}
