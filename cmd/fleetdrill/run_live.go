package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/liverun"
	"github.com/fleetdrill/fleetdrill/internal/report"
	"github.com/fleetdrill/fleetdrill/internal/shell"
)

// liveFlags are run's --live options.
type liveFlags struct {
	on          bool
	speed       float64
	replicas    int
	image       string
	comparePath string
	noTwin      bool
	verbose     bool
}

func (l *liveFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&l.on, "live", false, "replay through the live harness (Docker containers, live gateway) instead of the twin")
	f.Float64Var(&l.speed, "speed", liverun.DefaultSpeed, "with --live: time compression, model seconds per wall second")
	f.IntVar(&l.replicas, "replicas", 0, "with --live: at most `N` containers per pool (0: the scenario's replicas)")
	f.StringVar(&l.image, "image", "", "with --live: run this node `IMAGE` (e.g. fleetdrill-node:dev from make image-node) instead of building one")
	f.StringVar(&l.comparePath, "compare", "", "with --live: write the twin-versus-live comparison as JSON to `FILE`")
	f.BoolVar(&l.noTwin, "no-twin", false, "with --live: skip the twin run and the comparison")
	f.BoolVarP(&l.verbose, "verbose", "v", false, "with --live: log the harness's progress to stderr")
}

func (l *liveFlags) changed(cmd *cobra.Command) bool {
	for _, name := range []string{"speed", "replicas", "image", "compare", "no-twin"} {
		if cmd.Flags().Changed(name) {
			return true
		}
	}
	return false
}

func runLive(cmd *cobra.Command, name string, sets []string, jsonPath string, l liveFlags) error {
	stderr := cmd.ErrOrStderr()
	log := slog.New(slog.DiscardHandler)
	if l.verbose {
		log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	res, err := liverun.Run(cmd.Context(), liverun.Options{Scenario: name, Sets: sets, Speed: l.speed,
		Replicas: l.replicas, Image: l.image, NoTwin: l.noTwin, Logger: log})
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("run %s --live: %w", name, err)}
	}
	if jsonPath != "" {
		b, err := res.Live.JSON()
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonPath, b, 0o644); err != nil {
			return &exitError{code: exitInvalid, err: fmt.Errorf("--json: %w", err)}
		}
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "live replay at speed %g: %.1f s of wall time\n", res.Speed, res.WallS)
	if err := report.Text(out, res.Live); err != nil {
		return err
	}
	if res.Comparison != nil {
		fmt.Fprintln(out, "\ntwin versus live (error = (live - twin) / live):")
		if err := res.Comparison.Text(out); err != nil {
			return err
		}
		if l.comparePath != "" {
			b, err := json.MarshalIndent(res.Comparison, "", "  ")
			if err != nil {
				return err
			}
			if err := os.WriteFile(l.comparePath, append(b, '\n'), 0o644); err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("--compare: %w", err)}
			}
		}
	}
	repro := "fleetdrill run " + name + " --live --speed " + fmt.Sprint(res.Speed)
	for _, s := range sets {
		repro += " --set " + shell.Quote(s)
	}
	return failedExpectations(res.Live, repro)
}
