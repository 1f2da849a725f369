package reqengine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// hedged returns a core with req running on one replica and its duplicate
// on the other.
func hedged(t *testing.T) (*sched.Core, *sched.Request) {
	t.Helper()
	c, err := sched.New(sched.Config{
		Tenants:  []sched.Tenant{{Name: "any", Weight: 1}},
		Classes:  []sched.Class{{Name: "interactive", Priority: 1}},
		Models:   []sched.Model{{Name: "m"}},
		Pools:    []sched.Pool{{Name: "a", PricePerHour: 1, Serves: []bool{true}, KVTokens: []int64{1e6}}},
		Replicas: []sched.Replica{{Pool: 0, MaxBatch: 1}, {Pool: 0, MaxBatch: 1}},
		Policy:   "fifo", QueueLimit: 10, Strategy: "least-loaded",
	})
	require.NoError(t, err)
	req := &sched.Request{ID: 1, Input: 10, Output: 10}
	require.Equal(t, sched.Dispatched, c.Arrive(0, req).Outcome)
	h := c.Hedge(time.Second, req)
	require.GreaterOrEqual(t, h, 0)
	require.NotEqual(t, req.Replica, h)
	return c, req
}

// How a race ends, the same for both drivers.
func TestSettleHedge(t *testing.T) {
	for _, tc := range []struct {
		end  RaceEnd
		want Settlement
	}{
		{FirstAnswered, Settlement{Cancel: Duplicate}},
		{DuplicateAnswered, Settlement{Cancel: FirstLeg, Keep: true, Won: true}},
		{FirstFailed, Settlement{Cancel: Duplicate}},
		{DuplicateFailed, Settlement{ReportFailure: true}},
		{DuplicateLost, Settlement{Cancel: Duplicate}},
	} {
		c, req := hedged(t)
		first, dup := req.Replica, req.Hedge
		var before *Settlement
		s := SettleHedge(2*time.Second, c, req, tc.end, func(s Settlement) {
			before = &s
			// The driver's part comes first: both slots still held.
			require.Equal(t, 1, c.Inflight(first))
			require.Equal(t, 1, c.Inflight(dup))
		})
		require.Equal(t, tc.want, s, "end %d", tc.end)
		require.NotNil(t, before)
		require.Equal(t, tc.want, *before)
		require.Equal(t, -1, req.Hedge, "the race is over")
		winner, loser := first, dup
		if tc.want.Keep {
			winner, loser = dup, first
		}
		require.Equal(t, winner, req.Replica, "end %d: the request's attempt", tc.end)
		require.Equal(t, 0, c.Inflight(loser), "end %d: the loser's slot is freed", tc.end)

		// Once over, a late result of the other attempt settles nothing.
		again := SettleHedge(3*time.Second, c, req, FirstAnswered, func(Settlement) { t.Fatal("no race to settle") })
		require.Equal(t, Settlement{}, again)
	}
}
