package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/plan"
	"github.com/fleetdrill/fleetdrill/internal/shell"
	"github.com/fleetdrill/fleetdrill/internal/sweep"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// newPlanCmd is `fleetdrill plan`: the cheapest fleet that meets the
// scenario's expectations, healthy and through named failures, per demand.
func newPlanCmd() *cobra.Command {
	var (
		demandS  []string
		growth   string
		todayS   string
		keep     bool
		emitGrid string
		checkDir string
		survive  []string
		sets     []string
		jsonPath string
		plotPath string
		parallel int
		maxRepl  int
		seeds    int
		minAtt   float64
	)
	cmd := &cobra.Command{
		Use:   "plan [SCENARIO] [--demand 1,1.5,2] [--survive FAULT]...",
		Short: "Find the cheapest fleet that meets the scenario's expectations, through failures",
		Long: "plan searches the replica counts of the scenario's pools, and of the pool types its\n" +
			"purchasable: list offers, for the cheapest fleet whose run meets every expectation of\n" +
			"the scenario, healthy and with each --survive fault added (separately), at each\n" +
			"--demand multiplier of every workload stream's rate. A pool whose lead time would\n" +
			"bring new replicas after a level's date (k@DATE, or dated by --growth) is held at\n" +
			"today's count for that level; if nothing that arrives in time passes, the plan is late.\n" +
			"It assumes more replicas never hurt an SLO: it doubles today's fleet until it passes,\n" +
			"then bisects each pool's count (most expensive first) to the least that passes with\n" +
			"the others fixed, until nothing changes. Runs are cached and run in parallel.\n" +
			"An autoscaled pool's count is its reservation held warm (replicas, min_replicas and\n" +
			"acquisition.reserved set together); its cost adds what the runs spend on demand beyond\n" +
			"it. --seeds N runs every candidate at N seeds and passes it only if all pass.\n\n" +
			"It prints per demand the fleet, its cost per hour and per successful task, the\n" +
			"binding constraint of each pool (what fails with one fewer replica), its headroom,\n" +
			"and the gap to today's fleet, with the date by which to order each addition given\n" +
			"its lead time. The exit status is 0 when every demand level has a plan that can\n" +
			"arrive in time, 1 when one has none or only a late one, 2 for invalid input.\n" +
			"docs/planning.md walks through one.",
		Example: "  fleetdrill plan default --keep-committed --demand 1,1.5@2027-03-01 --survive \"regional-outage region=us-east at=10m for=10m\"\n" +
			"  fleetdrill plan default --demand 1,1.5,2 --growth 4% --today 2026-12-01\n" +
			"  fleetdrill plan mmc --set duration=1h --json plan.json --plot pareto.png",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := scenarios.DefaultName
			if len(args) == 1 {
				name = args[0]
			}
			today := time.Now().UTC()
			if todayS != "" {
				t, err := time.Parse(time.DateOnly, todayS)
				if err != nil {
					return &exitError{code: exitInvalid, err: fmt.Errorf("plan: --today %q: want a date as YYYY-MM-DD", todayS)}
				}
				today = t
			}
			demands, needed, err := parseDemands(demandS, growth, today)
			if err == nil {
				err = checkPlanFlags(parallel, maxRepl, seeds)
			}
			if err != nil || minAtt < 0 || minAtt > 1 {
				if err == nil {
					err = fmt.Errorf("plan: --min-attainment %g: want a fraction in [0, 1]", minAtt)
				}
				return &exitError{code: exitInvalid, err: err}
			}
			file, dir, data, err := readScenario(name)
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("plan: %w", err)}
			}
			load := func(extra []string) (*scenarios.Scenario, error) {
				return scenarios.ParseInDir(file, dir, data, append(slices.Clip(sets), extra...))
			}
			stderr := cmd.ErrOrStderr()
			fmt.Fprintf(stderr, "plan: %s: %d demand level(s), %d failure(s) to survive\n", name, max(1, len(demands)), len(survive))
			res, err := plan.Run(cmd.Context(), load, plan.Config{
				Demands: demands, Survive: survive, Parallel: parallel, MaxReplicas: maxRepl, MinAttainment: minAtt, Version: buildVersion(),
				Today: today, NeededBy: needed, KeepCommitted: keep, Command: runCommandLine(name, sets), Seeds: seeds,
			})
			if err != nil {
				var ve *scenarios.ValidationError
				if errors.As(err, &ve) {
					return &exitError{code: exitInvalid, err: fmt.Errorf("plan: scenario %s is invalid:\n%w", name, err)}
				}
				var ie *plan.InvalidError
				if errors.As(err, &ie) {
					return &exitError{code: exitInvalid, err: err}
				}
				return err
			}
			if err := plan.WriteText(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if jsonPath != "" {
				f, err := os.Create(jsonPath)
				if err != nil {
					return &exitError{code: exitInvalid, err: fmt.Errorf("plan: --json: %w", err)}
				}
				if err := plan.WriteJSON(f, res); err != nil {
					f.Close()
					return fmt.Errorf("plan: --json %s: %w", jsonPath, err)
				}
				if err := f.Close(); err != nil {
					return fmt.Errorf("plan: --json %s: %w", jsonPath, err)
				}
			}
			if plotPath != "" {
				if err := plan.PlotPareto(plotPath, res); err != nil {
					return fmt.Errorf("plan: --plot %s: %w", plotPath, err)
				}
			}
			if emitGrid != "" {
				if err := emitPlanGrid(cmd.ErrOrStderr(), emitGrid, name, sets, res); err != nil {
					return err
				}
			}
			if checkDir != "" {
				if err := checkPlanGrid(cmd.OutOrStdout(), checkDir, name, sets, res); err != nil {
					return err
				}
			}
			for _, lv := range res.Levels {
				if !lv.Feasible {
					return &exitError{code: exitFailed, err: fmt.Errorf("plan: no fleet meets every expectation at demand ×%g: %s", lv.Demand, lv.Note)}
				}
				if lv.Late {
					return &exitError{code: exitFailed, err: fmt.Errorf("plan: demand ×%g cannot be met by %s: %s", lv.Demand, lv.NeededBy, lv.Note)}
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&demandS, "demand", []string{"1"}, "demand multipliers of every stream's rate, each optionally with the date it must be served from, k@YYYY-MM-DD (comma-separated or repeatable); without a date, --growth dates it, else it is needed --today")
	f.StringVar(&growth, "growth", "", `demand growth per month, e.g. "5%": dates each --demand k > 1 without a date at today + ln(k)/ln(1+growth) months`)
	f.StringVar(&todayS, "today", "", "the date orders can first be placed, YYYY-MM-DD (default: today, UTC)")
	f.StringVar(&emitGrid, "emit-grid", "", "also write the full grid the search pruned (every fleet up to each level's upper bound, every case) as a sweep spec to this file, to run on a cluster with fleetdrill sweep")
	f.StringVar(&checkDir, "check-grid", "", "read the shards of that sweep from this directory and say whether the grid holds a passing fleet cheaper than the plan's (exit 1 if so)")
	f.BoolVar(&keep, "keep-committed", false, "never plan fewer replicas than today's in a pool: today's capacity is paid for, the plan only adds")
	f.StringArrayVar(&survive, "survive", nil, `a fault the plan must survive, in the fault syntax, e.g. "regional-outage region=us-east at=10m for=30m" (repeatable; each is tried separately)`)
	f.StringArrayVar(&sets, "set", nil, "override a scenario field for every run, e.g. --set duration=10m (repeatable)")
	f.StringVar(&jsonPath, "json", "", "also write the plan, every evaluated point included, as JSON to this file")
	f.StringVar(&plotPath, "plot", "", "draw the cost-versus-SLO-attainment Pareto front of every evaluated fleet to this PNG")
	f.IntVar(&parallel, "parallel", 0, "runs at a time; 0 means one per CPU (GOMAXPROCS)")
	f.IntVar(&seeds, "seeds", 1, "run every candidate at the scenario's seed and the N-1 after it (the same for every candidate); it passes only if every seed passes: a stockout's grants and the arrivals differ by seed")
	f.IntVar(&maxRepl, "max-replicas", 0, "cap on each pool's count in the search; 0 means max(64, 4 × today's)")
	f.Float64Var(&minAtt, "min-attainment", 0.99, "also require every class's SLO attainment >= this in the healthy runs (0: only the scenario's expectations; a latency bound alone is met by a fleet that rejects everything)")
	return cmd
}

func checkPlanFlags(parallel, maxRepl, seeds int) error {
	var errs []error
	if seeds < 1 {
		errs = append(errs, fmt.Errorf("--seeds: got %d, want >= 1 (the scenario's seed and the ones after it)", seeds))
	}
	if parallel < 0 {
		errs = append(errs, fmt.Errorf("--parallel: got %d, want >= 1, or 0 for one per CPU", parallel))
	}
	if maxRepl < 0 {
		errs = append(errs, fmt.Errorf("--max-replicas: got %d, want >= 1, or 0 for the default", maxRepl))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("plan: %w", errors.Join(errs...))
}

// monthDays is the mean Gregorian month.
const monthDays = 365.2425 / 12

// maxHorizonDays bounds a growth-dated level: capacity is not planned a
// century ahead, and a date far out would only hide a typo in --growth.
const maxHorizonDays = 50 * 365

// parseDemands reads --demand's "k" and "k@YYYY-MM-DD" entries and dates
// the undated ones by --growth (a monthly rate such as "5%" or "0.05"):
// demand k is reached ln(k)/ln(1+g) months from today. Without a growth
// rate, or for k <= 1, an undated level is needed today.
func parseDemands(in []string, growth string, today time.Time) ([]float64, []time.Time, error) {
	var errs []error
	g := 0.0
	if growth != "" {
		s := strings.TrimSpace(growth)
		pct := strings.HasSuffix(s, "%")
		v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if pct {
			v /= 100
		}
		switch {
		case err != nil || !(v > 0) || math.IsInf(v, 0):
			errs = append(errs, fmt.Errorf("--growth %q: want a monthly growth rate > 0, e.g. 5%% or 0.05", growth))
		case !pct && v >= 1:
			errs = append(errs, fmt.Errorf("--growth %q: %.0f%% a month? write %g%% for %g%% a month, or %g for a rate of %g%%", growth, 100*v, v, v, v/100, v))
		}
		g = v
	}
	var ks []float64
	var dates []time.Time
	for _, e := range in {
		ks0, date, dated := strings.Cut(strings.TrimSpace(e), "@")
		k, err := strconv.ParseFloat(strings.TrimSpace(ks0), 64)
		if err != nil || !(k > 0) || math.IsInf(k, 0) {
			errs = append(errs, fmt.Errorf("--demand %q: want a multiplier > 0, optionally with a date, e.g. 1.5 or 1.5@2027-06-01", e))
			continue
		}
		var need time.Time
		switch {
		case dated:
			t, err := time.Parse(time.DateOnly, strings.TrimSpace(date))
			if err != nil {
				errs = append(errs, fmt.Errorf("--demand %q: the date %q is not YYYY-MM-DD", e, date))
				continue
			}
			if t.Before(plan.DateOf(today)) {
				errs = append(errs, fmt.Errorf("--demand %q: the date is before --today (%s); want the date this demand must be served from", e, today.Format(time.DateOnly)))
				continue
			}
			need = t
		case g > 0 && k > 1:
			days := math.Ceil(math.Log(k) / math.Log1p(g) * monthDays)
			if days > maxHorizonDays {
				errs = append(errs, fmt.Errorf("--demand %q: at --growth %s it is reached in %.0f years; want a date within %d years (give k@DATE)", e, growth, days/365, maxHorizonDays/365))
				continue
			}
			need = plan.DateOf(today).AddDate(0, 0, int(days))
		}
		ks = append(ks, k)
		dates = append(dates, need)
	}
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("plan: %w", errors.Join(errs...))
	}
	return ks, dates, nil
}

// runCommandLine is `fleetdrill run NAME --set …` with the user's sets.
func runCommandLine(name string, sets []string) string {
	words := []string{"fleetdrill", "run", name}
	for _, s := range sets {
		if t := strings.TrimSpace(s); strings.HasPrefix(t, "expect=") || strings.HasPrefix(t, "expect[") {
			continue // each verify command states the expectations it checks
		}
		words = append(words, "--set", s)
	}
	return shell.Line(words...)
}

// gridScenario is how a grid spec at specPath names the scenario.
func gridScenario(specPath, name string) string {
	if scenarios.IsLibraryName(name) {
		return name
	}
	return specRelativePath(specPath, name)
}

// emitPlanGrid writes the plan's full grid as a sweep spec and loads it
// back (a spec the sweep refuses would be a bug).
func emitPlanGrid(stderr io.Writer, path, name string, sets []string, res *plan.Result) error {
	data, err := plan.GridSpec(res, gridScenario(path, name), sets)
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("plan: --emit-grid: %w", err)}
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("plan: --emit-grid: %w", err)}
	}
	spec, err := sweep.Load(path)
	if err != nil {
		return fmt.Errorf("plan: --emit-grid %s: the spec written does not load (a fleetdrill bug): %w", path, err)
	}
	fmt.Fprintf(stderr, "plan: wrote the full grid to %s: %d runs; run it with fleetdrill sweep run %s --out DIR (or fleetdrill sweep %s --emit k8s), then repeat this plan with --check-grid DIR\n",
		path, spec.Runs(), shell.Quote(path), shell.Quote(path))
	return nil
}

// checkPlanGrid reads the grid sweep's shards from dir, checks they are of
// this plan's grid (the spec hash), and compares each level's plan with
// the grid's cheapest passing fleet.
func checkPlanGrid(w io.Writer, dir, name string, sets []string, res *plan.Result) error {
	specPath := filepath.Join(dir, "..", "plan-grid.yaml") // only to resolve a relative scenario path; not written
	data, err := plan.GridSpec(res, gridScenario(specPath, name), sets)
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("plan: --check-grid: %w", err)}
	}
	spec, err := sweep.Parse(specPath, data)
	if err != nil {
		return fmt.Errorf("plan: --check-grid: the plan's grid does not load (a fleetdrill bug): %w", err)
	}
	rep, err := sweep.ReadDir(dir)
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("plan: --check-grid: %w", err)}
	}
	if rep.SpecHash != spec.Hash {
		return &exitError{code: exitInvalid, err: fmt.Errorf("plan: --check-grid %s: the shards are of sweep %s, this plan's grid is %s; run the plan with the same arguments as the --emit-grid that made them, --today included (lead times hold pools by date)", dir, rep.SpecHash, spec.Hash)}
	}
	checks, err := plan.CheckGrid(res, rep)
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("plan: --check-grid %s: %w", dir, err)}
	}
	var cheaper []string
	for _, c := range checks {
		verdict := "the plan is the grid's cheapest passing fleet"
		if c.Cheaper {
			verdict = fmt.Sprintf("the grid holds a cheaper passing fleet: %v at %.2f/h", c.Best, c.BestCost)
			cheaper = append(cheaper, fmt.Sprintf("×%g", c.Demand))
		}
		fmt.Fprintf(w, "grid check, demand ×%g: %d fleets, %d pass every case; plan %.2f/h: %s\n", c.Demand, c.Fleets, c.Passing, c.PlanCost, verdict)
	}
	if len(cheaper) > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("plan: the full grid holds a cheaper passing fleet than the plan at demand %s", strings.Join(cheaper, ", "))}
	}
	return nil
}
