package twin

import (
	"slices"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
)

// TestEffectsCoverCatalogue holds the twin to one effect per kind of the
// fault catalogue, and none for a kind it does not have.
func TestEffectsCoverCatalogue(t *testing.T) {
	for _, k := range faults.Kinds() {
		if _, ok := effects[faults.Kind(k)]; !ok {
			t.Errorf("kind %s has no effect in twin/effects.go", k)
		}
	}
	for k := range effects {
		if !slices.Contains(faults.Kinds(), string(k)) {
			t.Errorf("twin/effects.go's effects has %q, a kind not in the catalogue", k)
		}
	}
}

// TestEffectApply: what each kind's effect does to one of its replicas'
// fault state, on the console's spec of the kind (faults.ConsoleSpec), and
// whether it is on a model rather than replicas.
func TestEffectApply(t *testing.T) {
	sel := faults.Target{Region: "r", Pool: "p", Provider: "v", Model: "m"}
	want := map[faults.Kind]struct {
		st      replicaFault
		onModel bool
	}{
		faults.RegionalOutage:  {st: replicaFault{Down: true}},
		faults.Brownout:        {st: replicaFault{FailRate: 0.2, Latency: 200 * time.Millisecond}},
		faults.QuotaExhaustion: {}, // the pools' providerQuota, not the replicas' state
		faults.ModelRetirement: {onModel: true},
		faults.DriverUpgrade:   {}, // restarts at start and end
		faults.NodeLoss:        {st: replicaFault{Down: true, Refuse: true}},
		faults.Latency:         {st: replicaFault{Latency: 2 * time.Second}},
		faults.ErrorBurst:      {st: replicaFault{FailRate: 0.5}},
		faults.ColdStartStorm:  {}, // restarts at start
		// What a provider answers a scale-up (autoscale.go's acquire).
		faults.Stockout:         {},
		faults.QuotaCap:         {},
		faults.SlowProvisioning: {},
		// The KV links into decode replicas.
		faults.LinkDegraded:      {st: replicaFault{LinkBandwidth: 0.5}},
		faults.KVTransferFailure: {st: replicaFault{TransferFail: 1}},
	}
	for _, k := range faults.Kinds() {
		t.Run(k, func(t *testing.T) {
			w, ok := want[faults.Kind(k)]
			if !ok {
				t.Fatalf("no expected effect of %s in this table", k)
			}
			sp := faults.ConsoleSpec(faults.Kind(k), sel)
			st := effectOf(sp.Kind).share(sp)
			if st != w.st {
				t.Errorf("share(%s) = %+v, want %+v", sp, st, w.st)
			}
			if got := effectOf(sp.Kind).onModel(); got != w.onModel {
				t.Errorf("onModel(%s) = %v, want %v", k, got, w.onModel)
			}
		})
	}

	// Faults on one replica add up: the highest fail rate, the sum of the
	// latencies.
	var st replicaFault
	for _, line := range []string{"brownout pool=p at=0s fail=0.2 latency=100ms", "error-burst pool=p at=0s fail=0.5",
		"latency pool=p at=0s latency=1s", "error-burst pool=p at=0s fail=0.1"} {
		sp, err := faults.Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		st = st.With(effectOf(sp.Kind).share(sp))
	}
	if want := (replicaFault{FailRate: 0.5, Latency: 1100 * time.Millisecond}); st != want {
		t.Errorf("combined = %+v, want %+v", st, want)
	}
}
