package liverun

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/livefleet"
	"github.com/fleetdrill/fleetdrill/internal/node"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
	"github.com/fleetdrill/fleetdrill/twin/compile"
)

// A hybrid fleet: each pool of the scenario is either emulated (nodes in
// containers behind toxiproxy, built and stopped by the harness) or
// external (Options.Backends: endpoints fleetdrill never starts or stops —
// real GPU servers). Replicas are numbered in the twin's order, pools
// in scenario order; external pools are what the comparison with the twin
// is for: the twin checked against real hardware.
type hybrid struct {
	fl       *livefleet.Fleet    // the emulated pools' nodes; nil when every pool is external
	nodes    []*livefleet.Node   // per replica: its node, nil for an external endpoint
	external map[string][]string // pool → its endpoints, "KIND+URL"
	disrupt  string              // Options.AllowDisrupt
	// procs are the in-process nodes (Options.InProcess): external
	// endpoints to the rest of the hybrid, bar that fleetdrill started
	// them, so a node loss stops and starts them itself.
	procs *inprocNodes
}

// checkExternal validates Options.Backends against the scenario: every pool
// named exists, every endpoint parses.
func checkExternal(sc *scenarios.Scenario, ext map[string][]string) error {
	var errs []error
	for _, pool := range slices.Sorted(maps.Keys(ext)) {
		if !slices.ContainsFunc(sc.Pools, func(p scenarios.Pool) bool { return p.Name == pool }) {
			errs = append(errs, fmt.Errorf("--backend %s=…: the scenario has no pool %s", pool, pool))
		}
		for _, b := range ext[pool] {
			if _, _, err := gateway.ParseBackend(b); err != nil {
				errs = append(errs, fmt.Errorf("--backend %s=%s: %w", pool, b, err))
			}
		}
	}
	return errors.Join(errs...)
}

// emulatedPools lists the pools with replicas that are not external: the
// container fleet's.
func emulatedPools(sc *scenarios.Scenario, ext map[string][]string) []string {
	var out []string
	for _, p := range sc.Pools {
		if _, isExt := ext[p.Name]; !isExt && p.Replicas > 0 {
			out = append(out, p.Name)
		}
	}
	return out
}

// mapReplicas numbers the fleet's nodes and the external endpoints as the
// twin numbers replicas.
func (h *hybrid) mapReplicas(sc *scenarios.Scenario) error {
	byPool := map[string][]*livefleet.Node{}
	if h.fl != nil {
		for _, n := range h.fl.Nodes {
			byPool[n.Pool] = append(byPool[n.Pool], n)
		}
	}
	h.nodes = h.nodes[:0]
	for i, p := range sc.Pools {
		n := compile.PoolReplicas(&sc.Pools[i])
		if ext, isExt := h.external[p.Name]; isExt {
			if len(ext) != n {
				return fmt.Errorf("live: pool %s has %d endpoints but %d replicas (a harness bug)", p.Name, len(ext), n)
			}
			for range ext {
				h.nodes = append(h.nodes, nil)
			}
			continue
		}
		if len(byPool[p.Name]) != n {
			return fmt.Errorf("live: pool %s has %d nodes but %d replicas (a harness bug)", p.Name, len(byPool[p.Name]), n)
		}
		h.nodes = append(h.nodes, byPool[p.Name]...)
	}
	return nil
}

// backends are the gateway's: the nodes' (kind fleetdrill) and the
// external endpoints.
func (h *hybrid) backends() map[string][]string {
	out := map[string][]string{}
	if h.fl != nil {
		out = h.fl.Backends()
	}
	for p, bs := range h.external {
		out[p] = append(out[p], bs...)
	}
	return out
}

// externalOn returns which of replicas are external endpoints, and the
// others.
func (h *hybrid) split(replicas []int) (nodes []int, external []int) {
	for _, ri := range replicas {
		if h.nodes[ri] == nil {
			external = append(external, ri)
		} else {
			nodes = append(nodes, ri)
		}
	}
	return nodes, external
}

// externalFaults gives the fleet-level part of a kind (what toxiproxy does
// to an emulated node) on an external endpoint, which has no proxy in
// front of it: the gateway's fault layer does it on the way out. A row
// for each kind whose faults.Traits.Live has LiveProxy
// (TestExternalFaultsMatchTraits). A node loss (LiveContainer) stops a
// server, which only the operator's --allow-disrupt command may do
// (disrupt).
var externalFaults = map[faults.Kind]func(faults.Spec) (gateway.UpstreamFault, bool){
	// Swallowed, like the twin's outage and the proxies' timeout toxic:
	// attempts and probes get no answer within the health timeout.
	faults.RegionalOutage: func(sp faults.Spec) (gateway.UpstreamFault, bool) {
		return gateway.UpstreamFault{Kind: string(sp.Kind), Down: gateway.DownHang}, true
	},
	faults.Latency: func(sp faults.Spec) (gateway.UpstreamFault, bool) {
		return gateway.UpstreamFault{Kind: string(sp.Kind), Latency: sp.AddLatency}, true
	},
	// The latency part (its fail rate is the gateway fault of the kind).
	faults.Brownout: func(sp faults.Spec) (gateway.UpstreamFault, bool) {
		return gateway.UpstreamFault{Kind: string(sp.Kind), Latency: sp.AddLatency}, sp.AddLatency > 0
	},
}

// checkExternalFaults refuses, before anything starts, a fault that would
// have to stop an external endpoint when no --allow-disrupt command says
// how.
func (h *hybrid) checkExternalFaults(sc *scenarios.Scenario, plans []twin.FaultPlan) error {
	pools := replicaPools(sc)
	var errs []error
	for _, p := range plans {
		ext := 0
		for _, ri := range p.Replicas {
			if _, isExt := h.external[pools[ri]]; isExt && !h.procs.has(ri) {
				ext++
			}
		}
		if ext > 0 && p.Spec.Kind.Traits().Live&faults.LiveLink != 0 {
			errs = append(errs, fmt.Errorf("fault %s (%s) is on the KV link into %d external endpoints, which fleetdrill cannot reach (a real NIXL link is the servers' own); "+
				"emulate the decode pool (drop its --backend) or drop the fault", p.Label, p.Spec.String(), ext))
			continue
		}
		if ext == 0 || p.Spec.Kind.Traits().Live&faults.LiveContainer == 0 || h.disrupt != "" {
			continue
		}
		errs = append(errs, fmt.Errorf("fault %s (%s) would stop %d external endpoints, which fleetdrill never starts or stops; "+
			"give --allow-disrupt CMD (run as `sh -c CMD` with FLEETDRILL_ACTION=stop|start, FLEETDRILL_POOL and FLEETDRILL_BACKEND set) or drop the fault",
			p.Label, p.Spec.String(), ext))
	}
	return errors.Join(errs...)
}

// injectExternal applies the fleet-level part of spec on external
// endpoints: through the gateway's fault layer, or the operator's disrupt
// command for a node loss.
func (h *hybrid) injectExternal(ctx context.Context, sc *scenarios.Scenario, gw *gateway.Gateway, spec faults.Spec, replicas []int) (livefleet.Undo, error) {
	if spec.Kind.Traits().Live&faults.LiveContainer != 0 {
		if len(replicas) > 0 && h.procs.has(replicas[0]) {
			return h.stopInProcess(replicas), nil
		}
		return h.disruptAll(ctx, sc, gw, replicas)
	}
	if spec.Kind.Traits().Live&faults.LiveLink != 0 {
		// The decode nodes' own link: in process, the nodes themselves;
		// an external server's link is outside fleetdrill's reach
		// (refused before the run: checkExternalFaults).
		var in []int
		for _, ri := range replicas {
			if h.procs.has(ri) {
				in = append(in, ri)
			}
		}
		if err := h.procs.setLink(in, livefleet.LinkFault(spec)); err != nil {
			return nil, err
		}
		return func(context.Context) error { return h.procs.setLink(in, node.LinkFault{}) }, nil
	}
	mk, ok := externalFaults[spec.Kind]
	if !ok {
		return func(context.Context) error { return nil }, nil
	}
	f, ok := mk(spec)
	if !ok {
		return func(context.Context) error { return nil }, nil
	}
	rm, err := gw.Faults().Inject(replicas, f)
	if err != nil {
		return nil, err
	}
	return func(context.Context) error { rm(); return nil }, nil
}

// stopInProcess stops the replicas' in-process nodes, as a lost
// container stops: requests to them are refused and their open streams
// cut. The undo starts fresh nodes (their engines empty).
func (h *hybrid) stopInProcess(replicas []int) livefleet.Undo {
	for _, ri := range replicas {
		h.procs.stop(ri)
	}
	return func(context.Context) error {
		var errs []error
		for _, ri := range replicas {
			errs = append(errs, h.procs.start(ri))
		}
		return errors.Join(errs...)
	}
}

// restartInstances restarts what serves the replicas, as a driver
// upgrade's restart does to a node: a container is stopped and started
// again (livefleet's restart path), an in-process node is replaced by a
// fresh one; an external endpoint is a server fleetdrill never starts or
// stops, so it is left as it is (the gateway's Restart still holds it out
// of routing while the twin's replica loads).
func (h *hybrid) restartInstances(ctx context.Context, replicas []int) error {
	if h == nil {
		return nil // a gateway with no fleet behind it (a test's)
	}
	var nodes []*livefleet.Node
	var errs []error
	for _, ri := range replicas {
		switch {
		case h.procs.has(ri):
			h.procs.stop(ri)
			errs = append(errs, h.procs.start(ri))
		case h.nodes[ri] != nil:
			nodes = append(nodes, h.nodes[ri])
		}
	}
	if len(nodes) > 0 {
		errs = append(errs, h.fl.RestartNodes(ctx, nodes))
	}
	return errors.Join(errs...)
}

// disruptAll stops each external endpoint with the operator's command; the
// undo starts them again.
func (h *hybrid) disruptAll(ctx context.Context, sc *scenarios.Scenario, gw *gateway.Gateway, replicas []int) (livefleet.Undo, error) {
	if h.disrupt == "" {
		return nil, errors.New("no --allow-disrupt command to stop external endpoints") // checked at start
	}
	pools := replicaPools(sc)
	run := func(ctx context.Context, action string) error {
		var errs []error
		for _, ri := range replicas {
			k := ri - gw.ReplicaIndex(pools[ri], 0)
			cmd := exec.CommandContext(ctx, "sh", "-c", h.disrupt)
			cmd.Env = append(os.Environ(), "FLEETDRILL_ACTION="+action, "FLEETDRILL_POOL="+pools[ri],
				"FLEETDRILL_BACKEND="+h.external[pools[ri]][k])
			if out, err := cmd.CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("--allow-disrupt (%s %s): %w: %s", action, pools[ri], err, strings.TrimSpace(string(out))))
			}
		}
		return errors.Join(errs...)
	}
	if err := run(ctx, "stop"); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return run(ctx, "start") }, nil
}

// provisioner starts and stops an autoscaled pool's emulated nodes for
// the gateway's scalers (gateway.Provisioner); an external endpoint is
// a server fleetdrill neither starts nor stops: it only routes to it once
// granted.
type provisioner struct{ h *hybrid }

func (p provisioner) node(pool string, k int) *livefleet.Node {
	if p.h.fl == nil {
		return nil
	}
	for _, n := range p.h.fl.Nodes {
		if n.Pool == pool {
			if k == 0 {
				return n
			}
			k--
		}
	}
	return nil
}

// Start implements gateway.Provisioner.
func (p provisioner) Start(ctx context.Context, pool string, k int) error {
	if n := p.node(pool, k); n != nil {
		return p.h.fl.StartNode(ctx, n)
	}
	return nil
}

// Stop implements gateway.Provisioner.
func (p provisioner) Stop(ctx context.Context, pool string, k int) error {
	if n := p.node(pool, k); n != nil {
		return p.h.fl.StopNode(ctx, n)
	}
	return nil
}
