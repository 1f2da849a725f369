package spec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// Canary steps. A canary the steps add is held in the world, like the
// faults, and written as one canaries=[...] override (replacing the
// fleet's own canaries), so a failure's reproduce command carries it.

// The triggers a canary step gives its canary: the Google SRE workbook's
// error-ratio comparison with an absolute floor, and the class objective
// when an eligible class has one. Window, evaluation and sample are the
// schema's defaults (2m, 30s, 20 attempts).
const (
	canaryErrorTrigger = "error_rate > 2%"
	canaryTTFTTrigger  = "ttft_p99 > slo"
)

// stepCanary is a canary the steps added.
type stepCanary struct {
	name, model string
	candidate   []string
	tenant      string  // "": any
	share       float64 // 0: shadow only
	triggers    []string
	shadow      float64 // 0: none
}

// yaml renders it as a YAML flow mapping for a --set value.
func (c *stepCanary) yaml() string {
	parts := []string{"name: " + c.name, "model: " + c.model, "candidate: [" + strings.Join(c.candidate, ", ") + "]"}
	if c.tenant != "" {
		parts = append(parts, "tenants: ["+c.tenant+"]")
	}
	if c.share > 0 {
		parts = append(parts, fmt.Sprintf("steps: [{share: %g}]", c.share), "rollback_if: "+yamlList(c.triggers))
	}
	if c.shadow > 0 {
		parts = append(parts, fmt.Sprintf("shadow: {share: %g}", c.shadow))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func (w *world) canariesSet() string {
	items := make([]string, len(w.canaries))
	for i := range w.canaries {
		items[i] = w.canaries[i].yaml()
	}
	return "canaries=[" + strings.Join(items, ", ") + "]"
}

// editCanaries applies an edit to the step canaries and keeps it only if
// the scenario still validates, so a bad canary fails at its own step
// with the loader's message.
func (w *world) editCanaries(edit func()) error {
	if err := w.requireFleet(); err != nil {
		return err
	}
	prev, prevEdited := w.canaries, w.canariesEdited
	w.canaries = slices.Clone(w.canaries)
	edit()
	w.canariesEdited = true
	if _, err := w.load(nil); err != nil {
		w.canaries, w.canariesEdited = prev, prevEdited
		return err
	}
	return nil
}

// candidate resolves a step's pool list ("neo-h100" or "a,b") to pool
// names and the model the canary moves: the first model of the first pool
// that every candidate lists and some other pool with replicas serves (the
// baseline to roll back to).
func (w *world) candidate(arg string) ([]string, string, error) {
	sc, err := w.load(nil)
	if err != nil {
		return nil, "", err
	}
	var names []string
	byName := map[string]scenarios.Pool{}
	for _, p := range sc.Pools {
		names = append(names, p.Name)
		byName[p.Name] = p
	}
	var pools []string
	for _, s := range strings.Split(arg, ",") {
		s = strings.TrimSpace(s)
		if _, ok := byName[s]; !ok {
			return nil, "", unknownName("pool", s, names)
		}
		pools = append(pools, s)
	}
	first := byName[pools[0]]
	for _, m := range first.Models {
		every := true
		for _, p := range pools {
			every = every && slices.Contains(byName[p].Models, m)
		}
		base := slices.ContainsFunc(sc.Pools, func(p scenarios.Pool) bool {
			return !slices.Contains(pools, p.Name) && p.Replicas > 0 && slices.Contains(p.Models, m)
		})
		if every && base {
			return pools, m, nil
		}
	}
	return nil, "", fmt.Errorf("no model of pool %s (%s) is served by another pool with replicas: a canary needs a baseline to roll back to; add one, e.g. Given pool NAME has 2 replicas",
		pools[0], strings.Join(first.Models, ", "))
}

// addCanary is the step `a canary of "POOL" at SHARE [for "TENANT"]`.
func addCanary(_ context.Context, w *world, a []string) error {
	if err := w.requireFleet(); err != nil {
		return err
	}
	share, err := fraction(a[1])
	if err != nil || !(share > 0 && share <= 1) {
		return fmt.Errorf("canary share %q: want a fraction (0.05) or a percentage (5%%), above 0 and at most all of the traffic", a[1])
	}
	if err := w.checkName("tenant", a[2]); err != nil {
		return err
	}
	pools, model, err := w.candidate(a[0])
	if err != nil {
		return err
	}
	sc, err := w.load(nil)
	if err != nil {
		return err
	}
	triggers := []string{canaryErrorTrigger}
	if slices.ContainsFunc(sc.Classes, func(c scenarios.Class) bool { return c.SLO.TTFT > 0 }) {
		triggers = append(triggers, canaryTTFTTrigger)
	}
	return w.editCanaries(func() {
		if i := w.stepCanaryOf(pools); i >= 0 {
			c := &w.canaries[i]
			c.share, c.tenant, c.triggers = share, a[2], triggers
			return
		}
		w.canaries = append(w.canaries, stepCanary{name: strings.Join(pools, "_"), model: model, candidate: pools,
			tenant: a[2], share: share, triggers: triggers})
	})
}

// addShadow is the step `shadow traffic of SHARE to "POOL" [for "TENANT"]`:
// the shadow of the canary of those pools, or a shadow-only route.
func addShadow(_ context.Context, w *world, a []string) error {
	if err := w.requireFleet(); err != nil {
		return err
	}
	share, err := fraction(a[0])
	if err != nil || !(share > 0 && share <= 1) {
		return fmt.Errorf("shadow share %q: want a fraction (0.1) or a percentage (10%%), above 0 and at most all of the traffic", a[0])
	}
	if err := w.checkName("tenant", a[2]); err != nil {
		return err
	}
	pools, model, err := w.candidate(a[1])
	if err != nil {
		return err
	}
	if i := w.stepCanaryOf(pools); i >= 0 && a[2] != "" && a[2] != w.canaries[i].tenant {
		return fmt.Errorf("a shadow mirrors its canary's eligible traffic, and the canary of %q is for %s; leave out the tenant or make it %q",
			a[1], orAny(w.canaries[i].tenant), w.canaries[i].tenant)
	}
	return w.editCanaries(func() {
		if i := w.stepCanaryOf(pools); i >= 0 {
			w.canaries[i].shadow = share
			return
		}
		w.canaries = append(w.canaries, stepCanary{name: strings.Join(pools, "_"), model: model, candidate: pools,
			tenant: a[2], shadow: share})
	})
}

func orAny(tenant string) string {
	if tenant == "" {
		return "every tenant"
	}
	return "tenant " + tenant
}

// stepCanaryOf is the step canary with exactly these candidate pools, or
// -1.
func (w *world) stepCanaryOf(pools []string) int {
	return slices.IndexFunc(w.canaries, func(c stepCanary) bool { return slices.Equal(c.candidate, pools) })
}

// canaryName resolves "the canary" (name empty) or `the canary "NAME"` to
// a canary of the scenario: the one the steps added last, else the
// fleet's only one.
func (w *world) canaryName(name string) (string, error) {
	sc, err := w.load(nil)
	if err != nil {
		return "", err
	}
	var names []string
	for _, c := range sc.Canaries {
		names = append(names, c.Name)
	}
	switch {
	case name != "":
		if !slices.Contains(names, name) {
			return "", unknownName("canary", name, names)
		}
		return name, nil
	case len(w.canaries) > 0:
		return w.canaries[len(w.canaries)-1].name, nil
	case len(names) == 1:
		return names[0], nil
	case len(names) == 0:
		return "", errors.New(`the scenario has no canary: add one with a step like Given a canary of "neo-h100" at 5% for "retail"`)
	}
	return "", fmt.Errorf(`the fleet has %d canaries (%s); name one, e.g. the canary %q is rolled back within 2m`, len(names), strings.Join(names, ", "), names[0])
}

// canaryFault is the label of the last fault on one of the canary's
// candidate pools, for the timeline excerpt ("" when none).
func (w *world) canaryFault(name string) string {
	c := w.rep.Canaries[name]
	if c == nil {
		return ""
	}
	label, start := "", -1.0
	for l, f := range w.rep.Faults {
		for _, p := range c.Candidate {
			if strings.Contains(f.Spec, "pool="+p+" ") || strings.HasSuffix(f.Spec, "pool="+p) {
				if f.StartS > start || (f.StartS == start && l > label) {
					label, start = l, f.StartS
				}
			}
		}
	}
	return label
}

// decisions lists a canary's decisions with their times and whys.
func decisions(c *twin.CanaryReport) string {
	var parts []string
	for _, d := range c.Decisions {
		parts = append(parts, fmt.Sprintf("%s %s %s → %s: %s", at(d.AtS), d.Action, pct(d.From), pct(d.To), d.Why))
	}
	if len(parts) == 0 {
		return "no decision"
	}
	return strings.Join(parts, "; ")
}

// at prints seconds of the run as a duration: 12m30s.
func at(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

func pct(f float64) string { return strconv.FormatFloat(f*100, 'g', 4, 64) + "%" }

// rolledBack is the step `the canary ["NAME"] is rolled back within D`
// (within: "" for `is not rolled back`).
func rolledBack(want bool) func(ctx context.Context, w *world, a []string) error {
	return func(ctx context.Context, w *world, a []string) error {
		name, err := w.canaryName(a[0])
		if err != nil {
			return err
		}
		var limit time.Duration
		if want {
			if limit, err = time.ParseDuration(a[1]); err != nil || limit <= 0 {
				return fmt.Errorf("%q: want a duration such as 2m or 2m30s (the window plus one evaluation)", a[1])
			}
		}
		if err := w.run(ctx); err != nil {
			return err
		}
		c := w.rep.Canaries[name]
		if c == nil {
			return fmt.Errorf("the report has no canary %q", name)
		}
		label := w.canaryFault(name)
		happened := c.RolledBackAtS.Happened()
		var measured string
		switch {
		case !happened:
			measured = fmt.Sprintf("not rolled back (state %s, share %s at the end)", c.State, pct(c.Share))
		case c.TimeToRollbackS.Happened():
			measured = fmt.Sprintf("rolled back %s after %s began (at %s)", at(float64(c.TimeToRollbackS)), orFault(label), at(float64(c.RolledBackAtS)))
		default:
			measured = fmt.Sprintf("rolled back at %s, before any fault on its candidate %s", at(float64(c.RolledBackAtS)), strings.Join(c.Candidate, ", "))
		}
		note := func() string { return "canary " + name + ": " + decisions(c) }
		if !want {
			if happened {
				// The report's figure, so that the reproduce command
				// judges what the step did: never rolled back.
				expr := fmt.Sprintf("canaries.%s.rolled_back_at_s == never", name)
				return w.failed(expr+" (the canary "+name+" is not rolled back)", measured, label, note(), []string{expr})
			}
			return nil
		}
		expr := fmt.Sprintf("canaries.%s.time_to_rollback_s <= %s", name, a[1])
		if happened && c.TimeToRollbackS.Happened() && float64(c.TimeToRollbackS) <= limit.Seconds() {
			return nil
		}
		return w.failed(expr, measured, label, note(), []string{expr})
	}
}

func orFault(label string) string {
	if label == "" {
		return "the fault on its candidate"
	}
	return label
}

// shadowInvisible is the step `shadow traffic never reaches the tenant`:
// the run counts exactly the requests the clients sent (copies are no
// requests of theirs), no copy was served outside its tenant's
// jurisdiction, and with every canary's share held at 0 the run with the
// shadows and the run without them give byte-identical client-visible
// figures (requests, classes, tenants).
func shadowInvisible(ctx context.Context, w *world, _ []string) error {
	if err := w.run(ctx); err != nil {
		return err
	}
	var shadowed []int
	for i, c := range w.sc.Canaries {
		if c.Shadow != nil {
			shadowed = append(shadowed, i)
		}
	}
	if len(shadowed) == 0 {
		return errors.New(`the scenario has no shadow traffic: add it with a step like Given shadow traffic of 10% to "neo-h100"`)
	}
	fail := func(measured string) error {
		return w.failed("shadow traffic never reaches the tenant", measured, "", "", nil)
	}
	// 1. The run's requests are the clients' own.
	sent := map[string]uint64{}
	warmup := w.sc.Warmup.D()
	if _, err := twin.Arrivals(w.sc, func(a twin.Arrival) error {
		if a.At >= warmup {
			sent["requests"]++
			sent["tenants."+w.sc.Tenants[a.Tenant].Name]++
			sent["classes."+w.sc.Classes[a.Class].Name]++
		}
		return nil
	}); err != nil {
		return fmt.Errorf("the clients' arrivals: %w", err)
	}
	copies := uint64(0)
	for _, i := range shadowed {
		copies += w.rep.Canaries[w.sc.Canaries[i].Name].Shadow.Sent
	}
	got := map[string]uint64{"requests": w.rep.Requests.Arrived}
	for n, g := range w.rep.Tenants {
		got["tenants."+n] = g.Arrived
	}
	for n, g := range w.rep.Classes {
		got["classes."+n] = g.Arrived
	}
	for _, k := range slices.Sorted(maps.Keys(sent)) {
		if got[k] != sent[k] {
			return fail(fmt.Sprintf("%s.arrived is %d, but the clients sent %d (%d shadow copies were sent)", k, got[k], sent[k], copies))
		}
	}
	if err := w.rep.CheckAccounting(); err != nil {
		return fail(err.Error())
	}
	// 2. No copy left its tenant's jurisdiction.
	for _, i := range shadowed {
		n := w.sc.Canaries[i].Name
		if v := w.rep.Canaries[n].Shadow.ResidencyViolations; v > 0 {
			return fail(fmt.Sprintf("canaries.%s.shadow.residency_violations is %d: copies were served outside their tenant's jurisdiction", n, v))
		}
	}
	// 3. At a canary share of 0, the shadows change nothing a client sees.
	with, without := w.shadowPair()
	a, err := w.clientView(ctx, with)
	if err != nil {
		return err
	}
	b, err := w.clientView(ctx, without)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if a[k] != b[k] {
			return w.failed("shadow traffic never reaches the tenant", fmt.Sprintf("with every canary's share held at 0, %s differs with the shadows and without them:\n    with:    %s\n    without: %s", k, a[k], b[k]),
				"", "compare the two runs' requests, classes and tenants:\n    "+w.reproSets(w.pairSets(true), "--json with.json")+"\n    "+w.reproSets(w.pairSets(false), "--json without.json"), nil)
		}
	}
	return nil
}

// notYet is a canary start after every run ends: its share stays 0 (its
// shadow runs from the start of the run all the same).
const notYet = "8760h"

// pairSets are the overrides that hold every canary at share 0, with or
// without its shadow, for the reproduce commands.
func (w *world) pairSets(shadows bool) []string {
	var out []string
	for i, c := range w.sc.Canaries {
		if len(c.Steps) > 0 {
			out = append(out, fmt.Sprintf("canaries[%d].start=%s", i, notYet))
		}
		if !shadows && c.Shadow != nil {
			out = append(out, fmt.Sprintf("canaries[%d].shadow=", i))
		}
	}
	return out
}

// shadowPair is the scenario under test with every canary's share held at
// 0, with its shadows and without them; no expectations.
func (w *world) shadowPair() (with, without *scenarios.Scenario) {
	never, _ := time.ParseDuration(notYet)
	mk := func(shadows bool) *scenarios.Scenario {
		c := *w.sc
		c.Expect = nil
		c.Canaries = slices.Clone(w.sc.Canaries)
		for i := range c.Canaries {
			c.Canaries[i].Start = scenarios.Duration(never)
			if !shadows {
				c.Canaries[i].Shadow = nil
			}
		}
		return &c
	}
	return mk(true), mk(false)
}

// clientView runs sc and returns what its clients see, by report path:
// the request counts, each class and each tenant, as JSON.
func (w *world) clientView(ctx context.Context, sc *scenarios.Scenario) (map[string]string, error) {
	rep, err := twin.Run(ctx, sc, twin.Options{})
	if err != nil {
		return nil, fmt.Errorf("run %s (seed %d) with every canary at share 0: %w", w.base, sc.Seed, err)
	}
	out := map[string]string{}
	put := func(k string, v any) {
		b, _ := json.Marshal(v)
		out[k] = string(b)
	}
	put("requests", rep.Requests)
	for n, g := range rep.Classes {
		put("classes."+n, g)
	}
	for n, g := range rep.Tenants {
		put("tenants."+n, g)
	}
	return out, nil
}
