package reqengine

import (
	"container/heap"
	"time"
	"unsafe"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Engine is the request engine's one front door, as etcd's RawNode is
// raft's: a driver tells it what happened through Step, reads what to do
// in Ready, carries that out and calls Advance. It owns the core, the
// requests' lifecycle (sched.Lifecycle), the degradation ladder (its
// evaluations and its judgement of a request), the canary rollouts'
// evaluations, the scalers, and each request's state between its arrival and its end,
// with the times the engine itself keeps: a re-offer after a deferral, a
// ladder's deferral or a retry's backoff, the queue time-out
// (policy.admission.queue_timeout) and a hedge's delay
// (policy.routing.hedge_after). It decides when attempts start — a
// request's, its hedged duplicate, a shadow copy the core dispatched —,
// when one is cancelled (the loser of a hedge race, a duplicate whose
// request ended) and what each attempt's end means. A driver keeps one timer, at
// Ready.WakeAt, and steps Tick there; it never times a retry itself.
//
// Both drivers carry it out: the twin in virtual time (an engine's steps,
// the faults' ground truth), the gateway on the wall clock (HTTP, its
// fault layer). What the engine does not own yet is reached through it
// (Core, Lifecycle) and the feature files beside this one.
//
// Like the core it is pure: every input carries the driver's now, it
// draws no random number of its own (the ladder's cache draw is the
// driver's, Config.LadderDraw) and it is not safe for concurrent use (the
// gateway holds its lock around Step, Ready and Advance).
type Engine struct {
	core   *sched.Core
	lc     *sched.Lifecycle
	ladder *Ladder
	cfg    EngineConfig
	// ladderOn, canariesOn: their evaluations go on (they stop once the
	// run is quiet: ArrivalsEnd).
	ladderOn, canariesOn bool
	now                  time.Duration // the last Step's

	timers timerHeap
	seq    uint64 // timers' tie-break: the order they were set
	rd     Ready
}

// EngineConfig is what an Engine is built with.
type EngineConfig struct {
	Seed uint64 // the run's seed: the retries' backoff draws (sched.Backoff)
	// QueueTimeout bounds a request's wait in the core's queue
	// (policy.admission.queue_timeout); 0: its deadline and client do.
	QueueTimeout time.Duration
	// LadderDraw is the cached-answers rung's uniform draw, the driver's
	// seeded stream; nil where no such rung can run.
	LadderDraw func() float64
	// HedgeAfter is policy.routing.hedge_after: an attempt with no first
	// token that long after it started gets a duplicate on a second
	// replica the core picks (Core.Hedge); 0: no hedging.
	HedgeAfter time.Duration
	// Canaries are the canary rollouts (nil: none), Scaling the
	// autoscaled pools (nil: none): the engine evaluates them at their
	// due times (Tick) and puts what they decide in Ready.
	Canaries *Canaries
	Scaling  *Scaling
	// Restarts are the replicas restarted in place and loading (nil:
	// none restart); Holds says whether something of the driver's own
	// holds replica r out of routing when its load is over (the twin's
	// training jobs; nil: nothing).
	Restarts *Restarts
	Holds    func(r int) bool
	// NewCopy allocates the driver's record of copy cp of orig (the
	// seq'th copy sent: an idempotency key) and returns its Req, whose
	// Core the engine sets to cp: a canary's rollout mirrors orig,
	// admitted for the first time, to its candidate. Needed with
	// Canaries.
	// (cp is passed by value: a pointer would escape through the call, a
	// heap allocation a copy.)
	NewCopy func(orig *Req, cp sched.Request, seq uint64) *Req
	// ArrivalsEnd is when the last request may arrive (the twin's run:
	// its duration); once past it with no request live, the ladder, the
	// canaries and the scalers stop, as what they would change no request
	// meets, and a run ends when nothing is due. 0: arrivals never end (a
	// gateway serving).
	ArrivalsEnd time.Duration
}

// NewEngine returns an engine over core and lc, with the degradation
// ladder l (nil: none).
func NewEngine(core *sched.Core, lc *sched.Lifecycle, l *Ladder, cfg EngineConfig) *Engine {
	e := &Engine{core: core, lc: lc, ladder: l, cfg: cfg, ladderOn: true, canariesOn: true}
	if x := cfg.Scaling; x != nil {
		x.rd = &e.rd
		x.quiet = func() bool { return e.quiet(e.now) }
	}
	return e
}

// Canaries are the canary rollouts (nil: none).
func (e *Engine) Canaries() *Canaries { return e.cfg.Canaries }

// Scaling is the autoscaled pools (nil: none).
func (e *Engine) Scaling() *Scaling { return e.cfg.Scaling }

// Ladder is the degradation ladder (nil: none).
func (e *Engine) Ladder() *Ladder { return e.ladder }

// quiet reports whether nothing is live at now and nothing will arrive.
func (e *Engine) quiet(now time.Duration) bool {
	return e.cfg.ArrivalsEnd > 0 && now >= e.cfg.ArrivalsEnd && e.lc.Live() == 0
}

// Core is the scheduler core the engine drives (for what the engine does
// not own yet: hedges, copies, probes, route changes). A driver that
// calls it directly calls Collect afterwards.
func (e *Engine) Core() *sched.Core { return e.core }

// Lifecycle is the requests' lifecycle (its budget's figures, for reports).
func (e *Engine) Lifecycle() *sched.Lifecycle { return e.lc }

// State is where a request is in its life, as the engine sees it.
type State uint8

const (
	// New: not offered yet.
	New State = iota
	// Held: the core holds it, queued or dispatched but not yet started.
	Held
	// Running: an attempt was handed to the driver (Ready.Starts), until
	// the driver steps its end.
	Running
	// Backoff: waiting to be offered again (a deferral, the ladder's, or a
	// retry's backoff).
	Backoff
	// Done: its outcome is decided.
	Done
)

// Req is one request as the engine tracks it. A driver embeds it as the
// first field of its own record (the core's Request, first here, converts
// back to it: see ReqOf).
type Req struct {
	Core sched.Request // must stay the first field (ReqOf)
	Life sched.Life
	// Counted says whether the ladder's report counts the request (the
	// twin counts its measured requests only; the gateway all).
	Counted bool

	state State
	retry bool // Backoff: the re-offer is a retry, not a deferral
	// copy is an original's shadow copy while both live, copyOf a copy's
	// original.
	copy, copyOf *Req
	first        bool          // Running: its attempt's first token came (no hedge after it)
	Offered      time.Duration // when its current attempt was offered to the core
	timer        timerEntry
}

// State is where the request is.
func (q *Req) State() State { return q.state }

// HedgePending reports whether a first token of the request's attempt
// would decide anything: a hedge is due or a duplicate runs. A driver may
// skip stepping FirstToken otherwise.
func (q *Req) HedgePending() bool {
	return q.state == Running && !q.first && (q.timer.req != nil || q.Core.Hedge >= 0)
}

// Retrying reports whether a request in Backoff will be offered again as a
// retry (a deferral otherwise).
func (q *Req) Retrying() bool { return q.state == Backoff && q.retry }

// EventKind says what happened.
type EventKind uint8

const (
	// Arrival: Event.Req arrived (its Core.Arrived is now).
	Arrival EventKind = iota + 1
	// Answered: Event.Req's attempt on Event.Replica (-1: answered without
	// one, from the cache) answered (a shadow copy's too: its figures go
	// to its canary, Event.First when its first token came, and the copy
	// ends: Ready.CopiesEnded); Event.Latency is the replica's own
	// (dispatch to first token; 0: unknown), Event.Observed whether the
	// replica's health and latency count.
	Answered
	// AttemptFailed: Event.Req's attempt on Event.Replica ended without an
	// answer, as Event.How says (a 429 with Event.RetryAfter, the provider's
	// hint; an error; a stream cut). The core hears of the replica's
	// health (Observed) unless the attempt was throttled; the lifecycle
	// retries the request or ends it.
	AttemptFailed
	// Gone: Event.Req's client is gone or its deadline passed, wherever it
	// is: it is cancelled (Answer TimedOut or Cancelled as Event.Deadline
	// says); a running attempt is the driver's to stop.
	Gone
	// FirstToken: Event.Req's running attempt produced its first token
	// (Event.Duplicate: its hedged duplicate's). No duplicate is sent after
	// it, and a hedge race ends: the first to answer wins, the other is
	// cancelled (Ready.Cancels).
	FirstToken
	// DuplicateGone: Event.Req's duplicate ended with nothing for the core
	// to hear (no engine to run on, its replica gone); the first attempt
	// goes on. A duplicate that failed is AttemptFailed with
	// Event.Duplicate: the core hears of it as of any attempt (unless
	// throttled: the driver reports a 429 to the core as for any attempt)
	// and the first attempt goes on.
	DuplicateGone
	// Probe: a health probe of Event.Replica answered (Event.Healthy) or
	// not; the replica's breaker hears of it.
	Probe
	// Tick: time passed; what is due at now is done: the core's wake-up,
	// the requests' timers, then the ladder's, the canaries' and the
	// scalers' evaluations, in that order.
	Tick
	// InstanceUp: the instance of autoscaled replica Event.Replica (the
	// core's index), started for Ready.Scaling's ScaleStart, answers; it
	// serves once its model has loaded. InstanceFailed: it did not start;
	// it is handed back.
	InstanceUp
	InstanceFailed
	// StartCanaries starts held canary rollouts, StartScaling held
	// scalers, with their clocks' origin at Event.At (the driver's clock):
	// a replay starts them with its trace. A second start does nothing.
	StartCanaries
	StartScaling
	// StopScaling freezes the scalers where they stand (a replay's end,
	// before its report reads them): replicas keep serving; nothing more
	// is asked, provisioned, loaded or released.
	StopScaling
	// Restart: replica Event.Replica restarts in place now (a lost node
	// back, a driver upgrade), loading its model for Event.After (its
	// pool's cold start), unless it loads already (after a restart,
	// provisioned by its scaler, or Event.Busy: the driver's own first
	// load). A restart taken is in Ready.Restarted (what it had in flight
	// is the driver's to fail); its load's end in Ready.Loaded.
	Restart
	// Prefilled: Event.Req's prompt, prefilled remotely on Event.Replica
	// (the core's choice: sched.Request.Prefilling), is computed and its
	// KV cache on its way to the decode replica: the prefill replica's
	// breaker hears of a success and its slot is free (sched's
	// PrefillDone). Its latency is not the decode replica's: it feeds no
	// outlier reference, and it is no attempt of the ladder's.
	Prefilled
)

// Event is one input to Step.
type Event struct {
	Kind       EventKind
	Req        *Req
	Replica    int
	How        sched.Attempt
	RetryAfter time.Duration
	Latency    time.Duration
	Observed   bool
	Deadline   bool          // Gone: its deadline passed (else its client left)
	Duplicate  bool          // FirstToken, AttemptFailed: the hedged duplicate's
	Healthy    bool          // Probe: the replica answered its probe
	At         time.Duration // StartCanaries, StartScaling: the clocks' origin
	After      time.Duration // Restart: the load's length
	Busy       bool          // Restart: the replica loads for the driver's own reason
	First      time.Duration // Answered, AttemptFailed of a shadow copy: its first token (0: none)
}

// Outcome is how a request ended, as an Answer says.
type Outcome uint8

const (
	// Completed: an attempt answered.
	Completed Outcome = iota + 1
	// Refused: refused with Answer.Reason (the core's, the ladder's shed,
	// the provider's quota after every retry), Answer.RetryAfter the
	// client's hint.
	Refused
	// Failed: its attempts failed and it gave up.
	Failed
	// QueueTimedOut: no replica became free within the queue time-out.
	QueueTimedOut
	// TimedOut: its deadline passed.
	TimedOut
	// Cancelled: its client went away.
	Cancelled
)

// Answer is a request's decided outcome.
type Answer struct {
	Req        *Req
	Outcome    Outcome
	Reason     string
	RetryAfter time.Duration
	Detail     string
	// Was is where the request was when it ended (Gone: a running attempt
	// is the driver's to stop), Replica the replica its attempt held then
	// (-1: none); the core has let go of it.
	Was     State
	Replica int
}

// Offer is one offer of a request to the core, with its decision and what
// the lifecycle says follows: what a driver counts and logs (admitted,
// deferred, a refusal retried). A refusal is in Answers too.
type Offer struct {
	Req      *Req
	Decision sched.Decision
	Next     sched.Next
}

// Judged is the ladder's judgement of a request before an offer: its
// verdict (Next: OfferNow with an output capped or a model substituted,
// Reoffer for a deferral, Refuse for a shed, AnswerCached; a request let
// through untouched has none) and its effect, which the engine has applied to the
// request's Core (its output cap, its model); the driver applies it to
// what it sends (a body, an engine sequence) and counts it.
type Judged struct {
	Req    *Req
	Next   sched.Next
	Effect sched.Effect
	Again  bool // it came back from the ladder's deferral
}

// Ready is what the driver carries out, in this order: Judged and Offers
// are decisions to count and log; Starts are attempts to start on their
// replicas (a shadow copy's too: Core.Shadow); Answers are outcomes
// decided; the core's breaker transitions, ejections and shed copies pass
// through.
type Ready struct {
	Judged    []Judged
	Offers    []Offer
	Reoffered []Reoffer
	// Cancels are attempts to stop at once, before Starts are carried out
	// (a freed slot may be among them).
	Cancels []Cancel
	Starts  []sched.Dispatch
	// Hedges are duplicates to start: a running request's second attempt,
	// on Replica.
	Hedges      []sched.Dispatch
	Answers     []Answer
	Transitions []sched.Transition
	Ejections   []sched.Ejection
	// Changes are the degradation ladder's moves and Rollouts the canary
	// rollouts' decisions (their shares applied to the core already), for
	// the timeline or the log.
	Changes  []sched.LadderChange
	Rollouts []sched.RolloutDecision
	// Scaling is what the scalers decided for the replicas' instances
	// (start, serve, drain, hand back), carried out before Starts (a
	// replica made routable may be dispatched to at once); ScalerEvents
	// are their timeline entries.
	Scaling      []ScaleAction
	ScalerEvents []ScalerEvent
	// Restarted are the replicas a Restart took down, Loaded those whose
	// load after a restart is over (routable again unless something holds
	// them), in replica order.
	Restarted []int
	Loaded    []int
	// CopiesEnded are shadow copies the engine ended — ran to their end,
	// failed, shed by the core, cancelled with their original (a running
	// one is in Cancels first) —, told to their canary and out of the
	// core: the driver lets go of each record.
	CopiesEnded []CopyEnd
	// WakeAt is when the driver steps Tick next: the core's wake-up, the
	// engine's next timer, or the ladder's, the canaries' or the scalers'
	// next evaluation, whichever is first; NoWake: nothing waits on time.
	// It is state, not an event: it stays until Tick.
	WakeAt time.Duration
}

// CopyEnd is a shadow copy's end: its record, and how it ended.
type CopyEnd struct {
	Req *Req
	How CopyOutcome
}

// CopyOutcome is how a shadow copy ended, as its canary counts it.
type CopyOutcome uint8

const (
	CopyCompleted CopyOutcome = iota + 1
	CopyFailed
	CopyShed
	CopyCancelled
)

// NoWake is Ready.WakeAt when nothing waits on time (0 is a time: a
// canary's first step may be due at a run's start).
const NoWake time.Duration = -1

// Cancel is an attempt of a hedged request to stop: its first attempt (on
// Replica; the duplicate goes on as the request's attempt, Won) or its
// duplicate (on Replica).
type Cancel struct {
	Req     *Req
	Leg     Leg
	Replica int
	Won     bool
}

// Reoffer is a request back from its Backoff, offered again: a retry, or
// back from a deferral (the core's or the ladder's).
type Reoffer struct {
	Req   *Req
	Retry bool
}

// HasReady reports whether Ready holds anything to carry out (WakeAt
// aside).
func (e *Engine) HasReady() bool {
	rd := &e.rd
	return len(rd.Judged)+len(rd.Offers)+len(rd.Reoffered)+len(rd.Cancels)+len(rd.Starts)+len(rd.Hedges)+len(rd.Answers)+
		len(rd.Transitions)+len(rd.Ejections)+len(rd.Changes)+len(rd.Rollouts)+len(rd.Scaling)+len(rd.ScalerEvents)+
		len(rd.Restarted)+len(rd.Loaded)+len(rd.CopiesEnded) > 0
}

// Ready returns what to carry out. Its slices are the engine's until
// Advance.
func (e *Engine) Ready() Ready {
	rd := e.rd
	rd.WakeAt = e.wakeAt()
	return rd
}

// AppendTo appends Ready's lists (not WakeAt) to w's and advances: for a
// driver that carries decisions out in its own work lists, without a copy
// of Ready between. It is on every step's path, and most lists are empty
// at most steps: each is appended only when it holds something.
func (e *Engine) AppendTo(w *Ready) {
	rd := &e.rd
	if len(rd.Judged) > 0 {
		w.Judged = append(w.Judged, rd.Judged...)
	}
	if len(rd.Offers) > 0 {
		w.Offers = append(w.Offers, rd.Offers...)
	}
	if len(rd.Reoffered) > 0 {
		w.Reoffered = append(w.Reoffered, rd.Reoffered...)
	}
	if len(rd.Cancels) > 0 {
		w.Cancels = append(w.Cancels, rd.Cancels...)
	}
	if len(rd.Starts) > 0 {
		w.Starts = append(w.Starts, rd.Starts...)
	}
	if len(rd.Hedges) > 0 {
		w.Hedges = append(w.Hedges, rd.Hedges...)
	}
	if len(rd.Answers) > 0 {
		w.Answers = append(w.Answers, rd.Answers...)
	}
	if len(rd.Transitions) > 0 {
		w.Transitions = append(w.Transitions, rd.Transitions...)
	}
	if len(rd.Ejections) > 0 {
		w.Ejections = append(w.Ejections, rd.Ejections...)
	}
	if len(rd.Changes) > 0 {
		w.Changes = append(w.Changes, rd.Changes...)
	}
	if len(rd.Rollouts) > 0 {
		w.Rollouts = append(w.Rollouts, rd.Rollouts...)
	}
	if len(rd.Scaling) > 0 {
		w.Scaling = append(w.Scaling, rd.Scaling...)
	}
	if len(rd.ScalerEvents) > 0 {
		w.ScalerEvents = append(w.ScalerEvents, rd.ScalerEvents...)
	}
	if len(rd.Restarted) > 0 {
		w.Restarted = append(w.Restarted, rd.Restarted...)
	}
	if len(rd.Loaded) > 0 {
		w.Loaded = append(w.Loaded, rd.Loaded...)
	}
	if len(rd.CopiesEnded) > 0 {
		w.CopiesEnded = append(w.CopiesEnded, rd.CopiesEnded...)
	}
	e.Advance()
}

// Advance acknowledges the last Ready: its lists are carried out. (They
// are reused, not cleared: what they point to is the drivers' requests,
// which outlive them.)
func (e *Engine) Advance() {
	rd := &e.rd
	rd.Judged = rd.Judged[:0]
	rd.Offers = rd.Offers[:0]
	rd.Reoffered = rd.Reoffered[:0]
	rd.Cancels = rd.Cancels[:0]
	rd.Starts = rd.Starts[:0]
	rd.Hedges = rd.Hedges[:0]
	rd.Answers = rd.Answers[:0]
	rd.Transitions = rd.Transitions[:0]
	rd.Ejections = rd.Ejections[:0]
	rd.Changes = rd.Changes[:0]
	rd.Rollouts = rd.Rollouts[:0]
	rd.Scaling = rd.Scaling[:0]
	rd.ScalerEvents = rd.ScalerEvents[:0]
	rd.Restarted = rd.Restarted[:0]
	rd.Loaded = rd.Loaded[:0]
	rd.CopiesEnded = rd.CopiesEnded[:0]
}

// WakeAt is Ready's WakeAt, without the rest.
func (e *Engine) WakeAt() time.Duration { return e.wakeAt() }

func (e *Engine) wakeAt() time.Duration {
	// Asked after every step a driver carries out: no closure, and each
	// feature's time only where it has one.
	at := NoWake
	if w := e.core.WakeAt(); w > 0 {
		at = w
	}
	if len(e.timers) > 0 {
		at = earlier(at, e.timers[0].at)
	}
	if e.ladder != nil && e.ladderOn {
		at = earlier(at, e.ladder.NextAt())
	}
	if c := e.cfg.Canaries; c != nil && e.canariesOn {
		if t, ok := c.NextAt(); ok {
			at = earlier(at, t)
		}
	}
	if x := e.cfg.Scaling; x != nil && len(x.Pools) > 0 {
		if t, ok := x.NextAt(); ok {
			at = earlier(at, t)
		}
	}
	if rs := e.cfg.Restarts; rs != nil {
		if t := rs.NextAt(); t > 0 {
			at = earlier(at, t)
		}
	}
	return at
}

// earlier is the sooner of wake-up at (NoWake: none) and t.
func earlier(at, t time.Duration) time.Duration {
	if at < 0 || t < at {
		return t
	}
	return at
}

// Step tells the engine what happened at now.
func (e *Engine) Step(now time.Duration, ev Event) {
	e.now = now
	q := ev.Req
	if (ev.Kind == Answered || ev.Kind == AttemptFailed) && q.Core.Shadow {
		// A shadow copy's attempt: its figures go to its canary.
		if q.state == Running {
			e.copyEnded(now, q, ev.Kind == Answered, ev)
		}
		return
	}
	switch ev.Kind {
	case Arrival:
		e.lc.Begin()
		e.judgeThenOffer(now, q)
	case Answered:
		if q.state != Running {
			return
		}
		e.settle(now, q, FirstAnswered, ev)
		if ev.Observed && ev.Replica >= 0 {
			Observed(now, e.core, e.ladder, ev.Replica, true, ev.Latency)
		}
		e.end(now, q, Answer{Outcome: Completed})
	case Prefilled:
		if q.state != Running || q.Core.Prefilling() != ev.Replica {
			return
		}
		e.core.Observe(now, ev.Replica, true)
		e.core.PrefillDone(now, &q.Core)
		e.collect(now)
	case AttemptFailed:
		if q.state != Running {
			return
		}
		if ev.Duplicate {
			e.settle(now, q, DuplicateFailed, ev)
			return
		}
		// A first attempt that fails takes its duplicate with it.
		e.settle(now, q, FirstFailed, ev)
		if ev.Observed && ev.Replica >= 0 && ev.How != sched.AttemptThrottled {
			Observed(now, e.core, e.ladder, ev.Replica, false, 0)
		}
		e.core.Finish(now, &q.Core)
		e.collect(now)
		next := e.lc.Failed(&q.Life, ev.How, ev.RetryAfter, sched.Backoff(e.cfg.Seed, &q.Core, &q.Life))
		switch {
		case next.Action == sched.Reoffer:
			e.backoff(now, q, next.After, true)
		case next.Reason != "":
			e.end(now, q, Answer{Outcome: Refused, Reason: next.Reason, RetryAfter: next.RetryAfter})
		default:
			e.end(now, q, Answer{Outcome: Failed})
		}
	case Gone:
		if q.state == Done {
			return
		}
		out := Cancelled
		if ev.Deadline {
			out = TimedOut
		}
		e.end(now, q, Answer{Outcome: out})
	case FirstToken:
		if q.state != Running || q.first {
			return
		}
		q.first = true
		e.stopTimer(q) // no hedge after a first token
		end := FirstAnswered
		if ev.Duplicate {
			end = DuplicateAnswered
		}
		e.settle(now, q, end, ev)
	case DuplicateGone:
		if q.state == Running {
			e.settle(now, q, DuplicateLost, ev)
		}
	case Probe:
		e.core.Observe(now, ev.Replica, ev.Healthy)
		e.collect(now)
	case Tick:
		e.core.Tick(now)
		e.collect(now)
		for len(e.timers) > 0 && e.timers[0].at <= now {
			q := heap.Pop(&e.timers).(*timerEntry).req
			q.timer.req = nil // fired: no timer set
			e.fire(now, q)
		}
		e.evaluate(now)
	case InstanceUp, InstanceFailed:
		if e.cfg.Scaling == nil {
			return
		}
		if p, k := e.cfg.Scaling.of(ev.Replica); p != nil {
			if ev.Kind == InstanceUp {
				p.instanceUp(now, k)
			} else {
				p.instanceFailed(now, k)
			}
			e.collect(now)
		}
	case StartCanaries:
		if e.cfg.Canaries != nil {
			e.cfg.Canaries.Start(ev.At)
		}
	case StartScaling:
		if e.cfg.Scaling != nil {
			e.cfg.Scaling.start(ev.At)
		}
	case StopScaling:
		if e.cfg.Scaling != nil {
			e.cfg.Scaling.stopped = true
		}
	case Restart:
		if e.cfg.Restarts == nil {
			return
		}
		busy := ev.Busy
		if x := e.cfg.Scaling; x != nil {
			if p, k := x.of(ev.Replica); p != nil {
				st := p.Scaler.State(k)
				busy = busy || st == sched.RepProvisioning || st == sched.RepWarming
			}
		}
		if e.cfg.Restarts.Restart(now, e.core, ev.Replica, busy, ev.After) {
			e.rd.Restarted = append(e.rd.Restarted, ev.Replica)
		}
		e.collect(now)
	}
}

// serves reports whether a replica whose load after a restart is over
// may be routed to again: nothing of the driver's holds it, and an
// autoscaled one is serving (or draining) for its scaler.
func (e *Engine) serves(r int) bool {
	if e.cfg.Holds != nil && e.cfg.Holds(r) {
		return false
	}
	if x := e.cfg.Scaling; x != nil {
		if p, k := x.of(r); p != nil {
			st := p.Scaler.State(k)
			return st == sched.RepServing || st == sched.RepDraining
		}
	}
	return true
}

// evaluate runs the ladder's, the canaries' and the scalers' evaluations
// due at now, then ends the restarted replicas' loads due, in that order. The ladder and the canaries stop once the
// run is quiet after one (the scalers ask it themselves: ScalerEnv.Quiet).
func (e *Engine) evaluate(now time.Duration) {
	if l := e.ladder; l != nil && e.ladderOn && l.NextAt() <= now {
		if ch, ok := l.Evaluate(now, e.core); ok {
			e.rd.Changes = append(e.rd.Changes, ch)
		}
		e.ladderOn = !e.quiet(now)
	}
	if c := e.cfg.Canaries; c != nil && e.canariesOn {
		if t, ok := c.NextAt(); ok && t <= now {
			e.rd.Rollouts = append(e.rd.Rollouts, c.Evaluate(now, e.core)...)
			// A share of 0 moves the canary's queued requests to the
			// baseline, which may dispatch them.
			e.collect(now)
			e.canariesOn = !e.quiet(now)
		}
	}
	if x := e.cfg.Scaling; x != nil {
		if t, ok := x.NextAt(); ok && t <= now {
			x.advance(now)
			e.collect(now)
		}
	}
	if rs := e.cfg.Restarts; rs != nil {
		if t := rs.NextAt(); t > 0 && t <= now {
			e.rd.Loaded = append(e.rd.Loaded, rs.Loaded(now, e.core, e.serves)...)
			e.collect(now)
		}
	}
}

// Collect gathers what the core decided since the last call (after a
// driver called the core directly at now: a hedge, a copy, a probe's
// result).
func (e *Engine) Collect(now time.Duration) { e.collect(now) }

// collect moves the core's Ready into the engine's: dispatches become
// starts, requests no pool serves any more are offered again at once.
func (e *Engine) collect(now time.Duration) {
	for e.core.HasReady() {
		crd := e.core.Ready()
		rd := &e.rd
		for _, d := range crd.Dispatches {
			if d.Req.Shadow {
				ReqOf(d.Req).state = Running
			} else {
				q := ReqOf(d.Req)
				q.state, q.first = Running, false
				if q.timer.req != nil {
					e.stopTimer(q)
				}
				if e.cfg.HedgeAfter > 0 {
					// The hedge's clock starts when the attempt is sent.
					e.setTimer(q, now+e.cfg.HedgeAfter)
				}
			}
		}
		rd.Starts = append(rd.Starts, crd.Dispatches...)
		if len(crd.Transitions)+len(crd.Ejections) > 0 {
			rd.Transitions = append(rd.Transitions, crd.Transitions...)
			rd.Ejections = append(rd.Ejections, crd.Ejections...)
		}
		for _, sh := range crd.ShadowsShed {
			// Shed from its queue (the core let go of it): told to its
			// canary as shed.
			e.endCopy(ReqOf(sh), false)
		}
		var unroutable []*sched.Request
		if len(crd.Unroutable) > 0 {
			unroutable = append(unroutable, crd.Unroutable...)
		}
		e.core.Advance()
		for _, cr := range unroutable {
			// The core let go of its queue place: offer it again, to its
			// fallback chain or a refusal.
			q := ReqOf(cr)
			e.stopTimer(q)
			e.core.Finish(now, cr)
			e.offer(now, q)
		}
	}
}

// fire is a request's timer: its re-offer, its queue time-out, or its
// hedge.
func (e *Engine) fire(now time.Duration, q *Req) {
	switch q.state {
	case Backoff:
		e.rd.Reoffered = append(e.rd.Reoffered, Reoffer{Req: q, Retry: q.retry})
		e.judgeThenOffer(now, q)
	case Held:
		e.end(now, q, Answer{Outcome: QueueTimedOut})
	case Running:
		if q.first || q.Core.Hedge >= 0 {
			return
		}
		if h := e.core.Hedge(now, &q.Core); h >= 0 {
			e.rd.Hedges = append(e.rd.Hedges, sched.Dispatch{Req: &q.Core, Replica: h})
		}
		e.collect(now)
	}
}

// settle ends q's hedge race, if it has a duplicate in flight, as end
// says (SettleHedge): the loser goes to Ready.Cancels before the core frees
// its slot, and a failed duplicate is reported to the core (ev is the
// failure's event: a 429 is the driver's to report, as any attempt's).
func (e *Engine) settle(now time.Duration, q *Req, end RaceEnd, ev Event) {
	first, dup := q.Core.Replica, q.Core.Hedge
	if dup < 0 {
		return
	}
	SettleHedge(now, e.core, &q.Core, end, func(s Settlement) {
		if s.ReportFailure && ev.How != sched.AttemptThrottled {
			e.core.Observe(now, dup, false)
		}
		switch s.Cancel {
		case FirstLeg:
			e.rd.Cancels = append(e.rd.Cancels, Cancel{Req: q, Leg: FirstLeg, Replica: first, Won: s.Won})
		case Duplicate:
			e.rd.Cancels = append(e.rd.Cancels, Cancel{Req: q, Leg: Duplicate, Replica: dup})
		}
	})
	e.collect(now)
}

// judgeThenOffer has the ladder judge q where it judges (before the first
// offer, and back from its deferral), then offers it to the core.
func (e *Engine) judgeThenOffer(now time.Duration, q *Req) {
	if e.ladder != nil && q.Life.LadderJudges() {
		again := q.Life.Shed > 0
		n, eff, _ := e.ladder.Judge(e.lc, &q.Life, &q.Core, q.Counted, e.cfg.LadderDraw)
		switch n.Action {
		case sched.Reoffer:
			e.rd.Judged = append(e.rd.Judged, Judged{Req: q, Next: n, Effect: eff, Again: again})
			e.backoff(now, q, n.After, false)
			return
		case sched.Refuse:
			e.rd.Judged = append(e.rd.Judged, Judged{Req: q, Next: n, Effect: eff, Again: again})
			e.end(now, q, Answer{Outcome: Refused, Reason: n.Reason, RetryAfter: n.RetryAfter})
			return
		case sched.AnswerCached:
			e.rd.Judged = append(e.rd.Judged, Judged{Req: q, Next: n, Effect: eff, Again: again})
			// Answered from the cache: the driver times the lookup and
			// steps Answered with no replica.
			q.state = Running
			return
		}
		if eff.Capped {
			q.Core.Output = eff.Output
		}
		q.Core.Model = eff.Model
		if eff.Capped || eff.Substituted {
			// A request the rungs let through untouched has no verdict
			// to carry out.
			e.rd.Judged = append(e.rd.Judged, Judged{Req: q, Next: n, Effect: eff, Again: again})
		}
	}
	e.offer(now, q)
}

// offer submits q to admission and does what its lifecycle says next.
func (e *Engine) offer(now time.Duration, q *Req) {
	q.Offered = now
	q.state = Held
	d := e.core.Arrive(now, &q.Core)
	next := e.lc.Offered(&q.Life, d, sched.Backoff(e.cfg.Seed, &q.Core, &q.Life))
	e.rd.Offers = append(e.rd.Offers, Offer{Req: q, Decision: d, Next: next})
	switch next.Action {
	case sched.Wait:
		e.collect(now)
		if qt := e.cfg.QueueTimeout; qt > 0 && q.state == Held {
			e.setTimer(q, now+qt)
		}
		if next.FirstAdmit && e.cfg.Canaries != nil {
			e.mirror(now, q)
		}
	case sched.Reoffer:
		e.backoff(now, q, next.After, next.Retry)
	case sched.Refuse:
		e.end(now, q, Answer{Outcome: Refused, Reason: d.Reason, RetryAfter: d.RetryAfter, Detail: d.Detail})
	}
}

// backoff holds q until after, then offers it again (a retry when retry
// is set, else a deferral).
func (e *Engine) backoff(now time.Duration, q *Req, after time.Duration, retry bool) {
	q.state, q.retry = Backoff, retry
	e.setTimer(q, now+after)
}

// end decides q's outcome: it leaves the core (which may dispatch others)
// and the retry budget. The driver releases it from flight (Release) when
// what it holds is free.
func (e *Engine) end(now time.Duration, q *Req, a Answer) {
	e.settle(now, q, DuplicateLost, Event{}) // its duplicate, if any, is cancelled
	if sh := q.copy; sh != nil {
		q.copy, sh.copyOf = nil, nil
		if sh.state != Done && e.cfg.Canaries.CancelsWithPrimary(&sh.Core) {
			// Before the original leaves the core: the copy's slot is
			// free as the original's is.
			e.endCopy(sh, true)
			e.core.Finish(now, &sh.Core)
		}
	}
	a.Req, a.Was, a.Replica = q, q.state, q.Core.Replica
	q.state = Done
	e.stopTimer(q)
	e.lc.Finish(&q.Life)
	e.core.Finish(now, &q.Core)
	e.rd.Answers = append(e.rd.Answers, a)
	e.collect(now)
}

// mirror sends a shadow copy of q, just admitted for the first time, to a
// canary's candidate when the rollout says so (Canaries.Mirror): the
// driver's record (NewCopy) holds it, and it is offered to the core as
// any request; one shed at once ends at once.
func (e *Engine) mirror(now time.Duration, q *Req) {
	c := e.cfg.Canaries
	cp, seq, ok := c.Mirror(now, e.core, &q.Core)
	if !ok {
		return
	}
	sh := e.cfg.NewCopy(q, cp, seq)
	sh.Core, sh.Offered = cp, now
	sh.state, sh.copyOf, q.copy = Held, q, sh
	if d := e.core.Arrive(now, &sh.Core); d.Outcome == sched.Rejected {
		e.endCopy(sh, false)
		return
	}
	e.collect(now)
}

// copyEnded ends shadow copy sh, whose attempt on ev.Replica answered
// (ok) or failed: its figures go to its canary (a copy never meets its
// class's objectives: it is no client's), and it leaves the core.
func (e *Engine) copyEnded(now time.Duration, sh *Req, ok bool, ev Event) {
	e.cfg.Canaries.AttemptEnded(now, &sh.Core, ev.Replica, ok, sh.Core.Arrived, ev.First, false)
	how := CopyFailed
	if ok {
		how = CopyCompleted
	}
	e.copyDone(sh, how)
	e.core.Finish(now, &sh.Core)
	e.collect(now)
}

// endCopy ends shadow copy sh before its end: shed (by the core, or at
// once) or cancelled with its original; a running one is the driver's to
// stop (Ready.Cancels). The caller tells the core where it holds it.
func (e *Engine) endCopy(sh *Req, cancelled bool) {
	if sh.state == Done {
		return
	}
	if sh.state == Running {
		e.rd.Cancels = append(e.rd.Cancels, Cancel{Req: sh, Leg: CopyLeg, Replica: sh.Core.Replica})
	}
	e.cfg.Canaries.ShadowEnded(&sh.Core, cancelled)
	how := CopyShed
	if cancelled {
		how = CopyCancelled
	}
	e.copyDone(sh, how)
}

// copyDone ends copy sh as how says: parted from its original, and in
// Ready.CopiesEnded for the driver to let go of its record.
func (e *Engine) copyDone(sh *Req, how CopyOutcome) {
	if o := sh.copyOf; o != nil {
		o.copy, sh.copyOf = nil, nil
	}
	sh.state = Done
	e.rd.CopiesEnded = append(e.rd.CopiesEnded, CopyEnd{Req: sh, How: how})
}

// Release counts q out of flight: its answer is written, what it held is
// free (the twin's cancelled sequence may outlive it in an engine's step).
// It counts once.
func (e *Engine) Release(q *Req) { e.lc.End(&q.Life) }

// ReqOf is the Req whose Core cr is.
func ReqOf(cr *sched.Request) *Req { return (*Req)(unsafe.Pointer(cr)) }

// A request's timer: its re-offer (Backoff) or its queue time-out (Held).
// One at a time; the heap orders them by time, then by when they were set.
type timerEntry struct {
	req *Req
	at  time.Duration
	seq uint64
	idx int // in the heap; -1: not set
}

func (e *Engine) setTimer(q *Req, at time.Duration) {
	e.stopTimer(q)
	e.seq++
	q.timer = timerEntry{req: q, at: at, seq: e.seq}
	heap.Push(&e.timers, &q.timer)
}

func (e *Engine) stopTimer(q *Req) {
	if q.timer.req != nil && q.timer.idx >= 0 && q.timer.idx < len(e.timers) && e.timers[q.timer.idx] == &q.timer {
		heap.Remove(&e.timers, q.timer.idx)
	}
	q.timer.req = nil
}

type timerHeap []*timerEntry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timerEntry)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}
