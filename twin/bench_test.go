package twin

import (
	"context"
	"testing"
	"time"
)

// benchReplay runs one simulated hour of an Azure-2023-conversation-shaped
// workload (Poisson arrivals, input ≈ 1,155 and output ≈ 211 tokens on
// average) and reports simulated seconds per wall second.
func benchReplay(b *testing.B, replicas int, rate float64) {
	sc := azureLike(replicas, rate, time.Hour)
	sc.Drain = dur(time.Minute)
	var simulated float64
	var events uint64
	for b.Loop() {
		rep, err := Run(context.Background(), sc, Options{})
		if err != nil {
			b.Fatal(err)
		}
		simulated += rep.SimDurationS
		events += rep.Events
	}
	b.ReportMetric(simulated/b.Elapsed().Seconds(), "x-realtime")
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
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
	var simulated float64
	for b.Loop() {
		rep, err := Run(context.Background(), sc, Options{})
		if err != nil {
			b.Fatal(err)
		}
		simulated += rep.SimDurationS
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "wall-s/run")
	b.ReportMetric(simulated/b.Elapsed().Seconds(), "x-realtime")
}
