package twin

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim/stats"
)

// Drill is a run driven from outside, a slice of simulated time at a time,
// with faults injected as it goes: the engine of a game-day console. A
// drill run to its end, replayed by Run with its Recorded faults as the
// scenario's, gives the same report.
//
// Injected faults start and end at a time just after Now: Now truncated to
// the millisecond plus 1.5 ms. The half millisecond keeps them off the
// instants the twin's periodic events use (probes, ladder checks, trace
// arrivals, all whole milliseconds), so that the order of events at one
// instant never depends on when the fault was scheduled; and the time
// prints exactly in a fault line.
//
// A Drill is not safe for concurrent use: one goroutine owns it.
type Drill struct {
	r        *runner
	sc       *scenarios.Scenario
	done     bool
	finished bool
	injected map[*faultRT]bool
	labels   map[string]int // labels given, for #2, #3…
	ends     map[*faultRT]bool
	window   time.Duration
}

// DrillWindow is the recent window a Snapshot's class figures cover.
const DrillWindow = time.Minute

// NewDrill prepares a drill of sc; nothing has run yet (Now is 0).
func NewDrill(sc *scenarios.Scenario, opts Options) (*Drill, error) {
	r, err := prepare(sc)
	if err != nil {
		return nil, err
	}
	r.onComplete = opts.OnComplete
	r.onEjection = opts.OnEjection
	r.recent = newRecent(len(sc.Classes), len(sc.Tenants), DrillWindow)
	d := &Drill{r: r, sc: sc, injected: map[*faultRT]bool{}, labels: map[string]int{},
		ends: map[*faultRT]bool{}, window: DrillWindow}
	for _, f := range r.faults {
		d.labels[Label(f.spec)]++
		if f.end > 0 {
			d.ends[f] = true
		}
	}
	r.start()
	return d, nil
}

// Now is the simulated time reached.
func (d *Drill) Now() time.Duration { return d.r.s.Now() }

// End is when the run ends at the latest: the scenario's duration plus its
// drain (it ends earlier when nothing is left to do after the arrivals).
func (d *Drill) End() time.Duration { return d.r.end }

// Done reports whether the run has ended.
func (d *Drill) Done() bool { return d.done }

// Err is the error that ended the run early (a bad trace row), if any.
func (d *Drill) Err() error { return d.r.err }

// Advance runs every event up to simulated time to, stopping early at the
// end of the run. It crosses the same slice boundaries as Run, where the
// run may end.
func (d *Drill) Advance(to time.Duration) {
	r := d.r
	for !d.done && r.s.Now() < to {
		next := (r.s.Now()/slice + 1) * slice
		if next > r.end {
			next = r.end
		}
		if to < next {
			r.s.RunUntil(to)
			break
		}
		d.done = r.runTo(next) || r.err != nil
	}
	if r.err != nil {
		d.done = true
	}
}

// Step runs to the next event (or the next slice boundary, if sooner) and
// returns the time reached; false when the run is over.
func (d *Drill) Step() (time.Duration, bool) {
	if d.done {
		return d.Now(), false
	}
	next := (d.Now()/slice + 1) * slice
	if t, ok := d.r.s.Next(); ok && t < next {
		next = t
	}
	d.Advance(next)
	return d.Now(), !d.done
}

// instant is when an operator's action takes effect: just after now, on a
// half millisecond (see Drill).
func (d *Drill) instant() time.Duration {
	return d.Now().Truncate(time.Millisecond) + 1500*time.Microsecond
}

// Inject starts a fault: a line of the fault syntax (docs/faults.md) whose
// at= is replaced by the drill's next instant (a model retirement's notice
// starts then, the model goes notice later); its for=, if any, ends it that
// much later. It returns the fault's label.
func (d *Drill) Inject(line string) (string, error) {
	if d.done {
		return "", errors.New("the drill has ended")
	}
	sp, err := faults.Parse(line)
	if err != nil {
		return "", err
	}
	at := d.instant()
	sp = sp.StartingAt(at)
	if _, err := faults.ParseAll([]string{sp.String()}); err != nil {
		return "", err
	}
	base := Label(sp)
	label := base
	if n := d.labels[base]; n > 0 {
		label = fmt.Sprintf("%s#%d", base, n+1)
	}
	f := newFaultRT(sp, label) // starts at at: a retirement's notice runs from now
	if err := d.r.p.resolveFault(f); err != nil {
		return "", fmt.Errorf("%s: %w", line, err)
	}
	d.labels[base]++
	d.injected[f] = true
	d.r.faults = append(d.r.faults, f)
	d.r.s.At(f.start, func() { d.r.startFault(f) })
	if f.end > 0 {
		d.ends[f] = true
		f.endTimer = d.r.s.At(f.end, func() { d.r.endFault(f) })
	}
	return label, nil
}

// EndFault ends a fault that has started and not ended, at the drill's next
// instant.
func (d *Drill) EndFault(label string) error {
	if d.done {
		return errors.New("the drill has ended")
	}
	var f *faultRT
	for _, g := range d.r.faults {
		if g.label == label {
			f = g
		}
	}
	switch {
	case f == nil:
		return fmt.Errorf("no fault %s", label)
	case !f.active:
		if f.end > 0 && f.end <= d.Now() {
			return fmt.Errorf("fault %s has already ended", label)
		}
		return fmt.Errorf("fault %s has not started yet", label)
	}
	at := d.instant()
	if f.end > 0 && f.end <= at {
		return nil // ending by itself now
	}
	if f.traits.FromNotice && at <= f.spec.At {
		return fmt.Errorf("fault %s is in its notice until %v: end it once the model is gone", label, f.spec.At)
	}
	f.endTimer.Stop()
	f.end = at
	prev := f.startEvent(f.start)
	f.spec.For = at - f.spec.At
	f.report.Spec = f.spec.String()
	// The timeline's fault-start entry shows the spec: the one Run will
	// read from the record, with its for=.
	for i := range d.r.timeline {
		if ev := &d.r.timeline[i]; ev.Kind == prev.Kind && ev.Detail == prev.Detail {
			ev.Detail = f.startEvent(f.start).Detail
		}
	}
	d.ends[f] = true
	f.endTimer = d.r.s.At(at, func() { d.r.endFault(f) })
	return nil
}

// Report ends the drill at Now and returns its report (what Run returns for
// a run that ends here). The drill cannot advance afterwards.
func (d *Drill) Report() (*Report, error) {
	if d.finished {
		return nil, errors.New("the drill's report was already taken")
	}
	d.finished, d.done = true, true
	r := d.r
	r.closeSources()
	if r.err != nil {
		return nil, r.err
	}
	return r.final()
}

// Recorded returns the drill's fault lines — the scenario's, then those
// injected, in order — each with its exact at= and, when it ended or will,
// for=: as the scenario's faults, Run reproduces the drill.
func (d *Drill) Recorded() []string {
	var out []string
	for _, f := range d.r.faults {
		sp := f.spec
		if f.end == 0 {
			sp.For = 0
		}
		out = append(out, sp.String())
	}
	return out
}

// Snapshot returns the drill's state now. It only reads: taking snapshots,
// or not, never changes the run.
func (d *Drill) Snapshot() Snapshot {
	r := d.r
	now := r.s.Now()
	sc := r.p.sc
	snap := Snapshot{Scenario: sc.Name, Seed: sc.Seed, Now: now, End: r.end, Duration: r.duration, Done: d.done,
		Requests: r.total, Rejections: maps.Clone(r.rejections)}
	// Fleet, by region.
	replicaPool := make([]int, len(r.replicas))
	for ri := range r.replicas {
		replicaPool[ri] = r.replicas[ri].pool
	}
	snap.Regions = FleetState(sc, r.core, now, replicaPool, func(ri int) ReplicaLoad {
		rt := &r.replicas[ri]
		l := ReplicaLoad{Loading: rt.loading}
		switch {
		case rt.eng != nil:
			l.Running, l.Waiting = rt.eng.Running(), rt.eng.Load()-rt.eng.Running()
		case rt.svcReq != nil:
			l.Running = 1
		}
		l.Link = r.pd.linkState(ri)
		return l
	}, false)
	poolIndex := make(map[string]int, len(sc.Pools))
	for pi, p := range sc.Pools {
		poolIndex[p.Name] = pi
	}
	for i := range snap.Regions {
		for j := range snap.Regions[i].Pools {
			ps := &snap.Regions[i].Pools[j]
			pi := poolIndex[ps.Name]
			ps.Dispatched = r.pools[pi].Dispatched
			for _, as := range r.scalers {
				if as.pool == pi {
					ps.Autoscale = as.view()
				}
			}
		}
	}
	// Classes over the recent window, and what waits for a first token now
	// (the slab holds every live request: a scan per snapshot).
	waiting := make([][]time.Duration, len(sc.Classes))
	tenantWaiting := make([]int, len(sc.Tenants))
	tenantOldest := make([]time.Duration, len(sc.Tenants))
	for _, req := range r.reqs {
		if req.state != stDone && req.firstAt == 0 && !req.shadow {
			age := now - req.Core.Arrived
			waiting[req.Core.Class] = append(waiting[req.Core.Class], age)
			tenantWaiting[req.Core.Tenant]++
			tenantOldest[req.Core.Tenant] = max(tenantOldest[req.Core.Tenant], age)
		}
	}
	for ci, c := range sc.Classes {
		cs := r.recent.class(ci, now, waiting[ci])
		cs.Name, cs.SLOTTFT, cs.SLOE2E = c.Name, c.SLO.TTFT.D(), c.SLO.E2E.D()
		cs.TotalArrived, cs.TotalSLOMet = r.classes[ci].Arrived, r.classes[ci].SLOMet
		snap.Classes = append(snap.Classes, cs)
	}
	// Tenants over the recent window, and what of theirs waits now.
	snap.Tenants = make([]TenantState, len(sc.Tenants))
	var served []servedCount
	for t, tn := range sc.Tenants {
		ts := &snap.Tenants[t]
		ts.Name, ts.Jurisdiction = tn.Name, tn.Jurisdiction
		ts.Waiting, ts.OldestWaiting = tenantWaiting[t], tenantOldest[t]
		served = r.recent.tenant(t, now, ts, served)
		ts.Served = tenantServed(sc, served)
	}
	// Models: queues and, per tenant, the route now (the first class).
	for m, model := range sc.Models {
		ms := ModelState{Name: model.Name, Queue: r.core.QueueLen(m)}
		for t, tn := range sc.Tenants {
			rt := r.core.Explain(now, t, 0, m)
			st := RouteState{Tenant: tn.Name, Fallback: rt.Fallback}
			if rt.Served >= 0 {
				st.Served = sc.Models[rt.Served].Name
			}
			for _, pi := range rt.Pools {
				st.Pools = append(st.Pools, sc.Pools[pi].Name)
			}
			for _, s := range rt.Skipped {
				st.Skipped = append(st.Skipped, ReasonCount{Reason: s.Reason, Count: s.Count})
			}
			ms.Routes = append(ms.Routes, st)
		}
		snap.Models = append(snap.Models, ms)
	}
	if l := r.ladder; l != nil {
		snap.Degradation = LadderView(l.Ladder)
	}
	since := func(t, from time.Duration) time.Duration {
		if t < 0 {
			return -1
		}
		return t - from
	}
	for _, f := range r.faults {
		mitigated, stranded := f.mitigatedAt()
		fs := FaultState{Label: f.label, Spec: f.spec.String(), Start: f.start, End: f.end, Active: f.active,
			Detect: since(f.detected, f.start), Mitigate: since(mitigated, f.start), Recover: -1, Injected: d.injected[f]}
		if stranded >= 0 {
			fs.NotMitigatedFor = r.p.sc.Tenants[stranded].Name
		}
		if rec := f.recoveredAt(); f.end > 0 && rec >= 0 {
			fs.Recover = rec - f.end
		}
		snap.Faults = append(snap.Faults, fs)
	}
	const maxEvents = 500
	ev := r.timeline
	if len(ev) > maxEvents {
		ev = ev[len(ev)-maxEvents:]
	}
	snap.Events = slices.Clone(ev)
	return snap
}

// tenantServed names the places counted in served (nil without any), most
// served first, then by pool, model and primary before fallback: a stable
// order for a console. A place with no known pool has no pool or region.
func tenantServed(sc *scenarios.Scenario, served []servedCount) []TenantServed {
	if len(served) == 0 {
		return nil
	}
	out := make([]TenantServed, len(served))
	for i, c := range served {
		out[i] = TenantServed{Model: sc.Models[c.model].Name, Fallback: c.fallback, Count: c.n}
		if c.pool >= 0 {
			out[i].Pool, out[i].Region = sc.Pools[c.pool].Name, sc.Pools[c.pool].Region
		}
	}
	slices.SortFunc(out, func(a, b TenantServed) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Model, b.Model),
			cmpBool(a.Fallback, b.Fallback))
	})
	return out
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// recent keeps each class's and each tenant's outcomes over the last window
// of simulated time in buckets, so a snapshot's p99s, rates and counts
// follow the run as it goes.
type recent struct {
	width   time.Duration
	n       int
	classes [][]recentBucket // per class, a ring of n buckets
	tenants [][]tenantBucket // per tenant, a ring of n buckets
}

type recentBucket struct {
	start                                         int64 // bucket index (time / width); -1 unused
	ttft, e2e                                     stats.Sketch
	completed, met, finished, rejected, deferredN uint64
}

// tenantBucket is one tenant's requests finished in a bucket's span: every
// one (finished), how (completed, and of those met; rejected, timed out,
// failed; a cancelled one counts as finished only), and where the
// completed ones were served.
type tenantBucket struct {
	start                                                int64 // as recentBucket's
	finished, completed, met, rejected, timedOut, failed uint64
	served                                               []servedCount // first seen first; reused when the bucket is
}

// servedCount is a tenant's completions on pool (index in the scenario's
// pools, -1 unknown) answered by model (its index), a fallback or not.
type servedCount struct {
	pool, model int
	fallback    bool
	n           uint64
}

func newRecent(classes, tenants int, window time.Duration) *recent {
	const n = 6
	rc := &recent{width: window / n, n: n}
	for range classes {
		ring := make([]recentBucket, n)
		for i := range ring {
			ring[i].start = -1
		}
		rc.classes = append(rc.classes, ring)
	}
	for range tenants {
		ring := make([]tenantBucket, n)
		for i := range ring {
			ring[i].start = -1
		}
		rc.tenants = append(rc.tenants, ring)
	}
	return rc
}

func (rc *recent) bucket(class int, at time.Duration) *recentBucket {
	k := int64(at / rc.width)
	b := &rc.classes[class][k%int64(rc.n)]
	if b.start != k {
		*b = recentBucket{start: k}
	}
	return b
}

func (rc *recent) complete(class int, at, ttft, e2e time.Duration, met bool) {
	if rc == nil {
		return
	}
	b := rc.bucket(class, at)
	b.ttft.AddDuration(ttft)
	b.e2e.AddDuration(e2e)
	b.completed++
	b.finished++
	if met {
		b.met++
	}
}

func (rc *recent) unanswered(class int, at time.Duration, rejected bool) {
	if rc == nil {
		return
	}
	b := rc.bucket(class, at)
	b.finished++
	if rejected {
		b.rejected++
	}
}

// tenantEnded counts one of tenant's requests that finished at at as res
// says; a completed one (met: its SLO) was served on pool (-1 unknown) by
// model, a fallback when it is not the model asked for.
func (rc *recent) tenantEnded(tenant int, at time.Duration, res Result, met bool, pool, model int, fallback bool) {
	if rc == nil {
		return
	}
	k := int64(at / rc.width)
	b := &rc.tenants[tenant][k%int64(rc.n)]
	if b.start != k {
		*b = tenantBucket{start: k, served: b.served[:0]} // keep the slice's room: no allocation once warm
	}
	b.finished++
	switch res {
	case Completed:
		b.completed++
		if met {
			b.met++
		}
		addServed(&b.served, servedCount{pool: pool, model: model, fallback: fallback, n: 1})
	case Rejected:
		b.rejected++
	case TimedOut:
		b.timedOut++
	case Failed:
		b.failed++
	}
}

// addServed adds c to the count of the same place in *s, or appends it.
// Places are few (pools × models), so a scan beats a map.
func addServed(s *[]servedCount, c servedCount) {
	for i := range *s {
		if e := &(*s)[i]; e.pool == c.pool && e.model == c.model && e.fallback == c.fallback {
			e.n += c.n
			return
		}
	}
	*s = append(*s, c)
}

// tenant sums tenant's buckets of the window ending at now into ts's counts
// and attainment, and the places it was served into served (reset first;
// returned, so that a caller can reuse its room).
func (rc *recent) tenant(tenant int, now time.Duration, ts *TenantState, served []servedCount) []servedCount {
	served = served[:0]
	var met uint64
	k := int64(now / rc.width)
	for i := range rc.tenants[tenant] {
		b := &rc.tenants[tenant][i]
		if b.start < 0 || b.start <= k-int64(rc.n) || b.start > k {
			continue // unused, or outside the window
		}
		ts.Finished += b.finished
		ts.Completed += b.completed
		ts.Rejected += b.rejected
		ts.TimedOut += b.timedOut
		ts.Failed += b.failed
		met += b.met
		for _, c := range b.served {
			addServed(&served, c)
		}
	}
	ts.Attainment = 1
	if ts.Finished > 0 {
		ts.Attainment = float64(met) / float64(ts.Finished)
	}
	return served
}

func (rc *recent) deferred(class int, at time.Duration) {
	if rc == nil {
		return
	}
	rc.bucket(class, at).deferredN++
}

// class sums the buckets of the window ending at now; waiting are the ages
// of the class's requests waiting for their first token.
func (rc *recent) class(class int, now time.Duration, waiting []time.Duration) ClassState {
	cs := ClassState{Window: time.Duration(rc.n) * rc.width, Attainment: 1}
	var ttft, e2e stats.Sketch
	var rejected, deferred, met uint64
	k := int64(now / rc.width)
	for i := range rc.classes[class] {
		b := &rc.classes[class][i]
		if b.start < 0 || b.start <= k-int64(rc.n) || b.start > k {
			continue // unused, or outside the window
		}
		ttft.Merge(&b.ttft)
		e2e.Merge(&b.e2e)
		cs.Completed += b.completed
		cs.Finished += b.finished
		met += b.met
		rejected += b.rejected
		deferred += b.deferredN
	}
	if cs.Finished > 0 {
		cs.Attainment = float64(met) / float64(cs.Finished)
	}
	cs.TTFTP99 = time.Duration(ttft.Quantile(0.99) * float64(time.Second))
	fillWaiting(&cs, &ttft, waiting)
	cs.E2EP99 = time.Duration(e2e.Quantile(0.99) * float64(time.Second))
	span := min(now, cs.Window).Seconds()
	if span > 0 {
		cs.RejectedPS, cs.DeferredPS = float64(rejected)/span, float64(deferred)/span
	}
	return cs
}
