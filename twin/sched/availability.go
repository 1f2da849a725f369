package sched

import (
	"math"
	"time"
)

// One judgement of whether a replica can take a request, which routing
// (hasRoom), deadline feasibility (groupBack) and Explain (poolVerdict)
// all make, as Nomad's feasibility checkers name each reason in one place:
//
//   - not provisioned or not ready (loading, lost): SkipNotReady, with no
//     known return;
//   - ejected as an outlier: SkipEjected, until its ejection ends;
//   - breaker open: SkipCircuitOpen, until it is due half-open;
//   - breaker half-open with its one trial in flight: SkipTrial, back as
//     soon as the trial answers;
//   - otherwise it takes a request (room aside: a full replica queues).
//
// Routing reads the core's state as advanced to now (breakers and
// ejections are advanced before it routes); the views read it at a later
// now without advancing it, so an open breaker whose time is up counts as
// half-open and an ejection whose time is up as over. Both go through
// verdict.

// Reasons a replica cannot take a request now, beside those of explain.go.
const (
	SkipEjected = "ejected as an outlier"
	SkipTrial   = "half-open, trial in flight"
)

// noReturn is a return time that is not known.
const noReturn = time.Duration(math.MaxInt64)

// verdict is why the replica cannot take a request ("" when it can), with
// its breaker in state st and ejected or not.
func (rs *replicaState) verdict(ejected bool, st BreakerState) string {
	switch {
	case rs.absent || !rs.ready:
		return SkipNotReady
	case ejected:
		return SkipEjected
	case st == Open:
		return SkipCircuitOpen
	case st == HalfOpen && rs.br.trial:
		return SkipTrial
	}
	return ""
}

// routable reports whether replica rs takes a request now, as routing
// finds the core's state.
func (rs *replicaState) routable() bool {
	return rs.verdict(rs.out.ejected, rs.br.state) == ""
}

// availableAt judges replica r at now without advancing the core's state:
// why it cannot take a request ("" when it can) and when it is expected to
// again (now when it can, noReturn when nothing says).
func (c *Core) availableAt(now time.Duration, r int) (why string, back time.Duration) {
	rs := &c.replicas[r]
	ejected := rs.out.ejected && now < rs.out.until
	switch why = rs.verdict(ejected, c.BreakerView(now, r)); why {
	case "", SkipTrial:
		return why, now // a trial's answer decides, no sooner than now
	case SkipEjected:
		return why, rs.out.until
	case SkipCircuitOpen:
		return why, rs.br.openedAt + c.health.OpenFor
	}
	return why, noReturn
}
