package twin

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/suggest"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim/stats"
)

// ReportSchema is the version of the JSON report layout.
const ReportSchema = 1

// Report is the result of one run. Everything but Run is a pure function of
// the scenario and the seed: two runs give byte-identical JSON outside Run.
type Report struct {
	Schema       int     `json:"schema"`
	Scenario     string  `json:"scenario"`
	Seed         uint64  `json:"seed"`
	SimDurationS float64 `json:"sim_duration_s"` // arrivals and drain
	ArrivalsS    float64 `json:"arrivals_s"`     // the scenario's duration: arrivals stop then

	WarmupS  float64 `json:"warmup_s"`
	Events   uint64  `json:"events"`
	Requests Counts  `json:"requests"`

	Classes map[string]*Group      `json:"classes"`
	Tenants map[string]*Group      `json:"tenants"`
	Pools   map[string]*PoolReport `json:"pools"`
	Jobs    map[string]*JobReport  `json:"jobs"`
	// Workload reports each stream: requests it sent (warm-up included),
	// and for trace streams the malformed rows skipped (skip_bad_rows).
	Workload map[string]StreamReport `json:"workload"`
	// Faults reports each injected fault, by label (kind(target)).
	Faults map[string]*FaultReport `json:"faults"`
	// Windows reports the requests that arrived in each window a scoped
	// expectation names ("during regional-outage(us-east)").
	Windows map[string]*WindowReport `json:"windows"`
	// Hedges counts hedged duplicates (routing.hedge_after).
	Hedges HedgeReport `json:"hedges"`
	// Disaggregation is what disaggregated serving did (disagg.go); nil
	// when no model is served disaggregated.
	Disaggregation *DisaggReport `json:"disaggregation,omitempty"`
	// Migrations counts the streams cut after their first tokens and
	// migrated to another replica (policy.retries.migration_limit).
	Migrations uint64 `json:"migrations,omitempty"`
	// Degradation reports the ladder, when the policy has one.
	Degradation *DegradationReport `json:"degradation,omitempty"`
	// Canaries reports each route version's rollout (canary.go).
	Canaries map[string]*CanaryReport `json:"canaries,omitempty"`
	// Forecast scores the demand forecast made as the run proceeded
	// (forecast.go); absent from live reports.
	Forecast *ForecastReport `json:"forecast,omitempty"`
	// Autoscaling reports each autoscaled pool, by name (autoscale.go).
	Autoscaling map[string]*AutoscaleReport `json:"autoscaling,omitempty"`
	Cost        Cost                        `json:"cost"`

	ResidencyViolations uint64 `json:"residency_violations"`
	// ResidencyByTenant breaks them down for every tenant bound to a
	// jurisdiction (by its name as declared, as tenants does; zero
	// included, so that an expectation can name it): where its requests
	// were served outside it, by pool and by region.
	ResidencyByTenant map[string]*TenantResidency `json:"residency_violations_by_tenant,omitempty"`
	Rejections        map[string]uint64           `json:"rejections"` // by reason
	Expectations      []Expectation               `json:"expectations"`
	Timeline          []TimelineEvent             `json:"timeline"`

	Run RunInfo `json:"run"`
}

// Counts account for every request that arrived after the warm-up, exactly
// once: Arrived = Rejected + Completed + Failed + Cancelled + TimedOut +
// InFlightAtEnd. Admitted, Deferred, Retries and Fallbacks count events on
// the way, not outcomes: Retries the offers again after a refusal or a
// failed attempt (a deferred request coming back is a deferral, not a
// retry).
type Counts struct {
	Arrived       uint64 `json:"arrived"`
	Admitted      uint64 `json:"admitted"`
	Rejected      uint64 `json:"rejected"`
	Deferred      uint64 `json:"deferred"`
	Completed     uint64 `json:"completed"`
	Failed        uint64 `json:"failed"`
	Cancelled     uint64 `json:"cancelled"`
	TimedOut      uint64 `json:"timed_out"`
	Retries       uint64 `json:"retries"`
	InFlightAtEnd uint64 `json:"in_flight_at_end"`
	Fallbacks     uint64 `json:"fallbacks"`
}

// Balanced reports whether the accounting invariant holds.
func (c Counts) Balanced() bool {
	return c.Arrived == c.Rejected+c.Completed+c.Failed+c.Cancelled+c.TimedOut+c.InFlightAtEnd
}

// Group is the report of one class or tenant.
type Group struct {
	Counts
	TTFT      stats.Summary `json:"ttft_s"`
	TPOT      stats.Summary `json:"tpot_s"`
	E2E       stats.Summary `json:"e2e_s"`
	QueueWait stats.Summary `json:"queue_wait_s"`
	// SLOAttainment is the fraction of finished requests (every outcome but
	// in flight at the end) that completed within every objective of
	// their class. Rejections and time-outs count as misses. Null when
	// none finished.
	SLOAttainment Ratio `json:"slo_attainment"`
	// GoodputRPS is the rate of requests completed within their SLO, per
	// second of the measured window.
	GoodputRPS float64 `json:"goodput_rps"`
	SLOMet     uint64  `json:"slo_met"`

	ttft, tpot, e2e, wait stats.Sketch
}

// StreamReport is the report of one workload stream.
type StreamReport struct {
	Requests    uint64 `json:"requests"`
	SkippedRows int    `json:"skipped_rows"`
}

// PoolReport is the report of one pool.
type PoolReport struct {
	Region       string  `json:"region"`
	Replicas     int     `json:"replicas"`
	Utilization  float64 `json:"utilization"` // fraction of replica-time with a step in progress
	BusyGPUHours float64 `json:"busy_gpu_hours"`
	Cost         float64 `json:"cost"` // provisioned: replicas × GPUs × price × the scenario's duration (not the drain)
	ColdStarts   uint64  `json:"cold_starts"`
	Preemptions  uint64  `json:"preemptions"`
	Dispatched   uint64  `json:"dispatched"`
	Steps        uint64  `json:"steps"`
	// PrefixBlocks is how many prompt blocks were looked up in the pool's
	// prefix caches at admission; PrefixHitRate the fraction found (pools
	// with prefix_caching, workloads with prefix-block hashes).
	PrefixBlocks  uint64  `json:"prefix_blocks"`
	PrefixHitRate float64 `json:"prefix_hit_rate"`
}

// Cost sums the fleet's cost.
type Cost struct {
	Total float64 `json:"total"`
	// PerSuccessfulTask divides the total by the requests completed within
	// their SLO (all of them, warm-up included: the fleet was paid for
	// them too). Zero when none succeeded.
	PerSuccessfulTask float64 `json:"per_successful_task"`
}

// Expectation is one evaluated `expect` line. A figure with nothing to
// measure — no request finished in its window or group, a time that never
// came — has no value: NoData says why, and the expectation fails, or is
// Skipped (and passes) where its line ends "if any". It never reads as 0.
type Expectation struct {
	Expr  string  `json:"expr"`
	Value float64 `json:"value"` // meaningless with NoData (null in JSON)
	Pass  bool    `json:"pass"`
	// NoData says why the figure has no value: "no request finished in
	// the window after recovery + 5m0s", "not detected"; "" when it has one.
	NoData  string `json:"no_data,omitempty"`
	Skipped bool   `json:"skipped,omitempty"`
}

// expectationJSON is Expectation as written: a value of null with no data.
type expectationJSON struct {
	Expr    string   `json:"expr"`
	Value   *float64 `json:"value"`
	Pass    bool     `json:"pass"`
	NoData  string   `json:"no_data,omitempty"`
	Skipped bool     `json:"skipped,omitempty"`
}

// MarshalJSON writes the value as null when there is no data.
func (e Expectation) MarshalJSON() ([]byte, error) {
	j := expectationJSON{Expr: e.Expr, Pass: e.Pass, NoData: e.NoData, Skipped: e.Skipped}
	if e.NoData == "" {
		j.Value = &e.Value
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (e *Expectation) UnmarshalJSON(b []byte) error {
	var j expectationJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Expectation{Expr: j.Expr, Pass: j.Pass, NoData: j.NoData, Skipped: j.Skipped}
	if j.Value != nil {
		e.Value = *j.Value
	}
	return nil
}

// TimelineEvent is a notable moment of the run.
type TimelineEvent struct {
	TS     float64 `json:"t_s"`
	Kind   string  `json:"kind"`
	Detail string  `json:"detail"`
}

// RunInfo is the only part of a report allowed to differ between identical
// runs.
type RunInfo struct {
	WallS   float64 `json:"wall_s"`
	Version string  `json:"version"`
}

// Passed reports whether every expectation passed.
func (r *Report) Passed() bool {
	for _, e := range r.Expectations {
		if !e.Pass {
			return false
		}
	}
	return true
}

// JSON renders the report, indented, with a final newline.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// newPoolReports starts each pool's report, in the plan's order, with what
// the scenario says of it; the run fills in what happened.
func newPoolReports(p *plan) []*PoolReport {
	out := make([]*PoolReport, len(p.pools))
	for i, pp := range p.pools {
		out[i] = &PoolReport{Region: pp.Spec.Region, Replicas: pp.Spec.Replicas}
	}
	return out
}

// assembleReport builds the part of a report that the twin's runner and the
// live Recorder both know, in one place so that a live report stays
// comparable with the twin's field by field: the header, the tally's
// counts, groups, windows and rejections over the measured window, the
// faults, each pool (pools, from newPoolReports) with its provisioned cost,
// and the fleet's cost. end is when the run stopped. Each caller adds what
// only it knows; Jobs, Workload and Timeline start empty.
func assembleReport(p *plan, t *tally, fs []*faultRT, end time.Duration, pools []*PoolReport) *Report {
	sc := p.sc
	duration, warmup := sc.Duration.D(), sc.Warmup.D()
	rep := &Report{
		Schema: ReportSchema, Scenario: sc.Name, Seed: sc.Seed,
		SimDurationS: round(end.Seconds(), 6), ArrivalsS: round(duration.Seconds(), 6), WarmupS: round(warmup.Seconds(), 6),
		Classes: map[string]*Group{}, Tenants: map[string]*Group{}, Pools: map[string]*PoolReport{},
		Jobs: map[string]*JobReport{}, Workload: map[string]StreamReport{}, Faults: faultReports(p, fs),
		Rejections: map[string]uint64{}, Timeline: []TimelineEvent{},
	}
	t.fill(rep, (duration - warmup).Seconds())
	// The fleet is paid for the scenario's duration, not the drain.
	hours := duration.Hours()
	for i, pp := range p.pools {
		pr := pools[i]
		pr.Cost = round(float64(pp.Spec.Replicas)*float64(pp.Spec.GPUsPerReplica)*pp.Spec.PricePerGPUHour*hours, 6)
		rep.Cost.Total += pr.Cost
		rep.Pools[pp.Spec.Name] = pr
	}
	rep.Cost.Total = round(rep.Cost.Total, 6)
	if t.succeeded > 0 {
		rep.Cost.PerSuccessfulTask = round(rep.Cost.Total/float64(t.succeeded), 9)
	}
	return rep
}

// finish computes summaries from the sketches.
func (g *Group) finish(window float64) {
	g.TTFT, g.TPOT, g.E2E, g.QueueWait = g.ttft.Summary(), g.tpot.Summary(), g.e2e.Summary(), g.wait.Summary()
	g.SLOAttainment = NoRatio
	if done := g.Arrived - g.InFlightAtEnd; done > 0 {
		g.SLOAttainment = Ratio(float64(g.SLOMet) / float64(done))
	}
	if window > 0 {
		g.GoodputRPS = float64(g.SLOMet) / window
	}
}

// Check evaluates expectations (in the syntax of a scenario's expect list)
// against the finished report and returns their values, without recording
// them in r.Expectations. A scoped expectation needs its window, which the
// run creates only for the scenario's own scoped expectations: put it in
// the scenario's expect list before the run.
func (r *Report) Check(exprs ...string) ([]Expectation, error) {
	saved := r.Expectations
	r.Expectations = nil
	defer func() { r.Expectations = saved }()
	if err := r.evaluate(exprs); err != nil {
		return nil, err
	}
	return slices.Clone(r.Expectations), nil
}

// evaluate resolves and checks the scenario's expectations against the
// report.
func (r *Report) evaluate(exprs []string) error {
	flat, err := r.flatten()
	if err != nil {
		return err
	}
	r.Expectations = r.Expectations[:0]
	var errs []string
	for _, s := range exprs {
		e, err := scenarios.ParseExpectation(s)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		// A window's expectation resolves, and is suggested names, within
		// the window only: the run-wide requests.timed_out is no answer
		// to a window's requests.timed_out.
		in := flat
		if w := e.Window(); w != "" {
			if in = within(flat, "windows."+w+"."); len(in) == 0 {
				errs = append(errs, fmt.Sprintf("expect %q: the run measured no window %q; a window is measured only when the scenario's expect list names it before the run (windows measured: %s)",
					s, w, orNone(slices.Sorted(maps.Keys(r.Windows)))))
				continue
			}
		}
		key, v, ok := resolve(in, e.LHS)
		if !ok {
			errs = append(errs, fmt.Sprintf("expect %q: no report value %q%s", s, e.LHS, nearest(in, e.LHS)))
			continue
		}
		out := Expectation{Expr: s, Value: v, Pass: e.Holds(v)}
		if why := noData(in, key, e.Window()); why != "" {
			out.NoData, out.Value = why, 0
			if e.Never {
				// A time that never came is what "== never" asks.
				out.Pass = e.Holds(math.NaN())
			} else {
				// Anything else on a figure without data fails, or is
				// skipped where the line says "if any".
				out.Pass, out.Skipped = e.IfAny, e.IfAny
			}
		}
		r.Expectations = append(r.Expectations, out)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// flatten maps every numeric leaf of the report's JSON to its dotted path.
func (r *Report) flatten() (map[string]float64, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return nil, err
	}
	flat := map[string]float64{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, c)
			}
		case float64:
			flat[prefix] = x
		case nil:
			// A time that never came (Seconds): NaN, which no comparison
			// but "== never" holds. Other nulls (an empty list) are no
			// figure at all.
			field := prefix[strings.LastIndexByte(prefix, '.')+1:]
			if _, ok := neverWhat[field]; ok || nullRatio[field] {
				flat[prefix] = math.NaN()
			}
		}
	}
	walk("", tree)
	delete(flat, "run.wall_s")
	return flat, nil
}

// resolve finds an expectation's value. Paths may be written in full
// (classes.interactive.ttft_s.p99) or short (interactive.ttft.p99): a
// leading class name implies "classes.", and latency names may omit "_s".
func resolve(flat map[string]float64, lhs string) (string, float64, bool) {
	if v, ok := flat[lhs]; ok {
		return lhs, v, true
	}
	parts := strings.Split(lhs, ".")
	for i, p := range parts {
		switch p {
		case "ttft", "tpot", "e2e", "queue_wait":
			parts[i] = p + "_s"
		}
	}
	for _, cand := range []string{strings.Join(parts, "."), "classes." + strings.Join(parts, ".")} {
		if v, ok := flat[cand]; ok {
			return cand, v, true
		}
	}
	return "", 0, false
}

// nullRatio names the report fields that are a Ratio: null when nothing
// was measured, which noData then explains from the counts.
var nullRatio = map[string]bool{"slo_attainment": true, "slo_attainment_during": true, "slo_attainment_after": true,
	"slo_attainment_short": true, "slo_attainment_not_short": true}

// neverWhat names, by a time's report field, what did not come.
var neverWhat = map[string]string{
	"time_to_detect_s":   "not detected",
	"time_to_mitigate_s": "not mitigated",
	"time_to_recover_s":  "not recovered",
	"time_to_impact_s":   "no request lost",
	"time_to_rollback_s": "not rolled back",
	"rolled_back_at_s":   "not rolled back",
}

// noData says why the report figure at key (as resolved in flat) has no
// value, or "" when it has one: a time that never came; a latency of a
// group (class, tenant, window) with no completed request; an attainment
// or goodput of a group with no finished request; a fault's attainment
// during or after it with no request finished then; a window's pool share
// with no completed request. window names the expectation's window, for
// the message. Counts have a value always: 0 requests is data.
func noData(flat map[string]float64, key, window string) string {
	where := func(group string) string {
		switch {
		case window != "" && group != "":
			return " in the window " + window + " for " + group
		case window != "":
			return " in the window " + window
		case group != "":
			return " for " + group
		}
		return ""
	}
	dot := strings.LastIndexByte(key, '.')
	field := key[dot+1:]
	if what, ok := neverWhat[field]; ok {
		if v := flat[key]; math.IsNaN(v) || v < 0 {
			return what
		}
		return ""
	}
	// A statistic of a latency summary (…ttft_s.p99, jobs.J.wait_s.p50)
	// over no sample; its count is data, 0 included.
	if dot > 0 && field != "count" {
		summary := key[:dot]
		if n, ok := flat[summary+".count"]; ok && strings.HasSuffix(summary, "_s") && n == 0 {
			group, completed := "", 1.0
			if i := strings.LastIndexByte(summary, '.'); i > 0 {
				group = groupName(summary[:i])
				if c, ok := flat[summary[:i]+".completed"]; ok {
					completed = c
				}
			}
			if completed == 0 {
				return "no request completed" + where(group)
			}
			// Requests completed, none with this figure (a TPOT of
			// one-token answers, a job's wait with no job started).
			metric := summary[strings.LastIndexByte(summary, '.')+1:]
			return "no " + strings.TrimSuffix(metric, "_s") + " measured" + where(group)
		}
	}
	// The group the figure belongs to: the longest prefix with counts.
	for i := len(key) - 1; i > 0; i-- {
		if key[i] != '.' {
			continue
		}
		prefix, rest := key[:i], key[i+1:]
		arrived, ok := flat[prefix+".arrived"]
		if !ok {
			if done, ok := flat[prefix+".finished_during"]; ok {
				// A fault (or a tenant's or class's part of one).
				switch {
				case rest == "slo_attainment_during" && done == 0:
					return "no request finished during the fault"
				case rest == "slo_attainment_after" && flat[prefix+".finished_after"] == 0:
					return "no request finished in the ten minutes after the fault"
				}
				return ""
			}
			if rest == "share" && strings.HasPrefix(prefix, "pools.") && flat["requests.completed"] == 0 {
				// A window's pool share: of no completed request.
				return "no request completed" + where("")
			}
			continue
		}
		group := groupName(prefix)
		switch {
		case rest == "slo_attainment" || rest == "goodput_rps":
			if arrived-flat[prefix+".in_flight_at_end"] == 0 {
				return "no request finished" + where(group)
			}
		case rest == "slo_attainment_short" && flat[prefix+".finished_short"] == 0:
			// An autoscaled pool's tenant (ShortfallTenant).
			return "no request finished that arrived while the pool was short" + where(group)
		case rest == "slo_attainment_not_short" && flat[prefix+".finished_not_short"] == 0:
			return "no request finished that arrived while the pool was not short" + where(group)
		}
		return ""
	}
	return ""
}

// groupName is a group's name from its report path: "interactive" for
// classes.interactive, "tenant bank-eu" for tenants.bank-eu.
func groupName(prefix string) string {
	switch {
	case strings.HasPrefix(prefix, "classes."):
		return "class " + strings.TrimPrefix(prefix, "classes.")
	case strings.HasPrefix(prefix, "tenants."):
		return "tenant " + strings.TrimPrefix(prefix, "tenants.")
	}
	return prefix
}

// within is the part of flat under prefix (a window's: its requests
// counts and its classes), with the prefix cut.
func within(flat map[string]float64, prefix string) map[string]float64 {
	sub := map[string]float64{}
	for k, v := range flat {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			sub[rest] = v
		}
	}
	return sub
}

// nearest suggests report paths close to a wrong one, as "; did you mean
// …?", or "" when there is none. The wrong one itself is never among
// them: a suggestion to write what was just refused sends the user round
// in circles.
func nearest(flat map[string]float64, lhs string) string {
	var cands []string
	for _, k := range slices.Sorted(maps.Keys(flat)) {
		if k != lhs {
			cands = append(cands, k)
		}
	}
	near := suggest.Closest(lhs, cands, 3)
	if len(near) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(near, ", ") + "?"
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// CheckAccounting verifies that every request is accounted for exactly
// once — arrived = rejected + completed + failed + cancelled + timed out +
// in flight at the end — for the whole run, every class, tenant and
// expectation window, and that every job is. Run checks it; a failure is a
// twin bug.
func (r *Report) CheckAccounting() error {
	var bad []string
	check := func(what string, c Counts) {
		if !c.Balanced() {
			bad = append(bad, fmt.Sprintf("%s: arrived %d != rejected %d + completed %d + failed %d + cancelled %d + timed_out %d + in_flight_at_end %d",
				what, c.Arrived, c.Rejected, c.Completed, c.Failed, c.Cancelled, c.TimedOut, c.InFlightAtEnd))
		}
	}
	check("requests", r.Requests)
	for _, k := range slices.Sorted(maps.Keys(r.Classes)) {
		check("classes."+k, r.Classes[k].Counts)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Tenants)) {
		check("tenants."+k, r.Tenants[k].Counts)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Windows)) {
		check("windows."+k, r.Windows[k].Requests)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Jobs)) {
		if j := r.Jobs[k]; !j.Balanced() {
			bad = append(bad, fmt.Sprintf("jobs.%s: submitted %d != completed %d + unplaceable %d + pending_at_end %d + running_at_end %d",
				k, j.Submitted, j.Completed, j.Unplaceable, j.PendingAtEnd, j.RunningAtEnd))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("accounting invariant violated (a twin bug; please report it with the scenario and seed):\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// TenantResidency is one tenant's residency violations: requests served
// outside its jurisdiction, in all and by pool and region.
type TenantResidency struct {
	Jurisdiction string            `json:"jurisdiction"`
	Violations   uint64            `json:"violations"`
	Pools        map[string]uint64 `json:"pools"`
	Regions      map[string]uint64 `json:"regions"`
}

// residencyTally counts dispatches outside the tenant's jurisdiction, by
// tenant then pool index: one rule for a run (at each dispatch) and for a
// live replay's recorder (at each dispatch the gateway reports), so that
// the two reports' residency figures mean the same.
type residencyTally struct {
	n  uint64
	by map[int]map[int]uint64
}

// dispatch counts a measured request of tenant dispatched to pool pi when
// the pool's region is outside the tenant's jurisdiction.
func (rt *residencyTally) dispatch(p *plan, tenant, pi int) {
	tj := p.sc.Tenants[tenant].Jurisdiction
	if tj == "" || p.pools[pi].Region.Jurisdiction == tj {
		return
	}
	rt.n++
	if rt.by == nil {
		rt.by = map[int]map[int]uint64{}
	}
	by := rt.by[tenant]
	if by == nil {
		by = map[int]uint64{}
		rt.by[tenant] = by
	}
	by[pi]++
}

// into sets the report's residency figures: the total, and for every
// tenant bound to a jurisdiction its violations by pool and region.
func (rt *residencyTally) into(rep *Report, p *plan) {
	rep.ResidencyViolations = rt.n
	out := map[string]*TenantResidency{}
	for ti, t := range p.sc.Tenants {
		if t.Jurisdiction == "" {
			continue
		}
		tr := &TenantResidency{Jurisdiction: t.Jurisdiction, Pools: map[string]uint64{}, Regions: map[string]uint64{}}
		for pi, n := range rt.by[ti] {
			pp := &p.pools[pi]
			tr.Violations += n
			tr.Pools[pp.Spec.Name] += n
			tr.Regions[pp.Region.Name] += n
		}
		out[t.Name] = tr
	}
	if len(out) > 0 {
		rep.ResidencyByTenant = out
	}
}
