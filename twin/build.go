package twin

import (
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/fleet"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// plan is a scenario resolved into indexes, profiles and the core's
// configuration (compile.Plan's, in the twin's names) and the workload's
// streams: everything a run needs that does not change while it runs.
type plan struct {
	sc       *scenarios.Scenario
	registry *fleet.Registry
	retry    sched.RetryPolicy
	core     sched.Config

	models   map[string]int
	tenants  map[string]int
	classes  map[string]int
	pools    []poolPlan
	replicas []replicaPlan
	links    []*compile.Link // per model: a disaggregated model's KV link
	streams  []streamPlan
}

// poolPlan is a compiled pool (compile.Pool: its spec, region, verdicts,
// profiles and first replica).
type poolPlan = compile.Pool

// replicaPlan is a compiled replica (compile.Replica: its pool and model).
type replicaPlan = compile.Replica

type streamPlan struct {
	spec   *scenarios.Stream
	tenant int
	class  int
	model  int
}

// build resolves a validated scenario: its compiled Plan (twin/compile,
// the code the live gateway and node configure themselves with) and the
// workload's streams. Its error is Compile's, every problem at once.
func build(sc *scenarios.Scenario) (*plan, error) {
	c, err := compile.Compile(sc)
	p := &plan{sc: sc, registry: c.Registry, retry: c.Retry, core: c.Core,
		models: c.Models, tenants: c.Tenants, classes: c.Classes}
	p.pools, p.replicas, p.links = c.Pools, c.Replicas, c.Links
	for si := range sc.Workload {
		st := &sc.Workload[si]
		p.streams = append(p.streams, streamPlan{spec: st, tenant: p.tenants[st.Tenant], class: p.classes[st.Class], model: p.models[st.Model]})
	}
	return p, err
}
