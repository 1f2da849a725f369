package sched

import "time"

// QuotaSpent reports whether pool pi's provider quota (requests or tokens
// per minute) is spent at now: too little left in either bucket for one more
// request, the state in which Explain skips the pool for
// "provider quota exhausted". Like Explain it only reads the core: the
// buckets are refilled on a copy, so asking never changes what the core
// decides. A pool without a quota never has it spent.
func (c *Core) QuotaSpent(now time.Duration, pi int) bool {
	p := &c.cfg.Pools[pi]
	if p.RequestsPerMinute == 0 && p.TokensPerMinute == 0 {
		return false
	}
	ps := &c.pools[pi]
	req, tok := ps.reqTokens, ps.tokTokens
	if now > ps.last {
		dt := (now - ps.last).Seconds()
		req = min(p.RequestsPerMinute, req+p.RequestsPerMinute/60*dt)
		tok = min(p.TokensPerMinute, tok+p.TokensPerMinute/60*dt)
	}
	return (p.RequestsPerMinute > 0 && req < 1) || (p.TokensPerMinute > 0 && tok < 1)
}
