package plan

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// Fleet is one replica vector at one demand, over every case: what the
// Pareto front is made of.
type Fleet struct {
	Replicas    []int   `json:"replicas"`
	Demand      float64 `json:"demand"`
	CostPerHour float64 `json:"cost_per_hour"`
	Attainment  float64 `json:"slo_attainment"` // worst class, worst case
	Pass        bool    `json:"pass"`           // every case passed
	Cases       int     `json:"cases"`          // cases evaluated (a search may stop early)
}

// Fleets groups the evaluated points by (replicas, demand). A fleet's cost
// is the mean of its healthy runs' (committed plus on demand), over the
// seeds.
func (r *Result) Fleets() []Fleet {
	idx := map[string]int{}
	var out []Fleet
	var sum []float64
	var n []int
	defer func() {
		for i := range out {
			if n[i] > 0 {
				out[i].CostPerHour = sum[i] / float64(n[i])
			}
		}
	}()
	for _, pt := range r.Points {
		k := key(pt.Replicas, pt.Demand, "")
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Fleet{Replicas: pt.Replicas, Demand: pt.Demand, CostPerHour: pt.CostPerHour, Attainment: 1, Pass: true})
			sum, n = append(sum, 0), append(n, 0)
		}
		if pt.Fault == "" && pt.Err == "" {
			sum[i] += pt.CostPerHour
			n[i]++
		}
		f := &out[i]
		f.Cases++
		f.Pass = f.Pass && pt.Pass
		a := pt.Attainment
		if pt.Err != "" {
			a = 0
		}
		f.Attainment = min(f.Attainment, a)
	}
	return out
}

// Pareto is the cost-versus-attainment front of fleets at one demand: no
// other fleet is both cheaper (or as cheap) and better (or as good). Sorted
// by cost.
func Pareto(fleets []Fleet) []Fleet {
	s := slices.Clone(fleets)
	slices.SortFunc(s, func(a, b Fleet) int {
		if a.CostPerHour != b.CostPerHour {
			if a.CostPerHour < b.CostPerHour {
				return -1
			}
			return 1
		}
		if a.Attainment > b.Attainment {
			return -1
		}
		if a.Attainment < b.Attainment {
			return 1
		}
		return 0
	})
	var front []Fleet
	best := math.Inf(-1)
	for _, f := range s {
		if f.Attainment > best {
			front = append(front, f)
			best = f.Attainment
		}
	}
	return front
}

func caseName(f string) string {
	if f == "" {
		return "healthy"
	}
	return "with " + f
}

// WriteText prints the plan, one block per demand level.
// disaggVerdict says whether disaggregation pays at a level: the split
// plan lv against the same search with every model aggregated (agg).
func disaggVerdict(lv, agg Level, pools []Pool) string {
	fleet := func(l Level) string {
		var parts []string
		for i, pl := range pools {
			if i < len(l.Replicas) && l.Replicas[i] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", l.Replicas[i], pl.Name))
			}
		}
		return strings.Join(parts, " + ")
	}
	switch {
	case !agg.Feasible:
		return "disaggregation pays: served aggregated on the same pools, no fleet the search tried meets every expectation (" + agg.Note + ")"
	case agg.CostPerHour <= lv.CostPerHour:
		return fmt.Sprintf("disaggregation does not pay: served aggregated on the same pools, %s meets every expectation for %.2f/h (split: %.2f/h)",
			fleet(agg), agg.CostPerHour, lv.CostPerHour)
	}
	return fmt.Sprintf("disaggregation pays %.2f/h: served aggregated on the same pools, the cheapest passing fleet is %s at %.2f/h",
		agg.CostPerHour-lv.CostPerHour, fleet(agg), agg.CostPerHour)
}

func WriteText(w io.Writer, r *Result) error {
	var b strings.Builder
	nBuy := 0
	for _, pl := range r.Pools {
		if pl.Purchasable {
			nBuy++
		}
	}
	fmt.Fprintf(&b, "plan %s: %d pools", r.Scenario, len(r.Pools)-nBuy)
	if nBuy > 0 {
		fmt.Fprintf(&b, " and %d purchasable type(s)", nBuy)
	}
	fmt.Fprintf(&b, ", survive %d failure(s), orders from %s", len(r.Faults), r.Today)
	if len(r.Seeds) > 1 {
		fmt.Fprintf(&b, "\n  seeds: every candidate runs at %d seeds (%d..%d, the same for all) and passes only if each passes; verify lines replay seed %d (--set seed=N for the others)",
			len(r.Seeds), r.Seeds[0], r.Seeds[len(r.Seeds)-1], r.Seeds[0])
	}
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "\n  survive: %s", f)
	}
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "\n  %s runs check: %s", c.Case, strings.Join(c.Expect, "; "))
	}
	for _, pl := range r.Pools {
		if pl.Autoscaled {
			fmt.Fprintf(&b, "\n  autoscaled: %s's count is its reservation held warm (replicas = min_replicas = reserved, %.2f/h a replica, committed); what it scales up beyond is on demand, costed from the runs", pl.Name, pl.ReplicaHour())
		}
		if pl.Purchasable {
			fmt.Fprintf(&b, "\n  purchasable: %s at %.2f/h a replica, lead time %s, minimum term %s", pl.Name, pl.ReplicaHour(), days(pl.LeadTimeDays), days(pl.MinTermDays))
			if pl.MaxReplicas > 0 {
				fmt.Fprintf(&b, ", at most %d", pl.MaxReplicas)
			}
			if pl.BoughtBySet {
				fmt.Fprintf(&b, "; %d bought by --set, counted as today's (no lead time or term for those)", pl.Committed)
			}
		}
	}
	b.WriteString("\n\n")
	for _, lv := range r.Levels {
		fmt.Fprintf(&b, "demand ×%g, needed by %s\n", lv.Demand, lv.NeededBy)
		if !lv.Feasible {
			fmt.Fprintf(&b, "  infeasible: %s (%d runs)\n\n", lv.Note, lv.Runs)
			continue
		}
		if lv.Late {
			fmt.Fprintf(&b, "  LATE: %s\n", lv.Note)
		}
		fmt.Fprintf(&b, "  %-24s %8s %6s %6s %10s  %s\n", "pool", "replicas", "today", "gap", "$/h", "lead time")
		for i, pl := range r.Pools {
			gap := fmt.Sprintf("%+d", lv.Gap[i])
			if lv.Gap[i] == 0 {
				gap = "0"
			}
			name := pl.Name
			if pl.Purchasable {
				name += " (buy)"
			}
			if pl.Autoscaled {
				name += " (reserve)"
			}
			fmt.Fprintf(&b, "  %-24s %8d %6d %6s %10.2f  %s\n", name, lv.Replicas[i], pl.Committed, gap,
				float64(lv.Replicas[i])*pl.ReplicaHour(), days(pl.LeadTimeDays))
		}
		today := 0.0
		for _, pl := range r.Pools {
			today += float64(pl.Committed) * pl.ReplicaHour()
		}
		if !autoscaled(r.Pools) {
			fmt.Fprintf(&b, "  cost %.2f/h (today %.2f/h), %.5f per successful task (healthy run)\n", lv.CostPerHour, today, lv.PerTask)
		} else {
			fmt.Fprintf(&b, "  cost %.2f/h (today %.2f/h committed), %.5f per successful task (healthy run)\n", lv.CostPerHour, today, lv.PerTask)
			fmt.Fprintf(&b, "  of which %.2f/h committed and %.2f/h on demand (autoscaled pools' burst beyond their reservations, mean of the healthy runs over %d seed(s))\n",
				lv.CostPerHour-lv.OnDemand, lv.OnDemand, max(len(r.Seeds), 1))
		}
		if len(lv.Bindings) == 0 {
			if autoscaled(r.Pools) {
				b.WriteString("  binding: none (every pool is at its floor, or one fewer passes but costs more on demand)\n")
			} else {
				b.WriteString("  binding: none (every pool is at zero)\n")
			}
		}
		for _, bd := range lv.Bindings {
			head := "n/a"
			if !math.IsNaN(bd.Headroom) {
				head = fmt.Sprintf("%.4g", bd.Headroom)
				if !math.IsNaN(bd.HeadroomRel) {
					head += fmt.Sprintf(" (%.0f%%)", 100*bd.HeadroomRel)
				}
			}
			value := fmt.Sprintf("value %.4g", bd.Value)
			if bd.NoData != "" {
				value = "no data: " + bd.NoData
			}
			at := ""
			if len(r.Seeds) > 1 {
				at = fmt.Sprintf(" at seed %d", bd.Seed)
			}
			fmt.Fprintf(&b, "  binding: %s -1 fails %q %s%s (%s); headroom %s\n",
				bd.Pool, bd.Expr, caseName(bd.Fault), at, value, head)
		}
		if len(lv.Orders) == 0 {
			b.WriteString("  orders: none, today's fleet covers it\n")
		}
		for _, o := range lv.Orders {
			fmt.Fprintf(&b, "  order: +%d %s by %s", o.Replicas, o.Pool, o.OrderBy)
			if o.Late {
				fmt.Fprintf(&b, " — LATE: ordered today it serves from %s", o.Arrives)
			}
			if o.Commitment > 0 {
				fmt.Fprintf(&b, "; commits %.2f over its minimum term", o.Commitment)
			}
			b.WriteString("\n")
		}
		if lv.Commitment > 0 {
			fmt.Fprintf(&b, "  new commitments: %.2f\n", lv.Commitment)
		}
		if li := slices.IndexFunc(r.Levels, func(l Level) bool { return l.Demand == lv.Demand }); li < len(r.Aggregated) {
			b.WriteString("  " + disaggVerdict(lv, r.Aggregated[li], r.Pools) + "\n")
		}
		// One command per case the plan checked: the healthy run, then
		// each survived fault. The healthy one alone would re-check what
		// is least in doubt.
		for i, v := range lv.Verify {
			switch {
			case i == 0:
				fmt.Fprintf(&b, "  verify: %s\n", v)
			case i-1 < len(r.Faults):
				fmt.Fprintf(&b, "  verify through %s: %s\n", r.Faults[i-1], v)
			default:
				fmt.Fprintf(&b, "  verify: %s\n", v)
			}
		}
		fmt.Fprintf(&b, "  search: %d runs at this demand; a full grid up to the upper bound: %.0f runs\n\n", lv.Runs, lv.Grid)
	}
	fmt.Fprintf(&b, "%d runs in %.1fs on %d workers\n", r.Runs, r.Wall, r.Parallel)
	_, err := io.WriteString(w, b.String())
	return err
}

func autoscaled(pools []Pool) bool {
	return slices.ContainsFunc(pools, func(pl Pool) bool { return pl.Autoscaled })
}

// days prints a span of days as a scenario's periods are written.
func days(d float64) string {
	return scenarios.Period(time.Duration(math.Round(d * float64(scenarios.Day)))).String()
}

// WriteJSON writes the plan, every evaluated point included.
func WriteJSON(w io.Writer, r *Result) error {
	type out struct {
		*Result
		Fleets []Fleet `json:"fleets"`
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out{Result: r, Fleets: r.Fleets()})
}

// PlotPareto draws every evaluated fleet's cost per hour against its SLO
// attainment (worst class under the worst case), one colour per demand,
// with each demand's Pareto front as a line, as a PNG (or SVG, PDF by
// extension).
func PlotPareto(path string, r *Result) error {
	p := plot.New()
	p.Title.Text = "plan " + r.Scenario + ": cost vs SLO attainment (worst class, worst case)"
	p.X.Label.Text = "cost per hour"
	p.Y.Label.Text = "SLO attainment"
	p.Legend.Top = false
	p.Legend.Left = false
	fleets := r.Fleets()
	for i, lv := range r.Levels {
		var pts, front plotter.XYs
		var lf []Fleet
		for _, f := range fleets {
			if f.Demand == lv.Demand {
				lf = append(lf, f)
				pts = append(pts, plotter.XY{X: f.CostPerHour, Y: f.Attainment})
			}
		}
		for _, f := range Pareto(lf) {
			front = append(front, plotter.XY{X: f.CostPerHour, Y: f.Attainment})
		}
		c := plotColor(i)
		if len(pts) > 0 {
			s, err := plotter.NewScatter(pts)
			if err != nil {
				return err
			}
			s.GlyphStyle.Color = c
			s.GlyphStyle.Shape = draw.CircleGlyph{}
			p.Add(s)
			p.Legend.Add(fmt.Sprintf("demand ×%g", lv.Demand), s)
		}
		if len(front) > 1 {
			l, err := plotter.NewLine(front)
			if err != nil {
				return err
			}
			l.Color = c
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			p.Add(l)
		}
		if lv.Feasible {
			s, err := plotter.NewScatter(plotter.XYs{{X: lv.CostPerHour, Y: attainmentOf(fleets, lv)}})
			if err != nil {
				return err
			}
			s.GlyphStyle.Color = c
			s.GlyphStyle.Shape = draw.PyramidGlyph{}
			s.GlyphStyle.Radius = vg.Points(6)
			p.Add(s)
		}
	}
	p.Add(plotter.NewGrid())
	return p.Save(20*vg.Centimeter, 14*vg.Centimeter, path)
}

func attainmentOf(fleets []Fleet, lv Level) float64 {
	for _, f := range fleets {
		if f.Demand == lv.Demand && slices.Equal(f.Replicas, lv.Replicas) {
			return f.Attainment
		}
	}
	return math.NaN()
}

func plotColor(i int) color.Color {
	cs := []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}, {148, 103, 189, 255}}
	return cs[i%len(cs)]
}
