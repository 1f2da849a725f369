package twin

import (
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim/stats"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// tally accumulates request outcomes into the report's groups: the whole
// run, each class and tenant, and the windows scoped expectations name. The
// twin's runner and the live harness's Recorder both feed one, so a live
// report is counted, judged against the SLOs and windowed exactly as the
// twin's is.
type tally struct {
	sketches   []*stats.Sketch // complete's scratch
	sc         *scenarios.Scenario
	total      Counts
	classes    []*Group
	tenants    []*Group
	windows    []*window
	rejections map[string]uint64
	succeeded  uint64       // all requests that met their SLO, warm-up included
	shortfalls []*shortfall // the autoscaled pools' (shortfall.go)
}

func newTally(sc *scenarios.Scenario) tally {
	t := tally{sc: sc, rejections: map[string]uint64{}}
	// Every reason appears in the report, zero or not, so expectations
	// such as `rejections.queue-full == 0` resolve before the run.
	for _, reason := range []string{sched.ReasonTenantConcurrency, sched.ReasonTenantTokens,
		sched.ReasonQueueFull, sched.ReasonDeadline, sched.ReasonNoRoute, sched.ReasonUnavailable} {
		t.rejections[reason] = 0
	}
	for range sc.Classes {
		t.classes = append(t.classes, &Group{})
	}
	for range sc.Tenants {
		t.tenants = append(t.tenants, &Group{})
	}
	return t
}

// count applies f to the counts of the run, of the request's class and
// tenant, and of every window it arrived in.
func (t *tally) count(class, tenant int, arrived time.Duration, f func(*Counts)) {
	f(&t.total)
	f(&t.classes[class].Counts)
	f(&t.tenants[tenant].Counts)
	for _, w := range t.windows {
		if w.contains(arrived) {
			f(&w.total)
			f(&w.classes[class].Counts)
			f(&w.tenants[tenant].Counts)
		}
	}
}

// served is a completed request's timings, in simulated (model) time.
type served struct {
	class, tenant   int
	arrived         time.Duration
	ttft, e2e, wait time.Duration
	output          int
	fallback        bool
	pool            string // that served it ("": not known)
}

// tpot is the time per output token after the first; 0 for one token.
func (s *served) tpot() time.Duration {
	if s.output <= 1 {
		return 0
	}
	return (s.e2e - s.ttft) / time.Duration(s.output-1)
}

// met reports whether s completed within every objective of its class.
func (t *tally) met(s *served) bool {
	return reqengine.MetSLO(t.sc.Classes[s.class].SLO, s.ttft, s.e2e, s.output)
}

// complete records a completed request's timings; measured is false for a
// request of the warm-up, which only counts towards the cost per
// successful task. It returns whether the request met its SLO.
func (t *tally) complete(s *served, measured bool) bool {
	met := t.met(s)
	if met {
		t.succeeded++
	}
	if !measured {
		return met
	}
	gs := [2]*Group{t.classes[s.class], t.tenants[s.tenant]}
	groups := t.windowGroups(gs[:], s.class, s.tenant, s.arrived)
	// Each figure goes to every group at once: its sketch bucket is
	// computed once (stats.AddDurationAll), the same as adding it to each.
	sk := t.sketches[:0]
	for _, g := range groups {
		sk = append(sk, &g.ttft)
		if met {
			g.SLOMet++
		}
	}
	stats.AddDurationAll(s.ttft, sk...)
	for i, g := range groups {
		sk[i] = &g.e2e
	}
	stats.AddDurationAll(s.e2e, sk...)
	for i, g := range groups {
		sk[i] = &g.wait
	}
	stats.AddDurationAll(s.wait, sk...)
	if s.output > 1 {
		for i, g := range groups {
			sk[i] = &g.tpot
		}
		stats.AddDurationAll(s.tpot(), sk...)
	}
	t.sketches = sk
	if s.pool != "" {
		for _, w := range t.windows {
			if w.contains(s.arrived) {
				w.pools[s.pool]++
			}
		}
	}
	// A fallback is an event on the counts of the run and of each window
	// it arrived in, as on its class's and tenant's.
	if s.fallback {
		t.count(s.class, s.tenant, s.arrived, func(c *Counts) { c.Fallbacks++ })
	}
	return met
}

// fill puts the run's counts, groups, windows and rejections into rep;
// window is the measured span in seconds.
func (t *tally) fill(rep *Report, window float64) {
	rep.Requests = t.total
	rep.Windows = t.windowReports(window)
	for k, v := range t.rejections {
		rep.Rejections[k] = v
	}
	for i, c := range t.sc.Classes {
		g := t.classes[i]
		g.finish(window)
		rep.Classes[c.Name] = g
	}
	for i, tn := range t.sc.Tenants {
		g := t.tenants[i]
		g.finish(window)
		rep.Tenants[tn.Name] = g
	}
}
