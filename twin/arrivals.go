package twin

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim"
)

// openSources opens every workload stream's source, drawing from the named
// random streams rnd gives; a trace stream counts its skipped rows in
// reports[i]. On error the sources opened so far are closed.
func openSources(p *plan, rnd func(name string) *rand.Rand, duration time.Duration, reports []StreamReport) ([]source, error) {
	var out []source
	for i, sp := range p.streams {
		name := sp.spec.Name
		if sp.spec.Trace == nil {
			out = append(out, newGenerator(sp.spec, rnd("arrivals/"+name), rnd("tokens/"+name), duration))
			continue
		}
		ts, err := newTraceSource(p, sp, rnd("trace/"+name), duration, &reports[i].SkippedRows)
		if err != nil {
			for _, src := range out {
				_ = src.close()
			}
			return nil, fmt.Errorf("workload %s: %w", name, err)
		}
		out = append(out, ts)
	}
	return out, nil
}

// Arrival is one request of a scenario's workload, as Run offers it to the
// gateway: for a replay of the same requests outside the twin (the live
// harness). Indices are into the scenario's lists.
type Arrival struct {
	At                   time.Duration
	Stream               int
	Tenant, Class, Model int
	Input, Output        int // tokens
	// Deadline is the request's own deadline, relative to At; 0: its
	// class's.
	Deadline time.Duration
}

// Arrivals calls fn with every request of the scenario's workload in
// arrival order — the requests Run draws for the same scenario and seed —
// and returns each stream's report. It stops at fn's first error. The
// scenario gets its defaults applied, as Run does.
func Arrivals(sc *scenarios.Scenario, fn func(Arrival) error) (map[string]StreamReport, error) {
	p, err := build(sc)
	if err != nil {
		return nil, err
	}
	s := sim.New(sim.Config{Seed: sc.Seed})
	reports := make([]StreamReport, len(p.streams))
	srcs, err := openSources(p, s.Rand, sc.Duration.D(), reports)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, src := range srcs {
			_ = src.close()
		}
	}()
	// Merge the streams by time; ties go to the lower stream, as the
	// kernel's FIFO order does for streams scheduled in order.
	next := make([]arrival, len(srcs))
	ok := make([]bool, len(srcs))
	pull := func(i int) error {
		a, more, err := srcs[i].next()
		if err != nil {
			return fmt.Errorf("workload %s: %w", p.streams[i].spec.Name, err)
		}
		next[i], ok[i] = a, more
		return nil
	}
	for i := range srcs {
		if err := pull(i); err != nil {
			return nil, err
		}
	}
	for {
		best := -1
		for i := range srcs {
			if ok[i] && (best < 0 || next[i].at < next[best].at) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		a, sp := next[best], p.streams[best]
		out := Arrival{At: a.at, Stream: best, Tenant: sp.tenant, Class: sp.class, Model: sp.model,
			Input: a.in, Output: a.out, Deadline: a.deadline}
		if a.tenant >= 0 {
			out.Tenant = a.tenant
		}
		if a.class >= 0 {
			out.Class = a.class
		}
		if a.model >= 0 {
			out.Model = a.model
		}
		reports[best].Requests++
		if err := fn(out); err != nil {
			return nil, err
		}
		if err := pull(best); err != nil {
			return nil, err
		}
	}
	out := map[string]StreamReport{}
	for i, st := range sc.Workload {
		out[st.Name] = reports[i]
	}
	return out, nil
}
