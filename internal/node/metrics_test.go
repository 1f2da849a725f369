package node

import (
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/fleetdrill/fleetdrill/internal/promtest"
	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// series returns the value of the series of name whose labels include want,
// summed (a histogram's count, or with sum its sum of observations).
func series(t testing.TB, g prometheus.Gatherer, name string, want map[string]string, sum bool) float64 {
	t.Helper()
	return promtest.Value(t, g, name, want, sum)
}

const testPool, testRegion = "use-h100-8b", "us-east"

// classTraffic runs a streamed request of class interactive and a
// non-streamed one naming a class the node does not know, and waits until
// both are counted.
func classTraffic(t *testing.T, h *harness) {
	t.Helper()
	resp := h.post(t, "/v1/chat/completions", chatBody("x", 5, true), HeaderClass, "interactive")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp = h.post(t, "/v1/chat/completions", chatBody("x", 3, false), HeaderClass, "made-up-by-a-client")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waitFor(t, "both requests counted", func() bool { return series(t, h.reg, signals.E2E.Name, nil, false) == 2 })
}

// Every catalogue series the node claims (Exported) is served with the
// catalogue's type, help and exactly its label names, and no other
// catalogue series is.
func TestCatalogueSeries(t *testing.T) {
	h := start(t, Config{Speed: 4, Pool: testPool, Region: testRegion, Classes: []string{"interactive"}})
	classTraffic(t, h)
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	claimed := map[string]signals.Signal{}
	for _, s := range Exported {
		claimed[s.Name] = s
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		if !slices.ContainsFunc(signals.All, func(s signals.Signal) bool { return s.Name == name }) {
			continue
		}
		s, ok := claimed[name]
		if !ok {
			t.Errorf("%s is served but not in Exported", name)
			continue
		}
		seen[name] = true
		if got := strings.ToLower(mf.GetType().String()); got != string(s.Type) {
			t.Errorf("%s: type %s, want %s", name, got, s.Type)
		}
		if mf.GetHelp() != s.Help {
			t.Errorf("%s: help %q, want the catalogue's %q", name, mf.GetHelp(), s.Help)
		}
		want := slices.Sorted(slices.Values(s.Labels))
		for _, m := range mf.GetMetric() {
			var got []string
			for _, lp := range m.GetLabel() {
				got = append(got, lp.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s: labels %v, want %v", name, got, want)
			}
		}
	}
	for _, s := range Exported {
		if !seen[s.Name] {
			t.Errorf("%s not served", s.Name)
		}
	}

	pool := map[string]string{"pool": testPool, "region": testRegion}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{signals.TTFT.Name, map[string]string{"model": testModel, "pool": testPool, "region": testRegion, "class": "interactive"}, 1},
		{signals.TTFT.Name, map[string]string{"class": "unknown"}, 1},
		{signals.TPOT.Name, nil, 2},
		{signals.E2E.Name, map[string]string{"class": "unknown"}, 1},
		{signals.Preemptions.Name, pool, 0},
		{signals.ColdStarts.Name, pool, 0},
	} {
		if got := series(t, h.reg, tc.name, tc.labels, false); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	kvCap := float64(h.node.Stats()[0].KVCap)
	waitFor(t, "every KV token free", func() bool { return series(t, h.reg, signals.KVAllocatable.Name, pool, false) == kvCap })

	// The catalogue's latencies are engine seconds: the node's own
	// (wall-second) series times the speed.
	wall := series(t, h.reg, "fleetdrill_node_e2e_seconds", nil, true)
	engine := series(t, h.reg, signals.E2E.Name, nil, true)
	if math.Abs(engine-4*wall) > 1e-9*engine {
		t.Errorf("end-to-end: %gs of engine time, want 4 × %gs of wall time", engine, wall)
	}
}

// The node's series follow Prometheus' naming and help conventions.
func TestMetricsLint(t *testing.T) {
	h := start(t, Config{Speed: 4, Pool: testPool, Region: testRegion, Classes: []string{"interactive"}})
	classTraffic(t, h)
	h.post(t, "/v1/chat/completions", map[string]any{"model": "nope", "messages": []any{map[string]any{"content": "x"}}}).Body.Close()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	// What testutil.GatherAndLint does; testutil itself would need a
	// module go.mod does not list.
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// A KV cache too small for the batch's growth preempts sequences; the node
// counts the engine's preemptions. The requests must overlap in the engine:
// at speed 2 each takes long enough that they do even on a loaded machine
// (at speed 50 they could finish one by one under -race and never preempt).
func TestPreemptionsCounted(t *testing.T) {
	h := start(t, Config{Speed: 2, KVTokens: 120, Pool: testPool, Region: testRegion})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			resp := h.post(t, "/v1/chat/completions", chatBody("0123456789012345678901234567890123456789", 40, false))
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	waitFor(t, "preemptions counted", func() bool {
		return series(t, h.reg, signals.Preemptions.Name, map[string]string{"pool": testPool}, false) > 0
	})
}

// FromScenario names the node's pool, region and the scenario's classes.
func TestFromScenarioLabels(t *testing.T) {
	sc, err := scenarios.LoadNamed("eu-residency")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := FromScenario(sc, "euw-a100-8b")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pool != "euw-a100-8b" || cfg.Region != "eu-west" || !slices.Equal(cfg.Classes, []string{"interactive"}) {
		t.Errorf("FromScenario: pool %q region %q classes %v, want euw-a100-8b, eu-west, [interactive]", cfg.Pool, cfg.Region, cfg.Classes)
	}
}
