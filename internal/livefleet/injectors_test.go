package livefleet

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/fleetdrill/fleetdrill/faults"
)

// TestInjectorsMatchTraits holds the injectors to the catalogue: a kind
// has an injector exactly when its traits say it has a part on the fleet
// (toxiproxy or containers); an HTTP-level kind is the gateway's.
func TestInjectorsMatchTraits(t *testing.T) {
	for _, k := range faults.Kinds() {
		kind := faults.Kind(k)
		onFleet := kind.Traits().Live.OnFleet()
		if _, ok := injectors[kind]; ok != onFleet {
			t.Errorf("%s: a row in internal/livefleet/injectors.go's injectors %v, but its traits say a part on the fleet %v (%s)", k, ok, onFleet, kind.Traits().Live)
		}
	}
	for k := range injectors {
		if !slices.Contains(faults.Kinds(), string(k)) {
			t.Errorf("internal/livefleet/injectors.go's injectors has %q, a kind not in the catalogue", k)
		}
	}
}

// TestInjectRefusesWhatIsNotLive: what a live fleet cannot emulate is
// refused before a node is touched, with the reason the traits give.
func TestInjectRefusesWhatIsNotLive(t *testing.T) {
	f := &Fleet{Nodes: []*Node{{Name: "a-0", Pool: "a", Region: "r1", Provider: "p1", Models: []string{"m1"}}}}
	for _, c := range []struct {
		spec faults.Spec
		want string
	}{
		{faults.Spec{Kind: faults.ColdStartStorm, Target: faults.Target{Pool: "a"}}, "cold-start storms have no live emulation"},
		{faults.Spec{Kind: faults.QuotaExhaustion, Target: faults.Target{Pool: "a"}, QuotaRPM: 60, QuotaTPM: 9000}, "quota of zero only"},
		{faults.Spec{Kind: faults.DriverUpgrade, Target: faults.Target{Pool: "a"}, Runtime: "vllm"}, "runtime-only upgrade"},
		{faults.Spec{Kind: faults.Latency, Target: faults.Target{Tenant: "t"}}, "tenant targets"},
		{faults.Spec{Kind: faults.ErrorBurst, Target: faults.Target{Pool: "a"}, FailRate: 0.5}, "the live gateway's fault layer injects it"},
		{faults.Spec{Kind: faults.QuotaExhaustion, Target: faults.Target{Pool: "a"}}, "HTTP-level"},
	} {
		for name, inject := range map[string]func() error{
			"Inject":   func() error { _, err := f.Inject(context.Background(), c.spec); return err },
			"InjectOn": func() error { _, err := f.InjectOn(context.Background(), c.spec, f.Nodes); return err },
		} {
			if err := inject(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s(%s) = %v, want an error saying %q", name, c.spec, err, c.want)
			}
		}
	}
}
