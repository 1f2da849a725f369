package compare

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/fleetdrill/fleetdrill/twin"
)

// Better says which direction of a metric is an improvement. It is
// informative: the tests are two-sided.
type Better string

// The directions.
const (
	Lower  Better = "lower"
	Higher Better = "higher"
)

// classMetric is a metric read from one class's twin.Group. Names are the
// report's own paths under classes.<name>, so that a reader can find the
// same number in `fleetdrill run --json`.
type classMetric struct {
	name   string
	better Better
	get    func(*twin.Group) float64
}

var classMetrics = []classMetric{
	{"ttft_s.p99", Lower, func(g *twin.Group) float64 { return g.TTFT.P99 }},
	{"tpot_s.p99", Lower, func(g *twin.Group) float64 { return g.TPOT.P99 }},
	{"e2e_s.p99", Lower, func(g *twin.Group) float64 { return g.E2E.P99 }},
	{"queue_wait_s.p99", Lower, func(g *twin.Group) float64 { return g.QueueWait.P99 }},
	{"slo_attainment", Higher, func(g *twin.Group) float64 { return g.SLOAttainment.Or(0) }},
	{"goodput_rps", Higher, func(g *twin.Group) float64 { return g.GoodputRPS }},
}

// fleetMetric is a metric of the whole run.
type fleetMetric struct {
	name   string
	better Better
	get    func(*twin.Report) float64
}

var fleetMetrics = []fleetMetric{
	// rejection_rate is not a report field: requests.rejected /
	// requests.arrived, 0 when nothing arrived.
	{"rejection_rate", Lower, func(r *twin.Report) float64 {
		if r.Requests.Arrived == 0 {
			return 0
		}
		return float64(r.Requests.Rejected) / float64(r.Requests.Arrived)
	}},
	{"cost.per_successful_task", Lower, func(r *twin.Report) float64 { return r.Cost.PerSuccessfulTask }},
	{"residency_violations", Lower, func(r *twin.Report) float64 { return float64(r.ResidencyViolations) }},
}

// scaleMetric is a metric of one autoscaled pool, reported as
// autoscaling.<pool>.<name> among the fleet's rows when the scenario has an
// autoscaled pool: what the provider refused, what was paid beyond the
// reservation, and how late replicas came.
type scaleMetric struct {
	name   string
	better Better
	get    func(*twin.AutoscaleReport) float64
}

var scaleMetrics = []scaleMetric{
	{"refused", Lower, func(a *twin.AutoscaleReport) float64 { return float64(a.Refused) }},
	{"burst_cost", Lower, func(a *twin.AutoscaleReport) float64 { return a.BurstCost }},
	// 0 when no replica came up in the run.
	{"to_serving.p90", Lower, func(a *twin.AutoscaleReport) float64 { return a.ToServing.P90 }},
}

// MetricNames returns the names of the per-class metrics and of the
// fleet-wide ones, in the order they are reported.
func MetricNames() (class, fleet []string) {
	for _, m := range classMetrics {
		class = append(class, m.name)
	}
	for _, m := range fleetMetrics {
		fleet = append(fleet, m.name)
	}
	return class, fleet
}

// sample is what one run contributes: its metric values, per class in the
// scenario's class order and then fleet-wide. The report itself is dropped
// as soon as they are read, so a compare of many seeds holds no timelines.
type sample struct {
	classes []string
	class   [][]float64 // [class][classMetrics index]
	fleet   []float64   // [fleetMetrics index]
	scaled  []string    // the autoscaled pools, sorted
	scale   [][]float64 // [scaled index][scaleMetrics index]
}

// extract reads a sample from a report. classes is the scenario's class
// order (the report's map has none).
func extract(rep *twin.Report, classes []string) (sample, error) {
	s := sample{classes: classes, class: make([][]float64, len(classes)), fleet: make([]float64, len(fleetMetrics))}
	for i, name := range classes {
		g, ok := rep.Classes[name]
		if !ok || g == nil {
			return sample{}, fmt.Errorf("report has no class %q", name)
		}
		s.class[i] = make([]float64, len(classMetrics))
		for j, m := range classMetrics {
			v := m.get(g)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return sample{}, fmt.Errorf("classes.%s.%s is %v; want a finite number (a twin bug)", name, m.name, v)
			}
			s.class[i][j] = v
		}
	}
	for j, m := range fleetMetrics {
		v := m.get(rep)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return sample{}, fmt.Errorf("%s is %v; want a finite number (a twin bug)", m.name, v)
		}
		s.fleet[j] = v
	}
	s.scaled = slices.Sorted(maps.Keys(rep.Autoscaling))
	for _, pool := range s.scaled {
		row := make([]float64, len(scaleMetrics))
		for j, m := range scaleMetrics {
			v := m.get(rep.Autoscaling[pool])
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return sample{}, fmt.Errorf("autoscaling.%s.%s is %v; want a finite number (a twin bug)", pool, m.name, v)
			}
			row[j] = v
		}
		s.scale = append(s.scale, row)
	}
	return s, nil
}
