package sched_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Explain says where a request would go and why the other pools would not
// take it, and reading it changes nothing.
func TestExplain(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("default", []string{"policy.health.threshold=1"})
	require.NoError(t, err)
	cfg, err := compile.CoreConfig(sc)
	require.NoError(t, err)
	c, err := sched.New(cfg)
	require.NoError(t, err)
	idx := func(names []string, name string) int {
		for i, n := range names {
			if n == name {
				return i
			}
		}
		t.Fatalf("no %s", name)
		return -1
	}
	var pools, models, tenants []string
	for _, p := range sc.Pools {
		pools = append(pools, p.Name)
	}
	for _, m := range sc.Models {
		models = append(models, m.Name)
	}
	for _, tn := range sc.Tenants {
		tenants = append(tenants, tn.Name)
	}
	bank, m8, m70 := idx(tenants, "bank-eu"), idx(models, "llama-3.1-8b"), idx(models, "llama-3.1-70b")
	euw8, euw70 := idx(pools, "euw-a100-8b"), idx(pools, "euw-a100-70b")
	now := time.Minute

	rt := c.Explain(now, bank, 0, m8)
	require.Equal(t, m8, rt.Served)
	require.False(t, rt.Fallback)
	require.Equal(t, []int{euw8}, rt.Pools)
	require.Equal(t, []sched.SkipCount{{"outside jurisdiction eu", 1}, {"not serving", 2}}, rt.Skipped)

	// The EU 70B pool's breakers open: bank-eu's 70B requests fall back to
	// 8B in the EU.
	for r, rep := range cfg.Replicas {
		if rep.Pool == euw70 {
			c.Observe(now, r, false)
			require.Len(t, c.Ready().Transitions, 1)
			c.Advance()
			require.Equal(t, sched.Open, c.BreakerView(now, r))
			require.Equal(t, sched.HalfOpen, c.BreakerView(now+time.Hour, r), "open_for elapsed, as the router would find it")
			require.Equal(t, sched.Open, c.BreakerView(now, r), "viewing did not advance it")
		}
	}
	rt = c.Explain(now, bank, 0, m70)
	require.Equal(t, m8, rt.Served)
	require.True(t, rt.Fallback)
	require.Equal(t, []int{euw8}, rt.Pools)
	require.Contains(t, rt.Skipped, sched.SkipCount{"circuit open", 1})

	// The EU 8B pool goes too: nothing can serve bank-eu.
	for r, rep := range cfg.Replicas {
		if rep.Pool == euw8 {
			c.Observe(now, r, false)
		}
	}
	rt = c.Explain(now, bank, 0, m8)
	require.Equal(t, -1, rt.Served)
	require.Empty(t, rt.Pools)
	require.Contains(t, rt.Skipped, sched.SkipCount{"circuit open", 1})
	require.Contains(t, rt.Skipped, sched.SkipCount{"outside jurisdiction eu", 1})
}
