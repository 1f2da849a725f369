package twin

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// scaleScenario is issue 35's fleet (testdata/scale.yaml) at replicas,
// 0.69 req/s each, for d simulated.
func scaleScenario(b *testing.B, replicas int, d time.Duration) *scenarios.Scenario {
	sc, err := scenarios.LoadWithSets("testdata/scale.yaml", []string{
		fmt.Sprintf("pools.h100.replicas=%d", replicas),
		fmt.Sprintf("workload.chat.arrivals.rate=%g", 0.69*float64(replicas)),
		"duration=" + d.String()})
	if err != nil {
		b.Fatal(err)
	}
	return sc
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScale runs issue 35's fleet at 64 to 32,768 replicas (an hour
// simulated, ten minutes at 32,768) and reports simulated requests per
// CPU-second (the process's user and system time, GC included), ns of CPU
// per kernel event, and the Go runtime's memory obtained from the OS per
// replica after the run (a bound on the peak heap).
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{64, 512, 4096, 32768} {
		d := time.Hour
		if n >= 32768 {
			d = 10 * time.Minute
		}
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			sc := scaleScenario(b, n, d)
			var reqs, events uint64
			var cpu time.Duration
			for b.Loop() {
				c0 := cpuTime()
				rep, err := Run(context.Background(), sc, Options{})
				if err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - c0
				reqs += rep.Requests.Arrived
				events += rep.Events
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(reqs)/cpu.Seconds(), "req/cpu-s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(events), "cpu-ns/event")
			b.ReportMetric(float64(ms.Sys)/float64(n), "sys-B/replica")
			b.ReportMetric(float64(reqs)/float64(b.N), "req/op")
		})
	}
}
