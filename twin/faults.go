package twin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/sim"
	"github.com/fleetdrill/fleetdrill/twin/fleet"
	"github.com/fleetdrill/fleetdrill/twin/latency"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// The twin's fault injector. A fault changes the ground truth — replicas go
// down, fail a share of requests, slow down, lose quota or restart — and
// never tells the scheduler core: the core learns from request results and
// probes through its circuit breakers (twin/sched/health.go), so detection
// takes time, as it does in a real gateway.
//
// What each kind does is its effect (effects.go), picked once from the
// spec's kind: this file runs faults — resolves their targets, draws their
// replicas, starts and ends them, keeps the replicas' fault state and
// accounts for detection, mitigation and recovery — without knowing one
// kind from another. What the kinds differ in beyond their effect (a
// notice before the start, the HTTP status that detects them) is in their
// faults.Traits. To add a kind: its catalogue entry in faults/, and its
// effect type in effects.go (see the faults package doc).
//
// A replica that is down either refuses connections (node loss, a restart:
// attempts fail at once) or swallows them (a regional outage, a network
// partition: attempts fail after the health timeout). Requests running on a
// replica when it goes down fail the same way.

// FaultReport is what one fault did.
type FaultReport struct {
	Spec   string  `json:"spec"`
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"` // -1: lasted to the end of the run
	// Times from the start of the fault to its detection by the gateway (a
	// breaker opening on an affected replica, or the first refusal for
	// quota and retirement), to its mitigation (the first request served
	// by an unaffected replica after detection), and from its end to
	// recovery (the first request served again by an affected replica).
	// Never (null in JSON) when it did not happen.
	TimeToDetectS   Seconds `json:"time_to_detect_s"`
	TimeToMitigateS Seconds `json:"time_to_mitigate_s"`
	TimeToRecoverS  Seconds `json:"time_to_recover_s"`
	// EffectiveS is when the fault takes effect: its start, or for a
	// fault given with a notice (a retirement) the withdrawal (at=); its
	// detection and mitigation count from its start, the notice, so a
	// mitigation under EffectiveS - StartS moved traffic before anything
	// went. TimeToImpactS is from EffectiveS to the first request it cost
	// (ended without an answer); Never: none did.
	EffectiveS    float64 `json:"effective_s"`
	TimeToImpactS Seconds `json:"time_to_impact_s"`
	// RequestsLost ended without an answer (failed after their retries,
	// rejected or timed out) while the fault was active.
	RequestsLost uint64 `json:"requests_lost"`
	// SLO attainment of requests arriving during the fault, and in the
	// ten minutes after it ended; a request with no answer is a miss.
	// FinishedDuring and FinishedAfter count the requests each is of: of
	// none it is null (no data), and an expectation on it says so.
	SLOAttainmentDuring Ratio  `json:"slo_attainment_during"`
	SLOAttainmentAfter  Ratio  `json:"slo_attainment_after"`
	FinishedDuring      uint64 `json:"finished_during"`
	FinishedAfter       uint64 `json:"finished_after"`
	// NotMitigatedFor names a tenant the fault displaced after its
	// detection and never served elsewhere ("" when none): the reason
	// TimeToMitigateS is -1 though other traffic moved.
	NotMitigatedFor string `json:"not_mitigated_for,omitempty"`
	// What the fault did to each tenant and class (Impact); every one is
	// listed, touched or not, so expectations resolve before the run.
	Tenants map[string]*Impact `json:"tenants"`
	Classes map[string]*Impact `json:"classes"`

	during, after sloCount
}

type sloCount struct{ met, done uint64 }

// faultRT is a fault during the run.
type faultRT struct {
	spec     faults.Spec
	label    string
	eff      effect        // what its kind does (effects.go)
	traits   faults.Traits // its kind's
	replicas []int         // affected replicas, resolved when it starts
	pools    []int
	models   []int // model-retirement
	active   bool
	start    time.Duration
	end      time.Duration // 0: none

	endTimer                       sim.Timer     // the scheduled end, so a drill can move it
	detected, mitigated, recovered time.Duration // -1: not yet
	impacted                       time.Duration // the first request lost from effective(); -1: none yet
	lost                           uint64
	quotas                         []*providerQuota // quota-exhaustion: per pool in pools
	report                         *FaultReport

	tenants, classes map[int]*impactRT // by index; nil until a request ends (impact.go)
}

// providerQuota is a provider's quota while a quota-exhaustion fault holds
// it down: ground truth the core is not told of. It learns of it from the
// 429s the provider answers (sched.Core.Throttled), as a live gateway does.
// The buckets start empty: the quota is exhausted when the fault begins.
type providerQuota struct {
	rpm, tpm float64 // both zero: nothing gets through
	req, tok float64
	last     time.Duration
}

// zeroQuotaRetryAfter is the Retry-After a provider with no quota left
// answers: the emulated node's default (internal/node.DefaultRetryAfter),
// so that the twin and a live fleet throttle alike.
const zeroQuotaRetryAfter = 30 * time.Second

// takeAll charges one request of tokens at now to every active quota of a
// pool, or returns the Retry-After the provider answers instead: the
// longest wait until all their buckets would take it, in whole seconds, as
// HTTP gives it (nothing is charged then).
func takeAll(qs []*providerQuota, now time.Duration, tokens int) time.Duration {
	var wait time.Duration
	for _, q := range qs {
		wait = max(wait, q.wait(now, tokens))
	}
	if wait > 0 {
		return wait
	}
	for _, q := range qs {
		q.req--
		q.tok -= min(float64(tokens), q.tpm)
	}
	return 0
}

// wait refills q's buckets to now and returns how long until they would
// take one request of tokens (0: now).
func (q *providerQuota) wait(now time.Duration, tokens int) time.Duration {
	if q.rpm == 0 || q.tpm == 0 {
		return zeroQuotaRetryAfter
	}
	dt := (now - q.last).Seconds()
	q.last = now
	q.req = min(q.rpm, q.req+q.rpm/60*dt)
	q.tok = min(q.tpm, q.tok+q.tpm/60*dt)
	// A request larger than the burst waits for a full bucket rather than
	// forever, as the core's own buckets do.
	need := min(float64(tokens), q.tpm)
	wait := max((1-q.req)/(q.rpm/60), (need-q.tok)/(q.tpm/60))
	if wait > 0 {
		return time.Duration(math.Ceil(wait)) * time.Second
	}
	return 0
}

// replica fault state, recomputed from the active faults.
type replicaFault = faults.Condition

// Label names a fault in reports and scoped expectations: its kind and
// target, e.g. regional-outage(us-east).
func Label(s faults.Spec) string {
	t := s.Target
	var parts []string
	for _, v := range []string{t.Region, t.Pool, t.Provider, t.Model, t.Tenant, t.Accelerator} {
		if v != "" {
			parts = append(parts, v)
		}
	}
	return fmt.Sprintf("%s(%s)", s.Kind, strings.Join(parts, ","))
}

// labels are the specs' labels as reports and scoped expectations name
// them: a repeated label gets #2, #3….
func labels(specs []faults.Spec) []string {
	out := make([]string, len(specs))
	seen := map[string]int{}
	for i, sp := range specs {
		l := Label(sp)
		out[i] = l
		if n := seen[l]; n > 0 {
			out[i] = fmt.Sprintf("%s#%d", l, n+1)
		}
		seen[l]++
	}
	return out
}

// FaultLabels are the labels a run of these fault lines gives its faults.
func FaultLabels(lines []string) ([]string, error) {
	specs, err := faults.ParseAll(lines)
	if err != nil {
		return nil, err
	}
	return labels(specs), nil
}

// newFaults parses a scenario's fault lines into faults with their labels
// (a repeated label gets #2, #3…) and active spans; what they hit is
// resolved later.
func newFaults(lines []string) ([]*faultRT, error) {
	specs, err := faults.ParseAll(lines)
	if err != nil {
		return nil, err
	}
	var out []*faultRT
	names := labels(specs)
	for i, sp := range specs {
		out = append(out, newFaultRT(sp, names[i]))
	}
	return out, nil
}

// newFaultRT is a fault's run-time record, nothing detected yet: it starts
// at its time (a retirement at its notice: faults.Spec.Start) and ends when
// its spec says. Runs, drills and the live recorder all make theirs here.
func newFaultRT(sp faults.Spec, label string) *faultRT {
	f := &faultRT{spec: sp, label: label, eff: effectOf(sp.Kind), traits: sp.Kind.Traits(), start: sp.Start(),
		detected: -1, mitigated: -1, recovered: -1, impacted: -1, report: &FaultReport{Spec: sp.String()}}
	if end, ok := sp.End(); ok {
		f.end = end
	}
	return f
}

func spansOf(fs []*faultRT) []faultSpan {
	var out []faultSpan
	for _, f := range fs {
		out = append(out, faultSpan{label: f.label, start: f.start, end: f.end})
	}
	return out
}

func (w *faultWorld) faultSpans() []faultSpan { return spansOf(w.faults) }

// down reports whether replica ri is down now (ground truth).
func (w *faultWorld) down(ri int) bool { return w.faultState[ri].Down }

// faultWorld is the faults' ground truth during a run: the faults, each
// replica's condition and the providers' quotas, none of which the core is
// told of. It acts on the replicas it hits through the core (readiness,
// what pools serve, what breakers and probes observe), the replicas'
// loading flag, the jobs on them and the hooks below. The requests caught
// on a replica that goes down are the runner's to fail (failWork): what
// becomes of them — retries, hedges, copies — is request flow, not ground
// truth.
//
// The runner embeds it so that canary.go, hedge.go, autoscale.go and the
// dispatch path of run.go, being moved into the request engine, keep
// reading r.faults, r.faultState, r.faultAtDispatch and r.throttled
// unchanged; once they have moved it can be a named field.
type faultWorld struct {
	faults     []*faultRT
	faultState []replicaFault       // per replica, recomputed from the active faults
	quota      [][]*providerQuota   // per pool: the active quota faults' ground truth, in start order
	restarts   *reqengine.Restarts  // the replicas restarted in place, loading (the engine's rule)
	onEjection func(sched.Ejection) // Options.OnEjection

	p            *plan
	s            *sim.Sim
	core         *sched.Core
	eng          *reqengine.Engine // the runner's: a probe's result is stepped to it
	replicas     []replicaRT       // the runner's: built before the run, never resliced
	pools        []*PoolReport
	jobs         *jobsRT
	end          time.Duration
	log          *timelineLog                                                       // the runner's
	dispatch     func()                                                             // carry out what the core decided since
	failWork     func(ri int)                                                       // fail the requests on replica ri, just gone down
	stateChanged func()                                                             // the replicas' fault state was recomputed (the P/D links read it)
	seed         uint64                                                             // the run's: an attempt's draw against its replica's failure rate (sched.AttemptFate)
	live         func() bool                                                        // requests are alive or may still arrive: probes go on
	ended        func(tenant, model int, arrived time.Duration, met, inFlight bool) // the tally's, for a measured request
}

// initFaults parses the scenario's faults and resolves their targets.
func (w *faultWorld) initFaults() error {
	fs, err := newFaults(w.p.sc.Faults)
	if err != nil {
		return err
	}
	w.faultState = make([]replicaFault, len(w.replicas))
	w.quota = make([][]*providerQuota, len(w.p.pools))
	for i, f := range fs {
		if err := w.p.resolveFault(f); err != nil {
			return fmt.Errorf("faults[%d] %q: %w", i, f.spec.String(), err)
		}
	}
	w.faults = fs
	return nil
}

// resolveFault finds the pools and models a fault hits; replicas are chosen
// when it starts (the blast radius draws from a seeded stream).
func (p *plan) resolveFault(f *faultRT) error {
	t := f.spec.Target
	for pi, pp := range p.pools {
		switch {
		case t.Pool != "" && pp.Spec.Name != t.Pool:
		case t.Region != "" && pp.Spec.Region != t.Region:
		case t.Provider != "" && pp.Spec.Provider != t.Provider:
		case t.Model != "" && !slices.Contains(pp.Spec.Models, t.Model):
		case t.Accelerator != "" && pp.Spec.Accelerator != t.Accelerator:
		default:
			f.pools = append(f.pools, pi)
		}
	}
	if t.Model != "" {
		m, ok := p.models[t.Model]
		if !ok {
			return fmt.Errorf("no model %s in the scenario", t.Model)
		}
		f.models = []int{m}
	}
	if len(f.pools) == 0 {
		return fmt.Errorf("it hits no pool of the scenario")
	}
	return nil
}

func (w *faultWorld) scheduleFaults() {
	for _, f := range w.faults {
		w.s.At(f.start, func() { w.startFault(f) })
		if f.end > 0 {
			f.endTimer = w.s.At(f.end, func() { w.endFault(f) })
		}
	}
}

// chooseReplicas picks the blast radius among the fault's pools' replicas.
func (w *faultWorld) chooseReplicas(f *faultRT) []int {
	return w.p.faultReplicas(f, w.s.Rand("faults/"+f.label), func(ri int) bool { return w.replicas[ri].absent })
}

// faultReplicas picks the blast radius among the fault's pools' replicas,
// shuffled by rng (the run's "faults/LABEL" stream, used for nothing else, so
// the choice is a function of the scenario and seed alone). A fault with a
// count or a percentage draws among the replicas absent does not skip (an
// autoscaled pool's not provisioned: a lost node is one that runs); one on
// all replicas takes those too, so that a replica provisioned during it is
// hit as well. absent may be nil.
func (p *plan) faultReplicas(f *faultRT, rng *rand.Rand, absent func(int) bool) []int {
	var all []int
	some := f.spec.Radius != (faults.Radius{})
	for ri, rp := range p.replicas {
		if some && absent != nil && absent(ri) {
			continue
		}
		if slices.Contains(f.pools, rp.Pool) {
			if len(f.models) > 0 && !f.eff.onModel() && !slices.Contains(f.models, rp.Model) {
				continue
			}
			all = append(all, ri)
		}
	}
	n := len(all)
	switch rad := f.spec.Radius; {
	case rad.Count > 0:
		n = min(rad.Count, len(all))
	case rad.Percent > 0:
		n = int(math.Ceil(rad.Percent / 100 * float64(len(all))))
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	out := all[:n]
	slices.Sort(out)
	return out
}

// startFault starts a fault: its replicas are drawn, its effect starts,
// and the replicas' fault state is recomputed.
func (w *faultWorld) startFault(f *faultRT) {
	now := w.s.Now()
	f.active = true
	f.replicas = w.chooseReplicas(f)
	w.log.addEvent(f.startEvent(now))
	if ev, ok := f.noticeDetected(now); ok {
		w.log.addEvent(ev)
	}
	f.eff.start(w, f)
	w.restart(f, f.spec.Kind.Traits().Restarts.AtStart)
	w.applyFaults()
}

// endFault ends a fault: its effect is undone, the replicas' fault state
// recomputed, and what waited is dispatched.
func (w *faultWorld) endFault(f *faultRT) {
	now := w.s.Now()
	f.active = false
	w.log.addEvent(f.endEvent(now))
	f.eff.end(w, f)
	w.restart(f, f.spec.Kind.Traits().Restarts.AtEnd)
	w.applyFaults()
	w.dispatch()
}

// restart restarts f's replicas (restartReplica) when its kind restarts
// them now (faults.Traits.Restarts: a live run reads the same), then
// offers again what waited: the requests the restarts failed and those a
// driver upgrade's route change left with no pool.
func (w *faultWorld) restart(f *faultRT, now bool) {
	if !now {
		return
	}
	for _, ri := range f.replicas {
		w.restartReplica(ri)
	}
	w.dispatch()
}

// applyFaults recomputes every replica's fault state from the active
// faults, and fails the work of replicas that just went down.
func (w *faultWorld) applyFaults() {
	prev := slices.Clone(w.faultState)
	clear(w.faultState)
	for _, f := range w.faults {
		if !f.active {
			continue
		}
		for _, ri := range f.replicas {
			w.faultState[ri] = w.faultState[ri].With(f.eff.share(f.spec))
		}
	}
	for ri := range w.faultState {
		if w.faultState[ri].Down && !prev[ri].Down {
			w.failWork(ri)
			w.jobs.lost(ri)
		}
	}
	if w.stateChanged != nil {
		w.stateChanged()
	}
}

// replicaFault is replica ri's fault state now (none when the run has no
// faults).
func (w *faultWorld) replicaFault(ri int) replicaFault {
	if w.faultState == nil {
		return replicaFault{}
	}
	return w.faultState[ri]
}

// failReplicaWork fails every request on replica ri: at once if it refuses,
// after the health timeout if it swallows connections.
func (r *runner) failReplicaWork(ri int) {
	rt := &r.replicas[ri]
	var victims []*request
	for _, req := range r.reqs {
		if req.state == stRunning && (req.Core.Replica == ri || (req.pd != nil && req.pd.phase != pdNone && req.pd.at == ri)) {
			victims = append(victims, req)
		}
		if (req.state == stRunning || req.state == stFailing) && req.hedgeSeq != nil && req.hedgeAt == ri {
			// A duplicate on the failed replica is lost; the original
			// carries on.
			r.eng.Step(r.s.Now(), reqengine.Event{Kind: reqengine.DuplicateGone, Req: &req.Req})
		}
	}
	r.dispatch() // the lost duplicates are cancelled
	for _, req := range victims {
		if req.Core.Replica != ri && r.pd.sourceLost(req) {
			continue // its decode server's to handle (kv_load_failure_policy)
		}
		r.pd.abort(req, req.Core.Replica == ri) // its remote prefill, on ri or elsewhere
		if rt.eng != nil {
			rt.eng.Cancel(r.s.Now(), req.seq)
			req.held = req.seq.Held()
		} else if rt.svcReq == req {
			rt.timer.Stop()
			rt.svcReq = nil
		}
		r.failAttempt(req, ri, attemptFate{fail: true, delay: r.faultWorld.downDelay(ri)})
	}
	if rt.eng != nil {
		r.rearm(ri)
	}
}

func (w *faultWorld) downDelay(ri int) time.Duration {
	if w.faultState[ri].Refuse {
		return 0
	}
	return w.p.sc.Policy.Health.Timeout.D()
}

// restartReplica restarts a replica in place: it loads its model again
// for its pool's cold start, by the request engine's rule (Restart),
// unless it loads already (a cold start of its own: Busy).
func (w *faultWorld) restartReplica(ri int) {
	rt := &w.replicas[ri]
	w.eng.Step(w.s.Now(), reqengine.Event{Kind: reqengine.Restart, Replica: ri,
		After: w.p.pools[rt.pool].Spec.ColdStart.D(), Busy: rt.loading})
}

// restarted carries out a restart the engine took: the replica's work
// fails at once, as on a refused connection, and its engine idles while
// it loads (the twin counts a cold start).
func (w *faultWorld) restarted(ri int) {
	rt := &w.replicas[ri]
	w.faultState[ri].Down, w.faultState[ri].Refuse = true, true
	w.failWork(ri)
	w.faultState[ri].Down, w.faultState[ri].Refuse = false, false
	rt.loading = true
	w.pools[rt.pool].ColdStarts++
}

// retire removes a model from the fault's pools; what was queued for it is
// offered to admission again (its fallback chain, or a refusal).
func (w *faultWorld) retire(f *faultRT) {
	now := w.s.Now()
	for _, pi := range f.pools {
		for _, m := range f.models {
			w.core.SetServes(pi, m, false)
		}
	}
	if f.detected < 0 {
		f.detected = now // the next request gets model_not_found
	}
	w.log.addEvent(timelineEvent(now, "route-change", fmt.Sprintf("%s: %s no longer served by %d pools (route version %d)", f.label,
		f.spec.Target.Model, len(f.pools), w.core.Ready().RouteVersion)))
	w.dispatch() // offers again the requests no pool serves any more
}

// upgradeDriver changes the fault's pools to a driver (and runtime) and
// re-evaluates every pairing; the replicas restart after it (restart).
func (w *faultWorld) upgradeDriver(f *faultRT, driver, runtime string) {
	now := w.s.Now()
	for _, pi := range f.pools {
		pp := &w.p.pools[pi]
		fp := fleet.Pool{Name: pp.Spec.Name, Region: pp.Spec.Region, Accelerator: pp.Spec.Accelerator,
			GPUsPerReplica: pp.Spec.GPUsPerReplica, Runtime: pp.Spec.Runtime, Driver: driver, Models: pp.Spec.Models,
			Profiles: profilesOf(w.p, pi), Service: pp.Spec.Service != nil}
		if runtime != "" {
			fp.Runtime = runtime
		}
		for mi := range w.p.sc.Models {
			if !w.p.core.Pools[pi].Serves[mi] {
				continue // never served: nothing to re-evaluate
			}
			v := w.p.registry.Check(&fp, w.p.sc.Models[mi].Name)
			ok := v.Servable && (v.Tested || w.p.sc.Policy.Routing.AllowUntested)
			if w.core.Serves(pi, mi) != ok {
				w.core.SetServes(pi, mi, ok)
				what := "compatible again"
				if !ok {
					what = "incompatible: " + strings.Join(v.Reasons, "; ")
					if f.active && f.detected < 0 {
						// The compatibility registry is the control
						// plane's: it flags the pairing as the upgrade
						// lands, before any request fails.
						f.detected = now
					}
				}
				w.log.addEvent(timelineEvent(now, "route-change", routeChangeDetail(f.label, w.p.sc.Models[mi].Name, pp.Spec.Name,
					what, w.core.Ready().RouteVersion)))
			}
		}
	}
}

// routeChangeDetail is a driver upgrade's route change on the timeline:
// model on pool incompatible (what says why) or compatible again, and the
// route table's version after it.
func routeChangeDetail(label, model, pool, what string, version int) string {
	return fmt.Sprintf("%s: %s on %s %s (route version %d)", label, model, pool, what, version)
}

// RouteChange is the timeline entry of a live driver upgrade's route
// change (internal/liverun), worded like upgradeDriver's:
// reasons empty when the model is compatible again.
func RouteChange(label, model, pool string, reasons []string, version int) string {
	what := "compatible again"
	if len(reasons) > 0 {
		what = "incompatible: " + strings.Join(reasons, "; ")
	}
	return routeChangeDetail(label, model, pool, what, version)
}

func profilesOf(p *plan, pi int) map[string]latency.Profile {
	out := map[string]latency.Profile{}
	for mi, m := range p.sc.Models {
		if p.pools[pi].Verdicts[mi].Tested {
			out[m.Name] = p.pools[pi].Profiles[mi]
		}
	}
	return out
}

// attemptFate is what the ground truth does to an attempt, decided at
// dispatch.
type attemptFate struct {
	fail bool // the attempt fails (after delay)
	// throttle > 0: the provider refuses it for its quota (a 429 after
	// delay) with this Retry-After.
	throttle time.Duration
	delay    time.Duration // before it fails, or before the replica starts it
}

// faultAtDispatch decides an attempt of req on replica ri: the zero fate
// when it runs normally.
func (w *faultWorld) faultAtDispatch(req *request, ri int) attemptFate {
	st := &w.faultState[ri]
	if st.Fails(func() float64 { return sched.AttemptFate(w.seed, req.Core.ID, req.Life.Attempts, ri) }) {
		if st.Down {
			return attemptFate{fail: true, delay: w.downDelay(ri)}
		}
		return attemptFate{fail: true, delay: st.Latency + w.answer(req, ri)}
	}
	if qs := w.quota[w.replicas[ri].pool]; len(qs) > 0 {
		if wait := takeAll(qs, w.s.Now(), req.Core.Input+req.Core.Output); wait > 0 {
			// A 429 is an answer: it comes back at the network's pace.
			return attemptFate{fail: true, throttle: wait, delay: st.Latency + w.answer(req, ri)}
		}
	}
	return attemptFate{delay: st.Latency}
}

// answer is how long a fault's answer to req's attempt on ri takes to
// come back (faults.AnswerDelay, as the gateway's fault layer times it).
func (w *faultWorld) answer(req *request, ri int) time.Duration {
	return faults.AnswerDelay(sched.AnswerDraw(w.seed, req.Core.ID, req.Life.Attempts, ri))
}

// failAttempt ends one attempt of req on replica ri as fate says, after its
// delay: the core hears of it — an error through the replica's breaker, a
// 429 as the pool's throttle — and the request's lifecycle retries it or
// ends it.
func (r *runner) failAttempt(req *request, ri int, fate attemptFate) {
	// A duplicate in flight dies with the attempt when its failure is
	// stepped (the request engine settles the race): until then, as a
	// gateway that cannot know it will fail, the attempt may be hedged.
	req.state = stFailing
	req.attemptTimer = r.s.After(fate.delay, func() {
		if req.state != stFailing {
			return
		}
		if req.shadow {
			r.step(reqengine.Event{Kind: reqengine.AttemptFailed, Req: &req.Req, Replica: ri, First: req.firstAt})
			return
		}
		r.observeAttempt(req, ri, false, false)
		how := sched.AttemptError
		if fate.throttle > 0 {
			how = sched.AttemptThrottled
			r.faultWorld.throttled(ri, fate.throttle)
		} else if req.firstAt != 0 {
			// Its first tokens reached the client (the replay's clients
			// stream): the stream is cut.
			how = sched.AttemptCut
			req.cutGen = req.seq.Generated
		}
		req.state = stBackoff // until the engine offers it again or ends it
		before := req.Life.Migrations
		r.step(reqengine.Event{Kind: reqengine.AttemptFailed, Req: &req.Req, Replica: ri, How: how,
			RetryAfter: fate.throttle, Observed: true})
		if req.Life.Migrations > before && req.measured {
			r.migrations++
		}
	})
}

// throttled tells the core replica ri's provider answered 429 asking for
// retryAfter; the first 429 of a quota fault is its detection.
func (w *faultWorld) throttled(ri int, retryAfter time.Duration) {
	now := w.s.Now()
	if !w.core.Throttled(now, ri, retryAfter) {
		return
	}
	pi := w.replicas[ri].pool
	// Once per pool: a provider with no quota throttles again each time
	// its Retry-After runs out and the core tries it.
	first := w.log.once("throttled:" + w.p.pools[pi].Spec.Name)
	for _, ev := range throttledEvents(w.p, w.faults, now, pi, retryAfter, first) {
		w.log.addEvent(ev)
	}
}

// throttledEvents is what a provider's 429 that throttles pool pi (the
// core's Throttled said so) puts on the timeline: the throttle, the
// pool's first only, and the detection of the quota faults on the pool,
// which it marks. A run and a replay's recorder both ask it.
func throttledEvents(p *plan, fs []*faultRT, now time.Duration, pi int, retryAfter time.Duration, first bool) []TimelineEvent {
	var evs []TimelineEvent
	if first {
		evs = append(evs, timelineEvent(now, "throttled", fmt.Sprintf("pool %s: provider answers 429, retry after %v", p.pools[pi].Spec.Name, retryAfter)))
	}
	for _, f := range fs {
		if f.active && f.detected < 0 && f.detectedBy(429) && slices.Contains(f.pools, pi) {
			f.detected = now
			evs = append(evs, timelineEvent(now, "detected", fmt.Sprintf("%s after %v: provider answers 429", f.label, (now-f.start).Round(time.Millisecond))))
		}
	}
	return evs
}

// breakerChanged records a breaker transition on the timeline and as the
// detection of the faults that affect the replica.
func (w *faultWorld) breakerChanged(tr sched.Transition) {
	now := w.s.Now()
	if !tr.Trial() {
		w.log.addEvent(w.p.breakerEvent(now, tr))
	}
	if tr.To == sched.HalfOpen {
		// The trial: a probe now, as a gateway sends one when a breaker
		// goes half-open (after the dispatch loop: the core is not
		// re-entered).
		ri := tr.Replica
		w.s.After(0, func() { w.probeReplica(ri) })
	}
	if tr.To != sched.Open {
		return
	}
	for _, f := range w.faults {
		if f.breakerOpened(now, tr.Replica) {
			w.log.addEvent(f.breakerDetectedEvent(now))
		}
	}
}

// effective is when the fault takes effect: its start, or the withdrawal
// (at=) of one given with a notice.
func (f *faultRT) effective() time.Duration {
	if f.traits.FromNotice {
		return max(f.spec.At, f.start)
	}
	return f.start
}

// noticeDetected records the detection of a fault given with a notice when
// it starts: the notice is the gateway being told (it steers traffic away
// from then on). It returns the timeline entry, or false for a fault
// without a notice (detected by its effects) or one already detected.
func (f *faultRT) noticeDetected(now time.Duration) (TimelineEvent, bool) {
	if !f.traits.FromNotice || f.spec.Notice <= 0 || f.detected >= 0 {
		return TimelineEvent{}, false
	}
	f.detected = now
	return timelineEvent(now, "detected", fmt.Sprintf("%s: notice given, %v before the withdrawal", f.label, f.spec.At-now)), true
}

// ejected records a latency outlier's ejection (or return) on the
// timeline; an ejection detects the faults that affect the replica, as a
// breaker opening does: it is how a latency-only brownout is detected.
func (w *faultWorld) ejected(e sched.Ejection) {
	if w.onEjection != nil {
		w.onEjection(e)
	}
	w.log.addEvent(w.p.ejectionEvent(e))
	if e.Returned {
		return
	}
	for _, f := range w.faults {
		if f.breakerOpened(e.At, e.Replica) {
			w.log.addEvent(f.breakerDetectedEvent(e.At))
		}
	}
}

// detectedBy reports whether an affected upstream answering status detects
// the fault (faults.Traits.DetectStatus: 429 a quota, 404 a retired model).
func (f *faultRT) detectedBy(status int) bool {
	return status != 0 && f.traits.DetectStatus == status
}

// breakerOpened records the detection of an active fault when a breaker
// opened on one of its replicas; it reports whether this detected it.
func (f *faultRT) breakerOpened(now time.Duration, replica int) bool {
	if f.active && f.detected < 0 && slices.Contains(f.replicas, replica) {
		f.detected = now
		return true
	}
	return false
}

// probe checks every replica's health, as a gateway's health checker does:
// a live replica answers at once, a down one after the timeout.
func (w *faultWorld) probe() {
	now := w.s.Now()
	for ri := range w.replicas {
		w.probeReplica(ri)
	}
	if now+w.p.sc.Policy.Health.ProbeInterval.D() <= w.end && w.live() {
		w.s.After(w.p.sc.Policy.Health.ProbeInterval.D(), w.probe)
	}
}

// probeReplica probes replica ri: a live one answers at once, a down one
// after the health timeout; a loading one is not probed.
func (w *faultWorld) probeReplica(ri int) {
	if w.replicas[ri].loading || w.replicas[ri].absent {
		return
	}
	if !w.faultState[ri].Down {
		// A live replica answers at once: no event, no allocation (the
		// probe of every replica runs every probe interval).
		w.observeProbe(ri, true)
		return
	}
	w.s.After(w.downDelay(ri), func() { w.observeProbe(ri, false) })
}

func (w *faultWorld) observeProbe(ri int, ok bool) {
	w.eng.Step(w.s.Now(), reqengine.Event{Kind: reqengine.Probe, Replica: ri, Healthy: ok})
	if w.eng.HasReady() {
		w.dispatch()
	}
}

// noteServed updates the faults' mitigation and recovery times when a
// request completes on replica ri.
func (w *faultWorld) noteServed(req *request, ri int) {
	noteServed(w.p, w.faults, w.s.Now(), ri, req.Core.Model, req.Core.Served, req.canary, w.log.addEvent)
}

// notePrefilled tells the faults on the prefill pools of a completed
// request's model (noteServed's are about the replica that answered it)
// where its prompt was prefilled: on prefill replica p, or locally on its
// decode replica (p < 0). A prompt prefilled on a replica the fault took
// recovers it once it is over; one prefilled elsewhere, or locally after
// the fault began, is its traffic served elsewhere (mitigation).
func (w *faultWorld) notePrefilled(req *request, p int) {
	model := w.p.sc.Models[req.Core.Served].Name
	for _, f := range w.faults {
		if !slices.ContainsFunc(f.pools, func(pi int) bool {
			return w.p.core.Pools[pi].Prefill && slices.Contains(w.p.pools[pi].Spec.Models, model)
		}) {
			continue
		}
		affected := p >= 0 && slices.Contains(f.replicas, p)
		displaced := !affected && (p >= 0 || req.dispatchedAt >= f.start)
		if ev, ok := f.served(w.s.Now(), affected, displaced); ok {
			w.log.addEvent(ev)
		}
	}
}

// noteServed updates faults' mitigation and recovery when a request for
// model completes at now on replica ri, answered by model served (an
// attempt of it routed to canary, index + 1, or 0), and records what
// changed with event.
func noteServed(p *plan, fs []*faultRT, now time.Duration, ri, model, served, canary int, event func(TimelineEvent)) {
	for _, f := range fs {
		affected := slices.Contains(f.replicas, ri)
		if f.eff.onModel() {
			if !slices.Contains(f.models, model) {
				continue
			}
			affected = served == model
		}
		if ev, ok := f.served(now, affected, p.displaced(f, model, canary)); ok {
			event(ev)
		}
	}
}

// served updates the fault's mitigation and recovery when a request it may
// concern completes at now: on one of its affected replicas or not, for a
// model its pools serve (the traffic it displaced) or not. A retirement is
// about one model, not replicas: it is mitigated when a request for the
// model is served by a fallback, and recovered when the model itself serves
// again. It returns the timeline event to record, if any.
func (f *faultRT) served(now time.Duration, affected, displaced bool) (TimelineEvent, bool) {
	switch {
	case f.active && f.detected >= 0 && f.mitigated < 0 && !affected && displaced:
		f.mitigated = now
		return timelineEvent(now, "mitigated", fmt.Sprintf("%s: first request served elsewhere, %v after the fault began", f.label, (now-f.start).Round(time.Millisecond))), true
	case !f.active && f.end > 0 && now >= f.end && f.recovered < 0 && affected:
		f.recovered = now
		return timelineEvent(now, "recovered", fmt.Sprintf("%s: affected replicas serve again, %v after the fault ended", f.label, (now-f.end).Round(time.Millisecond))), true
	}
	return TimelineEvent{}, false
}

// displaced reports whether a request for model is traffic the fault
// displaced: a model the fault's pools served (a canary's candidate pool
// serves only the requests routed to its canary).
func (p *plan) displaced(f *faultRT, model, canary int) bool {
	for _, pi := range f.pools {
		if k := p.candidateOf(pi); k > 0 && k != canary {
			continue
		}
		if p.core.Pools[pi].Serves[model] {
			return true
		}
	}
	return false
}

// noteOutcome attributes a finished request to the faults active when it
// arrived (SLO during), in the ten minutes after one ended (SLO after), and,
// when it got no answer, to those active when it ended (requests lost).
func (w *faultWorld) noteOutcome(req *request, met, lost bool) {
	now := w.s.Now()
	for _, f := range w.faults {
		f.outcome(req.Core.Arrived, now, met, lost)
	}
}

// noteEnding attributes a finished request to the faults' impact on its
// tenant and class (impact.go).
func (w *faultWorld) noteEnding(req *request, res Result, reason string, met bool) {
	e := ending{tenant: req.Core.Tenant, class: req.Core.Class, model: req.Core.Model, served: req.Core.Served,
		replica: -1, arrived: req.Core.Arrived, ended: w.s.Now(), met: met, result: res, reason: reason,
		canary: req.canary}
	if res == Completed {
		e.replica = req.Core.Replica
	}
	noteEnding(w.p, w.faults, &e)
	if req.measured {
		w.ended(e.tenant, e.model, e.arrived, met, false)
	}
}

// outcome attributes a request that arrived at arr and finished at now.
func (f *faultRT) outcome(arr, now time.Duration, met, lost bool) {
	inFault := arr >= f.start && (f.end == 0 || arr < f.end)
	if inFault {
		f.report.during.done++
		if met {
			f.report.during.met++
		}
	}
	if f.end > 0 && arr >= f.end && arr < f.end+10*time.Minute {
		f.report.after.done++
		if met {
			f.report.after.met++
		}
	}
	if lost && f.active && now >= f.start {
		f.lost++
		if f.impacted < 0 && now >= f.effective() {
			f.impacted = now
		}
	}
}

// faultReports assembles the per-fault reports. A fault's mitigation and
// recovery are its worst touched tenant's (impact.go).
func faultReports(p *plan, fs []*faultRT) map[string]*FaultReport {
	out := map[string]*FaultReport{}
	for _, f := range fs {
		fr := f.report
		fr.StartS = round(f.start.Seconds(), 6)
		fr.EndS = -1
		if f.end > 0 {
			fr.EndS = round(f.end.Seconds(), 6)
		}
		fr.TimeToDetectS = since(f.detected, f.start)
		fr.EffectiveS = round(f.effective().Seconds(), 6)
		fr.TimeToImpactS = since(f.impacted, f.effective())
		mitigated, stranded := f.mitigatedAt()
		fr.TimeToMitigateS = since(mitigated, f.start)
		fr.NotMitigatedFor = ""
		if stranded >= 0 {
			fr.NotMitigatedFor = p.sc.Tenants[stranded].Name
		}
		fr.TimeToRecoverS = Never
		if f.end > 0 {
			fr.TimeToRecoverS = since(f.recoveredAt(), f.end)
		}
		fr.RequestsLost = f.lost
		fr.SLOAttainmentDuring = ratioOf(fr.during.met, fr.during.done)
		fr.SLOAttainmentAfter = ratioOf(fr.after.met, fr.after.done)
		fr.FinishedDuring, fr.FinishedAfter = fr.during.done, fr.after.done
		fr.Tenants, fr.Classes = map[string]*Impact{}, map[string]*Impact{}
		for i, t := range p.sc.Tenants {
			fr.Tenants[t.Name] = f.tenants[i].report(f)
		}
		for i, c := range p.sc.Classes {
			fr.Classes[c.Name] = f.classes[i].report(f)
		}
		out[f.label] = fr
	}
	return out
}
