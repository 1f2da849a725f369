package sched

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// LimitContext lowers a pool's largest request to what its servers take,
// never raises it, leaves the caller's configuration alone, and every
// check of size reads it: a request over the lowered limit goes to a pool
// that takes it, and when none does, is refused for its size alone
// (TooLarge names the lowered limit).
func TestLimitContext(t *testing.T) {
	var cfg Config
	c := fixture(func(c *Config) { cfg = *c })
	require.Equal(t, int64(1024), c.LimitContext(0, 0, 1024), "lowered")
	require.Equal(t, int64(1024), c.LimitContext(0, 0, 4096), "never raised")
	require.Equal(t, int64(1024), c.LimitContext(0, 0, 0), "no limit published: unchanged")
	require.Zero(t, c.LimitContext(5, 0, 10), "no such pool")
	require.Equal(t, int64(1e6), cfg.Pools[0].KVTokens[0], "the caller's configuration is its own")

	// Tenant "any" may be served by both pools: a 2,000-token request
	// goes to eu, which takes it.
	r := req(0, 0, 0)
	r.Input = 2000
	_, tooLarge := c.TooLarge(r)
	require.False(t, tooLarge)
	d := c.Arrive(0, r)
	require.Equal(t, Dispatched, d.Outcome, "%+v", d)
	require.Equal(t, 1, c.cfg.Replicas[r.Replica].Pool, "the pool that takes it")

	// With eu's servers limited too, no pool takes it: a refusal for its
	// size, naming the largest limit left.
	c.LimitContext(1, 0, 1500)
	r = req(0, 0, 0)
	r.Input = 2000
	limit, tooLarge := c.TooLarge(r)
	require.True(t, tooLarge)
	require.Equal(t, int64(1500), limit)
	require.Equal(t, ReasonNoRoute, c.Arrive(0, r).Reason)
}
