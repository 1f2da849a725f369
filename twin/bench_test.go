package twin

import (
	"context"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// benchReplay runs one simulated hour of an Azure-2023-conversation-shaped
// workload (Poisson arrivals, input ≈ 1,155 and output ≈ 211 tokens on
// average) and reports simulated seconds per wall second.
func benchReplay(b *testing.B, replicas int, rate float64) {
	sc := azureLike(replicas, rate, time.Hour)
	sc.Drain = dur(time.Minute)
	events := benchRun(b, sc)
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// benchRun runs sc b.N times, reports simulated seconds per wall second
// and returns the events fired.
func benchRun(b *testing.B, sc *scenarios.Scenario) (events uint64) {
	var simulated float64
	for b.Loop() {
		rep, err := Run(context.Background(), sc, Options{})
		if err != nil {
			b.Fatal(err)
		}
		simulated += rep.SimDurationS
		events += rep.Events
	}
	b.ReportMetric(simulated/b.Elapsed().Seconds(), "x-realtime")
	return events
}

// BenchmarkReplayHour: 8 H100 replicas at 5.5 req/s.
func BenchmarkReplayHour(b *testing.B) { benchReplay(b, 8, 5.5) }

// BenchmarkReplayHourFleet: 64 replicas at 8× the rate. With cost linear in
// the number of replicas it runs at about 1/8 of BenchmarkReplayHour's
// x-realtime; worse would mean per-replica work grows with fleet size.
func BenchmarkReplayHourFleet(b *testing.B) { benchReplay(b, 64, 44) }

// BenchmarkReplayAzureConv replays the whole Azure 2023 conversation trace
// (19,366 requests over 58 minutes, README T2) through the default fleet.
func BenchmarkReplayAzureConv(b *testing.B) {
	sc := defaultWithTrace(b, shared(b, "azure_llm_2023/AzureLLMInferenceTrace_conv.csv"))
	benchRun(b, sc)
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "wall-s/run")
}

// benchGameDay runs one simulated hour on three pools in two
// jurisdictions at 5.5 req/s per jurisdiction, with or without a game day:
// an outage, a brownout, a node loss, a quota cut and an error burst, with
// hedging. The ratio of the two x-realtime figures is the cost of the
// fault machinery (probes, breakers, retries, hedges, per-fault books).
func benchGameDay(b *testing.B, withFaults bool) {
	sc := twoRegions(4, 5.5, time.Hour)
	sc.Drain = dur(time.Minute)
	if withFaults {
		sc.Faults = []string{
			"regional-outage region=us-east at=10m for=15m",
			"brownout region=eu-west at=5m for=10m fail=0.05 latency=200ms",
			"node-loss pool=west at=30m for=10m count=2",
			"quota-exhaustion pool=west at=45m for=5m rpm=60 tpm=60000",
			"error-burst pool=eu at=50m for=2m fail=0.3",
		}
		sc.Policy.Routing.HedgeAfter = dur(2 * time.Second)
	}
	benchRun(b, sc)
}

func BenchmarkGameDayHourCalm(b *testing.B)   { benchGameDay(b, false) }
func BenchmarkGameDayHourFaults(b *testing.B) { benchGameDay(b, true) }

// BenchmarkGameDayHourAutoscale is BenchmarkGameDayHourFaults with every
// pool autoscaled (4 to 8 replicas on utilization, the HPA's defaults, on
// demand after a lognormal 2 m provisioning delay) and a stockout at the
// west pool's provider during the outage, when the west pool would grow.
// Its ns/op against BenchmarkGameDayHourFaults' is the cost of
// autoscaling: the sync every 15 s per pool and the absent replicas the
// core and the sampling skip (issue 24 asks within 20 %).
func BenchmarkGameDayHourAutoscale(b *testing.B) {
	sc := twoRegions(4, 5.5, time.Hour)
	sc.Drain = dur(time.Minute)
	sc.Faults = []string{
		"regional-outage region=us-east at=10m for=15m",
		"brownout region=eu-west at=5m for=10m fail=0.05 latency=200ms",
		"node-loss pool=west at=30m for=10m count=2",
		"quota-exhaustion pool=west at=45m for=5m rpm=60 tpm=60000",
		"error-burst pool=eu at=50m for=2m fail=0.3",
		"stockout provider=cloud-b at=12m for=5m",
	}
	sc.Policy.Routing.HedgeAfter = dur(2 * time.Second)
	for i := range sc.Pools {
		sc.Pools[i].Autoscale = &scenarios.Autoscale{Metric: "utilization", Target: 0.7, MinReplicas: 4, MaxReplicas: 8}
		sc.Pools[i].Acquisition = &scenarios.Acquisition{Delay: &scenarios.Delay{Distribution: "lognormal", Mean: dur(2 * time.Minute)}}
	}
	benchRun(b, sc)
}

// BenchmarkDrillSnapshot measures a console frame's snapshot of a drill
// an hour in (the default fleet, its us-east dark): every figure a frame
// draws, the recent window's per class and per tenant included.
func BenchmarkDrillSnapshot(b *testing.B) {
	sc, err := scenarios.LoadNamedWithSets("default", []string{"duration=2h"})
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewDrill(sc, Options{})
	if err != nil {
		b.Fatal(err)
	}
	d.Advance(time.Hour)
	if _, err := d.Inject("regional-outage region=us-east at=0s"); err != nil {
		b.Fatal(err)
	}
	d.Advance(d.Now() + 30*time.Second)
	b.ReportAllocs()
	for b.Loop() {
		_ = d.Snapshot()
	}
}

// BenchmarkDrillHour runs a drill of the default fleet for an hour,
// without snapshots: what keeping the recent window costs the run.
func BenchmarkDrillHour(b *testing.B) {
	sc, err := scenarios.LoadNamedWithSets("default", []string{"duration=1h", "drain=1m"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		d, err := NewDrill(sc, Options{})
		if err != nil {
			b.Fatal(err)
		}
		d.Advance(d.End())
	}
}

// BenchmarkCanary runs the canary fixture (16 req/s for 20 minutes, a
// canary stepped to 5 % and rolled back, a tenth of the eligible requests
// mirrored) against the same fleet with no canary (the candidate a plain
// pool): what routing by version, the rollout's windows and the shadow
// copies cost. Compare the two sub-benchmarks' ns/op.
func BenchmarkCanary(b *testing.B) {
	for _, tc := range []struct {
		name string
		mod  func(*scenarios.Scenario)
	}{
		{"without", func(sc *scenarios.Scenario) { sc.Canaries, sc.Expect = nil, nil }},
		{"with", func(sc *scenarios.Scenario) { sc.Expect = nil }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			sc, err := scenarios.Load("testdata/canary.yaml")
			if err != nil {
				b.Fatal(err)
			}
			tc.mod(sc)
			b.ReportAllocs()
			var reqs uint64
			for b.Loop() {
				rep, err := Run(context.Background(), sc, Options{})
				if err != nil {
					b.Fatal(err)
				}
				reqs = rep.Requests.Arrived
			}
			b.ReportMetric(float64(reqs)*float64(b.N)/b.Elapsed().Seconds(), "requests/s")
		})
	}
}
