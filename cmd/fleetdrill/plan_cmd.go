package main

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/plan"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// newPlanCmd is `fleetdrill plan`: the cheapest fleet that meets the
// scenario's expectations, healthy and through named failures, per demand.
func newPlanCmd() *cobra.Command {
	var (
		demands  []float64
		survive  []string
		sets     []string
		jsonPath string
		plotPath string
		parallel int
		maxRepl  int
		minAtt   float64
	)
	cmd := &cobra.Command{
		Use:   "plan [SCENARIO] [--demand 1,1.5,2] [--survive FAULT]...",
		Short: "Find the cheapest fleet that meets the scenario's expectations, through failures",
		Long: "plan searches the replica counts of the scenario's pools for the cheapest fleet whose\n" +
			"run meets every expectation of the scenario, healthy and with each --survive fault\n" +
			"added (separately), at each --demand multiplier of every workload stream's rate.\n" +
			"It assumes more replicas never hurt an SLO: it doubles today's fleet until it passes,\n" +
			"then bisects each pool's count (most expensive first) to the least that passes with\n" +
			"the others fixed, until nothing changes. Runs are cached and run in parallel.\n\n" +
			"It prints per demand the fleet, its cost per hour and per successful task, the\n" +
			"binding constraint of each pool (what fails with one fewer replica), its headroom,\n" +
			"and the gap to today's fleet. The exit status is 0 when every demand level has a\n" +
			"plan, 1 when one has none, 2 for invalid input. docs/planning.md walks through one.",
		Example: "  fleetdrill plan default --demand 1,1.5 --survive \"regional-outage region=us-east at=10m for=10m\" --set duration=10m\n" +
			"  fleetdrill plan mmc --set duration=1h --json plan.json --plot pareto.png",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := scenarios.DefaultName
			if len(args) == 1 {
				name = args[0]
			}
			if err := checkPlanFlags(demands, parallel, maxRepl); err != nil || minAtt < 0 || minAtt > 1 {
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
			for _, lv := range res.Levels {
				if !lv.Feasible {
					return &exitError{code: exitFailed, err: fmt.Errorf("plan: no fleet meets every expectation at demand ×%g: %s", lv.Demand, lv.Note)}
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Float64SliceVar(&demands, "demand", []float64{1}, "demand multipliers of every stream's rate (comma-separated or repeatable)")
	f.StringArrayVar(&survive, "survive", nil, `a fault the plan must survive, in the fault syntax, e.g. "regional-outage region=us-east at=10m for=30m" (repeatable; each is tried separately)`)
	f.StringArrayVar(&sets, "set", nil, "override a scenario field for every run, e.g. --set duration=10m (repeatable)")
	f.StringVar(&jsonPath, "json", "", "also write the plan, every evaluated point included, as JSON to this file")
	f.StringVar(&plotPath, "plot", "", "draw the cost-versus-SLO-attainment Pareto front of every evaluated fleet to this PNG")
	f.IntVar(&parallel, "parallel", 0, "runs at a time; 0 means one per CPU (GOMAXPROCS)")
	f.IntVar(&maxRepl, "max-replicas", 0, "cap on each pool's count in the search; 0 means max(64, 4 × today's)")
	f.Float64Var(&minAtt, "min-attainment", 0.99, "also require every class's SLO attainment >= this in the healthy runs (0: only the scenario's expectations; a latency bound alone is met by a fleet that rejects everything)")
	return cmd
}

func checkPlanFlags(demands []float64, parallel, maxRepl int) error {
	var errs []error
	for _, d := range demands {
		if !(d > 0) {
			errs = append(errs, fmt.Errorf("--demand %g: want a multiplier > 0", d))
		}
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
