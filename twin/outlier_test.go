package twin

import (
	"context"
	"testing"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/stretchr/testify/require"
)

// TestLatencyFaultDetectedByEjection: a latency-only fault (no errors, so
// no breaker opens) is detected by outlier ejection within three probe
// intervals, shows on the timeline, and goes undetected with ejection off.
// Under lowest-latency routing the pool gets traffic back after it.
func TestLatencyFaultDetectedByEjection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sets     []string
		detected bool
	}{
		{"least-loaded", nil, true},
		{"lowest-latency", []string{"policy.routing.strategy=lowest-latency"}, true},
		{"ejection off", []string{"policy.health.outlier.disabled=true"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets := append([]string{"duration=6m", "warmup=1m",
				`faults=["latency region=eu-west at=2m for=1m latency=1500ms"]`}, tc.sets...)
			sc, err := scenarios.LoadNamedWithSets("default", sets)
			require.NoError(t, err)
			rep, err := Run(context.Background(), sc, Options{})
			require.NoError(t, err)
			f := rep.Faults["latency(eu-west)"]
			require.NotNil(t, f, "faults: %v", rep.Faults)
			var ejected int
			for _, e := range rep.Timeline {
				if e.Kind == "ejected" {
					ejected++
				}
			}
			if !tc.detected {
				require.Equal(t, Never, f.TimeToDetectS)
				require.Zero(t, ejected)
				return
			}
			probe := sc.Policy.Health.ProbeInterval.D().Seconds()
			require.GreaterOrEqual(t, f.TimeToDetectS, 0.0, "never detected")
			require.Less(t, f.TimeToDetectS, 3*probe, "detected after more than three probe intervals")
			require.Positive(t, ejected, "no ejection on the timeline")
			require.GreaterOrEqual(t, f.TimeToRecoverS, 0.0, "no affected replica served again after the fault")
		})
	}
}
