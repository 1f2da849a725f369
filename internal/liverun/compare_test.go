package liverun

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin"
)

// The comparison's text: the latency table always; the faults', canaries'
// and autoscaling tables after a blank line, and only with rows; an
// autoscaled pool's timeline says whether it agrees, and where not, why.
func TestComparisonText(t *testing.T) {
	c := &Comparison{
		Latency: []LatencyRow{{Class: "interactive", Metric: "ttft", Quantile: "p99", TwinS: 2, LiveS: 2.5}},
		Counts:  []CountRow{{"arrived", 10, 10}},
	}
	var b strings.Builder
	require.NoError(t, c.Text(&b))
	out := b.String()
	require.Contains(t, out, "interactive")
	require.NotContains(t, out, "fault")
	require.NotContains(t, out, "canary")
	require.NotContains(t, out, "autoscaled pool")
	require.True(t, strings.HasSuffix(out, "\nrequests twin/live: arrived 10/10\n"), out)

	c.Faults = []FaultRow{{Fault: "regional-outage(us-east)", TwinDetectS: 5, LiveDetectS: twin.Seconds(-1)}}
	c.Autoscaling = []AutoscaleRow{
		{Pool: "a", TwinChanges: 4, Agree: true, MaxOffsetS: 0.002},
		{Pool: "b", Diverge: "twin 2 changes, live 3"},
	}
	b.Reset()
	require.NoError(t, c.Text(&b))
	out = b.String()
	require.Contains(t, out, "\n\n")
	require.Contains(t, out, "5.0s / never")
	require.Contains(t, out, "4 changes agree within 0.002s")
	require.Contains(t, out, "differ: twin 2 changes, live 3")
	require.NotContains(t, out, "canary")
}
