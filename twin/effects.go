package twin

import (
	"fmt"
	"slices"

	"github.com/fleetdrill/fleetdrill/faults"
)

// An effect is what one kind of fault does to the twin's ground truth. The
// fault world (faultWorld) picks a fault's effect once, from its kind
// (effectOf), and calls it as the fault starts and ends and whenever the
// replicas' fault state is recomputed; startFault, endFault and applyFaults
// know no kind.
//
// Adding a kind to the twin is one type here and its row in effects
// (TestEffectsCoverCatalogue fails until it has one); what the other
// backends need to know about it is in its faults.Traits.
type effect interface {
	// start applies the fault as it starts, once its replicas are chosen
	// (f.replicas) and before the replicas' fault state is recomputed.
	start(w *faultWorld, f *faultRT)
	// end undoes it as it ends, before the fault state is recomputed.
	end(w *faultWorld, f *faultRT)
	// share is the active fault's share of the condition of each of its
	// replicas (combined with the others' by faults.Condition.With).
	share(sp faults.Spec) faults.Condition
	// onModel reports that the fault is on its model rather than on
	// replicas: it takes every replica of its pools whatever model they
	// hold, it is mitigated when a fallback serves the model, and recovered
	// when the model itself serves again.
	onModel() bool
}

// effects is the effect of every kind of the catalogue.
var effects = map[faults.Kind]effect{
	faults.RegionalOutage:  outage{},
	faults.Brownout:        brownout{},
	faults.QuotaExhaustion: quotaExhaustion{},
	faults.ModelRetirement: retirement{},
	faults.DriverUpgrade:   driverUpgrade{},
	faults.NodeLoss:        nodeLoss{},
	faults.Latency:         addedLatency{},
	faults.ErrorBurst:      errorBurst{},
	faults.ColdStartStorm:  coldStartStorm{},
	// What a provider answers a scale-up: read by acquire (autoscale.go)
	// while the fault is active.
	faults.Stockout:         onReplicas{},
	faults.QuotaCap:         onReplicas{},
	faults.SlowProvisioning: onReplicas{},
	// The KV links into decode replicas (disagg.go reads the state).
	faults.LinkDegraded:      linkDegraded{},
	faults.KVTransferFailure: kvTransferFailure{},
}

// linkDegraded: the link into the replica moves bandwidth= GB/s per GPU
// and takes latency= more per transfer (disaggWorld.applyRates).
type linkDegraded struct{ onReplicas }

func (linkDegraded) share(sp faults.Spec) faults.Condition {
	return faults.Condition{LinkBandwidth: sp.Bandwidth, LinkLatency: sp.AddLatency}
}

// kvTransferFailure: a share of the transfers into the replica fail,
// heard of after timeout= (disaggWorld.moved).
type kvTransferFailure struct{ onReplicas }

func (kvTransferFailure) share(sp faults.Spec) faults.Condition {
	return faults.Condition{TransferFail: sp.FailRate, TransferTimeout: sp.Timeout}
}

// effectOf returns kind k's effect. Specs are validated, so k is in the
// catalogue, and a test holds effects to cover it.
func effectOf(k faults.Kind) effect {
	e, ok := effects[k]
	if !ok {
		panic(fmt.Sprintf("twin: fault kind %s has no effect (twin/effects.go)", k))
	}
	return e
}

// onReplicas is the default an effect embeds: nothing happens at the start
// or the end, the fault state is untouched, and the fault is on replicas.
type onReplicas struct{}

func (onReplicas) start(*faultWorld, *faultRT)        {}
func (onReplicas) end(*faultWorld, *faultRT)          {}
func (onReplicas) share(faults.Spec) faults.Condition { return faults.Condition{} }
func (onReplicas) onModel() bool                      { return false }

// outage: the replicas go down and swallow connections (attempts time out).
type outage struct{ onReplicas }

func (outage) share(faults.Spec) faults.Condition { return faults.Condition{Down: true} }

// nodeLoss: the replicas go down and refuse connections (attempts fail at
// once); lost nodes come back empty and load their model again
// (faults.Traits.Restarts).
type nodeLoss struct{ onReplicas }

func (nodeLoss) share(faults.Spec) faults.Condition {
	return faults.Condition{Down: true, Refuse: true}
}

// brownout: a share of attempts fail, and every attempt is slower.
type brownout struct{ onReplicas }

func (brownout) share(sp faults.Spec) faults.Condition {
	return faults.Condition{FailRate: sp.FailRate, Latency: sp.AddLatency}
}

// errorBurst: a share of attempts fail.
type errorBurst struct{ onReplicas }

func (errorBurst) share(sp faults.Spec) faults.Condition {
	return faults.Condition{FailRate: sp.FailRate}
}

// addedLatency: every attempt is slower.
type addedLatency struct{ onReplicas }

func (addedLatency) share(sp faults.Spec) faults.Condition {
	return faults.Condition{Latency: sp.AddLatency}
}

// coldStartStorm: the replicas drop their work and reload their model
// (faults.Traits.Restarts).
type coldStartStorm struct{ onReplicas }

// quotaExhaustion: the pools' provider quota drops (providerQuota), ground
// truth the core learns of from its 429s (throttled). Overlapping quota
// faults on one pool are caps that all apply, each until its own end: the
// configured quota returns when the last of them ends.
type quotaExhaustion struct{ onReplicas }

func (quotaExhaustion) start(w *faultWorld, f *faultRT) {
	now := w.s.Now()
	f.quotas = f.quotas[:0]
	for _, pi := range f.pools {
		q := &providerQuota{rpm: f.spec.QuotaRPM, tpm: f.spec.QuotaTPM, last: now}
		f.quotas = append(f.quotas, q)
		w.quota[pi] = append(w.quota[pi], q)
	}
}

func (quotaExhaustion) end(w *faultWorld, f *faultRT) {
	for i, pi := range f.pools {
		w.quota[pi] = slices.DeleteFunc(w.quota[pi], func(q *providerQuota) bool { return q == f.quotas[i] })
	}
}

// retirement: the fault starts at the notice (faults.Traits.FromNotice):
// the control plane tells the core, which steers new requests to the
// model's fallbacks; at at= the model disappears (retire). Its end serves
// the model again.
type retirement struct{ onReplicas }

func (retirement) onModel() bool { return true }

func (retirement) start(w *faultWorld, f *faultRT) {
	for _, m := range f.models {
		w.core.SetRetiring(m, true)
	}
	w.log.addEvent(timelineEvent(w.s.Now(), "retirement-notice", fmt.Sprintf("%s: new requests steered to fallbacks until %v", f.label, f.spec.At)))
	w.s.At(f.spec.At, func() { w.retire(f) })
}

func (retirement) end(w *faultWorld, f *faultRT) {
	for _, m := range f.models {
		w.core.SetRetiring(m, false)
	}
	for _, pi := range f.pools {
		for _, m := range f.models {
			w.core.SetServes(pi, m, w.p.core.Pools[pi].Serves[m])
		}
	}
}

// driverUpgrade: the pools move to the new driver (and runtime) and their
// replicas restart (upgradeDriver; faults.Traits.Restarts); the end rolls
// back, with another restart.
type driverUpgrade struct{ onReplicas }

func (driverUpgrade) start(w *faultWorld, f *faultRT) {
	w.upgradeDriver(f, f.spec.Driver, f.spec.Runtime)
}

func (driverUpgrade) end(w *faultWorld, f *faultRT) {
	pp := w.p.pools[f.pools[0]].Spec
	w.upgradeDriver(f, pp.Driver, pp.Runtime)
}
