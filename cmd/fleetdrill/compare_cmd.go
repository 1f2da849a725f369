package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/fleetdrill/fleetdrill/internal/compare"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/dispatch"
)

// newCompareCmd is `fleetdrill compare`: one scenario under several
// policies, over several seeds, with confidence intervals and tests.
func newCompareCmd() *cobra.Command {
	var (
		policies []string
		seeds    int
		parallel int
		sets     []string
		jsonPath string
	)
	cmd := &cobra.Command{
		Use:   "compare [SCENARIO] --policy P --policy Q...",
		Short: "Compare scheduling policies on a scenario over several seeds",
		Long: "compare runs the scenario (a built-in name or a file; default \"default\") once per\n" +
			"policy and seed, in parallel, and prints each class's metrics side by side: the mean\n" +
			"over the seeds ± the half-width of its 95% confidence interval. A * marks a policy\n" +
			"that differs from the first (the baseline) at p < 0.05, by a paired t-test on the\n" +
			"per-seed differences: a seed gives every policy the same arrivals.\n\n" +
			"The seeds are the scenario's seed and the ones after it; --set seed=N moves them.\n" +
			"The exit status is 2 for invalid input or a failed run. Expectations (expect:) are\n" +
			"evaluated in each run but do not change the exit status: compare compares.",
		Example: "  fleetdrill compare --policy fifo --policy wfq\n" +
			"  fleetdrill compare mmc --policy fifo,priority --seeds 20 --json out.json\n" +
			"  fleetdrill compare ./my.yaml --policy priority --policy edf --set pools[0].replicas=2",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := scenarios.DefaultName
			if len(args) == 1 {
				name = args[0]
			}
			if err := checkCompareFlags(policies, seeds, parallel, sets); err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			stderr := cmd.ErrOrStderr()
			file, dir, data, err := readScenario(name)
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("compare: %w", err)}
			}
			load := func(policy string, seed uint64) (*scenarios.Scenario, error) {
				all := append(slices.Clip(sets), "policy.scheduler="+policy, "seed="+strconv.FormatUint(seed, 10))
				return scenarios.ParseInDir(file, dir, data, all)
			}

			// Check the scenario, and each policy on it, before the first
			// run: a typo should fail in milliseconds, and every problem
			// at once.
			base, err := scenarios.ParseInDir(file, dir, data, sets)
			if err != nil {
				return invalidScenario(name, err)
			}
			var problems []error
			for _, p := range policies {
				if _, err := load(p, base.Seed); err != nil {
					problems = append(problems, fmt.Errorf("with --policy %s:\n%w", p, err))
				}
			}
			if len(problems) > 0 {
				return invalidScenario(name, errors.Join(problems...))
			}
			if seeds == 1 {
				fmt.Fprintln(stderr, "compare: warning: --seeds 1 gives no confidence intervals and no tests; use at least 2 (10 is the default)")
			}

			// The JSON goes to a temporary file beside the target, renamed
			// into place at the end: an unwritable path fails now, not after
			// the runs, and a failed compare leaves an old file untouched.
			var jsonOut *os.File
			if jsonPath != "" && jsonPath != "-" {
				jsonOut, err = os.CreateTemp(filepath.Dir(jsonPath), "."+filepath.Base(jsonPath)+".*")
				if err != nil {
					return &exitError{code: exitInvalid, err: fmt.Errorf("compare: --json %s: %w", jsonPath, err)}
				}
				defer func() {
					// After a successful rename this fails harmlessly.
					jsonOut.Close()
					os.Remove(jsonOut.Name())
				}()
			}

			cfg := compare.Config{
				Scenario: base.Name, Policies: policies,
				FirstSeed: base.Seed, Seeds: seeds, Parallel: parallel,
				Version: buildVersion(),
			}
			total := len(policies) * seeds
			// Progress on a terminal only, redrawn in place; logs get the
			// first and last lines.
			tty := false
			if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				tty = true
				cfg.Progress = func(done, total int) {
					fmt.Fprintf(stderr, "\r\033[Kcompare: %d/%d runs done", done, total)
				}
			}
			fmt.Fprintf(stderr, "compare: %s: %d policies × %d seeds (%d..%d) = %d runs\n",
				name, len(policies), seeds, base.Seed, base.Seed+uint64(seeds-1), total)
			res, err := compare.Run(cmd.Context(), load, cfg)
			if tty {
				fmt.Fprint(stderr, "\r\033[K")
			}
			if err != nil {
				var re *compare.RunError
				if errors.As(err, &re) {
					return &exitError{code: exitInvalid, err: fmt.Errorf("compare: %w; reproduce with: fleetdrill run %s", err, rerunArgs(name, sets, re))}
				}
				return &exitError{code: exitInvalid, err: err}
			}
			workers := "workers"
			if res.Run.Parallel == 1 {
				workers = "worker"
			}
			fmt.Fprintf(stderr, "compare: %d runs in %.1fs on %d %s\n", total, res.Run.Wall.Seconds(), res.Run.Parallel, workers)

			if jsonPath == "-" {
				return compare.WriteJSON(cmd.OutOrStdout(), res)
			}
			if err := compare.WriteText(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if jsonOut != nil {
				if err := compare.WriteJSON(jsonOut, res); err != nil {
					return fmt.Errorf("compare: --json %s: %w", jsonPath, err)
				}
				// CreateTemp makes the file 0600; a report is no secret.
				if err := jsonOut.Chmod(0o644); err != nil {
					return fmt.Errorf("compare: --json %s: %w", jsonPath, err)
				}
				if err := jsonOut.Close(); err != nil {
					return fmt.Errorf("compare: --json %s: %w", jsonPath, err)
				}
				if err := os.Rename(jsonOut.Name(), jsonPath); err != nil {
					return fmt.Errorf("compare: --json %s: %w", jsonPath, err)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&policies, "policy", nil, "a scheduler to compare, at least 2 (repeatable or comma-separated; the first is the baseline): "+strings.Join(dispatch.Policies(), ", "))
	f.IntVar(&seeds, "seeds", 10, "runs per policy, with the scenario's seed and the ones after it (at least 2 for intervals and tests)")
	f.IntVar(&parallel, "parallel", 0, "runs at a time; 0 means one per CPU (GOMAXPROCS)")
	f.StringArrayVar(&sets, "set", nil, "override a scenario field for every run, e.g. --set pools[0].replicas=8 (repeatable)")
	f.StringVar(&jsonPath, "json", "", "also write the comparison as JSON to this file (- for stdout, in place of the table)")
	return cmd
}

// checkCompareFlags checks the flags that need no scenario, and reports
// every problem at once.
func checkCompareFlags(policies []string, seeds, parallel int, sets []string) error {
	known := dispatch.Policies()
	allowed := strings.Join(known, ", ")
	var errs []error
	if len(policies) < 2 {
		errs = append(errs, fmt.Errorf("--policy: got %d, want at least 2 (the first is the baseline), each one of %s", len(policies), allowed))
	}
	for i, p := range policies {
		switch {
		case !slices.Contains(known, p):
			errs = append(errs, fmt.Errorf("--policy %q: want one of %s", p, allowed))
		case slices.Index(policies, p) < i:
			errs = append(errs, fmt.Errorf("--policy %q given twice; want each policy once", p))
		}
	}
	if seeds < 1 {
		errs = append(errs, fmt.Errorf("--seeds: got %d, want >= 1 (>= 2 for confidence intervals and tests)", seeds))
	}
	if parallel < 0 {
		errs = append(errs, fmt.Errorf("--parallel: got %d, want >= 1, or 0 for one per CPU", parallel))
	}
	for _, s := range sets {
		path, _, _ := strings.Cut(s, "=")
		switch strings.TrimSpace(path) {
		case "policy.scheduler":
			errs = append(errs, fmt.Errorf("--set %s: compare sets the scheduler itself; use --policy", s))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("compare: %s", strings.Join(msgs, "\n  "))
}

// readScenario reads the scenario's bytes once, so that every run parses
// the same text even if the file changes meanwhile. It resolves names as
// scenarios.LoadNamed does.
func readScenario(name string) (file, dir string, data []byte, err error) {
	if scenarios.IsLibraryName(name) {
		data, err := scenarios.Source(name)
		return name + ".yaml", "", data, err
	}
	data, err = os.ReadFile(name)
	if err != nil {
		return "", "", nil, fmt.Errorf("load scenario: %w", err)
	}
	return name, filepath.Dir(name), data, nil
}

// invalidScenario is the exit error for a scenario that does not parse or
// validate; a *scenarios.ValidationError lists every problem, one a line.
func invalidScenario(name string, err error) error {
	return &exitError{code: exitInvalid, err: fmt.Errorf("compare: scenario %s is invalid:\n%w", name, err)}
}

// rerunArgs is the `fleetdrill run` command line that repeats one run.
func rerunArgs(name string, sets []string, re *compare.RunError) string {
	args := []string{name}
	for _, s := range sets {
		args = append(args, "--set", shellQuote(s))
	}
	args = append(args, "--set", "policy.scheduler="+re.Policy, "--seed", strconv.FormatUint(re.Seed, 10))
	return strings.Join(args, " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`[]{}*?;&|<>()!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
