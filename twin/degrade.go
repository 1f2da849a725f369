package twin

import (
	"time"

	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// The degradation ladder. Its rule, its cadence, what feeds it and its
// judgement of a request are the request engine's (reqengine.Ladder), the
// gateway's too; the twin schedules its evaluations and carries the
// verdicts out on the simulated request.

// DegradationReport is what the ladder did.
type DegradationReport struct {
	Steps map[string]*StepReport `json:"steps"`
	// Requests affected by each action (measured requests only).
	Shed        uint64 `json:"shed"`        // refused (or deferred) by shed-batch and defer-async
	Capped      uint64 `json:"capped"`      // output capped by cap-output
	Substituted uint64 `json:"substituted"` // sent to a smaller model by smaller-model
	Cached      uint64 `json:"cached"`      // answered from cache by cached-answers
}

// StepReport is one rung's history.
type StepReport struct {
	Engagements int     `json:"engagements"`
	EngagedS    float64 `json:"engaged_s"` // total time engaged
}

// evaluateLadder is the ladder's evaluation, due every sched.LadderEvery
// while the run has requests live or to come.
func (r *runner) evaluateLadder() {
	now := r.s.Now()
	if ch, ok := r.ladder.Evaluate(now, r.core); ok {
		r.event(now, reqengine.ChangeKind(ch), ch.Detail)
	}
	if next := r.ladder.NextAt(); next <= r.end && (r.lc.Live() > 0 || !r.afterArrivals()) {
		r.s.At(next, r.evaluateLadder)
	}
}

// degrade applies the engaged rungs to a request the ladder judges (before
// its first offer, or back from a ladder's deferral; the lifecycle says
// which and what follows). It reports true when the request was handled
// (shed, deferred or answered from cache) and must not be offered.
func (r *runner) degrade(req *request) bool {
	// The cache's draw is taken from the ladder's own stream, only when a
	// cached-answers rung covers the request's class.
	n, e, judged := r.ladder.Judge(r.lc, &req.life, &req.core, req.measured, r.ladderRand.Float64)
	if !judged {
		return false
	}
	switch n.Action {
	case sched.Reoffer:
		if req.measured {
			r.count(req, func(c *Counts) { c.Deferred++ })
		}
		req.state = stDeferred
		req.retry = r.s.After(n.After, req.onRetry)
		return true
	case sched.Refuse:
		r.reject(req, sched.Decision{Outcome: sched.Rejected, Reason: n.Reason, RetryAfter: n.RetryAfter})
		return true
	case sched.AnswerCached:
		// Answered from the cache at once; its age is disclosed with the
		// answer (the report and the timeline say which age).
		now := r.s.Now()
		req.state = stRunning
		req.dispatchedAt, req.firstAt = now, now
		r.completeCached(req)
		return true
	}
	if e.Capped {
		req.core.Output = e.Output
		req.seq.Output = e.Output
	}
	req.core.Model = e.Model
	return false
}

// degradationReport is what ladder l did up to now; nil without one.
func degradationReport(l *reqengine.Ladder, now time.Duration) *DegradationReport {
	if l == nil {
		return nil
	}
	// The rungs still engaged are counted up to now; the ladder itself is
	// left as it is (the report is assembled more than once).
	lr := l.Report(now)
	rep := &DegradationReport{Steps: map[string]*StepReport{}, Shed: lr.Shed, Capped: lr.Capped,
		Substituted: lr.Substituted, Cached: lr.Cached}
	engaged := map[string]time.Duration{}
	for i, st := range l.Rungs() {
		sr := rep.Steps[st.Name]
		if sr == nil {
			sr = &StepReport{}
			rep.Steps[st.Name] = sr
		}
		sr.Engagements += lr.Engagements[i]
		engaged[st.Name] += lr.Engaged[i]
		sr.EngagedS = round(engaged[st.Name].Seconds(), 6)
	}
	return rep
}
