package liverun

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/promtest"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// TestGatewayFaultsMatchTraits holds the gateway faults table to the
// catalogue: a row exactly for the kinds whose traits say the gateway's
// fault layer emulates them.
func TestGatewayFaultsMatchTraits(t *testing.T) {
	for _, k := range faults.Kinds() {
		kind := faults.Kind(k)
		want := kind.Traits().Live&faults.LiveGateway != 0
		if _, ok := gatewayFaults[kind]; ok != want {
			t.Errorf("%s: a row in internal/liverun/inject.go's gatewayFaults %v, but its traits say %s", k, ok, kind.Traits().Live)
		}
	}
	for k := range gatewayFaults {
		if k.Traits().Live&faults.LiveGateway == 0 {
			t.Errorf("internal/liverun/inject.go's gatewayFaults has %q, not a LiveGateway kind of the catalogue", k)
		}
	}
}

// TestExternalFaultsMatchTraits holds the external faults table to the
// catalogue: a row exactly for the kinds whose traits say toxiproxy
// emulates them on a node (LiveProxy), since an external endpoint has no
// proxy and the gateway's fault layer does it instead; a LiveContainer
// kind stops the endpoint with --allow-disrupt.
func TestExternalFaultsMatchTraits(t *testing.T) {
	sel := faults.Target{Region: "r", Pool: "p", Provider: "v", Model: "m"}
	for _, k := range faults.Kinds() {
		kind := faults.Kind(k)
		want := kind.Traits().Live&faults.LiveProxy != 0
		mk, ok := externalFaults[kind]
		if ok != want {
			t.Errorf("%s: a row in internal/liverun/hybrid.go's externalFaults %v, but its traits say %s", k, ok, kind.Traits().Live)
			continue
		}
		if ok {
			if f, on := mk(faults.ConsoleSpec(kind, sel)); !on || f.Kind != k {
				t.Errorf("%s: its external fault on the console's spec is %+v (%v), want one of kind %s", k, f, on, k)
			}
		}
	}
	for k := range externalFaults {
		if k.Traits().Live&faults.LiveProxy == 0 {
			t.Errorf("internal/liverun/hybrid.go's externalFaults has %q, not a LiveProxy kind of the catalogue", k)
		}
	}
}

// The models a driver upgrade takes from a pool are those the twin's
// registry says it cannot run on the new driver (and runtime).
func TestIncompatible(t *testing.T) {
	sc, err := scenarios.LoadNamed("default")
	require.NoError(t, err)
	for _, c := range []struct {
		pool, driver, runtime string
		want                  []string
	}{
		{"use-h100-8b", "535.104", "", []string{"llama-3.1-8b"}}, // vllm-0.8.5 needs 570.26
		{"use-h100-8b", "575.51", "", nil},
		{"use-h100-8b", "560.28", "vllm-0.6.3", nil}, // which needs 550.54
		{"euw-a100-70b", "535.104", "", []string{"llama-3.1-70b"}},
		{"no-such-pool", "535.104", "", nil},
	} {
		if got := incompatible(sc, c.pool, c.driver, c.runtime); !slices.Equal(got, c.want) {
			t.Errorf("incompatible(%s, %s, %q) = %v, want %v", c.pool, c.driver, c.runtime, got, c.want)
		}
	}
}

// injectSpec puts an HTTP-level fault in the gateway's fault layer, one
// fault per pool it hits, and its undo takes it out; a driver upgrade the
// pool's models survive injects nothing. (No fleet: these kinds have no
// part on it.)
func TestInjectSpecThroughTheGateway(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("default", []string{"pools.use-h100-8b.replicas=2", "pools.use-h100-70b.replicas=1",
		"pools.euw-a100-8b.replicas=1", "pools.euw-a100-70b.replicas=1"})
	require.NoError(t, err)
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	backends := map[string][]string{}
	for _, p := range sc.Pools {
		for range p.Replicas {
			backends[p.Name] = append(backends[p.Name], srv.URL)
		}
	}
	gw, err := gateway.New(gateway.Config{Scenario: sc, Backends: backends, Seed: sc.Seed})
	require.NoError(t, err)
	t.Cleanup(gw.Close)
	pools := replicaPools(sc)
	of := func(names ...string) []int {
		var out []int
		for i, p := range pools {
			if slices.Contains(names, p) {
				out = append(out, i)
			}
		}
		return out
	}
	injected := func(pool, kind string) float64 {
		return promtest.Value(t, gw.Registry(), "fleetdrill_gateway_injected_faults", map[string]string{"pool": pool, "kind": kind}, false)
	}
	ctx := context.Background()
	for _, c := range []struct {
		line     string
		replicas []int
		want     map[string]float64 // pool → faults on its replicas
	}{
		{"quota-exhaustion pool=use-h100-8b at=0s", of("use-h100-8b"), map[string]float64{"use-h100-8b": 2}},
		{"model-retirement model=llama-3.1-70b at=0s", of("use-h100-70b", "euw-a100-70b"),
			map[string]float64{"use-h100-70b": 1, "euw-a100-70b": 1}},
		{"driver-upgrade pool=use-h100-8b at=0s driver=535.104", of("use-h100-8b"), map[string]float64{"use-h100-8b": 2}},
		{"driver-upgrade pool=use-h100-8b at=0s driver=575.51", of("use-h100-8b"), map[string]float64{"use-h100-8b": 0}},
		{"error-burst region=eu-west at=0s fail=0.3", of("euw-a100-8b", "euw-a100-70b"),
			map[string]float64{"euw-a100-8b": 1, "euw-a100-70b": 1}},
	} {
		sp, err := faults.Parse(c.line)
		require.NoError(t, err)
		undo, err := injectSpec(ctx, sc, nil, gw, sp, c.replicas, nil)
		require.NoError(t, err, c.line)
		for pool, n := range c.want {
			require.Equal(t, n, injected(pool, string(sp.Kind)), "%s: faults on %s", c.line, pool)
		}
		require.NoError(t, undo(ctx))
		// A driver upgrade's restart holds the pool's replicas for their
		// cold start (Gateway.Restart), past the fault's undo.
		require.Zero(t, promtest.Value(t, gw.Registry(), "fleetdrill_gateway_injected_faults", map[string]string{"kind": string(sp.Kind)}, false),
			"%s undone", c.line)
	}
}
