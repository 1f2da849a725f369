package openmetrics

import (
	"context"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// countWriter counts what is written to it.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// BenchmarkRunDefault is `fleetdrill run default` without and with
// --openmetrics (15 s steps): the run alone, the run sampled, and the run
// sampled and written. The ratio of wall-ms/run is the flag's cost; the
// file's size is reported per run.
func BenchmarkRunDefault(b *testing.B) {
	sc, err := scenarios.LoadNamed("default")
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"plain", "sampled", "sampled+written"} {
		b.Run(mode, func(b *testing.B) {
			var bytes int64
			for b.Loop() {
				var opts twin.Options
				if mode != "plain" {
					opts.Metrics = &twin.Metrics{Step: 15 * time.Second}
				}
				if _, err := twin.Run(context.Background(), sc, opts); err != nil {
					b.Fatal(err)
				}
				if mode == "sampled+written" {
					w := &countWriter{}
					if err := Write(w, opts.Metrics, DefaultStart); err != nil {
						b.Fatal(err)
					}
					bytes += w.n
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "wall-ms/run")
			if bytes > 0 {
				b.ReportMetric(float64(bytes)/float64(b.N), "file-B/run")
			}
		})
	}
}
