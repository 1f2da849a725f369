package twin

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// Scoped expectations ("during regional-outage(us-east): …", "after
// recovery + 5m: …") are checked against the requests that arrived in a
// window of the run. The windows are known before the run — faults start
// and end when their specs say — so each is a set of report groups fed as
// requests finish, like the whole-run groups.

// WindowReport is the report of the requests that arrived in a window.
type WindowReport struct {
	FromS    float64           `json:"from_s"`
	ToS      float64           `json:"to_s"` // -1: to the end of the run
	Requests Counts            `json:"requests"`
	Classes  map[string]*Group `json:"classes"`
	Tenants  map[string]*Group `json:"tenants"`
	// Pools are where the window's completed requests were served: every
	// pool of the scenario is listed, so `during X: pools.P.share > 0.5`
	// resolves before the run.
	Pools map[string]*WindowPool `json:"pools"`
}

// WindowPool is one pool's part of a window's completed requests.
type WindowPool struct {
	Completed uint64  `json:"completed"`
	Share     float64 `json:"share"` // of the window's completed requests; 0 when none completed
}

type window struct {
	key      string
	from, to time.Duration
	total    Counts
	classes  []*Group
	tenants  []*Group
	pools    map[string]uint64 // completed, by the pool that served
}

func (w *window) contains(t time.Duration) bool { return t >= w.from && t < w.to }

// faultSpan is when a fault is active, by its label.
type faultSpan struct {
	label      string
	start, end time.Duration // end 0: to the end of the run
}

// initWindows creates the windows the scenario's scoped expectations need,
// given the scenario's faults.
func (t *tally) initWindows(spans []faultSpan) error {
	seen := map[string]bool{}
	for _, s := range t.sc.Expect {
		e, err := scenarios.ParseExpectation(s)
		if err != nil || e.Scope == "" || seen[e.Window()] {
			continue // syntax errors surface when expectations are evaluated
		}
		seen[e.Window()] = true
		var start, end time.Duration
		if e.Fault == "recovery" {
			if len(spans) == 0 {
				return fmt.Errorf("expect %q: the scenario has no faults to recover from", s)
			}
			for _, f := range spans {
				if f.end == 0 {
					return fmt.Errorf("expect %q: fault %s never ends (no for=), so there is no recovery", s, f.label)
				}
				end = max(end, f.end)
			}
		} else {
			i := slices.IndexFunc(spans, func(f faultSpan) bool { return f.label == e.Fault })
			if i < 0 {
				var labels []string
				for _, f := range spans {
					labels = append(labels, f.label)
				}
				return fmt.Errorf("expect %q: no fault labelled %s (faults: %v)", s, e.Fault, labels)
			}
			start, end = spans[i].start, spans[i].end
			if e.Scope == "after" && end == 0 {
				return fmt.Errorf("expect %q: fault %s never ends (no for=), so it has no after", s, e.Fault)
			}
		}
		w := &window{key: e.Window()}
		switch e.Scope {
		case "during":
			w.from, w.to = start, end
			if end == 0 {
				w.to = math.MaxInt64
			}
		case "after":
			w.from, w.to = end+e.Offset, math.MaxInt64
		}
		for range t.sc.Classes {
			w.classes = append(w.classes, &Group{})
		}
		for range t.sc.Tenants {
			w.tenants = append(w.tenants, &Group{})
		}
		w.pools = map[string]uint64{}
		for _, p := range t.sc.Pools {
			w.pools[p.Name] = 0
		}
		t.windows = append(t.windows, w)
	}
	return nil
}

// windowGroups appends to gs the groups of class in the windows a request
// arriving at arrived belongs to.
func (t *tally) windowGroups(gs []*Group, class, tenant int, arrived time.Duration) []*Group {
	for _, w := range t.windows {
		if w.contains(arrived) {
			gs = append(gs, w.classes[class], w.tenants[tenant])
		}
	}
	return gs
}

func (t *tally) windowReports(window float64) map[string]*WindowReport {
	out := map[string]*WindowReport{}
	for _, w := range t.windows {
		wr := &WindowReport{FromS: round(w.from.Seconds(), 6), ToS: -1, Requests: w.total, Classes: map[string]*Group{}}
		if w.to != math.MaxInt64 {
			wr.ToS = round(w.to.Seconds(), 6)
		}
		span := window
		if w.to != math.MaxInt64 {
			span = (w.to - w.from).Seconds()
		}
		for i, c := range t.sc.Classes {
			g := w.classes[i]
			g.finish(span)
			wr.Classes[c.Name] = g
		}
		wr.Tenants = map[string]*Group{}
		for i, tn := range t.sc.Tenants {
			g := w.tenants[i]
			g.finish(span)
			wr.Tenants[tn.Name] = g
		}
		wr.Pools = map[string]*WindowPool{}
		var done uint64
		for _, n := range w.pools {
			done += n
		}
		for name, n := range w.pools {
			wp := &WindowPool{Completed: n}
			if done > 0 {
				wp.Share = round(float64(n)/float64(done), 6)
			}
			wr.Pools[name] = wp
		}
		out[w.key] = wr
	}
	return out
}
