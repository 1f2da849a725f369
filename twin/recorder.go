package twin

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim"
	"github.com/fleetdrill/fleetdrill/sim/stats"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Result is how a request observed outside the twin ended.
type Result uint8

const (
	Completed Result = iota
	Rejected
	Failed
	TimedOut
	Cancelled
	InFlight // still unanswered when the replay stopped waiting
)

var resultNames = [...]string{"completed", "rejected", "failed", "timed_out", "cancelled", "in_flight"}

func (r Result) String() string { return resultNames[r] }

// count adds one request that ended so to c.
func (r Result) count(c *Counts) {
	switch r {
	case Completed:
		c.Completed++
	case Rejected:
		c.Rejected++
	case Failed:
		c.Failed++
	case TimedOut:
		c.TimedOut++
	case Cancelled:
		c.Cancelled++
	case InFlight:
		c.InFlightAtEnd++
	}
}

// Outcome is one request as a replay outside the twin saw it, in model
// (simulated) time since the replay began.
type Outcome struct {
	Arrival
	Result Result
	// Reason is a rejection's reason (a sched reason such as tenant-tokens,
	// or upstream-quota).
	Reason string
	Ended  time.Duration
	// Completed requests: time to the first token, time waited in the
	// gateway's queue, the replica that served (the gateway's index; -1
	// unknown), its pool, and the model that answered (a fallback when it
	// is not Model).
	TTFT        time.Duration
	Wait        time.Duration
	Replica     int
	Pool        string
	ServedModel int
	Attempts    int // attempts made, 1 without retries
	Deferrals   int
	// Admitted: the core dispatched or queued the request at least once,
	// which is how the runner counts admitted (a completed request always was).
	Admitted bool
}

// FaultPlan is one of the scenario's faults, as a replay must inject it to
// match the twin: when (model time) and on which replicas (indices in the
// gateway's order: pools in scenario order, each pool's replicas in order).
type FaultPlan struct {
	Label      string
	Spec       faults.Spec
	Start, End time.Duration // End 0: lasts to the end
	Replicas   []int
}

// Recorder builds a twin Report from requests served outside the twin — the
// live harness's replay of a scenario — so that both are counted, judged
// against the SLOs, windowed and attributed to faults by the same code.
// Feed it outcomes and the gateway's breaker transitions and ejections in
// any order; Report sorts them by time.
type Recorder struct {
	p      *plan
	t      tally
	faults []*faultRT
	outs   []Outcome
	marks  []mark
	// canaries is the replay's canary reports (SetCanaries); nil: their
	// shape only, from rollouts that never ran.
	canaries  map[string]*CanaryReport
	scalers   map[string]ScalerSnapshot // SetAutoscaling
	refused   map[string]bool           // the refusals noted on the timeline (refusalNote)
	residency residencyTally            // from the dispatches, as Report replays them
}

type markKind uint8

const (
	markStart markKind = iota
	markEnd
	markBreaker
	markEjection
	markRefusal
	markOutcome
	markEvent
	markDispatch
	markCanary
	markThrottled
	markRoute
)

type mark struct {
	at      time.Duration
	kind    markKind
	fault   int            // markStart, markEnd
	replica int            // markBreaker, markRefusal
	eject   sched.Ejection // markEjection
	to      sched.BreakerState
	from    sched.BreakerState
	status  int           // markRefusal
	out     int           // markOutcome: index in outs
	event   TimelineEvent // markEvent
	canary  sched.RolloutDecision
	retry   time.Duration // markThrottled: the Retry-After; markDispatch: when the request arrived
	tenant  int           // markDispatch
	detail  string        // markRoute: the timeline's text
	off     bool          // markRoute: the pool no longer serves the model
}

// NewRecorder prepares a report for the scenario as the replay runs it (its
// pools' replicas set to the replicas the replay has). It checks the
// expectations against the report's shape at once.
func NewRecorder(sc *scenarios.Scenario) (*Recorder, error) {
	p, err := build(sc)
	if err != nil {
		return nil, err
	}
	rec := &Recorder{p: p, t: newTally(sc), refused: map[string]bool{}}
	for i, pp := range p.pools {
		if name := pp.Spec.Name; pp.Spec.Autoscale != nil {
			// Outcomes are replayed after the replay: the series is the
			// scaler's to the end (SetAutoscaling), none before.
			rec.t.watchShortfall(p, i, func(t time.Duration) bool { return ShortAt(rec.scalers[name].Tally.Series, t) })
		}
	}
	rec.faults, err = newFaults(sc.Faults)
	if err != nil {
		return nil, err
	}
	for i, f := range rec.faults {
		if err := p.resolveFault(f); err != nil {
			return nil, fmt.Errorf("faults[%d] %q: %w", i, f.spec.String(), err)
		}
		f.replicas = p.faultReplicas(f, randFor(sc.Seed, "faults/"+f.label), nil)
	}
	if err := rec.t.initWindows(spansOf(rec.faults)); err != nil {
		return nil, err
	}
	if err := rec.assemble(0, nil).evaluate(sc.Expect); err != nil {
		return nil, err
	}
	return rec, nil
}

// Faults returns the scenario's faults with the replicas a twin run hits.
func (rec *Recorder) Faults() []FaultPlan {
	var out []FaultPlan
	for _, f := range rec.faults {
		out = append(out, FaultPlan{Label: f.label, Spec: f.spec, Start: f.start, End: f.end, Replicas: slices.Clone(f.replicas)})
	}
	return out
}

// Replicas is the number of replicas (the gateway's indices are 0..n-1).
func (rec *Recorder) Replicas() int { return len(rec.p.replicas) }

// FaultStarted and FaultEnded record when the replay injected and undid
// fault i (an index into Faults).
func (rec *Recorder) FaultStarted(i int, at time.Duration) {
	rec.marks = append(rec.marks, mark{at: at, kind: markStart, fault: i})
}

// FaultEnded records when the replay undid fault i.
func (rec *Recorder) FaultEnded(i int, at time.Duration) {
	rec.marks = append(rec.marks, mark{at: at, kind: markEnd, fault: i})
}

// Breaker records a circuit-breaker transition of the gateway's replica.
func (rec *Recorder) Breaker(at time.Duration, replica int, from, to sched.BreakerState) {
	rec.marks = append(rec.marks, mark{at: at, kind: markBreaker, replica: replica, from: from, to: to})
}

// Ejection records a latency outlier ejection of the gateway's replica
// e.Replica at at, or its return (e.Returned). An ejection detects the
// faults that affect the replica, as a breaker opening does and as the
// twin's runner counts it: it is how a latency-only brownout is detected.
func (rec *Recorder) Ejection(at time.Duration, e sched.Ejection) {
	e.At = at // the timeline entry's time is the detection's
	rec.marks = append(rec.marks, mark{at: at, kind: markEjection, replica: e.Replica, eject: e})
}

// Refusal records an upstream attempt refused with status (429: quota,
// 404: model retired; faults.DetectedByStatus), which detects a fault of
// the kind that status reveals on that replica (faults.Traits.DetectStatus)
// which is what the provider answers in a twin run.
func (rec *Recorder) Refusal(at time.Duration, replica, status int) {
	rec.marks = append(rec.marks, mark{at: at, kind: markRefusal, replica: replica, status: status})
}

// RouteChange records a live driver upgrade's (fault i's) route change: a
// model its pool can no longer run taken from the pool's routes (off), or
// given back, with the timeline's text (RouteChange). Taking one off
// detects the fault: the compatibility registry flags the
// pairing as the upgrade lands (upgradeDriver).
func (rec *Recorder) RouteChange(at time.Duration, i int, detail string, off bool) {
	rec.marks = append(rec.marks, mark{at: at, kind: markRoute, fault: i, detail: detail, off: off})
}

// Event records an entry of the replay's timeline that only the replay
// knows, such as a canary's decision (CanaryEvent).
func (rec *Recorder) Event(ev TimelineEvent) {
	rec.marks = append(rec.marks, mark{at: time.Duration(ev.TS * float64(time.Second)), kind: markEvent, event: ev})
}

// SetAutoscaling gives the report its autoscaled pools' scalers, as the
// replay's scalers ended, by pool name.
func (rec *Recorder) SetAutoscaling(s map[string]ScalerSnapshot) { rec.scalers = s }

// SetCanaries gives the report its canaries, built by CanaryReports from
// the replay's rollouts and the faults as it injected them.
func (rec *Recorder) SetCanaries(c map[string]*CanaryReport) { rec.canaries = c }

// Dispatch records a dispatch of a request of tenant (its index in the
// scenario), arrived at arrived, to replica at at (a retry's again; not a
// hedged duplicate's or a shadow copy's): the pools' dispatched counts and
// the residency violations, as a run counts them (a request arrived in
// the warm-up is not measured).
func (rec *Recorder) Dispatch(at time.Duration, replica, tenant int, arrived time.Duration) {
	rec.marks = append(rec.marks, mark{at: at, kind: markDispatch, replica: replica, tenant: tenant, retry: arrived})
}

// Throttled records a provider's 429 on replica at at that throttled its
// pool (the core's Throttled said so), asking for retryAfter: the pool's
// throttle on the timeline, and the detection of its quota faults, as a
// run has them.
func (rec *Recorder) Throttled(at time.Duration, replica int, retryAfter time.Duration) {
	rec.marks = append(rec.marks, mark{at: at, kind: markThrottled, replica: replica, retry: retryAfter})
}

// Canary records a canary's decision at at: its timeline entry, and what
// a rollback or a hold says of the faults on its candidate (detected,
// mitigated), as a run's rollouts do.
func (rec *Recorder) Canary(at time.Duration, d sched.RolloutDecision) {
	rec.marks = append(rec.marks, mark{at: at, kind: markCanary, canary: d})
}

// Add records a request's outcome.
func (rec *Recorder) Add(o Outcome) {
	rec.marks = append(rec.marks, mark{at: o.Ended, kind: markOutcome, out: len(rec.outs)})
	rec.outs = append(rec.outs, o)
}

// Report replays what was recorded in time order into a report. end is
// when the replay stopped (model time); streams is what the workload sent
// (Arrivals' return). It fails when the accounting invariant breaks.
func (rec *Recorder) Report(end time.Duration, streams map[string]StreamReport) (*Report, error) {
	slices.SortStableFunc(rec.marks, func(a, b mark) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.kind, b.kind))
	})
	var timeline []TimelineEvent
	event := func(ev TimelineEvent) { timeline = append(timeline, ev) }
	sc := rec.p.sc
	warmup := sc.Warmup.D()
	rec.residency = residencyTally{}
	dispatched := make([]uint64, len(rec.p.pools))
	throttled := make([]bool, len(rec.p.pools)) // the pools' first throttle seen
	for _, m := range rec.marks {
		switch m.kind {
		case markStart:
			f := rec.faults[m.fault]
			f.active = true
			event(f.startEvent(m.at))
			if ev, ok := f.noticeDetected(m.at); ok {
				event(ev)
			}
		case markEnd:
			f := rec.faults[m.fault]
			f.active = false
			event(f.endEvent(m.at))
		case markBreaker:
			if tr := (sched.Transition{Replica: m.replica, From: m.from, To: m.to, At: m.at}); !tr.Trial() {
				event(rec.p.breakerEvent(m.at, tr))
			}
			if m.to != sched.Open {
				continue
			}
			for _, f := range rec.faults {
				if f.breakerOpened(m.at, m.replica) {
					event(f.breakerDetectedEvent(m.at))
				}
			}
		case markEjection:
			event(rec.p.ejectionEvent(m.eject))
			if m.eject.Returned {
				continue
			}
			for _, f := range rec.faults {
				if f.breakerOpened(m.at, m.replica) {
					event(f.breakerDetectedEvent(m.at))
				}
			}
		case markRefusal:
			// A 429 detects as its throttle does (markThrottled).
			for _, f := range rec.faults {
				if m.status != 429 && f.active && f.detected < 0 && slices.Contains(f.replicas, m.replica) && f.detectedBy(m.status) {
					f.detected = m.at
					event(timelineEvent(m.at, "detected", fmt.Sprintf("%s after %v: upstream answers %d", f.label, (m.at-f.start).Round(time.Millisecond), m.status)))
				}
			}
		case markThrottled:
			if m.replica >= 0 && m.replica < len(rec.p.replicas) {
				pi := rec.p.replicas[m.replica].Pool
				first := !throttled[pi]
				throttled[pi] = true
				for _, ev := range throttledEvents(rec.p, rec.faults, m.at, pi, m.retry, first) {
					event(ev)
				}
			}
		case markEvent:
			event(m.event)
		case markRoute:
			if f := rec.faults[m.fault]; m.off && f.active && f.detected < 0 {
				f.detected = m.at
			}
			event(timelineEvent(m.at, "route-change", m.detail))
		case markCanary:
			event(CanaryEvent(m.at, m.canary))
			for _, ev := range canaryActed(rec.p, rec.faults, m.at, m.canary) {
				event(ev)
			}
		case markDispatch:
			if m.replica >= 0 && m.replica < len(rec.p.replicas) {
				pi := rec.p.replicas[m.replica].Pool
				dispatched[pi]++
				if m.retry >= warmup && m.tenant >= 0 && m.tenant < len(sc.Tenants) {
					rec.residency.dispatch(rec.p, m.tenant, pi)
				}
			}
		case markOutcome:
			o := &rec.outs[m.out]
			rec.record(o, warmup, event)
		}
	}
	if warmup > 0 {
		event(warmupEndEvent(warmup))
	}
	event(arrivalsEndEvent(sc.Duration.D()))
	slices.SortStableFunc(timeline, func(a, b TimelineEvent) int { return cmp.Compare(a.TS, b.TS) })
	rep := rec.assemble(end, dispatched)
	rec.residency.into(rep, rec.p)
	rep.Timeline = timeline
	for k, v := range streams {
		rep.Workload[k] = v
	}
	if err := rep.CheckAccounting(); err != nil {
		return nil, err
	}
	if err := rep.evaluate(sc.Expect); err != nil {
		return nil, err
	}
	return rep, nil
}

// record counts one outcome the way the runner counts a request.
func (rec *Recorder) record(o *Outcome, warmup time.Duration, event func(TimelineEvent)) {
	measured := o.At >= warmup
	count := func(f func(*Counts)) {
		if measured {
			rec.t.count(o.Class, o.Tenant, o.At, f)
		}
	}
	count(func(c *Counts) {
		c.Arrived++
		c.Retries += uint64(max(o.Attempts-1-o.Deferrals, 0))
		c.Deferred += uint64(o.Deferrals)
		if o.Admitted || o.Result == Completed {
			c.Admitted++
		}
	})
	met := false
	switch o.Result {
	case Completed:
		pool := o.Pool
		if o.Replica >= 0 && o.Replica < len(rec.p.replicas) {
			pool = rec.p.pools[rec.p.replicas[o.Replica].Pool].Spec.Name
		}
		met = rec.t.complete(&served{class: o.Class, tenant: o.Tenant, arrived: o.At, ttft: o.TTFT, e2e: o.Ended - o.At,
			wait: o.Wait, output: o.Output, fallback: o.ServedModel != o.Model, pool: pool}, measured)
		if o.Replica >= 0 {
			noteServed(rec.p, rec.faults, o.Ended, o.Replica, o.Model, o.ServedModel, 0, event)
		}
	case Rejected:
		if measured {
			rec.t.rejections[o.Reason]++
		}
		// The replay knows no detail of a refusal (the gateway answers
		// the reason only), so each reason's first is noted once.
		if key, ev := refusalNote(o.Ended, o.Reason, ""); !rec.refused[key] {
			rec.refused[key] = true
			event(ev)
		}
	}
	count(o.Result.count)
	if measured {
		rec.t.ended(o.Tenant, o.Model, o.At, met, o.Result == InFlight)
	}
	if o.Result == InFlight {
		return // not finished: no fault attribution
	}
	for _, f := range rec.faults {
		f.outcome(o.At, o.Ended, met, o.Result != Completed)
	}
	noteEnding(rec.p, rec.faults, &ending{tenant: o.Tenant, class: o.Class, model: o.Model, served: o.ServedModel,
		replica: o.Replica, arrived: o.At, ended: o.Ended, met: met, result: o.Result, reason: o.Reason})
}

// assemble is the recorder's report: what the twin reports the same way,
// and the requests each pool served (dispatched, nil before the replay).
func (rec *Recorder) assemble(end time.Duration, dispatched []uint64) *Report {
	pools := newPoolReports(rec.p)
	for i, n := range dispatched {
		pools[i].Dispatched = n
	}
	rep := assembleReport(rec.p, &rec.t, rec.faults, end, pools)
	for i := range rec.p.sc.Pools {
		ps := &rec.p.sc.Pools[i]
		if snap, ok := rec.scalers[ps.Name]; ok {
			autoscaleInto(rep, ps, snap, &rec.t)
		} else if ps.Autoscale != nil {
			// Its shape, so that expectations on it resolve before the
			// replay has a scaler to report.
			if rep.Autoscaling == nil {
				rep.Autoscaling = map[string]*AutoscaleReport{}
			}
			rep.Autoscaling[ps.Name] = &AutoscaleReport{RefusedBy: sched.NoRefusals(),
				Tenants: rec.t.shortfallTenants(ps.Name)}
		}
	}
	rep.Canaries = rec.canaries
	if rep.Canaries == nil {
		// Their shape, so that expectations on them resolve.
		rep.Canaries = CanaryReports(rec.p.sc, sched.NewRollouts(&rec.p.core), &rec.p.core, nil, 0)
	}
	return rep
}

// randFor is the stream a run named name would draw from.
func randFor(seed uint64, name string) *rand.Rand { return rand.New(sim.NewSource(seed, name)) }

// AddFault adds a fault injected during the replay (an operator's, from a
// console): its label (#2… when repeated), the replicas a twin run's seeded
// blast radius picks, and its index for FaultStarted and FaultEnded. Its
// spec's At and For are the replay's (model time from its start).
func (rec *Recorder) AddFault(sp faults.Spec) (FaultPlan, int, error) {
	if _, err := faults.ParseAll([]string{sp.String()}); err != nil {
		return FaultPlan{}, 0, err
	}
	base, n := Label(sp), 0
	for _, f := range rec.faults {
		if Label(f.spec) == base {
			n++
		}
	}
	label := base
	if n > 0 {
		label = fmt.Sprintf("%s#%d", base, n+1)
	}
	f := newFaultRT(sp, label)
	if err := rec.p.resolveFault(f); err != nil {
		return FaultPlan{}, 0, err
	}
	f.replicas = rec.p.faultReplicas(f, randFor(rec.p.sc.Seed, "faults/"+f.label), nil)
	rec.faults = append(rec.faults, f)
	return FaultPlan{Label: f.label, Spec: f.spec, Start: f.start, End: f.end, Replicas: slices.Clone(f.replicas)}, len(rec.faults) - 1, nil
}

// SetFaultEnd records that fault i ends at end (an operator ended it).
func (rec *Recorder) SetFaultEnd(i int, end time.Duration) {
	f := rec.faults[i]
	f.end = end
	f.spec.For = end - f.spec.At
	f.report.Spec = f.spec.String()
}

// FaultLines returns every fault's line as the replay ran it, with its at=
// and, when it ends, for=.
func (rec *Recorder) FaultLines() []string {
	var out []string
	for _, f := range rec.faults {
		sp := f.spec
		if f.end == 0 {
			sp.For = 0
		}
		out = append(out, sp.String())
	}
	return out
}

// Recent summarizes each class over the window of model time ending at
// now, from the outcomes added so far: for a console following a replay.
func (rec *Recorder) Recent(now, window time.Duration) []ClassState {
	sc := rec.p.sc
	type acc struct {
		ttft, e2e                         stats.Sketch
		completed, finished, met, rejects uint64
		deferrals                         uint64
	}
	accs := make([]acc, len(sc.Classes))
	arrived, metAll := make([]uint64, len(sc.Classes)), make([]uint64, len(sc.Classes))
	for i := range rec.outs {
		o := &rec.outs[i]
		arrived[o.Class]++
		if o.Result == Completed && rec.t.met(&served{class: o.Class, ttft: o.TTFT, e2e: o.Ended - o.At, output: o.Output}) {
			metAll[o.Class]++
		}
		if o.Ended > now || o.Ended <= now-window || o.Result == InFlight {
			continue
		}
		a := &accs[o.Class]
		a.finished++
		a.deferrals += uint64(o.Deferrals)
		switch o.Result {
		case Completed:
			a.completed++
			a.ttft.AddDuration(o.TTFT)
			a.e2e.AddDuration(o.Ended - o.At)
			if rec.t.met(&served{class: o.Class, ttft: o.TTFT, e2e: o.Ended - o.At, output: o.Output}) {
				a.met++
			}
		case Rejected:
			a.rejects++
		}
	}
	span := min(now, window).Seconds()
	out := make([]ClassState, len(sc.Classes))
	for i, c := range sc.Classes {
		a := &accs[i]
		cs := ClassState{Name: c.Name, SLOTTFT: c.SLO.TTFT.D(), SLOE2E: c.SLO.E2E.D(), Window: window, Attainment: 1,
			Completed: a.completed, Finished: a.finished, TotalArrived: arrived[i], TotalSLOMet: metAll[i],
			TTFTP99: time.Duration(a.ttft.Quantile(0.99) * float64(time.Second)),
			E2EP99:  time.Duration(a.e2e.Quantile(0.99) * float64(time.Second))}
		if a.finished > 0 {
			cs.Attainment = float64(a.met) / float64(a.finished)
		}
		if span > 0 {
			cs.RejectedPS, cs.DeferredPS = float64(a.rejects)/span, float64(a.deferrals)/span
		}
		out[i] = cs
	}
	return out
}

// RecentTenants summarizes each tenant, in the scenario's order, over the
// window of model time ending at now, from the outcomes added so far, as a
// drill's snapshot does: requests finished (every outcome but in-flight
// ones), completed, rejected, timed out and failed (a cancelled one is
// finished, not lost), SLO attainment of the finished ones (1 without any),
// and where the completed ones were served: the replica's pool when the
// gateway named the replica, else the pool it named (none when it named
// neither), that pool's region, and the model that answered. Waiting and
// OldestWaiting stay zero: the recorder learns of a request when it ends.
func (rec *Recorder) RecentTenants(now, window time.Duration) []TenantState {
	sc := rec.p.sc
	out := make([]TenantState, len(sc.Tenants))
	met := make([]uint64, len(sc.Tenants))
	places := make([][]servedCount, len(sc.Tenants))
	for i := range rec.outs {
		o := &rec.outs[i]
		if o.Ended > now || o.Ended <= now-window || o.Result == InFlight || o.Tenant < 0 || o.Tenant >= len(out) {
			continue
		}
		ts := &out[o.Tenant]
		ts.Finished++
		switch o.Result {
		case Completed:
			ts.Completed++
			if rec.t.met(&served{class: o.Class, ttft: o.TTFT, e2e: o.Ended - o.At, output: o.Output}) {
				met[o.Tenant]++
			}
			pool := -1
			switch {
			case o.Replica >= 0 && o.Replica < len(rec.p.replicas):
				pool = rec.p.replicas[o.Replica].Pool
			case o.Pool != "":
				pool = slices.IndexFunc(sc.Pools, func(p scenarios.Pool) bool { return p.Name == o.Pool })
			}
			addServed(&places[o.Tenant], servedCount{pool: pool, model: o.ServedModel, fallback: o.ServedModel != o.Model, n: 1})
		case Rejected:
			ts.Rejected++
		case TimedOut:
			ts.TimedOut++
		case Failed:
			ts.Failed++
		}
	}
	for t, tn := range sc.Tenants {
		ts := &out[t]
		ts.Name, ts.Jurisdiction, ts.Attainment = tn.Name, tn.Jurisdiction, 1
		if ts.Finished > 0 {
			ts.Attainment = float64(met[t]) / float64(ts.Finished)
		}
		ts.Served = tenantServed(sc, places[t])
	}
	return out
}

// Counts tallies the outcomes added so far (every arrival, warm-up
// included).
func (rec *Recorder) Counts() Counts {
	var c Counts
	for i := range rec.outs {
		o := &rec.outs[i]
		c.Arrived++
		c.Retries += uint64(max(o.Attempts-1-o.Deferrals, 0))
		c.Deferred += uint64(o.Deferrals)
		o.Result.count(&c)
	}
	return c
}
