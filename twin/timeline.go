package twin

import (
	"fmt"
	"time"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// timelineEvent is one entry of a report's timeline. Every entry is made
// here, so that a time is rounded as every other report time is.
func timelineEvent(at time.Duration, kind, detail string) TimelineEvent {
	return TimelineEvent{TS: round(at.Seconds(), 6), Kind: kind, Detail: detail}
}

// The entries below are written by more than one of the twin's runner, a
// drill and the live Recorder: one constructor each keeps a live timeline
// readable against the twin's (and a drill's rewrite of an entry matching
// what was written).

// startEvent is a fault's fault-start entry: its spec as it will be
// replayed, and how many replicas it hits.
func (f *faultRT) startEvent(at time.Duration) TimelineEvent {
	return timelineEvent(at, "fault-start", fmt.Sprintf("%s: %s (%d replicas)", f.label, f.spec.String(), len(f.replicas)))
}

// endEvent is a fault's fault-end entry.
func (f *faultRT) endEvent(at time.Duration) TimelineEvent {
	return timelineEvent(at, "fault-end", f.label)
}

// breakerDetectedEvent is the detected entry of a fault a breaker opening
// on one of its replicas detected at at.
func (f *faultRT) breakerDetectedEvent(at time.Duration) TimelineEvent {
	return timelineEvent(at, "detected", fmt.Sprintf("%s after %v", f.label, at-f.start))
}

// breakerEvent is a circuit-breaker transition's entry, kind
// breaker-<state it went to>.
func (p *plan) breakerEvent(at time.Duration, tr sched.Transition) TimelineEvent {
	pool := p.pools[p.replicas[tr.Replica].pool].spec.Name
	return timelineEvent(at, "breaker-"+tr.To.String(), fmt.Sprintf("pool %s replica %d: %s", pool, tr.Replica, tr))
}

// warmupEndEvent marks when requests start to count.
func warmupEndEvent(at time.Duration) TimelineEvent {
	return timelineEvent(at, "warmup-end", "measurement starts")
}

// arrivalsEndEvent marks the scenario's duration: the drain starts.
func arrivalsEndEvent(at time.Duration) TimelineEvent {
	return timelineEvent(at, "arrivals-end", "no new requests; draining")
}
