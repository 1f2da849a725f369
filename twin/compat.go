package twin

import (
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/fleet"
)

// Pairing is the compatibility of one pool with one model of the catalogue.
type Pairing struct {
	Pool, Model string
	Verdict     fleet.Verdict
	// Routable: the pool lists the model, the pairing is compatible, and
	// tested or allowed untested by the policy.
	Routable bool
}

// Compatibility answers, for every pool and every model of the scenario,
// whether the pool can serve the model and why not: the registry's view,
// which routing obeys.
func Compatibility(sc *scenarios.Scenario) []Pairing {
	p, _ := build(sc) // a pool that serves nothing is exactly what this shows
	var out []Pairing
	for pi, pp := range p.pools {
		for mi, m := range sc.Models {
			out = append(out, Pairing{Pool: pp.Spec.Name, Model: m.Name, Verdict: pp.Verdicts[mi],
				Routable: p.core.Pools[pi].Serves[mi]})
		}
	}
	return out
}
