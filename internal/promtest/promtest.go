// Package promtest reads series from a Prometheus registry for tests: the
// gateway's and the node's tests ask the same question of their registries.
package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Value gathers g and returns the sum, over the series of name whose labels
// include want, of each series' value: a counter's or gauge's value, a
// histogram's count — or, with sum, a histogram's sum of observations.
func Value(t testing.TB, g prometheus.Gatherer, name string, want map[string]string, sum bool) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || (lp.GetName() == k && lp.GetValue() == v)
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Histogram != nil && sum:
				total += m.Histogram.GetSampleSum()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return total
}
