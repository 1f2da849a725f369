package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/openmetrics"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// maxOpenMetricsSamples bounds the samples per series a run may write: the
// series are held in memory until the run ends (a day at one second).
const maxOpenMetricsSamples = 100_000

// omFlags are run's --openmetrics flags.
type omFlags struct {
	path  string
	step  time.Duration
	start string
}

func (o *omFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.path, "openmetrics", "", "write the run's operational series in simulated time as OpenMetrics to `FILE`, for promtool tsdb create-blocks-from openmetrics (see docs/metrics.md)")
	f.DurationVar(&o.step, "openmetrics-step", 15*time.Second, "with --openmetrics: sample every `D` of simulated time")
	f.StringVar(&o.start, "openmetrics-start", openmetrics.DefaultStart.Format(time.RFC3339),
		"with --openmetrics: the wall-clock `TIME` (RFC 3339) simulated time 0 is written at")
}

// metrics checks the flags against the scenario and returns the recorder
// to pass to the run and the start instant; nil without --openmetrics.
func (o *omFlags) metrics(cmd *cobra.Command, sc *scenarios.Scenario) (*twin.Metrics, time.Time, error) {
	if o.path == "" {
		if cmd.Flags().Changed("openmetrics-step") || cmd.Flags().Changed("openmetrics-start") {
			return nil, time.Time{}, errors.New("--openmetrics-step and --openmetrics-start need --openmetrics")
		}
		return nil, time.Time{}, nil
	}
	start, err := time.Parse(time.RFC3339, o.start)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("--openmetrics-start: %w", err)
	}
	if o.step < time.Millisecond || o.step%time.Millisecond != 0 {
		return nil, time.Time{}, fmt.Errorf("--openmetrics-step: got %v, want a whole number of milliseconds, at least 1ms", o.step)
	}
	drain := sc.Drain.D()
	if drain == 0 {
		drain = 10 * time.Minute // the twin's default drain
	}
	if n := (sc.Duration.D() + drain) / o.step; n > maxOpenMetricsSamples {
		return nil, time.Time{}, fmt.Errorf("--openmetrics-step: %v makes %d samples per series over %v of simulated time; at most %d (a step of at least %v)",
			o.step, n, sc.Duration.D()+drain, maxOpenMetricsSamples, ((sc.Duration.D()+drain)/maxOpenMetricsSamples).Round(time.Millisecond)+time.Millisecond)
	}
	return &twin.Metrics{Step: o.step}, start, nil
}

// write writes the series to the flag's file and says so on stderr.
func (o *omFlags) write(m *twin.Metrics, start time.Time, stderr io.Writer) error {
	f, err := os.Create(o.path)
	if err != nil {
		return fmt.Errorf("--openmetrics: %w", err)
	}
	if err := openmetrics.Write(f, m, start); err != nil {
		f.Close()
		return fmt.Errorf("--openmetrics: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--openmetrics: %w", err)
	}
	// Series as Prometheus stores them: a histogram is a series per
	// bucket, +Inf, _sum and _count.
	series := 0
	for _, fam := range m.Families {
		per := 1
		if fam.Buckets != nil {
			per = len(fam.Buckets) + 3
		}
		series += per * len(fam.Series)
	}
	end := start.Add(m.Times[len(m.Times)-1])
	fmt.Fprintf(stderr, "openmetrics: %s: %d series, %d instants every %v, %s to %s\n", o.path, series, len(m.Times), o.step,
		start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))
	return nil
}
