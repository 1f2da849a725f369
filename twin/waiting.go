package twin

import (
	"time"

	"github.com/fleetdrill/fleetdrill/sim/stats"
)

// Requests waiting for their first token: queued, deferred, retrying, or
// dispatched and not yet past their prefill. Completed requests alone hide
// an outage while it lasts (the requests it holds have not completed); the
// age of the oldest waiting request, and a TTFT p99 that counts the
// waiting ones at their current age, show it the moment they wait past the
// objective. The drill's console, the live console (through the Recorder)
// and the fleetdrill_oldest_waiting_seconds and fleetdrill_waiting_requests
// series (twin/metrics.go) read them alike.

// waitingAges returns, per class of classes, the ages at now of the
// requests of slab reqs waiting for their first token: alive (not done) and
// without one. The slab holds every live request: a scan per call.
func waitingAges(reqs []*request, classes int, now time.Duration) [][]time.Duration {
	ages := make([][]time.Duration, classes)
	for _, req := range reqs {
		if req.state != stDone && req.firstAt == 0 && !req.shadow {
			ages[req.Core.Class] = append(ages[req.Core.Class], now-req.Core.Arrived)
		}
	}
	return ages
}

// fillWaiting sets cs's Waiting, OldestWaiting and TTFTP99Waiting from the
// ages of the class's waiting requests; ttft holds the TTFTs of the
// window's completed requests, and the ages are added to it. cs.TTFTP99
// must be set: without waiting requests TTFTP99Waiting is that.
func fillWaiting(cs *ClassState, ttft *stats.Sketch, ages []time.Duration) {
	cs.TTFTP99Waiting = cs.TTFTP99
	if len(ages) == 0 {
		return
	}
	cs.Waiting = len(ages)
	for _, age := range ages {
		cs.OldestWaiting = max(cs.OldestWaiting, age)
		ttft.AddDuration(age)
	}
	cs.TTFTP99Waiting = time.Duration(ttft.Quantile(0.99) * float64(time.Second))
}

// AddWaiting fills the Waiting, OldestWaiting and TTFTP99Waiting of
// classes, the result of Recent(now, window), from ages: per class, in the
// scenario's order (a shorter or nil slice: none for the rest), the ages of
// the requests waiting for their first token now, as the gateway tracks
// them. The p99 counts the window's completed requests and the waiting
// ones at their current age, as a drill's snapshot does.
func (rec *Recorder) AddWaiting(classes []ClassState, now, window time.Duration, ages [][]time.Duration) {
	for ci := range classes {
		var a []time.Duration
		if ci < len(ages) {
			a = ages[ci]
		}
		var ttft stats.Sketch
		if len(a) > 0 {
			// The window's completed requests, as Recent counts them.
			for i := range rec.outs {
				o := &rec.outs[i]
				if o.Class == ci && o.Result == Completed && o.Ended <= now && o.Ended > now-window {
					ttft.AddDuration(o.TTFT)
				}
			}
		}
		fillWaiting(&classes[ci], &ttft, a)
	}
}
