package plan

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// stockout is a Loader for testdata/autoscale-stockout.yaml: one
// autoscaled M/M/c pool whose scale-ups a stockout grants by half, 4
// minutes late.
func stockout(t testing.TB, base ...string) Loader {
	t.Helper()
	data, err := os.ReadFile("testdata/autoscale-stockout.yaml")
	require.NoError(t, err)
	return func(extra []string) (*scenarios.Scenario, error) {
		return scenarios.ParseWithSets("autoscale-stockout.yaml", data, append(slices.Clip(base), extra...))
	}
}

// TestPlanAutoscaledReservation: the plan searches an autoscaled pool's
// reservation held warm, finds the least that passes (one fewer fails, at
// some seed), costs it as committed plus the runs' on-demand burst, and
// with more seeds never reserves less.
func TestPlanAutoscaledReservation(t *testing.T) {
	plans := map[int]Level{}
	for _, seeds := range []int{1, 3} {
		res, err := Run(context.Background(), stockout(t), Config{Seeds: seeds})
		require.NoError(t, err)
		require.True(t, res.Pools[0].Autoscaled)
		require.Equal(t, 2, res.Pools[0].Committed, "today's count is min_replicas")
		require.Len(t, res.Seeds, seeds)
		require.Equal(t, uint64(3), res.Seeds[0], "the scenario's seed first")
		lv := res.Levels[0]
		require.True(t, lv.Feasible, lv.Note)
		n := lv.Replicas[0]
		plans[seeds] = lv

		// The least that passes: every seed passes at n; one fewer
		// fails at one seed at least.
		at := map[int][]*Point{}
		for _, pt := range res.Points {
			require.Contains(t, res.Seeds, pt.Seed)
			at[pt.Replicas[0]] = append(at[pt.Replicas[0]], pt)
		}
		require.Len(t, at[n], seeds, "n ran at every seed")
		for _, pt := range at[n] {
			require.True(t, pt.Pass, "n=%d seed %d: %v", n, pt.Seed, pt.Failed)
		}
		require.Len(t, at[n-1], seeds, "one fewer ran at every seed")
		require.True(t, slices.ContainsFunc(at[n-1], func(pt *Point) bool { return !pt.Pass }), "n-1=%d passes every seed", n-1)
		require.Len(t, lv.Bindings, 1)
		require.Equal(t, "all.queue_wait.mean < 0.8s", lv.Bindings[0].Expr)

		// Cost: n reserved at 2/h, always paid, plus the mean on-demand
		// burst of the healthy runs.
		od := 0.0
		for _, pt := range at[n] {
			od += pt.OnDemand
			require.InDelta(t, float64(n)*2+pt.OnDemand, pt.CostPerHour, 1e-9)
		}
		require.InDelta(t, od/float64(seeds), lv.OnDemand, 1e-9)
		require.InDelta(t, float64(n)*2+lv.OnDemand, lv.CostPerHour, 1e-9)

		// The verify line holds the reservation warm.
		for _, s := range []string{"pools[0].replicas=", "pools[0].autoscale.min_replicas=", "pools[0].acquisition.reserved="} {
			require.Contains(t, lv.Verify[0], s+strconv.Itoa(n))
		}
		require.Contains(t, lv.Verify[0], "pools[0].autoscale.max_replicas=12")
		var b strings.Builder
		require.NoError(t, WriteText(&b, res))
		require.Contains(t, b.String(), "as (reserve)")
		require.Contains(t, b.String(), "on demand")
		_, err = GridSpec(res, "x.yaml", nil)
		require.ErrorContains(t, err, "pool as is autoscaled")
	}
	// At seed 3 alone 6 warm replicas hold the queue wait; at seed 4 six
	// do not (the load is another draw): three seeds need 7.
	require.Equal(t, []int{6}, plans[1].Replicas)
	require.GreaterOrEqual(t, plans[3].Replicas[0], plans[1].Replicas[0])
	require.Equal(t, []int{7}, plans[3].Replicas)
	require.Equal(t, uint64(4), plans[3].Bindings[0].Seed)
}

// TestPlanReservesMoreWhenBurstIsDear: at 3× the price beyond the
// reservation, a seventh reserved replica costs less than what six spend
// bursting at seed 3, and the plan takes it though six pass.
func TestPlanReservesMoreWhenBurstIsDear(t *testing.T) {
	res, err := Run(context.Background(), stockout(t, "pools.as.acquisition.burst_price=3"), Config{})
	require.NoError(t, err)
	lv := res.Levels[0]
	require.True(t, lv.Feasible, lv.Note)
	require.Equal(t, []int{7}, lv.Replicas)
	for _, pt := range res.Points {
		if pt.Replicas[0] == 6 {
			require.True(t, pt.Pass, "six pass")
			require.Greater(t, pt.CostPerHour, lv.CostPerHour, "but cost more")
		}
	}
	require.Empty(t, lv.Bindings, "one fewer passes")
}

func TestPlanSeedsRefused(t *testing.T) {
	_, err := Run(context.Background(), stockout(t), Config{Seeds: -1})
	var ie *InvalidError
	require.ErrorAs(t, err, &ie)
	require.ErrorContains(t, err, "--seeds -1: want >= 1")
}
