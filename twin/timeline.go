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
	return FaultStartEvent(at, f.label, f.spec.String(), len(f.replicas), "")
}

// endEvent is a fault's fault-end entry.
func (f *faultRT) endEvent(at time.Duration) TimelineEvent {
	return FaultEndEvent(at, f.label)
}

// breakerDetectedEvent is the detected entry of a fault a breaker opening
// on one of its replicas detected at at.
func (f *faultRT) breakerDetectedEvent(at time.Duration) TimelineEvent {
	return DetectedEvent(at, f.label, f.start)
}

// breakerEvent is a circuit-breaker transition's entry, kind
// breaker-<state it went to>.
func (p *plan) breakerEvent(at time.Duration, tr sched.Transition) TimelineEvent {
	return BreakerEvent(at, p.pools[p.replicas[tr.Replica].Pool].Spec.Name, tr)
}

// The entries a live timeline (internal/liverun's console session) writes
// too, exported so that it writes them in the same words.

// FaultStartEvent is a fault-start entry: the fault's label, its spec as
// replayed, the replicas it hits and, when not "", who injected it.
func FaultStartEvent(at time.Duration, label, spec string, replicas int, by string) TimelineEvent {
	if by != "" {
		by = ", " + by
	}
	return timelineEvent(at, "fault-start", fmt.Sprintf("%s: %s (%d replicas%s)", label, spec, replicas, by))
}

// FaultEndEvent is a fault-end entry.
func FaultEndEvent(at time.Duration, label string) TimelineEvent {
	return timelineEvent(at, "fault-end", label)
}

// DetectedEvent is the detected entry of the fault label, begun at start,
// that a breaker opening detected at at.
func DetectedEvent(at time.Duration, label string, start time.Duration) TimelineEvent {
	return timelineEvent(at, "detected", fmt.Sprintf("%s after %v", label, (at-start).Round(time.Millisecond)))
}

// BreakerEvent is a circuit-breaker transition's entry on a replica of
// pool, kind breaker-<state it went to>.
func BreakerEvent(at time.Duration, pool string, tr sched.Transition) TimelineEvent {
	return timelineEvent(at, "breaker-"+tr.To.String(), fmt.Sprintf("pool %s replica %d: %s", pool, tr.Replica, tr))
}

// ejectionEvent is a latency outlier's entry: kind ejected when it is
// taken out of routing, ejection-end when it returns.
func (p *plan) ejectionEvent(e sched.Ejection) TimelineEvent {
	return EjectionEvent(p.pools[p.replicas[e.Replica].Pool].Spec.Name, e)
}

// EjectionEvent is a latency outlier ejection's entry on a replica of
// pool: kind ejected, or ejection-end when it returns.
func EjectionEvent(pool string, e sched.Ejection) TimelineEvent {
	kind := "ejected"
	if e.Returned {
		kind = "ejection-end"
	}
	return timelineEvent(e.At, kind, fmt.Sprintf("pool %s replica %d: %s", pool, e.Replica, e))
}

// Event is any other timeline entry, its time rounded as every report
// time is.
func Event(at time.Duration, kind, detail string) TimelineEvent {
	return timelineEvent(at, kind, detail)
}

// warmupEndEvent marks when requests start to count.
func warmupEndEvent(at time.Duration) TimelineEvent {
	return timelineEvent(at, "warmup-end", "measurement starts")
}

// arrivalsEndEvent marks the scenario's duration: the drain starts.
func arrivalsEndEvent(at time.Duration) TimelineEvent {
	return timelineEvent(at, "arrivals-end", "no new requests; draining")
}
