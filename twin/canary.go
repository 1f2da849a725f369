package twin

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/engine"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Canaries and shadow traffic in the twin: what to do is the request
// engine's (reqengine.Canaries, which the live gateway drives too: the
// engine runs their evaluations at its wake-ups, mirrors an admitted
// request, and ends a copy with its original); the twin writes their
// decisions on its timeline, says when each attempt ended, and plays the
// shadow copies on the candidate's replicas.
//
// A shadow copy is a request of its own in the slab, flagged shadow: it
// never reaches the tally, the metrics, the tenant's quotas or the report's
// request counts (it is no request of a client); its attempt meets the
// candidate's faults as any other, and its figures go to the canary's
// report only.

func (r *runner) initRollouts() {
	r.canaries = reqengine.NewCanaries(r.p.sc, &r.p.core, false)
	r.shadowRand = r.s.Rand("shadows")
}

// rolledOut writes a rollout's decision on the timeline, with what it
// says of the faults on the canary's candidate.
func (r *runner) rolledOut(d sched.RolloutDecision) {
	now := r.s.Now()
	r.addEvent(CanaryEvent(now, d))
	for _, ev := range canaryActed(r.p, r.faults, now, d) {
		r.addEvent(ev)
	}
}

// canaryActed is what a rollback or a hold says of the faults active on
// the canary's candidate: a trigger that fires detects them, and a
// rollback, moving the canary's traffic to the baseline, mitigates them.
// It marks them so and returns the timeline's entries; a run and a live
// replay's recorder both ask it.
func canaryActed(p *plan, fs []*faultRT, now time.Duration, d sched.RolloutDecision) []TimelineEvent {
	if d.Action != sched.ActRollback && d.Action != sched.ActHold {
		return nil
	}
	var evs []TimelineEvent
	for _, f := range fs {
		// Only a fault wholly on the candidate: the canary says nothing
		// of one that also hits the baseline (a regional outage).
		if !f.active || len(f.pools) == 0 || !allOf(f.pools, func(pi int) bool { return p.candidateOf(pi) == d.Canary+1 }) {
			continue
		}
		if f.detected < 0 {
			f.detected = now
			evs = append(evs, timelineEvent(now, "detected", fmt.Sprintf("%s after %v: canary %s's trigger fired", f.label, (now-f.start).Round(time.Millisecond), d.Name)))
		}
		if d.Action == sched.ActRollback && f.mitigated < 0 {
			f.mitigated = now
			evs = append(evs, timelineEvent(now, "mitigated", fmt.Sprintf("%s: canary %s rolled back to the baseline, %v after the fault began", f.label, d.Name, (now-f.start).Round(time.Millisecond))))
		}
	}
	return evs
}

// observeAttempt feeds the rollouts an attempt of req, an original, that
// ended now on replica ri: answered (ok) or not. (A copy's end is the
// request engine's.)
func (r *runner) observeAttempt(req *request, ri int, ok, met bool) {
	if r.canaries == nil {
		return
	}
	r.canaries.AttemptEnded(r.s.Now(), &req.Core, ri, ok, req.offeredAt, req.firstAt, met)
}

// newCopy is the twin's record of a shadow copy of orig the request
// engine mirrors (EngineConfig.NewCopy): a slab entry flagged shadow, its
// engine sequence the original's lengths and blocks. Not alloc: a copy is
// no client's request, so it is outside the lifecycle's count of live
// requests (the retry budget's base).
func (r *runner) newCopy(orig *reqengine.Req, cp sched.Request, _ uint64) *reqengine.Req {
	req := r.owner(&orig.Core)
	sh := r.entry()
	sh.shadow = true
	sh.Core = cp
	sh.seq = r.newSeq()
	*sh.seq = engine.Seq{Tag: sh.idx, Prompt: req.seq.Prompt, Output: req.seq.Output, Blocks: req.seq.Blocks}
	sh.state = stWaiting
	return &sh.Req
}

// startShadow starts a copy the core dispatched, meeting the replica's
// faults as any attempt does.
func (r *runner) startShadow(sh *request, ri int) {
	pp := &r.p.pools[r.replicas[ri].pool]
	r.canaries.ShadowDispatched(&sh.Core, pp.Region.Jurisdiction)
	if r.faultState != nil {
		if fate := r.faultAtDispatch(sh, ri); fate.fail {
			r.failAttempt(sh, ri, fate)
			return
		} else if fate.delay > 0 {
			sh.startAt = ri
			sh.startTimer = r.s.After(fate.delay, sh.onStart)
			return
		}
	}
	r.startOn(sh, ri)
}

// stopCopy stops a copy's attempt the request engine cancelled with its
// original on replica ri (the core has let go of it already): its engine
// sequence, its service, or its attempt's pending failure.
func (r *runner) stopCopy(sh *request, ri int) {
	now := r.s.Now()
	switch sh.state {
	case stRunning:
		if rt := &r.replicas[ri]; rt.eng != nil {
			rt.eng.Cancel(now, sh.seq)
			sh.held = sh.seq.Held()
			r.rearm(ri)
		} else if rt.svcReq == sh {
			rt.timer.Stop()
			rt.svcBusy += now - rt.svcStart
			rt.svcReq = nil
		}
	case stFailing:
		sh.attemptTimer.Stop()
	}
}

// copyEnded lets go of a copy the request engine ended
// (Ready.CopiesEnded): its timers and its slab entry, once its engine
// sequence is let go of.
func (r *runner) copyEnded(c reqengine.CopyEnd) {
	sh := r.owner(&c.Req.Core)
	if sh.state == stDone {
		return
	}
	sh.state = stDone
	sh.startTimer.Stop()
	sh.attemptTimer.Stop()
	if !sh.held {
		r.release(sh)
	}
}

// CanaryEvent is a canary decision's timeline entry, kind canary-<action>
// (canary-start, canary-step-up, canary-promote, canary-hold,
// canary-resume, canary-rollback).
func CanaryEvent(at time.Duration, d sched.RolloutDecision) TimelineEvent {
	return timelineEvent(at, "canary-"+d.Action, fmt.Sprintf("%s: %s → %s: %s", d.Name, pct(d.From), pct(d.To), d.Why))
}

func pct(f float64) string { return strconv.FormatFloat(f*100, 'g', 4, 64) + "%" }

// CanaryReport is what a canary did: its decisions and why, the traffic
// each route version served, the measured share over time, and its shadow
// copies.
type CanaryReport struct {
	Model     string   `json:"model"`
	Candidate []string `json:"candidate"`
	// State at the end: pending, stepping, held, rolled-back, promoted;
	// Share the canary's share of eligible traffic then.
	State string  `json:"state"`
	Share float64 `json:"share"`
	// RolledBackAtS is when it was rolled back (null: never);
	// TimeToRollbackS from the start of the last fault on a candidate
	// pool begun before it (null: never rolled back, or no such fault).
	RolledBackAtS   Seconds          `json:"rolled_back_at_s"`
	TimeToRollbackS Seconds          `json:"time_to_rollback_s"`
	Decisions       []CanaryDecision `json:"decisions"`
	Canary          VersionReport    `json:"canary"`
	Baseline        VersionReport    `json:"baseline"`
	// ShareByMinute is the canary's measured share of the eligible
	// attempts in each minute of the run (null where there were none).
	ShareByMinute []*float64   `json:"share_by_minute"`
	Shadow        ShadowReport `json:"shadow"`
}

// CanaryDecision is one decision of a canary.
type CanaryDecision struct {
	AtS    float64 `json:"at_s"`
	Action string  `json:"action"` // start, step-up, promote, hold, resume, rollback
	From   float64 `json:"from"`
	To     float64 `json:"to"`
	Why    string  `json:"why"`
}

// VersionReport is the eligible traffic one route version served, by
// attempt (a request retried from the canary to the baseline has one of
// each).
type VersionReport struct {
	Attempts  uint64 `json:"attempts"`
	Failed    uint64 `json:"failed"`
	Succeeded uint64 `json:"succeeded"`
	// ErrorRate is failed/attempts; SLOAttainment the share of attempts
	// whose request met its class's SLO on them (null for shadow copies,
	// which no client waits for).
	ErrorRate     float64  `json:"error_rate"`
	SLOAttainment *float64 `json:"slo_attainment"`
	TTFTP50S      float64  `json:"ttft_p50_s"`
	TTFTP99S      float64  `json:"ttft_p99_s"`
	E2EP99S       float64  `json:"e2e_p99_s"`
	// Cost is the replica time the attempts held (price per replica-hour
	// × time ÷ batch slots); CostPerSuccess divides it by the succeeded.
	Cost           float64 `json:"cost"`
	CostPerSuccess float64 `json:"cost_per_success"`
}

// ShadowReport is a canary's shadow copies: sent = completed + failed +
// shed + cancelled + in_flight_at_end. None is answered to a client or
// counted in the run's requests.
type ShadowReport struct {
	Sent          uint64        `json:"sent"`
	Completed     uint64        `json:"completed"`
	Failed        uint64        `json:"failed"`
	Shed          uint64        `json:"shed"`
	Cancelled     uint64        `json:"cancelled"`
	InFlightAtEnd uint64        `json:"in_flight_at_end"`
	Latency       VersionReport `json:"latency"`
	// ResidencyViolations: copies served outside their tenant's
	// jurisdiction (the run's, for all canaries).
	ResidencyViolations uint64 `json:"residency_violations"`
}

// FaultSpan is when a fault began and which pools it hit, for a canary's
// time to rollback.
type FaultSpan struct {
	Start time.Duration
	Pools []int
}

// CanaryReports builds the canaries' reports from their rollouts, the
// faults' spans and the copies served outside their jurisdiction; nil
// without canaries. The live Recorder builds its own the same way.
func CanaryReports(sc *scenarios.Scenario, ro *sched.Rollouts, cfg *sched.Config, spans []FaultSpan, residency uint64) map[string]*CanaryReport {
	if ro == nil {
		return nil
	}
	out := map[string]*CanaryReport{}
	for k := range ro.Len() {
		rr := ro.Report(k)
		c := sc.Canaries[k]
		cr := &CanaryReport{Model: c.Model, Candidate: c.Candidate, State: rr.State, Share: rr.Share,
			RolledBackAtS: Never, TimeToRollbackS: Never,
			Canary: versionReport(rr.Canary, false), Baseline: versionReport(rr.Baseline, false)}
		for _, d := range rr.Decisions {
			cr.Decisions = append(cr.Decisions, CanaryDecision{AtS: round(d.At.Seconds(), 6), Action: d.Action,
				From: d.From, To: d.To, Why: d.Why})
		}
		if rr.RolledBackAt >= 0 {
			cr.RolledBackAtS = Seconds(round(rr.RolledBackAt.Seconds(), 6))
			last := time.Duration(-1)
			for _, f := range spans {
				if f.Start <= rr.RolledBackAt && f.Start > last && slices.ContainsFunc(f.Pools, func(p int) bool {
					return slices.Contains(cfg.Canaries[k].Pools, p)
				}) {
					last = f.Start
				}
			}
			if last >= 0 {
				cr.TimeToRollbackS = Seconds(round((rr.RolledBackAt - last).Seconds(), 6))
			}
		}
		for _, m := range rr.PerMinute {
			if n := m[0] + m[1]; n > 0 {
				f := round(float64(m[0])/float64(n), 6)
				cr.ShareByMinute = append(cr.ShareByMinute, &f)
			} else {
				cr.ShareByMinute = append(cr.ShareByMinute, nil)
			}
		}
		sh := rr.Shadow
		cr.Shadow = ShadowReport{Sent: rr.ShadowSent, Completed: sh.Succeeded, Failed: sh.Failed, Shed: rr.ShadowShed,
			Cancelled: rr.ShadowCancelled, Latency: versionReport(sh, true), ResidencyViolations: residency}
		if done := sh.Attempts + rr.ShadowShed + rr.ShadowCancelled; rr.ShadowSent > done {
			cr.Shadow.InFlightAtEnd = rr.ShadowSent - done
		}
		out[c.Name] = cr
	}
	return out
}

func versionReport(v sched.RolloutVersion, shadow bool) VersionReport {
	// Costs keep nine decimals: a request's share of a replica-hour is
	// millionths of the currency unit.
	vr := VersionReport{Attempts: v.Attempts, Failed: v.Failed, Succeeded: v.Succeeded, Cost: round(v.Cost, 9)}
	if v.Attempts > 0 {
		vr.ErrorRate = round(float64(v.Failed)/float64(v.Attempts), 6)
		if !shadow {
			a := round(float64(v.SLOMet)/float64(v.Attempts), 6)
			vr.SLOAttainment = &a
		}
	}
	if v.Succeeded > 0 {
		vr.CostPerSuccess = round(v.Cost/float64(v.Succeeded), 9)
		q := func(sk *ddsketch.DDSketch, p float64) float64 {
			x, err := sk.GetValueAtQuantile(p)
			if err != nil {
				return 0
			}
			return round(x, 6)
		}
		vr.TTFTP50S, vr.TTFTP99S, vr.E2EP99S = q(v.TTFT, 0.5), q(v.TTFT, 0.99), q(v.E2E, 0.99)
	}
	return vr
}

// canaryReports is the run's.
func (r *runner) canaryReports() map[string]*CanaryReport {
	if r.canaries == nil {
		return nil
	}
	var spans []FaultSpan
	for _, f := range r.faults {
		if f.active || f.end > 0 {
			spans = append(spans, FaultSpan{Start: f.start, Pools: f.pools})
		}
	}
	return CanaryReports(r.p.sc, r.canaries.Rollouts(), &r.p.core, spans, r.canaries.Residency())
}

func allOf(xs []int, f func(int) bool) bool {
	for _, x := range xs {
		if !f(x) {
			return false
		}
	}
	return true
}
