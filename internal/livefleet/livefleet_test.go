package livefleet

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

const testKey = "sk-livefleet-test-global"

// requireDocker skips, loudly, when no Docker engine answers.
func requireDocker(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("SKIPPING LIVE FLEET TEST: `docker info` failed (%v): no Docker engine, so no containers can run.\n%s",
			err, firstLines(string(out), 3))
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// Two pools in two regions of one jurisdiction, one replica each; a gateway
// in front; a regional outage moves traffic to the other region and opens
// the dead backend's breaker; lifting it closes the breaker; Close leaves
// nothing labelled behind.
func TestRegionalOutageFailsOver(t *testing.T) {
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	start := time.Now()
	fl, err := Build(ctx, Options{
		Scenario: "eu-residency",
		Sets: []string{
			"regions.eu-west.jurisdiction=us",
			"tenants.bank-eu.jurisdiction=us", "tenants.health-eu.jurisdiction=us",
			"policy.health.probe_interval=100ms", "policy.health.timeout=2s",
			"policy.health.threshold=1", "policy.health.open_for=200ms",
			"policy.retries.max_attempts=3", "policy.retries.backoff=1ms", "policy.retries.max_backoff=5ms",
		},
		Replicas: 1,
	})
	if fl != nil {
		t.Cleanup(func() { fl.Close(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fleet up in %v (image build %v): run %s\n%s", time.Since(start).Round(time.Millisecond),
		ImageBuildTime().Round(time.Millisecond), fl.RunID, fl.BackendLines())
	if len(fl.Nodes) != 2 || len(fl.Networks) != 2 {
		t.Fatalf("nodes %d networks %d, want 2 and 2", len(fl.Nodes), len(fl.Networks))
	}

	sc := *fl.Scenario
	sc.Policy.Admission.QueueTimeout = scenarios.Duration(5 * time.Second) // a queued request does not hang the test
	gw, err := gateway.New(gateway.Config{Scenario: &sc, Backends: fl.Backends(), Seed: 1,
		Keys: []gateway.Key{{Tenant: "global", Key: testKey}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer func() { srv.Close(); gw.Close() }()

	post := func() (int, string) {
		t.Helper()
		body := `{"model":"llama-3.1-8b","max_tokens":4,"messages":[{"role":"user","content":"hello"}]}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	breaker := func(pool string) float64 {
		mfs, err := gw.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "fleetdrill_breaker_state" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "pool" && l.GetValue() == pool {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		t.Fatalf("no breaker metric for %s", pool)
		return 0
	}
	sendAll := func(phase string, n int) {
		t.Helper()
		for i := range n {
			if code, body := post(); code != http.StatusOK {
				t.Fatalf("%s: request %d: %d %s", phase, i, code, body)
			}
		}
	}

	sendAll("before", 4)
	undo, err := fl.Inject(ctx, faults.Spec{Kind: faults.RegionalOutage, Target: faults.Target{Region: "us-east"}})
	if err != nil {
		t.Fatal(err)
	}
	sendAll("during outage", 6)
	if s := breaker("use-h100-8b"); s == 0 {
		t.Errorf("breaker of the dead us-east backend still closed")
	}
	if s := breaker("euw-a100-8b"); s != 0 {
		t.Errorf("breaker of the live eu-west backend is %v, want 0 (closed)", s)
	}
	if err := undo(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for breaker("use-h100-8b") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("breaker of us-east did not close after the outage was lifted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	sendAll("after", 4)

	if err := fl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fl.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	cs, ns, err := Managed(ctx, fl.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs)+len(ns) != 0 {
		t.Fatalf("left behind: containers %v networks %v", cs, ns)
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}
