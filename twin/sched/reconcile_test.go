package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReconcileRefundsAndCharges: a request charged its estimate at
// dispatch gets back what it did not use, and pays what it used beyond,
// within the bucket's bounds.
func TestReconcileRefundsAndCharges(t *testing.T) {
	c := fixture(func(cfg *Config) {
		cfg.Tenants[0].TokensPerMinute = 220 // two requests of 110 tokens
		cfg.QueueLimit = 100
	})
	r1, r2 := req(0, 0, 0), req(0, 0, 0)
	require.NotEqual(t, Rejected, c.Arrive(0, r1).Outcome)
	require.NotEqual(t, Rejected, c.Arrive(0, r2).Outcome)
	require.Zero(t, c.TenantTokens(0, 0), "both estimates charged")
	require.Equal(t, ReasonTenantTokens, c.Arrive(0, req(0, 0, 0)).Reason, "the bucket is empty")

	// r1 used 100 + 0 tokens of the 110 charged; r2 all but 10 of its
	// output: 20 back, not enough for another 110.
	c.Reconcile(0, r1, 100, 0)
	c.Reconcile(0, r2, 100, 0)
	require.InDelta(t, 20, c.TenantTokens(0, 0), 1e-9)
	require.Equal(t, ReasonTenantTokens, c.Arrive(0, req(0, 0, 0)).Reason)

	// A request that used nothing gives back its whole charge: room for
	// one more.
	c.Reconcile(0, r1, 0, 0)
	require.InDelta(t, 130, c.TenantTokens(0, 0), 1e-9)
	r3 := req(0, 0, 0)
	require.NotEqual(t, Rejected, c.Arrive(0, r3).Outcome, "admitted again after the refund")
	require.InDelta(t, 20, c.TenantTokens(0, 0), 1e-9)

	// Using more than charged takes the difference, never below zero.
	c.Reconcile(0, r3, 100, 1000)
	require.Zero(t, c.TenantTokens(0, 0))

	// Never above the burst, and refills as before.
	c.Reconcile(time.Minute, r1, 0, 0)
	require.InDelta(t, 220, c.TenantTokens(time.Minute, 0), 1e-9)
}

// TestReconcileLeavesUnlimitedTenantsAlone: no token quota, nothing to do;
// unknown counts change nothing.
func TestReconcileLeavesUnlimitedTenantsAlone(t *testing.T) {
	c := fixture(func(cfg *Config) { cfg.Tenants[1].TokensPerMinute = 220 })
	r := req(0, 0, 0)
	c.Arrive(0, r)
	c.Reconcile(0, r, 0, 0)
	require.Zero(t, c.TenantTokens(0, 0))
	e := req(1, 0, 0)
	c.Arrive(0, e)
	c.Reconcile(0, e, -1, 5)
	require.InDelta(t, 110, c.TenantTokens(0, 1), 1e-9)
}
