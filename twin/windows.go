package twin

import (
	"fmt"
	"math"
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
}

type window struct {
	key      string
	from, to time.Duration
	total    Counts
	classes  []*Group
}

func (w *window) contains(t time.Duration) bool { return t >= w.from && t < w.to }

// initWindows creates the windows the scenario's scoped expectations need.
func (r *runner) initWindows() error {
	seen := map[string]bool{}
	for _, s := range r.p.sc.Expect {
		e, err := scenarios.ParseExpectation(s)
		if err != nil || e.Scope == "" || seen[e.Window()] {
			continue // syntax errors surface when expectations are evaluated
		}
		seen[e.Window()] = true
		var start, end time.Duration
		if e.Fault == "recovery" {
			if len(r.faults) == 0 {
				return fmt.Errorf("expect %q: the scenario has no faults to recover from", s)
			}
			for _, f := range r.faults {
				if f.end == 0 {
					return fmt.Errorf("expect %q: fault %s never ends (no for=), so there is no recovery", s, f.label)
				}
				end = max(end, f.end)
			}
		} else {
			f := r.faultByLabel(e.Fault)
			if f == nil {
				var labels []string
				for _, f := range r.faults {
					labels = append(labels, f.label)
				}
				return fmt.Errorf("expect %q: no fault labelled %s (faults: %v)", s, e.Fault, labels)
			}
			start, end = f.start, f.end
			if e.Scope == "after" && end == 0 {
				return fmt.Errorf("expect %q: fault %s never ends (no for=), so it has no after", s, f.label)
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
		for range r.p.sc.Classes {
			w.classes = append(w.classes, &Group{})
		}
		r.windows = append(r.windows, w)
	}
	return nil
}

func (r *runner) faultByLabel(label string) *faultRT {
	for _, f := range r.faults {
		if f.label == label {
			return f
		}
	}
	return nil
}

// windowGroups appends to gs the class groups of the windows req arrived in.
func (r *runner) windowGroups(gs []*Group, req *request) []*Group {
	for _, w := range r.windows {
		if w.contains(req.core.Arrived) {
			gs = append(gs, w.classes[req.core.Class])
		}
	}
	return gs
}

func (r *runner) windowReports(window float64) map[string]*WindowReport {
	out := map[string]*WindowReport{}
	for _, w := range r.windows {
		wr := &WindowReport{FromS: round(w.from.Seconds(), 6), ToS: -1, Requests: w.total, Classes: map[string]*Group{}}
		if w.to != math.MaxInt64 {
			wr.ToS = round(w.to.Seconds(), 6)
		}
		span := window
		if w.to != math.MaxInt64 {
			span = (w.to - w.from).Seconds()
		}
		for i, c := range r.p.sc.Classes {
			g := w.classes[i]
			g.finish(span)
			wr.Classes[c.Name] = g
		}
		out[w.key] = wr
	}
	return out
}
