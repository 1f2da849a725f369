package scorecard

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLive replays the latency stage on the live harness. It skips, loudly,
// without a Docker engine, and unless FLEETDRILL_LIVE_TESTS=1 (it builds a
// node image and runs containers: minutes, not seconds).
func TestLive(t *testing.T) {
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("SKIPPING LIVE SCORECARD TEST: `docker info` failed (%v): no Docker engine, so no containers can run.\n%s", err, out)
	}
	if os.Getenv("FLEETDRILL_LIVE_TESTS") != "1" {
		t.Skip("SKIPPING LIVE SCORECARD TEST: set FLEETDRILL_LIVE_TESTS=1 to build the node image and run containers")
	}
	c, err := Run(t.Context(), Options{Scenario: "default", Provider: "gpu-cloud-b", Live: true,
		Sets: []string{"duration=2m", "warmup=30s", "drain=1m"}})
	require.NoError(t, err)
	require.NotNil(t, c.Latency.Live)
	require.NotEmpty(t, c.Latency.Live.Classes)
	require.Contains(t, c.Markdown(), "Live replay")
}
