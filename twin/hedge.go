package twin

import (
	"time"

	"github.com/fleetdrill/fleetdrill/twin/engine"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Hedged requests (routing.hedge_after): when a duplicate is sent and how
// a race ends are the request engine's (reqengine.Engine, the gateway's
// too); the twin runs the duplicate as a second engine sequence, steps the
// first tokens and cancels the loser's sequence. The
// duplicate costs a replica slot and its prefill: the report counts what
// was sent and won.

// HedgeReport counts hedged duplicates.
type HedgeReport struct {
	Sent uint64 `json:"sent"`
	Won  uint64 `json:"won"` // the duplicate answered first
}

// firstToken is a first token produced during an engine's step, stepped
// to the request engine after it (see advance): a hedge race is decided
// there.
type firstToken struct {
	req       *request
	duplicate bool
}

// startHedge starts the duplicate the request engine sent (Ready.Hedges)
// on its replica, meeting that replica's faults as any attempt does: it
// fails, or starts after the injected latency, as the primary would.
func (r *runner) startHedge(x sched.Dispatch) {
	req := r.owner(x.Req)
	h := x.Replica
	var delay time.Duration
	if r.faultState != nil {
		fate := r.faultAtDispatch(req, h)
		delay = fate.delay
		if fate.fail {
			// The duplicate went to a failing replica: it is lost, and
			// the core hears of the failure (a 429 as any attempt's).
			how := sched.AttemptError
			if fate.throttle > 0 {
				how = sched.AttemptThrottled
				r.throttled(h, fate.throttle)
			}
			r.step(reqengine.Event{Kind: reqengine.AttemptFailed, Req: &req.Req, Replica: h, How: how, Duplicate: true, Observed: true})
			return
		}
	}
	if r.replicas[h].eng == nil {
		// A service-time replica runs one request at a time: no room
		// for a duplicate.
		r.step(reqengine.Event{Kind: reqengine.DuplicateGone, Req: &req.Req})
		return
	}
	if req.measured {
		r.hedges.Sent++
	}
	req.hedgeAt = h
	if delay > 0 {
		// Sent, and slowed on its way as any attempt to the replica is
		// (the gateway's fault layer holds it as long).
		req.hedgeStart = r.s.After(delay, func() { r.runHedge(req, h) })
		return
	}
	r.runHedge(req, h)
}

// runHedge starts req's duplicate on replica h, unless its race ended
// meanwhile.
func (r *runner) runHedge(req *request, h int) {
	if req.Core.Hedge != h || req.hedgeSeq != nil {
		return
	}
	hs := r.newSeq()
	*hs = engine.Seq{Tag: req.idx, Prompt: req.seq.Prompt, Output: req.seq.Output, Blocks: req.seq.Blocks}
	req.hedgeSeq = hs
	r.replicas[h].eng.Add(r.s.Now(), hs)
	r.rearm(h)
}

// cancelled stops the attempt of a hedge race the request engine
// cancelled (Ready.Cancels): the first attempt (the duplicate goes on as
// the request's, and won), or the duplicate.
func (r *runner) cancelled(c reqengine.Cancel) {
	req := r.owner(&c.Req.Core)
	switch c.Leg {
	case reqengine.CopyLeg:
		r.stopCopy(req, c.Replica)
	case reqengine.FirstLeg:
		if c.Won && req.measured {
			r.hedges.Won++
		}
		if req.state == stFailing {
			// Its failure was on the way: the duplicate answered first.
			req.attemptTimer.Stop()
			req.state = stRunning
		}
		r.pd.abort(req, false)
		r.cancelSeq(c.Replica, req.seq)
		req.seq, req.hedgeSeq = req.hedgeSeq, nil
	case reqengine.Duplicate:
		req.hedgeStart.Stop()
		if req.hedgeSeq != nil {
			r.cancelSeq(req.hedgeAt, req.hedgeSeq)
			req.hedgeSeq = nil
		}
	}
}

// dropHedge cancels a finishing request's duplicate, if any is left.
func (r *runner) dropHedge(req *request) {
	req.hedgeStart.Stop()
	if req.hedgeSeq != nil {
		r.cancelSeq(req.hedgeAt, req.hedgeSeq)
		req.hedgeSeq = nil
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
