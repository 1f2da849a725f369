package plan

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/sweep"
)

// TestCheckGrid: the grid spec holds every fleet from the floors to each
// level's upper bound under every case; CheckGrid finds the cheapest fleet
// that passes every case in a merged sweep, and says when it is cheaper
// than the plan's (here with forged figures, to make it so).
func TestCheckGrid(t *testing.T) {
	today := date(t, "2026-11-30")
	res, err := Run(context.Background(), rentable(t), Config{Today: today, NeededBy: []time.Time{date(t, "2027-03-01")}})
	require.NoError(t, err)
	lv := res.Levels[0]
	require.Equal(t, []int{0, 5}, lv.Replicas)
	data, err := GridSpec(res, "mmc", rentSets())
	require.NoError(t, err)
	spec, err := sweep.Parse("grid.yaml", data)
	require.NoError(t, err)
	want := 1
	for _, u := range lv.Upper {
		want *= u + 1
	}
	require.Equal(t, want, spec.Runs(), "one run per fleet of the grid (one case, one seed)")
	require.Equal(t, float64(want), lv.Grid)

	report := func(pass func(x []int) bool) *sweep.Report {
		rep := &sweep.Report{Points: spec.Points}
		for _, pt := range spec.Points {
			x := make([]int, 2)
			for _, set := range pt.Sets {
				for i := range x {
					if v, ok := strings.CutPrefix(set, res.p.pools[i].path+".replicas="); ok {
						x[i], err = strconv.Atoi(v)
						require.NoError(t, err)
					}
				}
			}
			failed := 1.0
			if pass(x) {
				failed = 0
			}
			rep.Aggregates = append(rep.Aggregates, sweep.PointAggregate{Point: pt.Name,
				Figures: []sweep.FigureStat{{Name: "expectations.failed", N: 1, Mean: failed}}})
		}
		return rep
	}
	// Monotone truth: a fleet passes when it has 5 servers in all.
	checks, err := CheckGrid(res, report(func(x []int) bool { return x[0]+x[1] >= 5 }))
	require.NoError(t, err)
	require.Len(t, checks, 1)
	require.False(t, checks[0].Cheaper)
	require.Equal(t, []int{0, 5}, checks[0].Best)
	require.Equal(t, want, checks[0].Fleets)

	// A grid where two dear replicas alone pass: the local plan missed it.
	checks, err = CheckGrid(res, report(func(x []int) bool { return x[0]+x[1] >= 5 || slices.Equal(x, []int{2, 0}) }))
	require.NoError(t, err)
	require.True(t, checks[0].Cheaper)
	require.Equal(t, []int{2, 0}, checks[0].Best)
	require.InDelta(t, 4.0, checks[0].BestCost, 1e-9)
}
