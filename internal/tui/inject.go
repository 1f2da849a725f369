package tui

import (
	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/twin"
)

// selection is what the operator has selected: a pool (with its region
// and provider) and a route (a model and tenant).
type selection struct {
	Pool, Region, Provider string
	Model, Tenant          string
}

// faultLine builds the fault line an inject key asks for on the
// selection — its kind's console spec (faults.ConsoleSpec: the target key
// and values are the kind's traits) — or "" with the reason when the
// selection lacks the target. The line is in canonical form
// (faults.Spec.String) with at=0s: the drill starts it at its current time
// whatever at= says.
func faultLine(k faults.Kind, sel selection) (line, why string) {
	sp := faults.ConsoleSpec(k, faults.Target{Region: sel.Region, Pool: sel.Pool, Provider: sel.Provider,
		Model: sel.Model, Tenant: sel.Tenant})
	if sp.Target == (faults.Target{}) {
		if k.Traits().ConsoleOn == "model" {
			return "", "select a route first (tab)"
		}
		return "", "select a pool first"
	}
	if err := sp.Validate(); err != nil {
		return "", err.Error()
	}
	return sp.String(), ""
}

// faultToEnd chooses the fault the `e` key ends: the latest active fault
// that hits the focused selection (its pool, region or provider, or its
// route's model), else the latest active fault the operator injected, else
// the latest active fault. "" when none is active.
func faultToEnd(fs []twin.FaultState, sel selection, routes bool) string {
	for _, pick := range []func(twin.FaultState) bool{
		func(f twin.FaultState) bool { return faultHits(f.Spec, sel, routes) },
		func(f twin.FaultState) bool { return f.Injected },
		func(twin.FaultState) bool { return true },
	} {
		best := -1
		for i, f := range fs {
			if f.Active && pick(f) && (best < 0 || f.Start >= fs[best].Start) {
				best = i
			}
		}
		if best >= 0 {
			return fs[best].Label
		}
	}
	return ""
}

// faultHits reports whether the fault spec hits the selection: its route's
// model (routes), or its pool, region or provider.
func faultHits(spec string, sel selection, routes bool) bool {
	sp, err := faults.Parse(spec)
	if err != nil {
		return false
	}
	t := sp.Target
	if routes {
		return t.Model != "" && t.Model == sel.Model
	}
	return (t.Pool != "" && t.Pool == sel.Pool) ||
		(t.Region != "" && t.Region == sel.Region) ||
		(t.Provider != "" && t.Provider == sel.Provider)
}
