package tui

import (
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/twin"
)

// badDriver is the driver the `d` key upgrades a pool to. 535.104 is below
// the 550.54 that CUDA 12.4 needs (vllm-0.6.3, the runtime of the library's
// scenarios), so the upgraded pool can serve nothing: the botched rollout
// an operator rehearses. A pool whose runtime accepts it just restarts.
const badDriver = "535.104"

// The effects of the keys that take a size: a brownout fails a fifth of
// requests and adds 200 ms (a sick region, not a dead one); latency adds
// two seconds (as much as the interactive TTFT SLO of the library, so it
// shows); an error burst fails half the requests.
const (
	brownoutFail    = 0.2
	brownoutLatency = 200 * time.Millisecond
	latencyAdded    = 2 * time.Second
	burstFail       = 0.5
)

// selection is what the operator has selected: a pool (with its region
// and provider) and a route (a model and tenant).
type selection struct {
	Pool, Region, Provider string
	Model, Tenant          string
}

// faultLine builds the fault line an inject key asks for on the
// selection, or "" with the reason when the selection lacks the target.
// The line is in canonical form (faults.Spec.String) with at=0s: the drill
// starts it at its current time whatever at= says.
func faultLine(k faults.Kind, sel selection) (line, why string) {
	sp := faults.Spec{Kind: k}
	switch k {
	case faults.RegionalOutage:
		sp.Target.Region = sel.Region
	case faults.Brownout:
		sp.Target.Region = sel.Region
		sp.FailRate, sp.AddLatency = brownoutFail, brownoutLatency
	case faults.QuotaExhaustion:
		sp.Target.Provider = sel.Provider
	case faults.NodeLoss:
		sp.Target.Pool = sel.Pool
		sp.Radius.Count = 1
	case faults.DriverUpgrade:
		sp.Target.Pool = sel.Pool
		sp.Driver = badDriver
	case faults.ModelRetirement:
		sp.Target.Model = sel.Model
	case faults.Latency:
		sp.Target.Pool = sel.Pool
		sp.AddLatency = latencyAdded
	case faults.ErrorBurst:
		sp.Target.Pool = sel.Pool
		sp.FailRate = burstFail
	case faults.ColdStartStorm:
		sp.Target.Pool = sel.Pool
	}
	t := sp.Target
	if t.Region == "" && t.Pool == "" && t.Provider == "" && t.Model == "" {
		if k == faults.ModelRetirement {
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
