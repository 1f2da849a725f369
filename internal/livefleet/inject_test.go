package livefleet

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
)

func TestSelect(t *testing.T) {
	f := &Fleet{Nodes: []*Node{
		{Name: "a-0", Pool: "a", Region: "r1", Provider: "p1", Models: []string{"m1"}},
		{Name: "a-1", Pool: "a", Region: "r1", Provider: "p1", Models: []string{"m1"}},
		{Name: "a-2", Pool: "a", Region: "r1", Provider: "p1", Models: []string{"m1"}},
		{Name: "b-0", Pool: "b", Region: "r2", Provider: "p2", Models: []string{"m1", "m2"}},
	}}
	names := func(ns []*Node) string {
		var s []string
		for _, n := range ns {
			s = append(s, n.Name)
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		t    faults.Target
		r    faults.Radius
		want string
	}{
		{faults.Target{Region: "r1"}, faults.Radius{}, "a-0,a-1,a-2"},
		{faults.Target{Pool: "a"}, faults.Radius{Count: 2}, "a-0,a-1"},
		{faults.Target{Pool: "a"}, faults.Radius{Percent: 50}, "a-0,a-1"},
		{faults.Target{Pool: "a"}, faults.Radius{Percent: 10}, "a-0"},
		{faults.Target{Model: "m2"}, faults.Radius{}, "b-0"},
		{faults.Target{Provider: "p2"}, faults.Radius{}, "b-0"},
		{faults.Target{}, faults.Radius{Count: 9}, "a-0,a-1,a-2,b-0"},
	} {
		got, err := f.Select(c.t, c.r)
		if err != nil || names(got) != c.want {
			t.Errorf("Select(%+v, %+v) = %s, %v; want %s", c.t, c.r, names(got), err, c.want)
		}
	}
	if _, err := f.Select(faults.Target{Region: "nowhere"}, faults.Radius{}); err == nil {
		t.Error("no error for a target matching nothing")
	}
	if _, err := f.Inject(context.Background(), faults.Spec{Kind: faults.ColdStartStorm, Target: faults.Target{Pool: "a"}}); err == nil {
		t.Error("cold-start-storm injected")
	}
}

// Every live fleet injector against one node, straight through its proxy.
func TestInjectorsOnOneNode(t *testing.T) {
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fl, err := Build(ctx, Options{Scenario: "eu-residency", Pools: []string{"use-h100-8b"}, Replicas: 1})
	if fl != nil {
		t.Cleanup(func() { fl.Close(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	n := fl.Nodes[0]
	get := func(timeout time.Duration) (int, time.Duration, error) {
		c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
		body := `{"model":"llama-3.1-8b","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
		start := time.Now()
		resp, err := c.Post(n.BaseURL()+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			return 0, time.Since(start), err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, time.Since(start), nil
	}
	expect := func(phase string, want int) time.Duration {
		t.Helper()
		code, d, err := get(5 * time.Second)
		if err != nil || code != want {
			t.Fatalf("%s: got %d %v, want %d", phase, code, err, want)
		}
		return d
	}
	expect("healthy", 200)
	// A brownout's fail rate is the gateway's: on the fleet, a brownout
	// with no added latency changes nothing.
	undo, err := fl.Inject(ctx, faults.Spec{Kind: faults.Brownout, Target: faults.Target{Pool: n.Pool}, FailRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	expect("brownout without latency", 200)
	if err := undo(ctx); err != nil {
		t.Fatal(err)
	}

	undo, err = fl.Inject(ctx, faults.Spec{Kind: faults.Latency, Target: faults.Target{Pool: n.Pool}, AddLatency: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if d := expect("latency", 200); d < 300*time.Millisecond {
		t.Errorf("latency toxic: request took %v, want >= 300ms", d)
	}
	if err := undo(ctx); err != nil {
		t.Fatal(err)
	}

	fl.OutageMode = OutageHang
	undo, err = fl.Inject(ctx, faults.Spec{Kind: faults.RegionalOutage, Target: faults.Target{Region: n.Region}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := get(300 * time.Millisecond); err == nil {
		t.Errorf("hung outage: got %d, want a timeout", code)
	}
	if err := undo(ctx); err != nil {
		t.Fatal(err)
	}
	expect("hang undone", 200)

	oldUp := n.Upstream()
	undo, err = fl.Inject(ctx, faults.Spec{Kind: faults.NodeLoss, Target: faults.Target{Pool: n.Pool}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := get(2 * time.Second); err == nil {
		t.Errorf("lost node answered %d", code)
	}
	if err := undo(ctx); err != nil {
		t.Fatal(err)
	}
	expect("node back", 200)
	t.Logf("node-loss: upstream %s -> %s", oldUp, n.Upstream())
	if _, err := fl.Admin(ctx, n, http.MethodGet, nil); err != nil {
		t.Errorf("admin after restart: %v", err)
	}
}
