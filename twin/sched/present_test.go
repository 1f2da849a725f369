package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An autoscaled pool's replicas beyond those provisioned are configured
// absent: the core routes nothing to them and does not count them, until
// the driver provisions one and it has loaded; releasing one drains it.
func TestPresentReplicas(t *testing.T) {
	// Model big: replica 1 present, replica 3 (pool us) absent.
	c := fixture(func(cfg *Config) {
		cfg.QueueLimit = 8
		cfg.Replicas = append(cfg.Replicas, Replica{Pool: 0, Model: 1, MaxBatch: 2, Absent: true})
	})
	require.False(t, c.Present(3))
	require.False(t, c.ReplicaReady(3), "an absent replica has not loaded")
	require.Equal(t, 0.0, c.Saturation(), "three present replicas, all with room")

	var reqs []*Request
	for range 4 {
		r := req(0, 0, 1)
		reqs = append(reqs, r)
		c.Arrive(0, r)
	}
	rd := take(c)
	require.Len(t, rd.Dispatches, 2, "only the present replica takes work")
	for _, d := range rd.Dispatches {
		require.Equal(t, 1, d.Replica)
	}
	require.InDelta(t, 1.0/3, c.Saturation(), 1e-9, "the absent replica is not counted")

	// Provisioned, it still loads: nothing yet.
	c.SetPresent(time.Second, 3, true)
	require.Empty(t, take(c).Dispatches)
	require.InDelta(t, 2.0/4, c.Saturation(), 1e-9, "present and loading: counted, without room")
	// Loaded: the queue drains to it.
	c.SetReady(2*time.Second, 3, true)
	rd = take(c)
	require.Len(t, rd.Dispatches, 2)
	for _, d := range rd.Dispatches {
		require.Equal(t, 3, d.Replica)
	}

	// Released: it takes nothing new, and finishes what it has.
	c.SetPresent(3*time.Second, 3, false)
	require.Equal(t, 2, c.Inflight(3))
	c.Finish(4*time.Second, reqs[2])
	c.Arrive(4*time.Second, req(0, 0, 1))
	require.Empty(t, take(c).Dispatches, "replica 1 is full and 3 draining")
	c.Finish(5*time.Second, reqs[0])
	rd = take(c)
	require.Len(t, rd.Dispatches, 1)
	require.Equal(t, 1, rd.Dispatches[0].Replica)
}

// PoolBusy integrates a pool's requests in flight over time: the
// autoscaler's utilization is its difference over a sync period.
func TestPoolBusy(t *testing.T) {
	c := fixture(nil)
	a, b := req(0, 0, 1), req(0, 0, 1)
	c.Arrive(0, a)
	c.Arrive(0, b)
	take(c)
	require.Equal(t, 0.0, c.PoolBusy(0, 0))
	c.Finish(time.Second, a)
	require.InDelta(t, 2.0, c.PoolBusy(time.Second, 0), 1e-9, "two slots for 1 s")
	require.InDelta(t, 3.0, c.PoolBusy(2*time.Second, 0), 1e-9, "then one for 1 s")
	require.Equal(t, 0.0, c.PoolBusy(2*time.Second, 1), "the other pool was idle")
}
