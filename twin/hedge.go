package twin

import (
	"github.com/fleetdrill/fleetdrill/twin/engine"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
)

// Hedged requests (routing.hedge_after): how a race ends is the request
// engine's (reqengine.SettleHedge, the gateway's too); the twin runs the
// duplicate as a second engine sequence and cancels the loser's. The
// duplicate costs a replica slot and its prefill: the report counts what
// was sent and won.

// HedgeReport counts hedged duplicates.
type HedgeReport struct {
	Sent uint64 `json:"sent"`
	Won  uint64 `json:"won"` // the duplicate answered first
}

type hedgeResult struct {
	req      *request
	hedgeWon bool
}

// hedge sends req's duplicate, if it still has no first token.
func (r *runner) hedge(req *request) {
	if req.state != stRunning || req.firstAt != 0 || req.hedgeSeq != nil {
		return
	}
	now := r.s.Now()
	h := r.core.Hedge(now, &req.Core)
	if h < 0 {
		return
	}
	if r.faultState != nil {
		if fate := r.faultAtDispatch(req, h); fate.fail || r.replicas[h].eng == nil {
			// The duplicate went to a failing replica: it is lost, and
			// the gateway hears of the failure (or of the 429).
			reqengine.SettleHedge(now, r.core, &req.Core, reqengine.DuplicateFailed, func(reqengine.Settlement) {
				if fate.throttle > 0 {
					r.throttled(h, fate.throttle)
				} else {
					r.core.Observe(now, h, false)
				}
			})
			r.dispatch()
			return
		}
	}
	if r.replicas[h].eng == nil {
		reqengine.SettleHedge(now, r.core, &req.Core, reqengine.DuplicateLost, nil)
		r.dispatch()
		return
	}
	hs := r.newSeq()
	*hs = engine.Seq{Tag: req.idx, Prompt: req.seq.Prompt, Output: req.seq.Output, Blocks: req.seq.Blocks}
	req.hedgeSeq, req.hedgeAt = hs, h
	if req.measured {
		r.hedges.Sent++
	}
	r.replicas[h].eng.Add(now, hs)
	r.rearm(h)
}

// settleHedge ends a hedge race decided by a first token: the loser is
// cancelled (reqengine.SettleHedge).
func (r *runner) settleHedge(req *request, hedgeWon bool) {
	if req.hedgeSeq == nil || req.state != stRunning {
		return
	}
	end := reqengine.FirstAnswered
	if hedgeWon {
		end = reqengine.DuplicateAnswered
	}
	primary := req.Core.Replica
	reqengine.SettleHedge(r.s.Now(), r.core, &req.Core, end, func(s reqengine.Settlement) {
		if s.Won && req.measured {
			r.hedges.Won++
		}
		r.cancelLeg(req, primary, s.Cancel)
	})
	r.dispatch()
}

// cancelLeg cancels one attempt of req's hedge race (the first on replica
// primary, or the duplicate); a cancelled first leaves the duplicate as the
// request's attempt.
func (r *runner) cancelLeg(req *request, primary int, leg reqengine.Leg) {
	switch leg {
	case reqengine.FirstLeg:
		r.cancelSeq(primary, req.seq)
		req.seq, req.hedgeSeq = req.hedgeSeq, nil
	case reqengine.Duplicate:
		r.cancelSeq(req.hedgeAt, req.hedgeSeq)
		req.hedgeSeq = nil
	}
}

// dropHedge cancels a finishing request's duplicate, if any.
func (r *runner) dropHedge(req *request) {
	req.hedgeTimer.Stop()
	if req.hedgeSeq != nil {
		r.cancelLeg(req, req.Core.Replica, reqengine.Duplicate)
	}
}

// cancelSeq cancels a sequence that no request will own any more: the
// engine drops it (Dropped recycles it), or, if it was only waiting, it is
// recycled at once.
func (r *runner) cancelSeq(ri int, s *engine.Seq) {
	eng := r.replicas[ri].eng
	if eng == nil {
		return
	}
	eng.Cancel(r.s.Now(), s)
	if !s.Held() {
		r.freeSeq(s)
	}
	r.rearm(ri)
}
