package liverun

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/livefleet"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/fleet"
)

// quotaRetryAfter is the Retry-After of a provider with no quota left: the
// twin's (zeroQuotaRetryAfter in twin/faults.go), as the emulated node's
// admin API gives it.
const quotaRetryAfter = 30 * time.Second

// A gatewayFault turns the HTTP-level part of a fault (its kind's
// faults.Traits.Live has LiveGateway) into the gateway fault layer's fault
// for the replicas of one pool it hits; false when it has none there.
type gatewayFault func(sc *scenarios.Scenario, sp faults.Spec, pool string) (gateway.UpstreamFault, bool)

// gatewayFaults holds the gatewayFault of every kind with LiveGateway: what
// the node's admin API answered before, now the same in front of any
// backend. Adding a LiveGateway kind is its row here
// (TestGatewayFaultsMatchTraits).
var gatewayFaults = map[faults.Kind]gatewayFault{
	// A quota of zero (the only one emulated live, faults.Spec.LiveGap):
	// every attempt gets 429 with the twin's Retry-After.
	faults.QuotaExhaustion: func(_ *scenarios.Scenario, sp faults.Spec, _ string) (gateway.UpstreamFault, bool) {
		return gateway.UpstreamFault{Kind: string(sp.Kind), Status: http.StatusTooManyRequests, Code: "insufficient_quota",
			Message:    fmt.Sprintf("You exceeded your current quota (injected fault); retry after %v.", quotaRetryAfter),
			RetryAfter: quotaRetryAfter}, true
	},
	// From at= (the notice is the gateway's SetRetiring): the model's
	// attempts get 404 model_not_found.
	faults.ModelRetirement: func(_ *scenarios.Scenario, sp faults.Spec, _ string) (gateway.UpstreamFault, bool) {
		m := sp.Target.Model
		return gateway.UpstreamFault{Kind: string(sp.Kind), Models: []string{m}, Status: http.StatusNotFound, Code: "model_not_found",
			Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", m)}, true
	},
	// The models the pool cannot run on the new driver (and runtime) get
	// 503, as the compatibility registry (the twin's too) decides; the replicas'
	// restart is the kind's (faults.Traits.Restarts).
	faults.DriverUpgrade: func(sc *scenarios.Scenario, sp faults.Spec, pool string) (gateway.UpstreamFault, bool) {
		ms := incompatible(sc, pool, sp.Driver, sp.Runtime)
		if len(ms) == 0 {
			return gateway.UpstreamFault{}, false
		}
		return gateway.UpstreamFault{Kind: string(sp.Kind), Models: ms, Status: http.StatusServiceUnavailable, Code: "model_incompatible",
			Message: fmt.Sprintf("pool %s cannot run this model on driver %s (injected fault)", pool, sp.Driver)}, true
	},
	faults.ErrorBurst: func(_ *scenarios.Scenario, sp faults.Spec, _ string) (gateway.UpstreamFault, bool) {
		return gateway.UpstreamFault{Kind: string(sp.Kind), FailRate: sp.FailRate}, true
	},
	// The fail rate; the added latency is a toxic on the fleet's proxies,
	// which the gateway's 500s do not cross: they come after it, as the
	// twin fails a brownout's attempts.
	faults.Brownout: func(_ *scenarios.Scenario, sp faults.Spec, _ string) (gateway.UpstreamFault, bool) {
		if sp.FailRate == 0 {
			return gateway.UpstreamFault{}, false
		}
		return gateway.UpstreamFault{Kind: string(sp.Kind), FailRate: sp.FailRate, ErrorDelay: sp.AddLatency}, true
	},
}

// routeChanged tells the run of a route change a fault made: model taken
// from pool (reasons: why it cannot run there) or given back (none), the
// route table's version after it. nil: nobody is told.
type routeChanged func(model, pool string, reasons []string, version int)

// withRoutes takes from the driver upgrade's pools the models the
// compatibility registry says they cannot run on the new driver (and
// runtime), the registry's verdict that the twin's upgradeDriver reads too: the core routes them
// elsewhere from now, and the run puts a route change on the timeline,
// which detects the fault (twin.Recorder.RouteChange). The returned undo
// gives them back (the rollback) after undo. The fault layer's 503s for
// those models stay behind them, for an attempt already on its way.
func withRoutes(sc *scenarios.Scenario, gw *gateway.Gateway, spec faults.Spec, replicas []int, route routeChanged,
	undo livefleet.Undo) livefleet.Undo {
	type off struct{ pool, model string }
	var taken []off
	set := func(pool, model string, on bool, reasons []string) {
		v, changed, err := gw.SetServes(pool, model, on)
		if err != nil || !changed {
			return // a model of the pool, by construction
		}
		if !on {
			taken = append(taken, off{pool, model})
		}
		if route != nil {
			route(model, pool, reasons, v)
		}
	}
	var pools []string
	names := replicaPools(sc)
	for _, ri := range replicas {
		if !slices.Contains(pools, names[ri]) {
			pools = append(pools, names[ri])
		}
	}
	for _, p := range pools {
		for m, why := range incompatibleWhy(sc, p, spec.Driver, spec.Runtime) {
			set(p, m, false, why)
		}
	}
	return func(ctx context.Context) error {
		err := undo(ctx)
		if isFinalUndo(ctx) {
			return err // the replay is over: no rollback to record
		}
		for _, o := range taken {
			set(o.pool, o.model, true, nil)
		}
		return err
	}
}

// finalUndo marks the context of the undos run once a replay is over
// (withFinalUndo): what a fault leaves then is cleaned up, but no replica
// restarts: there is no run left to load in, and the twin restarts none
// for a fault still on at its end.
type finalUndo struct{}

func withFinalUndo(ctx context.Context) context.Context {
	return context.WithValue(ctx, finalUndo{}, true)
}

func isFinalUndo(ctx context.Context) bool { return ctx.Value(finalUndo{}) != nil }

// restart restarts replicas now: the gateway first (the instant the twin
// restarts them), then what serves them, when restartInstances.
func restart(ctx context.Context, h *hybrid, gw *gateway.Gateway, replicas []int, instances bool) error {
	if _, err := gw.Restart(replicas); err != nil {
		return err
	}
	if !instances {
		return nil
	}
	return h.restartInstances(ctx, replicas)
}

// incompatible lists the models pool serves that it cannot run with driver
// (and runtime, when not ""), by the scenario's compatibility registry, as
// the twin's driver upgrade re-evaluates them (twin/faults.go
// upgradeDriver; untested pairings are never routed to, so the verdict's
// Servable is what changes).
func incompatible(sc *scenarios.Scenario, pool, driver, runtime string) []string {
	var out []string
	for m := range incompatibleWhy(sc, pool, driver, runtime) {
		out = append(out, m)
	}
	return out
}

// incompatibleWhy is incompatible, in the pool's model order, with the
// registry's reasons for each.
func incompatibleWhy(sc *scenarios.Scenario, pool, driver, runtime string) iter.Seq2[string, []string] {
	return func(yield func(string, []string) bool) {
		for _, m := range incompatibleVerdicts(sc, pool, driver, runtime) {
			if !yield(m.model, m.reasons) {
				return
			}
		}
	}
}

type modelVerdict struct {
	model   string
	reasons []string
}

func incompatibleVerdicts(sc *scenarios.Scenario, pool, driver, runtime string) []modelVerdict {
	i := slices.IndexFunc(sc.Pools, func(p scenarios.Pool) bool { return p.Name == pool })
	if i < 0 {
		return nil
	}
	ps := sc.Pools[i]
	fp := fleet.Pool{Name: ps.Name, Region: ps.Region, Accelerator: ps.Accelerator, GPUsPerReplica: ps.GPUsPerReplica,
		Runtime: ps.Runtime, Driver: driver, Models: ps.Models, Service: ps.Service != nil}
	if runtime != "" {
		fp.Runtime = runtime
	}
	reg := compile.Registry(sc)
	var out []modelVerdict
	for _, m := range ps.Models {
		if v := reg.Check(&fp, m); !v.Servable {
			out = append(out, modelVerdict{m, v.Reasons})
		}
	}
	return out
}

// replicaPools returns the pool of each replica of sc, in the order the
// twin, the fleet and the gateway number them.
func replicaPools(sc *scenarios.Scenario) []string {
	var out []string
	for i := range sc.Pools {
		for range compile.PoolReplicas(&sc.Pools[i]) {
			out = append(out, sc.Pools[i].Name)
		}
	}
	return out
}

// injectSpec applies spec now on the given replicas (a twin.FaultPlan's): its
// HTTP-level part in the gateway's fault layer (faults.LiveGateway, one
// fault per pool), its part on the fleet through livefleet.InjectOn
// (toxiproxy, containers). The undo removes both.
func injectSpec(ctx context.Context, sc *scenarios.Scenario, h *hybrid, gw *gateway.Gateway, spec faults.Spec, replicas []int,
	route routeChanged) (livefleet.Undo, error) {
	undo, err := injectParts(ctx, sc, h, gw, spec, replicas)
	if err != nil {
		return nil, err
	}
	if spec.Kind == faults.DriverUpgrade {
		undo = withRoutes(sc, gw, spec, replicas, route, undo)
	}
	// The twin restarts the replicas at these instants too (its
	// faultWorld.restart reads the same trait).
	on := spec.Kind.Traits().Restarts
	if on == (faults.Restarts{}) {
		return undo, nil
	}
	if on.AtStart {
		if err := restart(ctx, h, gw, replicas, true); err != nil {
			return nil, errors.Join(err, undo(ctx))
		}
	}
	return func(ctx context.Context) error {
		if !on.AtEnd || isFinalUndo(ctx) {
			return undo(ctx)
		}
		// A lost node's undo starts its instance again: the gateway's
		// restart comes first, so that the load counts from the
		// fault's end, not from when a container answers.
		_, err := gw.Restart(replicas)
		err = errors.Join(err, undo(ctx))
		if spec.Kind.Traits().Live&faults.LiveContainer == 0 {
			err = errors.Join(err, h.restartInstances(ctx, replicas))
		}
		return err
	}, nil
}

// injectParts is injectSpec bar the restarts: the fault's parts in the
// gateway's fault layer and on the fleet.
func injectParts(ctx context.Context, sc *scenarios.Scenario, h *hybrid, gw *gateway.Gateway, spec faults.Spec, replicas []int) (livefleet.Undo, error) {
	live := spec.Kind.Traits().Live
	if live&faults.LiveAcquisition != 0 {
		// The provider answers the pools' scalers under the fault:
		// nothing on the replicas themselves.
		var pools []string
		names := replicaPools(sc)
		for _, ri := range replicas {
			if !slices.Contains(pools, names[ri]) {
				pools = append(pools, names[ri])
			}
		}
		rm, err := gw.Autoscaling().InjectAcquisition(pools, spec)
		if err != nil {
			return nil, err
		}
		return func(context.Context) error { rm(); return nil }, nil
	}
	var removes []func()
	undo := func(ctx context.Context) error {
		for _, rm := range slices.Backward(removes) {
			rm()
		}
		return nil
	}
	if live&faults.LiveGateway != 0 {
		mk, ok := gatewayFaults[spec.Kind]
		if !ok {
			return nil, fmt.Errorf("%s: no gateway fault for the kind (internal/liverun/inject.go)", spec.Kind)
		}
		pools := replicaPools(sc)
		byPool := map[string][]int{}
		var order []string
		for _, ri := range replicas {
			p := pools[ri]
			if byPool[p] == nil {
				order = append(order, p)
			}
			byPool[p] = append(byPool[p], ri)
		}
		for _, p := range order {
			f, ok := mk(sc, spec, p)
			if !ok {
				continue
			}
			rm, err := gw.Faults().Inject(byPool[p], f)
			if err != nil {
				return nil, errors.Join(err, undo(ctx))
			}
			removes = append(removes, rm)
		}
	}
	if !live.OnFleet() {
		return undo, nil
	}
	onNodes, onExternal := h.split(replicas)
	var undos []livefleet.Undo
	all := func(ctx context.Context) error {
		var errs []error
		for _, u := range slices.Backward(undos) {
			errs = append(errs, u(ctx))
		}
		return errors.Join(append(errs, undo(ctx))...)
	}
	if len(onNodes) > 0 {
		nodes := make([]*livefleet.Node, 0, len(onNodes))
		for _, ri := range onNodes {
			nodes = append(nodes, h.nodes[ri])
		}
		u, err := h.fl.InjectOn(ctx, spec, nodes)
		if err != nil {
			return nil, errors.Join(err, all(ctx))
		}
		undos = append(undos, u)
	}
	if len(onExternal) > 0 {
		u, err := h.injectExternal(ctx, sc, gw, spec, onExternal)
		if err != nil {
			return nil, errors.Join(err, all(ctx))
		}
		undos = append(undos, u)
	}
	return all, nil
}

// checkReplicas holds the fleet's nodes, the external endpoints and the
// gateway's replicas to the twin's numbering, which fault plans and the
// Observer's replicas use.
func checkReplicas(sc *scenarios.Scenario, h *hybrid, gw *gateway.Gateway) error {
	pools := replicaPools(sc)
	if len(h.nodes) != len(pools) {
		return fmt.Errorf("live: the fleet has %d replicas, the scenario %d (a harness bug)", len(h.nodes), len(pools))
	}
	seen := map[string]int{}
	for i, n := range h.nodes {
		k := seen[pools[i]]
		seen[pools[i]]++
		if gw.ReplicaIndex(pools[i], k) != i || (n != nil && n.Pool != pools[i]) {
			return fmt.Errorf("live: replica %d of the twin (pool %s) is the gateway's %d (a harness bug)", i, pools[i], gw.ReplicaIndex(pools[i], k))
		}
	}
	return nil
}
