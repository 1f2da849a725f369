package scorecard

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// JSON renders the card, indented, with a final newline.
func (c *Card) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func mark(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// itemMark is a gate item's mark: an untested item is neither a pass nor
// a failure.
func itemMark(g GateItem) string {
	if g.Untested {
		return "UNTESTED"
	}
	return mark(g.Pass)
}

// verdict is the gate's mark, with the untested items counted: a gate
// that passes with items untested says so.
func (c *Card) verdict() string {
	n := 0
	for _, g := range c.Gate {
		if g.Untested {
			n++
		}
	}
	if n == 0 {
		return mark(c.Passed)
	}
	if n == 1 {
		return mark(c.Passed) + " (1 item untested)"
	}
	return fmt.Sprintf("%s (%d items untested)", mark(c.Passed), n)
}

// GateText is the production gate as plain lines, for a terminal.
func (c *Card) GateText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scorecard %s --provider %s: gate %s\n", c.Scenario, c.Provider, c.verdict())
	if c.Trial != "" {
		fmt.Fprintf(&b, "  trial: %s\n", c.Trial)
	}
	for _, g := range c.Gate {
		fmt.Fprintf(&b, "  %s  %s: %s\n        $ %s\n", itemMark(g), g.Name, g.Evidence, g.Command)
	}
	fmt.Fprintf(&b, "reproduce: %s\n", c.Command)
	return b.String()
}

// Markdown renders the whole card.
func (c *Card) Markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# Scorecard: %s on %s\n\n", c.Provider, c.Scenario)
	w("Pools: %s (regions: %s). Reproduce: `%s`\n\n", strings.Join(c.Pools, ", "), strings.Join(c.Regions, ", "), c.Command)
	if c.Trial != "" {
		w("Trial: %s.\n\n", c.Trial)
	}
	w("## Production gate: %s\n\n| item | result | evidence | reproduce |\n| --- | --- | --- | --- |\n", c.verdict())
	for _, g := range c.Gate {
		w("| %s | %s | %s | `%s` |\n", g.Name, itemMark(g), cell(g.Evidence), cell(g.Command))
	}
	w("\n")
	if inv := c.Inventory; inv != nil {
		w("## 1. Workload inventory\n\n")
		w("- streams routed to %s: %s\n", c.Provider, strings.Join(inv.Streams, ", "))
		for _, e := range inv.Excluded {
			w("- excluded: %s\n", e)
		}
		w("- %d requests in the measured window, %.3g req/s\n", inv.Requests, inv.RateRPS)
		w("- input tokens: mean %.0f, p50 %d, p99 %d, max %d\n", inv.Input.Mean, inv.Input.P50, inv.Input.P99, inv.Input.Max)
		w("- output tokens: mean %.0f, p50 %d, p99 %d, max %d\n", inv.Output.Mean, inv.Output.P50, inv.Output.P99, inv.Output.Max)
		w("- classes: %s; tenants: %s; models: %s\n", strings.Join(inv.Classes, ", "), strings.Join(inv.Tenants, ", "), strings.Join(inv.Models, ", "))
		for _, t := range inv.Boundaries {
			j := t.Jurisdiction
			if j == "" {
				j = "any"
			}
			w("- tenant %s (jurisdiction %s): %s\n", t.Tenant, j, map[bool]string{true: "may be served here", false: "may not be served here"}[t.Allowed])
		}
		w("\n")
	}
	if p := c.Parity; p != nil {
		w("## 2. Runtime parity: %s\n\n| pool | model | runtime | driver | verdict |\n| --- | --- | --- | --- | --- |\n", mark(p.Pass))
		for _, ch := range p.Checks {
			v := "servable"
			if !ch.Tested {
				v += ", untested"
			}
			if !ch.Servable {
				v = "incompatible: " + strings.Join(ch.Reasons, "; ")
			}
			w("| %s | %s | %s | %s | %s |\n", ch.Pool, ch.Model, ch.Runtime, ch.Driver, cell(v))
		}
		for _, m := range p.NotOffered {
			w("\n- not offered by %s: %s", c.Provider, m)
		}
		for _, n := range p.Notes {
			w("\n- note: %s", n)
		}
		w("\n\n")
	}
	if c.NotRun != "" {
		w("Stages 3-6 not run: %s\n", c.NotRun)
		return b.String()
	}
	if l := c.Latency; l != nil {
		w("## 3. Latency variance: %s\n\nMethod: %s.\n\n", mark(l.Pass), l.Method)
		w("| class | arrived | completed | unanswered | TTFT p50/p90/p95/p99 s | E2E p50/p90/p95/p99 s | SLO |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, name := range slices.Sorted(maps.Keys(l.Classes)) {
			x := l.Classes[name]
			w("| %s | %d | %d | %d | %.3g/%.3g/%.3g/%.3g | %.3g/%.3g/%.3g/%.3g | %s |\n", name, x.Arrived, x.Completed, x.Unanswered,
				x.TTFT.P50, x.TTFT.P90, x.TTFT.P95, x.TTFT.P99, x.E2E.P50, x.E2E.P90, x.E2E.P95, x.E2E.P99, sloString(x.SLO))
		}
		if lv := l.Live; lv != nil {
			w("\nLive replay (%d replica per pool, speed %g, %.0f s wall; evidence, not gating): `%s`\n\n", lv.Replicas, lv.Speed, lv.WallS, lv.Command)
			w("| class | live TTFT p50/p99 s | twin TTFT p50/p99 s | live E2E p50/p99 s | twin E2E p50/p99 s |\n| --- | --- | --- | --- | --- |\n")
			for _, name := range slices.Sorted(maps.Keys(lv.Classes)) {
				x, tw := lv.Classes[name], lv.Twin[name]
				tt, te := "-", "-"
				if tw != nil {
					tt, te = fmt.Sprintf("%.3g/%.3g", tw.TTFT.P50, tw.TTFT.P99), fmt.Sprintf("%.3g/%.3g", tw.E2E.P50, tw.E2E.P99)
				}
				w("| %s | %.3g/%.3g | %s | %.3g/%.3g | %s |\n", name, x.TTFT.P50, x.TTFT.P99, tt, x.E2E.P50, x.E2E.P99, te)
			}
			if len(lv.Breaches) > 0 {
				w("\nLive breaches: %s\n", strings.Join(lv.Breaches, "; "))
			}
		}
		w("\nCold start: ")
		var cs []string
		for _, p := range slices.Sorted(maps.Keys(l.ColdStarts)) {
			cs = append(cs, fmt.Sprintf("%s %gs", p, l.ColdStarts[p]))
		}
		w("%s.\n\nSaturation (provider-only fleet, arrival rates ×m):\n\n", strings.Join(cs, ", "))
		for _, s := range l.Saturation {
			w("- ×%g: %s %s\n", s.Multiplier, mark(s.Pass), strings.Join(s.Breaches, "; "))
		}
		w("\nLast passing multiplier: ×%g", l.LastPassing)
		if n := len(l.Saturation); n > 0 && l.Saturation[n-1].Pass {
			w(" (no SLO broke up to the largest multiplier tried)")
		}
		w("\n\n")
	}
	if bd := c.Boundary; bd != nil {
		w("## 4. Data boundary: %s\n\n| outage | fault | residency violations | boundary | requests lost | bound tenants |\n| --- | --- | --- | --- | --- | --- |\n", mark(bd.Pass))
		for _, o := range bd.Outages {
			name := "none (baseline)"
			if o.Region != "" {
				name = o.Region
				if o.ProviderRegion {
					name += " (provider's)"
				}
			}
			var ts []string
			for _, t := range o.Tenants {
				s := fmt.Sprintf("%s (%s): fails over to [%s]", t.Tenant, t.Jurisdiction, strings.Join(t.FailoverTo, ","))
				if t.Stranded {
					s = fmt.Sprintf("%s (%s): cannot fail over outside %s; unserved during the outage (%d of %d unanswered, %d more than with no outage)",
						t.Tenant, t.Jurisdiction, t.Jurisdiction, t.Unanswered, t.Arrived, t.LostVsBaseline)
				}
				ts = append(ts, s)
			}
			w("| %s | %s | %d | %s | %d | %s |\n", name, cell(o.Fault), o.ResidencyViolations,
				map[bool]string{true: "kept", false: "BROKEN"}[o.BoundaryKept], o.RequestsLost, cell(strings.Join(ts, "; ")))
		}
		w("\n")
	}
	if f := c.Fallback; f != nil {
		w("## 5. Fallback readiness: %s\n\n", mark(f.Pass))
		if f.Note != "" {
			w("%s\n", f.Note)
		}
		for _, d := range f.Drills {
			w("- `%s` on the provider-only fleet: %d requests served by a fallback (%s); %s: %s", d.Fault, d.FallbackRequests,
				strings.Join(d.Fallbacks, ", "), strings.Join(d.Quality, "; "), mark(d.Pass))
			if d.Reason != "" {
				w(" (%s)", d.Reason)
			}
			w("\n")
		}
		w("\nRollback to the incumbent (a canary of the provider on the whole fleet, browned out; bound: the window plus one evaluation):\n\n")
		if f.CanaryNote != "" {
			w("%s\n\n", f.CanaryNote)
		}
		if len(f.Canaries) > 0 {
			w("| model | candidate | tenants | share | brownout | rolled back after | requests lost | result |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
		}
		for _, c := range f.Canaries {
			ttr := "never"
			if c.TimeToRollbackS >= 0 {
				ttr = fmt.Sprintf("%gs (bound %gs)", c.TimeToRollbackS, c.BoundS)
			}
			res := mark(c.Pass)
			if c.Reason != "" {
				res += ": " + c.Reason
			}
			w("| %s | %s | %s | %g%% | %s | %s | %d (other tenants %d) | %s |\n", c.Model, strings.Join(c.Candidate, ", "), strings.Join(c.Tenants, ", "),
				c.Share*100, cell(strings.Join(c.Faults, "; ")), ttr, c.RequestsLost, c.OthersLost, cell(res))
		}
	}
	if a := c.Acquisition; a != nil {
		a.markdown(w)
	}
	return b.String()
}

// markdown renders stage 6.
func (a *Acquisition) markdown(w func(string, ...any)) {
	res := mark(a.Pass)
	if a.Untested {
		res = "UNTESTED"
	}
	w("\n## 6. Acquisition reliability: %s\n\n", res)
	if a.Note != "" {
		w("%s.\n\n", a.Note)
	}
	w("Method: %s. Load step ×%g: %s. Seeds %s, %gs each. Reproduce (first seed): `%s`", a.Method, a.Step, a.StepWhy,
		joinSeeds(a.Seeds), a.DurationS, a.Command)
	if a.AsAsked != "" {
		w("; as asked: `%s`", a.AsAsked)
	}
	w("\n\n")
	if len(a.Faults) > 0 {
		w("Faults in the drill: %s.\n\n", strings.Join(a.Faults, "; "))
	}
	w("Bars: granted share >= %s; time to serving p90 <= the declared delay's p90 + cold start + %gs; SLO attainment at most %s below the drill as asked.\n\n",
		pct(a.Thresholds.MinGrantedShare), a.Thresholds.ServingSlackS, points(a.Thresholds.MaxSLODrop))
	w("| pool | acquisition | autoscale in the drill | replicas asked | granted | asks refused / made | to serving p50/p90/worst p90/max s | bound s | not serving at end | peak serving / max | burst cost | result |\n")
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, p := range a.Pools {
		decl, res := p.Declared, mark(p.GrantedPass && p.ServingPass)
		switch {
		case !p.Tested:
			decl, res = "none: unknown", "UNTESTED"
		case p.Replicas == 0:
			res = "NOT ASKED"
		}
		share := "-"
		if p.GrantedShare >= 0 {
			share = pct(p.GrantedShare)
		}
		refused := fmt.Sprintf("%d / %d", p.Refused, p.Asks)
		if p.Refused > 0 {
			refused += " (" + refusedBy(p) + ")"
		}
		w("| %s | %s | %s | %d | %d (%s, %d reserved) | %s | %g/%g/%g/%g | %g | %d | %d / %d | %.4g | %s |\n", p.Pool, cell(decl), cell(p.Autoscale),
			p.Replicas, p.Granted, share, p.Reserved, refused, p.ToServing.P50, p.ToServing.P90, p.ToServing.WorstP90,
			p.ToServing.Max, p.BoundS, p.NotServing, p.MaxServing, p.MaxReplicas, p.BurstCost, res)
	}
	for _, p := range a.Pools {
		var ps []string
		for _, x := range p.PerSeed {
			if x.Replicas == 0 {
				ps = append(ps, fmt.Sprintf("seed %d: asked for nothing", x.Seed))
				continue
			}
			t := "none served"
			if x.Served > 0 {
				t = fmt.Sprintf("to serving p90 %gs", x.ToServingP90)
			}
			ps = append(ps, fmt.Sprintf("seed %d: %d of %d granted, %d asks refused, %s", x.Seed, x.Granted, x.Replicas, x.Refused, t))
		}
		w("\n- %s per seed: %s", p.Pool, strings.Join(ps, "; "))
	}
	w("\n")
	w("\nSLO attainment over the drill (mean of the seeds, worst seed) against the drill as asked:\n\n| class or tenant | arrived | attainment | worst seed | as asked | drop |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, g := range []struct {
		kind string
		list []Shortfall
	}{{"class", a.Classes}, {"tenant", a.Tenants}} {
		for _, s := range g.list {
			w("| %s %s | %d | %s | %s | %s | %s |\n", g.kind, s.Name, s.Arrived, pct(s.Mean), pct(s.Worst), pct(s.AsAsked), points(s.Drop))
		}
	}
}

func joinSeeds(seeds []uint64) string {
	s := make([]string, len(seeds))
	for i, x := range seeds {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
