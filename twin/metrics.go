package twin

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/sim"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// The operational series of a run in simulated time: the signals the live
// gateway and the emulated node serve on /metrics (internal/signals), with
// the same names, labels and histogram buckets, sampled every Metrics.Step
// of simulated time so that one dashboard reads a live fleet and a twin run
// alike. fleetdrill run --openmetrics writes them as an OpenMetrics file for
// promtool to backfill (internal/openmetrics; docs/metrics.md, "The twin").
//
// Sampling reads the run between events and schedules none: Run advances
// the kernel to each sampling instant in turn (the kernel's order is (time,
// scheduling order), so stopping there changes nothing) and reads the
// state. A run with Metrics gives the same report, event count included, as
// one without.
//
// Counters and histograms are cumulative from the start of the run, warm-up
// included (the gateway does not know about a warm-up): with a warm-up, the
// report's counts (measured requests only) are smaller.

// Metrics records a run's operational series. Set Step and pass it in
// Options.Metrics; after Run, Times and Families hold the samples.
type Metrics struct {
	// Step is the sampling period in simulated time; it must be positive.
	Step time.Duration

	// Times are the sampling instants, from 0 every Step, and the end of
	// the run last (when it is not on a step).
	Times []time.Duration
	// Families are the recorded families in the order of signals.All, each
	// with its series sorted by label values. Every family of the
	// catalogue is present; one the run never touched has no series.
	Families []*Family

	fams     []*famRec
	reasons  map[string]int32 // rejection reasons, interned
	names    []string         // reasons by id
	fellBack map[uint64]bool  // requests dispatched to a fallback at least once, until they end
}

// Family is one signal's series.
type Family struct {
	Signal  signals.Signal
	Buckets []float64 // a histogram's upper bounds (+Inf implied)
	Series  []*Series
}

// Series is one label set's samples.
type Series struct {
	Labels []string // values, in the order of Signal.Labels
	// First is the index in Metrics.Times of the series' first sample; it
	// has one sample at every instant from there on. A counter or
	// histogram that first moves between two instants starts at the
	// earlier one with zero, so rate() sees its first increase.
	First  int
	Values []float64   // counters and gauges
	Hist   []HistPoint // histograms
}

// HistPoint is a histogram's state at one instant.
type HistPoint struct {
	Buckets []uint64 // cumulative counts, one per Family.Buckets bound
	Count   uint64   // observations: the +Inf bucket
	Sum     float64
}

// Points is the number of samples of s.
func (s *Series) Points() int { return max(len(s.Values), len(s.Hist)) }

// Family returns the recorded family of sig, nil when sig is not in the
// catalogue.
func (m *Metrics) Family(sig signals.Signal) *Family {
	for _, f := range m.Families {
		if f.Signal.Name == sig.Name {
			return f
		}
	}
	return nil
}

// Find returns the series of f with the given label values, nil when the
// run has none.
func (f *Family) Find(labels ...string) *Series {
	for _, s := range f.Series {
		if slices.Equal(s.Labels, labels) {
			return s
		}
	}
	return nil
}

// Last is the series' value at the last instant (counters and gauges).
func (s *Series) Last() float64 {
	if len(s.Values) == 0 {
		return 0
	}
	return s.Values[len(s.Values)-1]
}

// famRec accumulates one family during the run. Cells are keyed by small
// integers (model, pool, class…) so that counting allocates nothing after a
// series' first use.
type famRec struct {
	fam     *Family
	cells   map[cellKey]*cell
	order   []*cell // in creation order; sorted by labels at the end
	buckets []float64
}

type cellKey [4]int32

type cell struct {
	key     cellKey
	s       *Series
	created int // samples taken before its first use
	v       float64
	// histograms: per-bucket (not cumulative) counts, the last for +Inf
	counts []uint64
	count  uint64
	sum    float64
}

// Indexes of the families in Metrics.fams (twinSignals).
const (
	mTTFT = iota
	mTPOT
	mE2E
	mRequests
	mRejected
	mThrottled
	mQueueDepth
	mOldestWaiting
	mWaitingRequests
	mKVAllocatable
	mSaturation
	mPreemptions
	mColdStarts
	mRoutes
	mFallbacksOK
	mFallbacksFailed
	mDeploymentState
	mCooledDown
	mBreaker
	mDegradationStep
	mForecastError
	mCanaryShare
	mCanaryDecisions
	mShadowRequests
	mAutoscaleReplicas
	mAutoscaleAsks
	mCount
)

// twinSignals are the families the twin records, by index.
var twinSignals = [mCount]signals.Signal{signals.TTFT, signals.TPOT, signals.E2E, signals.Requests,
	signals.Rejected, signals.Throttled, signals.QueueDepth, signals.OldestWaiting, signals.WaitingRequests,
	signals.KVAllocatable, signals.Saturation, signals.Preemptions, signals.ColdStarts, signals.Routes, signals.FallbacksOK, signals.FallbacksFailed,
	signals.DeploymentState, signals.CooledDown, signals.Breaker, signals.DegradationStep, signals.ForecastError,
	signals.CanaryShare, signals.CanaryDecisions, signals.ShadowRequests,
	signals.AutoscaleReplicas, signals.AutoscaleAsks}

// Request outcomes, as the Requests signal's outcome label names them.
const (
	outCompleted = iota
	outRejected
	outFailed
	outTimedOut
	outCancelled
)

var outcomes = [...]string{outCompleted: "completed", outRejected: "rejected", outFailed: "failed",
	outTimedOut: "timed_out", outCancelled: "cancelled"}

// canaryActions are the rollouts' actions, the CanaryDecisions signal's
// action label, as the live gateway lists them.
var canaryActions = [...]string{sched.ActStart, sched.ActStepUp, sched.ActPromote, sched.ActHold, sched.ActResume, sched.ActRollback}

// Shadow copies' ends, as the ShadowRequests signal's outcome label names
// them.
const (
	shadowCompleted = iota
	shadowFailed
	shadowShed
	shadowCancelled
)

var shadowOutcomes = [...]string{shadowCompleted: "completed", shadowFailed: "failed", shadowShed: "shed",
	shadowCancelled: "cancelled"}

// rejectReasons are the rejection series created at zero: the core's
// reasons, upstream-quota (upstream 429s outlasted the retries, or, with
// deadline_check, every pool that may serve a request is throttled past its
// deadline) and jurisdiction-unavailable (every such pool is down), so the
// twin and the gateway have the same series.
var rejectReasons = []string{sched.ReasonTenantConcurrency, sched.ReasonTenantTokens, sched.ReasonQueueFull,
	sched.ReasonDeadline, sched.ReasonNoRoute, sched.ReasonUpstreamQuota, sched.ReasonUnavailable}

// metricsRec records Options.Metrics during a run: the hooks count what
// the runner does, and sample reads the run's state between events. It is
// given what it reads once, when the run starts — none of it is replaced
// during a run — rather than a pointer to the runner, so that what the
// series depend on is listed here.
type metricsRec struct {
	m      *Metrics
	served []bool // models some replica serves

	p        *plan
	s        *sim.Sim
	core     *sched.Core
	replicas []replicaRT // the runner's: built before the run, never resliced
	pools    []*PoolReport
	down     func(ri int) bool                         // the replica is down (ground truth)
	waiting  func(now time.Duration) [][]time.Duration // waitingAges of the runner's slab, which grows
	ladder   *reqengine.Ladder
	demand   *demand
	canaries *reqengine.Canaries
	scalers  []*scaler
}

// recordMetrics starts recording m for r's run, with its zero series.
func recordMetrics(m *Metrics, r *runner) *metricsRec {
	mr := &metricsRec{m: m, served: make([]bool, len(r.p.sc.Models)), p: r.p, s: r.s, core: r.core,
		replicas: r.replicas, pools: r.pools, ladder: r.ladder, demand: r.demand, canaries: r.canaries, scalers: r.scalers,
		down: r.faultWorld.down,
		waiting: func(now time.Duration) [][]time.Duration {
			return waitingAges(r.reqs, len(r.p.sc.Classes), now)
		}}
	for _, rp := range r.p.replicas {
		mr.served[rp.Model] = true
	}
	mr.zero()
	return mr
}

// zero creates at zero the counters whose label values the scenario
// fixes, as the live gateway does, so that both have the same series from
// the first instant: requests by model, class and outcome; rejections by
// class and reason; 429s by pool; fallbacks along each model's chain when
// the policy falls back.
func (mr *metricsRec) zero() {
	m, p := mr.m, mr.p
	sc := p.sc
	for mi := range sc.Models {
		for ci := range sc.Classes {
			for o := range outcomes {
				m.get(mRequests, cellKey{int32(mi), int32(ci), int32(o)})
			}
		}
		if fb := p.core.Models[mi].Fallbacks; p.core.Fallback && len(fb) > 0 {
			m.get(mFallbacksFailed, cellKey{int32(mi)})
			for _, f := range fb {
				m.get(mFallbacksOK, cellKey{int32(mi), int32(f)})
			}
		}
	}
	for ci := range sc.Classes {
		for _, reason := range rejectReasons {
			m.get(mRejected, cellKey{int32(ci), m.reason(reason)})
		}
	}
	for pi, pp := range p.pools {
		if pp.Spec.Replicas > 0 {
			m.get(mThrottled, cellKey{int32(pi)})
		}
	}
}

func (m *Metrics) init() error {
	if m.Step <= 0 {
		return fmt.Errorf("metrics: step %v, want > 0", m.Step)
	}
	m.Times, m.Families, m.fams = nil, nil, make([]*famRec, mCount)
	m.reasons, m.names, m.fellBack = map[string]int32{}, nil, map[uint64]bool{}
	for _, sig := range signals.All {
		f := slices.IndexFunc(twinSignals[:], func(s signals.Signal) bool { return s.Name == sig.Name })
		if f < 0 {
			return fmt.Errorf("metrics: the twin does not record %s, a series of the catalogue (a twin bug)", sig.Name)
		}
		fr := &famRec{fam: &Family{Signal: sig}, cells: map[cellKey]*cell{}}
		switch sig.Name {
		case signals.TPOT.Name:
			fr.buckets = signals.TokenBuckets
		case signals.TTFT.Name, signals.E2E.Name:
			fr.buckets = signals.LatencyBuckets
		}
		fr.fam.Buckets = fr.buckets
		m.fams[f] = fr
		m.Families = append(m.Families, fr.fam)
	}
	for f, fr := range m.fams {
		if fr == nil {
			return fmt.Errorf("metrics: %s is not in the catalogue (a twin bug)", twinSignals[f].Name)
		}
	}
	return nil
}

// get returns the cell of key in family f, creating it.
func (m *Metrics) get(f int, k cellKey) *cell {
	fr := m.fams[f]
	c := fr.cells[k]
	if c == nil {
		c = &cell{key: k, created: len(m.Times)}
		if fr.buckets != nil {
			c.counts = make([]uint64, len(fr.buckets)+1)
		}
		fr.cells[k] = c
		fr.order = append(fr.order, c)
	}
	return c
}

func (m *Metrics) add(f int, k cellKey, v float64) { m.get(f, k).v += v }

func (m *Metrics) set(f int, k cellKey, v float64) { m.get(f, k).v = v }

func (m *Metrics) observe(f int, k cellKey, v float64) {
	c := m.get(f, k)
	c.counts[sort.SearchFloat64s(m.fams[f].buckets, v)]++
	c.count++
	c.sum += v
}

func (m *Metrics) reason(s string) int32 {
	id, ok := m.reasons[s]
	if !ok {
		id = int32(len(m.names))
		m.reasons[s] = id
		m.names = append(m.names, s)
	}
	return id
}

// snapshot appends every cell's value at instant at; labels names a new
// series' label values from its key.
func (m *Metrics) snapshot(at time.Duration, labels func(f int, k cellKey) []string) {
	i := len(m.Times)
	m.Times = append(m.Times, at)
	for f, fr := range m.fams {
		for _, c := range fr.order {
			if c.s != nil {
				continue
			}
			c.s = &Series{Labels: labels(f, c.key), First: i}
			if c.created > 0 && i > 0 && fr.fam.Signal.Type != signals.Gauge {
				// It moved since the last instant, where it was zero.
				c.s.First = i - 1
				if fr.buckets != nil {
					c.s.Hist = append(c.s.Hist, HistPoint{Buckets: make([]uint64, len(fr.buckets))})
				} else {
					c.s.Values = append(c.s.Values, 0)
				}
			}
			fr.fam.Series = append(fr.fam.Series, c.s)
		}
		for _, c := range fr.order {
			if fr.buckets == nil {
				c.s.Values = append(c.s.Values, c.v)
				continue
			}
			p := HistPoint{Buckets: make([]uint64, len(fr.buckets)), Count: c.count, Sum: c.sum}
			var n uint64
			for b := range fr.buckets {
				n += c.counts[b]
				p.Buckets[b] = n
			}
			c.s.Hist = append(c.s.Hist, p)
		}
	}
}

// finish sorts every family's series by label values.
func (m *Metrics) finish() {
	for _, fr := range m.fams {
		slices.SortFunc(fr.fam.Series, func(a, b *Series) int { return slices.Compare(a.Labels, b.Labels) })
	}
}

// Keys: which index goes where, per family.
//
//	TTFT, TPOT, E2E    served model, pool (-1: answered from cache), class
//	Requests           requested model, class, outcome
//	Rejected           class, reason
//	Throttled, KVAllocatable, Preemptions, ColdStarts,
//	DeploymentState, CooledDown   pool
//	QueueDepth         model
//	Routes, FallbacksOK   requested model, served model
//	FallbacksFailed    requested model
//	Breaker            replica
//	ForecastError, OldestWaiting, WaitingRequests   class
//	Saturation, DegradationStep   none
//	CanaryShare        canary
//	CanaryDecisions    canary, action (canaryActions)
//	ShadowRequests     canary, outcome (shadowOutcomes)
//	AutoscaleReplicas  pool, state (signals.AutoscaleStates)
//	AutoscaleAsks      pool, outcome (signals.AutoscaleOutcomes)
func (mr *metricsRec) labels(f int, k cellKey) []string {
	sc := mr.p.sc
	model := func(i int32) string { return sc.Models[i].Name }
	class := func(i int32) string { return sc.Classes[i].Name }
	pool := func(i int32) []string {
		if i < 0 {
			return []string{"", ""} // answered from the ladder's cache: no pool
		}
		pp := &mr.p.pools[i]
		return []string{pp.Spec.Name, pp.Spec.Region}
	}
	switch f {
	case mTTFT, mTPOT, mE2E:
		return append(append([]string{model(k[0])}, pool(k[1])...), class(k[2]))
	case mRequests:
		return []string{model(k[0]), class(k[1]), outcomes[k[2]]}
	case mRejected:
		return []string{class(k[0]), mr.m.names[k[1]]}
	case mThrottled, mKVAllocatable, mPreemptions, mColdStarts, mDeploymentState, mCooledDown:
		return pool(k[0])
	case mQueueDepth:
		return []string{model(k[0])}
	case mRoutes, mFallbacksOK:
		return []string{model(k[0]), model(k[1])}
	case mFallbacksFailed:
		return []string{model(k[0])}
	case mBreaker:
		// The replica label is the core's replica index, as the gateway's
		// breaker series number them.
		return append(pool(int32(mr.replicas[k[0]].pool)), strconv.Itoa(int(k[0])))
	case mForecastError, mOldestWaiting, mWaitingRequests:
		return []string{class(k[0])}
	case mCanaryShare:
		return []string{sc.Canaries[k[0]].Name}
	case mCanaryDecisions:
		return []string{sc.Canaries[k[0]].Name, canaryActions[k[1]]}
	case mShadowRequests:
		return []string{sc.Canaries[k[0]].Name, shadowOutcomes[k[1]]}
	case mAutoscaleReplicas:
		return []string{mr.p.pools[k[0]].Spec.Name, signals.AutoscaleStates[k[1]]}
	case mAutoscaleAsks:
		return []string{mr.p.pools[k[0]].Spec.Name, signals.AutoscaleOutcomes[k[1]]}
	}
	return nil
}

// The runner's hooks. Each is a no-op on a nil recorder: a run without
// Options.Metrics.

// offered counts, after an offer to admission, the provider 429s a
// gateway would have met: the twin's core knows each pool's provider quota
// and holds a request rather than send it to a spent one, so an offer
// counts one throttled attempt for every pool that serves its model (and
// may serve its tenant) and whose quota is spent now.
func (mr *metricsRec) offered(req *request) {
	if mr == nil {
		return
	}
	m := mr.m
	now := mr.s.Now()
	tj := mr.p.sc.Tenants[req.Core.Tenant].Jurisdiction
	for pi := range mr.p.pools {
		pp := &mr.p.pools[pi]
		if !mr.core.Serves(pi, req.Core.Served) ||
			(tj != "" && pp.Region.Jurisdiction != tj && !mr.p.core.IgnoreResidency) {
			continue
		}
		if mr.core.QuotaSpent(now, pi) {
			m.add(mThrottled, cellKey{int32(pi)}, 1)
		}
	}
}

// routed counts a dispatch starting: requested and served model.
func (mr *metricsRec) routed(req *request) {
	if mr != nil {
		m := mr.m
		m.add(mRoutes, cellKey{int32(req.Core.Model), int32(req.Core.Served)}, 1)
		if req.Core.Fallback {
			m.fellBack[req.Core.ID] = true
		}
	}
}

// rejected counts a refusal by class and reason.
func (mr *metricsRec) rejected(req *request, reason string) {
	if mr != nil {
		m := mr.m
		m.add(mRejected, cellKey{int32(req.Core.Class), m.reason(reason)}, 1)
	}
}

// completed observes a completed request's latencies and counts a
// fallback that served it.
func (mr *metricsRec) completed(req *request, sv *served) {
	if mr == nil {
		return
	}
	m := mr.m
	pool := int32(-1)
	if ri := req.Core.Replica; ri >= 0 {
		pool = int32(mr.replicas[ri].pool)
	}
	k := cellKey{int32(req.Core.Served), pool, int32(sv.class)}
	m.observe(mTTFT, k, sv.ttft.Seconds())
	m.observe(mE2E, k, sv.e2e.Seconds())
	if sv.output > 1 {
		m.observe(mTPOT, k, sv.tpot().Seconds())
	}
	if req.Core.Fallback {
		m.add(mFallbacksOK, cellKey{int32(req.Core.Model), int32(req.Core.Served)}, 1)
	}
}

// finished counts a request's outcome, and a failed fallback, as the
// live gateway does: a request dispatched to a fallback at least once that
// still ended failed, rejected or timed out.
func (mr *metricsRec) finished(req *request, outcome func(*Counts), answered bool) {
	if mr == nil {
		return
	}
	m := mr.m
	var c Counts
	outcome(&c)
	o := outCompleted
	switch {
	case c.Rejected > 0:
		o = outRejected
	case c.Failed > 0:
		o = outFailed
	case c.TimedOut > 0:
		o = outTimedOut
	case c.Cancelled > 0:
		o = outCancelled
	}
	m.add(mRequests, cellKey{int32(req.Core.Model), int32(req.Core.Class), int32(o)}, 1)
	if m.fellBack[req.Core.ID] {
		delete(m.fellBack, req.Core.ID)
		if !answered && o != outCancelled {
			m.add(mFallbacksFailed, cellKey{int32(req.Core.Model)}, 1)
		}
	}
}

// sample reads the run's state at now and records every series.
// The router's-view series (queues, saturation, breakers, deployment
// state) are computed as the live gateway computes them from the same
// core, so a dashboard reads both alike; KV, preemptions and cold starts
// come from the replicas, as the nodes' do.
func (mr *metricsRec) sample() {
	m := mr.m
	now := mr.s.Now()
	for mi, served := range mr.served {
		if served {
			m.set(mQueueDepth, cellKey{int32(mi)}, float64(mr.core.QueueLen(mi)))
		}
	}
	// Every class, 0 when none of its requests waits for a first token,
	// as the gateway serves them.
	for ci, ages := range mr.waiting(now) {
		oldest := time.Duration(0)
		for _, a := range ages {
			oldest = max(oldest, a)
		}
		m.set(mOldestWaiting, cellKey{int32(ci)}, oldest.Seconds())
		m.set(mWaitingRequests, cellKey{int32(ci)}, float64(len(ages)))
	}
	type poolAcc struct {
		kv              int64
		engines         bool
		n, closed, open int
		preemptions     uint64
	}
	acc := make([]poolAcc, len(mr.p.pools))
	var slots, busy int
	for ri := range mr.replicas {
		rt := &mr.replicas[ri]
		if rt.absent {
			continue // an autoscaled pool's replica not provisioned
		}
		a := &acc[rt.pool]
		a.n++
		br := mr.core.BreakerView(now, ri)
		switch br {
		case sched.Closed:
			a.closed++
		case sched.Open:
			a.open++
		}
		m.set(mBreaker, cellKey{int32(ri)}, float64(br))
		busy += mr.core.Inflight(ri)
		slots += mr.p.core.Replicas[ri].MaxBatch
		if rt.eng != nil {
			a.engines = true
			a.preemptions += rt.eng.Preemptions
			// A replica loading its model or down has nothing to
			// allocate (a node that is down exports nothing).
			if !rt.loading && !mr.down(ri) {
				a.kv += rt.eng.KVCapacity() - rt.eng.KVUsed()
			}
		}
	}
	for pi := range mr.p.pools {
		a := &acc[pi]
		k := cellKey{int32(pi)}
		m.set(mColdStarts, k, float64(mr.pools[pi].ColdStarts))
		if a.n == 0 {
			continue
		}
		// LiteLLM's deployment state: 0 every breaker closed, 2 every
		// breaker open, 1 otherwise.
		state := 1.0
		switch {
		case a.closed == a.n:
			state = 0
		case a.open == a.n:
			state = 2
		}
		m.set(mDeploymentState, k, state)
		m.set(mCooledDown, k, float64(a.open))
		if a.engines {
			m.set(mKVAllocatable, k, float64(a.kv))
			m.set(mPreemptions, k, float64(a.preemptions))
		}
	}
	sat := 0.0
	if slots > 0 {
		sat = min(float64(busy)/float64(slots), 1)
	}
	m.set(mSaturation, cellKey{}, sat)
	step := 0
	if mr.ladder != nil {
		step = mr.ladder.Engaged()
	}
	m.set(mDegradationStep, cellKey{}, float64(step))
	mr.demand.rollTo(now)
	for ci, e := range mr.demand.lastErrors() {
		if e >= 0 {
			m.set(mForecastError, cellKey{int32(ci)}, e)
		}
	}
	mr.sampleCanaries()
	mr.sampleAutoscale()
	m.snapshot(now, mr.labels)
}

// sampleCanaries records each canary's share now, its rollout's decisions
// so far by action and its shadow copies so far by how they ended, every
// series from the first instant (at zero), as the live gateway creates
// them; nothing without canaries. A copy still running is in no outcome
// yet.
func (mr *metricsRec) sampleCanaries() {
	if mr.canaries == nil {
		return
	}
	m := mr.m
	ro := mr.canaries.Rollouts()
	for k := range ro.Len() {
		ck := int32(k)
		m.set(mCanaryShare, cellKey{ck}, mr.core.CanaryShare(k))
		rep := ro.Report(k)
		var acts [len(canaryActions)]float64
		for _, d := range rep.Decisions {
			if a := slices.Index(canaryActions[:], d.Action); a >= 0 {
				acts[a]++
			}
		}
		for a, n := range acts {
			m.set(mCanaryDecisions, cellKey{ck, int32(a)}, n)
		}
		if mr.p.sc.Canaries[k].Shadow == nil {
			continue
		}
		for o, n := range [...]uint64{shadowCompleted: rep.Shadow.Succeeded, shadowFailed: rep.Shadow.Failed,
			shadowShed: rep.ShadowShed, shadowCancelled: rep.ShadowCancelled} {
			m.set(mShadowRequests, cellKey{ck, int32(o)}, float64(n))
		}
	}
}

// sampleAutoscale records each autoscaled pool's replicas by state now
// and its asks so far by outcome, every series from the first instant, as
// the live gateway creates them.
func (mr *metricsRec) sampleAutoscale() {
	m := mr.m
	for _, sc := range mr.scalers {
		pk := int32(sc.pool)
		c, t := sc.sc.Counts(0), sc.sc.Tally()
		for i, n := range []int{c.Requested, c.Provisioning, c.Warming, c.Serving, c.Draining} {
			m.set(mAutoscaleReplicas, cellKey{pk, int32(i)}, float64(n))
		}
		for i, n := range []uint64{t.Granted, t.RefusedBy[sched.RefusedReservation], t.RefusedBy[sched.RefusedStockout], t.RefusedBy[sched.RefusedQuota]} {
			m.set(mAutoscaleAsks, cellKey{pk, int32(i)}, float64(n))
		}
	}
}

// runTo is the runner's runTo with Metrics: it stops at every sampling instant up
// to until and samples there.
func (mr *metricsRec) runTo(until time.Duration, runTo func(time.Duration) bool) bool {
	m := mr.m
	step := m.Step
	for {
		next := time.Duration(0)
		if n := len(m.Times); n > 0 {
			next = (m.Times[n-1]/step + 1) * step
		}
		if next > until {
			break
		}
		mr.s.RunUntil(next)
		mr.sample()
	}
	done := runTo(until)
	if done {
		if n := len(m.Times); n == 0 || m.Times[n-1] < mr.s.Now() {
			mr.sample()
		}
	}
	return done
}
