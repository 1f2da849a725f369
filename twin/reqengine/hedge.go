package reqengine

import (
	"time"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Hedged requests: when a route enables them (policy.routing.hedge_after),
// a request with no first token after that long gets a duplicate attempt on
// a second replica the core picks (Core.Hedge). How the race ends is
// written here once; the twin (engine sequences in virtual time) and the
// gateway (two upstream calls) carry it out:
//
//   - the first attempt to produce a token wins and the other is cancelled
//     at once, freeing its slot and KV; a duplicate that wins goes on as
//     the request's attempt;
//   - a first attempt that fails takes its duplicate with it, and the
//     request is retried as after any failed attempt;
//   - a duplicate that fails goes alone: the core hears of its failure as
//     of any attempt's (a 429 throttles its pool, anything else counts
//     against its breaker), and the first attempt goes on;
//   - a duplicate lost with its replica, or whose client went away, ends
//     with nothing for the core to hear.

// Leg is one of a hedged request's two attempts.
type Leg uint8

const (
	NoLeg     Leg = iota
	FirstLeg      // the request's attempt
	Duplicate     // its hedged duplicate
	// CopyLeg is a shadow copy's attempt (Cancel.Req is the copy),
	// cancelled with its original.
	CopyLeg
)

// RaceEnd is what ended a hedge race.
type RaceEnd uint8

const (
	FirstAnswered     RaceEnd = iota + 1 // the first attempt's first token came first
	DuplicateAnswered                    // the duplicate's did
	FirstFailed                          // the first attempt failed
	DuplicateFailed                      // the duplicate failed (or could not start on a failing replica)
	DuplicateLost                        // the duplicate ended with its replica, its client or no engine to run on
)

// Settlement is what the end of a race asks of the driver.
type Settlement struct {
	Cancel Leg  // the attempt to cancel at once
	Keep   bool // the duplicate goes on as the request's attempt
	Won    bool // the duplicate answered first ("won", in the report and the metrics)
	// ReportFailure: tell the core of the duplicate's failure, as of any
	// attempt's.
	ReportFailure bool
}

// SettleHedge ends req's hedge race at now as end says. What the driver
// must do before the core frees the loser's slot (cancel the loser, report
// a failed duplicate: its own way of telling the core of a failed attempt)
// it does in before, so that, say, a breaker the failure opens keeps the
// freed slot from taking a queued request at once; then the core is told
// (Core.EndHedge, which may dispatch queued requests). For a request
// without a duplicate in flight it does nothing.
func SettleHedge(now time.Duration, core *sched.Core, req *sched.Request, end RaceEnd, before func(Settlement)) Settlement {
	if req.Hedge < 0 {
		return Settlement{}
	}
	var s Settlement
	switch end {
	case FirstAnswered, FirstFailed, DuplicateLost:
		s.Cancel = Duplicate
	case DuplicateAnswered:
		s = Settlement{Cancel: FirstLeg, Keep: true, Won: true}
	case DuplicateFailed:
		s.ReportFailure = true
	}
	if before != nil {
		before(s)
	}
	core.EndHedge(now, req, s.Keep)
	return s
}
