package plan

import (
	"context"
	"testing"
	"time"
)

// BenchmarkPlanOutage plans docs/planning.md's walk-through: the default
// fleet with its purchasable types through a us-east outage, three demand
// levels, today's capacity kept. It reports the twin runs a plan takes, the
// runs a full grid to the same upper bounds would take, and the wall time
// per twin run.
//
//	go test -run '^$' -bench PlanOutage -count 6 ./internal/plan/
func BenchmarkPlanOutage(b *testing.B) {
	today := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	cfg := Config{
		Demands:       []float64{1, 1.5, 2},
		NeededBy:      []time.Time{today, today.AddDate(0, 3, 1), today.AddDate(0, 6, 2)},
		Today:         today,
		Survive:       []string{"regional-outage region=us-east at=10m for=10m"},
		MinAttainment: 0.99,
		KeepCommitted: true,
	}
	load := library(b, "default", `expect=["residency_violations == 0", "interactive.tpot.p99 < 100ms", `+
		`"during regional-outage(us-east): interactive.slo_attainment >= 0.9", "after recovery + 5m: interactive.ttft.p99 < 2s"]`)
	var runs, grid float64
	b.ResetTimer()
	for b.Loop() {
		res, err := Run(context.Background(), load, cfg)
		if err != nil {
			b.Fatal(err)
		}
		runs, grid = float64(res.Runs), 0
		for _, lv := range res.Levels {
			grid += lv.Grid
		}
	}
	b.ReportMetric(runs, "runs/plan")
	b.ReportMetric(grid, "grid-runs/plan")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/runs/1e6, "ms/run")
}
