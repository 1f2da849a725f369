package sched

import (
	"fmt"
	"time"
)

// The core learns replica health the way a real gateway does: from the
// results of requests it sent and from periodic probes, through a circuit
// breaker per replica. It never reads a fault schedule, so detecting a
// failure takes time — consecutive failures, or a probe — and that time
// shows in the results.
//
//	closed ──(Threshold consecutive failures)──▶ open
//	open ──(OpenFor elapsed)──▶ half-open: one trial request (or probe)
//	half-open ──success──▶ closed;  ──failure──▶ open again
//
// An open breaker takes its replica out of routing; a half-open one admits
// one request at a time. The open → half-open step happens on the
// breaker's own timer, OpenFor after it opened (Ready.WakeAt asks for the
// Tick), as Envoy's and resilience4j's do; the transition is in Ready's
// Transitions at that moment. Its trial is a health probe the driver sends
// at once on that transition, not a user's request: a replica still down
// costs a probe, not an answer. Until the probe's result, nothing is
// routed there; a success closes it, a failure opens it again.

// Breaker states.
type BreakerState uint8

const (
	Closed BreakerState = iota
	Open
	HalfOpen
)

func (s BreakerState) String() string { return [...]string{"closed", "open", "half-open"}[s] }

// Health configures the breakers.
type Health struct {
	Threshold int           // consecutive failures that open a breaker; default 3
	OpenFor   time.Duration // before an open breaker lets a trial through; default 10s
}

type breaker struct {
	state    BreakerState
	failures int
	openedAt time.Duration
	trial    bool // a half-open trial is in flight
}

// Transition is a breaker changing state, for the timeline.
type Transition struct {
	Replica  int
	From, To BreakerState
	At       time.Duration
}

// Trial reports whether t is part of an open breaker's trial round (open →
// half-open, half-open → open): during an outage it repeats every OpenFor,
// so timelines leave it out and show a breaker opening and closing.
func (t Transition) Trial() bool { return t.From != Closed && t.To != Closed }

func (t Transition) String() string {
	return fmt.Sprintf("replica %d breaker %s → %s", t.Replica, t.From, t.To)
}

// Observe records the result of a request (or probe) on replica r: ok for a
// success, false for an error or timeout. A breaker transition it causes is
// in Ready's Transitions. A success on a closed breaker only resets its
// failure count.
func (c *Core) Observe(now time.Duration, r int, ok bool) {
	rs := &c.replicas[r]
	b := &rs.br
	c.advanceBreaker(now, r)
	from := b.state
	c.advanceEjection(now, r)
	switch {
	case ok && b.state == HalfOpen:
		b.state, b.failures, b.trial = Closed, 0, false
	case ok && b.state == Open:
		// Too early: an open breaker waits OpenFor before trusting
		// successes again (a late response from before it opened, or a
		// flapping probe).
	case ok:
		b.failures = 0
	case b.state == HalfOpen:
		b.state, b.openedAt, b.trial = Open, now, false
		c.wake(now + c.health.OpenFor)
	default:
		b.failures++
		if b.state == Closed && b.failures >= c.health.Threshold {
			b.state, b.openedAt = Open, now
			c.wake(now + c.health.OpenFor)
		}
	}
	c.fix(r)
	if b.state != from {
		c.transitions = append(c.transitions, Transition{Replica: r, From: from, To: b.state, At: now})
		if b.state == Closed {
			c.fill(now, r)
		}
	}
}

// advanceBreaker moves an open breaker to half-open once OpenFor has passed,
// recording the transition at the moment it passed.
func (c *Core) advanceBreaker(now time.Duration, r int) {
	b := &c.replicas[r].br
	if b.state == Open && now-b.openedAt >= c.health.OpenFor {
		b.state, b.trial = HalfOpen, true // the driver's probe is the trial
		c.fix(r)
		c.transitions = append(c.transitions, Transition{Replica: r, From: Open, To: HalfOpen, At: b.openedAt + c.health.OpenFor})
	}
}

// advanceBreakers moves every open breaker whose OpenFor has passed to
// half-open, lets a queued request be its trial, and asks for a wake-up at
// the next one's time.
func (c *Core) advanceBreakers(now time.Duration) {
	for r := range c.replicas {
		b := &c.replicas[r].br
		if b.state != Open {
			continue
		}
		if at := b.openedAt + c.health.OpenFor; now < at {
			c.wake(at)
			continue
		}
		c.advanceBreaker(now, r)
		c.fill(now, r)
	}
}

// Breaker returns replica r's breaker state at now.
func (c *Core) Breaker(now time.Duration, r int) BreakerState {
	c.advanceBreaker(now, r)
	return c.replicas[r].br.state
}

// SetServes changes whether pool p may serve model m (a model retired from
// it, a driver upgrade that made the pairing incompatible, or the reverse).
// The route table's version increases; requests already queued for m stay
// queued for the pools that still serve it.
func (c *Core) SetServes(p, m int, serves bool) {
	if c.cfg.Pools[p].Serves[m] == serves {
		return
	}
	c.cfg.Pools[p].Serves[m] = serves
	c.routeVersion++
	if !serves {
		c.collectUnroutable(m)
	}
}

// Serves reports whether pool p may serve model m now.
func (c *Core) Serves(p, m int) bool { return c.cfg.Pools[p].Serves[m] }

// SetPoolQuota changes a pool's provider quota (requests and tokens per
// minute; 0 is unlimited, as in Pool). Buckets keep their level, capped at
// the new burst.
func (c *Core) SetPoolQuota(now time.Duration, p int, rpm, tpm float64) {
	c.refillPool(now, p)
	pl := &c.cfg.Pools[p]
	ps := &c.pools[p]
	pl.RequestsPerMinute, pl.TokensPerMinute = rpm, tpm
	ps.reqTokens = min(ps.reqTokens, rpm)
	ps.tokTokens = min(ps.tokTokens, tpm)
	// A wake-up computed at the old rate may be far too late (or too
	// early): forget it and let the pool's replicas try now, which sets a
	// new one if the quota still binds.
	c.wakeAt = 0
	c.returnEjected(now)   // re-arms the wake-up of ejections still running
	c.advanceBreakers(now) // and of open breakers
	for r := range c.replicas {
		if c.replicas[r].Pool == p {
			c.fill(now, r)
		}
	}
}

// Throttled records that the provider of replica r's pool refused an
// attempt at now for its quota (HTTP 429), asking for retryAfter: the pool
// takes no request until then (at least a second: a 429 without a usable
// Retry-After still says "not now"), and a wake-up is set for when it may
// again. This is how the core learns of a provider's quota it was not
// told of: from results, as a live gateway does. It reports whether the
// pool was not throttled before (the core's detection).
func (c *Core) Throttled(now time.Duration, r int, retryAfter time.Duration) bool {
	ps := &c.pools[c.replicas[r].Pool]
	fresh := now >= ps.throttledUntil
	ps.throttledUntil = max(ps.throttledUntil, now+max(retryAfter, time.Second))
	return fresh
}

// collectUnroutable moves the queued requests for model m that no pool
// serves any more (a retirement, an incompatible upgrade) to Ready's
// Unroutable, so the driver offers them to admission again: their fallback
// chain, or a refusal.
func (c *Core) collectUnroutable(m int) {
	for qi := range c.queues {
		qs := &c.queues[qi]
		if qs.model != m || qs.q.Len() == 0 {
			continue
		}
		served := false
		for pi := range c.cfg.Pools {
			// Served for this queue: by a pool in its residency key's
			// jurisdiction (any pool for requests bound nowhere).
			if c.poolFits(&c.cfg.Pools[pi], qs.model, qs.key, -1, max(qs.route, -qs.route)) == "" {
				served = true
				break
			}
		}
		if served {
			continue
		}
		for qs.q.Len() > 0 {
			it := qs.q.Pop(0)
			req := c.reqOf(it)
			req.queue = -1
			if qs.route < 0 {
				c.shadowsShed = append(c.shadowsShed, req) // a copy is not offered again
				continue
			}
			c.modelQLen[qs.model]--
			c.unroutable = append(c.unroutable, req)
		}
	}
}

// SetRetiring marks model m as announced for retirement: new requests for
// it go to its fallbacks first (when the policy allows fallback and the
// class's quality floor accepts them), and to m only when none can take
// them.
func (c *Core) SetRetiring(m int, retiring bool) {
	if c.retiring == nil {
		c.retiring = make([]bool, len(c.cfg.Models))
	}
	c.retiring[m] = retiring
}

// OldestWait returns how long the oldest queued request has waited: the
// queue-wait signal of the degradation ladder.
func (c *Core) OldestWait(now time.Duration) time.Duration {
	var oldest time.Duration
	for qi := range c.queues {
		if c.queues[qi].route < 0 {
			continue // shadow copies: nobody waits for them
		}
		if it := c.queues[qi].q.Peek(now); it != nil {
			oldest = max(oldest, now-c.reqOf(it).Arrived)
		}
	}
	return oldest
}

// Saturation returns the share of replicas that cannot take a request now:
// full, pushing back, loading, or behind an open breaker.
func (c *Core) Saturation() float64 {
	n, present := 0, 0
	for i := range c.replicas {
		if c.replicas[i].absent {
			continue // not provisioned: no part of the fleet
		}
		present++
		if !c.replicas[i].hasRoom() {
			n++
		}
	}
	if present == 0 {
		return 0
	}
	return float64(n) / float64(present)
}

// Hedge sends a duplicate of a dispatched request to a second replica, the
// least loaded other one with room that may serve it (same residency,
// capability and quota rules), and returns it, or -1 when there is none.
// The driver runs both attempts and calls EndHedge when one produces its
// first token: the loser is cancelled. Routing considers every replica
// here, O(replicas), which hedging's rarity affords.
func (c *Core) Hedge(now time.Duration, req *Request) int {
	if req.Replica < 0 || req.hedged {
		return -1
	}
	m := req.Served
	tj := c.cfg.Tenants[req.Tenant].Jurisdiction
	best := -1
	for _, gi := range c.groupsOf[m] {
		g := &c.groups[gi]
		p := &c.cfg.Pools[g.pool]
		if c.poolFits(p, m, tj, int64(req.Input+req.Output), c.routeFor(req, m)) != "" || !c.poolQuotaOK(now, g.pool, req) {
			continue
		}
		for _, r := range g.heap {
			if r != req.Replica && c.replicas[r].hasRoom() && (best < 0 || c.lessReplica(r, best)) {
				best = r
			}
		}
	}
	if best < 0 {
		return -1
	}
	rs := &c.replicas[best]
	rs.inflight++
	c.poolSlots(now, rs.Pool, 1)
	if rs.br.state == HalfOpen {
		rs.br.trial = true // the duplicate is the half-open trial
	}
	c.fix(best)
	c.chargePool(now, rs.Pool, req)
	req.Hedge, req.hedged = best, true
	return best
}

// EndHedge settles a hedged request: keepHedge when the duplicate won (it
// becomes the request's replica and the original's slot is freed),
// otherwise the duplicate's slot is freed. Freed capacity may dispatch
// queued requests (see Dispatches).
func (c *Core) EndHedge(now time.Duration, req *Request, keepHedge bool) {
	if !req.hedged {
		return
	}
	loser := req.Hedge
	if keepHedge {
		loser, req.Replica = req.Replica, req.Hedge
	}
	req.Hedge, req.hedged = -1, false
	if loser >= 0 {
		c.replicas[loser].inflight--
		c.poolSlots(now, c.replicas[loser].Pool, -1)
		c.fix(loser)
		c.fill(now, loser)
	}
}
