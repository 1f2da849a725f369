package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/sweep"
)

// TestPlanCmd: `fleetdrill plan` on the default scenario prints a fleet per
// demand level, and writes the JSON and the Pareto plot.
func TestPlanCmd(t *testing.T) {
	dir := t.TempDir()
	js, png := filepath.Join(dir, "plan.json"), filepath.Join(dir, "pareto.png")
	code, out, errs := runCommand(t, newPlanCmd(), "default", "--demand", "1,1.5", "--set", "duration=10m",
		"--survive", "node-loss pool=use-h100-8b count=1 at=5m", "--json", js, "--plot", png)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "demand ×1, needed by ")
	require.Contains(t, out, "demand ×1.5, needed by ")
	require.Contains(t, out, "binding: ")
	require.Contains(t, out, "a full grid up to the upper bound")
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var res struct {
		Levels []struct {
			Feasible bool  `json:"feasible"`
			Replicas []int `json:"replicas"`
		} `json:"levels"`
		Points []json.RawMessage `json:"points"`
	}
	require.NoError(t, json.Unmarshal(b, &res))
	require.Len(t, res.Levels, 2)
	require.True(t, res.Levels[0].Feasible)
	require.Len(t, res.Levels[0].Replicas, 7, "four pools and three purchasable types")
	require.NotEmpty(t, res.Points)
	st, err := os.Stat(png)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(1000))
}

// TestPlanCmdInvalid: bad flags and a bad fault line exit 2.
func TestPlanCmdInvalid(t *testing.T) {
	code, _, errs := runCommand(t, newPlanCmd(), "default", "--demand", "0")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, `--demand "0"`)
	code, _, errs = runCommand(t, newPlanCmd(), "default", "--demand", "1.5@2027-13-01", "--growth", "-3%", "--today", "soon")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, `--today "soon": want a date as YYYY-MM-DD`)
	code, _, errs = runCommand(t, newPlanCmd(), "default", "--demand", "1.5@2027-13-01", "--growth", "-3%")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, `--growth "-3%": want a monthly growth rate > 0`)
	require.Contains(t, errs, `--demand "1.5@2027-13-01": the date "2027-13-01" is not YYYY-MM-DD`)
	code, _, errs = runCommand(t, newPlanCmd(), "default", "--survive", "no-such-fault x=1")
	require.Equal(t, exitInvalid, code, errs)
}

// TestPlanCmdSeeds: --seeds runs every candidate at several seeds and says
// so; an autoscaled pool is planned as a reservation and has no grid.
func TestPlanCmdSeeds(t *testing.T) {
	code, _, errs := runCommand(t, newPlanCmd(), "default", "--seeds", "0")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "--seeds: got 0, want >= 1")

	const fixture = "../../internal/plan/testdata/autoscale-stockout.yaml"
	grid := filepath.Join(t.TempDir(), "grid.yaml")
	code, out, errs := runCommand(t, newPlanCmd(), fixture, "--seeds", "3", "--min-attainment", "0", "--emit-grid", grid)
	require.Equal(t, exitInvalid, code, errs)
	require.Contains(t, out, "seeds: every candidate runs at 3 seeds (3..5, the same for all)")
	require.Contains(t, out, "as (reserve)                    7")
	require.Contains(t, out, "on demand")
	require.Contains(t, errs, "--emit-grid: pool as is autoscaled")
}

// TestPlanCmdInfeasible: a failure no fleet survives exits 1 and says what fails.
func TestPlanCmdInfeasible(t *testing.T) {
	code, out, errs := runCommand(t, newPlanCmd(), "default", "--set", "duration=20m", "--max-replicas", "8", "--set", "purchasable=[]",
		"--survive", "regional-outage region=us-east at=10m for=10m")
	require.Equal(t, 1, code, errs)
	require.Contains(t, out, "infeasible")
	// The US-bound tenant's requests are refused at once while us-east is
	// dark (nothing else may serve them): they miss their SLO.
	require.Contains(t, errs, "interactive.slo_attainment >= 0.99")
}

// TestParseDemands: dated levels keep their date; with --growth an undated
// level k > 1 is needed ln(k)/ln(1+g) months out; otherwise today.
func TestParseDemands(t *testing.T) {
	today := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	ks, dates, err := parseDemands([]string{"1", "2", "1.5@2027-06-01", "0.8"}, "5%", today)
	require.NoError(t, err)
	require.Equal(t, []float64{1, 2, 1.5, 0.8}, ks)
	require.True(t, dates[0].IsZero(), "k = 1 is today's demand")
	require.True(t, dates[3].IsZero(), "a fall in demand is not dated by growth")
	require.Equal(t, "2027-06-01", dates[2].Format(time.DateOnly))
	// 5 % a month doubles demand in ln 2 / ln 1.05 = 14.2 months.
	months := dates[1].Sub(today).Hours() / 24 / monthDays
	require.InDelta(t, math.Log(2)/math.Log(1.05), months, 1.0/monthDays)
	require.Equal(t, 2028, dates[1].Year())
	_, again, err := parseDemands([]string{"2"}, "0.05", today)
	require.NoError(t, err)
	require.Equal(t, dates[1], again[0], "5% and 0.05 are the same rate")
	_, undated, err := parseDemands([]string{"2"}, "", today)
	require.NoError(t, err)
	require.True(t, undated[0].IsZero(), "without growth, needed today")

	_, _, err = parseDemands([]string{"1.5@2026-06-01"}, "", today)
	require.ErrorContains(t, err, `--demand "1.5@2026-06-01": the date is before --today (2026-11-30)`)
	_, _, err = parseDemands([]string{"2"}, "5", today)
	require.ErrorContains(t, err, `--growth "5": 500% a month? write 5% for 5% a month`)
	_, _, err = parseDemands([]string{"2"}, "0.01%", today)
	require.ErrorContains(t, err, "want a date within 50 years")
}

// TestPlanCmdOrders: a scenario file with a purchasable type; the plan
// buys it when it arrives in time and prints dated orders.
func TestPlanCmdOrders(t *testing.T) {
	data, err := os.ReadFile("../../scenarios/mmc.yaml")
	require.NoError(t, err)
	src := string(data) + `
purchasable:
  - name: rent
    region: lab
    provider: cloud-b
    accelerator: generic-80gb
    gpus_per_replica: 1
    runtime: emulated-1.0
    driver: "550.54.15"
    models: [toy-1b]
    price_per_gpu_hour: 1
    service: {distribution: exponential, mean: 1s}
    purchase: {lead_time: 8w, min_term: 1y}
`
	file := filepath.Join(t.TempDir(), "rent.yaml")
	require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
	code, out, errs := runCommand(t, newPlanCmd(), file, "--today", "2026-11-30", "--demand", "1,2", "--growth", "10%",
		"--set", "duration=2h", "--set", "pools.mmc.replicas=2", "--set", "pools.mmc.price_per_gpu_hour=2",
		"--set", "workload.poisson.arrivals.rate=3", "--set", "pools.mmc.service.mean=1s",
		"--set", `expect=["all.queue_wait.mean < 0.25s"]`)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "purchasable: rent at 1.00/h a replica, lead time 8w, minimum term 1y")
	require.Contains(t, out, "demand ×1, needed by 2026-11-30\n")
	require.Contains(t, out, "order: +3 mmc by 2026-11-30\n", "rent cannot arrive today")
	// 10 % a month doubles demand in 7.3 months: rent arrives in time.
	require.Contains(t, out, "demand ×2, needed by 2027-07-")
	require.Regexp(t, `order: \+\d+ rent by 2027-05-\d\d; commits \d+\.00 over its minimum term`, out)
}

// TestPlanWalkThrough is docs/planning.md's walk-through: today's fleet
// cannot survive a us-east outage (the US-bound tenant has nowhere to go),
// so today's level is late (exit 1); one us-west 8B replica, ordered 8
// weeks before each date, carries 1.5× and 2× (the US-bound 70B requests
// fall back to the 8B during the outage: TestPlanBuysWhatTheExpectationsNeed).
func TestPlanWalkThrough(t *testing.T) {
	code, out, errs := runCommand(t, newPlanCmd(), "default", "--keep-committed", "--today", "2026-11-30",
		"--demand", "1,1.5@2027-03-01,2@2027-06-01", "--survive", "regional-outage region=us-east at=10m for=10m",
		"--set", `expect=["residency_violations == 0", "interactive.tpot.p99 < 100ms", "during regional-outage(us-east): interactive.slo_attainment >= 0.9", "after recovery + 5m: interactive.ttft.p99 < 2s"]`)
	require.Equal(t, exitFailed, code, errs)
	require.Contains(t, errs, "demand ×1 cannot be met by 2026-11-30")
	require.Contains(t, out, "order: +1 usw-h100-8b by 2026-10-05 — LATE: ordered today it serves from 2027-01-25")
	require.Contains(t, out, "order: +1 usw-h100-8b by 2027-01-04; commits 24528.00 over its minimum term")
	require.Contains(t, out, "order: +1 usw-h100-8b by 2027-04-06; commits 24528.00 over its minimum term")
	require.NotContains(t, out, "order: +1 usw-h100-70b")
	require.NotContains(t, out, "order: +1 euw-a100-8b-colo")
	doc, err := os.ReadFile("../../docs/planning.md")
	require.NoError(t, err)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "  order: ") || strings.HasPrefix(line, "  binding: ") {
			require.Contains(t, string(doc), line, "docs/planning.md's walk-through is stale; rerun its command")
		}
	}
}

// TestPlanBuysWhatTheExpectationsNeed is the README's plan: one us-west
// 8B replica, not one per model, because during the us-east outage the
// US-bound tenant's 70B requests fall back to the 8B and the expectations
// ask for the interactive class's attainment. Without fallbacks the same
// expectations need a us-west 70B replica too: the plan follows the
// scenario's rules, never a replica per model of its own.
func TestPlanBuysWhatTheExpectationsNeed(t *testing.T) {
	args := []string{"default", "--keep-committed", "--today", "2026-11-30", "--demand", "1.5@2027-03-01",
		"--survive", "regional-outage region=us-east at=10m for=10m",
		"--set", `expect=["residency_violations == 0", "during regional-outage(us-east): interactive.slo_attainment >= 0.9"]`}
	row := func(out, pool string) []string {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] == pool && f[1] == "(buy)" {
				return f[2:5] // replicas, today, gap
			}
		}
		t.Fatalf("no row for %s in:\n%s", pool, out)
		return nil
	}
	code, out, errs := runCommand(t, newPlanCmd(), args...)
	require.Equal(t, exitOK, code, errs)
	require.Equal(t, []string{"1", "0", "+1"}, row(out, "usw-h100-8b"))
	require.Equal(t, []string{"0", "0", "0"}, row(out, "usw-h100-70b"), "the 70B's requests fall back to the 8B")

	code, out, errs = runCommand(t, newPlanCmd(), append(args, "--set", "policy.routing.fallback=false")...)
	require.Equal(t, exitOK, code, errs)
	require.Equal(t, []string{"1", "0", "+1"}, row(out, "usw-h100-8b"))
	require.Equal(t, []string{"1", "0", "+1"}, row(out, "usw-h100-70b"), "without fallbacks the 70B needs its own replica")
}

// TestPlanVerifyReplays: a plan's verify line, pasted into a shell, runs
// the planned fleet (purchased types included) with `fleetdrill run`, which
// passes and reports the plan's cost per successful task.
func TestPlanVerifyReplays(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH to split the command line")
	}
	dir := t.TempDir()
	js := filepath.Join(dir, "plan.json")
	code, _, errs := runCommand(t, newPlanCmd(), "default", "--set", "duration=10m", "--today", "2026-11-30",
		"--demand", "1.5@2027-08-01", "--json", js)
	require.Equal(t, exitOK, code, errs)
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var res struct {
		Levels []struct {
			Replicas []int    `json:"replicas"`
			PerTask  float64  `json:"cost_per_successful_task"`
			Verify   []string `json:"verify"`
		} `json:"levels"`
	}
	require.NoError(t, json.Unmarshal(b, &res))
	lv := res.Levels[0]
	require.Len(t, lv.Verify, 1)
	require.Positive(t, lv.Replicas[4]+lv.Replicas[5]+lv.Replicas[6], "by August the plan buys a purchasable type: %v", lv.Replicas)
	words, ok := strings.CutPrefix(lv.Verify[0], "fleetdrill run ")
	require.True(t, ok, lv.Verify[0])
	out, err := exec.Command(sh, "-c", `printf '%s\0' `+words).Output()
	require.NoError(t, err)
	args := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	runJS := filepath.Join(dir, "run.json")
	code, _, errs = runCommand(t, newRunCmd(), append(args, "--json", runJS)...)
	require.Equal(t, exitOK, code, errs)
	b, err = os.ReadFile(runJS)
	require.NoError(t, err)
	var rep struct {
		Cost struct {
			PerTask float64 `json:"per_successful_task"`
		} `json:"cost"`
	}
	require.NoError(t, json.Unmarshal(b, &rep))
	require.InDelta(t, lv.PerTask, rep.Cost.PerTask, 1e-12)
}

// TestPlanGridOnASweep: --emit-grid writes the full grid the search pruned
// as a sweep spec; run in three shards (as an Indexed Job would), the
// grid confirms the plan is the cheapest passing fleet; a plan with other
// arguments refuses the shards (another spec hash).
func TestPlanGridOnASweep(t *testing.T) {
	dir := t.TempDir()
	specPath, results := filepath.Join(dir, "grid.yaml"), filepath.Join(dir, "results")
	args := []string{"mmc", "--today", "2026-11-30", "--set", "duration=1h", "--set", "pools.mmc.replicas=2",
		"--set", "pools.mmc.price_per_gpu_hour=2", "--set", "workload.poisson.arrivals.rate=3",
		"--set", "pools.mmc.service.mean=1s", "--set", `expect=["all.queue_wait.mean < 0.25s"]`,
		"--set", `purchasable=[{"name":"rent","region":"lab","provider":"cloud-b","accelerator":"generic-80gb","gpus_per_replica":1,` +
			`"runtime":"emulated-1.0","driver":"550.54.15","models":["toy-1b"],"price_per_gpu_hour":1.5,` +
			`"service":{"distribution":"exponential","mean":"1s"}}]`}
	code, out, errs := runCommand(t, newPlanCmd(), append(args, "--emit-grid", specPath)...)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, errs, "plan: wrote the full grid to "+specPath)
	require.Contains(t, out, "rent (buy)")
	spec, err := sweep.Load(specPath)
	require.NoError(t, err)
	require.Greater(t, spec.Runs(), 20, "two pools: a grid worth a sweep")
	for i := range 3 {
		sh, err := sweep.RunShard(t.Context(), spec, sweep.Options{Shard: i, Shards: 3})
		require.NoError(t, err)
		_, err = sweep.WriteShard(results, sh)
		require.NoError(t, err)
	}
	code, out, errs = runCommand(t, newPlanCmd(), append(args, "--check-grid", results)...)
	require.Equal(t, exitOK, code, errs)
	require.Regexp(t, `grid check, demand ×1: \d+ fleets, \d+ pass every case; plan [0-9.]+/h: the plan is the grid's cheapest passing fleet`, out)

	code, _, errs = runCommand(t, newPlanCmd(), append(args, "--set", "duration=2h", "--check-grid", results)...)
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "the shards are of sweep")
}

// TestPlanSurvivePurchasable: a failure on a pool type the plan may buy
// (or on the region only such types are in) is planned for: a type bought
// 0 times is in the fleet at 0 replicas and has nothing to lose.
func TestPlanSurvivePurchasable(t *testing.T) {
	for _, fault := range []string{"node-loss pool=usw-h100-8b count=1 at=3m", "regional-outage region=us-west at=3m for=3m"} {
		code, out, errs := runCommand(t, newPlanCmd(), "default", "--set", "duration=8m", "--today", "2026-11-30",
			"--demand", "1@2027-06-01", "--survive", fault)
		require.Equal(t, exitOK, code, "%s: %s", fault, errs)
		require.Contains(t, out, "survive: "+fault)
		// Outside the planner a type bought 0 times is not in the fleet:
		// the grid of such a plan would not build, and is refused.
		code, _, errs = runCommand(t, newPlanCmd(), "default", "--set", "duration=8m", "--today", "2026-11-30",
			"--demand", "1@2027-06-01", "--survive", fault, "--emit-grid", filepath.Join(t.TempDir(), "g.yaml"))
		require.Equal(t, exitInvalid, code)
		require.Contains(t, errs, "the grid cannot check this plan")
	}
}

// TestPlanGridWithSeed: the user's --set seed=N moves the grid's seed (a
// sweep refuses seed= among its sets).
func TestPlanGridWithSeed(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "g.yaml")
	code, _, errs := runCommand(t, newPlanCmd(), "mmc", "--set", "duration=30m", "--set", "seed=7",
		"--set", "pools.mmc.price_per_gpu_hour=1", "--set", `expect=["all.queue_wait.mean < 5s"]`, "--emit-grid", spec)
	require.Equal(t, exitOK, code, errs)
	s, err := sweep.Load(spec)
	require.NoError(t, err)
	require.Equal(t, []uint64{7}, s.Seeds)
	require.NotContains(t, s.Sets, "seed=7")
}
