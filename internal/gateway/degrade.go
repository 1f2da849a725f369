package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// The degradation ladder, live. Its rule, its cadence, what feeds it and
// its judgement of a request are the request engine's (reqengine.Ladder);
// the engine runs its evaluations at its wake-ups, and the gateway logs its
// moves and carries the engaged rungs out on each new request before its
// first offer to the core:
//
//   - shed-batch and defer-async: a request of a deferrable class waits
//     Config.DeferFor (model time) and is looked at again, while its class
//     stays shed; any other is refused, 429 load-shed;
//   - cap-output: the request's output estimate and the max_tokens (or
//     max_completion_tokens) sent upstream are capped;
//   - smaller-model: the request is for the model's first fallback, and
//     its body says so;
//   - cached-answers cannot run live: the gateway has no answer cache, so
//     New refuses a ladder with such a rung rather than drop it.

// checkLadder refuses what of the scenario's ladder cannot run live.
func checkLadder(cfg sched.Config) error {
	var errs []error
	for i, r := range cfg.Ladder {
		if r.Action == sched.CachedAnswers {
			errs = append(errs, fmt.Errorf("policy.degradation[%d] (%s): %s cannot run live: the gateway has no answer cache; drop the rung to run the scenario through the gateway",
				i, r.Name, r.Action))
		}
	}
	return errors.Join(errs...)
}

// laddered logs and reports a move of the ladder.
func (g *Gateway) laddered(now time.Duration, ch sched.LadderChange) {
	r := g.ladder.Rungs()[ch.Rung]
	g.log.Info("degradation", "step", r.Name, "action", r.Action, "engaged", ch.Engaged,
		"steps_engaged", g.ladder.Engaged(), "detail", ch.Detail)
	if g.obs.Ladder != nil {
		g.obs.Ladder(now, ch)
	}
}

// Ladder calls fn with the degradation ladder, under the gateway's lock:
// for a console (twin.LadderView); not at all without policy.degradation.
// fn must only read.
func (g *Gateway) Ladder(fn func(l *sched.Ladder)) {
	if g.ladder == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g.ladder.Ladder)
}

// judged carries out the ladder's verdict on q (the engine judged it
// before its first offer, or back from the ladder's deferral, and applied
// its effect to q's core request): it is counted, and a capped output or
// a substituted model is written into the body sent upstream. A shed
// comes back as the engine's answer, a deferral as its offer later.
func (g *Gateway) judged(q *request, j reqengine.Judged) {
	switch j.Next.Action {
	case sched.Refuse:
		g.metrics.degraded.WithLabelValues(degradedShed).Inc()
	case sched.Reoffer:
		if !j.Again {
			g.metrics.degraded.WithLabelValues(degradedShed).Inc()
		}
		// A deferral, as the core's: X-Fleetdrill-Deferrals and the
		// attempts count it (Life.Offers, Life.AllDeferrals).
		g.metrics.deferrals.WithLabelValues(q.tenant, q.class, j.Next.Reason).Inc()
	case sched.OfferNow:
		e := j.Effect
		if e.Capped {
			g.metrics.degraded.WithLabelValues(degradedCapped).Inc()
		}
		if e.Substituted {
			g.metrics.degraded.WithLabelValues(degradedSubstituted).Inc()
			// Counted under the model it now asks for.
			q.model = g.sc.Models[e.Model].Name
		}
		if e.Capped || e.Substituted {
			q.body = degradedBody(q.body, q.model, e.Capped, e.Output)
		}
	}
}

// degradedBody returns body with its "model" set to model and, when
// capped, its output limit to output: max_tokens and max_completion_tokens
// where present, max_tokens when neither is (the gateway's estimate was
// then its default, and the backend's would be larger).
func degradedBody(body []byte, model string, capped bool, output int) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return body
	}
	m["model"], _ = json.Marshal(model)
	if capped {
		n, _ := json.Marshal(output)
		_, mt := m["max_tokens"]
		_, mct := m["max_completion_tokens"]
		if mct {
			m["max_completion_tokens"] = n
		}
		if mt || !mct {
			m["max_tokens"] = n
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}
