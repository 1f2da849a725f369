package reqengine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// newDisaggEngine: a decode pool of one replica fed by a prefill pool of
// one, always disaggregated.
func newDisaggEngine(t *testing.T) *Engine {
	t.Helper()
	c, err := sched.New(sched.Config{
		Health:  sched.Health{Threshold: 1, OpenFor: time.Minute},
		Tenants: []sched.Tenant{{Name: "any", Weight: 1}},
		Classes: []sched.Class{{Name: "interactive", Priority: 1}},
		Models:  []sched.Model{{Name: "m", Disagg: &sched.Disagg{Mode: sched.DisaggAlways}}},
		Pools: []sched.Pool{
			{Name: "decode", Serves: []bool{true}, KVTokens: []int64{1e6}, PrefillPools: []int{1}},
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
	e := newDisaggEngine(t)
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
