package reqengine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// newEngine returns an engine over one pool of one replica taking one
// request at a time, a queue of limit, three attempts per request and the
// queue time-out qt (0: none).
func newEngine(t *testing.T, limit int, qt time.Duration) *Engine {
	return newEngineWith(t, limit, 1, sched.Health{}, EngineConfig{Seed: 7, QueueTimeout: qt})
}

// newEngineWith is newEngine over replicas replicas, with their breakers'
// health and cfg.
func newEngineWith(t *testing.T, limit, replicas int, health sched.Health, cfg EngineConfig) *Engine {
	t.Helper()
	c, err := sched.New(sched.Config{
		Health:   health,
		Tenants:  []sched.Tenant{{Name: "any", Weight: 1}},
		Classes:  []sched.Class{{Name: "interactive", Priority: 1}},
		Models:   []sched.Model{{Name: "m"}},
		Pools:    []sched.Pool{{Name: "a", PricePerHour: 1, Serves: []bool{true}, KVTokens: []int64{1e6}}},
		Replicas: oneAtATime(replicas),
		Policy:   "fifo", QueueLimit: limit, Strategy: "least-loaded",
	})
	require.NoError(t, err)
	lc := sched.NewLifecycle(sched.RetryPolicy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: 8 * time.Second, Budget: 1}, true)
	return NewEngine(c, lc, nil, cfg)
}

// oneAtATime is n replicas of pool 0 taking one request each.
func oneAtATime(n int) []sched.Replica {
	rs := make([]sched.Replica, n)
	for i := range rs {
		rs[i] = sched.Replica{Pool: 0, MaxBatch: 1}
	}
	return rs
}

// drain returns the engine's Ready and advances past it (AppendTo: its
// lists copied, as the engine reuses them).
func drain(e *Engine) Ready {
	out := Ready{WakeAt: e.WakeAt()}
	e.AppendTo(&out)
	return out
}

func arrive(e *Engine, now time.Duration, id uint64) *Req {
	q := &Req{Core: sched.Request{ID: id, Input: 10, Output: 10, Arrived: now}}
	e.Step(now, Event{Kind: Arrival, Req: q})
	return q
}

// A request that finds room starts at once; the one behind it queues and
// starts when the first answers; both leave the core and the budget.
func TestEngineStartsAndAnswers(t *testing.T) {
	e := newEngine(t, 10, 0)
	a := arrive(e, 0, 1)
	b := arrive(e, time.Millisecond, 2)
	rd := drain(e)
	require.Len(t, rd.Offers, 2)
	require.Equal(t, sched.Dispatched, rd.Offers[0].Decision.Outcome)
	require.True(t, rd.Offers[0].Next.FirstAdmit)
	require.Equal(t, sched.Queued, rd.Offers[1].Decision.Outcome)
	require.Len(t, rd.Starts, 1)
	require.Same(t, &a.Core, rd.Starts[0].Req)
	require.Equal(t, Running, a.State())
	require.Equal(t, Held, b.State())
	require.Equal(t, NoWake, rd.WakeAt, "nothing waits on time without a queue time-out")

	e.Step(2*time.Second, Event{Kind: Answered, Req: a, Replica: 0, Observed: true, Latency: time.Second})
	rd = drain(e)
	require.Equal(t, []Answer{{Req: a, Outcome: Completed, Was: Running, Replica: 0}}, rd.Answers)
	require.Len(t, rd.Starts, 1, "the answer freed the replica for the queued request")
	require.Same(t, &b.Core, rd.Starts[0].Req)
	require.Equal(t, Done, a.State())
	require.Equal(t, 2, e.Lifecycle().Live(), "in flight until the driver releases it")
	e.Release(a)
	e.Release(a)
	require.Equal(t, 1, e.Lifecycle().Live(), "released once")

	// A second answer for the same attempt is ignored.
	e.Step(3*time.Second, Event{Kind: Answered, Req: a, Replica: 0})
	require.False(t, e.HasReady())
}

// A failed attempt backs off on the engine's own timer (one wake-up for
// the driver), comes back as a retry, and gives up when its attempts run
// out; throttled at the last, it is refused for the provider's quota with
// the provider's hint.
func TestEngineRetriesOnItsTimer(t *testing.T) {
	e := newEngine(t, 10, 0)
	q := arrive(e, 0, 1)
	drain(e)
	e.Step(time.Second, Event{Kind: AttemptFailed, Req: q, Replica: 0, How: sched.AttemptError, Observed: true})
	rd := drain(e)
	require.Empty(t, rd.Answers)
	require.Equal(t, Backoff, q.State())
	require.True(t, q.Retrying())
	// The backoff is the lifecycle's (sched.Backoff's draw for this seed,
	// request and attempt): the wake-up is at the failure plus it.
	delay := sched.RetryPolicy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: 8 * time.Second}.
		Delay(1, sched.BackoffDraw(7, 1, 1), 0)
	require.Equal(t, time.Second+delay, rd.WakeAt)

	// A tick before it does nothing; at it, the request is offered again.
	e.Step(time.Second+delay/2, Event{Kind: Tick})
	require.False(t, e.HasReady())
	e.Step(rd.WakeAt, Event{Kind: Tick})
	rd = drain(e)
	require.Equal(t, []Reoffer{{Req: q, Retry: true}}, rd.Reoffered)
	require.Len(t, rd.Starts, 1)
	require.Equal(t, Running, q.State())
	require.Equal(t, NoWake, rd.WakeAt)

	e.Step(5*time.Second, Event{Kind: AttemptFailed, Req: q, Replica: 0, How: sched.AttemptError, Observed: true})
	rd = drain(e)
	e.Step(rd.WakeAt, Event{Kind: Tick})
	drain(e)
	e.Step(20*time.Second, Event{Kind: AttemptFailed, Req: q, Replica: 0, How: sched.AttemptThrottled, RetryAfter: 4 * time.Second})
	rd = drain(e)
	require.Len(t, rd.Answers, 1)
	require.Equal(t, Answer{Req: q, Outcome: Refused, Reason: sched.ReasonUpstreamQuota, RetryAfter: 4 * time.Second, Was: Running, Replica: -1},
		rd.Answers[0])
	require.Equal(t, 3, q.Life.Attempts)
	now, _ := e.Lifecycle().Retrying()
	require.Zero(t, now, "out of the retry budget")
}

// The queue time-out is the engine's timer: a request still queued when it
// passes times out and leaves the queue; one that started before is not
// touched by it.
func TestEngineQueueTimeout(t *testing.T) {
	e := newEngine(t, 10, 5*time.Second)
	a := arrive(e, 0, 1)
	b := arrive(e, time.Second, 2)
	rd := drain(e)
	require.Equal(t, 6*time.Second, rd.WakeAt, "b's queue time-out")
	require.Equal(t, Running, a.State(), "a started: no time-out")
	e.Step(6*time.Second, Event{Kind: Tick})
	rd = drain(e)
	require.Equal(t, []Answer{{Req: b, Outcome: QueueTimedOut, Was: Held, Replica: -1}}, rd.Answers)
	require.Zero(t, e.Core().QueueLen(0), "it left the core's queue")
	require.Equal(t, NoWake, rd.WakeAt)
}

// A client gone (or a deadline passed) ends the request wherever it is and
// cancels its timer.
func TestEngineGone(t *testing.T) {
	e := newEngine(t, 10, 0)
	q := arrive(e, 0, 1)
	drain(e)
	e.Step(time.Second, Event{Kind: AttemptFailed, Req: q, Replica: 0, How: sched.AttemptError})
	require.NotEqual(t, NoWake, drain(e).WakeAt)
	e.Step(1500*time.Millisecond, Event{Kind: Gone, Req: q, Deadline: true})
	rd := drain(e)
	require.Equal(t, []Answer{{Req: q, Outcome: TimedOut, Was: Backoff, Replica: -1}}, rd.Answers)
	require.Equal(t, NoWake, rd.WakeAt, "its retry is no longer due")
	e.Step(2*time.Second, Event{Kind: Gone, Req: q})
	require.False(t, e.HasReady(), "it ended once")
}

// A refusal that clients retry (a full queue) backs off as a retry; a
// request no pool can ever take is refused at once with the core's detail.
func TestEngineRefusals(t *testing.T) {
	e := newEngine(t, 1, 0)
	arrive(e, 0, 1) // running
	arrive(e, 0, 2) // queued
	q := arrive(e, 0, 3)
	rd := drain(e)
	require.Equal(t, sched.Rejected, rd.Offers[2].Decision.Outcome)
	require.True(t, rd.Offers[2].Next.Retry)
	require.Equal(t, Backoff, q.State())
	require.Empty(t, rd.Answers)

	big := &Req{Core: sched.Request{ID: 4, Input: 2e6, Output: 10}}
	e.Step(time.Second, Event{Kind: Arrival, Req: big})
	rd = drain(e)
	require.Len(t, rd.Answers, 1)
	require.Equal(t, Refused, rd.Answers[0].Outcome)
	require.Equal(t, sched.ReasonNoRoute, rd.Answers[0].Reason)
	require.NotEmpty(t, rd.Answers[0].Detail)
}

// Hedging is the engine's: a duplicate after hedge_after with no first
// token, none after one; the first token decides the race and the loser
// is cancelled; a failed first attempt takes its duplicate with it; a
// failed duplicate goes alone, and its replica's breaker hears of it.
func TestEngineHedges(t *testing.T) {
	cfg := EngineConfig{Seed: 7, HedgeAfter: time.Second}
	health := sched.Health{Threshold: 1, OpenFor: time.Minute} // one failure opens a breaker
	t.Run("the duplicate wins", func(t *testing.T) {
		e := newEngineWith(t, 10, 2, health, cfg)
		q := arrive(e, 0, 1)
		rd := drain(e)
		require.Equal(t, time.Second, rd.WakeAt, "the hedge's delay, from the start")
		first := rd.Starts[0].Replica
		e.Step(time.Second, Event{Kind: Tick})
		rd = drain(e)
		require.Len(t, rd.Hedges, 1)
		dup := rd.Hedges[0].Replica
		require.NotEqual(t, first, dup)
		e.Step(1500*time.Millisecond, Event{Kind: FirstToken, Req: q, Duplicate: true})
		rd = drain(e)
		require.Equal(t, []Cancel{{Req: q, Leg: FirstLeg, Replica: first, Won: true}}, rd.Cancels)
		require.Equal(t, dup, q.Core.Replica, "the duplicate goes on as the request's attempt")
		require.Zero(t, e.Core().Inflight(first), "the loser's slot is free")
		e.Step(2*time.Second, Event{Kind: Answered, Req: q, Replica: dup})
		rd = drain(e)
		require.Equal(t, Completed, rd.Answers[0].Outcome)
		require.Empty(t, rd.Cancels, "nothing left to cancel")
	})
	t.Run("no duplicate after a first token", func(t *testing.T) {
		e := newEngineWith(t, 10, 2, health, cfg)
		q := arrive(e, 0, 1)
		drain(e)
		e.Step(500*time.Millisecond, Event{Kind: FirstToken, Req: q})
		rd := drain(e)
		require.Equal(t, NoWake, rd.WakeAt, "the hedge is no longer due")
		e.Step(time.Second, Event{Kind: Tick})
		require.False(t, e.HasReady())
	})
	t.Run("a failed first attempt takes its duplicate", func(t *testing.T) {
		e := newEngineWith(t, 10, 2, health, cfg)
		q := arrive(e, 0, 1)
		drain(e)
		e.Step(time.Second, Event{Kind: Tick})
		dup := drain(e).Hedges[0].Replica
		e.Step(1200*time.Millisecond, Event{Kind: AttemptFailed, Req: q, Replica: q.Core.Replica, How: sched.AttemptError, Observed: true})
		rd := drain(e)
		require.Equal(t, []Cancel{{Req: q, Leg: Duplicate, Replica: dup}}, rd.Cancels)
		require.Equal(t, Backoff, q.State(), "retried as after any failed attempt")
		require.Zero(t, e.Core().Inflight(0)+e.Core().Inflight(1))
	})
	t.Run("a failed duplicate goes alone", func(t *testing.T) {
		e := newEngineWith(t, 10, 2, health, cfg)
		q := arrive(e, 0, 1)
		drain(e)
		e.Step(time.Second, Event{Kind: Tick})
		dup := drain(e).Hedges[0].Replica
		require.Equal(t, sched.Closed, e.Core().BreakerView(time.Second, dup))
		e.Step(1200*time.Millisecond, Event{Kind: AttemptFailed, Req: q, Replica: dup, How: sched.AttemptError, Duplicate: true})
		rd := drain(e)
		require.Empty(t, rd.Cancels)
		require.Empty(t, rd.Answers)
		require.Equal(t, Running, q.State(), "the first attempt goes on")
		require.Equal(t, -1, q.Core.Hedge)
		require.Zero(t, e.Core().Inflight(dup))
		require.Equal(t, sched.Open, e.Core().BreakerView(1200*time.Millisecond, dup), "its breaker heard of it")
		require.NotEmpty(t, rd.Transitions)
		// And no second duplicate: one race per attempt.
		e.Step(3*time.Second, Event{Kind: Tick})
		require.Empty(t, drain(e).Hedges)
	})
	t.Run("a request that ends cancels its duplicate", func(t *testing.T) {
		e := newEngineWith(t, 10, 2, health, cfg)
		q := arrive(e, 0, 1)
		drain(e)
		e.Step(time.Second, Event{Kind: Tick})
		dup := drain(e).Hedges[0].Replica
		e.Step(1100*time.Millisecond, Event{Kind: Gone, Req: q, Deadline: true})
		rd := drain(e)
		require.Equal(t, []Cancel{{Req: q, Leg: Duplicate, Replica: dup}}, rd.Cancels)
		require.Equal(t, TimedOut, rd.Answers[0].Outcome)
	})
}
