package livefleet

import (
	"context"
	"errors"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/node"
)

// An injector emulates the part of one kind of fault a live fleet
// carries: toxiproxy's and the containers' (faults.LiveProxy,
// faults.LiveContainer). inject applies spec to the nodes now and returns
// the undo for the fault's end. id names what it adds (a toxic), unique to
// this injection. InjectOn picks the injector from the spec's kind and
// knows no kind itself.
//
// HTTP-level faults (faults.LiveGateway: a quota's 429s, a retired model's
// 404s, a driver's 503s, error shares) are not the fleet's: the live
// gateway's fault layer answers them whatever the backend
// (internal/gateway's Gateway.Faults().Inject; internal/liverun drives both).
// The emulated node's admin API still has them, for a node driven by hand.
//
// Adding a kind with a part on the fleet is one type here and its row in
// injectors; the kind's faults.Traits.Live says which mechanisms it uses,
// and TestInjectorsMatchTraits fails while the two disagree.
type injector interface {
	inject(ctx context.Context, f *Fleet, spec faults.Spec, nodes []*Node, id string) (Undo, error)
}

// injectors holds the injector of every kind whose faults.Traits.Live has
// a part on the fleet (Live.OnFleet).
var injectors = map[faults.Kind]injector{
	faults.RegionalOutage: outageInjector{},
	faults.Latency:        latencyInjector{},
	faults.Brownout:       brownoutInjector{},
	faults.NodeLoss:       nodeLossInjector{},
	// The P/D link: the decode nodes' own (internal/node/kv.go).
	faults.LinkDegraded:      linkInjector{},
	faults.KVTransferFailure: linkInjector{},
}

// linkInjector sets the decode nodes' inbound KV link fault by their admin
// API: each node puts it on the wire its pulls cross (toxics on its own
// proxies to the prefill nodes) and on its link model. The undo clears it.
type linkInjector struct{}

// LinkFault is spec's link fault as a decode node takes it.
func LinkFault(spec faults.Spec) node.LinkFault {
	return node.LinkFault{BandwidthGBs: spec.Bandwidth, AddLatency: spec.AddLatency, Fail: spec.FailRate, Timeout: spec.Timeout}
}

func (linkInjector) inject(ctx context.Context, f *Fleet, spec faults.Spec, nodes []*Node, _ string) (Undo, error) {
	lf := LinkFault(spec)
	var done []*Node
	undo := func(ctx context.Context) error {
		var errs []error
		for _, n := range done {
			if _, err := f.Admin(ctx, n, "POST", &node.FaultsPatch{Link: &node.LinkFault{}}); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for _, n := range nodes {
		if _, err := f.Admin(ctx, n, "POST", &node.FaultsPatch{Link: &lf}); err != nil {
			return nil, errors.Join(err, undo(ctx))
		}
		done = append(done, n)
	}
	return undo, nil
}

// outageInjector disables the region's proxies (OutageRefuse), or gives
// them a timeout toxic that holds connections with no data (OutageHang).
type outageInjector struct{}

func (outageInjector) inject(ctx context.Context, f *Fleet, _ faults.Spec, nodes []*Node, id string) (Undo, error) {
	if f.OutageMode == OutageHang {
		return f.addToxic(ctx, nodes, id, "timeout", map[string]any{"timeout": 0})
	}
	return f.disable(nodes)
}

// latencyInjector adds a latency toxic to the nodes' proxies.
type latencyInjector struct{}

func (latencyInjector) inject(ctx context.Context, f *Fleet, spec faults.Spec, nodes []*Node, id string) (Undo, error) {
	return f.addToxic(ctx, nodes, id, "latency", map[string]any{"latency": spec.AddLatency.Milliseconds()})
}

// brownoutInjector adds a latency toxic for the added latency; its fail
// rate is the gateway's (faults.LiveGateway), so a brownout with none
// leaves the fleet as it is.
type brownoutInjector struct{}

func (brownoutInjector) inject(ctx context.Context, f *Fleet, spec faults.Spec, nodes []*Node, id string) (Undo, error) {
	if spec.AddLatency == 0 {
		return func(context.Context) error { return nil }, nil
	}
	return latencyInjector{}.inject(ctx, f, spec, nodes, id)
}

// nodeLossInjector stops the nodes' containers; the undo starts them again.
type nodeLossInjector struct{}

func (nodeLossInjector) inject(ctx context.Context, f *Fleet, _ faults.Spec, nodes []*Node, _ string) (Undo, error) {
	return f.stopNodes(ctx, nodes)
}
