package sched

import (
	"fmt"
	"time"
)

// The degradation ladder, written once for both drivers.
//
// Every LadderEvery the driver reads two signals from the core — the oldest
// queued request's wait (Core.OldestWait) and the share of replicas that
// cannot take a request (Core.Saturation) — and hands them to Evaluate,
// which adds the third, the error rate of attempts over the last 30 s (fed
// by NoteAttempt), and climbs the ladder one rung while the next rung's
// trigger fires, or steps down from the top rung once its signals have
// fallen under recover_below of its thresholds and it has been engaged for
// its hold. So load is shed from the lowest classes first and given back
// last, and a signal hovering at a threshold does not make the ladder flap.
// Before a new request is offered to the core, Apply says what the engaged
// rungs do to it; the driver carries that out (refuse, defer, answer from
// cache, or offer it capped or to a smaller model).
//
//	l := sched.NewLadder(cfg)          // nil without cfg.Ladder
//	ch, ok := l.Evaluate(now, core.OldestWait(now), core.Saturation())
//	e := l.Apply(class, model, output, again, draw)
//	l.Count(e)                         // into the report
//	l.NoteAttempt(failed)              // an attempt on a replica ended
//
// Like the core, a Ladder reads no clock and draws no random number of its
// own; it is not safe for concurrent use.

// LadderEvery is how often the driver evaluates the ladder: rungs are
// engaged and released at most once per evaluation.
const LadderEvery = 5 * time.Second

// ReasonLoadShed is the reason of a request the ladder refused.
const ReasonLoadShed = "load-shed"

// errWindow is the span of one of the error-rate window's two buckets.
const errWindow = 15 * time.Second

// Rung actions.
const (
	// ShedBatch refuses the class's new requests, or defers them when the
	// class is deferrable.
	ShedBatch = "shed-batch"
	// DeferAsync defers the class's new requests (refuses them when the
	// class is not deferrable).
	DeferAsync = "defer-async"
	// CapOutput caps every new request's output tokens.
	CapOutput = "cap-output"
	// SmallerModel sends the model's new requests to its first fallback.
	SmallerModel = "smaller-model"
	// CachedAnswers answers a share of the class's new requests from a
	// cache, their age disclosed.
	CachedAnswers = "cached-answers"
)

// Trigger engages a rung when any set signal reaches its threshold (zero:
// not set).
type Trigger struct {
	QueueWait  time.Duration // the oldest queued request's wait
	Saturation float64       // share of replicas that cannot take a request
	ErrorRate  float64       // failed attempts / attempts over the last 30 s
}

// fires reports whether a signal reaches scale × its threshold.
func (t Trigger) fires(wait time.Duration, sat, errRate, scale float64) bool {
	return (t.QueueWait > 0 && float64(wait) >= scale*float64(t.QueueWait)) ||
		(t.Saturation > 0 && sat >= scale*t.Saturation) ||
		(t.ErrorRate > 0 && errRate >= scale*t.ErrorRate)
}

// Rung is one rung of the ladder, resolved to the core's indexes
// (Config.Ladder, bottom rung first).
type Rung struct {
	Name    string
	Action  string // ShedBatch, DeferAsync, CapOutput, SmallerModel, CachedAnswers
	Trigger Trigger
	// RecoverBelow is the fraction of every threshold the signals must
	// fall under before the rung is released; Hold the least time it
	// stays engaged.
	RecoverBelow float64
	Hold         time.Duration

	Class     int           // ShedBatch, DeferAsync, CachedAnswers: index into Config.Classes
	Model     int           // SmallerModel: index into Config.Models; it goes to its first fallback
	MaxOutput int           // CapOutput: output tokens
	HitRate   float64       // CachedAnswers: share of the class answered from cache
	CacheAge  time.Duration // CachedAnswers: the age of the answers, disclosed
}

// LadderReport is what the ladder did.
type LadderReport struct {
	// Per rung, bottom first: times engaged, and time engaged (closed
	// spells only; Ladder.Report adds the open ones).
	Engagements []int
	Engaged     []time.Duration
	// Requests affected by each action, as counted with Count.
	Shed        uint64 // refused or deferred by shed-batch and defer-async (once per request)
	Capped      uint64 // output capped by cap-output
	Substituted uint64 // sent to a smaller model by smaller-model
	Cached      uint64 // answered from cache by cached-answers
}

// Ladder is the degradation ladder's state: the rungs engaged, their
// effects, the error-rate window and the report.
type Ladder struct {
	rungs      []Rung
	deferrable []bool // per class
	fallback   []int  // per model: its first fallback, or -1
	deferFor   time.Duration

	engaged int // rungs engaged, from the bottom
	since   []time.Duration
	report  LadderReport

	// Error-rate window: attempts and failures in the current and previous
	// 15 s buckets, rolled by Evaluate.
	bucketStart        time.Duration
	attempts, failures [2]uint64

	// The engaged rungs' effects (see apply).
	shedClass  []bool    // per class: shed-batch or defer-async engaged
	cacheClass []float64 // per class: the hit rate of an engaged cached-answers, or 0
	cacheAge   time.Duration
	capOutput  int   // 0: none
	substitute []int // per model: the model to send it to, or -1
}

// NewLadder returns cfg's ladder (cfg.Ladder, with its classes, models and
// DeferFor), or nil when cfg has none.
func NewLadder(cfg Config) *Ladder {
	if len(cfg.Ladder) == 0 {
		return nil
	}
	l := &Ladder{rungs: cfg.Ladder, deferFor: cfg.DeferFor, since: make([]time.Duration, len(cfg.Ladder)),
		deferrable: make([]bool, len(cfg.Classes)), fallback: make([]int, len(cfg.Models)),
		report: LadderReport{Engagements: make([]int, len(cfg.Ladder)), Engaged: make([]time.Duration, len(cfg.Ladder))}}
	for i, c := range cfg.Classes {
		l.deferrable[i] = c.Deferrable
	}
	for i, m := range cfg.Models {
		l.fallback[i] = -1
		if len(m.Fallbacks) > 0 {
			l.fallback[i] = m.Fallbacks[0]
		}
	}
	l.apply()
	return l
}

// Rungs returns the ladder's rungs, bottom first. The caller must not
// change them.
func (l *Ladder) Rungs() []Rung { return l.rungs }

// Engaged is the number of rungs engaged, from the bottom.
func (l *Ladder) Engaged() int { return l.engaged }

// LadderChange is a rung engaged or released by Evaluate.
type LadderChange struct {
	Engaged bool // engaged; released otherwise
	Rung    int  // its index, bottom 0
	// Detail says which rung and the signals that moved it, for a
	// timeline or a log: "step 1 shed (shed-batch): queue wait 3.2s,
	// saturation 0.90, error rate 0.00", "step 1 shed released: ...".
	Detail string
}

// Evaluate reads the signals at now — wait and saturation from the core,
// the error rate from the attempts noted since — and moves the ladder by
// at most one rung. It reports the change, if any. The driver calls it
// every LadderEvery.
func (l *Ladder) Evaluate(now, wait time.Duration, saturation float64) (LadderChange, bool) {
	errRate := l.ErrorRate()
	detail := fmt.Sprintf("queue wait %v, saturation %.2f, error rate %.2f", wait.Round(time.Millisecond), saturation, errRate)
	var ch LadderChange
	var changed bool
	switch {
	case l.engaged < len(l.rungs) && l.rungs[l.engaged].Trigger.fires(wait, saturation, errRate, 1):
		st := l.rungs[l.engaged]
		l.since[l.engaged] = now
		l.engaged++
		l.report.Engagements[l.engaged-1]++
		if st.Action == CachedAnswers {
			detail += fmt.Sprintf("; cached answers disclosed as up to %v old", st.CacheAge)
		}
		ch, changed = LadderChange{Engaged: true, Rung: l.engaged - 1,
			Detail: fmt.Sprintf("step %d %s (%s): %s", l.engaged, st.Name, st.Action, detail)}, true
		l.apply()
	case l.engaged > 0:
		top := l.engaged - 1
		st := l.rungs[top]
		if now-l.since[top] >= st.Hold && !st.Trigger.fires(wait, saturation, errRate, st.RecoverBelow) {
			l.report.Engaged[top] += now - l.since[top]
			l.engaged--
			ch, changed = LadderChange{Rung: top, Detail: fmt.Sprintf("step %d %s released: %s", top+1, st.Name, detail)}, true
			l.apply()
		}
	}
	// Roll the error-rate window.
	if now-l.bucketStart >= errWindow {
		l.bucketStart = now
		l.attempts[1], l.failures[1] = l.attempts[0], l.failures[0]
		l.attempts[0], l.failures[0] = 0, 0
	}
	return ch, changed
}

// NoteAttempt feeds the error-rate signal: an attempt on a replica ended,
// failed or not.
func (l *Ladder) NoteAttempt(failed bool) {
	l.attempts[0]++
	if failed {
		l.failures[0]++
	}
}

// ErrorRate is the share of the attempts noted in the window (the current
// and the previous 15 s bucket) that failed; 0 without attempts.
func (l *Ladder) ErrorRate() float64 {
	att, fail := l.attempts[0]+l.attempts[1], l.failures[0]+l.failures[1]
	if att == 0 {
		return 0
	}
	return float64(fail) / float64(att)
}

// apply recomputes the effects of the engaged rungs.
func (l *Ladder) apply() {
	l.shedClass = make([]bool, len(l.deferrable))
	l.cacheClass = make([]float64, len(l.deferrable))
	l.substitute = make([]int, len(l.fallback))
	for i := range l.substitute {
		l.substitute[i] = -1
	}
	l.capOutput = 0
	for _, st := range l.rungs[:l.engaged] {
		switch st.Action {
		case ShedBatch, DeferAsync:
			l.shedClass[st.Class] = true
		case CapOutput:
			if l.capOutput == 0 || st.MaxOutput < l.capOutput {
				l.capOutput = st.MaxOutput
			}
		case SmallerModel:
			l.substitute[st.Model] = l.fallback[st.Model]
		case CachedAnswers:
			l.cacheClass[st.Class] = st.HitRate
			l.cacheAge = st.CacheAge
		}
	}
}

// Verdict is what the ladder does with a new request.
type Verdict uint8

const (
	// Pass: offer it to the core, with Effect.Output and Effect.Model
	// (capped or substituted when Capped or Substituted say so).
	Pass Verdict = iota
	// Shed: refuse it, reason ReasonLoadShed.
	Shed
	// Defer: offer it again after Effect.After, and Apply it again then
	// (again true): it stays deferred while its class is shed.
	Defer
	// Cache: answer it from the cache, disclosing Effect.CacheAge.
	Cache
)

func (v Verdict) String() string {
	return [...]string{"pass", "shed", "defer", "cache"}[v]
}

// Effect is the engaged rungs' effect on one request.
type Effect struct {
	Verdict     Verdict
	After       time.Duration // Defer: the wait before offering it again (Config.DeferFor)
	CacheAge    time.Duration // Cache: the age of the answer, disclosed
	Output      int           // Pass: the output tokens to ask for
	Model       int           // Pass: the model to offer it for
	Capped      bool          // Pass: Output is capped below what was asked
	Substituted bool          // Pass: Model is the requested model's fallback

	again bool // Shed or Defer of a request already counted shed
}

// Apply says what the engaged rungs do to a request of class for model,
// asking for output tokens, before it is offered to the core. again is true
// for a request the ladder deferred, offered again (it is not counted shed
// twice). draw gives a uniform [0, 1) draw from the driver's seeded stream;
// it is called only when a cached-answers rung covers the class, so that
// the draws do not depend on the other rungs.
func (l *Ladder) Apply(class, model, output int, again bool, draw func() float64) Effect {
	e := Effect{Verdict: Pass, Output: output, Model: model}
	if l.engaged == 0 {
		return e
	}
	switch {
	case l.shedClass[class]:
		e.Verdict, e.again = Shed, again
		if l.deferrable[class] {
			e.Verdict, e.After = Defer, l.deferFor
		}
		return e
	case l.cacheClass[class] > 0 && draw() < l.cacheClass[class]:
		e.Verdict, e.CacheAge = Cache, l.cacheAge
		return e
	}
	if l.capOutput > 0 && output > l.capOutput {
		e.Output, e.Capped = l.capOutput, true
	}
	if sub := l.substitute[model]; sub >= 0 {
		e.Model, e.Substituted = sub, true
	}
	return e
}

// Count adds e to the report. The twin counts its measured requests only
// (after the warm-up); the gateway counts every request.
func (l *Ladder) Count(e Effect) {
	switch e.Verdict {
	case Shed, Defer:
		if !e.again {
			l.report.Shed++
		}
	case Cache:
		l.report.Cached++
	case Pass:
		if e.Capped {
			l.report.Capped++
		}
		if e.Substituted {
			l.report.Substituted++
		}
	}
}

// Report returns what the ladder did up to now, the rungs still engaged
// counted up to now. The ladder is left as it is.
func (l *Ladder) Report(now time.Duration) LadderReport {
	rep := l.report
	rep.Engagements = append([]int(nil), l.report.Engagements...)
	rep.Engaged = append([]time.Duration(nil), l.report.Engaged...)
	for i := range l.engaged {
		rep.Engaged[i] += now - l.since[i]
	}
	return rep
}
