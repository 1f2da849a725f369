package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/liverun"
	"github.com/fleetdrill/fleetdrill/internal/report"
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
	backends    []string
	disrupt     string
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
	f.StringArrayVar(&l.backends, "backend", nil, "with --live: serve a pool from an external endpoint, `POOL=KIND+URL` per replica (KIND vllm, sglang, tgi, openai or fleetdrill; repeatable): real servers fleetdrill never starts or stops, in real time (--speed 1); the other pools are emulated")
	f.StringVar(&l.disrupt, "allow-disrupt", "", "with --live and --backend: `CMD` that stops and starts an external endpoint, run as sh -c with FLEETDRILL_ACTION=stop|start, FLEETDRILL_POOL and FLEETDRILL_BACKEND (node-loss faults on external pools need it)")
}

func (l *liveFlags) changed(cmd *cobra.Command) bool {
	for _, name := range []string{"speed", "replicas", "image", "compare", "no-twin", "backend", "allow-disrupt"} {
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
	var external map[string][]string
	if len(l.backends) > 0 {
		external = map[string][]string{}
		for _, b := range l.backends {
			if err := gateway.AddBackend(external, b); err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("run %s --live: %w", name, err)}
			}
		}
		if !cmd.Flags().Changed("speed") {
			l.speed = 0 // liverun runs external endpoints in real time
		}
	}
	// Minutes of image build, fleet start and replay are never silent on
	// a terminal; piped or in CI, only the report prints.
	var progress func(string)
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) && !l.verbose {
		start := time.Now()
		progress = func(stage string) {
			fmt.Fprintf(stderr, "live [%s]: %s…\n", time.Since(start).Round(time.Second), stage)
		}
	}
	res, err := liverun.Run(cmd.Context(), liverun.Options{Scenario: name, Sets: sets, Speed: l.speed,
		Replicas: l.replicas, Image: l.image, NoTwin: l.noTwin, Logger: log, Backends: external, AllowDisrupt: l.disrupt,
		Progress: progress})
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
	for _, p := range slices.Sorted(maps.Keys(res.External)) {
		fmt.Fprintf(out, "pool %s served by external endpoints (real, not emulated): %s\n", p, strings.Join(res.External[p], " "))
	}
	// What the servers take, where they publish it: a limit below the
	// scenario's is the one the gateway and the twin routed by.
	for _, l := range res.Limits {
		fmt.Fprintln(out, l)
	}
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
	// The live run as it ran: its speed, fleet size, image and endpoints.
	extra := []string{"--live", "--speed", strconv.FormatFloat(res.Speed, 'g', -1, 64)}
	if l.replicas > 0 {
		extra = append(extra, "--replicas", strconv.Itoa(l.replicas))
	}
	if l.image != "" {
		extra = append(extra, "--image", l.image)
	}
	for _, b := range l.backends {
		extra = append(extra, "--backend", b)
	}
	if l.disrupt != "" {
		extra = append(extra, "--allow-disrupt", l.disrupt)
	}
	return failedExpectations(res.Live, commandLine(runArgs(name, sets, res.Live.Seed, extra...)...))
}
