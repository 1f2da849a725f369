package sched

import (
	"math"
	"time"
)

// Deadline feasibility from what the pools can really do now.
//
// A request that joins a queue must start before its deadline, and what
// decides that is not the model's queue alone but the pools that may serve
// it — its model (or a fallback of its chain), in its tenant's
// jurisdiction — and what each can do now:
//
//   - a pool the provider throttled (a 429 whose Retry-After ends at T,
//     see Throttled) takes nothing before T: the provider said so;
//   - a pool whose replicas all have open breakers is dark: the core has
//     detected that nothing there answers, and from that instant the
//     deadline check counts on nothing from it until a breaker closes
//     again (a trial that succeeds). A half-open breaker is a chance, not
//     a promise (below), and a request admitted on that chance waits out
//     its deadline when the chance fails, as every one does through an
//     outage; refused at once, its client hears when to come back
//     instead. Replicas loading or down (not ready) have no known return
//     either; an outlier's ejection ends at a known time, which counts;
//   - the requests ahead of it then drain at the dispatch rate of the pools
//     back before its deadline (each pool's own EWMA of the interval
//     between its dispatches, so a dark region's past rate is not counted
//     while it is dark).
//
// NB: a half-open breaker is a chance, not a promise. During a regional
// outage every probe fails and re-opens the breakers, so "back in OpenFor"
// holds at every instant and is wrong at every instant. Trusting it for
// the deadline check admitted a dark region's requests for about one
// deadline after the outage was detected, and every one of them timed out
// (issue 36). So the chance is only the Retry-After a refusal hints: no
// sooner than a half-open breaker, and no sooner than the outage has
// lasted again — a pool unable to take anything for a time D is expected
// to stay so for about D more (the median remaining life under Gott's
// principle; the same reasoning as exponential backoff). The pool's down
// time counts from when the core first saw it so, and ends at the first
// dispatch through a closed breaker or when the core sees one closed and
// ready. A provider's throttle is taken at its word (Retry-After).
//
// Everything comes from the core's own state and now: nothing here reads a
// fault schedule.

// Reasons for a refusal because nothing that may serve a request can take
// it now or before its deadline. ReasonUpstreamQuota (lifecycle.go) is the
// other: every such pool is throttled by its provider.
const (
	// ReasonUnavailable: every pool that may serve the request (its model
	// chain, in its tenant's jurisdiction) is down: breakers open, or
	// replicas loading or lost. Not the tenant's limit, not a queue.
	ReasonUnavailable = "jurisdiction-unavailable"
)

// groupFeas is what feasibility keeps per group (one pool's replicas of one
// model).
type groupFeas struct {
	lastDispatch time.Duration
	interval     float64 // seconds, EWMA of the interval between dispatches; 0: unknown
	dispatched   bool
	down         bool          // seen unable to take a request
	downSince    time.Duration // when first seen so
}

// noteDispatch feeds group feasibility: replica r took a request at now.
// A dispatch through a closed breaker proves the pool up.
func (c *Core) noteDispatch(now time.Duration, r int) {
	rs := &c.replicas[r]
	f := &c.feas[rs.group]
	if f.dispatched {
		gap := (now - f.lastDispatch).Seconds()
		if f.interval == 0 {
			f.interval = gap
		} else {
			f.interval = 0.9*f.interval + 0.1*gap
		}
	}
	f.lastDispatch, f.dispatched = now, true
	if rs.br.state == Closed {
		f.down = false
	}
}

// groupBack returns when group gi is expected to take a request again (now
// when it can), and why not before: ReasonUpstreamQuota (throttled),
// ReasonUnavailable (breakers open, replicas not ready) or "" when it can
// now. hint is that expectation, the Retry-After a refused client hears;
// back is what the deadline check counts on, the same but for a group its
// breakers have found dark (every replica down, some behind an open or
// half-open breaker): a breaker's chance is no promise, so only an
// ejection's end counts there (noReturn when none is ejected). It records
// what it sees for the group's down time.
func (c *Core) groupBack(now time.Duration, gi int) (back, hint time.Duration, why string) {
	g := &c.groups[gi]
	f := &c.feas[gi]
	up, detected := false, false
	half := noReturn    // earliest expected back (half-open, ejection over)
	promise := noReturn // earliest ejection's end
	for _, r := range g.heap {
		// One judgement with routing and Explain (availability.go); only a
		// closed breaker proves the group up: a half-open one is a chance.
		w, b := c.availableAt(now, r)
		switch {
		case w == "" && c.BreakerView(now, r) == Closed:
			up = true
		case w == SkipCircuitOpen || w == SkipTrial || (w == "" && c.BreakerView(now, r) == HalfOpen):
			detected = true
		case w == SkipEjected:
			promise = min(promise, b)
		}
		half = min(half, b)
	}
	hint, why = now, ""
	if up {
		f.down = false
	} else {
		if !f.down {
			f.down, f.downSince = true, now
		}
		// Expected back no sooner than a half-open breaker, and no sooner
		// than the outage has lasted again (see the file comment).
		hint, why = max(half, now+(now-f.downSince)), ReasonUnavailable
		if half == noReturn {
			hint = now + (now - f.downSince)
		}
	}
	back = hint
	if detected && !up {
		back = promise
	}
	if t := c.pools[g.pool].throttledUntil; t > hint {
		hint, why = t, ReasonUpstreamQuota
		if back != noReturn {
			back = max(back, t)
		}
	}
	return back, hint, why
}

// startEstimate estimates when req, joining model m's queue now, would
// start: the earliest time a pool that may serve it (m, its tenant's
// jurisdiction, its size) is expected to take requests, plus the requests
// ahead of it at the dispatch rate of the pools back before its deadline
// (noReturn when only dark pools may serve it: see groupBack). why is the
// reason of the earliest pool's absence ("" when one can take requests
// now), back when it is expected to take a request (what the deadline
// check counts on) and hint when a refused client should come back.
func (c *Core) startEstimate(now time.Duration, req *Request, m int) (start, back, hint time.Duration, why string) {
	tj := c.cfg.Tenants[req.Tenant].Jurisdiction
	tokens := int64(req.Input + req.Output)
	back, hint = noReturn, noReturn
	rate := 0.0 // requests per second
	fits := false
	for _, gi := range c.groupsOf[m] {
		g := &c.groups[gi]
		if c.poolFits(&c.cfg.Pools[g.pool], m, tj, tokens, c.routeFor(req, m)) != "" {
			continue
		}
		fits = true
		b, h, w := c.groupBack(now, gi)
		if h < hint || (h == hint && w == "") {
			hint, why = h, w
		}
		back = min(back, b)
		if f := &c.feas[gi]; f.interval > 0 && b != noReturn && (req.Deadline == 0 || b <= req.Deadline) {
			rate += 1 / f.interval
		}
	}
	if !fits {
		return noReturn, noReturn, noReturn, ReasonNoRoute
	}
	if back == noReturn {
		return noReturn, noReturn, hint, why
	}
	// Ahead: a request bound to a jurisdiction waits in its own queue; one
	// bound nowhere may go anywhere, and competes with every queue of m.
	ahead := c.modelQLen[m]
	if tj != "" && !c.cfg.IgnoreResidency {
		ahead = c.queuedFor(req, m)
	}
	start = back
	if rate > 0 {
		start += time.Duration(float64(ahead+1) / rate * float64(time.Second))
	}
	return start, back, hint, why
}

// infeasible reports whether req, joining model m's queue now, cannot start
// before its deadline, and if so the refusal: the reason and the wait to
// hint. When no pool is expected back before the deadline the reason is
// why not (ReasonUpstreamQuota, ReasonUnavailable) and the hint is when the
// first is expected back; when the queue ahead drains too slowly it is
// ReasonDeadline, with the predicted wait.
func (c *Core) infeasible(now time.Duration, req *Request, m int) (reason string, wait time.Duration, ok bool) {
	if !c.cfg.DeadlineCheck || req.Deadline == 0 {
		return "", 0, false
	}
	start, back, hint, why := c.startEstimate(now, req, m)
	switch {
	case start <= req.Deadline:
		return "", 0, false
	case back > req.Deadline && why != "":
		return why, hint - now, true
	}
	return ReasonDeadline, start - now, true
}

// chainDown reports whether nothing that may serve req (its model chain, in
// its tenant's jurisdiction) can take a request now, and if so why and when
// the first is expected back: the reason a refusal then carries rather
// than the tenant's concurrency, which requests waiting out the outage
// fill.
func (c *Core) chainDown(now time.Duration, req *Request) (why string, back time.Duration, down bool) {
	cls := c.cfg.Classes[req.Class]
	fallbacks := c.cfg.Models[req.Model].Fallbacks
	if !c.cfg.Fallback {
		fallbacks = nil
	}
	back = math.MaxInt64
	for i := 0; i <= len(fallbacks); i++ {
		m := req.Model
		if i > 0 {
			if m = fallbacks[i-1]; c.cfg.Models[m].Quality < cls.QualityFloor {
				continue
			}
		}
		if !c.canEverServe(req, m, nil) {
			continue
		}
		d := req.Deadline
		req.Deadline = 0 // every pool counts, whenever back
		_, _, b, w := c.startEstimate(now, req, m)
		req.Deadline = d
		if w == "" {
			return "", now, false
		}
		if b < back {
			back, why = b, w
		}
	}
	if back == math.MaxInt64 {
		return "", 0, false // no route at all: Arrive says so
	}
	return why, back, true
}

// jurisdictionDown reports whether every pool in jurisdiction j ("" for
// all) that serves a model is down now (see chainDown), and there is one.
func (c *Core) jurisdictionDown(now time.Duration, j string) bool {
	seen := false
	for gi := range c.groups {
		g := &c.groups[gi]
		p := &c.cfg.Pools[g.pool]
		if !p.Serves[g.model] || (j != "" && p.Jurisdiction != j && !c.cfg.IgnoreResidency) {
			continue
		}
		if _, _, why := c.groupBack(now, gi); why == "" {
			return false
		}
		seen = true
	}
	return seen
}
