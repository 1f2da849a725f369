package scorecard

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// The acquisition stage's defaults. Each is an Options field (a flag of
// fleetdrill scorecard) so that an SRE can set the bar the fleet needs.
const (
	// DefaultAcquisitionSeeds: the provisioning delays and the stockout's
	// grants are seeded draws; five seeds show their spread without
	// making the card slow.
	DefaultAcquisitionSeeds = 5
	// DefaultMinGrantedShare: a provider that refuses more than one
	// replica in ten of a scale-up leaves the fleet planning on capacity
	// it does not get.
	DefaultMinGrantedShare = 0.9
	// DefaultServingSlack is added to the declared delay's p90 and the
	// cold start: a refusal retried once (retry_after is often 1m) fits,
	// a second does not.
	DefaultServingSlack = time.Minute
	// DefaultMaxSLODrop is how far, in attainment (0.05: five points),
	// a class the pools serve may fall below the same drill with every
	// replica granted at once.
	DefaultMaxSLODrop = 0.05
)

// Drill autoscaler given to a pool that has none, so that a fixed pool's
// provider is asked for replicas too: the HPA's common utilization target,
// from the pool's count up to double it, at most four more.
const (
	drillTarget  = 0.7
	drillMaxMore = 4
)

// AcquisitionThresholds are the gate's bars (Options; zero: the default).
type AcquisitionThresholds struct {
	MinGrantedShare float64 `json:"min_granted_share"`
	ServingSlackS   float64 `json:"to_serving_slack_s"`
	MaxSLODrop      float64 `json:"max_slo_drop"`
}

// Acquisition is stage 6: how reliably and how fast the provider turns a
// scale-up into serving capacity, and what the shortfall costs the classes
// its pools serve.
type Acquisition struct {
	Pass bool `json:"pass"`
	// Untested: no pool of the provider declares acquisition (the twin
	// then grants every replica at once, so the figures show the
	// autoscaler and the cold start, not the provider), or the step made
	// no pool ask for a replica.
	Untested bool   `json:"untested"`
	Note     string `json:"note,omitempty"`
	Method   string `json:"method"`
	// Step is the arrival-rate multiplier of the load step, StepWhy how it
	// was chosen.
	Step      float64  `json:"step_multiplier"`
	StepWhy   string   `json:"step_why"`
	Seeds     []uint64 `json:"seeds"`
	DurationS float64  `json:"duration_s"`
	// Faults are the acquisition faults in the drill (the scenario's on
	// the provider, moved to start with the step, and those declared).
	Faults     []string              `json:"faults,omitempty"`
	Thresholds AcquisitionThresholds `json:"thresholds"`
	Pools      []AcquiredPool        `json:"pools"`
	// Classes and Tenants are the SLO attainment of those the pools
	// served, against the same drill with every replica granted at once.
	Classes []Shortfall `json:"classes"`
	Tenants []Shortfall `json:"tenants"`
	// Command reproduces the first seed's drill; AsAsked the same drill
	// with the provider's acquisition removed.
	Command string `json:"command"`
	AsAsked string `json:"as_asked_command,omitempty"`
	// The three verdicts of the gate.
	GrantedPass   bool   `json:"granted_pass"`
	ServingPass   bool   `json:"to_serving_pass"`
	ShortfallPass bool   `json:"slo_cost_pass"`
	why           string // Note in a gate line's length
}

// AcquiredPool is one pool of the provider over every seed of the drill.
type AcquiredPool struct {
	Pool string `json:"pool"`
	// Declared is the pool's acquisition as written; empty: none
	// (untested).
	Declared string `json:"declared,omitempty"`
	Tested   bool   `json:"tested"`
	// Autoscale is the pool's policy in the drill; AutoscaleAdded says the
	// drill gave it one (the scenario's pool has a fixed count).
	Autoscale      string `json:"autoscale"`
	AutoscaleAdded bool   `json:"autoscale_added"`
	// Replicas asked for by the autoscaler (each replica once), asks of
	// the provider (a refused replica asked again counts again), and what
	// the provider answered, summed over the seeds.
	Replicas  uint64            `json:"replicas_asked"`
	Asks      uint64            `json:"asks"`
	Granted   uint64            `json:"granted"`
	Reserved  uint64            `json:"reserved"`
	Refused   uint64            `json:"refused"`
	RefusedBy map[string]uint64 `json:"refused_by"`
	// GrantedShare is Granted over Replicas (-1: nothing asked).
	GrantedShare float64 `json:"granted_share"`
	// NotServing is granted replicas still provisioning or loading when
	// the drill ended: their time to serving is not in ToServing.
	NotServing int `json:"not_serving_at_end"`
	// ToServing is from ask to serving, seconds: the median seed's p50
	// and p90, the worst seed's p90 and the longest; Served counts the
	// replicas behind them.
	ToServing ServingTimes `json:"to_serving_s"`
	// BoundS is what ToServing.P90 is held to: the declared delay's p90
	// plus the cold start plus the slack.
	DelayP90S  float64 `json:"delay_p90_s"`
	ColdStartS float64 `json:"cold_start_s"`
	BoundS     float64 `json:"bound_s"`
	// Costs per drill, the mean over the seeds.
	BurstCost    float64 `json:"burst_cost"`
	ReservedCost float64 `json:"reserved_cost"`
	BurstHours   float64 `json:"burst_replica_hours"`
	// MaxServing is the most replicas serving at once, in the seed that
	// reached the fewest; MaxReplicas the autoscaler's ceiling.
	MaxServing    int    `json:"max_serving"`
	MaxReplicas   int    `json:"max_replicas"`
	GrantedPass   bool   `json:"granted_pass"`
	ServingPass   bool   `json:"to_serving_pass"`
	PerSeed       []Seed `json:"seeds"`
	seedToServing []float64
}

// ServingTimes summarises time to serving across seeds.
type ServingTimes struct {
	Served   uint64  `json:"served"`
	P50      float64 `json:"p50"`
	P90      float64 `json:"p90"`
	WorstP90 float64 `json:"worst_seed_p90"`
	Max      float64 `json:"max"`
}

// Seed is one seed's figures for a pool.
type Seed struct {
	Seed     uint64 `json:"seed"`
	Replicas uint64 `json:"replicas_asked"`
	Granted  uint64 `json:"granted"`
	Refused  uint64 `json:"refused"`
	// Served replicas behind ToServingP90 (0: none served, no time).
	Served       uint64  `json:"served"`
	ToServingP90 float64 `json:"to_serving_p90_s"`
}

// Shortfall is a class's or tenant's SLO attainment in the drill (the
// mean over seeds, and the worst seed) and as asked.
type Shortfall struct {
	Name    string  `json:"name"`
	Arrived uint64  `json:"arrived"` // over the seeds
	Mean    float64 `json:"slo_attainment"`
	Worst   float64 `json:"worst_seed"`
	AsAsked float64 `json:"as_asked"`
	Drop    float64 `json:"drop"`
}

// AcquisitionMethod documents the drill.
const AcquisitionMethod = "provider-only fleet (as stage 3) with every arrival rate multiplied by the step from the start, " +
	"measured from its first second (warmup=1s): the pools start at their replicas and their autoscalers ask the provider for more; " +
	"run once per seed, then again with the provider's acquisition removed (every replica granted at once, only its cold start) " +
	"for the SLO cost"

// acquisition runs stage 6. lat is stage 3, whose saturation search
// gives the step.
func (d *drills) acquisition(lat *Latency) (*Acquisition, error) {
	th := d.acqThresholds
	a := &Acquisition{Method: AcquisitionMethod, Thresholds: th, Classes: []Shortfall{}, Tenants: []Shortfall{}}
	a.Step, a.StepWhy = d.acqStep(lat)
	n := d.acqSeeds
	for i := range n {
		a.Seeds = append(a.Seeds, d.base.Seed+uint64(i))
	}
	var sets, asAsked []string
	tested := 0
	var longest time.Duration
	for _, i := range d.pools {
		p := d.base.Pools[i]
		ap := AcquiredPool{Pool: p.Name, RefusedBy: map[string]uint64{}, ColdStartS: p.ColdStart.D().Seconds(), GrantedShare: -1}
		path := d.poolPath(i)
		switch {
		case p.Autoscale == nil && p.Replicas == 0:
			// Nothing running to scale from (and min_replicas must be
			// at least 1): the pool sits the drill out.
			ap.Autoscale = "none: the pool has no replicas"
		case p.Autoscale == nil:
			mx := p.Replicas + min(p.Replicas, drillMaxMore)
			ap.AutoscaleAdded = true
			sets = append(sets, fmt.Sprintf("%s.autoscale={metric: utilization, target: %g, min_replicas: %d, max_replicas: %d}",
				path, drillTarget, p.Replicas, mx))
			ap.Autoscale = fmt.Sprintf("added for the drill: utilization target %g, %d to %d replicas", drillTarget, p.Replicas, mx)
			ap.MaxReplicas = mx
		default:
			ap.Autoscale = describeAutoscale(p.Autoscale)
			ap.MaxReplicas = p.Autoscale.MaxReplicas
		}
		if q := p.Acquisition; q != nil {
			ap.Tested, ap.Declared = true, describeAcquisition(q)
			ap.DelayP90S = delayP90(q.Delay).Seconds()
			tested++
			asAsked = append(asAsked, path+".acquisition=")
		}
		ap.BoundS = ap.DelayP90S + ap.ColdStartS + th.ServingSlackS
		longest = max(longest, time.Duration(ap.BoundS*float64(time.Second)))
		a.Pools = append(a.Pools, ap)
	}
	// Long enough for a replica asked at the step to serve three times
	// over: a drill shorter than the bound cannot measure it.
	length := max(d.base.Duration.D(), (3*longest).Round(time.Minute)+time.Minute)
	a.DurationS = length.Seconds()
	fl, err := d.acqFaults()
	if err != nil {
		return nil, err
	}
	a.Faults = fl
	var expect []string
	for _, ap := range a.Pools {
		if ap.Tested {
			expect = append(expect, fmt.Sprintf("autoscaling.%s.to_serving.p90 <= %s", ap.Pool, dur(time.Duration(ap.BoundS*float64(time.Second)))))
		}
	}
	base := append(slices.Clone(d.sets), d.isolationSets(a.Step)...)
	base = append(base, sets...)
	// A one-second warm-up, not none: the other streams, stopped 1 ms
	// after they start, must stay out of the figures.
	base = append(base, "duration="+dur(length), "warmup=1s")
	type attain struct {
		arrived uint64
		sum     float64
		worst   float64
		asked   float64
	}
	classes, tenants := map[string]*attain{}, map[string]*attain{}
	tally := func(m map[string]*attain, groups map[string]*twin.Group, asked bool) {
		for name, g := range groups {
			if g == nil || g.Arrived == 0 {
				continue
			}
			x := m[name]
			if x == nil {
				x = &attain{worst: 1}
				m[name] = x
			}
			if asked {
				x.asked += g.SLOAttainment.Or(0) / float64(n)
				continue
			}
			x.arrived += g.Arrived
			x.sum += g.SLOAttainment.Or(0) / float64(n)
			x.worst = min(x.worst, g.SLOAttainment.Or(0))
		}
	}
	for si, seed := range a.Seeds {
		seedSets := append(slices.Clone(base), fmt.Sprintf("seed=%d", seed))
		rep, cmd, err := d.acqRun(seedSets, fl, expect)
		if err != nil {
			return nil, err
		}
		if si == 0 {
			a.Command = cmd
		}
		for k := range a.Pools {
			a.Pools[k].add(seed, rep.Autoscaling[a.Pools[k].Pool], n)
		}
		tally(classes, rep.Classes, false)
		tally(tenants, rep.Tenants, false)
		if tested == 0 {
			// Nothing to remove: the drill is the drill as asked.
			tally(classes, rep.Classes, true)
			tally(tenants, rep.Tenants, true)
			continue
		}
		rep, cmd, err = d.acqRun(append(slices.Clone(seedSets), asAsked...), nil, nil)
		if err != nil {
			return nil, err
		}
		if si == 0 {
			a.AsAsked = cmd
		}
		tally(classes, rep.Classes, true)
		tally(tenants, rep.Tenants, true)
	}
	short := func(m map[string]*attain) []Shortfall {
		out := []Shortfall{}
		for _, name := range slices.Sorted(maps.Keys(m)) {
			x := m[name]
			if x.arrived == 0 {
				continue
			}
			out = append(out, Shortfall{Name: name, Arrived: x.arrived, Mean: round(x.sum, 4), Worst: round(x.worst, 4),
				AsAsked: round(x.asked, 4), Drop: round(max(x.asked-x.sum, 0), 4)})
		}
		return out
	}
	a.Classes, a.Tenants = short(classes), short(tenants)
	a.judge(tested)
	return a, nil
}

// judge sets the stage's verdicts from its figures.
func (a *Acquisition) judge(tested int) {
	th := a.Thresholds
	asked := false
	a.GrantedPass, a.ServingPass, a.ShortfallPass = true, true, true
	for k := range a.Pools {
		p := &a.Pools[k]
		p.finish()
		if !p.Tested {
			continue
		}
		asked = asked || p.Replicas > 0
		p.GrantedPass = p.Replicas == 0 || p.GrantedShare >= th.MinGrantedShare
		// Replicas asked and never serving are capacity that did not
		// come: no speed to credit.
		p.ServingPass = p.Replicas == 0 || (p.ToServing.Served > 0 && p.ToServing.P90 <= p.BoundS)
		a.GrantedPass = a.GrantedPass && p.GrantedPass
		a.ServingPass = a.ServingPass && p.ServingPass
	}
	for _, c := range a.Classes {
		a.ShortfallPass = a.ShortfallPass && c.Drop <= th.MaxSLODrop
	}
	switch {
	case tested == 0:
		a.Untested = true
		a.why = "no pool of the provider declares acquisition, so how it answers a scale-up is unknown"
		a.Note = "no pool of the provider declares acquisition: the twin grants every replica at once, so how this provider " +
			"answers a scale-up (reservation, burst cap, provisioning delay) is unknown; the figures below are the " +
			"autoscaler's and the cold start's only. Declare pools.NAME.acquisition (docs/scenarios.md, acquisition) to score it"
	case !asked:
		a.Untested = true
		a.why = fmt.Sprintf("the step ×%g asked the provider for no replica", a.Step)
		a.Note = fmt.Sprintf("the load step ×%g made no pool that declares acquisition ask for a replica: nothing of the provider's acquisition was exercised", a.Step)
	}
	a.Pass = !a.Untested && a.GrantedPass && a.ServingPass && a.ShortfallPass
}

// add folds one seed's autoscaling report into p.
func (p *AcquiredPool) add(seed uint64, r *twin.AutoscaleReport, seeds int) {
	s := Seed{Seed: seed}
	if r == nil {
		p.PerSeed = append(p.PerSeed, s)
		return
	}
	prev := -1
	for _, c := range r.Series {
		if prev >= 0 && c.Requested > prev {
			s.Replicas += uint64(c.Requested - prev)
		}
		prev = c.Requested
	}
	if n := len(r.Series); n > 0 {
		p.NotServing += r.Series[n-1].Provisioning + r.Series[n-1].Warming
	}
	s.Granted, s.Refused = r.Granted, r.Refused
	p.Replicas += s.Replicas
	p.Asks += r.Asked
	p.Granted += r.Granted
	p.Reserved += r.Reserved
	p.Refused += r.Refused
	for k, v := range r.RefusedBy {
		p.RefusedBy[k] += v
	}
	if r.ToServing.Count > 0 {
		s.Served, s.ToServingP90 = r.ToServing.Count, round(r.ToServing.P90, 1)
		p.seedToServing = append(p.seedToServing, r.ToServing.P50, r.ToServing.P90)
		p.ToServing.Served += r.ToServing.Count
		p.ToServing.Max = max(p.ToServing.Max, round(r.ToServing.Max, 1))
		p.ToServing.WorstP90 = max(p.ToServing.WorstP90, s.ToServingP90)
	}
	if len(p.PerSeed) == 0 || r.MaxServing < p.MaxServing {
		p.MaxServing = r.MaxServing
	}
	p.BurstCost += r.BurstCost / float64(seeds)
	p.ReservedCost += r.ReservedCost / float64(seeds)
	p.BurstHours += r.BurstHours / float64(seeds)
	p.PerSeed = append(p.PerSeed, s)
}

// finish computes p's share and the median seed's times.
func (p *AcquiredPool) finish() {
	if p.Replicas > 0 {
		p.GrantedShare = round(math.Min(1, float64(p.Granted)/float64(p.Replicas)), 4)
	}
	var p50, p90 []float64
	for i := 0; i+1 < len(p.seedToServing); i += 2 {
		p50, p90 = append(p50, p.seedToServing[i]), append(p90, p.seedToServing[i+1])
	}
	p.ToServing.P50, p.ToServing.P90 = round(median(p50), 1), round(median(p90), 1)
	p.BurstCost, p.ReservedCost, p.BurstHours = round(p.BurstCost, 4), round(p.ReservedCost, 4), round(p.BurstHours, 4)
}

// median of v; with an even count, the upper middle (the card errs on the
// slow side).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}

// acqRun loads the drill with sets and faults and runs it.
func (d *drills) acqRun(sets, fl, expect []string) (*twin.Report, string, error) {
	sc, err := scenarios.LoadNamedWithSets(d.scenario, sets)
	if err != nil {
		return nil, "", fmt.Errorf("scorecard: the acquisition drill: %w", err)
	}
	sc.Faults, sc.Expect = slices.Clone(fl), nil
	rep, err := d.run(sc, twin.Options{})
	if err != nil {
		return nil, "", err
	}
	return rep, d.cmdWith(sets, fl, expect), nil
}

// acqStep chooses the load step: the first multiplier of stage 3's
// saturation search that broke an SLO on the provider's replicas, so that
// they need more than they hold.
func (d *drills) acqStep(lat *Latency) (float64, string) {
	if d.acqStepSet > 0 {
		return d.acqStepSet, "set by --acquisition-step"
	}
	if lat == nil || len(lat.Saturation) == 0 {
		return Multipliers[len(Multipliers)-1], "no saturation search: the largest multiplier it tries"
	}
	last := lat.Saturation[len(lat.Saturation)-1]
	if last.Pass {
		return last.Multiplier, fmt.Sprintf("no multiplier of stage 3 broke an SLO up to ×%g, the largest tried: the step may not need more replicas", last.Multiplier)
	}
	return last.Multiplier, fmt.Sprintf("the first multiplier at which stage 3 found the provider's replicas break an SLO (%s)", strings.Join(last.Breaches, "; "))
}

// acqKinds are the faults that act on acquisition
// (faults.Traits.OnAcquisition), in catalogue order.
var acqKinds = func() []faults.Kind {
	var out []faults.Kind
	for _, k := range faults.Kinds() {
		if faults.Kind(k).Traits().OnAcquisition() {
			out = append(out, faults.Kind(k))
		}
	}
	return out
}()

// acqKindList names acqKinds for an error: "a, b or c".
func acqKindList() string {
	names := make([]string, len(acqKinds))
	for i, k := range acqKinds {
		names[i] = string(k)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// acqFaults are the drill's faults: the scenario's acquisition faults
// that reach the provider's pools, moved together so that the first starts
// with the step (their order and spacing kept), then those declared with
// --acquisition-fault, as written.
func (d *drills) acqFaults() ([]string, error) {
	var mine []faults.Spec
	for _, line := range d.base.Faults {
		sp, err := faults.Parse(line)
		if err != nil || !slices.Contains(acqKinds, sp.Kind) || !d.reaches(sp.Target) {
			continue
		}
		mine = append(mine, sp)
	}
	var out []string
	if len(mine) > 0 {
		first := slices.MinFunc(mine, func(a, b faults.Spec) int { return int(a.At - b.At) }).At
		for _, sp := range mine {
			sp.At -= first
			out = append(out, sp.String())
		}
	}
	for _, line := range d.acqFaultsSet {
		sp, err := faults.Parse(line)
		if err != nil {
			return nil, &InvalidError{fmt.Errorf("scorecard: --acquisition-fault %q: %w", line, err)}
		}
		if !slices.Contains(acqKinds, sp.Kind) {
			return nil, &InvalidError{fmt.Errorf("scorecard: --acquisition-fault %q: kind %s does not act on acquisition: want %s", line, sp.Kind, acqKindList())}
		}
		out = append(out, sp.String())
	}
	return out, nil
}

// reaches reports whether a fault's target takes in one of the
// provider's pools.
func (d *drills) reaches(t faults.Target) bool {
	for _, i := range d.pools {
		p := d.base.Pools[i]
		switch {
		case t.Accelerator != "" && t.Accelerator != p.Accelerator:
		case t.Pool != "":
			if t.Pool == p.Name {
				return true
			}
		case t.Provider != "":
			if t.Provider == p.Provider {
				return true
			}
		case t.Region != "":
			if t.Region == p.Region {
				return true
			}
		}
	}
	return false
}

// poolPath is the --set path of pool i: a pool by name, or the
// purchasable type a trial bought.
func (d *drills) poolPath(i int) string {
	name := d.base.Pools[i].Name
	if d.base.Bought(i) {
		return fmt.Sprintf("purchasable[%d]", slices.IndexFunc(d.base.Purchasable, func(p scenarios.Pool) bool { return p.Name == name }))
	}
	return "pools." + name
}

// delayP90 is the 90th percentile of a declared provisioning delay: what
// the provider says nine replicas in ten take.
func delayP90(d *scenarios.Delay) time.Duration {
	if d == nil {
		return 0
	}
	mean := d.Mean.D().Seconds()
	var s float64
	switch d.Distribution {
	case "exponential":
		s = mean * math.Log(10)
	case "lognormal":
		sigma := d.Sigma
		if sigma == 0 {
			sigma = scenarios.DefaultDelaySigma
		}
		// The twin's lognormal keeps the mean: mu = ln m − σ²/2; z(0.9) = 1.2816.
		s = mean * math.Exp(-sigma*sigma/2+1.2815516*sigma)
	default:
		s = mean
	}
	return time.Duration(s * float64(time.Second)).Round(time.Second)
}

func describeAutoscale(a *scenarios.Autoscale) string {
	t := fmt.Sprintf("%g", a.Target)
	if a.Metric == "wait" {
		t = a.TargetWait.String()
	}
	return fmt.Sprintf("declared: %s target %s, %d to %d replicas", a.Metric, t, a.MinReplicas, a.MaxReplicas)
}

func describeAcquisition(q *scenarios.Acquisition) string {
	parts := []string{fmt.Sprintf("reserved %d", q.Reserved)}
	if q.Burst != nil {
		parts = append(parts, fmt.Sprintf("burst %d", *q.Burst))
	} else {
		parts = append(parts, "burst uncapped")
	}
	if d := q.Delay; d != nil {
		s := fmt.Sprintf("delay %s mean %s", d.Distribution, d.Mean)
		if d.Distribution == "lognormal" {
			sigma := d.Sigma
			if sigma == 0 {
				sigma = scenarios.DefaultDelaySigma
			}
			s += fmt.Sprintf(" sigma %g", sigma)
		}
		parts = append(parts, s)
	} else {
		parts = append(parts, "no delay")
	}
	if q.BurstPrice > 0 {
		parts = append(parts, fmt.Sprintf("burst_price %g", q.BurstPrice))
	}
	if q.RetryAfter > 0 {
		parts = append(parts, "retry_after "+q.RetryAfter.String())
	}
	return strings.Join(parts, ", ")
}

// gates are the stage's three gate items: granted share, time to
// serving, SLO cost. An untested stage gives three untested items.
func (a *Acquisition) gates() []GateItem {
	granted := GateItem{Name: "acquisition: granted share", Pass: a.GrantedPass, Command: a.Command}
	serving := GateItem{Name: "acquisition: time to serving", Pass: a.ServingPass, Command: a.Command}
	cost := GateItem{Name: "acquisition: SLO cost of the shortfall", Pass: a.ShortfallPass, Command: a.AsAsked}
	if cost.Command == "" {
		cost.Command = a.Command
	}
	if a.Untested {
		for _, g := range []*GateItem{&granted, &serving, &cost} {
			g.Pass, g.Untested = false, true
			g.Evidence = "untested: " + a.why + " (stage 6 of the card)"
		}
		return []GateItem{granted, serving, cost}
	}
	drill := fmt.Sprintf("step ×%g, %d seeds", a.Step, len(a.Seeds))
	if len(a.Faults) > 0 {
		drill += ", under " + strings.Join(a.Faults, " + ")
	}
	var gp, sp, untested []string
	for _, p := range a.Pools {
		if !p.Tested {
			untested = append(untested, p.Pool)
			continue
		}
		if p.Replicas == 0 {
			gp = append(gp, fmt.Sprintf("%s: asked for nothing", p.Pool))
		} else {
			gp = append(gp, fmt.Sprintf("%s: %d of %d replicas asked granted (%s, want >= %s)%s", p.Pool, p.Granted, p.Replicas,
				pct(p.GrantedShare), pct(a.Thresholds.MinGrantedShare), refusals(p)))
		}
		switch {
		case p.Replicas == 0:
			sp = append(sp, fmt.Sprintf("%s: asked for nothing", p.Pool))
		case p.ToServing.Served == 0 && p.Granted == 0:
			sp = append(sp, fmt.Sprintf("%s: none of %d replicas asked serving within the drill (%gs): none granted", p.Pool, p.Replicas, a.DurationS))
		case p.ToServing.Served == 0:
			sp = append(sp, fmt.Sprintf("%s: none of %d replicas asked serving within the drill (%gs): %d granted, %d of them still on the way at its end, the rest released by a scale-down before serving",
				p.Pool, p.Replicas, a.DurationS, p.Granted, p.NotServing))
		default:
			s := fmt.Sprintf("%s: p90 %gs (median seed; worst seed %gs, max %gs) vs bound %gs (delay p90 %gs + cold start %gs + slack %gs)",
				p.Pool, p.ToServing.P90, p.ToServing.WorstP90, p.ToServing.Max, p.BoundS, p.DelayP90S, p.ColdStartS, a.Thresholds.ServingSlackS)
			if p.NotServing > 0 {
				s += fmt.Sprintf("; %d granted not serving when the drill ended", p.NotServing)
			}
			sp = append(sp, s)
		}
	}
	tail := ""
	if len(untested) > 0 {
		tail = "; untested (no acquisition block): " + strings.Join(untested, ", ")
	}
	granted.Evidence = drill + ": " + strings.Join(gp, "; ") + tail
	serving.Evidence = drill + ": " + strings.Join(sp, "; ") + tail
	var cp []string
	for _, c := range a.Classes {
		cp = append(cp, fmt.Sprintf("%s %s vs %s as asked (drop %s, want <= %s)", c.Name, pct(c.Mean), pct(c.AsAsked),
			points(c.Drop), points(a.Thresholds.MaxSLODrop)))
	}
	var bc []string
	for _, p := range a.Pools {
		if p.BurstCost > 0 {
			bc = append(bc, fmt.Sprintf("%s %.4g", p.Pool, p.BurstCost))
		}
	}
	cost.Evidence = drill + ", SLO attainment over the drill: " + strings.Join(cp, "; ")
	if len(cp) == 0 {
		cost.Evidence = drill + ": no class had arrivals"
	}
	if len(bc) > 0 {
		cost.Evidence += "; burst cost per drill: " + strings.Join(bc, ", ")
	}
	return []GateItem{granted, serving, cost}
}

// refusals is a pool's refused asks for a gate line.
func refusals(p AcquiredPool) string {
	if p.Refused == 0 {
		return ""
	}
	return fmt.Sprintf("; %d of %d asks refused (%s)", p.Refused, p.Asks, refusedBy(p))
}

// refusedBy lists the reasons with a refusal: "stockout 126".
func refusedBy(p AcquiredPool) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p.RefusedBy)) {
		if v := p.RefusedBy[k]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

// pct renders a share as a percentage.
func pct(x float64) string { return fmt.Sprintf("%.3g%%", x*100) }

// points renders an attainment difference in percentage points.
func points(x float64) string { return fmt.Sprintf("%.3g pts", x*100) }
