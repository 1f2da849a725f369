package twin

import (
	"fmt"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// CoreConfig resolves a validated scenario into the scheduler core's
// configuration, exactly as a twin run does: the live gateway drives a core
// built by the same code, so a policy proven in the twin is the one that runs
// live. It applies the scenario's defaults (scenarios.ApplyDefaults) to sc.
// The config's replicas are the scenario pools' replicas, in pool order.
//
// A scenario with an autoscaled pool is refused: the twin builds such a
// pool at max_replicas, most absent, and the live fleet, which does not
// autoscale yet, starts `replicas` of it, so replica indexes would not
// match.
func CoreConfig(sc *scenarios.Scenario) (sched.Config, error) {
	for i, ps := range sc.Pools {
		if ps.Autoscale != nil {
			return sched.Config{}, fmt.Errorf("pools[%d] (%s).autoscale: the live gateway does not autoscale yet; run it in the twin, or remove autoscale to run it live", i, ps.Name)
		}
	}
	p, err := build(sc)
	if err != nil {
		return sched.Config{}, err
	}
	return p.core, nil
}
