package spec

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// Autoscaling steps: a pool's autoscale and acquisition keys as --set
// overrides, the acquisition faults (stockout, quota-cap,
// slow-provisioning) as fault lines, and outcomes on the report's
// autoscaling.<pool> section. A pool name may be quoted or not.

// poolName matches a pool name, quoted or bare.
const poolName = `"?([^"\s]+)"?`

// The metrics an autoscale step names, as the schema spells them.
var autoscaleMetrics = map[string]string{"queue depth": "queue", "utilization": "utilization", "predicted wait": "wait"}

// autoscaleOn is the step `pool P autoscales on METRIC TARGET between MIN
// and MAX replicas`: the pool's metric, target and bounds, and its
// replicas moved into the bounds when they lie outside (the count it
// starts with, as an HPA clamps it).
func autoscaleOn(_ context.Context, w *world, a []string) error {
	ps, err := w.pool(a[0])
	if err != nil {
		return err
	}
	metric := autoscaleMetrics[a[1]]
	target, targetWait := "", ""
	switch metric {
	case "queue":
		v, err := strconv.ParseFloat(a[2], 64)
		if err != nil || !(v > 0) {
			return fmt.Errorf("queue depth %q: want the requests waiting per replica, a number above 0 (4)", a[2])
		}
		target = a[2]
	case "utilization":
		v, err := fraction(a[2])
		if err != nil || !(v > 0 && v <= 1) {
			return fmt.Errorf("utilization %q: want a percentage (70%%) or a fraction (0.7), above 0 and at most all of the batch slots", a[2])
		}
		target = strconv.FormatFloat(v, 'g', -1, 64)
	case "wait":
		d, err := time.ParseDuration(a[2])
		if err != nil || d <= 0 {
			return fmt.Errorf("predicted wait %q: want a duration above 0 (2s)", a[2])
		}
		targetWait = a[2]
	}
	lo, _ := strconv.Atoi(a[3])
	hi, _ := strconv.Atoi(a[4])
	if lo < 1 || hi < lo {
		return fmt.Errorf("between %d and %d replicas: want at least 1 replica and the first bound at most the second", lo, hi)
	}
	p := "pools." + ps.Name
	sets := []string{p + ".autoscale.metric=" + metric, p + ".autoscale.target=" + target, p + ".autoscale.target_wait=" + targetWait,
		p + ".autoscale.min_replicas=" + a[3], p + ".autoscale.max_replicas=" + a[4]}
	if n := min(max(ps.Replicas, lo), hi); n != ps.Replicas {
		sets = append(sets, fmt.Sprintf("%s.replicas=%d", p, n))
	}
	return w.set(sets...)
}

// holdsReserved is the step `pool P holds N reserved replicas`.
func holdsReserved(_ context.Context, w *world, a []string) error {
	ps, err := w.autoscaledPool(a[0], "a reservation is what its autoscaler is granted first")
	if err != nil {
		return err
	}
	return w.set(fmt.Sprintf("pools.%s.acquisition.reserved=%s", ps.Name, a[1]))
}

// grantsAfter is the step `the provider of pool P grants replicas after D
// [on average]`: a constant provisioning delay, or an exponential one.
func grantsAfter(_ context.Context, w *world, a []string) error {
	ps, err := w.autoscaledPool(a[0], "a provisioning delay is how long its autoscaler's asks take")
	if err != nil {
		return err
	}
	if d, err := time.ParseDuration(a[1]); err != nil || d < 0 {
		return fmt.Errorf("%q: want a duration such as 6m or 90s", a[1])
	}
	dist := "constant"
	if a[2] != "" {
		dist = "exponential"
	}
	return w.set(fmt.Sprintf("pools.%s.acquisition.delay={distribution: %s, mean: %s}", ps.Name, dist, a[1]))
}

// shares are the words a stockout step takes for the share granted.
var shares = map[string]float64{"nothing": 0, "none": 0, "a tenth": 0.1, "a fifth": 0.2, "a quarter": 0.25,
	"a third": 1.0 / 3, "half": 0.5, "two thirds": 2.0 / 3, "three quarters": 0.75}

// stockout is the steps `the provider [of pool P|in region R] NAME is out
// of stock [of ACCELERATOR] from T [for D]` (grant "") and `... grants
// SHARE of what is asked from T [for D]`.
func stockout(w *world, where, name, accel, grant, at, dur string) error {
	key := map[string]string{"": "provider", "of pool ": "pool", "in region ": "region"}[where]
	if err := w.acquisitionTarget(key, name, "a stockout"); err != nil {
		return err
	}
	g := ""
	if grant != "" {
		v, ok := shares[grant]
		if !ok {
			var err error
			if v, err = fraction(grant); err != nil {
				v = -1
			}
		}
		if !(v >= 0 && v < 1) {
			return fmt.Errorf("grants %q: want a share below all of it: a quarter, half, 25%% or 0.25 (%s)", grant, "or say the provider is out of stock")
		}
		if v > 0 {
			g = "grant=" + strconv.FormatFloat(v, 'g', -1, 64)
		}
	}
	return w.addFault(fault(faults.Stockout, key+"="+name, opt("accelerator", accel), "at="+at, opt("for", dur), g))
}

// acquisitionTarget checks an acquisition fault's target: a pool, region
// or provider of the fleet with an autoscaled pool (a fault on fixed pools
// changes nothing).
func (w *world) acquisitionTarget(key, name, what string) error {
	if err := w.requireFleet(); err != nil {
		return err
	}
	sc, err := w.load(nil)
	if err != nil {
		return err
	}
	var all, scaled []string
	for _, p := range sc.Pools {
		v := map[string]string{"pool": p.Name, "region": p.Region, "provider": p.Provider}[key]
		if !slices.Contains(all, v) {
			all = append(all, v)
		}
		if v == name && p.Autoscale != nil {
			scaled = append(scaled, p.Name)
		}
	}
	if !slices.Contains(all, name) {
		return unknownName(key, name, all)
	}
	if len(scaled) == 0 {
		return fmt.Errorf("%s changes only what an autoscaler asks for, and %s %s has no autoscaled pool (%s); make one autoscale first, with a step like Given pool %s autoscales on queue depth 4 between 3 and 11 replicas",
			what, key, name, w.autoscaledList(sc), w.poolAt(sc, key, name))
	}
	return nil
}

// poolAt is the first pool of the fleet at that pool, region or provider.
func (w *world) poolAt(sc *scenarios.Scenario, key, name string) string {
	for _, p := range sc.Pools {
		if map[string]string{"pool": p.Name, "region": p.Region, "provider": p.Provider}[key] == name {
			return p.Name
		}
	}
	return "NAME"
}

// autoscaledList says which pools autoscale, and at which provider.
func (w *world) autoscaledList(sc *scenarios.Scenario) string {
	var out []string
	for _, p := range sc.Pools {
		if p.Autoscale != nil {
			out = append(out, p.Name+" at "+p.Provider)
		}
	}
	if len(out) == 0 {
		return "the fleet has no autoscaled pool"
	}
	return "autoscaled pools: " + strings.Join(out, ", ")
}

// quotaCap is the step `the account at PROVIDER is capped at N GPUs [from
// T] [for D]`.
func quotaCap(_ context.Context, w *world, a []string) error {
	if err := w.acquisitionTarget("provider", a[0], "a quota cap"); err != nil {
		return err
	}
	at := a[2]
	if at == "" {
		at = "0s"
	}
	return w.addFault(fault(faults.QuotaCap, "provider="+a[0], "gpus="+a[1], "at="+at, opt("for", a[3])))
}

// slowProvisioning is the step `provisioning at provider P|for pool P
// takes F times as long from T [for D]`.
func slowProvisioning(_ context.Context, w *world, a []string) error {
	key := "provider"
	if a[0] == "for pool" {
		key = "pool"
	}
	if err := w.acquisitionTarget(key, a[1], "slow provisioning"); err != nil {
		return err
	}
	if v, err := strconv.ParseFloat(a[2], 64); err != nil || !(v > 0) {
		return fmt.Errorf("%q times as long: want a factor above 0 (3, or 1.5)", a[2])
	}
	return w.addFault(fault(faults.SlowProvisioning, key+"="+a[1], "factor="+a[2], "at="+a[3], opt("for", a[4])))
}

// pool is the fleet's pool called name, or an error with the nearest name.
func (w *world) pool(name string) (*scenarios.Pool, error) {
	if err := w.requireFleet(); err != nil {
		return nil, err
	}
	sc, err := w.load(nil)
	if err != nil {
		return nil, err
	}
	return poolOf(sc, name)
}

func poolOf(sc *scenarios.Scenario, name string) (*scenarios.Pool, error) {
	var names []string
	for i := range sc.Pools {
		if sc.Pools[i].Name == name {
			return &sc.Pools[i], nil
		}
		names = append(names, sc.Pools[i].Name)
	}
	return nil, unknownName("pool", name, names)
}

// autoscaledPool is the pool called name, which must autoscale (why: what
// the step needs it for).
func (w *world) autoscaledPool(name, why string) (*scenarios.Pool, error) {
	ps, err := w.pool(name)
	if err != nil {
		return nil, err
	}
	if ps.Autoscale == nil {
		return nil, fmt.Errorf("pool %s does not autoscale, and %s; make it autoscale first, with a step like Given pool %s autoscales on queue depth 4 between %d and %d replicas",
			ps.Name, why, ps.Name, ps.Replicas, 2*ps.Replicas+1)
	}
	return ps, nil
}

// scaled resolves an autoscaling outcome's pool (name "": the fleet's only
// autoscaled pool) and checks that it autoscales, so that the report has
// its autoscaling section.
func (w *world) scaled(name string) (string, error) {
	sc := w.sc
	if sc == nil {
		var err error
		if sc, err = w.load(nil); err != nil {
			return "", err
		}
	}
	if name == "" {
		var scaled []string
		for _, p := range sc.Pools {
			if p.Autoscale != nil {
				scaled = append(scaled, p.Name)
			}
		}
		switch len(scaled) {
		case 1:
			return scaled[0], nil
		case 0:
			return "", fmt.Errorf("the fleet has no autoscaled pool, so the provider is asked for nothing; make one autoscale, with a step like Given pool %s autoscales on queue depth 4 between 3 and 11 replicas", sc.Pools[0].Name)
		}
		return "", fmt.Errorf("the fleet has %d autoscaled pools (%s); name one, e.g. the provider refuses replicas of pool %s for stockout", len(scaled), strings.Join(scaled, ", "), scaled[0])
	}
	ps, err := poolOf(sc, name)
	if err != nil {
		return "", err
	}
	if ps.Autoscale == nil {
		return "", fmt.Errorf("pool %s does not autoscale, so the report has no autoscaling.%s to judge (%s); make it autoscale, with a step like Given pool %s autoscales on queue depth 4 between %d and %d replicas",
			ps.Name, ps.Name, w.autoscaledList(sc), ps.Name, ps.Replicas, 2*ps.Replicas+1)
	}
	return ps.Name, nil
}

// scaledExprs builds an autoscaling outcome's expectations on pool a[i]'s
// section of the report.
func scaledExprs(i int, f func(p string, a []string) ([]string, error)) func(w *world, a []string) ([]string, error) {
	return func(w *world, a []string) ([]string, error) {
		p, err := w.scaled(a[i])
		if err != nil {
			return nil, err
		}
		return f("autoscaling."+p, a)
	}
}

// scaledNote says what pool a[i]'s autoscaler and provider did.
func scaledNote(i int) func(w *world, a []string) string {
	return func(w *world, a []string) string {
		p, err := w.scaled(a[i])
		if err != nil {
			return ""
		}
		return w.autoscaleStory(p)
	}
}

// acquisitionFault is the label of the last fault of the first
// acquisition kind (faults.Traits.OnAcquisition, in catalogue order: the
// last stockout, else the last quota cap, else the last slow
// provisioning) the scenario has, for the timeline excerpt (the asks,
// grants and refusals around it).
func acquisitionFault(w *world, _ []string) string {
	for _, k := range faults.Kinds() {
		if !faults.Kind(k).Traits().OnAcquisition() {
			continue
		}
		if l, err := w.lastLabel(faults.Kind(k)); err == nil {
			return l
		}
	}
	return ""
}

// autoscaleStory is one line on what pool p's autoscaler asked for and
// what its provider did with it.
func (w *world) autoscaleStory(p string) string {
	ar := w.rep.Autoscaling[p]
	if ar == nil {
		return "the report has no autoscaling." + p
	}
	start := 0
	if ps, err := poolOf(w.sc, p); err == nil {
		start = ps.Replicas
	}
	peak, peakAt := peakRequested(ar, start)
	s := fmt.Sprintf("pool %s scaled up %s, down %s; it started with %d replicas and asked for at most %d", p, times(ar.ScaleUps), times(ar.ScaleDowns), start, peak)
	if peakAt >= 0 {
		s += " (from " + at(peakAt) + ")"
	}
	s += fmt.Sprintf("; the provider was asked %d times for a replica, granted %d (%d reserved) and refused %d", ar.Asked, ar.Granted, ar.Reserved, ar.Refused)
	if ar.Refused > 0 {
		var by []string
		for _, r := range slices.Sorted(maps.Keys(ar.RefusedBy)) {
			if n := ar.RefusedBy[r]; n > 0 {
				by = append(by, fmt.Sprintf("%s %d", r, n))
			}
		}
		s += " (" + strings.Join(by, ", ") + ")"
	}
	s += fmt.Sprintf("; serving %d to %d replicas", ar.MinServing, ar.MaxServing)
	if ar.ToServing.Count > 0 {
		took := at(ar.ToServing.Max)
		if soonest := readySoonest(w.rep, p); soonest >= 0 && at(soonest) != took {
			took = fmt.Sprintf("%s to %s (p50 %s)", at(soonest), took, at(ar.ToServing.P50))
		}
		s += fmt.Sprintf("; %d new replicas served, %s after they were asked for", ar.ToServing.Count, took)
	} else {
		s += "; no new replica served"
	}
	return s
}

// peakRequested is the most replicas the pool asked for at once and when
// it first did (-1: it never asked beyond start).
func peakRequested(ar *twin.AutoscaleReport, start int) (int, float64) {
	peak, when := start, -1.0
	for _, c := range ar.Series {
		if c.Requested > peak {
			peak, when = c.Requested, c.TS
		}
	}
	return peak, when
}

// times says how many times: never, once, twice, 3 times.
func times(n uint64) string {
	switch n {
	case 0:
		return "never"
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// readyRe matches the timeline's replica-ready entries (sched.Scaler).
var readyRe = regexp.MustCompile(`^pool (\S+): replica \d+ serving, (\S+) after it was asked for$`)

// readyTimes are the times, in seconds, from asking to serving of pool p's
// new replicas, from the timeline's replica-ready entries (the report's
// to_serving has no minimum).
func readyTimes(rep *twin.Report, p string) []float64 {
	var out []float64
	for _, ev := range rep.Timeline {
		if ev.Kind != "replica-ready" {
			continue
		}
		if m := readyRe.FindStringSubmatch(ev.Detail); m != nil && m[1] == p {
			if d, err := time.ParseDuration(m[2]); err == nil {
				out = append(out, d.Seconds())
			}
		}
	}
	return out
}

// readySoonest is the shortest time from asking to serving of pool p's new
// replicas (-1: none).
func readySoonest(rep *twin.Report, p string) float64 {
	ts := readyTimes(rep, p)
	if len(ts) == 0 {
		return -1
	}
	return slices.Min(ts)
}

// bound is an optional "at least " or "at most " before a count: the
// operator it means ("==" when none).
func bound(word string) string {
	switch strings.TrimSpace(word) {
	case "at least":
		return ">="
	case "at most":
		return "<="
	}
	return "=="
}

func holds(op string, got, want int) bool {
	switch op {
	case ">=":
		return got >= want
	case "<=":
		return got <= want
	}
	return got == want
}

// asksFor is the steps `pool P asks for [at least|at most] N more
// replicas` (more: the most it asked for at once beyond the replicas it
// started with) and `pool P scales up to [at least|at most] N replicas`.
func asksFor(more bool) func(ctx context.Context, w *world, a []string) error {
	return func(ctx context.Context, w *world, a []string) error {
		p, err := w.scaled(a[0])
		if err != nil {
			return err
		}
		if err := w.run(ctx); err != nil {
			return err
		}
		ar := w.rep.Autoscaling[p]
		if ar == nil {
			return fmt.Errorf("the report has no autoscaling.%s", p)
		}
		ps, err := poolOf(w.sc, p)
		if err != nil {
			return err
		}
		op := bound(a[1])
		want, _ := strconv.Atoi(a[2])
		peak, when := peakRequested(ar, ps.Replicas)
		got, what := peak, "the most replicas asked for at once"
		if more {
			got, what = peak-ps.Replicas, "the most replicas asked for at once beyond the "+strconv.Itoa(ps.Replicas)+" it started with"
		}
		if holds(op, got, want) {
			return nil
		}
		measured := fmt.Sprintf("%d", got)
		if when >= 0 {
			measured += fmt.Sprintf(" (%d → %d at %s)", ps.Replicas, peak, at(when))
		} else {
			measured += " (it never asked for more than it started with)"
		}
		return w.failed(fmt.Sprintf("pool %s: %s %s %d", p, what, op, want), measured, acquisitionFault(w, nil), w.autoscaleStory(p), nil)
	}
}

// notSooner is the step `no replica of pool P serves sooner than D after
// it was asked for`.
func notSooner(ctx context.Context, w *world, a []string) error {
	p, err := w.scaled(a[0])
	if err != nil {
		return err
	}
	limit, err := time.ParseDuration(a[1])
	if err != nil || limit < 0 {
		return fmt.Errorf("%q: want a duration such as 7m (the provisioning delay plus the model load)", a[1])
	}
	if err := w.run(ctx); err != nil {
		return err
	}
	ar := w.rep.Autoscaling[p]
	if ar == nil {
		return fmt.Errorf("the report has no autoscaling.%s", p)
	}
	ts := readyTimes(w.rep, p)
	if uint64(len(ts)) != ar.ToServing.Count {
		return fmt.Errorf("autoscaling.%s.to_serving counts %d replicas, but the timeline has %d replica-ready entries for the pool: cannot tell the soonest", p, ar.ToServing.Count, len(ts))
	}
	var early []string
	for _, t := range ts {
		if t < limit.Seconds() {
			early = append(early, at(t))
		}
	}
	if len(early) == 0 {
		return nil
	}
	return w.failed(fmt.Sprintf("no replica of pool %s serves sooner than %s after it was asked for", p, a[1]),
		fmt.Sprintf("%d of %d new replicas served sooner: %s after they were asked for", len(early), len(ts), list(early)),
		acquisitionFault(w, nil), w.autoscaleStory(p), nil)
}

// refusalReasons maps a refusal step's words to the report's reasons.
var refusalReasons = map[string]string{
	"stockout": twin.RefusedStockout, "a stockout": twin.RefusedStockout, "the stockout": twin.RefusedStockout,
	"quota": twin.RefusedQuota, "the quota": twin.RefusedQuota, "the quota cap": twin.RefusedQuota, "quota cap": twin.RefusedQuota,
	"reservation": twin.RefusedReservation, "the reservation": twin.RefusedReservation,
}

// refusalPath is the report path of a refusal step's count: every refusal
// of the pool, or those for a reason.
func refusalPath(p, reason string) (string, error) {
	if reason == "" {
		return p + ".refused", nil
	}
	r, ok := refusalReasons[reason]
	if !ok {
		return "", fmt.Errorf("refused for %q: want stockout, quota or reservation (the report's refused_by reasons)", reason)
	}
	return p + ".refused_by." + r, nil
}

// refuses is the outcomes `the provider refuses replicas [of pool P] [for
// REASON]` and `the provider refuses no replicas ...`.
func refuses(some bool) func(w *world, a []string) ([]string, error) {
	return scaledExprs(0, func(p string, a []string) ([]string, error) {
		path, err := refusalPath(p, a[1])
		if err != nil {
			return nil, err
		}
		if some {
			return []string{path + " > 0"}, nil
		}
		return []string{path + " == 0"}, nil
	})
}

// durationArg checks an outcome's duration.
func durationArg(s string) error {
	if d, err := time.ParseDuration(s); err != nil || d < 0 {
		return fmt.Errorf("%q: want a duration such as 7m or 2m30s", s)
	}
	return nil
}

// autoscaleSteps are the autoscaling rows of the step table, by keyword.
func autoscaleGivens() []*step {
	return []*step{
		{keyword: "Given", pattern: `^pool ` + poolName + ` autoscales on (queue depth|utilization|predicted wait) (\S+) between (\d+) and (\d+) replicas$`,
			doc:     "Make a pool autoscale by the HPA's rule (docs/scenarios.md#autoscale): on the requests waiting per replica (`queue depth 4`), its batch slots busy (`utilization 70%`) or the gateway's predicted wait (`predicted wait 2s`), between these bounds (`--set pools.P.autoscale.metric=…` and `target`/`target_wait`, `min_replicas`, `max_replicas`). Its other autoscale keys keep their values or defaults; a pool whose replicas lie outside the bounds starts at the nearer one.",
			example: "Given pool usw-h100-8b autoscales on queue depth 4 between 3 and 11 replicas",
			do:      autoscaleOn},
		{keyword: "Given", pattern: `^pool ` + poolName + ` holds (\d+) reserved replicas?$`,
			doc:     "The replicas an autoscaled pool holds reserved: granted at its first asks with no provisioning delay, whatever the provider's stockout (`--set pools.P.acquisition.reserved=N`); the replicas it starts with hold them first.",
			example: "Given pool usw-h100-8b holds 4 reserved replicas",
			do:      holdsReserved},
		{keyword: "Given", pattern: `^the provider of pool ` + poolName + ` grants replicas after (\S+)( on average)?$`,
			doc:     "An autoscaled pool's provisioning delay for on-demand replicas, before the model load: exactly this long, or drawn from an exponential with this mean (`--set pools.P.acquisition.delay={distribution: constant|exponential, mean: D}`).",
			example: "Given the provider of pool usw-h100-8b grants replicas after 6m",
			do:      grantsAfter},
	}
}

func autoscaleFaults() []*step {
	return []*step{
		{keyword: "When", pattern: `^the provider (of pool |in region )?"?([^"\s]+)"? is out of stock(?: of (\S+))? from (\S+)(?: for (\S+))?$`,
			doc:     "A stockout: the provider (of the pool, or of every pool in the region) grants no on-demand replica to an autoscaled pool (of that accelerator); what is refused is asked again after the pool's retry_after, and reserved replicas are unaffected (`stockout provider=|pool=|region= [accelerator=] at= [for=]`).",
			example: "When the provider gpu-cloud-b is out of stock from 11m",
			do: func(_ context.Context, w *world, a []string) error {
				return stockout(w, a[0], a[1], a[2], "", a[3], a[4])
			}},
		{keyword: "When", pattern: `^the provider (of pool |in region )?"?([^"\s]+)"? grants (.+) of what is asked from (\S+)(?: for (\S+))?$`,
			doc:     "A partial stockout: each ask's on-demand replicas are granted this share (a tenth, a fifth, a quarter, a third, half, two thirds, three quarters, a percentage or a fraction below 1), rounded at random with one seeded draw, and the rest refused (`stockout ... grant=F`).",
			example: "When the provider gpu-cloud-b grants a quarter of what is asked from 10m for 1m",
			do: func(_ context.Context, w *world, a []string) error {
				return stockout(w, a[0], a[1], "", a[2], a[3], a[4])
			}},
		{keyword: "When", pattern: `^the account at "?([^"\s]+)"? is capped at (\d+) GPUs?(?: from (\S+))?(?: for (\S+))?$`,
			doc:     "A quota cap: the GPUs granted to the provider's autoscaled pools and not released, all pools together, stay within this many; a scale-up past it is refused `quota` (`quota-cap provider= gpus=N at= [for=]`; from the start of the run unless from says otherwise).",
			example: "When the account at gpu-cloud-b is capped at 16 GPUs",
			do:      quotaCap},
		{keyword: "When", pattern: `^provisioning (at provider|for pool) "?([^"\s]+)"? takes (\S+) times as long from (\S+)(?: for (\S+))?$`,
			doc:     "Slow provisioning: an on-demand replica asked for while it holds takes this many times its drawn provisioning delay (`slow-provisioning provider=|pool= factor=F at= [for=]`).",
			example: "When provisioning at provider gpu-cloud-b takes 3 times as long from 10m for 15m",
			do:      slowProvisioning},
	}
}

func autoscaleOutcomes() []*step {
	return []*step{
		{keyword: "Then", pattern: `^pool ` + poolName + ` is granted at (most|least) (\d+) replicas?$`,
			doc:     "The replicas the provider granted an autoscaled pool over the run, reserved ones included (`autoscaling.P.granted`).",
			example: "Then pool usw-h100-8b is granted at most 2 replicas",
			exprs: scaledExprs(0, func(p string, a []string) ([]string, error) {
				return []string{fmt.Sprintf("%s.granted %s %s", p, bound("at "+a[1]), a[2])}, nil
			}),
			fault: acquisitionFault, note: scaledNote(0)},
		{keyword: "Then", pattern: `^pool ` + poolName + ` asks for (at least |at most )?(\d+) more replicas?$`,
			doc:     "The most replicas the autoscaler asked for at once, beyond those the pool started with (from `autoscaling.P.series`): exactly, at least or at most this many. A failure says when it asked and what the provider did.",
			example: "Then pool usw-h100-8b asks for 8 more replicas",
			do:      asksFor(true)},
		{keyword: "Then", pattern: `^pool ` + poolName + ` scales up to (at least |at most )?(\d+) replicas?$`,
			doc:     "The most replicas the autoscaler asked for at once (from `autoscaling.P.series`), whether or not the provider granted them.",
			example: "Then pool usw-h100-8b scales up to 11 replicas",
			do:      asksFor(false)},
		{keyword: "Then", pattern: `^pool ` + poolName + ` serves new replicas within (\S+) of asking$`,
			doc:     "At least one new replica served, and none took longer than this from being first asked for to serving: provisioning, then the model load (`autoscaling.P.to_serving.max`).",
			example: "Then pool usw-h100-8b serves new replicas within 9m of asking",
			exprs: scaledExprs(0, func(p string, a []string) ([]string, error) {
				if err := durationArg(a[1]); err != nil {
					return nil, err
				}
				return []string{p + ".to_serving.count > 0", p + ".to_serving.max <= " + a[1]}, nil
			}),
			fault: acquisitionFault, note: scaledNote(0)},
		{keyword: "Then", pattern: `^no replica of pool ` + poolName + ` serves sooner than (\S+) after it was asked for$`,
			doc:     "Capacity arrives late: every new replica that served took at least this long from being first asked for (read from the timeline's replica-ready entries; holds when none served). A failure lists the early ones.",
			example: "Then no replica of pool usw-h100-8b serves sooner than 7m after it was asked for",
			do:      notSooner},
		{keyword: "Then", pattern: `^the provider refuses replicas(?: of pool ` + poolName + `)?(?: for "?([^"]+?)"?)?$`,
			doc:     "The provider refused an autoscaled pool's asks (the fleet's only autoscaled pool unless one is named), for any reason or for this one: stockout, quota or reservation (`autoscaling.P.refused_by.R > 0`).",
			example: `Then the provider refuses replicas for "stockout"`,
			exprs:   refuses(true), fault: acquisitionFault, note: scaledNote(0)},
		{keyword: "Then", pattern: `^the provider refuses no replicas?(?: of pool ` + poolName + `)?(?: for "?([^"]+?)"?)?$`,
			doc:     "The provider refused none of the pool's asks (for that reason).",
			example: "Then the provider refuses no replica of pool usw-h100-8b",
			exprs:   refuses(false), fault: acquisitionFault, note: scaledNote(0)},
		{keyword: "Then", pattern: `^pool ` + poolName + ` never serves more than (\d+) replicas?$`,
			doc:     "The most replicas of an autoscaled pool serving at once (`autoscaling.P.max_serving`): what it could count on, whatever it asked for.",
			example: "Then pool usw-h100-8b never serves more than 5 replicas",
			exprs: scaledExprs(0, func(p string, a []string) ([]string, error) {
				return []string{p + ".max_serving <= " + a[1]}, nil
			}),
			fault: acquisitionFault, note: scaledNote(0)},
		{keyword: "Then", pattern: `^pool ` + poolName + ` always serves at least (\d+) replicas?$`,
			doc:     "The fewest replicas of an autoscaled pool serving at once (`autoscaling.P.min_serving`).",
			example: "Then pool usw-h100-8b always serves at least 3 replicas",
			exprs: scaledExprs(0, func(p string, a []string) ([]string, error) {
				return []string{p + ".min_serving >= " + a[1]}, nil
			}),
			fault: acquisitionFault, note: scaledNote(0)},
	}
}
