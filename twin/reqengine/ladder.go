package reqengine

import (
	"time"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Ladder is the degradation ladder as both drivers run it: sched.Ladder's
// rule (its signals, the climb and the release with hysteresis, what each
// rung does to a request), when it is evaluated and from what, whether a
// request's judgement is counted, and which attempts feed its error rate
// (Observed). The driver carries the verdicts out: it defers, refuses or
// answers from a cache, and writes the changes on its timeline or log.
type Ladder struct {
	*sched.Ladder
	every time.Duration
	next  time.Duration
}

// NewLadder returns the ladder of cfg (nil when cfg has none), first
// evaluated at start+every and every `every` after. The twin evaluates it
// every sched.LadderEvery; a gateway at least a millisecond of wall time
// apart too, whatever its speed, so that a compressed clock does not make
// it a busy loop.
func NewLadder(cfg sched.Config, start, every time.Duration) *Ladder {
	l := sched.NewLadder(cfg)
	if l == nil {
		return nil
	}
	every = max(every, sched.LadderEvery)
	return &Ladder{Ladder: l, every: every, next: start + every}
}

// NextAt is when the ladder is next due.
func (l *Ladder) NextAt() time.Duration { return l.next }

// Evaluate moves the ladder by at most one rung from the core's signals at
// now (its oldest queued wait and saturation; the error rate is the
// attempts'), and makes it due again a period later. It reports the
// change, if any.
func (l *Ladder) Evaluate(now time.Duration, core *sched.Core) (sched.LadderChange, bool) {
	l.next = now + l.every
	return l.Ladder.Evaluate(now, core.OldestWait(now), core.Saturation())
}

// ChangeKind is a change's kind on a timeline: "degrade" when a rung
// engaged, "restore" when one was released.
func ChangeKind(ch sched.LadderChange) string {
	if ch.Engaged {
		return "degrade"
	}
	return "restore"
}

// Judge applies the engaged rungs to a request the ladder judges (before
// its first offer, or back from the ladder's deferral: life says which)
// and returns what follows and what the rungs did to it; ok is false when
// the ladder does not judge it, and the request goes on as it is. counted
// says whether the judgement enters the ladder's report (the twin counts
// its measured requests only). draw is the cached-answers rung's draw
// (nil where no such rung can run).
func (l *Ladder) Judge(lc *sched.Lifecycle, life *sched.Life, req *sched.Request, counted bool, draw func() float64) (n sched.Next, e sched.Effect, ok bool) {
	if l == nil || !life.LadderJudges() {
		return sched.Next{}, sched.Effect{}, false
	}
	n, e = lc.Degrade(life, l.Ladder, req.Class, req.Model, req.Output, draw)
	if counted {
		l.Count(e)
	}
	return n, e, true
}

// Observed is what an attempt's end on replica tells the engine, in one
// order for both drivers: the replica's own latency (dispatch to first
// token, when it answered: outlier ejection compares replicas, and the
// queue wait is no replica's doing), the ladder's error rate, and the
// replica's health (its breaker and ejection). A throttled attempt is
// none of these: it is the provider's answer (Core.Throttled). l may be
// nil.
func Observed(now time.Duration, core *sched.Core, l *Ladder, replica int, ok bool, latency time.Duration) {
	if ok && latency > 0 {
		core.ObserveLatency(now, replica, latency)
	}
	if l != nil {
		l.NoteAttempt(!ok)
	}
	core.Observe(now, replica, ok)
}
