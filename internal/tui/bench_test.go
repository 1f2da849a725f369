package tui

import (
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/fleetdrill/fleetdrill/twin"
)

// busySnapshot is a large fleet in trouble: 6 regions of 5 pools, 4
// classes, 6 models with 8 tenants each, the ladder half engaged, 10
// faults and a full event log (a snapshot carries at most 500 events).
func busySnapshot(now time.Duration) twin.Snapshot {
	s := twin.Snapshot{Scenario: "busy-fleet", Seed: 42, Now: now, End: 2 * time.Hour, Duration: 110 * time.Minute,
		Degradation: &twin.LadderState{Steps: ladderSteps, Engaged: 2},
		Requests:    twin.Counts{Arrived: 1234567, Completed: 1200000, Rejected: 3456, Deferred: 789, Retries: 999},
		Rejections:  map[string]uint64{"queue-full": 1200, "deadline": 800, "quota": 456, "no-route": 1000}}
	health := []string{"healthy", "degraded", "down", "healthy", "healthy"}
	var pools []string
	for r := range 6 {
		rs := twin.RegionState{Name: fmt.Sprintf("region-%d", r), Jurisdiction: []string{"us", "eu", "apac"}[r%3]}
		for p := range 5 {
			name := fmt.Sprintf("r%d-h100-pool-%d", r, p)
			pools = append(pools, name)
			rs.Pools = append(rs.Pools, twin.PoolState{Name: name, Provider: fmt.Sprintf("cloud-%d", p%3),
				Models: []string{"llama-3.1-8b", "llama-3.1-70b"}, Replicas: 8, Up: 8 - 3*p%8, Open: p % 3,
				Health: health[p], Utilization: float64(p) / 5, Running: 40 * p, Waiting: 7 * p, Inflight: 50 * p, Dispatched: uint64(1e5 * p)})
		}
		s.Regions = append(s.Regions, rs)
	}
	for c, name := range []string{"interactive", "batch", "agentic", "embedding"} {
		s.Classes = append(s.Classes, twin.ClassState{Name: name, SLOTTFT: 2 * time.Second, SLOE2E: time.Minute, Window: time.Minute,
			TTFTP99: time.Duration(c+1) * 700 * time.Millisecond, E2EP99: time.Duration(c+1) * 20 * time.Second,
			Attainment: 1 - 0.02*float64(c), RejectedPS: 0.5 * float64(c), DeferredPS: 0.2 * float64(c), Completed: 1000, Finished: 1000})
	}
	for m := range 6 {
		ms := twin.ModelState{Name: fmt.Sprintf("model-%d", m), Queue: 17 * m}
		for t := range 8 {
			ms.Routes = append(ms.Routes, twin.RouteState{Tenant: fmt.Sprintf("tenant-%d", t), Served: ms.Name, Fallback: t%4 == 3,
				Pools: pools[:5+t], Skipped: []twin.ReasonCount{{Reason: "outside jurisdiction eu", Count: 12}, {Reason: "circuit open", Count: 3}}})
		}
		s.Models = append(s.Models, ms)
	}
	for t := range 8 {
		ts := twin.TenantState{Name: fmt.Sprintf("tenant-%d", t), Jurisdiction: []string{"us", "eu", ""}[t%3],
			Attainment: 1 - 0.05*float64(t%3), Finished: 900, Completed: 880, Rejected: 12, TimedOut: 5, Failed: 3,
			Waiting: 7 * t, OldestWaiting: time.Duration(t) * time.Second}
		for p := range 6 {
			ts.Served = append(ts.Served, twin.TenantServed{Pool: pools[p*5], Region: fmt.Sprintf("region-%d", p),
				Model: fmt.Sprintf("model-%d", p), Fallback: p == 5, Count: uint64(100 - 10*p)})
		}
		s.Tenants = append(s.Tenants, ts)
	}
	for f := range 10 {
		s.Faults = append(s.Faults, twin.FaultState{Label: fmt.Sprintf("node-loss(r%d-h100-pool-%d)", f%6, f%5),
			Spec: fmt.Sprintf("node-loss pool=r%d-h100-pool-%d at=%dm count=1", f%6, f%5, 5*f), Start: time.Duration(5*f) * time.Minute,
			Active: f%2 == 0, Detect: 5 * time.Second, Mitigate: 6 * time.Second, Recover: -1, Injected: f%3 == 0})
	}
	kinds := []string{"fault-start", "breaker-open", "detected", "mitigated", "route-change", "degrade", "breaker-closed", "recovered"}
	for e := range 500 {
		s.Events = append(s.Events, twin.TimelineEvent{TS: float64(e) * 6, Kind: kinds[e%len(kinds)],
			Detail: fmt.Sprintf("pool r%d-h100-pool-%d replica %d: something happened worth a long line of detail", e%6, e%5, e%8)})
	}
	return s
}

// BenchmarkView measures a frame of the console on a busy fleet, with
// half an hour of sparkline history, at 80×24 and 200×60. The goal is
// under 2 ms a frame (ten frames a second leave the terminal most of its
// time); the ms/frame metric reports it.
func BenchmarkView(b *testing.B) {
	for _, size := range [][2]int{{80, 24}, {200, 60}} {
		b.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(b *testing.B) {
			m := New(nil, func(command) {})
			m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
			for i := range 180 {
				m.Update(frameMsg(Frame{Snap: busySnapshot(time.Duration(i) * 10 * time.Second), Speed: 60}))
			}
			start := time.Now()
			for b.Loop() {
				_ = m.View()
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/frame")
		})
	}
}

// BenchmarkApply measures taking a frame in (histories, selections).
func BenchmarkApply(b *testing.B) {
	m := New(nil, func(command) {})
	f := Frame{Snap: busySnapshot(time.Hour), Speed: 60}
	for b.Loop() {
		m.Update(frameMsg(f))
	}
}
