package plan

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// library is a Loader for a library scenario with fixed overrides.
func library(t testing.TB, name string, base ...string) Loader {
	t.Helper()
	data, err := scenarios.Source(name)
	require.NoError(t, err)
	return func(extra []string) (*scenarios.Scenario, error) {
		return scenarios.ParseWithSets(name+".yaml", data, append(slices.Clip(base), extra...))
	}
}

// erlangC is the probability that an arrival waits in an M/M/c queue with
// offered load a = λ/μ erlangs.
func erlangC(c int, a float64) float64 {
	if a >= float64(c) {
		return 1
	}
	sum, term := 0.0, 1.0 // term = a^k / k!
	for k := 0; k < c; k++ {
		sum += term
		term *= a / float64(k+1)
	}
	// term is now a^c / c!
	top := term * float64(c) / (float64(c) - a)
	return top / (sum + top)
}

// meanWait is Erlang C's E[W_q] = C(c, a) / (cμ − λ).
func meanWait(c int, lambda, mu float64) float64 {
	if lambda >= float64(c)*mu {
		return math.Inf(1)
	}
	return erlangC(c, lambda/mu) / (float64(c)*mu - lambda)
}

// TestPlanMatchesErlangC: an M/M/c pool with λ = 3/s, mean service 1 s and
// the expectation mean queue wait < 0.25 s. Erlang C gives E[W_q] = 0.509 s
// at c = 4 and 0.118 s at c = 5 (twice and half the threshold, far outside
// the few-percent noise of 3 simulated hours), so the least c is 5, and the
// planner, starting from c = 2, must find exactly that.
func TestPlanMatchesErlangC(t *testing.T) {
	const lambda, mu, target = 3.0, 1.0, 0.25
	want := 0
	for c := 1; c < 100; c++ {
		if meanWait(c, lambda, mu) < target {
			want = c
			break
		}
	}
	require.Equal(t, 5, want)
	require.Greater(t, meanWait(want-1, lambda, mu), 1.8*target)
	require.Less(t, meanWait(want, lambda, mu), 0.6*target)

	load := library(t, "mmc",
		"duration=3h", "pools.mmc.replicas=2", "pools.mmc.price_per_gpu_hour=2",
		"workload.poisson.arrivals.rate=3", "pools.mmc.service.mean=1s",
		`expect=["all.queue_wait.mean < 0.25s"]`)
	res, err := Run(context.Background(), load, Config{})
	require.NoError(t, err)
	require.Len(t, res.Levels, 1)
	lv := res.Levels[0]
	require.True(t, lv.Feasible, lv.Note)
	require.Equal(t, []int{want}, lv.Replicas)
	require.Equal(t, []int{want - 2}, lv.Gap)
	require.InDelta(t, float64(want)*2, lv.CostPerHour, 1e-9)
	require.Len(t, lv.Bindings, 1)
	require.Equal(t, "all.queue_wait.mean < 0.25s", lv.Bindings[0].Expr)
	require.Equal(t, "", lv.Bindings[0].Fault)
	require.Greater(t, lv.Bindings[0].Value, 0.25)
	require.Greater(t, lv.Bindings[0].Headroom, 0.0)
	// The twin agrees with Erlang C at c-1 and c, within 15 %.
	for _, pt := range res.Points {
		if c := pt.Replicas[0]; c == want || c == want-1 {
			for _, e := range pt.exps {
				require.InEpsilon(t, meanWait(c, lambda, mu), e.Value, 0.15, "c=%d", c)
			}
		}
	}
}

// TestPlanPrunesTheGrid: on the default scenario's four pools, the
// coordinate descent takes far fewer runs than the full grid to the same
// upper bound, and every point it ran is kept.
func TestPlanPrunesTheGrid(t *testing.T) {
	load := library(t, "default", "duration=10m")
	res, err := Run(context.Background(), load, Config{Demands: []float64{1, 1.5}, MinAttainment: 0.99})
	require.NoError(t, err)
	require.Len(t, res.Levels, 2)
	total := 0
	for _, lv := range res.Levels {
		require.True(t, lv.Feasible, lv.Note)
		require.Less(t, float64(lv.Runs), lv.Grid/4, "runs %d, grid %g", lv.Runs, lv.Grid)
		total += lv.Runs
	}
	require.Equal(t, total, res.Runs)
	require.Len(t, res.Points, res.Runs)
	front := Pareto(res.Fleets())
	require.NotEmpty(t, front)
	for i := 1; i < len(front); i++ {
		require.Greater(t, front[i].Attainment, front[i-1].Attainment)
		require.GreaterOrEqual(t, front[i].CostPerHour, front[i-1].CostPerHour)
	}
}

// TestPlanSurviveNeedsAtLeastAsMuch: a plan that must also survive a
// failure has at least as many replicas as the healthy plan, per pool
// total and in cost.
func TestPlanSurviveNeedsAtLeastAsMuch(t *testing.T) {
	load := library(t, "default", "duration=10m")
	healthy, err := Run(context.Background(), load, Config{MinAttainment: 0.99})
	require.NoError(t, err)
	survived, err := Run(context.Background(), load, Config{MinAttainment: 0.99,
		Survive: []string{"node-loss pool=use-h100-8b count=1 at=5m"}})
	require.NoError(t, err)
	h, s := healthy.Levels[0], survived.Levels[0]
	require.True(t, h.Feasible, h.Note)
	require.True(t, s.Feasible, s.Note)
	sum := func(x []int) (n int) {
		for _, v := range x {
			n += v
		}
		return n
	}
	require.GreaterOrEqual(t, sum(s.Replicas), sum(h.Replicas))
	require.GreaterOrEqual(t, s.CostPerHour, h.CostPerHour)
	// Each candidate ran healthy and with the fault.
	faults := map[string]int{}
	for _, pt := range survived.Points {
		faults[pt.Fault]++
	}
	require.Equal(t, faults[""], faults["node-loss pool=use-h100-8b count=1 at=5m"])
}

func TestScaleSets(t *testing.T) {
	sc, err := library(t, "mmc")(nil)
	require.NoError(t, err)
	require.Equal(t, []string{"workload.poisson.arrivals.rate=3.2"}, ScaleSets(sc, 2))
}

// rentable is the M/M/c test's fleet (λ = 3/s, 1/μ = 1 s, mean queue wait
// < 0.25 s, so 5 servers) with today's pool "mmc" at 2 replicas and 2/h a
// replica, and a purchasable type "rent" that serves the same model as
// fast for 1/h, with an 8-week lead time and a one-year term.
func rentable(t testing.TB, extra ...string) Loader { return library(t, "mmc", rentSets(extra...)...) }

func rentSets(extra ...string) []string {
	return append([]string{
		"duration=3h", "pools.mmc.replicas=2", "pools.mmc.price_per_gpu_hour=2",
		"workload.poisson.arrivals.rate=3", "pools.mmc.service.mean=1s",
		`expect=["all.queue_wait.mean < 0.25s"]`,
		`purchasable=[{"name":"rent","region":"lab","provider":"cloud-b","accelerator":"generic-80gb","gpus_per_replica":1,` +
			`"runtime":"emulated-1.0","driver":"550.54.15","models":["toy-1b"],"price_per_gpu_hour":1,` +
			`"service":{"distribution":"exponential","mean":"1s"},"purchase":{"lead_time":"8w","min_term":"1y"}}]`,
	}, extra...)
}

func date(t *testing.T, s string) time.Time {
	d, err := time.Parse(time.DateOnly, s)
	require.NoError(t, err)
	return d
}

// TestPlanBuysByLeadTime: the cheaper purchasable type replaces today's
// pool when it can arrive in time, and the order is dated by its lead
// time; when it cannot, today's pool grows instead (it has no lead time).
func TestPlanBuysByLeadTime(t *testing.T) {
	today := date(t, "2026-11-30")
	res, err := Run(context.Background(), rentable(t), Config{Today: today, Demands: []float64{1, 1},
		NeededBy: []time.Time{today, date(t, "2027-03-01")}})
	require.NoError(t, err)
	require.Equal(t, "2026-11-30", res.Today)
	require.Len(t, res.Pools, 2)
	require.True(t, res.Pools[1].Purchasable)
	require.Equal(t, 56.0, res.Pools[1].LeadTimeDays)
	require.Equal(t, 365.0, res.Pools[1].MinTermDays)

	now, later := res.Levels[0], res.Levels[1]
	require.True(t, now.Feasible, now.Note)
	require.False(t, now.Late)
	require.Equal(t, "2026-11-30", now.NeededBy)
	require.Equal(t, []int{5, 0}, now.Replicas, "rent cannot arrive by today: grow mmc to Erlang C's 5")
	require.Equal(t, []Order{{Pool: "mmc", Replicas: 3, OrderBy: "2026-11-30", Arrives: "2026-11-30"}}, now.Orders)
	require.Zero(t, now.Commitment)

	require.True(t, later.Feasible, later.Note)
	require.Equal(t, []int{0, 5}, later.Replicas, "rent is half the price and arrives in time")
	require.InDelta(t, 5.0, later.CostPerHour, 1e-9)
	require.Equal(t, []Order{{Pool: "rent", Replicas: 5, OrderBy: "2027-01-04", Arrives: "2027-01-25",
		Commitment: 5 * 1 * 365 * 24}}, later.Orders)
	require.InDelta(t, 5*365*24.0, later.Commitment, 1e-6)
	require.Equal(t, []int{-2, 5}, later.Gap)

	var b strings.Builder
	require.NoError(t, WriteText(&b, res))
	require.Contains(t, b.String(), "purchasable: rent at 1.00/h a replica, lead time 8w, minimum term 1y")
	require.Contains(t, b.String(), "order: +5 rent by 2027-01-04; commits 43800.00 over its minimum term")
	require.Contains(t, b.String(), "order: +3 mmc by 2026-11-30\n")

	// A binding whose figure had no data at one fewer says so, not 0.
	now.Bindings = []Binding{{Pool: "mmc", Expr: "after recovery + 5m: all.ttft.p99 < 2s", NoData: "no request completed",
		Headroom: math.NaN(), HeadroomRel: math.NaN()}}
	res.Levels = res.Levels[:1]
	res.Levels[0] = now
	b.Reset()
	require.NoError(t, WriteText(&b, res))
	require.Contains(t, b.String(), `(no data: no request completed)`)
	require.NotContains(t, b.String(), "(value 0)")
}

// TestPlanLate: when every pool that could grow has a lead time past the
// date, no fleet arrives in time; the plan says so, and gives the cheapest
// fleet once orders arrive, its orders marked late.
func TestPlanLate(t *testing.T) {
	today := date(t, "2026-11-30")
	res, err := Run(context.Background(), rentable(t, `pools.mmc.purchase={"lead_time":"4w"}`), Config{Today: today})
	require.NoError(t, err)
	lv := res.Levels[0]
	require.True(t, lv.Feasible, lv.Note)
	require.True(t, lv.Late)
	require.Contains(t, lv.Note, "no fleet that can arrive by 2026-11-30")
	require.Contains(t, lv.Note, "mmc, rent held at today's count")
	require.Equal(t, []int{0, 5}, lv.Replicas)
	require.Len(t, lv.Orders, 1)
	require.True(t, lv.Orders[0].Late)
	require.Equal(t, "2026-10-05", lv.Orders[0].OrderBy)
	require.Equal(t, "2027-01-25", lv.Orders[0].Arrives)
}

// TestPlanKeepCommitted: with today's capacity sunk, the plan keeps mmc's
// two replicas and buys only what is missing.
func TestPlanKeepCommitted(t *testing.T) {
	today := date(t, "2026-11-30")
	res, err := Run(context.Background(), rentable(t), Config{Today: today, KeepCommitted: true,
		NeededBy: []time.Time{date(t, "2027-06-01")}})
	require.NoError(t, err)
	lv := res.Levels[0]
	require.True(t, lv.Feasible, lv.Note)
	require.Equal(t, 2, lv.Replicas[0])
	require.GreaterOrEqual(t, lv.Replicas[1], 3, "5 servers in all at least")
	for _, pt := range res.Points {
		require.GreaterOrEqual(t, pt.Replicas[0], 2, "no candidate below today's count")
	}
	require.Len(t, lv.Orders, 1)
	require.Equal(t, "rent", lv.Orders[0].Pool)
}

// TestPlanMaxReplicas: the provider's limit caps the purchasable type.
func TestPlanMaxReplicas(t *testing.T) {
	today := date(t, "2026-11-30")
	res, err := Run(context.Background(), rentable(t, "purchasable.rent.purchase.max_replicas=3"), Config{Today: today,
		NeededBy: []time.Time{date(t, "2027-06-01")}})
	require.NoError(t, err)
	lv := res.Levels[0]
	require.True(t, lv.Feasible, lv.Note)
	require.LessOrEqual(t, lv.Replicas[1], 3)
	for _, pt := range res.Points {
		require.LessOrEqual(t, pt.Replicas[1], 3)
	}
	require.GreaterOrEqual(t, lv.Replicas[0]+lv.Replicas[1], 5)
}

// TestPlanScopedExpectations: an expectation scoped to a survived fault is
// checked only in that fault's runs (the healthy run has no such window),
// and one scoped to a fault no run injects is refused before any search.
func TestPlanScopedExpectations(t *testing.T) {
	const outage = "regional-outage region=eu-west at=4m for=3m"
	const scoped = "during regional-outage(eu-west): interactive.slo_attainment >= 0.5"
	load := library(t, "default", "duration=10m", `expect=["residency_violations == 0", "`+scoped+`"]`)
	res, err := Run(context.Background(), load, Config{Survive: []string{outage}})
	require.NoError(t, err)
	require.Equal(t, []Checks{{Case: "healthy", Expect: []string{"residency_violations == 0"}}}, res.Checks)
	for _, pt := range res.Points {
		var exprs []string
		for _, e := range pt.exps {
			exprs = append(exprs, e.Expr)
		}
		require.Equal(t, pt.Fault != "", slices.Contains(exprs, scoped), "fault %q checks %v", pt.Fault, exprs)
	}

	// A fault's own figure, unscoped, is read only where the fault runs.
	const detect = "faults.regional-outage(eu-west).time_to_detect_s < 300"
	fig := library(t, "default", "duration=10m", `expect=["residency_violations == 0", "`+detect+`"]`)
	res, err = Run(context.Background(), fig, Config{Survive: []string{outage}})
	require.NoError(t, err)
	require.Equal(t, []Checks{{Case: "healthy", Expect: []string{"residency_violations == 0"}}}, res.Checks)

	_, err = Run(context.Background(), load, Config{Survive: []string{"regional-outage region=us-east at=4m for=3m"}})
	var ie *InvalidError
	require.ErrorAs(t, err, &ie)
	require.ErrorContains(t, err, `expect[1] "`+scoped+`" is scoped to a fault no run of the plan injects`)
}

// A split fleet is planned as any (its prefill and decode pools are
// searched apart: the ratio falls out), and the plan says whether
// disaggregation pays against the same search served aggregated. On
// gameday-pd-link without its faults, whose conditional decider
// prefills locally when no prefill replica has room, the cheapest split
// fleet keeps none, and aggregated costs no more.
func TestPlanSaysWhetherDisaggregationPays(t *testing.T) {
	load := library(t, "gameday-pd-link", "duration=10m", "warmup=1m", "faults=[]", "expect=[]")
	res, err := Run(context.Background(), load, Config{Parallel: 2, MinAttainment: 0.99, Today: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	require.Len(t, res.Levels, 1)
	require.Len(t, res.Aggregated, 1, "the aggregated comparison, per level")
	lv, agg := res.Levels[0], res.Aggregated[0]
	require.True(t, lv.Feasible)
	require.True(t, agg.Feasible)
	var b strings.Builder
	require.NoError(t, WriteText(&b, res))
	verdict := disaggVerdict(lv, agg, res.Pools)
	require.Contains(t, b.String(), verdict)
	// Measured: both plans keep 2 decode replicas (8.00/h); the split one
	// no prefill replica, its decider prefilling locally.
	require.Equal(t, agg.CostPerHour, lv.CostPerHour)
	require.True(t, strings.HasPrefix(verdict, "disaggregation does not pay"), verdict)
	t.Logf("split %v at %.2f/h, aggregated %v at %.2f/h: %s", lv.Replicas, lv.CostPerHour, agg.Replicas, agg.CostPerHour, verdict)

	// A scenario with no split model gets no comparison.
	res, err = Run(context.Background(), library(t, "mmc", "duration=20m"), Config{Parallel: 2, MinAttainment: 0.99})
	require.NoError(t, err)
	require.Nil(t, res.Aggregated)
	require.Empty(t, AggregateSets(&scenarios.Scenario{}))
}
