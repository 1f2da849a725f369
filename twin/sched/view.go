package sched

import "time"

// QuotaSpent reports whether pool pi's provider quota (requests or tokens
// per minute) is spent at now, or its provider is throttling it: too little left in either bucket for one more
// request, the state in which Explain skips the pool for
// "provider quota exhausted". Like Explain it only reads the core: the
// buckets are refilled on a copy, so asking never changes what the core
// decides. A pool without a quota never has it spent.
func (c *Core) QuotaSpent(now time.Duration, pi int) bool {
	if now < c.pools[pi].throttledUntil {
		return true // the provider said so (see Throttled)
	}
	p := &c.cfg.Pools[pi]
	if p.RequestsPerMinute == 0 && p.TokensPerMinute == 0 {
		return false
	}
	// Spent for any request: less than one request, or one token, left
	// (dispatch asks for the request's own tokens, which a view has not).
	req, tok := c.poolBuckets(now, pi)
	return (p.RequestsPerMinute > 0 && req < 1) || (p.TokensPerMinute > 0 && tok < 1)
}
