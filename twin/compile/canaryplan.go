package compile

import (
	"hash/fnv"
	"math"
	"slices"
	"strconv"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// canaryRoutes resolves the scenario's canaries to the core's indexes. A
// tenant is eligible only where a candidate pool may serve it (its
// jurisdiction), so residency holds for every canary and shadow request by
// construction; the core checks it again per request. A trigger against
// the SLO takes the tightest objective of the eligible classes.
func canaryRoutes(sc *scenarios.Scenario, p *Plan) []sched.CanaryRoute {
	var out []sched.CanaryRoute
	for _, c := range sc.Canaries {
		cr := sched.CanaryRoute{Name: c.Name, Model: p.Models[c.Model], Seed: canarySeed(sc.Seed, c.Name)}
		var jurs []string
		for _, name := range c.Candidate {
			for pi := range sc.Pools {
				if sc.Pools[pi].Name == name {
					cr.Pools = append(cr.Pools, pi)
					jurs = append(jurs, p.Core.Pools[pi].Jurisdiction)
				}
			}
		}
		cr.Tenants = make([]bool, len(sc.Tenants))
		for i, t := range sc.Tenants {
			cr.Tenants[i] = (len(c.Tenants) == 0 || slices.Contains(c.Tenants, t.Name)) &&
				(len(c.Jurisdictions) == 0 || slices.Contains(c.Jurisdictions, t.Jurisdiction)) &&
				(t.Jurisdiction == "" || slices.Contains(jurs, t.Jurisdiction))
		}
		if len(c.Classes) > 0 {
			cr.Classes = make([]bool, len(sc.Classes))
			for i, cl := range sc.Classes {
				cr.Classes[i] = slices.Contains(c.Classes, cl.Name)
			}
		}
		if sh := c.Shadow; sh != nil {
			cr.ShadowShare = sh.Share
			slots := 0
			for _, pi := range cr.Pools {
				pl := sc.Pools[pi]
				mb := pl.MaxBatch
				if pl.Service != nil {
					mb = 1
				}
				slots += pl.Replicas * mb
			}
			cr.ShadowSlots = max(1, int(math.Floor(sh.MaxSlots*float64(slots))))
		}
		spec := sched.RolloutSpec{Start: c.Start.D(), Every: c.EvaluateEvery.D(), Window: c.Window.D(),
			MinRequests: c.MinRequests, BreachFor: c.BreachFor, Hold: c.OnBreach == scenarios.OnBreachHold,
			ClearBelow: c.ClearBelow}
		for _, st := range c.Steps {
			spec.Steps = append(spec.Steps, sched.RolloutStep{Share: st.Share, For: st.For.D()})
		}
		for _, line := range c.RollbackIf {
			t, err := scenarios.ParseCanaryTrigger(line)
			if err != nil {
				continue // the loader refused it already
			}
			rt := sched.RolloutTrigger{Text: line, Figure: t.Figure, Quantile: t.Quantile, Below: t.Below,
				Value: t.Value, Baseline: t.Baseline}
			if t.SLO {
				rt.Value = tightestSLO(sc, c, t.Figure)
			}
			spec.Triggers = append(spec.Triggers, rt)
		}
		cr.Rollout = spec
		out = append(out, cr)
	}
	return out
}

// tightestSLO is the smallest objective for figure (ttft or e2e), in
// seconds, among the canary's eligible classes.
func tightestSLO(sc *scenarios.Scenario, c scenarios.Canary, figure string) float64 {
	best := math.Inf(1)
	for _, cl := range sc.Classes {
		if len(c.Classes) > 0 && !slices.Contains(c.Classes, cl.Name) {
			continue
		}
		d := cl.SLO.TTFT
		if figure == scenarios.FigE2E {
			d = cl.SLO.E2E
		}
		if d > 0 {
			best = math.Min(best, d.D().Seconds())
		}
	}
	return best
}

// canarySeed derives a canary's draw seed from the run's seed and its
// name, so two canaries draw independently and a canary's draws do not
// move when another is added.
func canarySeed(seed uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatUint(seed, 10) + "/canary/" + name))
	return h.Sum64()
}
