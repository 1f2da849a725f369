package reqengine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// newDisaggEngine: a decode pool of one replica fed by a prefill pool of
// one, always disaggregated; recompute is the decode pool's policy.
func newDisaggEngine(t *testing.T, recompute bool) *Engine {
	t.Helper()
	c, err := sched.New(sched.Config{
		Health:  sched.Health{Threshold: 1, OpenFor: time.Minute},
		Tenants: []sched.Tenant{{Name: "any", Weight: 1}},
		Classes: []sched.Class{{Name: "interactive", Priority: 1}},
		Models:  []sched.Model{{Name: "m", Disagg: &sched.Disagg{Mode: sched.DisaggAlways}}},
		Pools: []sched.Pool{
			{Name: "decode", Serves: []bool{true}, KVTokens: []int64{1e6}, PrefillPools: []int{1}, KVRecompute: recompute},
			{Name: "prefill", Serves: []bool{false}, KVTokens: []int64{1e6}, Prefill: true},
		},
		Replicas: []sched.Replica{{Pool: 0, MaxBatch: 4}, {Pool: 1, MaxBatch: 1}},
		Policy:   "fifo", QueueLimit: 10, Strategy: "least-loaded",
	})
	require.NoError(t, err)
	lc := sched.NewLifecycle(sched.RetryPolicy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: 8 * time.Second, Budget: 1}, true)
	return NewEngine(c, lc, nil, EngineConfig{Seed: 7})
}

// Prefilled frees the prefill replica for the next prompt: the second
// request, waiting for it, starts; a stale Prefilled (another replica, or
// after the attempt ended) changes nothing.
func TestEnginePrefilledFreesThePrefillReplica(t *testing.T) {
	e := newDisaggEngine(t, false)
	a := arrive(e, 0, 1)
	b := arrive(e, 0, 2)
	rd := drain(e)
	require.Len(t, rd.Starts, 1)
	require.Equal(t, 1, a.Core.Prefilling())
	require.Equal(t, Held, b.State(), "the prefill replica takes one prompt at a time")

	e.Step(time.Second, Event{Kind: Prefilled, Req: a, Replica: 0}) // not its prefill replica
	require.Empty(t, drain(e).Starts)
	e.Step(time.Second, Event{Kind: Prefilled, Req: a, Replica: 1})
	rd = drain(e)
	require.Len(t, rd.Starts, 1)
	require.Same(t, &b.Core, rd.Starts[0].Req)
	require.Equal(t, -1, a.Core.Prefilling())
	require.Equal(t, 1, b.Core.Prefilling())
	require.Equal(t, sched.Closed, e.core.Breaker(time.Second, 1))
}

// TransferFailed: the decode pool's policy decides. fail: the attempt
// fails on the decode replica (its breaker hears of it) and is retried;
// recompute: the decode replica prefills it, the attempt goes on.
func TestEngineTransferFailedPolicies(t *testing.T) {
	e := newDisaggEngine(t, false)
	a := arrive(e, 0, 1)
	drain(e)
	e.Step(time.Second, Event{Kind: Prefilled, Req: a, Replica: 1})
	drain(e)
	e.Step(2*time.Second, Event{Kind: TransferFailed, Req: a})
	rd := drain(e)
	require.Empty(t, rd.Recomputes)
	require.Equal(t, Backoff, a.State(), "its attempt failed: it waits for its retry")
	require.Equal(t, sched.Open, e.core.Breaker(2*time.Second, 0), "an error on the decode replica")

	e = newDisaggEngine(t, true)
	a = arrive(e, 0, 1)
	drain(e)
	e.Step(time.Second, Event{Kind: Prefilled, Req: a, Replica: 1})
	drain(e)
	e.Step(2*time.Second, Event{Kind: TransferFailed, Req: a})
	rd = drain(e)
	require.Equal(t, []*Req{a}, rd.Recomputes)
	require.Equal(t, Running, a.State())
	require.Equal(t, sched.Closed, e.core.Breaker(2*time.Second, 0))
	e.Step(3*time.Second, Event{Kind: TransferFailed, Req: a})
	require.Len(t, drain(e).Recomputes, 1, "a second failure of a running attempt recomputes again")
}
