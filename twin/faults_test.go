package twin

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// twoRegions is the azureLike fleet split over us-east and us-west (one
// jurisdiction), each with n H100 replicas, plus eu-west with n for an
// EU-bound tenant, at a modest load.
func twoRegions(n int, rate float64, d time.Duration) *scenarios.Scenario {
	sc := azureLike(n, rate, d)
	sc.Regions = []scenarios.Region{{Name: "us-east", Jurisdiction: "us"}, {Name: "us-west", Jurisdiction: "us"}, {Name: "eu-west", Jurisdiction: "eu"}}
	east := sc.Pools[0]
	east.Name, east.Provider = "east", "cloud-a"
	west := east
	west.Name, west.Region, west.Provider = "west", "us-west", "cloud-b"
	eu := east
	eu.Name, eu.Region, eu.Provider = "eu", "eu-west", "cloud-c"
	sc.Pools = []scenarios.Pool{east, west, eu}
	sc.Tenants = []scenarios.Tenant{{Name: "t1", Jurisdiction: "us", Weight: 1}, {Name: "bank", Jurisdiction: "eu", Weight: 1}}
	eus := sc.Workload[0]
	eus.Name, eus.Tenant = "eu-chat", "bank"
	sc.Workload = append(sc.Workload, eus)
	sc.Drain = dur(10 * time.Minute)
	applyTestDefaults(sc)
	return sc
}

// applyTestDefaults sets what the loader's defaults would for policy
// fields the Go-built test scenarios leave empty.
func applyTestDefaults(sc *scenarios.Scenario) {
	h := &sc.Policy.Health
	h.ProbeInterval, h.Timeout, h.Threshold, h.OpenFor = dur(10*time.Second), dur(5*time.Second), 3, dur(10*time.Second)
	rt := &sc.Policy.Retries
	rt.MaxAttempts, rt.Backoff, rt.MaxBackoff, rt.Budget = 3, dur(500*time.Millisecond), dur(10*time.Second), 0.2
}

func kinds(rep *Report) []string {
	var ks []string
	for _, e := range rep.Timeline {
		ks = append(ks, e.Kind)
	}
	return ks
}

func TestRegionalOutageIsDetectedMitigatedAndRecovered(t *testing.T) {
	sc := twoRegions(3, 4, 30*time.Minute)
	sc.Faults = []string{"regional-outage region=us-east at=10m for=10m"}
	rep := run(t, sc)
	require.True(t, rep.Requests.Balanced(), "%+v", rep.Requests)
	require.Zero(t, rep.ResidencyViolations, "eu traffic never leaves eu, even under pressure")
	f := rep.Faults["regional-outage(us-east)"]
	require.NotNil(t, f, "faults: %v", rep.Faults)
	// Detection needs failures or a probe: not instant, within a probe
	// interval plus the timeout plus the breaker threshold's failures.
	require.Positive(t, f.TimeToDetectS)
	require.LessOrEqual(t, f.TimeToDetectS, 30.0)
	require.GreaterOrEqual(t, f.TimeToMitigateS, f.TimeToDetectS)
	require.Positive(t, f.TimeToRecoverS)
	require.Less(t, f.TimeToRecoverS, 60.0)
	require.Contains(t, kinds(rep), "breaker-open")
	require.Contains(t, kinds(rep), "breaker-closed")
	require.Positive(t, rep.Requests.Retries, "requests caught in the outage are retried elsewhere")
	require.Less(t, float64(f.RequestsLost), 0.01*float64(rep.Requests.Arrived), "retries save most of them")
	require.Greater(t, float64(f.SLOAttainmentAfter), 0.95)
}

func TestNodeLossFailsInFlightAtOnceAndNodesReturnCold(t *testing.T) {
	sc := twoRegions(4, 4, 20*time.Minute)
	sc.Faults = []string{"node-loss pool=east at=5m for=5m count=2"}
	rep := run(t, sc)
	require.True(t, rep.Requests.Balanced())
	f := rep.Faults["node-loss(east)"]
	require.Positive(t, f.TimeToDetectS)
	require.Equal(t, uint64(2), rep.Pools["east"].ColdStarts, "the two lost nodes reload when they return")
	require.Less(t, f.RequestsLost, uint64(5))
}

func TestQuotaExhaustionRoutesToTheOtherProvider(t *testing.T) {
	sc := twoRegions(3, 4, 20*time.Minute)
	sc.Faults = []string{"quota-exhaustion provider=cloud-a at=5m for=5m"}
	rep := run(t, sc)
	require.True(t, rep.Requests.Balanced())
	f := rep.Faults["quota-exhaustion(cloud-a)"]
	// The core is not told of the quota: it learns from the first 429,
	// which comes back at once for the first request sent there.
	require.Positive(t, f.TimeToDetectS)
	require.Less(t, f.TimeToDetectS, 2.0, "a 429 is an answer: detected at the first attempt refused")
	require.Contains(t, kinds(rep), "throttled")
	require.Zero(t, f.RequestsLost, "a throttled attempt is retried on the other provider")
	require.Positive(t, rep.Requests.Retries)
	require.Zero(t, rep.Rejections[sched.ReasonUpstreamQuota])
	require.Greater(t, float64(f.SLOAttainmentDuring), 0.9)
}

func TestModelRetirementFallsBackAboveTheQualityFloor(t *testing.T) {
	sc := twoRegions(3, 3, 20*time.Minute)
	big := sc.Models[0]
	big.Name, big.Quality, big.Fallbacks = "llama-big", 0.9, []string{"llama-8b"}
	sc.Models[0].Quality = 0.8
	sc.Models = append(sc.Models, big)
	for i := range sc.Pools {
		sc.Pools[i].Models = append(sc.Pools[i].Models, "llama-big")
		sc.Pools[i].Profiles["llama-big"] = sc.Pools[i].Profiles["llama-8b"]
		sc.Pools[i].Replicas = 4
	}
	sc.Workload[0].Model = "llama-big"
	sc.Policy.Routing.Fallback = true
	sc.Classes[0].QualityFloor = 0.75
	sc.Faults = []string{"model-retirement model=llama-big at=6m notice=1m"}
	rep := run(t, sc)
	require.True(t, rep.Requests.Balanced())
	require.Positive(t, rep.Requests.Fallbacks, "retired requests are served by the fallback")
	require.Zero(t, rep.Rejections["no-compatible-pool"])
	require.Contains(t, kinds(rep), "route-change")

	// Retired for five minutes only: the model is served again after, and
	// nothing falls back any more.
	sc.Faults = []string{"model-retirement model=llama-big at=6m for=5m notice=1m"}
	rep = run(t, sc)
	require.True(t, rep.Requests.Balanced())
	require.Positive(t, rep.Requests.Fallbacks)
	w := rep.Faults["model-retirement(llama-big)"]
	require.NotNil(t, w)
	require.GreaterOrEqual(t, w.TimeToRecoverS, 0.0, "served again after the fault: %+v", w)
	// The notice is the detection: traffic moves during it, before the
	// withdrawal (EffectiveS), not once the model is gone.
	require.Zero(t, w.TimeToDetectS, "detected by the notice: %+v", w)
	require.Equal(t, 360.0, w.EffectiveS, "takes effect at the withdrawal")
	require.Less(t, w.TimeToMitigateS, w.EffectiveS-w.StartS, "a fallback served the model's requests before the withdrawal: %+v", w)
	require.Equal(t, Never, w.TimeToImpactS, "nothing lost: %+v", w)
	sc.Faults = []string{"model-retirement model=llama-big at=6m notice=1m"}

	sc.Classes[0].QualityFloor = 0.85 // the 8B model is below it now
	rep = run(t, sc)
	require.Zero(t, rep.Requests.Fallbacks)
	require.Positive(t, rep.Rejections["no-compatible-pool"], "below the floor: refuse rather than degrade")
}

func TestDriverUpgradeMakesPairingsIncompatible(t *testing.T) {
	sc := twoRegions(3, 3, 20*time.Minute)
	sc.Faults = []string{"driver-upgrade pool=east at=5m driver=535.104"} // below vllm's 550.54
	rep := run(t, sc)
	require.True(t, rep.Requests.Balanced())
	require.Equal(t, uint64(3), rep.Pools["east"].ColdStarts, "the replicas restart on the new driver")
	var changed string
	for _, e := range rep.Timeline {
		if e.Kind == "route-change" {
			changed = e.Detail
		}
	}
	require.Contains(t, changed, "driver 535.104 < 550.54 required by vllm")
	require.Zero(t, rep.ResidencyViolations)
	require.Zero(t, rep.Faults["driver-upgrade(east)"].TimeToDetectS, "the registry flags the pairing as the upgrade lands")

	// A rollback (for=) restores the old driver: the pairing is served
	// again, and the fault reports its recovery.
	sc.Faults = []string{"driver-upgrade pool=east at=5m for=5m driver=535.104"}
	rep = run(t, sc)
	require.True(t, rep.Requests.Balanced())
	require.Contains(t, kindsDetail(rep), "compatible again")
	f := rep.Faults["driver-upgrade(east)"]
	require.NotNil(t, f)
	require.GreaterOrEqual(t, f.TimeToRecoverS, 0.0, "east serves again after the rollback")
}

func kindsDetail(rep *Report) string {
	var b strings.Builder
	for _, e := range rep.Timeline {
		b.WriteString(e.Detail + "\n")
	}
	return b.String()
}

func TestBrownoutAndErrorBurstAreRetried(t *testing.T) {
	sc := twoRegions(3, 4, 20*time.Minute)
	sc.Faults = []string{"error-burst pool=west at=5m for=5m fail=0.5", "latency pool=east at=5m for=5m latency=500ms"}
	rep := run(t, sc)
	require.True(t, rep.Requests.Balanced())
	require.Positive(t, rep.Requests.Retries)
	require.Contains(t, rep.Faults, "latency(east)")
	require.Contains(t, rep.Faults, "error-burst(west)")
}

func TestColdStartStorm(t *testing.T) {
	sc := twoRegions(4, 2, 10*time.Minute)
	sc.Faults = []string{"cold-start-storm pool=east at=2m percent=50"}
	rep := run(t, sc)
	require.True(t, rep.Requests.Balanced())
	require.Equal(t, uint64(2), rep.Pools["east"].ColdStarts)
}

func TestScopedExpectations(t *testing.T) {
	sc := twoRegions(3, 4, 30*time.Minute)
	sc.Faults = []string{"regional-outage region=us-east at=10m for=5m"}
	sc.Expect = []string{
		"during regional-outage(us-east): interactive.ttft.p99 < 60s",
		"after recovery + 5m: interactive.slo_attainment >= 0.9",
		"after regional-outage(us-east): requests.arrived > 0",
		"residency_violations == 0",
	}
	rep := run(t, sc)
	require.Len(t, rep.Expectations, 4)
	for _, e := range rep.Expectations {
		require.True(t, e.Pass, "%+v", e)
	}
	w := rep.Windows["during regional-outage(us-east)"]
	require.InDelta(t, 600, w.FromS, 1e-9)
	require.InDelta(t, 900, w.ToS, 1e-9)
	require.Positive(t, w.Requests.Arrived)
	require.True(t, w.Requests.Balanced())

	sc.Expect = []string{"during regional-outage(eu-west): interactive.ttft.p99 < 1s"}
	_, err := Run(t.Context(), sc, Options{})
	require.ErrorContains(t, err, "no fault labelled regional-outage(eu-west)")
}

func TestRetryStormAmplifiesLoad(t *testing.T) {
	build := func(storm bool) *Report {
		sc := twoRegions(1, 20, 10*time.Minute) // overloaded
		sc.Policy.Admission.QueueLimit = 50
		sc.Policy.Retries.RetryRejected = true
		sc.Policy.Retries.IgnoreRetryAfter = storm
		sc.Policy.Retries.MaxAttempts = 5
		sc.Classes[0].Deadline = dur(30 * time.Second)
		return run(t, sc)
	}
	polite, storm := build(false), build(true)
	require.True(t, storm.Requests.Balanced())
	require.Greater(t, storm.Requests.Retries, 2*polite.Requests.Retries, "clients that ignore retry-after retry far more")
}

func TestRetryBudgetBoundsConcurrentRetries(t *testing.T) {
	build := func(budget float64) *runner {
		sc := twoRegions(1, 20, 10*time.Minute) // overloaded
		sc.Policy.Admission.QueueLimit = 50
		sc.Policy.Retries.RetryRejected = true
		sc.Policy.Retries.MaxAttempts = 5
		sc.Policy.Retries.Budget = budget
		sc.Classes[0].Deadline = dur(30 * time.Second)
		return runInternal(t, sc, nil)
	}
	none, some, all := build(0.001), build(0.2), build(1)
	// With almost no budget only the floor may retry at once, however many
	// fail.
	noneNow, nonePeak := none.lc.Retrying()
	require.LessOrEqual(t, nonePeak, sched.RetryFloor)
	require.Equal(t, sched.RetryFloor, nonePeak, "the overload fills the floor")
	require.Zero(t, noneNow, "every retrying request was released")
	rn, rs, ra := none.report().Requests, some.report().Requests, all.report().Requests
	require.Less(t, rn.Retries, rs.Retries)
	require.Less(t, rs.Retries, ra.Retries, "a larger budget retries more")
	_, allPeak := all.lc.Retrying()
	_, somePeak := some.lc.Retrying()
	require.Greater(t, allPeak, somePeak)
	for _, c := range []Counts{rn, rs, ra} {
		require.True(t, c.Balanced())
	}
}

// TestFaultSequencesKeepTheBooks is the property test: random fault
// sequences (seeded) never lose or double-count a request, never route
// across a jurisdiction, and a fleet without faults is never degraded.
func TestFaultSequencesKeepTheBooks(t *testing.T) {
	templates := []string{
		"regional-outage region=%s at=%s for=%s",
		"node-loss pool=%s at=%s for=%s count=1",
		"error-burst pool=%s at=%s for=%s fail=0.4",
		"latency pool=%s at=%s for=%s latency=300ms",
		"quota-exhaustion pool=%s at=%s for=%s rpm=10 tpm=100000",
		"cold-start-storm pool=%s at=%s percent=50",
		"driver-upgrade pool=%s at=%s driver=535.104",
	}
	regions := []string{"us-east", "us-west", "eu-west"}
	pools := []string{"east", "west", "eu"}
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 17))
			sc := twoRegions(2, 3, 15*time.Minute)
			sc.Seed = seed
			sc.Drain = dur(5 * time.Minute)
			if seed%2 == 0 {
				sc.Policy.Routing.HedgeAfter = dur(time.Second) // hedges race the faults too
			}
			for range 1 + rng.IntN(4) {
				k := templates[rng.IntN(len(templates))]
				at := fmt.Sprintf("%ds", 30+rng.IntN(600))
				d := fmt.Sprintf("%ds", 30+rng.IntN(300))
				target := pools[rng.IntN(len(pools))]
				if strings.HasPrefix(k, "regional") {
					target = regions[rng.IntN(len(regions))]
				}
				line := fmt.Sprintf(k, target, at, d)
				if strings.Count(k, "%s") == 2 {
					line = fmt.Sprintf(k, target, at)
				}
				sc.Faults = append(sc.Faults, line)
			}
			rep := run(t, sc)
			require.True(t, rep.Requests.Balanced(), "faults %v: %+v", sc.Faults, rep.Requests)
			for name, g := range rep.Classes {
				require.True(t, g.Balanced(), "class %s", name)
			}
			require.Zero(t, rep.ResidencyViolations, "faults %v", sc.Faults)
			require.LessOrEqual(t, rep.Hedges.Won, rep.Hedges.Sent)
		})
	}
	healthy := run(t, twoRegions(2, 3, 15*time.Minute))
	require.Zero(t, healthy.Requests.Retries)
	require.Zero(t, healthy.Requests.Failed)
	require.NotContains(t, kinds(healthy), "breaker-open")
}

func TestHedgingBeatsASlowReplica(t *testing.T) {
	build := func(hedge time.Duration) *Report {
		sc := twoRegions(2, 2, 15*time.Minute)
		sc.Faults = []string{"latency pool=east at=1m for=10m latency=5s"}
		sc.Policy.Routing.HedgeAfter = dur(hedge)
		return run(t, sc)
	}
	plain, hedged := build(0), build(time.Second)
	require.True(t, hedged.Requests.Balanced())
	require.Positive(t, hedged.Hedges.Sent)
	require.Positive(t, hedged.Hedges.Won, "the duplicate on the healthy pool answers first")
	require.LessOrEqual(t, hedged.Hedges.Won, hedged.Hedges.Sent)
	require.Zero(t, plain.Hedges.Sent)
	require.Less(t, hedged.Classes["interactive"].TTFT.P99, plain.Classes["interactive"].TTFT.P99)
}

// With the EU dark, an unbound tenant served in the US does not make the
// outage mitigated for a tenant bound to the EU: the fault reads not
// mitigated, for that tenant, and each tenant's impact says what happened
// to it; expectations address them.
func TestOutageMitigationIsPerTenant(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("eu-residency", []string{"duration=20m",
		`faults=["regional-outage region=eu-west at=5m for=10m"]`,
		`expect=["faults.regional-outage(eu-west).tenants.bank-eu.time_to_mitigate_s == never", "faults.regional-outage(eu-west).tenants.global.served_elsewhere > 0"]`})
	require.NoError(t, err)
	rep := run(t, sc)
	f := rep.Faults["regional-outage(eu-west)"]
	require.NotNil(t, f)
	bank, global := f.Tenants["bank-eu"], f.Tenants["global"]
	require.Positive(t, global.ServedElsewhere)
	require.Positive(t, global.ServedByPool["use-h100-8b"], "the unbound tenant moved to the US")
	require.GreaterOrEqual(t, global.TimeToMitigateS, f.TimeToDetectS)
	require.Positive(t, bank.Displaced)
	require.Zero(t, bank.ServedElsewhere, "nothing in its jurisdiction serves the EU-bound tenant")
	require.Equal(t, Never, bank.TimeToMitigateS)
	require.Equal(t, Never, f.TimeToMitigateS, "the fault is not mitigated while one tenant is stranded")
	require.Equal(t, "bank-eu", f.NotMitigatedFor)
	require.Equal(t, bank.Lost, bank.Failed+bank.TimedOut+sum(bank.Refused))
	require.Positive(t, bank.Lost)
	require.Less(t, float64(bank.SLOAttainmentDuring), float64(global.SLOAttainmentDuring))
	require.Positive(t, bank.TimeToRecoverS, "served again after the region returns")
	require.GreaterOrEqual(t, f.TimeToRecoverS, bank.TimeToRecoverS, "the fault recovers with its last tenant")
	for _, e := range rep.Expectations {
		require.True(t, e.Pass, "%s (value %v)", e.Expr, e.Value)
	}
	// Every class is listed too, and the classes' requests add up to the
	// tenants'.
	var byTenant, byClass uint64
	for _, im := range f.Tenants {
		byTenant += im.Requests
	}
	for _, im := range f.Classes {
		byClass += im.Requests
	}
	require.Equal(t, byTenant, byClass)
}

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// A window has its tenants and its pools' share of the completed requests:
// during the EU outage the unbound tenant is served in the US, the
// EU-bound one nowhere, and expectations address both.
func TestWindowsHaveTenantsAndPools(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("eu-residency", []string{"duration=20m",
		`faults=["regional-outage region=eu-west at=5m for=10m"]`,
		`expect=["during regional-outage(eu-west): pools.use-h100-8b.share > 0.9", "during regional-outage(eu-west): tenants.bank-eu.slo_attainment < 0.5"]`})
	require.NoError(t, err)
	rep := run(t, sc)
	w := rep.Windows["during regional-outage(eu-west)"]
	require.NotNil(t, w)
	var arrived, completed uint64
	for name, g := range w.Tenants {
		require.True(t, g.Balanced(), "tenant %s: %+v", name, g.Counts)
		arrived += g.Arrived
	}
	require.Equal(t, w.Requests.Arrived, arrived, "the window's tenants add up to it")
	var share float64
	for _, p := range w.Pools {
		completed += p.Completed
		share += p.Share
	}
	require.Equal(t, w.Requests.Completed, completed, "every completed request was served by a pool")
	require.InDelta(t, 1, share, 1e-3)
	for _, e := range rep.Expectations {
		require.True(t, e.Pass, "%s (value %v)", e.Expr, e.Value)
	}
}

// TestNoDataIsNotZero: a figure with nothing to measure fails saying why,
// never compared as 0; "if any" skips it; a time that never came fails as
// not detected and answers "== never"; in the JSON report it is null.
func TestNoDataIsNotZero(t *testing.T) {
	sc := twoRegions(3, 4, 20*time.Minute)
	// The outage runs to the end of arrivals: after it, nothing arrives.
	sc.Faults = []string{"regional-outage region=us-east at=10m for=10m"}
	sc.Expect = []string{
		"after recovery + 5m: interactive.slo_attainment >= 0.99",
		"after recovery + 5m: interactive.ttft.p99 < 2s",
		"after recovery + 5m: interactive.ttft.p99 < 2s if any",
		"after recovery + 5m: requests.arrived == 0",
		"during regional-outage(us-east): interactive.ttft.p99 < 60s",
	}
	rep := run(t, sc)
	byExpr := map[string]Expectation{}
	for _, e := range rep.Expectations {
		byExpr[e.Expr] = e
	}
	for _, tc := range []struct {
		expr          string
		pass, skipped bool
		noData        string
	}{
		{"after recovery + 5m: interactive.slo_attainment >= 0.99", false, false, "no request finished in the window after recovery + 5m0s for class interactive"},
		{"after recovery + 5m: interactive.ttft.p99 < 2s", false, false, "no request completed in the window after recovery + 5m0s for class interactive"},
		{"after recovery + 5m: interactive.ttft.p99 < 2s if any", true, true, "no request completed in the window after recovery + 5m0s for class interactive"},
		{"after recovery + 5m: requests.arrived == 0", true, false, ""}, // a count of 0 is data
		{"during regional-outage(us-east): interactive.ttft.p99 < 60s", true, false, ""},
	} {
		e, ok := byExpr[tc.expr]
		require.True(t, ok, "no expectation %q in %+v", tc.expr, rep.Expectations)
		require.Equal(t, tc.pass, e.Pass, "%+v", e)
		require.Equal(t, tc.skipped, e.Skipped, "%+v", e)
		require.Equal(t, tc.noData, e.NoData, "%+v", e)
	}

	// A time that never came: the outage ends with the arrivals, and
	// nothing is served by its pools after it.
	got, err := rep.Check(
		"faults.regional-outage(us-east).time_to_recover_s < 1m",
		"faults.regional-outage(us-east).time_to_recover_s == never",
		"faults.regional-outage(us-east).time_to_recover_s != never",
		"faults.regional-outage(us-east).time_to_detect_s != never",
		"faults.regional-outage(us-east).time_to_detect_s == never",
	)
	require.NoError(t, err)
	fr := rep.Faults["regional-outage(us-east)"]
	require.False(t, fr.TimeToRecoverS.Happened(), "the outage lasts to the end: %+v", fr)
	require.True(t, fr.TimeToDetectS.Happened(), "%+v", fr)
	want := []Expectation{
		{Expr: got[0].Expr, NoData: "not recovered"},
		{Expr: got[1].Expr, NoData: "not recovered", Pass: true},
		{Expr: got[2].Expr, NoData: "not recovered"},
		{Expr: got[3].Expr, Value: float64(fr.TimeToDetectS), Pass: true},
		{Expr: got[4].Expr, Value: float64(fr.TimeToDetectS)},
	}
	require.Equal(t, want, got)

	// A count is data, 0 included; a list is no figure.
	got, err = rep.Check("after recovery + 5m: interactive.ttft.count == 0")
	require.NoError(t, err)
	require.Equal(t, []Expectation{{Expr: got[0].Expr, Value: 0, Pass: true}}, got)
	_, err = rep.Check("expectations == 0")
	require.ErrorContains(t, err, `no report value "expectations"`)

	// The JSON: a time that never came and a value without data are null.
	b, err := rep.JSON()
	require.NoError(t, err)
	require.Contains(t, string(b), `"time_to_recover_s": null`)
	require.Contains(t, string(b), `"value": null,`)
	require.NotContains(t, string(b), `"time_to_recover_s": -1`)
	var back Report
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, Never, back.Faults["regional-outage(us-east)"].TimeToRecoverS)
	require.Equal(t, rep.Expectations, back.Expectations)
}
