package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"golang.org/x/term"

	"github.com/fleetdrill/fleetdrill/internal/compare"
	"github.com/fleetdrill/fleetdrill/internal/shell"
	"github.com/fleetdrill/fleetdrill/internal/sweep"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/dispatch"
)

// newCompareCmd is `fleetdrill compare`: one scenario under several
// policies, over several seeds, with confidence intervals and tests.
func newCompareCmd() *cobra.Command {
	var (
		policies  []string
		variantsS []string
		seeds     int
		parallel  int
		sets      []string
		jsonPath  string
		emitSweep string
	)
	cmd := &cobra.Command{
		Use:   "compare [SCENARIO] --policy P --policy Q... | --variant NAME=PATH=VALUE,... --variant ...",
		Short: "Compare scheduling policies, or named variants of a scenario, over several seeds",
		Long: "compare runs the scenario (a built-in name or a file; default \"default\") once per\n" +
			"policy and seed, in parallel, and prints each class's metrics side by side: the mean\n" +
			"over the seeds ± the half-width of its 95% confidence interval. A * marks a policy\n" +
			"that differs from the first (the baseline) at p < 0.05, by a paired t-test on the\n" +
			"per-seed differences: a seed gives every policy the same arrivals.\n\n" +
			"--variant NAME=PATH=VALUE[,PATH=VALUE...] (repeatable, at least 2, instead of --policy)\n" +
			"compares named sets of overrides the same way: an autoscaling target, a reservation size,\n" +
			"a scheduler (--variant wfq=policy.scheduler=wfq). The first is the baseline; NAME alone\n" +
			"is the scenario as it is. Overrides split at commas outside brackets and quotes; a\n" +
			"variant may not set the seed. With an autoscaled pool the fleet table adds its refused\n" +
			"replicas, burst cost and time to serving (p90).\n\n" +
			"The seeds are the scenario's seed and the ones after it; --set seed=N moves them.\n" +
			"The exit status is 2 for invalid input or a failed run. Expectations (expect:) are\n" +
			"evaluated in each run but do not change the exit status: compare compares.\n\n" +
			"--emit-sweep FILE runs nothing: it writes a sweep spec (docs/sweeps.md) with exactly\n" +
			"the comparison's runs, one point per policy (or variant), for `fleetdrill sweep run FILE` or\n" +
			"`fleetdrill sweep FILE --emit k8s` (a Kubernetes Indexed Job). The merged sweep\n" +
			"report gives each policy's mean, std and 95% interval, but no paired t-test.",
		Example: "  fleetdrill compare --policy fifo --policy wfq\n" +
			"  fleetdrill compare mmc --policy fifo,priority --seeds 20 --json out.json\n" +
			"  fleetdrill compare ./my.yaml --policy priority --policy edf --set pools[0].replicas=2\n" +
			"  fleetdrill compare default --policy fifo,wfq --seeds 200 --emit-sweep sweep.yaml\n" +
			"  fleetdrill compare gameday-autoscale-stockout --variant today --variant reserve4=pools.usw-h100-8b.acquisition.reserved=4 \\\n" +
			"      --variant warm4=pools.usw-h100-8b.replicas=4,pools.usw-h100-8b.autoscale.min_replicas=4",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := scenarios.DefaultName
			if len(args) == 1 {
				name = args[0]
			}
			variants, err := checkCompareFlags(policies, variantsS, seeds, parallel, sets)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			// The columns: the policies, or the variants' names.
			columns, kind := policies, "policies"
			byName := map[string][]string{}
			if variants != nil {
				columns, kind = nil, "variants"
				for _, v := range variants {
					columns = append(columns, v.Name)
					byName[v.Name] = v.Sets
				}
			}
			if err := checkEmitSweepFlags(cmd, emitSweep); err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			stderr := cmd.ErrOrStderr()
			file, dir, data, err := readScenario(name)
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("compare: %w", err)}
			}
			load := func(policy string, seed uint64) (*scenarios.Scenario, error) {
				all := slices.Clip(sets)
				if variants != nil {
					all = append(all, byName[policy]...)
				} else {
					all = append(all, "policy.scheduler="+policy)
				}
				all = append(all, "seed="+strconv.FormatUint(seed, 10))
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
			for _, p := range columns {
				if _, err := load(p, base.Seed); err != nil {
					flag := "--policy"
					if variants != nil {
						flag = "--variant"
					}
					problems = append(problems, fmt.Errorf("with %s %s:\n%w", flag, p, err))
				}
			}
			if len(problems) > 0 {
				return invalidScenario(name, errors.Join(problems...))
			}
			if emitSweep != "" {
				return emitCompareSweep(stderr, emitSweep, name, sets, policies, variants, base.Seed, seeds)
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
				Scenario: base.Name, Policies: policies, Variants: variants,
				FirstSeed: base.Seed, Seeds: seeds, Parallel: parallel,
				Version: buildVersion(),
			}
			total := len(columns) * seeds
			// Progress on a terminal only, redrawn in place; logs get the
			// first and last lines.
			tty := false
			if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				tty = true
				cfg.Progress = func(done, total int) {
					fmt.Fprintf(stderr, "\r\033[Kcompare: %d/%d runs done", done, total)
				}
			}
			fmt.Fprintf(stderr, "compare: %s: %d %s × %d seeds (%d..%d) = %d runs\n",
				name, len(columns), kind, seeds, base.Seed, base.Seed+uint64(seeds-1), total)
			res, err := compare.Run(cmd.Context(), load, cfg)
			if tty {
				fmt.Fprint(stderr, "\r\033[K")
			}
			if err != nil {
				var re *compare.RunError
				if errors.As(err, &re) {
					return &exitError{code: exitInvalid, err: fmt.Errorf("compare: %w; reproduce with: %s", err, rerunArgs(name, sets, re))}
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
	f.StringArrayVar(&variantsS, "variant", nil, "a named set of overrides to compare instead of policies, NAME=PATH=VALUE[,PATH=VALUE...] or NAME alone for the scenario as it is (repeatable, at least 2; the first is the baseline), e.g. hpa70=pools.web.autoscale.target=0.7")
	f.IntVar(&seeds, "seeds", 10, "runs per policy (or variant), with the scenario's seed and the ones after it (at least 2 for intervals and tests)")
	f.IntVar(&parallel, "parallel", 0, "runs at a time; 0 means one per CPU (GOMAXPROCS)")
	f.StringArrayVar(&sets, "set", nil, "override a scenario field for every run, e.g. --set pools[0].replicas=8 (repeatable)")
	f.StringVar(&jsonPath, "json", "", "also write the comparison as JSON to this file (- for stdout, in place of the table)")
	f.StringVar(&emitSweep, "emit-sweep", "", "run nothing: write a sweep spec with exactly these runs to this file, for fleetdrill sweep (docs/sweeps.md)")
	return cmd
}

// checkCompareFlags checks the flags that need no scenario, and reports
// every problem at once. It returns the parsed variants, nil when policies
// are compared.
func checkCompareFlags(policies, variantsS []string, seeds, parallel int, sets []string) ([]compare.Variant, error) {
	known := dispatch.Policies()
	allowed := strings.Join(known, ", ")
	var errs []error
	var variants []compare.Variant
	switch {
	case len(variantsS) > 0 && len(policies) > 0:
		errs = append(errs, fmt.Errorf("--policy and --variant: compare one or the other; a variant may set the scheduler (--variant wfq=policy.scheduler=wfq)"))
	case len(variantsS) > 0:
		if len(variantsS) < 2 {
			errs = append(errs, fmt.Errorf("--variant: got %d, want at least 2 (the first is the baseline; NAME alone is the scenario as it is)", len(variantsS)))
		}
		for _, s := range variantsS {
			v, err := compare.ParseVariant(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("--variant %q: %w", s, err))
				continue
			}
			if slices.ContainsFunc(variants, func(w compare.Variant) bool { return w.Name == v.Name }) {
				errs = append(errs, fmt.Errorf("--variant %q: the name %s is given twice; want each variant named once", s, v.Name))
				continue
			}
			variants = append(variants, v)
		}
	case len(policies) < 2:
		errs = append(errs, fmt.Errorf("--policy: got %d, want at least 2 (the first is the baseline), each one of %s; or --variant NAME=PATH=VALUE at least twice", len(policies), allowed))
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
			if len(variantsS) == 0 {
				errs = append(errs, fmt.Errorf("--set %s: compare sets the scheduler itself; use --policy", s))
			}
		}
	}
	if len(errs) == 0 {
		return variants, nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return nil, fmt.Errorf("compare: %s", strings.Join(msgs, "\n  "))
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

// rerunArgs is the `fleetdrill run` command line that repeats one run: the
// user's sets, then the policy's or the variant's.
func rerunArgs(name string, sets []string, re *compare.RunError) string {
	all := slices.Clone(sets)
	if re.Variant != nil {
		all = append(all, re.Variant.Sets...)
	} else {
		all = append(all, "policy.scheduler="+re.Policy)
	}
	return commandLine(runArgs(name, all, re.Seed)...)
}

// checkEmitSweepFlags refuses, every problem at once, the flags that mean
// nothing when --emit-sweep runs nothing.
func checkEmitSweepFlags(cmd *cobra.Command, emitSweep string) error {
	f := cmd.Flags()
	if !f.Changed("emit-sweep") {
		return nil
	}
	var msgs []string
	switch emitSweep {
	case "":
		msgs = append(msgs, "--emit-sweep: want a file to write the sweep spec to")
	case "-":
		msgs = append(msgs, "--emit-sweep -: want a file (a scenario path in the spec is relative to the spec's directory)")
	}
	if f.Changed("json") {
		msgs = append(msgs, "--json with --emit-sweep: --emit-sweep runs nothing, so there is no comparison to write; "+
			"run the sweep, then fleetdrill sweep merge DIR --json FILE")
	}
	if f.Changed("parallel") {
		msgs = append(msgs, "--parallel with --emit-sweep: --emit-sweep runs nothing; give --parallel to fleetdrill sweep run")
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("compare: %s", strings.Join(msgs, "\n  "))
}

// compareSweepSpec is the layout of the sweep spec --emit-sweep writes
// (internal/sweep reads it).
type compareSweepSpec struct {
	Scenario string              `yaml:"scenario"`
	Sets     []string            `yaml:"sets,omitempty"`
	Points   []compareSweepPoint `yaml:"points"`
	Seeds    []uint64            `yaml:"seeds,flow"`
}

type compareSweepPoint struct {
	Name string   `yaml:"name"`
	Sets []string `yaml:"sets,flow"`
}

// emitCompareSweep writes to path a sweep spec with exactly the runs
// compare would run: one point per policy (or variant, with its
// overrides), named after it, over the
// comparison's seeds, listed. A seed= among sets is dropped: it moved the
// seeds, which the spec lists. The spec is loaded back before it is put in
// place, so that a spec the sweep refuses is never reported as written.
func emitCompareSweep(stderr io.Writer, path, name string, sets, policies []string, variants []compare.Variant, firstSeed uint64, seeds int) error {
	fail := func(err error) error {
		return &exitError{code: exitInvalid, err: fmt.Errorf("compare: --emit-sweep %s: %w", path, err)}
	}
	spec := compareSweepSpec{Scenario: name}
	if !scenarios.IsLibraryName(name) {
		spec.Scenario = specRelativePath(path, name)
	}
	for _, s := range sets {
		if k, _, _ := strings.Cut(s, "="); strings.TrimSpace(k) != "seed" {
			spec.Sets = append(spec.Sets, s)
		}
	}
	kind := "policies"
	for _, p := range policies {
		spec.Points = append(spec.Points, compareSweepPoint{Name: p, Sets: []string{"policy.scheduler=" + p}})
	}
	if variants != nil {
		kind, policies = "variants", nil
		for _, v := range variants {
			policies = append(policies, v.Name)
			spec.Points = append(spec.Points, compareSweepPoint{Name: v.Name, Sets: append([]string{}, v.Sets...)})
		}
	}
	spec.Seeds = make([]uint64, seeds)
	for i := range spec.Seeds {
		spec.Seeds[i] = firstSeed + uint64(i)
	}
	var body strings.Builder
	enc := yaml.NewEncoder(&body)
	enc.SetIndent(2)
	if err := errors.Join(enc.Encode(spec), enc.Close()); err != nil {
		return fail(err)
	}
	runs := len(policies) * seeds
	q := shell.Quote(path)
	head := fmt.Sprintf(`# A sweep spec written by fleetdrill compare --emit-sweep: the comparison of
# %s %s on %s over %d seeds (%d..%d), one point each: %d runs.
# Run it on this machine:
#   fleetdrill sweep run %s --out results
#   fleetdrill sweep merge results --json report.json
# or as a Kubernetes Indexed Job (docs/sweeps.md):
#   fleetdrill sweep %s --emit k8s --image IMAGE --shards N --volume-claim CLAIM > job.json
# The report gives, per policy, each figure's mean, std and 95%% interval over the
# seeds; compare's paired t-test against the baseline (%s) is not in it.
`, kind, strings.Join(policies, ", "), name, seeds, firstSeed, firstSeed+uint64(seeds-1), runs, q, q, policies[0])
	data := []byte(head + body.String())

	// Through a temporary file beside the target, so that the scenario path
	// resolves as it will, and a failure leaves an old file untouched.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fail(err)
	}
	defer func() {
		// After a successful rename this fails harmlessly.
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	if err := errors.Join(writeAll(tmp, data), tmp.Chmod(0o644), tmp.Close()); err != nil {
		return fail(err)
	}
	got, err := sweep.Load(tmp.Name())
	if err != nil {
		return fmt.Errorf("compare: --emit-sweep %s: the spec written does not load (a fleetdrill bug): %w", path, err)
	}
	if err := sameSweepRuns(got, spec); err != nil {
		return fmt.Errorf("compare: --emit-sweep %s: the spec written loads other runs (a fleetdrill bug): %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stderr, "compare: wrote sweep spec %s: %d %s × %d seeds = %d runs; run it with fleetdrill sweep run %s, or fleetdrill sweep %s --emit k8s\n",
		path, len(policies), kind, seeds, runs, q, q)
	return nil
}

func writeAll(f *os.File, data []byte) error {
	_, err := f.Write(data)
	return err
}

// specRelativePath is scenario, a file path relative to the working
// directory, as a sweep spec at specPath names it: relative to the spec's
// directory, or absolute where there is no relative path. A path that would
// read as a library name gets a ./.
func specRelativePath(specPath, scenario string) string {
	abs, err := filepath.Abs(scenario)
	if err != nil {
		return scenario
	}
	dir, err := filepath.Abs(filepath.Dir(specPath))
	if err != nil {
		return abs
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		return abs
	}
	rel = filepath.ToSlash(rel)
	if scenarios.IsLibraryName(rel) {
		rel = "./" + rel
	}
	return rel
}

// sameSweepRuns checks that a loaded spec holds the runs it was written with.
func sameSweepRuns(got *sweep.Spec, want compareSweepSpec) error {
	if !slices.Equal(got.Seeds, want.Seeds) {
		return fmt.Errorf("seeds %v; want %v", got.Seeds, want.Seeds)
	}
	if !slices.Equal(got.Sets, want.Sets) {
		return fmt.Errorf("sets %q; want %q", got.Sets, want.Sets)
	}
	if len(got.Points) != len(want.Points) {
		return fmt.Errorf("%d points; want %d", len(got.Points), len(want.Points))
	}
	for i, p := range got.Points {
		if p.Name != want.Points[i].Name || !slices.Equal(p.Sets, want.Points[i].Sets) {
			return fmt.Errorf("point %d is %s %q; want %s %q", i, p.Name, p.Sets, want.Points[i].Name, want.Points[i].Sets)
		}
	}
	return nil
}
