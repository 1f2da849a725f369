package spec

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Outcomes SREs reached for and could not write (issue 36): an upper bound
// on a tenant's attainment, refusals with a retry hint, an ejection's
// time, a tenant's residency, and a canary's promotion.
func moreOutcomes() []*step {
	return []*step{
		{keyword: "Then", pattern: `^SLO attainment of (tenant|class) (\S+) is (below|at least) (\S+) (during|after) (.+)$`,
			doc:     "The share of the tenant's (or class's) requests that met every objective (a request with no answer is a miss), of those arriving while the fault was active, or in the ten minutes after it ended: below the bound (the fault hurt it) or at least it.",
			example: "Then SLO attainment of tenant bank-eu is below 90% during the outage",
			exprs: func(w *world, a []string) ([]string, error) {
				if strings.Contains(a[5], "+") {
					return nil, fmt.Errorf("%q: a %s's attainment after a fault is over the ten minutes after it ended, with no offset", a[5], a[0])
				}
				p, err := w.impactPath(a[5], a[0], a[1])
				if err != nil {
					return nil, err
				}
				v, err := fraction(a[3])
				if err != nil || v < 0 || v > 1 {
					return nil, fmt.Errorf("attainment %q: want a fraction (0.9) or a percentage (90%%)", a[3])
				}
				op := ">="
				if a[2] == "below" {
					op = "<"
				}
				return []string{fmt.Sprintf("%s.slo_attainment_%s %s %g", p, a[4], op, v)}, nil
			},
			fault: faultArg(5),
			note:  impactNote(5, 0, 1)},
		{keyword: "Then", pattern: `^requests of (tenant|class) (\S+) are refused at arrival with a retry hint during (.+)$`,
			doc:     "Those of the tenant's (or class's) requests arriving while the fault was active that got no answer were refused at once with a Retry-After (an outage, a throttle, a full queue: every reason but no route), none waited out its deadline or failed, and at least one was refused.",
			example: "Then requests of tenant bank-eu are refused at arrival with a retry hint during the outage",
			do:      refusedWithHint},
		{keyword: "Then", pattern: `^a replica of pool (\S+) is ejected within (\S+)$`,
			doc:     "Outlier ejection took a replica of the pool out of routing within this long of the start of the scenario's last fault (from the timeline's ejected entries); a failure lists the pool's ejections.",
			example: "Then a replica of pool use-h100-8b is ejected within 30s",
			do:      ejectedWithin},
		{keyword: "Then", pattern: `^no request of tenant (\S+) leaves its jurisdiction$`,
			doc:     "Residency holds for one tenant: none of its requests was served outside its jurisdiction (`residency_violations_by_tenant.T.violations`); a failure says where they were served, by pool and region.",
			example: "Then no request of tenant bank-eu leaves its jurisdiction",
			do:      tenantResidency},
		{keyword: "Then", pattern: `^the canary(?: "([^"]+)")? is promoted to (\S+) within (\S+)$`,
			doc:     "The canary's rollout reached this share (a fraction or a percentage; 100% is promoted) within this long of the start of the run, from its decisions; a failure says the share it reached and its decisions.",
			example: "Then the canary is promoted to 100% within 17m",
			do:      promotedWithin},
	}
}

// refusedWithHint is the step `requests of tenant T are refused at
// arrival with a retry hint during F`.
func refusedWithHint(ctx context.Context, w *world, a []string) error {
	p, err := w.impactPath(a[2], a[0], a[1])
	if err != nil {
		return err
	}
	if err := w.run(ctx); err != nil {
		return err
	}
	l, _ := w.labelFor(a[2])
	im := w.impactOf(l, a[0], a[1])
	note := describeImpact(a[0], a[1], l, im)
	// What the report can judge of it again: nothing timed out or failed.
	exprs := []string{p + ".timed_out == 0", p + ".failed == 0"}
	expected := fmt.Sprintf("%s %s: requests refused at arrival with a retry hint during %s (%s, at least one refused, none without a hint)", a[0], a[1], l, strings.Join(exprs, ", "))
	if im == nil {
		return w.failed(expected, "nothing: the report has no such "+a[0]+" in the fault", l, note, exprs)
	}
	var refused uint64
	var noHint []string
	for _, k := range slices.Sorted(maps.Keys(im.Refused)) {
		refused += im.Refused[k]
		if k == "no-compatible-pool" || k == "no-route" {
			noHint = append(noHint, fmt.Sprintf("%s %d", k, im.Refused[k]))
		}
	}
	var bad []string
	if im.TimedOut > 0 {
		bad = append(bad, fmt.Sprintf("%d timed out", im.TimedOut))
	}
	if im.Failed > 0 {
		bad = append(bad, fmt.Sprintf("%d failed", im.Failed))
	}
	if len(noHint) > 0 {
		bad = append(bad, "refused without a retry hint: "+strings.Join(noHint, ", "))
	}
	if refused == 0 {
		bad = append(bad, "none refused")
	}
	if len(bad) == 0 {
		return nil
	}
	return w.failed(expected, strings.Join(bad, "; "), l, note, exprs)
}

// ejectedWithin is the step `a replica of pool P is ejected within D`.
func ejectedWithin(ctx context.Context, w *world, a []string) error {
	pool := a[0]
	if err := w.checkName("pool", pool); err != nil {
		return err
	}
	limit, err := time.ParseDuration(a[1])
	if err != nil || limit < 0 {
		return fmt.Errorf("%q: want a duration such as 30s", a[1])
	}
	label, err := w.lastLabel("")
	if err != nil {
		return fmt.Errorf("an ejection's time is from the start of the scenario's last fault: %w; add one with a When step", err)
	}
	if err := w.run(ctx); err != nil {
		return err
	}
	f, ok := w.rep.Faults[label]
	if !ok {
		return fmt.Errorf("the report has no fault %s", label)
	}
	var all []string
	first := math.Inf(1)
	for _, ev := range w.rep.Timeline {
		if ev.Kind != "ejected" || !strings.HasPrefix(ev.Detail, "pool "+pool+" ") {
			continue
		}
		all = append(all, fmt.Sprintf("at %.1fs", ev.TS))
		if ev.TS >= f.StartS {
			first = math.Min(first, ev.TS-f.StartS)
		}
	}
	if first <= limit.Seconds() {
		return nil
	}
	measured := "no replica of pool " + pool + " was ejected after " + label + " began"
	if !math.IsInf(first, 1) {
		measured = fmt.Sprintf("the first ejection came %s after %s began", secs(first), label)
	}
	if len(all) > 0 {
		measured += fmt.Sprintf("; the pool's ejections: %s", list(all))
	} else {
		measured += "; none over the whole run"
	}
	return w.failed(fmt.Sprintf("a replica of pool %s is ejected within %s of the start of %s", pool, a[1], label), measured, label, "", nil)
}

// tenantResidency is the step `no request of tenant T leaves its
// jurisdiction`.
func tenantResidency(ctx context.Context, w *world, a []string) error {
	name := a[0]
	if err := w.checkName("tenant", name); err != nil {
		return err
	}
	sc := w.sc
	if sc == nil {
		var err error
		if sc, err = w.load(nil); err != nil {
			return err
		}
	}
	for _, t := range sc.Tenants {
		if t.Name == name && t.Jurisdiction == "" {
			return fmt.Errorf("tenant %s is bound to no jurisdiction, so none of its requests can leave one; bind it first: Given tenant %s is restricted to jurisdiction eu", name, name)
		}
	}
	if err := w.run(ctx); err != nil {
		return err
	}
	expr := fmt.Sprintf("residency_violations_by_tenant.%s.violations == 0", name)
	tr := w.rep.ResidencyByTenant[name]
	if tr == nil || tr.Violations == 0 {
		return nil
	}
	measured := fmt.Sprintf("%d of its requests served outside jurisdiction %s: by pool %s; by region %s",
		tr.Violations, tr.Jurisdiction, counts(tr.Pools), counts(tr.Regions))
	return w.failed(expr, measured, "", "", []string{expr})
}

// promotedWithin is the step `the canary is promoted to S within D`.
func promotedWithin(ctx context.Context, w *world, a []string) error {
	name, err := w.canaryName(a[0])
	if err != nil {
		return err
	}
	share, err := fraction(a[1])
	if err != nil || share <= 0 || share > 1 {
		return fmt.Errorf("share %q: want a fraction (1) or a percentage (100%%) above 0", a[1])
	}
	limit, err := time.ParseDuration(a[2])
	if err != nil || limit <= 0 {
		return fmt.Errorf("%q: want a duration such as 17m", a[2])
	}
	if err := w.run(ctx); err != nil {
		return err
	}
	c := w.rep.Canaries[name]
	if c == nil {
		return fmt.Errorf("the report has no canary %q", name)
	}
	reached, highest := -1.0, 0.0
	for _, d := range c.Decisions {
		highest = max(highest, d.To)
		if reached < 0 && d.To >= share-1e-9 {
			reached = d.AtS
		}
	}
	if reached >= 0 && reached <= limit.Seconds() {
		return nil
	}
	measured := fmt.Sprintf("never reached %s: its highest share was %s (state %s at the end)", pct(share), pct(highest), c.State)
	if reached >= 0 {
		measured = fmt.Sprintf("reached %s at %s", pct(share), at(reached))
	}
	return w.failed(fmt.Sprintf("the canary %s is promoted to %s within %s", name, pct(share), a[2]), measured, w.canaryFault(name), "canary "+name+": "+decisions(c), nil)
}
