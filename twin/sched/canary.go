package sched

import (
	"fmt"
	"math"
	"time"
)

// Route versions: canaries and shadow traffic, in the core.
//
// A canary reserves its candidate pools: only its own route reaches them.
// Each request of the canary's model that is eligible (its tenant and
// class, and a candidate pool it may be served in: residency and size) is
// drawn onto the canary with the canary's current share, by a hash of the
// request's ID and the canary's seed, so that a request keeps its route
// across its attempts and both drivers draw alike. A canary request is
// routed and queued only to the candidate pools; a baseline request only
// to the other pools. A driver that retries a failed canary attempt sets
// NoCanary so the retry goes to the baseline: the canary costs a user
// latency, not an answer. Fallback models are always served by the
// baseline.
//
// SetCanaryShare changes the share (the Rollout decides it); a share of 0
// moves the canary's queued requests to the baseline's queues at once.
//
// A shadow is a copy of an eligible request that the driver sends to the
// candidate beside the original (Shadow says which requests): Arrive
// takes it with Shadow set and Route its canary, outside every tenant
// quota, and dispatches it only to the candidate, only while fewer than
// ShadowSlots copies run there and no canary request waits. Copies queue
// behind a small limit and are the first shed: a canary request that has
// to wait sheds every queued copy (Ready.ShadowsShed).

// SkipRoute: a pool of another route version (a canary's candidate for a
// baseline request, or a baseline pool for a canary's).
const SkipRoute = "another route version"

// ReasonShadowShed refuses a shadow copy: the candidate's share of slots
// for copies is taken and its queue full, or a canary request needed the
// room.
const ReasonShadowShed = "shadow-shed"

// CanaryRoute is a canary's routing, resolved to the core's indexes.
type CanaryRoute struct {
	Name  string
	Model int
	Pools []int // candidate pools
	// Eligibility: per tenant and per class (nil: all).
	Tenants []bool
	Classes []bool
	Seed    uint64
	// ShadowShare is the share of eligible requests mirrored; ShadowSlots
	// the most copies the candidate runs at once (and the most queued).
	ShadowShare float64
	ShadowSlots int

	// The Rollout's schedule and triggers (rollout.go).
	Rollout RolloutSpec
}

// routeFor is the route version req takes for model m: its canary's for
// the canary's model, the baseline (0) otherwise.
func (c *Core) routeFor(req *Request, m int) int {
	if req.Route > 0 && c.cfg.Canaries[req.Route-1].Model == m {
		return req.Route
	}
	return 0
}

// canaryEligible reports whether req may take canary k: its model, tenant
// and class, and a candidate pool that can ever serve it (residency,
// size).
func (c *Core) canaryEligible(req *Request, k int) bool {
	cr := &c.cfg.Canaries[k]
	if req.Model != cr.Model || (cr.Tenants != nil && !cr.Tenants[req.Tenant]) || (cr.Classes != nil && !cr.Classes[req.Class]) {
		return false
	}
	tj := c.cfg.Tenants[req.Tenant].Jurisdiction
	for _, pi := range cr.Pools {
		if c.poolFits(&c.cfg.Pools[pi], cr.Model, tj, int64(req.Input+req.Output), k+1) == "" {
			return true
		}
	}
	return false
}

// drawRoute is the route a new request takes: a canary's when eligible and
// its draw falls in the canary's share, else the baseline.
func (c *Core) drawRoute(req *Request) int {
	for k := range c.cfg.Canaries {
		if s := c.canaryShare[k]; s > 0 && c.canaryEligible(req, k) && (s >= 1 || draw(c.cfg.Canaries[k].Seed, req.ID, saltRoute) < s) {
			return k + 1
		}
	}
	return 0
}

// Shadow reports whether the driver should mirror req, an original just
// admitted, to canary k's candidate, and which k. A request already on a
// canary is not mirrored to it.
func (c *Core) Shadow(req *Request) (k int, ok bool) {
	if req.Shadow {
		return 0, false
	}
	for k := range c.cfg.Canaries {
		cr := &c.cfg.Canaries[k]
		if cr.ShadowShare > 0 && req.Route != k+1 && c.canaryEligible(req, k) && draw(cr.Seed, req.ID, saltShadow) < cr.ShadowShare {
			return k, true
		}
	}
	return 0, false
}

// draw is a uniform number in [0, 1) from the seed, a request's ID and a
// salt (splitmix64): the same for a request in both drivers and in every
// attempt.
func draw(seed, id, salt uint64) float64 {
	z := seed + id*0x9e3779b97f4a7c15 + salt*0xbf58476d1ce4e5b9
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// CanaryOf reports the canary whose candidate pool pi is.
func (c *Core) CanaryOf(pi int) (k int, ok bool) {
	return c.cfg.Pools[pi].Route - 1, c.cfg.Pools[pi].Route > 0
}

// CanaryShare is canary k's current share of eligible traffic.
func (c *Core) CanaryShare(k int) float64 { return c.canaryShare[k] }

// ShadowsRunning is the number of canary k's copies dispatched and not
// finished.
func (c *Core) ShadowsRunning(k int) int { return c.shadowInflight[k] }

// SetCanaryShare sets canary k's share of eligible traffic. At 0 the
// canary's queued requests move to the baseline's queues, to be dispatched
// there as its replicas have room.
func (c *Core) SetCanaryShare(now time.Duration, k int, share float64) {
	c.canaryShare[k] = math.Max(0, math.Min(1, share))
	if share > 0 {
		return
	}
	moved := false
	for qi := range c.queues {
		qs := &c.queues[qi]
		if qs.route != k+1 {
			continue
		}
		for qs.q.Len() > 0 {
			req := c.reqOf(qs.q.Pop(now))
			req.queue = -1
			c.modelQLen[qs.model]--
			req.Route = 0
			c.enqueue(now, req, qs.model)
			moved = true
		}
	}
	if moved {
		for r := range c.replicas {
			c.fill(now, r)
		}
	}
}

// arriveShadow takes a shadow copy: dispatched to a candidate replica with
// room when copies hold fewer than their slots and no canary request
// waits, queued behind a limit of ShadowSlots, or refused (shed).
func (c *Core) arriveShadow(now time.Duration, req *Request) Decision {
	k := req.Route - 1
	if k < 0 || k >= len(c.cfg.Canaries) {
		return Decision{Outcome: Rejected, Reason: ReasonShadowShed}
	}
	cr := &c.cfg.Canaries[k]
	req.Served = cr.Model
	if !c.canaryEligible(req, k) {
		// Never queued where no candidate may serve it (residency).
		return Decision{Outcome: Rejected, Reason: ReasonShadowShed}
	}
	if c.shadowInflight[k] < cr.ShadowSlots && c.canaryQueued(k) == 0 && c.queuedFor(req, cr.Model) == 0 {
		if r := c.pick(now, req, cr.Model); r >= 0 {
			c.start(now, req, r)
			return Decision{Outcome: Dispatched}
		}
	}
	qi, _ := c.queueAt(cr.Model, c.tenantKey[req.Tenant], -(k + 1))
	if c.queues[qi].q.Len() >= cr.ShadowSlots {
		return Decision{Outcome: Rejected, Reason: ReasonShadowShed}
	}
	c.enqueue(now, req, cr.Model)
	return Decision{Outcome: Queued}
}

// canaryQueued is the number of canary k's own requests waiting.
func (c *Core) canaryQueued(k int) int {
	n := 0
	for qi := range c.queues {
		if c.queues[qi].route == k+1 {
			n += c.queues[qi].q.Len()
		}
	}
	return n
}

// shedShadows sheds every queued copy of canary k: one of its own requests
// has to wait.
func (c *Core) shedShadows(now time.Duration, k int) {
	for qi := range c.queues {
		qs := &c.queues[qi]
		if qs.route != -(k + 1) {
			continue
		}
		for qs.q.Len() > 0 {
			req := c.reqOf(qs.q.Pop(now))
			req.queue = -1
			c.shadowsShed = append(c.shadowsShed, req)
		}
	}
}

// canaryPools marks each pool with its route version (0: baseline) and
// checks the canaries.
func canaryPools(cfg *Config) error {
	for k, cr := range cfg.Canaries {
		if cr.Model < 0 || cr.Model >= len(cfg.Models) {
			return fmt.Errorf("sched: canary %q: model %d out of range", cr.Name, cr.Model)
		}
		if cr.ShadowShare > 0 && cr.ShadowSlots < 1 {
			return fmt.Errorf("sched: canary %q: shadow slots %d, want >= 1 with a shadow share", cr.Name, cr.ShadowSlots)
		}
		for _, pi := range cr.Pools {
			if pi < 0 || pi >= len(cfg.Pools) {
				return fmt.Errorf("sched: canary %q: pool %d out of range", cr.Name, pi)
			}
			if cfg.Pools[pi].Route != 0 {
				return fmt.Errorf("sched: canary %q: pool %s is already a candidate of another canary", cr.Name, cfg.Pools[pi].Name)
			}
			cfg.Pools[pi].Route = k + 1
		}
	}
	return nil
}
