package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/fleetdrill/fleetdrill/internal/report"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

func newRunCmd() *cobra.Command {
	var (
		seed       uint64
		jsonPath   string
		cpuProfile string
		sets       []string
		live       liveFlags
		om         omFlags
	)
	cmd := &cobra.Command{
		Use:   "run [SCENARIO]",
		Short: "Run a scenario on the digital twin and report",
		Long: `Run a scenario on the digital twin and print a summary; --json writes the full report.

SCENARIO is a name from the embedded library (see "fleetdrill scenarios list")
or a YAML file; without it, the library's "default" runs.

With --live the scenario is replayed through the live harness instead: a
live fleet of emulated nodes in Docker containers (one network per region,
toxiproxy in front of each node), the live gateway, the scenario's requests
with synthetic prompts and its faults injected for real, all compressed by
--speed. The report is the live one; the twin runs the same scenario too and
a comparison follows (--compare FILE writes it as JSON). See docs/live.md.

--openmetrics FILE writes the run's operational series (the live gateway's
names and labels) sampled every --openmetrics-step of simulated time, with
timestamps from --openmetrics-start, for Prometheus to backfill with
"promtool tsdb create-blocks-from openmetrics FILE DIR". See
docs/metrics.md ("The twin").

Exit status: 0 when every expectation passes, 1 when one fails, 2 for invalid
input.`,
		Example: `  fleetdrill run
  fleetdrill run default --seed 7 --json report.json
  fleetdrill run my-fleet.yaml --set pools.use-h100-8b.replicas=2 --set policy.scheduler=wfq
  fleetdrill run gameday-regional-outage --openmetrics run.om --openmetrics-step 10s
  fleetdrill run gameday-regional-outage --live --speed 10 --replicas 1`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := "default"
			if len(args) == 1 {
				name = args[0]
			}
			if cmd.Flags().Changed("seed") {
				sets = append(sets, "seed="+strconv.FormatUint(seed, 10))
			}
			if live.on {
				if om.path != "" {
					return &exitError{code: exitInvalid, err: fmt.Errorf("--openmetrics writes a twin run's series; it does not combine with --live (scrape the live gateway instead)")}
				}
				return runLive(cmd, name, sets, jsonPath, live)
			}
			if live.changed(cmd) {
				return &exitError{code: exitInvalid, err: fmt.Errorf("--speed, --replicas, --image, --compare, --no-twin, --backend and --allow-disrupt need --live")}
			}
			sc, err := scenarios.LoadNamedWithSets(name, sets)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			metrics, omStart, err := om.metrics(cmd, sc)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			stderr := cmd.ErrOrStderr()
			opts := twin.Options{Version: buildVersion(), Metrics: metrics}
			if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				opts.Progress = progressBar(stderr, time.Now())
			}
			stopProfile, err := startCPUProfile(cpuProfile)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			rep, err := twin.Run(cmd.Context(), sc, opts)
			if perr := stopProfile(); perr != nil && err == nil {
				return &exitError{code: exitInvalid, err: perr}
			}
			if opts.Progress != nil {
				fmt.Fprint(stderr, "\r\033[K")
			}
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("run %s (seed %d): %w", sc.Name, sc.Seed, err)}
			}
			if jsonPath != "" {
				b, err := rep.JSON()
				if err != nil {
					return err
				}
				if err := os.WriteFile(jsonPath, b, 0o644); err != nil {
					return &exitError{code: exitInvalid, err: fmt.Errorf("--json: %w", err)}
				}
			}
			if metrics != nil {
				if err := om.write(metrics, omStart, stderr); err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
			}
			if err := report.Text(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			return failedExpectations(rep, commandLine(runArgs(name, sets, sc.Seed)...))
		},
	}
	live.register(cmd)
	om.register(cmd)
	cmd.Flags().Uint64Var(&seed, "seed", 0, "run seed (overrides the scenario's)")
	cmd.Flags().StringVar(&jsonPath, "json", "", "write the JSON report to `FILE`")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the twin's run to `FILE` (go tool pprof reads it; see Performance in the README)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override a scenario field: `path=value` (repeatable), e.g. pools.use-h100-8b.replicas=2")
	return cmd
}

// failedExpectations is the run's exit error when an expectation failed.
func failedExpectations(rep *twin.Report, reproduce string) error {
	if rep.Passed() {
		return nil
	}
	var failed []string
	for _, e := range rep.Expectations {
		if !e.Pass {
			failed = append(failed, fmt.Sprintf("%s (%s)", e.Expr, report.Measured(e)))
		}
	}
	return &exitError{code: exitFailed, err: fmt.Errorf("%d expectation(s) failed: %s; reproduce with: %s",
		len(failed), strings.Join(failed, "; "), reproduce)}
}

// progressBar returns a progress callback that draws a bar on w once the
// run has taken more than a second: short runs stay quiet.
func progressBar(w io.Writer, start time.Time) func(float64) {
	return func(frac float64) {
		if time.Since(start) < time.Second {
			return
		}
		const width = 30
		n := int(frac * width)
		fmt.Fprintf(w, "\r[%s%s] %3.0f%% simulated", strings.Repeat("#", n), strings.Repeat(".", width-n), 100*frac)
	}
}
