package sched

import (
	"slices"
	"time"
)

// Reasons a pool is passed over, as Explain counts them.
const (
	SkipNotServing   = "not serving"
	SkipJurisdiction = "outside jurisdiction"
	SkipCircuitOpen  = "circuit open"
	SkipNotReady     = "not ready"
	SkipQuota        = "provider quota exhausted"
	SkipTooSmall     = "too small for the request's KV"
	SkipQuality      = "below the class's quality floor"
)

// Route is where a tenant's requests of a class for a model would go now,
// and why pools were passed over: the answer to an operator's "why not
// there?".
type Route struct {
	// Served is the model that would serve (the requested one or a
	// fallback), -1 when none can.
	Served   int
	Fallback bool
	// Pools would take the request now (room aside: a full pool queues).
	Pools []int
	// Skipped counts the reasons pools (and fallback models, for the
	// quality floor) were passed over along the route, in first-seen order.
	Skipped []SkipCount
}

// SkipCount is a reason and how often it applied.
type SkipCount struct {
	Reason string
	Count  int
}

// Explain walks the route a request of tenant, class and model would take
// now — the model, then its fallbacks as Arrive tries them — and says
// which pools would take it and why the others would not. It only reads the
// core: breakers and quota buckets are evaluated at now without being
// advanced, so explaining never changes what the core decides.
func (c *Core) Explain(now time.Duration, tenant, class, model int) Route {
	rt := Route{Served: -1}
	add := func(reason string) {
		for i := range rt.Skipped {
			if rt.Skipped[i].Reason == reason {
				rt.Skipped[i].Count++
				return
			}
		}
		rt.Skipped = append(rt.Skipped, SkipCount{reason, 1})
	}
	fallbacks := c.cfg.Models[model].Fallbacks
	if !c.cfg.Fallback {
		fallbacks = nil
	}
	chain := append([]int{model}, fallbacks...)
	if c.retiring != nil && c.retiring[model] && len(fallbacks) > 0 {
		chain = append(slices.Clone(fallbacks), model)
	}
	tj := c.cfg.Tenants[tenant].Jurisdiction
	floor := c.cfg.Classes[class].QualityFloor
	for _, m := range chain {
		if m != model && c.cfg.Models[m].Quality < floor {
			add(SkipQuality)
			continue
		}
		var ok []int
		for pi := range c.cfg.Pools {
			// No request size here: KV fit is a property of one request.
			switch skip := c.poolFits(&c.cfg.Pools[pi], m, tj, -1, 0); skip {
			case SkipJurisdiction:
				add(SkipJurisdiction + " " + tj)
			case "":
				if why := c.poolVerdict(now, pi); why != "" {
					add(why)
					continue
				}
				ok = append(ok, pi)
			default:
				add(skip)
			}
		}
		if len(ok) > 0 {
			rt.Served, rt.Fallback, rt.Pools = m, m != model, ok
			return rt
		}
	}
	return rt
}

// poolVerdict is why pool pi cannot take work now ("" when it can): no
// replica can (the reason of the one expected back first, availability.go),
// or its provider's quota is spent or throttled. It reads state without
// advancing it.
func (c *Core) poolVerdict(now time.Duration, pi int) string {
	why, first := SkipNotReady, noReturn
	for r := range c.replicas {
		if c.cfg.Replicas[r].Pool != pi {
			continue
		}
		w, back := c.availableAt(now, r)
		if w == "" {
			why = ""
			break
		}
		if back < first {
			why, first = w, back
		}
	}
	if why != "" {
		return why
	}
	if c.QuotaSpent(now, pi) {
		return SkipQuota
	}
	return ""
}

// BreakerView is replica r's breaker state as the router would find it at
// now, without advancing it (Breaker advances an open breaker whose time is
// up to half-open).
func (c *Core) BreakerView(now time.Duration, r int) BreakerState {
	b := c.replicas[r].br
	if b.state == Open && now-b.openedAt >= c.health.OpenFor {
		return HalfOpen
	}
	return b.state
}

// Ready reports whether replica r is ready (not loading or down).
func (c *Core) ReplicaReady(r int) bool { return c.replicas[r].ready }
