package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// availFixture: one model on two pools of one replica each.
func availFixture(t *testing.T) *Core {
	t.Helper()
	c, err := New(Config{
		Tenants: []Tenant{{Name: "any", Weight: 1}},
		Classes: []Class{{Name: "interactive", Priority: 1}},
		Models:  []Model{{Name: "m"}},
		Pools: []Pool{
			{Name: "a", PricePerHour: 1, Serves: []bool{true}, KVTokens: []int64{1e6}},
			{Name: "b", PricePerHour: 1, Serves: []bool{true}, KVTokens: []int64{1e6}},
		},
		Replicas: []Replica{{Pool: 0, MaxBatch: 2}, {Pool: 1, MaxBatch: 2}},
		Policy:   "fifo", QueueLimit: 10, Strategy: "least-loaded",
	})
	require.NoError(t, err)
	return c
}

// Routing, deadline feasibility and Explain judge a replica the same way:
// each state has one reason and one expected return, whoever asks.
func TestOneAvailabilityJudgement(t *testing.T) {
	const now = 10 * time.Minute
	openFor := availFixture(t).health.OpenFor
	for _, tc := range []struct {
		name     string
		set      func(rs *replicaState)
		why      string
		back     time.Duration
		groupUp  bool // a closed breaker that routing would use proves the group up
		groupWhy string
	}{
		{"closed and ready", func(*replicaState) {}, "", now, true, ""},
		{"loading", func(rs *replicaState) { rs.ready = false }, SkipNotReady, noReturn, false, ReasonUnavailable},
		{"not provisioned", func(rs *replicaState) { rs.absent = true }, SkipNotReady, noReturn, false, ReasonUnavailable},
		{"ejected, breaker closed", func(rs *replicaState) { rs.out.ejected, rs.out.until = true, now+30*time.Second },
			SkipEjected, now + 30*time.Second, false, ReasonUnavailable},
		{"ejection over, not yet returned", func(rs *replicaState) { rs.out.ejected, rs.out.until = true, now-time.Second },
			"", now, true, ""},
		{"breaker open", func(rs *replicaState) { rs.br.state, rs.br.openedAt = Open, now-time.Second },
			SkipCircuitOpen, now - time.Second + openFor, false, ReasonUnavailable},
		{"breaker open, its time up", func(rs *replicaState) { rs.br.state, rs.br.openedAt = Open, now-openFor },
			"", now, false, ReasonUnavailable},
		{"half-open, trial in flight", func(rs *replicaState) { rs.br.state, rs.br.trial = HalfOpen, true },
			SkipTrial, now, false, ReasonUnavailable},
	} {
		c := availFixture(t)
		c.replicas[1].absent = true // pool b: nobody, so the group's answer is pool a's
		tc.set(&c.replicas[0])
		why, back := c.availableAt(now, 0)
		require.Equal(t, tc.why, why, tc.name)
		require.Equal(t, tc.back, back, tc.name)
		require.Equal(t, tc.why, c.poolVerdict(now, 0), "%s: Explain's verdict on the pool", tc.name)
		_, _, gwhy := c.groupBack(now, c.replicas[0].group)
		require.Equal(t, tc.groupWhy, gwhy, "%s: deadline feasibility", tc.name)
		require.Equal(t, tc.groupUp, !c.feas[c.replicas[0].group].down, tc.name)
	}
}

// Explain names an ejected replica's pool, which routing passes over; it
// used to call the pool able to take work.
func TestExplainNamesEjection(t *testing.T) {
	c := availFixture(t)
	c.replicas[0].out.ejected, c.replicas[0].out.until = true, 2*time.Minute
	rt := c.Explain(time.Minute, 0, 0, 0)
	require.Equal(t, []int{1}, rt.Pools)
	require.Equal(t, []SkipCount{{SkipEjected, 1}}, rt.Skipped)
	rt = c.Explain(3*time.Minute, 0, 0, 0)
	require.Equal(t, []int{0, 1}, rt.Pools, "the ejection is over by then")
}

// A pool is judged by the replica expected back first.
func TestPoolVerdictNamesTheFirstBack(t *testing.T) {
	c := availFixture(t)
	c.cfg.Replicas[1].Pool = 0 // both replicas in pool a (the view reads the pool from cfg)
	const now = time.Minute
	c.replicas[0].ready = false
	c.replicas[1].out.ejected, c.replicas[1].out.until = true, now+time.Second
	require.Equal(t, SkipEjected, c.poolVerdict(now, 0))
	c.replicas[1].out.ejected = false
	c.replicas[1].br.state, c.replicas[1].br.openedAt = Open, now
	require.Equal(t, SkipCircuitOpen, c.poolVerdict(now, 0))
}
