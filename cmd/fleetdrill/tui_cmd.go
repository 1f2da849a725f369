package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/fleetdrill/fleetdrill/internal/liverun"
	"github.com/fleetdrill/fleetdrill/internal/report"
	"github.com/fleetdrill/fleetdrill/internal/tui"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// maxTUISpeed bounds --speed: beyond a simulated day per wall second the
// console shows nothing but the end.
const maxTUISpeed = 86400

// liveSpeed is --speed's default with --live, and maxLiveSpeed its bound
// (liverun's).
const (
	liveSpeed    = 5
	maxLiveSpeed = 1000
)

func newTUICmd() *cobra.Command {
	var (
		seed       uint64
		sets       []string
		speed      float64
		recordPath string
		paused     bool
		live       bool
		replicas   int
	)
	cmd := &cobra.Command{
		Use:   "tui [SCENARIO]",
		Short: "Run a game day: the twin paced to the wall clock in a console, with faults injected by key",
		Long: `Run a scenario on the digital twin, paced to the wall clock, in a terminal
console: the fleet as the router sees it, latency against the SLOs, queues
and routes, the timeline, and why the scheduler decided as it did. Keys
pause it, step it, change its speed and inject faults on the selected
region, pool or model (? lists them); q ends the drill with a summary.

SCENARIO is a library name (see "fleetdrill scenarios list") or a YAML file;
without it, the library's "default" runs. --speed is simulated seconds per
wall second (60: a simulated minute each second).

--record FILE writes the drill as a scenario file: the scenario with every
fault, its own and those injected, at its simulated time. "fleetdrill run
FILE" replays it and gives the drill's report when the drill ran to its
end, so a game day becomes a regression test.

With --live the console follows the live harness instead (docs/live.md):
the scenario replayed through emulated nodes in Docker containers and the
live gateway, at --speed (5 by default; the wall clock drives it, so it
cannot pause or step), with the keys' faults injected for real.

The console needs a terminal; to script it, run it under tmux (README).`,
		Example: `  fleetdrill tui gameday-regional-outage
  fleetdrill tui default --speed 120 --record drill.yaml
  fleetdrill run drill.yaml
  fleetdrill tui default --live --replicas 1`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := scenarios.DefaultName
			if len(args) == 1 {
				name = args[0]
			}
			if live && !cmd.Flags().Changed("speed") {
				speed = liveSpeed
			}
			if !live && cmd.Flags().Changed("replicas") {
				return &exitError{code: exitInvalid, err: errors.New("--replicas needs --live")}
			}
			if live && speed > maxLiveSpeed {
				return &exitError{code: exitInvalid, err: fmt.Errorf("--speed: got %g, want <= %d with --live (docs/live.md: on two cores keep it at 2 or below for latency)", speed, maxLiveSpeed)}
			}
			if !(speed > 0) || math.IsInf(speed, 0) || speed > maxTUISpeed {
				return &exitError{code: exitInvalid, err: fmt.Errorf("--speed: got %g, want > 0 and <= %d (simulated seconds per wall second)", speed, maxTUISpeed)}
			}
			if cmd.Flags().Changed("seed") {
				sets = append(sets, "seed="+strconv.FormatUint(seed, 10))
			}
			sc, err := scenarios.LoadNamedWithSets(name, sets)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			if recordPath != "" {
				if fi, err := os.Stat(filepath.Dir(recordPath)); err != nil || !fi.IsDir() {
					return &exitError{code: exitInvalid, err: fmt.Errorf("--record %s: no directory %s to write it in", recordPath, filepath.Dir(recordPath))}
				}
			}
			in, inOK := cmd.InOrStdin().(*os.File)
			out, outOK := cmd.OutOrStdout().(*os.File)
			if !inOK || !outOK || !term.IsTerminal(int(in.Fd())) || !term.IsTerminal(int(out.Fd())) {
				return &exitError{code: exitInvalid, err: errors.New("tui: stdin and stdout must be a terminal; " +
					"to script a game day run it under tmux (see the README), or put the faults in the scenario and use fleetdrill run")}
			}
			var eng tui.Engine
			base := tui.Base{Name: name, Sets: sets}
			if live {
				fmt.Fprintf(cmd.ErrOrStderr(), "starting the live fleet for %s…\n", sc.Name)
				sess, err := liverun.Start(cmd.Context(), liverun.Options{Scenario: name, Sets: sets, Speed: speed,
					Replicas: replicas, NoTwin: true, Progress: func(stage string) {
						fmt.Fprintf(cmd.ErrOrStderr(), "live: %s…\n", stage)
					}})
				if err != nil {
					return &exitError{code: exitInvalid, err: fmt.Errorf("tui %s --live: %w", sc.Name, err)}
				}
				defer sess.Close()
				eng, sc, base.Sets = sess, sess.Scenario(), sess.Sets()
			} else {
				drill, err := twin.NewDrill(sc, twin.Options{Version: buildVersion()})
				if err != nil {
					return &exitError{code: exitInvalid, err: fmt.Errorf("tui %s (seed %d): %w", sc.Name, sc.Seed, err)}
				}
				eng = drill
			}
			res, err := tui.Run(cmd.Context(), eng, tui.Options{
				Driver:  tui.DriverOptions{Speed: speed, Paused: paused},
				Program: []tea.ProgramOption{tea.WithInput(in), tea.WithOutput(out)},
				Base:    base,
			})
			if err != nil && res.Report == nil {
				return err
			}
			return finishDrill(cmd, base, sc, res, recordPath, err)
		},
	}
	f := cmd.Flags()
	f.Float64Var(&speed, "speed", 60, "simulated seconds per wall second")
	f.Uint64Var(&seed, "seed", 0, "run seed (overrides the scenario's)")
	f.StringArrayVar(&sets, "set", nil, "override a scenario field: `path=value` (repeatable), e.g. pools.use-h100-8b.replicas=2")
	f.StringVar(&recordPath, "record", "", "write the drill, faults injected included, as a scenario `FILE` that fleetdrill run replays")
	f.BoolVar(&paused, "paused", false, "start paused (space resumes)")
	f.BoolVar(&live, "live", false, "follow the live harness (Docker containers, live gateway) instead of the twin")
	f.IntVar(&replicas, "replicas", 0, "with --live: at most `N` containers per pool (0: the scenario's replicas)")
	return cmd
}

// finishDrill prints the drill's report and writes its record. A drill the
// operator stopped early exits 0 whatever its expectations say (they were
// measured on part of the run); one that ran to its end exits as fleetdrill
// run would.
func finishDrill(cmd *cobra.Command, base tui.Base, sc *scenarios.Scenario, res tui.Result, recordPath string, consoleErr error) error {
	stdout := cmd.OutOrStdout()
	if recordPath != "" {
		data, err := tui.RecordScenario(base, res.Recorded, recordPath)
		if err != nil {
			return &exitError{code: exitInvalid, err: err}
		}
		if err := os.WriteFile(recordPath, data, 0o644); err != nil {
			return &exitError{code: exitInvalid, err: fmt.Errorf("--record: %w", err)}
		}
	}
	if res.Err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("tui %s (seed %d): %w", sc.Name, sc.Seed, res.Err)}
	}
	how := "stopped at " + res.At.Round(time.Millisecond).String()
	if res.Ended {
		how = "ran to its end"
	}
	fmt.Fprintf(stdout, "game day %s (seed %d) %s; %d fault(s)\n", sc.Name, sc.Seed, how, len(res.Recorded))
	if err := report.Text(stdout, res.Report); err != nil {
		return err
	}
	if recordPath != "" {
		fmt.Fprintf(stdout, "\nrecorded to %s; replay with: fleetdrill run %s\n", recordPath, recordPath)
	} else {
		fmt.Fprintf(stdout, "\nreplay with: %s\n", tui.ReplayCommand(base, res.Recorded))
	}
	if consoleErr != nil {
		return consoleErr
	}
	if !res.Ended {
		return nil
	}
	// The drill's overrides and every fault line with its exact times:
	// the scenario's name and seed alone would replay a different drill.
	repro := tui.ReplayCommand(base, res.Recorded)
	if recordPath != "" {
		repro = "fleetdrill run " + recordPath
	}
	return failedExpectations(res.Report, repro)
}
