package twin

import (
	"time"

	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// The degradation ladder. Its rule, its cadence, what feeds it and its
// judgement of a request are the request engine's (reqengine.Ladder), the
// gateway's too; the twin writes its moves on the timeline and carries the
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

// laddered writes a ladder's move on the timeline.
func (r *runner) laddered(ch sched.LadderChange) {
	r.event(r.s.Now(), reqengine.ChangeKind(ch), ch.Detail)
}

// judged carries out the ladder's verdict on a request (the engine judged
// it before an offer, and applied its effect to the core's request): a
// deferral is counted, a cached answer is looked up, and a capped output
// caps the engine sequence the request will run as. A shed is an Answer.
func (r *runner) judged(j reqengine.Judged) {
	req := r.owner(&j.Req.Core)
	switch j.Next.Action {
	case sched.Reoffer:
		if req.measured {
			r.count(req, func(c *Counts) { c.Deferred++ })
		}
		req.state = stBackoff
	case sched.AnswerCached:
		// Answered from the cache at once; its age is disclosed with the
		// answer (the report and the timeline say which age).
		now := r.s.Now()
		req.state = stRunning
		req.dispatchedAt, req.firstAt = now, now
		r.completeCached(req)
	case sched.OfferNow:
		if j.Effect.Capped {
			req.seq.Output = j.Effect.Output
		}
	}
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
