package sched

import "time"

// A request's life around the core, written once for both drivers.
//
// The core decides where a request goes; what the driver does with each
// answer — wait for a dispatch, offer again after a deferral, back off and
// retry after a refusal or a failed attempt, give up, and what follows the
// degradation ladder's verdict on a new request (Degrade) — is decided
// here, so the twin (timers in virtual time) and the gateway (an HTTP
// handler on the wall clock) only carry actions out. The retry budget, the
// attempt and deferral counts (the ladder's included), what "admitted"
// means and the reason a request finally fails with live in this file and
// nowhere else.
//
//	lc.Begin()                      // a request arrives
//	next := lc.Offered(&life, core.Arrive(now, req), draw)
//	...                             // Wait: the core dispatches it later
//	next = lc.Failed(&life, AttemptError, 0, draw)   // an attempt failed
//	lc.Finish(&life)                // it ended, however it ended
//	lc.Release()                    // and its resources are free
//
// A request "arrives" once: the driver sets its Arrived when the client
// sent it, and keeps it on every later offer (a retry, a deferral, a
// ladder's deferral), so FIFO order, priority aging, WFQ and the queue wait
// count from then.

// Life is one request's state around the core. The zero value is a request
// not yet offered.
type Life struct {
	Attempts  int  // offers to the core, the first included (deferred re-offers count)
	Deferrals int  // times the core deferred it
	Shed      int  // times the degradation ladder deferred it, before its first offer
	Retries   int  // re-offers after a refusal or a failed attempt
	Admitted  bool // the core dispatched or queued it at least once
	InRetry   bool // counted among the requests retrying (the budget)
	Throttled bool // its last attempt was refused by the provider's quota (429)
	// Migrations counts the times its cut stream was migrated
	// (RetryPolicy.MigrationLimit): the driver's next attempt carries what
	// the cut one had generated in its prompt.
	Migrations int
	ended      bool // out of the budget and of flight (Lifecycle.End)
	// Key is the idempotency key every attempt of the request carries,
	// retries and hedged duplicates alike (the gateway sends it upstream
	// as Idempotency-Key); the driver sets it when the request begins.
	Key string
}

// Action is what the driver does next with a request.
type Action uint8

const (
	// Wait: the core holds the request (dispatched or queued); the driver
	// starts it when a dispatch names it.
	Wait Action = iota + 1
	// Reoffer: offer it to the core again after Next.After.
	Reoffer
	// Refuse: answer it refused with Next.Reason, Next.RetryAfter and
	// Next.Detail; it is over.
	Refuse
	// GiveUp: it failed for good; Next.Reason is ReasonUpstreamQuota when
	// the provider's quota refused its last attempt, else "".
	GiveUp
	// OfferNow: offer it to the core now (the ladder let it through).
	OfferNow
	// AnswerCached: answer it from the cache now (a cached-answers rung).
	AnswerCached
)

func (a Action) String() string {
	return [...]string{"", "wait", "reoffer", "refuse", "give-up", "offer", "answer-cached"}[a]
}

// ReasonUpstreamQuota is the reason of a request whose attempts the
// provider's quota refused (429) until its retries ran out.
const ReasonUpstreamQuota = "upstream-quota"

// Next is the answer of the lifecycle: what to do, and with what.
type Next struct {
	Action     Action
	After      time.Duration // Reoffer: the wait before offering again
	Retry      bool          // Reoffer: a retry (a deferral otherwise)
	Reason     string        // Refuse, GiveUp; Reoffer: the refusal or deferral retried
	RetryAfter time.Duration // Refuse: the client's hint
	Detail     string        // Refuse: why no pool could take it
	FirstAdmit bool          // Wait: admitted for the first time
}

// Attempt is how an attempt on a replica ended, when it did not answer.
type Attempt uint8

const (
	// AttemptError: a transport error, a 5xx, a stream cut short, no
	// answer within the health timeout: the replica's fault.
	AttemptError Attempt = iota + 1
	// AttemptThrottled: the provider answered 429, with a Retry-After:
	// quota, not ill health.
	AttemptThrottled
	// AttemptCut: the replica failed (as AttemptError) after the answer's
	// first tokens had reached the client. Nothing can splice a second
	// answer onto a stream already read, so the request fails, whatever
	// its retries left: a gateway cannot retry it, and the replay's
	// clients, as the OpenAI SDKs, do not retry a broken stream.
	AttemptCut
)

// Lifecycle is the driver-wide part of request lives: the retry policy and
// its budget, which counts the requests in flight and those retrying. It is
// not safe for concurrent use; the gateway holds its lock around calls.
type Lifecycle struct {
	policy        RetryPolicy
	retryRejected bool // refusals (not no-route) are retried, as clients do

	live     int // requests in flight: begun and not released
	retrying int // requests counted in the budget
	peak     int // most retrying at once
}

// NewLifecycle returns a lifecycle under policy; retryRejected says whether
// clients retry requests the core refused (a 429 with Retry-After).
func NewLifecycle(policy RetryPolicy, retryRejected bool) *Lifecycle {
	return &Lifecycle{policy: policy, retryRejected: retryRejected}
}

// Policy returns the retry policy.
func (lc *Lifecycle) Policy() RetryPolicy { return lc.policy }

// Begin counts a new request in flight.
func (lc *Lifecycle) Begin() { lc.live++ }

// LadderJudges reports whether the degradation ladder judges l's request
// now: before its first offer to the core, which is also each time it comes
// back from a ladder's deferral; never its retries.
func (l *Life) LadderJudges() bool { return l.Attempts == 0 }

// Offers is how many times the request was offered, to the core or to the
// ladder (a ladder's deferral is an offer that was deferred): what a client
// is told (X-Fleetdrill-Attempts).
func (l *Life) Offers() int { return l.Attempts + l.Shed }

// AllDeferrals is how many times it was deferred, by the core or the ladder
// (X-Fleetdrill-Deferrals).
func (l *Life) AllDeferrals() int { return l.Deferrals + l.Shed }

// Degrade has the ladder judge l's request (of class for model, asking for
// output tokens; Ladder.Apply, told whether it deferred it before) and
// answers what follows, with the ladder's effect for the driver to count
// and apply: offer it (its output or model as the effect says), defer it
// and judge it again after Next.After, refuse it (shed: the ladder moves at
// its next evaluation at the earliest, which is the client's hint), or
// answer it from the cache. Call it only while LadderJudges. draw is
// Apply's.
func (lc *Lifecycle) Degrade(l *Life, ld *Ladder, class, model, output int, draw func() float64) (Next, Effect) {
	e := ld.Apply(class, model, output, l.Shed > 0, draw)
	return lc.degraded(l, e), e
}

// degraded is what follows the ladder's effect e on l's request.
func (lc *Lifecycle) degraded(l *Life, e Effect) Next {
	switch e.Verdict {
	case Defer:
		l.Shed++
		return Next{Action: Reoffer, After: e.After, Reason: ReasonLoadShed}
	case Shed:
		return Next{Action: Refuse, Reason: ReasonLoadShed, RetryAfter: LadderEvery}
	case Cache:
		return Next{Action: AnswerCached}
	}
	return Next{Action: OfferNow}
}

// Offered answers what to do after the core decided d on l's request; draw
// gives a uniform [0, 1) draw from the driver's seeded stream, and is called
// only when a backoff is drawn.
func (lc *Lifecycle) Offered(l *Life, d Decision, draw func() float64) Next {
	l.Attempts++
	switch d.Outcome {
	case Dispatched, Queued:
		first := !l.Admitted
		l.Admitted = true
		return Next{Action: Wait, FirstAdmit: first}
	case Deferred:
		l.Deferrals++
		return Next{Action: Reoffer, After: d.RetryAfter, Reason: d.Reason}
	}
	// Rejected. A request no pool can ever serve is not retried: nothing
	// will change by trying again.
	if lc.retryRejected && d.Reason != ReasonNoRoute {
		if n, ok := lc.retry(l, d.RetryAfter, draw); ok {
			n.Reason = d.Reason
			return n
		}
	}
	return Next{Action: Refuse, Reason: d.Reason, RetryAfter: d.RetryAfter, Detail: d.Detail}
}

// Failed answers what to do after an attempt of l's request ended without
// an answer (a 429 asking for retryAfter, or an error): retry after a
// backoff, or give up; a stream cut after its first tokens always gives
// up (AttemptCut).
func (lc *Lifecycle) Failed(l *Life, how Attempt, retryAfter time.Duration, draw func() float64) Next {
	l.Throttled = how == AttemptThrottled
	if how == AttemptCut {
		if l.Migrations < lc.policy.MigrationLimit {
			// Migrated at once: the stream is under way, and the
			// client waits on it.
			l.Migrations++
			return Next{Action: Reoffer, Retry: true}
		}
		return Next{Action: GiveUp}
	}
	// A provider's Retry-After is about its pool, and the core keeps the
	// pool out of routing until then (Core.Throttled): the retry itself
	// only backs off, and may go elsewhere at once. The client hears the
	// Retry-After only if the request gives up.
	if n, ok := lc.retry(l, 0, draw); ok {
		return n
	}
	if l.Throttled {
		return Next{Action: GiveUp, Reason: ReasonUpstreamQuota, RetryAfter: retryAfter}
	}
	return Next{Action: GiveUp}
}

// retry decides whether l may be tried again and when, entering it in the
// budget.
func (lc *Lifecycle) retry(l *Life, retryAfter time.Duration, draw func() float64) (Next, bool) {
	if !lc.policy.Allow(l.Attempts, lc.retrying, lc.live, l.InRetry) {
		return Next{}, false
	}
	var delay time.Duration
	if !lc.policy.IgnoreRetryAfter {
		delay = lc.policy.Delay(l.Attempts, draw(), retryAfter)
	}
	if !l.InRetry {
		l.InRetry = true
		lc.retrying++
		lc.peak = max(lc.peak, lc.retrying)
	}
	l.Retries++
	return Next{Action: Reoffer, After: delay, Retry: true}, true
}

// Finish takes l's request out of the retry budget: it ended.
func (lc *Lifecycle) Finish(l *Life) {
	if l.InRetry {
		l.InRetry = false
		lc.retrying--
	}
}

// End takes l's request out of the retry budget and out of flight at the
// instant its outcome is decided (refused, given up, answered), so that
// the next request's budget (RetryPolicy.Allow) counts it in both drivers
// does, however long the driver then takes to write the answer. It may be
// called again on the driver's way out: it counts once. The twin, whose
// cancelled sequences may outlive their request in an engine's step,
// calls Finish and Release itself.
func (lc *Lifecycle) End(l *Life) {
	if l.ended {
		return
	}
	l.ended = true
	lc.Finish(l)
	lc.Release()
}

// Release counts a request out of flight: what it held is free. The twin
// releases a request later than it finishes when a cancelled sequence is
// still in an engine's step.
func (lc *Lifecycle) Release() { lc.live-- }

// Live is the number of requests in flight.
func (lc *Lifecycle) Live() int { return lc.live }

// Retrying is the number of requests retrying now, and the most at once.
func (lc *Lifecycle) Retrying() (now, peak int) { return lc.retrying, lc.peak }
