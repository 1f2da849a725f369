package scorecard

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/shell"
	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim/stats"
	"github.com/fleetdrill/fleetdrill/twin"
	"github.com/fleetdrill/fleetdrill/twin/compile"
)

// drills runs the twin drills of one scorecard.
type drills struct {
	ctx      context.Context
	base     *scenarios.Scenario
	provider string
	pools    []int    // the provider's pools, indices into base.Pools
	regions  []string // their regions
	cmd      string   // the scorecard's command line
	scenario string   // as named on the command line
	sets     []string // the user's overrides

	// The acquisition stage's settings (AcquisitionOptions, defaulted).
	acqThresholds AcquisitionThresholds
	acqSeeds      int
	acqStepSet    float64
	acqFaultsSet  []string
}

// runCmd is a `fleetdrill run` command line that reproduces a whole-fleet
// drill with the faults given and expect replaced by expect.
func (d *drills) runCmd(faults []string, expect []string, extra ...string) string {
	return d.cmdWith(append(slices.Clone(d.sets), d.noCanaries()...), faults, expect, extra...)
}

// noCanaries drops the scenario's own canaries, as clone does: the drills
// measure the fleet as routed without them (the canary drill brings its
// own).
func (d *drills) noCanaries() []string {
	if len(d.base.Canaries) == 0 {
		return nil
	}
	return []string{"canaries=[]"}
}

func (d *drills) cmdWith(sets, faults, expect []string, extra ...string) string {
	parts := []string{"fleetdrill", "run", d.scenario}
	for _, s := range sets {
		parts = append(parts, "--set", shell.Quote(s))
	}
	quote := func(list []string) string {
		q := make([]string, len(list))
		for i, x := range list {
			q[i] = strconv.Quote(x)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	parts = append(parts, "--set", shell.Quote("faults="+quote(faults)), "--set", shell.Quote("expect="+quote(expect)))
	return strings.Join(append(parts, extra...), " ")
}

// IsolationMethod documents how the latency and fallback drills put
// traffic on the provider alone.
const IsolationMethod = "provider-only fleet: every other provider's pool is set to 0 replicas, and only the " +
	"streams the provider may serve are kept (tenant's jurisdiction allows one of its regions, model listed by one " +
	"of its pools); the scenario's own faults, jobs, canaries and expectations are left out"

// clone copies sc deeply enough for the drills to change pools, streams,
// faults and expectations.
func clone(sc *scenarios.Scenario) *scenarios.Scenario {
	c := *sc
	c.Pools = slices.Clone(sc.Pools)
	c.Workload = slices.Clone(sc.Workload)
	c.Faults = nil
	c.Expect = nil
	c.Canaries = nil
	return &c
}

func (d *drills) run(sc *scenarios.Scenario, opts twin.Options) (*twin.Report, error) {
	rep, err := twin.Run(d.ctx, sc, opts)
	if err != nil {
		return nil, fmt.Errorf("scorecard: twin drill: %w", err)
	}
	return rep, nil
}

func (d *drills) jurisdiction(region string) string {
	for _, r := range d.base.Regions {
		if r.Name == region {
			return r.Jurisdiction
		}
	}
	return ""
}

func (d *drills) tenant(name string) scenarios.Tenant {
	for _, t := range d.base.Tenants {
		if t.Name == name {
			return t
		}
	}
	return scenarios.Tenant{}
}

// allowed reports whether a tenant may be served in one of the provider's
// regions.
func (d *drills) allowed(tenant string) bool {
	j := d.tenant(tenant).Jurisdiction
	if j == "" || d.base.Policy.Routing.IgnoreResidency {
		return true
	}
	for _, r := range d.regions {
		if d.jurisdiction(r) == j {
			return true
		}
	}
	return false
}

func (d *drills) serves(model string) bool {
	for _, i := range d.pools {
		if slices.Contains(d.base.Pools[i].Models, model) {
			return true
		}
	}
	return false
}

// kept reports whether stream i is routed to the provider in the
// provider-only fleet.
func (d *drills) kept(i int) bool {
	st := d.base.Workload[i]
	return d.allowed(st.Tenant) && d.serves(st.Model)
}

// isolationSets are the --set overrides that make the provider-only fleet
// (IsolationMethod) of the scenario, with its arrival rates multiplied by
// mult: other providers' pools at 0 replicas, the other streams stopped
// 1ms after they start (before any warm-up ends, so nothing of theirs is
// measured), no jobs.
func (d *drills) isolationSets(mult float64) []string {
	var sets []string
	for _, p := range d.base.Pools {
		if p.Provider != d.provider && p.Replicas != 0 {
			sets = append(sets, fmt.Sprintf("pools.%s.replicas=0", p.Name))
		}
	}
	for i, st := range d.base.Workload {
		switch {
		case !d.kept(i):
			sets = append(sets, fmt.Sprintf("workload.%s.stop=%s", st.Name, (st.Start.D()+time.Millisecond).String()))
		case mult == 1:
		case st.Trace != nil:
			ts := st.Trace.TimeScale
			if ts == 0 {
				ts = 1
			}
			sets = append(sets, fmt.Sprintf("workload.%s.trace.time_scale=%g", st.Name, ts/mult))
		default:
			sets = append(sets, fmt.Sprintf("workload.%s.arrivals.rate=%g", st.Name, st.Arrivals.Rate*mult))
		}
	}
	if len(d.base.Jobs) > 0 {
		sets = append(sets, "jobs=[]")
	}
	return append(sets, d.noCanaries()...)
}

// isolated loads the provider-only fleet with its arrival rates
// multiplied by mult, the given faults and no expectations; cmd reproduces
// it with `fleetdrill run`.
func (d *drills) isolated(mult float64, faults, expect []string) (sc *scenarios.Scenario, cmd string, err error) {
	sets := append(slices.Clone(d.sets), d.isolationSets(mult)...)
	sc, err = scenarios.LoadNamedWithSets(d.scenario, sets)
	if err != nil {
		return nil, "", fmt.Errorf("scorecard: the provider-only fleet: %w", err)
	}
	sc.Faults, sc.Expect = slices.Clone(faults), nil
	return sc, d.cmdWith(sets, faults, expect), nil
}

// window is the measured part of the run and the times of the drills'
// faults.
func (d *drills) window() (start, length time.Duration) {
	dur, wu := d.base.Duration.D(), d.base.Warmup.D()
	if wu >= dur {
		wu = 0
	}
	return wu, dur - wu
}

// Inventory is stage 1: the workload as the provider would see it.
type Inventory struct {
	Streams    []string      `json:"streams"`
	Excluded   []string      `json:"excluded,omitempty"` // streams not routed to the provider, with why
	Requests   int           `json:"requests"`
	RateRPS    float64       `json:"rate_rps"`
	Input      TokenStats    `json:"input_tokens"`
	Output     TokenStats    `json:"output_tokens"`
	Classes    []string      `json:"classes"`
	Tenants    []string      `json:"tenants"`
	Models     []string      `json:"models"`
	Boundaries []TenantRoute `json:"tenant_routes"`
}

// TokenStats are a token-count distribution's quantiles.
type TokenStats struct {
	Mean float64 `json:"mean"`
	P50  int     `json:"p50"`
	P99  int     `json:"p99"`
	Max  int     `json:"max"`
}

// TenantRoute says whether a tenant's jurisdiction allows the provider's
// regions.
type TenantRoute struct {
	Tenant       string `json:"tenant"`
	Jurisdiction string `json:"jurisdiction"`
	Allowed      bool   `json:"allowed"`
}

func tokenStats(v []int) TokenStats {
	if len(v) == 0 {
		return TokenStats{}
	}
	slices.Sort(v)
	q := func(p float64) int { return v[min(len(v)-1, int(math.Ceil(p*float64(len(v))))-1)] }
	sum := 0
	for _, x := range v {
		sum += x
	}
	return TokenStats{Mean: round(float64(sum)/float64(len(v)), 1), P50: q(0.5), P99: q(0.99), Max: v[len(v)-1]}
}

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

func (d *drills) inventory() (*Inventory, error) {
	inv := &Inventory{}
	for _, st := range d.base.Workload {
		switch {
		case !d.allowed(st.Tenant):
			inv.Excluded = append(inv.Excluded, fmt.Sprintf("%s: tenant %s (jurisdiction %s) may not be served in %s",
				st.Name, st.Tenant, d.tenant(st.Tenant).Jurisdiction, strings.Join(d.regions, ", ")))
		case !d.serves(st.Model):
			inv.Excluded = append(inv.Excluded, fmt.Sprintf("%s: no pool of %s lists %s", st.Name, d.provider, st.Model))
		default:
			inv.Streams = append(inv.Streams, st.Name)
		}
	}
	for _, t := range d.base.Tenants {
		inv.Boundaries = append(inv.Boundaries, TenantRoute{Tenant: t.Name, Jurisdiction: t.Jurisdiction, Allowed: d.allowed(t.Name)})
	}
	var in, out []int
	classes, tenants, models := map[string]bool{}, map[string]bool{}, map[string]bool{}
	start, length := d.window()
	sc := clone(d.base)
	_, err := twin.Arrivals(sc, func(a twin.Arrival) error {
		if !d.kept(a.Stream) || a.At < start {
			return nil
		}
		in, out = append(in, a.Input), append(out, a.Output)
		classes[d.base.Classes[a.Class].Name] = true
		tenants[d.base.Tenants[a.Tenant].Name] = true
		models[d.base.Models[a.Model].Name] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scorecard: workload: %w", err)
	}
	inv.Requests = len(in)
	if length > 0 {
		inv.RateRPS = round(float64(len(in))/length.Seconds(), 3)
	}
	inv.Input, inv.Output = tokenStats(in), tokenStats(out)
	inv.Classes, inv.Tenants, inv.Models = slices.Sorted(maps.Keys(classes)), slices.Sorted(maps.Keys(tenants)), slices.Sorted(maps.Keys(models))
	return inv, nil
}

// Latency is stage 3: latency on the provider's pools alone.
type Latency struct {
	Method  string `json:"method"`
	Command string `json:"command"` // the ×1 drill
	// Live is the ×1 drill replayed on the live harness (--live).
	Live       *LiveLatency             `json:"live,omitempty"`
	Classes    map[string]*ClassLatency `json:"classes"`
	ColdStarts map[string]float64       `json:"cold_start_s"` // by pool
	Breaches   []string                 `json:"breaches,omitempty"`
	Pass       bool                     `json:"pass"` // p95 and p99 within every class objective at ×1
	Saturation []SaturationStep         `json:"saturation"`
	// LastPassing is the largest multiplier tried with every SLO met; 0:
	// not even ×1; equal to the last tried: the search did not break.
	LastPassing float64 `json:"last_passing_multiplier"`
}

// ClassLatency is one class's latency on the provider's pools at ×1.
type ClassLatency struct {
	Arrived       uint64             `json:"arrived"`
	Completed     uint64             `json:"completed"`
	Unanswered    uint64             `json:"unanswered"` // rejected, failed, timed out, cancelled
	SLOAttainment float64            `json:"slo_attainment"`
	TTFT          stats.Summary      `json:"ttft_s"`
	TPOT          stats.Summary      `json:"tpot_s"`
	E2E           stats.Summary      `json:"e2e_s"`
	SLO           map[string]float64 `json:"slo_s"`
}

// SaturationStep is one multiplier of the saturation search.
type SaturationStep struct {
	Multiplier float64  `json:"multiplier"`
	Pass       bool     `json:"pass"`
	Breaches   []string `json:"breaches,omitempty"`
	Command    string   `json:"command"`
}

// breaches lists every class objective whose p95 or p99 is over budget, and
// classes with arrivals but nothing completed.
func (d *drills) breaches(rep *twin.Report) []string {
	var out []string
	for _, c := range d.base.Classes {
		g := rep.Classes[c.Name]
		if g == nil || g.Arrived == 0 {
			continue
		}
		if g.Completed == 0 {
			out = append(out, fmt.Sprintf("%s: %d arrived, none completed", c.Name, g.Arrived))
			continue
		}
		check := func(what string, s stats.Summary, slo time.Duration) {
			if slo <= 0 {
				return
			}
			b := slo.Seconds()
			if s.P95 > b {
				out = append(out, fmt.Sprintf("%s.%s.p95 %.3gs > %.3gs", c.Name, what, s.P95, b))
			}
			if s.P99 > b {
				out = append(out, fmt.Sprintf("%s.%s.p99 %.3gs > %.3gs", c.Name, what, s.P99, b))
			}
		}
		check("ttft", g.TTFT, c.SLO.TTFT.D())
		check("tpot", g.TPOT, c.SLO.TPOT.D())
		check("e2e", g.E2E, c.SLO.E2E.D())
	}
	return out
}

// classLatency is each class's latency in rep, for classes with arrivals.
func (d *drills) classLatency(rep *twin.Report) map[string]*ClassLatency {
	out := map[string]*ClassLatency{}
	for _, c := range d.base.Classes {
		g := rep.Classes[c.Name]
		if g == nil || g.Arrived == 0 {
			continue
		}
		slo := map[string]float64{}
		for k, v := range map[string]scenarios.Duration{"ttft": c.SLO.TTFT, "tpot": c.SLO.TPOT, "e2e": c.SLO.E2E} {
			if v > 0 {
				slo[k] = v.D().Seconds()
			}
		}
		out[c.Name] = &ClassLatency{Arrived: g.Arrived, Completed: g.Completed,
			Unanswered: g.Rejected + g.Failed + g.TimedOut + g.Cancelled, SLOAttainment: round(g.SLOAttainment.Or(0), 4),
			TTFT: g.TTFT, TPOT: g.TPOT, E2E: g.E2E, SLO: slo}
	}
	return out
}

func (d *drills) latency() (*Latency, error) {
	l := &Latency{Method: IsolationMethod, Classes: map[string]*ClassLatency{}, ColdStarts: map[string]float64{}}
	for _, i := range d.pools {
		l.ColdStarts[d.base.Pools[i].Name] = d.base.Pools[i].ColdStart.D().Seconds()
	}
	var expect []string
	for _, c := range d.base.Classes {
		for what, slo := range map[string]scenarios.Duration{"ttft": c.SLO.TTFT, "tpot": c.SLO.TPOT, "e2e": c.SLO.E2E} {
			if slo > 0 {
				expect = append(expect, fmt.Sprintf("%s.%s.p95 <= %s", c.Name, what, slo), fmt.Sprintf("%s.%s.p99 <= %s", c.Name, what, slo))
			}
		}
	}
	slices.Sort(expect)
	for _, m := range Multipliers {
		sc, cmd, err := d.isolated(m, nil, expect)
		if err != nil {
			return nil, err
		}
		rep, err := d.run(sc, twin.Options{})
		if err != nil {
			return nil, err
		}
		b := d.breaches(rep)
		l.Saturation = append(l.Saturation, SaturationStep{Multiplier: m, Pass: len(b) == 0, Breaches: b, Command: cmd})
		if m == 1 {
			l.Command = cmd
			l.Breaches, l.Pass = b, len(b) == 0
			l.Classes = d.classLatency(rep)
		}
		if len(b) > 0 {
			break
		}
		l.LastPassing = m
	}
	return l, nil
}

func (l *Latency) gate() GateItem {
	g := GateItem{Name: "latency budget (p95/p99 within class SLOs)", Pass: l.Pass, Command: l.Command}
	if !l.Pass {
		g.Evidence = "at ×1 on the provider alone: " + strings.Join(l.Breaches, "; ")
		return g
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(l.Classes)) {
		c := l.Classes[name]
		parts = append(parts, fmt.Sprintf("%s ttft p95/p99 %.3g/%.3gs e2e p95/p99 %.3g/%.3gs (slo %v)",
			name, c.TTFT.P95, c.TTFT.P99, c.E2E.P95, c.E2E.P99, sloString(c.SLO)))
	}
	g.Evidence = fmt.Sprintf("at ×1 on the provider alone: %s; saturation: last passing ×%g", strings.Join(parts, "; "), l.LastPassing)
	if lv := l.Live; lv != nil {
		g.Evidence += fmt.Sprintf("; live replay (%d replica/pool, speed %g, not gating): %d breaches", lv.Replicas, lv.Speed, len(lv.Breaches))
	}
	return g
}

func sloString(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %gs", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// Boundary is stage 4: jurisdiction and residency under failover.
type Boundary struct {
	Pass    bool     `json:"pass"`
	Outages []Outage `json:"outages"` // the first is the baseline, no outage
}

// Outage is one regional-outage drill on the whole fleet.
type Outage struct {
	Region              string     `json:"region"` // empty: baseline
	Jurisdiction        string     `json:"jurisdiction,omitempty"`
	ProviderRegion      bool       `json:"provider_region"`
	Fault               string     `json:"fault,omitempty"`
	Command             string     `json:"command"`
	ResidencyViolations uint64     `json:"residency_violations"`
	BoundaryKept        bool       `json:"boundary_kept"`
	RequestsLost        uint64     `json:"requests_lost"`
	Tenants             []Failover `json:"tenants"`
}

// Failover is where a jurisdiction-bound tenant can go in an outage.
type Failover struct {
	Tenant       string   `json:"tenant"`
	Jurisdiction string   `json:"jurisdiction"`
	FailoverTo   []string `json:"failover_to"` // regions of its jurisdiction left up
	// Stranded: the outage leaves no region of its jurisdiction, so it is
	// unserved rather than served abroad (lost capacity, not a violation).
	Stranded   bool   `json:"stranded"`
	Arrived    uint64 `json:"arrived"`
	Unanswered uint64 `json:"unanswered"` // over the whole run
	// LostVsBaseline is Unanswered less the baseline run's: the capacity
	// the outage cost the tenant.
	LostVsBaseline uint64 `json:"lost_vs_baseline"`
}

func (d *drills) boundary() (*Boundary, error) {
	b := &Boundary{Pass: true}
	baseline := map[string]uint64{} // tenant -> unanswered with no outage
	start, length := d.window()
	at, span := start+length/4, length/2
	targets := append([]string{""}, d.regions...)
	for _, r := range d.base.Regions {
		// A region with no pools (one that only has types to buy) has
		// nothing to lose in an outage.
		hasPool := slices.ContainsFunc(d.base.Pools, func(p scenarios.Pool) bool { return p.Region == r.Name })
		if hasPool && !slices.Contains(targets, r.Name) {
			targets = append(targets, r.Name)
		}
	}
	for _, region := range targets {
		sc := clone(d.base)
		o := Outage{Region: region, Jurisdiction: d.jurisdiction(region), ProviderRegion: slices.Contains(d.regions, region)}
		if region != "" {
			o.Fault = fmt.Sprintf("regional-outage region=%s at=%s for=%s", region, dur(at), dur(span))
			sc.Faults = []string{o.Fault}
		}
		o.Command = d.runCmd(sc.Faults, []string{"residency_violations == 0"})
		rep, err := d.run(sc, twin.Options{})
		if err != nil {
			return nil, err
		}
		o.ResidencyViolations = rep.ResidencyViolations
		o.BoundaryKept = rep.ResidencyViolations == 0
		for _, f := range rep.Faults {
			o.RequestsLost += f.RequestsLost
		}
		for _, t := range d.base.Tenants {
			if t.Jurisdiction == "" {
				continue
			}
			f := Failover{Tenant: t.Name, Jurisdiction: t.Jurisdiction, FailoverTo: []string{}}
			for _, r := range d.base.Regions {
				if r.Jurisdiction == t.Jurisdiction && r.Name != region && d.hasCapacity(r.Name) {
					f.FailoverTo = append(f.FailoverTo, r.Name)
				}
			}
			f.Stranded = region != "" && o.Jurisdiction == t.Jurisdiction && len(f.FailoverTo) == 0 &&
				!d.base.Policy.Routing.IgnoreResidency
			if g := rep.Tenants[t.Name]; g != nil {
				f.Arrived, f.Unanswered = g.Arrived, g.Rejected+g.Failed+g.TimedOut+g.Cancelled
			}
			if region == "" {
				baseline[t.Name] = f.Unanswered
			} else if f.Unanswered > baseline[t.Name] {
				f.LostVsBaseline = f.Unanswered - baseline[t.Name]
			}
			o.Tenants = append(o.Tenants, f)
		}
		b.Pass = b.Pass && o.BoundaryKept
		b.Outages = append(b.Outages, o)
	}
	return b, nil
}

func (d *drills) hasCapacity(region string) bool {
	for _, p := range d.base.Pools {
		if p.Region == region && p.Replicas > 0 {
			return true
		}
	}
	return false
}

func (b *Boundary) gate(cmd string) GateItem {
	g := GateItem{Name: "data boundary", Pass: b.Pass, Command: cmd}
	for _, o := range b.Outages {
		if o.ProviderRegion {
			g.Command = o.Command // the provider's own region going down
			break
		}
	}
	var parts []string
	for _, o := range b.Outages {
		name := "no outage"
		if o.Region != "" {
			name = "outage " + o.Region
		}
		s := fmt.Sprintf("%s: residency_violations=%d", name, o.ResidencyViolations)
		for _, t := range o.Tenants {
			if t.Stranded {
				s += fmt.Sprintf(", %s (%s) cannot fail over outside %s: %d of %d unanswered (%d more than with no outage)",
					t.Tenant, t.Jurisdiction, t.Jurisdiction, t.Unanswered, t.Arrived, t.LostVsBaseline)
			}
		}
		parts = append(parts, s)
	}
	g.Evidence = strings.Join(parts, "; ")
	return g
}

// Fallback is stage 5: each fallback route exercised, and traffic moved
// to the provider by a canary going back to the incumbent by itself.
type Fallback struct {
	Pass   bool            `json:"pass"`
	Drills []FallbackDrill `json:"drills"`
	Note   string          `json:"note,omitempty"`
	// Canaries are the rollback drills, one per model the provider and
	// another provider both serve; CanaryNote says why there is none.
	Canaries   []CanaryDrill `json:"canaries"`
	CanaryNote string        `json:"canary_note,omitempty"`
}

// fallbacksPass is the model-fallback drills' verdict (the quality gate
// item).
func (f *Fallback) fallbacksPass() bool {
	for _, d := range f.Drills {
		if !d.Pass {
			return false
		}
	}
	return true
}

// canariesPass is the canary drills' verdict.
func (f *Fallback) canariesPass() bool {
	for _, c := range f.Canaries {
		if !c.Pass {
			return false
		}
	}
	return true
}

// CanaryDrill puts a share of one model's traffic on the provider's pools
// as a canary beside the incumbent (the other providers' pools, its
// baseline) on the whole fleet, then browns the provider's pools out: the
// canary must be rolled back within its window plus one evaluation, and
// the failed canary attempts retried on the baseline, so that no request
// is lost.
type CanaryDrill struct {
	Model     string   `json:"model"`
	Candidate []string `json:"candidate"`
	// Tenants are those eligible: they send the model and may be served
	// both by the provider and by the incumbent (a tenant only the
	// provider may serve has nothing to roll back to).
	Tenants []string `json:"tenants"`
	// Share is the canary's share of their traffic: enough for twice the
	// minimum sample in a window at the measured rate, 5 % to 50 %.
	Share     float64  `json:"share"`
	RateRPS   float64  `json:"eligible_rate_rps"`
	Triggers  []string `json:"rollback_if"`
	Faults    []string `json:"faults"`
	Command   string   `json:"command"`
	BoundS    float64  `json:"bound_s"` // the window plus one evaluation
	State     string   `json:"state"`
	RolledAtS float64  `json:"rolled_back_at_s"` // -1: never
	// TimeToRollbackS is from the brownout's start (-1: never rolled
	// back, or rolled back before it).
	TimeToRollbackS float64 `json:"time_to_rollback_s"`
	// RequestsLost: requests of the eligible tenants with no answer while
	// the brownout lasted. OthersLost: other tenants' (not scored): a
	// candidate pool is reachable only through its canary, so a tenant
	// that only the provider's pools may serve goes unserved in the drill.
	RequestsLost uint64 `json:"requests_lost"`
	OthersLost   uint64 `json:"others_lost"`
	Why          string `json:"why,omitempty"` // the rollback decision's
	Pass         bool   `json:"pass"`
	Reason       string `json:"reason,omitempty"`
}

// The canary drill's schedule and triggers: the schema's defaults for the
// window, the evaluation and the sample; the brownout of the game day
// gameday-canary-rollback.
const (
	canaryWindow   = 2 * time.Minute
	canaryEvery    = 30 * time.Second
	canaryMinReqs  = 20
	canaryBrownout = "fail=0.2 latency=800ms"
	canaryName     = "scorecard"
)

// canaryShare is a share that puts twice the minimum sample in a window at
// the eligible rate, rounded up to a percent, from 5 % to 50 %.
func canaryShare(rate float64) float64 {
	if rate <= 0 {
		return 0.5
	}
	s := math.Ceil(100*2*canaryMinReqs/(rate*canaryWindow.Seconds())) / 100
	return math.Min(0.5, math.Max(0.05, s))
}

// servesIn reports whether a pool other than the provider's (other) or of
// the provider (!other) with replicas serves model m where tenant may be
// served.
func (d *drills) servesIn(m, tenant string, other bool) bool {
	j := d.tenant(tenant).Jurisdiction
	for _, p := range d.base.Pools {
		if (p.Provider != d.provider) != other || p.Replicas == 0 || !slices.Contains(p.Models, m) {
			continue
		}
		if j == "" || d.base.Policy.Routing.IgnoreResidency || d.jurisdiction(p.Region) == j {
			return true
		}
	}
	return false
}

func (d *drills) canaries() ([]CanaryDrill, string, error) {
	start, length := d.window()
	at, span := start+length/4, length/2
	var out []CanaryDrill
	var skipped, trial, autoscaled []string
	var models []string
	for _, i := range d.pools {
		for _, m := range d.base.Pools[i].Models {
			if !slices.Contains(models, m) {
				models = append(models, m)
			}
		}
	}
	// The requests each tenant sends of each model in the measured
	// window (trace streams assign tenants by their mapping).
	sent := map[[2]string]int{}
	if _, err := twin.Arrivals(clone(d.base), func(a twin.Arrival) error {
		if a.At >= start {
			sent[[2]string{d.base.Models[a.Model].Name, d.base.Tenants[a.Tenant].Name}]++
		}
		return nil
	}); err != nil {
		return nil, "", fmt.Errorf("scorecard: workload: %w", err)
	}
	for _, m := range models {
		cd := CanaryDrill{Model: m, Triggers: []string{"error_rate > 2%"}, RolledAtS: -1, TimeToRollbackS: -1,
			BoundS: (canaryWindow + canaryEvery).Seconds()}
		bought, scaled := false, false
		for _, i := range d.pools {
			// A candidate serves its canary's model only (the validator
			// refuses one that lists another: that model could never be
			// routed there).
			if p := d.base.Pools[i]; p.Replicas > 0 && len(p.Models) == 1 && p.Models[0] == m {
				switch {
				case d.base.Bought(i):
					// A canary names pools: entries only, not the
					// purchasable types a trial buys.
					bought = true
					continue
				case p.Autoscale != nil:
					// The validator refuses an autoscaled candidate: a
					// canary's shadow is sized from a fixed count.
					scaled = true
					continue
				}
				cd.Candidate = append(cd.Candidate, p.Name)
			}
		}
		if bought && len(cd.Candidate) == 0 {
			trial = append(trial, m)
			continue
		}
		if scaled && len(cd.Candidate) == 0 {
			autoscaled = append(autoscaled, m)
			continue
		}
		n := 0
		for _, t := range d.base.Tenants {
			if k := sent[[2]string{m, t.Name}]; k > 0 && d.servesIn(m, t.Name, false) && d.servesIn(m, t.Name, true) {
				cd.Tenants = append(cd.Tenants, t.Name)
				n += k
			}
		}
		if len(cd.Candidate) == 0 || len(cd.Tenants) == 0 {
			skipped = append(skipped, m)
			continue
		}
		if length > 0 {
			cd.RateRPS = round(float64(n)/length.Seconds(), 3)
		}
		cd.Share = canaryShare(cd.RateRPS)
		if slices.ContainsFunc(d.base.Classes, func(c scenarios.Class) bool { return c.SLO.TTFT > 0 }) {
			cd.Triggers = append(cd.Triggers, "ttft_p99 > slo")
		}
		for _, p := range cd.Candidate {
			cd.Faults = append(cd.Faults, fmt.Sprintf("brownout pool=%s at=%s for=%s %s", p, dur(at), dur(span), canaryBrownout))
		}
		canary := fmt.Sprintf("canaries=[{name: %s, model: %s, candidate: [%s], tenants: [%s], steps: [{share: %g}], evaluate_every: %s, window: %s, min_requests: %d, rollback_if: [%s]}]",
			canaryName, m, strings.Join(cd.Candidate, ", "), strings.Join(cd.Tenants, ", "), cd.Share, canaryEvery, canaryWindow, canaryMinReqs, quoted(cd.Triggers))
		sets := append(slices.Clone(d.sets), canary)
		csc, err := scenarios.LoadNamedWithSets(d.scenario, sets)
		if err != nil {
			return nil, "", fmt.Errorf("scorecard: the canary drill of %s: %w", m, err)
		}
		csc.Faults, csc.Expect = slices.Clone(cd.Faults), nil
		expect := []string{fmt.Sprintf("canaries.%s.time_to_rollback_s <= %s", canaryName, dur(canaryWindow+canaryEvery))}
		for _, p := range cd.Candidate {
			for _, t := range cd.Tenants {
				expect = append(expect, fmt.Sprintf("faults.brownout(%s).tenants.%s.lost == 0", p, t))
			}
		}
		cd.Command = d.cmdWith(sets, cd.Faults, expect)
		rep, err := d.run(csc, twin.Options{})
		if err != nil {
			return nil, "", err
		}
		cr := rep.Canaries[canaryName]
		if cr == nil {
			return nil, "", fmt.Errorf("scorecard: the canary drill of %s: no canary in the report", m)
		}
		cd.State = cr.State
		for _, f := range rep.Faults {
			mine := uint64(0)
			for _, t := range cd.Tenants {
				if im := f.Tenants[t]; im != nil {
					mine += im.Lost
				}
			}
			cd.RequestsLost += mine
			cd.OthersLost += f.RequestsLost - min(mine, f.RequestsLost)
		}
		for _, dc := range cr.Decisions {
			if dc.Action == "rollback" {
				cd.Why = dc.Why
			}
		}
		if cr.RolledBackAtS.Happened() {
			cd.RolledAtS = float64(cr.RolledBackAtS)
		}
		if cr.TimeToRollbackS.Happened() {
			cd.TimeToRollbackS = float64(cr.TimeToRollbackS)
		}
		cd.Pass = cd.TimeToRollbackS >= 0 && cd.TimeToRollbackS <= cd.BoundS && cd.RequestsLost == 0
		switch {
		case cd.RolledAtS < 0:
			cd.Reason = fmt.Sprintf("not rolled back (state %s at the end)", cr.State)
		case cd.TimeToRollbackS < 0:
			cd.Reason = fmt.Sprintf("rolled back at %gs, before the brownout: the provider failed the checks on its own", cd.RolledAtS)
		case cd.TimeToRollbackS > cd.BoundS:
			cd.Reason = fmt.Sprintf("rolled back after %gs, later than the window plus one evaluation (%gs)", cd.TimeToRollbackS, cd.BoundS)
		case cd.RequestsLost > 0:
			cd.Reason = fmt.Sprintf("%d requests of %s lost during the brownout", cd.RequestsLost, strings.Join(cd.Tenants, ", "))
		}
		out = append(out, cd)
	}
	var notes []string
	if len(trial) > 0 {
		notes = append(notes, "not drilled for "+strings.Join(trial, ", ")+": the provider's pools serving it are purchasable types bought for the trial, and a canary's candidate must be a pool of the scenario's pools: list")
	}
	if len(autoscaled) > 0 {
		notes = append(notes, "not drilled for "+strings.Join(autoscaled, ", ")+": the provider's pools serving it autoscale, and a canary's candidate keeps a fixed count (the validator refuses an autoscaled one)")
	}
	if len(skipped) > 0 {
		notes = append(notes, "no incumbent to roll back to for "+strings.Join(skipped, ", ")+": no other provider serves it to a tenant the provider may serve")
	}
	return out, strings.Join(notes, "; "), nil
}

func quoted(list []string) string {
	q := make([]string, len(list))
	for i, x := range list {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}

// evidence is a canary drill's line of the gate.
func (c *CanaryDrill) evidence() string {
	s := fmt.Sprintf("canary of %s at %g%% on %s for %s, %s", c.Model, c.Share*100, strings.Join(c.Candidate, ","), strings.Join(c.Tenants, ","), strings.Join(c.Faults, " + "))
	if c.TimeToRollbackS >= 0 {
		s += fmt.Sprintf(": time_to_rollback_s=%g (bound %gs), requests lost %d", c.TimeToRollbackS, c.BoundS, c.RequestsLost)
	} else {
		s += fmt.Sprintf(": time_to_rollback_s never, requests lost %d", c.RequestsLost)
	}
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	if c.OthersLost > 0 {
		s += fmt.Sprintf("; %d requests of other tenants lost (a candidate is reachable only through its canary: not scored)", c.OthersLost)
	}
	return s
}

// FallbackDrill retires one model from the provider-only fleet.
type FallbackDrill struct {
	Model     string   `json:"model"`
	Fallbacks []string `json:"fallbacks"`
	Fault     string   `json:"fault"`
	Command   string   `json:"command"`
	// FallbackRequests is the report's requests.fallbacks.
	FallbackRequests uint64   `json:"fallback_requests"`
	Quality          []string `json:"quality"` // each fallback's quality against each class floor
	QualityOK        bool     `json:"quality_ok"`
	Pass             bool     `json:"pass"`
	Reason           string   `json:"reason,omitempty"`
}

func (d *drills) fallback() (*Fallback, error) {
	f := &Fallback{Canaries: []CanaryDrill{}}
	reg := compile.Registry(d.base)
	start, length := d.window()
	at, span := start+length/4, length/2
	var models []string
	for _, i := range d.pools {
		for _, m := range d.base.Pools[i].Models {
			if !slices.Contains(models, m) {
				models = append(models, m)
			}
		}
	}
	for _, m := range models {
		mm, _ := reg.Model(m)
		if len(mm.Fallbacks) == 0 {
			continue
		}
		fd := FallbackDrill{Model: m, Fallbacks: mm.Fallbacks, QualityOK: true,
			Fault: fmt.Sprintf("model-retirement model=%s at=%s for=%s", m, dur(at), dur(span))}
		classes := map[string]bool{}
		sc, cmd, err := d.isolated(1, []string{fd.Fault}, []string{"requests.fallbacks > 0"})
		if err != nil {
			return nil, err
		}
		fd.Command = cmd
		for i, st := range d.base.Workload {
			if st.Model == m && d.kept(i) {
				classes[st.Class] = true
			}
		}
		for _, fb := range mm.Fallbacks {
			fm, _ := reg.Model(fb)
			for _, c := range d.base.Classes {
				if !classes[c.Name] {
					continue
				}
				ok := fm.Quality >= c.QualityFloor
				fd.QualityOK = fd.QualityOK && ok
				fd.Quality = append(fd.Quality, fmt.Sprintf("%s quality %.2f vs %s floor %.2f: %s", fb, fm.Quality, c.Name, c.QualityFloor, passWord(ok)))
			}
		}
		if len(classes) == 0 {
			fd.Reason = "no stream routed to the provider requests " + m
			fd.Pass = true
			f.Drills = append(f.Drills, fd)
			continue
		}
		rep, err := d.run(sc, twin.Options{})
		if err != nil {
			return nil, err
		}
		fd.FallbackRequests = rep.Requests.Fallbacks
		fd.Pass = fd.FallbackRequests > 0 && fd.QualityOK
		switch {
		case fd.FallbackRequests == 0 && !d.base.Policy.Routing.Fallback:
			fd.Reason = "policy.routing.fallback is off"
		case fd.FallbackRequests == 0:
			fd.Reason = "no request was served by a fallback on the provider's pools"
		case !fd.QualityOK:
			fd.Reason = "a fallback's quality is below a class floor"
		}
		f.Drills = append(f.Drills, fd)
	}
	if len(f.Drills) == 0 {
		f.Note = "no model the provider serves has fallbacks: nothing to exercise"
	}
	var err error
	if f.Canaries, f.CanaryNote, err = d.canaries(); err != nil {
		return nil, err
	}
	f.Pass = f.fallbacksPass() && f.canariesPass()
	return f, nil
}

func passWord(ok bool) string {
	if ok {
		return "pass"
	}
	return "fail"
}

func (f *Fallback) gate(cmd string) GateItem {
	g := GateItem{Name: "quality (fallbacks served within class floors)", Pass: f.fallbacksPass(), Command: cmd}
	for _, d := range f.Drills {
		if d.Command != "" {
			g.Command = d.Command
			break
		}
	}
	if f.Note != "" {
		g.Evidence = f.Note
		return g
	}
	var parts []string
	for _, d := range f.Drills {
		s := fmt.Sprintf("%s retired → %s: %d fallback requests; %s", d.Model, strings.Join(d.Fallbacks, ","), d.FallbackRequests, strings.Join(d.Quality, "; "))
		if d.Reason != "" {
			s += " (" + d.Reason + ")"
		}
		parts = append(parts, s)
	}
	g.Evidence = strings.Join(parts, " | ")
	return g
}

// observability checks that the twin's metric sampling labels series with
// the provider's pools: every pool-labelled family that has a series for
// some other pool (and the latency histograms always) has one for each of
// the provider's pools that served requests.
func (d *drills) observability() (GateItem, error) {
	g := GateItem{Name: "observability (metrics catalogue labelled for the provider's pools)",
		Command: d.runCmd(nil, nil, "--openmetrics", "scorecard.om")}
	_, length := d.window()
	m := &twin.Metrics{Step: max(length/10, time.Second)}
	rep, err := d.run(clone(d.base), twin.Options{Metrics: m})
	if err != nil {
		return g, err
	}
	var serving []string
	for _, i := range d.pools {
		name := d.base.Pools[i].Name
		if pr := rep.Pools[name]; pr != nil && pr.Dispatched > 0 {
			serving = append(serving, name)
		}
	}
	if len(serving) == 0 {
		g.Evidence = "no pool of the provider served a request in the baseline run: nothing to observe"
		return g, nil
	}
	var missing, present []string
	for _, fam := range m.Families {
		li := slices.Index(fam.Signal.Labels, "pool")
		if li < 0 {
			continue
		}
		have := map[string]bool{}
		for _, s := range fam.Series {
			have[s.Labels[li]] = true
		}
		required := fam.Signal.Name == signals.TTFT.Name || fam.Signal.Name == signals.TPOT.Name || fam.Signal.Name == signals.E2E.Name
		for p := range have {
			if p != "" && !slices.Contains(d.poolNames(), p) {
				required = true
			}
		}
		if !required {
			continue
		}
		for _, p := range serving {
			if !have[p] {
				missing = append(missing, fam.Signal.Name+"{pool="+p+"}")
			}
		}
		present = append(present, fam.Signal.Name)
	}
	sort.Strings(missing)
	g.Pass = len(missing) == 0
	if g.Pass {
		g.Evidence = fmt.Sprintf("baseline twin run with metric sampling: %d pool-labelled families (%s) have series for %s",
			len(present), strings.Join(present, ", "), strings.Join(serving, ", "))
	} else {
		g.Evidence = "missing series: " + strings.Join(missing, ", ")
	}
	return g, nil
}

// poolNames lists the provider's pool names.
func (d *drills) poolNames() []string {
	var out []string
	for _, i := range d.pools {
		out = append(out, d.base.Pools[i].Name)
	}
	return out
}

// rollback is the gate's rollback item: the canary drills of stage 5 and
// a replica's recovery.
func (d *drills) rollback(f *Fallback) (GateItem, error) {
	g, err := d.recovery()
	if err != nil || f == nil {
		return g, err
	}
	// The canary drills of stage 5 come first: traffic moved to the
	// provider goes back to the incumbent by itself.
	var parts []string
	for _, c := range f.Canaries {
		parts = append(parts, c.evidence())
	}
	if len(parts) == 0 {
		parts = append(parts, "no canary drill: "+f.CanaryNote)
	} else {
		g.Command = f.Canaries[0].Command
	}
	g.Name = "rollback (a browned-out canary of the provider goes back to the incumbent within the window plus one evaluation, nothing lost; a fault with for= recovers)"
	g.Pass = g.Pass && f.canariesPass()
	g.Evidence = strings.Join(parts, " | ") + "; node loss: " + g.Evidence
	return g, nil
}

// recovery takes one replica of the provider's pool with the shortest
// cold start down for a while and checks that it recovers.
func (d *drills) recovery() (GateItem, error) {
	g := GateItem{Name: "rollback (a fault on the provider with for= recovers)", Command: d.cmd}
	best := -1
	for _, i := range d.pools {
		p := d.base.Pools[i]
		if p.Replicas > 0 && (best < 0 || p.ColdStart < d.base.Pools[best].ColdStart) {
			best = i
		}
	}
	if best < 0 {
		g.Evidence = "no pool of the provider has replicas"
		return g, nil
	}
	total := d.base.Duration.D()
	at, span := total/10, total/10
	fault := fmt.Sprintf("node-loss pool=%s at=%s for=%s count=1", d.base.Pools[best].Name, dur(at), dur(span))
	sc := clone(d.base)
	sc.Faults = []string{fault}
	g.Command = d.runCmd(sc.Faults, nil)
	rep, err := d.run(sc, twin.Options{})
	if err != nil {
		return g, err
	}
	ttr := twin.Never
	for _, f := range rep.Faults {
		ttr = f.TimeToRecoverS
	}
	g.Pass = ttr.Happened()
	g.Evidence = fmt.Sprintf("%q: time_to_recover_s=%g", fault, float64(ttr))
	if !g.Pass {
		g.Evidence = fmt.Sprintf("%q: not recovered (time_to_recover_s never)", fault)
	}
	if !g.Pass && at+span+d.base.Pools[best].ColdStart.D() >= total {
		g.Evidence += fmt.Sprintf(" (the run ends before the replica's cold start of %v completes: try a longer duration)", d.base.Pools[best].ColdStart.D())
	}
	return g, nil
}
