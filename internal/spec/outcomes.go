package spec

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetdrill/fleetdrill/internal/suggest"
	"github.com/fleetdrill/fleetdrill/twin"
)

// Outcomes about one tenant or class in a fault read the report's
// faults.LABEL.tenants.NAME (or classes.NAME) impact; breaker outcomes
// read its timeline.

// impactPath is the report path of what a fault did to a tenant or class
// (kind), faults.LABEL.tenants.NAME, after checking that the scenario has
// one by that name: the report lists every one, so a misspelt name would
// otherwise fail as an unknown report value far from the step's words.
func (w *world) impactPath(what, kind, name string) (string, error) {
	l, err := w.labelFor(what)
	if err != nil {
		return "", err
	}
	names, err := w.names(kind)
	if err != nil {
		return "", err
	}
	if !slices.Contains(names, name) {
		return "", unknownName(kind, name, names)
	}
	return fmt.Sprintf("faults.%s.%s.%s", l, plural(kind), name), nil
}

// names lists the scenario's tenants, classes, pools or models.
func (w *world) names(kind string) ([]string, error) {
	sc := w.sc
	if sc == nil {
		var err error
		if sc, err = w.load(nil); err != nil {
			return nil, err
		}
	}
	var out []string
	switch kind {
	case "tenant":
		for _, t := range sc.Tenants {
			out = append(out, t.Name)
		}
	case "class":
		for _, c := range sc.Classes {
			out = append(out, c.Name)
		}
	case "pool":
		for _, p := range sc.Pools {
			out = append(out, p.Name)
		}
	case "model":
		for _, m := range sc.Models {
			out = append(out, m.Name)
		}
	}
	return out, nil
}

// unknownName says the scenario has no kind called name, with the nearest
// one and every one.
func unknownName(kind, name string, names []string) error {
	hint := ""
	if near := suggest.Nearest(name, names, 1); len(near) > 0 {
		hint = fmt.Sprintf("; did you mean %q?", near[0])
	}
	return fmt.Errorf("the fleet has no %s %q%s (%s: %s)", kind, name, hint, plural(kind), strings.Join(names, ", "))
}

func plural(kind string) string {
	if kind == "class" {
		return "classes"
	}
	return kind + "s"
}

// checkName fails when the scenario has no kind called name ("" passes).
func (w *world) checkName(kind, name string) error {
	if name == "" {
		return nil
	}
	names, err := w.names(kind)
	if err != nil {
		return err
	}
	if !slices.Contains(names, name) {
		return unknownName(kind, name, names)
	}
	return nil
}

// impactTime checks a tenant's or class's time figure of a fault (a: the
// fault, tenant or class, its name, the duration): it happened (not -1)
// and took at most the duration.
func impactTime(field string) func(w *world, a []string) ([]string, error) {
	return func(w *world, a []string) ([]string, error) {
		p, err := w.impactPath(a[0], a[1], a[2])
		if err != nil {
			return nil, err
		}
		p += "." + field
		return []string{p + " >= 0", p + " <= " + a[3]}, nil
	}
}

// impactOf is what the fault labelled l did to a tenant or class, or nil.
func (w *world) impactOf(l, kind, name string) *twin.Impact {
	f, ok := w.rep.Faults[l]
	if !ok {
		return nil
	}
	if kind == "class" {
		return f.Classes[name]
	}
	return f.Tenants[name]
}

// impactNote says what a fault did to a tenant or class, for a failure;
// its arguments are the indexes of the fault, the kind and the name among
// the step's.
func impactNote(fi, ki, ni int) func(w *world, a []string) string {
	return func(w *world, a []string) string {
		l, err := w.labelFor(a[fi])
		if err != nil {
			return ""
		}
		return describeImpact(a[ki], a[ni], l, w.impactOf(l, a[ki], a[ni]))
	}
}

// describeImpact words an Impact as the faults table of the text report
// does, in a line: where the requests went and when the times were.
func describeImpact(kind, name, label string, im *twin.Impact) string {
	if im == nil {
		return fmt.Sprintf("the report has nothing on %s %s in %s", kind, name, label)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s had %d requests arrive during %s, %d of them displaced: %d completed",
		kind, name, im.Requests, label, im.Displaced, im.Completed)
	refused := uint64(0)
	for _, n := range im.Refused {
		refused += n
	}
	if refused > 0 {
		fmt.Fprintf(&b, ", %d refused (%s)", refused, counts(im.Refused))
	}
	fmt.Fprintf(&b, ", %d failed, %d timed out, %d cancelled; %d served elsewhere", im.Failed, im.TimedOut, im.Cancelled, im.ServedElsewhere)
	if im.ServedElsewhere > 0 {
		fmt.Fprintf(&b, " (pools: %s; models: %s)", counts(im.ServedByPool), counts(im.ServedModel))
	}
	fmt.Fprintf(&b, "; SLO attainment %s during, %s in the 10m after", ratioPct(im.SLOAttainmentDuring), ratioPct(im.SLOAttainmentAfter))
	mitigated := "never"
	switch {
	case im.TimeToMitigateS >= 0:
		mitigated = "after " + secs(float64(im.TimeToMitigateS))
	case im.Displaced == 0:
		mitigated = "nothing to mitigate (nothing displaced)"
	}
	recovered := "never"
	switch {
	case im.TimeToRecoverS >= 0:
		recovered = secs(float64(im.TimeToRecoverS)) + " after the end"
	case im.Displaced == 0:
		recovered = "nothing to recover (nothing displaced)"
	}
	fmt.Fprintf(&b, "; detected %s, mitigated %s, recovered %s", ifHappened(float64(im.TimeToDetectS), "after "), mitigated, recovered)
	return b.String()
}

func ifHappened(s float64, prefix string) string {
	if s < 0 {
		return "never"
	}
	return prefix + secs(s)
}

func secs(s float64) string { return strconv.FormatFloat(s, 'g', 4, 64) + "s" }

// counts prints a map of counts by name, sorted by name.
func counts(m map[string]uint64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// servedElsewhere checks that a tenant or class (a: kind, name, how, the
// fault) was served elsewhere during a fault: by any replica it did not
// hit, or in a pool, or by a model. A pool or model that served none has
// no entry in the report, so that case fails here rather than as an
// unknown report value.
func servedElsewhere(ctx context.Context, w *world, a []string) error {
	kind, name, how, what := a[0], a[1], a[2], a[3]
	p, err := w.impactPath(what, kind, name)
	if err != nil {
		return err
	}
	field, by, key := "served_elsewhere", "", ""
	if pool, ok := strings.CutPrefix(how, "in pool "); ok {
		field, by, key = "served_by_pool."+pool, "pool", pool
	} else if model, ok := strings.CutPrefix(how, "by model "); ok {
		field, by, key = "served_model."+model, "model", model
	}
	if err := w.checkName(by, key); err != nil {
		return err
	}
	if err := w.run(ctx); err != nil {
		return err
	}
	l, _ := w.labelFor(what)
	im := w.impactOf(l, kind, name)
	note := describeImpact(kind, name, l, im)
	expr := p + "." + field + " > 0"
	if key != "" {
		m := map[string]uint64{}
		if im != nil {
			m = im.ServedByPool
			if by == "model" {
				m = im.ServedModel
			}
		}
		if m[key] == 0 {
			// Not in the report, so not an expectation fleetdrill run
			// could check: the command reproduces the run alone.
			return w.failed(expr, "0", l, note, nil)
		}
	}
	return w.check(ctx, []string{expr}, l, func() string { return note })
}

// breakerOpens checks the timeline's breaker-open entries (a: the pool,
// the fault, each optional) against want: some opened, or none did.
func breakerOpens(want bool) func(ctx context.Context, w *world, a []string) error {
	return func(ctx context.Context, w *world, a []string) error {
		pool, what := a[0], a[1]
		if err := w.checkName("pool", pool); err != nil {
			return err
		}
		label := ""
		if what != "" {
			l, err := w.labelFor(what)
			if err != nil {
				return err
			}
			label = l
		}
		if err := w.run(ctx); err != nil {
			return err
		}
		from, to := math.Inf(-1), math.Inf(1)
		where := ""
		if pool != "" {
			where += " on pool " + pool
		}
		if label != "" {
			f, ok := w.rep.Faults[label]
			if !ok {
				return fmt.Errorf("the report has no fault %s (faults: %s)", label, strings.Join(slices.Sorted(maps.Keys(w.rep.Faults)), ", "))
			}
			from = f.StartS
			if f.EndS >= 0 {
				to = f.EndS
			}
			where += " during " + label
		}
		var opened, all []string
		for _, ev := range w.rep.Timeline {
			if ev.Kind != "breaker-open" {
				continue
			}
			// The detail is "pool P replica R: replica R breaker closed → open".
			replica, _, _ := strings.Cut(ev.Detail, ":")
			e := fmt.Sprintf("%s at %.1fs", replica, ev.TS)
			all = append(all, e)
			if ev.TS >= from && ev.TS <= to && (pool == "" || strings.HasPrefix(ev.Detail, "pool "+pool+" ")) {
				opened = append(opened, e)
			}
		}
		if want == (len(opened) > 0) {
			return nil
		}
		expected := "no breaker opens" + where
		measured := fmt.Sprintf("%d opened%s: %s", len(opened), where, list(opened))
		if want {
			expected = "a breaker opens" + where
			measured = "none opened" + where
			if len(all) > 0 {
				measured += fmt.Sprintf("; over the run %d opened: %s", len(all), list(all))
			} else {
				measured += "; none opened over the whole run"
			}
		}
		return w.failed(expected, measured, label, "", nil)
	}
}

// list joins the first items and counts the rest.
func list(items []string) string {
	const keep = 6
	if len(items) <= keep {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:keep], ", "), len(items)-keep)
}

// failShare turns a share of requests that fail, a fraction (0.2) or a
// percentage (20%), into the fault syntax's fail= value ("" stays "").
func failShare(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	v, err := fraction(s)
	if err != nil || v <= 0 || v > 1 {
		return "", fmt.Errorf("failing share %q: want a fraction (0.2) or a percentage (20%%), above 0 and at most all of them", s)
	}
	return strconv.FormatFloat(v, 'g', -1, 64), nil
}

// ratioPct is an attainment as a percentage, or that nothing finished.
func ratioPct(r twin.Ratio) string {
	if !r.Measured() {
		return "none (nothing finished)"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(r))
}
