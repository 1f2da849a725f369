package reqengine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// A restarted replica is out of routing for its cold start and back after
// it; a second restart during the load keeps the first; one busy for the
// driver's reason is not restarted; one something else holds stays out.
func TestRestartsLoadForTheColdStart(t *testing.T) {
	c, err := sched.New(sched.Config{
		Tenants:  []sched.Tenant{{Name: "any", Weight: 1}},
		Classes:  []sched.Class{{Name: "interactive", Priority: 1}},
		Models:   []sched.Model{{Name: "m"}},
		Pools:    []sched.Pool{{Name: "a", PricePerHour: 1, Serves: []bool{true}, KVTokens: []int64{1e6}}},
		Replicas: []sched.Replica{{Pool: 0, MaxBatch: 1}, {Pool: 0, MaxBatch: 1}, {Pool: 0, MaxBatch: 1}},
		Policy:   "fifo", QueueLimit: 10, Strategy: "least-loaded",
	})
	require.NoError(t, err)
	rs := NewRestarts(3)
	require.Zero(t, rs.NextAt(), "nothing loads")

	require.True(t, rs.Restart(10*time.Second, c, 0, false, 2*time.Minute))
	require.False(t, c.ReplicaReady(0), "out of routing while it loads")
	require.True(t, rs.Loading(0))
	require.False(t, rs.Restart(20*time.Second, c, 0, false, 2*time.Minute), "a restart during the load keeps the first")
	require.Equal(t, 130*time.Second, rs.NextAt())
	require.False(t, rs.Restart(20*time.Second, c, 1, true, 2*time.Minute), "busy for the driver's reason: not restarted")
	require.True(t, c.ReplicaReady(1))
	require.True(t, rs.Restart(30*time.Second, c, 2, false, time.Minute))
	require.Equal(t, 90*time.Second, rs.NextAt(), "the sooner load")

	require.Empty(t, rs.Loaded(89*time.Second, c, nil), "not yet")
	require.Equal(t, []int{2}, rs.Loaded(90*time.Second, c, func(int) bool { return false }))
	require.False(t, c.ReplicaReady(2), "loaded, but held by something else")
	require.Equal(t, []int{0}, rs.Loaded(130*time.Second, c, nil))
	require.True(t, c.ReplicaReady(0), "routable again")
	require.False(t, rs.Loading(0))
	require.Zero(t, rs.NextAt())
}

// Through the engine: a restart taken is in Ready.Restarted, its load's
// end is the engine's wake-up and in Ready.Loaded; a replica the driver
// holds (Holds) or that loads for its own reason (Busy) stays as it is.
func TestEngineRestarts(t *testing.T) {
	held := map[int]bool{2: true}
	e := newEngineWith(t, 10, 3, sched.Health{}, EngineConfig{Restarts: NewRestarts(3), Holds: func(r int) bool { return held[r] }})
	require.Equal(t, NoWake, e.WakeAt())
	e.Step(time.Second, Event{Kind: Restart, Replica: 0, After: time.Minute})
	e.Step(time.Second, Event{Kind: Restart, Replica: 1, After: time.Minute, Busy: true})
	e.Step(time.Second, Event{Kind: Restart, Replica: 2, After: 30 * time.Second})
	rd := drain(e)
	require.Equal(t, []int{0, 2}, rd.Restarted, "the busy replica's first load stands")
	require.Equal(t, 31*time.Second, rd.WakeAt, "the sooner load's end")
	require.False(t, e.Core().ReplicaReady(0))
	e.Step(2*time.Second, Event{Kind: Restart, Replica: 0, After: time.Minute})
	require.Empty(t, drain(e).Restarted, "a restart during the load keeps the first")

	e.Step(31*time.Second, Event{Kind: Tick})
	rd = drain(e)
	require.Equal(t, []int{2}, rd.Loaded)
	require.False(t, e.Core().ReplicaReady(2), "loaded, but the driver holds it")
	require.Equal(t, 61*time.Second, rd.WakeAt)
	e.Step(61*time.Second, Event{Kind: Tick})
	rd = drain(e)
	require.Equal(t, []int{0}, rd.Loaded)
	require.True(t, e.Core().ReplicaReady(0), "routable again")
	require.Equal(t, NoWake, rd.WakeAt)
}
