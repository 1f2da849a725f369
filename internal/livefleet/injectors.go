package livefleet

import (
	"context"
	"errors"
	"slices"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/node"
)

// An injector emulates one kind of fault on a live fleet: inject applies
// spec to the nodes now and returns the undo for the fault's end. id names
// what it adds (a toxic), unique to this injection. InjectOn picks the
// injector from the spec's kind and knows no kind itself.
//
// Adding a kind a live fleet emulates is one type here and its row in
// injectors; the kind's faults.Traits.Live says which mechanisms it uses,
// and TestInjectorsMatchTraits fails while the two disagree.
type injector interface {
	inject(ctx context.Context, f *Fleet, spec faults.Spec, nodes []*Node, id string) (Undo, error)
}

// injectors holds the injector of every kind whose faults.Traits.Live is
// not zero.
var injectors = map[faults.Kind]injector{
	faults.RegionalOutage:  outageInjector{},
	faults.Latency:         latencyInjector{},
	faults.Brownout:        brownoutInjector{},
	faults.ErrorBurst:      errorBurstInjector{},
	faults.QuotaExhaustion: quotaInjector{},
	faults.ModelRetirement: retirementInjector{},
	faults.DriverUpgrade:   driverInjector{},
	faults.NodeLoss:        nodeLossInjector{},
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

// brownoutInjector adds a latency toxic for the added latency and sets the
// nodes' error rate for the fail rate, either or both.
type brownoutInjector struct{}

func (brownoutInjector) inject(ctx context.Context, f *Fleet, spec faults.Spec, nodes []*Node, id string) (Undo, error) {
	var undos []Undo
	if spec.AddLatency > 0 {
		u, err := latencyInjector{}.inject(ctx, f, spec, nodes, id)
		if err != nil {
			return nil, err
		}
		undos = append(undos, u)
	}
	if spec.FailRate > 0 {
		u, err := f.errorRate(ctx, nodes, spec.FailRate)
		if err != nil {
			return nil, errors.Join(err, runUndos(ctx, undos))
		}
		undos = append(undos, u)
	}
	return func(ctx context.Context) error { return runUndos(ctx, undos) }, nil
}

// errorBurstInjector sets the nodes' error rate (500s).
type errorBurstInjector struct{}

func (errorBurstInjector) inject(ctx context.Context, f *Fleet, spec faults.Spec, nodes []*Node, _ string) (Undo, error) {
	return f.errorRate(ctx, nodes, spec.FailRate)
}

// quotaInjector makes the nodes answer 429 with a Retry-After: a quota of
// zero, the only one the node emulates (faults.Spec.LiveGap).
type quotaInjector struct{}

func (quotaInjector) inject(ctx context.Context, f *Fleet, _ faults.Spec, nodes []*Node, _ string) (Undo, error) {
	return f.patchAll(ctx, nodes, func(cur node.Faults) (node.FaultsPatch, node.FaultsPatch) {
		on, off := true, cur.QuotaExhausted
		return node.FaultsPatch{QuotaExhausted: &on}, node.FaultsPatch{QuotaExhausted: &off}
	})
}

// retirementInjector retires the model on the nodes (404
// model_not_found). Its notice is the gateway's (Gateway.SetRetiring), not
// the fleet's: the caller injects this at at=.
type retirementInjector struct{}

func (retirementInjector) inject(ctx context.Context, f *Fleet, spec faults.Spec, nodes []*Node, _ string) (Undo, error) {
	m := spec.Target.Model
	if m == "" {
		return nil, errors.New("livefleet: model-retirement needs a model")
	}
	return f.patchAll(ctx, nodes, func(cur node.Faults) (node.FaultsPatch, node.FaultsPatch) {
		if slices.Contains(cur.Retired, m) { // already retired: leave it so
			return node.FaultsPatch{}, node.FaultsPatch{}
		}
		return node.FaultsPatch{Retire: []string{m}}, node.FaultsPatch{Unretire: []string{m}}
	})
}

// driverInjector changes the nodes' driver: models it cannot run answer
// 503. The nodes are not restarted.
type driverInjector struct{}

func (driverInjector) inject(ctx context.Context, f *Fleet, spec faults.Spec, nodes []*Node, _ string) (Undo, error) {
	d := spec.Driver
	return f.patchAll(ctx, nodes, func(cur node.Faults) (node.FaultsPatch, node.FaultsPatch) {
		old := cur.Driver
		return node.FaultsPatch{Driver: &d}, node.FaultsPatch{Driver: &old}
	})
}

// nodeLossInjector stops the nodes' containers; the undo starts them again.
type nodeLossInjector struct{}

func (nodeLossInjector) inject(ctx context.Context, f *Fleet, _ faults.Spec, nodes []*Node, _ string) (Undo, error) {
	return f.stopNodes(ctx, nodes)
}
