package compile

import (
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// CoreConfig resolves a validated scenario into the scheduler core's
// configuration, exactly as a twin run does: the live gateway drives a core
// built by the same code, so a policy proven in the twin is the one that runs
// live. It applies the scenario's defaults (scenarios.ApplyDefaults) to sc.
// The config's replicas are the scenario pools' replicas, in pool order.
//
// An autoscaled pool's replicas are its maximum, those beyond `replicas`
// absent (sched.Replica.Absent): the gateway's scaler provisions them.
func CoreConfig(sc *scenarios.Scenario) (sched.Config, error) {
	p, err := Compile(sc)
	if err != nil {
		return sched.Config{}, err
	}
	return p.Core, nil
}
