package sched

import "time"

// Reconcile charges req's tenant what the request actually used once its
// backend has said so (OpenAI's usage: prompt and completion tokens),
// instead of the estimate charged at dispatch (req.Input + req.Output):
// the difference goes back into the tenant's token bucket when it used
// fewer, and is taken from it when it used more. Both sides are capped at
// the bucket's burst, as chargeTokens caps a charge, and the bucket never
// goes below zero nor above its burst: a tenant is never charged beyond
// its quota for one request, and an under-estimate is paid for by the
// tenant's next requests waiting longer. Tokens borrowed from cohort peers
// at dispatch are not returned to them (a refund goes to the tenant's own
// bucket). A tenant without a token quota, a request never charged (not
// admitted) or negative counts (an upstream that did not say) are left
// alone. It changes no other state and produces no output.
func (c *Core) Reconcile(now time.Duration, req *Request, actualIn, actualOut int) {
	if req.Tenant < 0 || req.Tenant >= len(c.cfg.Tenants) || actualIn < 0 || actualOut < 0 {
		return
	}
	t := &c.cfg.Tenants[req.Tenant]
	if t.TokensPerMinute == 0 {
		return
	}
	charged := min(float64(req.Input+req.Output), t.TokensPerMinute)
	used := min(float64(actualIn+actualOut), t.TokensPerMinute)
	c.refillTenant(now, req.Tenant)
	ts := &c.tenants[req.Tenant]
	ts.tokens = min(t.TokensPerMinute, max(0, ts.tokens+charged-used))
}

// TenantTokens is the level of tenant i's token bucket at now (refilled):
// the tokens it may still be charged at once; 0 for a tenant without a
// token quota (unlimited).
func (c *Core) TenantTokens(now time.Duration, i int) float64 {
	if c.cfg.Tenants[i].TokensPerMinute == 0 {
		return 0
	}
	c.refillTenant(now, i)
	return c.tenants[i].tokens
}
