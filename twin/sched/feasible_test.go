package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// In fixture, tenant 1 is bound to the eu jurisdiction, whose one pool
// (pool 1) serves model small (0) with one replica (2) of batch 2; the us
// pool (0) cannot serve it. Each case arranges pool 1's state, then offers
// an eu request of model small with a deadline.
func TestDeadlineFeasibilityFromPools(t *testing.T) {
	const eu, small, euReplica = 1, 0, 2
	s := time.Second
	// fill fills the eu replica, so that the request must queue.
	fill := func(c *Core) {
		for range 2 {
			c.Arrive(0, req(eu, 0, small))
		}
	}
	tests := []struct {
		name     string
		openFor  time.Duration
		setup    func(c *Core)
		now      time.Duration
		deadline time.Duration // after now
		want     Outcome
		reason   string
		retry    time.Duration
	}{{
		name: "throttled until after the deadline: refused, back when the throttle ends",
		setup: func(c *Core) {
			fill(c)
			c.Throttled(0, euReplica, 60*s)
		},
		now: s, deadline: 30 * s,
		want: Rejected, reason: ReasonUpstreamQuota, retry: 59 * s,
	}, {
		name: "throttled until before the deadline: admitted",
		setup: func(c *Core) {
			fill(c)
			c.Throttled(0, euReplica, 20*s)
		},
		now: s, deadline: 30 * s,
		want: Queued,
	}, {
		name:    "breaker open, half-open expected after the deadline: refused",
		openFor: time.Minute,
		setup: func(c *Core) {
			fill(c)
			c.Observe(0, euReplica, false)
		},
		now: s, deadline: 30 * s,
		want: Rejected, reason: ReasonUnavailable, retry: 59 * s,
	}, {
		// Detection reaches the deadline check at once: a half-open
		// breaker in sight is a chance, not a promise, so the request is
		// refused now, hinted to come back when the breaker is half-open,
		// rather than admitted to wait out its deadline (issue 36).
		name:    "breaker open, half-open expected before the deadline: refused at once",
		openFor: 10 * s,
		setup: func(c *Core) {
			fill(c)
			c.Observe(0, euReplica, false)
		},
		now: s, deadline: 30 * s,
		want: Rejected, reason: ReasonUnavailable, retry: 9 * s,
	}, {
		name:    "breaker closed again by a trial: admitted",
		openFor: 10 * s,
		setup: func(c *Core) {
			fill(c)
			c.Observe(0, euReplica, false)
			c.Tick(10 * s)
			c.Observe(11*s, euReplica, true)
		},
		now: 12 * s, deadline: 30 * s,
		want: Queued,
	}, {
		// Every probe fails and re-opens the breaker, so "half-open in 10s"
		// is always in sight; the pool has been down a minute, so it is
		// expected down about a minute more.
		name:    "breaker re-opened by failed probes for a minute: refused",
		openFor: 10 * s,
		setup: func(c *Core) {
			fill(c)
			c.Observe(0, euReplica, false)
			q := req(eu, 0, small)
			q.Deadline = time.Hour
			c.Arrive(s, q) // the core sees the pool down from here
			for at := 10 * s; at <= 60*s; at += 10 * s {
				c.Observe(at, euReplica, false)
			}
		},
		now: 61 * s, deadline: 30 * s,
		want: Rejected, reason: ReasonUnavailable, retry: 60 * s,
	}, {
		name: "queue ahead drains too slowly at the pool's own rate: refused",
		setup: func(c *Core) {
			// Pool eu dispatches one request every 10s; the us pool's
			// fast dispatches of the same model must not count for an
			// eu request.
			var held []*Request
			for i := range 20 {
				now := time.Duration(i) * 10 * s
				r := req(eu, 0, small)
				c.Arrive(now, r)
				held = append(held, r)
				if len(held) > 2 {
					c.Finish(now, held[0])
					held = held[1:]
				}
				for range 10 {
					u := req(0, 0, 1) // model big: us only
					c.Arrive(now, u)
					c.Finish(now, u)
				}
			}
			for range 3 {
				c.Arrive(200*s, req(eu, 0, small))
			}
		},
		now: 200 * s, deadline: 30 * s,
		want: Rejected, reason: ReasonDeadline, retry: 40 * s,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fixture(func(cfg *Config) {
				cfg.DeadlineCheck = true
				cfg.QueueLimit = 100
				cfg.Health = Health{Threshold: 1, OpenFor: tt.openFor}
			})
			tt.setup(c)
			r := req(eu, 0, small)
			r.Deadline = tt.now + tt.deadline
			d := c.Arrive(tt.now, r)
			require.Equal(t, tt.want, d.Outcome, "Arrive(%v) = %+v", tt.now, d)
			require.Equal(t, tt.reason, d.Reason)
			if tt.retry > 0 {
				require.InDelta(t, tt.retry.Seconds(), d.RetryAfter.Seconds(), 1, "RetryAfter")
			}
		})
	}
}

// A tenant whose requests wait out an outage holds its concurrency with
// them: the next one is refused for the outage, not for the tenant's limit,
// both by Arrive and by TenantFull (the gateway's question before the body).
func TestTenantLimitDuringOutageNamesTheOutage(t *testing.T) {
	const eu, small, euReplica = 1, 0, 2
	c := fixture(func(cfg *Config) {
		cfg.Tenants[eu].MaxConcurrency = 1
		cfg.QueueLimit = 100
		cfg.Health = Health{Threshold: 1, OpenFor: 10 * time.Second}
	})
	c.Observe(0, euReplica, false)
	require.Equal(t, Queued, c.Arrive(time.Second, req(eu, 0, small)).Outcome)
	_, full := c.TenantFull(time.Second, eu, 0)
	require.False(t, full, "TenantFull while the eu pool is down")
	d := c.Arrive(time.Second, req(eu, 0, small))
	require.Equal(t, Rejected, d.Outcome)
	require.Equal(t, ReasonUnavailable, d.Reason, "Arrive = %+v", d)
	require.Equal(t, 9*time.Second, d.RetryAfter, "back when its breaker is half-open")

	// Once the pool is back, the limit is the tenant's again.
	c.Observe(11*time.Second, euReplica, true)
	take(c) // the queued request is dispatched
	_, full = c.TenantFull(12*time.Second, eu, 0)
	require.True(t, full)
	require.Equal(t, ReasonTenantConcurrency, c.Arrive(12*time.Second, req(eu, 0, small)).Reason)
}
