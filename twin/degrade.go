package twin

import (
	"fmt"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// The degradation ladder. Every few seconds the driver reads three signals
// — the oldest queued request's wait, the share of replicas that cannot
// take a request, and the error rate of attempts over the last 30 s — and
// climbs the ladder one rung at a time while the next rung's trigger fires,
// or steps down from the top rung once its signals have fallen under
// recover_below of its thresholds and it has been engaged for hold. So
// load is shed from the lowest classes first and given back last, and a
// signal hovering at a threshold does not make the ladder flap.

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

const degradeEvery = 5 * time.Second

type ladder struct {
	steps   []scenarios.DegradeStep
	engaged int // rungs engaged, from the bottom
	since   []time.Duration
	report  DegradationReport
	classes map[string]int
	models  map[string]int

	// Error-rate window: attempts and failures in the current and previous
	// 15 s buckets.
	bucketStart           time.Duration
	attempts, failures    [2]uint64
	shedClass, deferClass []bool // per class: shed / defer engaged
	capOutput             int    // 0: none
	substitute            []int  // per model: the model to send it to, or -1
	cacheClass            []float64
	cacheAge              time.Duration
}

func (r *runner) initLadder() {
	pol := r.p.sc.Policy
	if len(pol.Degradation) == 0 {
		return
	}
	l := &ladder{steps: pol.Degradation, since: make([]time.Duration, len(pol.Degradation)),
		report: DegradationReport{Steps: map[string]*StepReport{}}, classes: r.p.classes, models: r.p.models}
	for _, st := range l.steps {
		l.report.Steps[st.Name] = &StepReport{}
	}
	l.apply(r.p)
	r.ladder = l
}

// signals reads the ladder's three signals now.
func (r *runner) signals() (wait time.Duration, saturation, errRate float64) {
	l := r.ladder
	now := r.s.Now()
	att, fail := l.attempts[0]+l.attempts[1], l.failures[0]+l.failures[1]
	if att > 0 {
		errRate = float64(fail) / float64(att)
	}
	return r.core.OldestWait(now), r.core.Saturation(), errRate
}

func fires(t scenarios.Trigger, wait time.Duration, sat, errRate, scale float64) bool {
	return (t.QueueWait > 0 && float64(wait) >= scale*float64(t.QueueWait)) ||
		(t.Saturation > 0 && sat >= scale*t.Saturation) ||
		(t.ErrorRate > 0 && errRate >= scale*t.ErrorRate)
}

func (r *runner) evaluateLadder() {
	l := r.ladder
	now := r.s.Now()
	wait, sat, errRate := r.signals()
	detail := fmt.Sprintf("queue wait %v, saturation %.2f, error rate %.2f", wait.Round(time.Millisecond), sat, errRate)
	switch {
	case l.engaged < len(l.steps) && fires(l.steps[l.engaged].Trigger, wait, sat, errRate, 1):
		st := l.steps[l.engaged]
		l.since[l.engaged] = now
		l.engaged++
		l.report.Steps[st.Name].Engagements++
		if st.Action == "cached-answers" {
			detail += fmt.Sprintf("; cached answers disclosed as up to %v old", st.CacheAge.D())
		}
		r.event(now, "degrade", fmt.Sprintf("step %d %s (%s): %s", l.engaged, st.Name, st.Action, detail))
		l.apply(r.p)
	case l.engaged > 0:
		top := l.engaged - 1
		st := l.steps[top]
		if now-l.since[top] >= st.Hold.D() && !fires(st.Trigger, wait, sat, errRate, st.RecoverBelow) {
			l.report.Steps[st.Name].EngagedS += (now - l.since[top]).Seconds()
			l.engaged--
			r.event(now, "restore", fmt.Sprintf("step %d %s released: %s", top+1, st.Name, detail))
			l.apply(r.p)
		}
	}
	// Roll the error-rate window.
	if now-l.bucketStart >= 15*time.Second {
		l.bucketStart = now
		l.attempts[1], l.failures[1] = l.attempts[0], l.failures[0]
		l.attempts[0], l.failures[0] = 0, 0
	}
	if now+degradeEvery <= r.end && (r.lc.Live() > 0 || !r.afterArrivals()) {
		r.s.After(degradeEvery, r.evaluateLadder)
	}
}

// apply recomputes the effects of the engaged rungs.
func (l *ladder) apply(p *plan) {
	l.shedClass = make([]bool, len(p.sc.Classes))
	l.deferClass = make([]bool, len(p.sc.Classes))
	l.cacheClass = make([]float64, len(p.sc.Classes))
	l.substitute = make([]int, len(p.sc.Models))
	for i := range l.substitute {
		l.substitute[i] = -1
	}
	l.capOutput = 0
	for _, st := range l.steps[:l.engaged] {
		switch st.Action {
		case "shed-batch":
			l.shedClass[l.classes[st.Class]] = true
		case "defer-async":
			l.deferClass[l.classes[st.Class]] = true
		case "cap-output":
			if l.capOutput == 0 || st.MaxOutputTokens < l.capOutput {
				l.capOutput = st.MaxOutputTokens
			}
		case "smaller-model":
			m := l.models[st.Model]
			if fb := p.core.Models[m].Fallbacks; len(fb) > 0 {
				l.substitute[m] = fb[0]
			}
		case "cached-answers":
			l.cacheClass[l.classes[st.Class]] = st.HitRate
			l.cacheAge = st.CacheAge.D()
		}
	}
}

// degrade applies the engaged rungs to a new request before admission. It
// reports true when the request was handled (shed, deferred or answered
// from cache) and must not be offered.
func (r *runner) degrade(req *request) bool {
	l := r.ladder
	// New requests, and requests the ladder deferred coming back (they
	// stay deferred while their class is still shed).
	if l == nil || l.engaged == 0 || (req.life.Attempts > 0 && !req.shed) {
		return false
	}
	now := r.s.Now()
	cls := req.core.Class
	count := func(f *uint64) {
		if req.measured {
			*f++
		}
	}
	switch {
	case l.shedClass[cls] || l.deferClass[cls]:
		if !req.shed {
			count(&l.report.Shed)
		}
		req.shed = true
		if r.p.sc.Classes[cls].Deferrable {
			if req.measured {
				r.count(req, func(c *Counts) { c.Deferred++ })
			}
			req.state = stDeferred
			req.retry = r.s.After(r.p.core.DeferFor, req.onRetry)
			return true
		}
		r.reject(req, sched.Decision{Outcome: sched.Rejected, Reason: "load-shed"})
		return true
	case l.cacheClass[cls] > 0 && r.ladderRand.Float64() < l.cacheClass[cls]:
		// Answered from the cache at once; its age is disclosed with the
		// answer (the report and the timeline say which age).
		count(&l.report.Cached)
		req.state = stRunning
		req.dispatchedAt, req.firstAt = now, now
		r.completeCached(req)
		return true
	}
	if l.capOutput > 0 && req.core.Output > l.capOutput {
		req.core.Output = l.capOutput
		req.seq.Output = l.capOutput
		count(&l.report.Capped)
	}
	if sub := l.substitute[req.core.Model]; sub >= 0 {
		req.core.Model = sub
		count(&l.report.Substituted)
	}
	return false
}

// noteAttempt feeds the error-rate signal.
func (r *runner) noteAttempt(failed bool) {
	if l := r.ladder; l != nil {
		l.attempts[0]++
		if failed {
			l.failures[0]++
		}
	}
}

func (r *runner) ladderReport() *DegradationReport {
	l := r.ladder
	if l == nil {
		return nil
	}
	// A copy, with the rungs still engaged counted up to now: the ladder
	// itself is left as it is (the report is assembled more than once).
	now := r.s.Now()
	rep := l.report
	rep.Steps = map[string]*StepReport{}
	for i, st := range l.steps {
		sr := *l.report.Steps[st.Name]
		if i < l.engaged {
			sr.EngagedS += (now - l.since[i]).Seconds()
		}
		sr.EngagedS = round(sr.EngagedS, 6)
		rep.Steps[st.Name] = &sr
	}
	return &rep
}
