package liverun

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin"
)

// TestLostNodesLoadBeforeServing: lost nodes come back empty and serve
// only after their pool's cold start, live as in the twin
// (twin/faults.go restartReplica). Before, a lost node served about two
// seconds after the fault's end live. A whole in-process live run in a
// synctest bubble: no wall-clock margin. The cold start is 55s, not 1m:
// a load that ends on a probe round's instant (every 10s from the start)
// ties with the probe, whose order the gateway's goroutines do not fix
// (the probe may find the replica still loading and the breaker close a
// round later), where the twin's event order does.
func TestLostNodesLoadBeforeServing(t *testing.T) {
	sets := []string{"duration=4m", "warmup=0s", "drain=1m", "jobs=[]", "expect=[]", "workload[0].arrivals.rate=4",
		"pools.use-h100-spot.cold_start=55s", "faults=[node-loss pool=use-h100-spot at=30s for=30s count=2]"}
	opts := Options{Scenario: "gameday-spot-loss", Sets: sets, InProcess: true, NoTwin: true}
	recovery := func(rep *twin.Report) float64 {
		require.Len(t, rep.Faults, 1)
		for _, f := range rep.Faults {
			return float64(f.TimeToRecoverS)
		}
		return 0
	}
	_, sc, err := liveScenario(opts)
	require.NoError(t, err)
	tw, err := twin.Run(context.Background(), sc, twin.Options{})
	require.NoError(t, err)
	twinS := recovery(tw)
	require.GreaterOrEqual(t, twinS, 55.0, "the twin: served again after the 55s cold start")
	synctest.Test(t, func(t *testing.T) {
		res, err := Run(context.Background(), opts)
		require.NoError(t, err)
		liveS := recovery(res.Live)
		require.GreaterOrEqual(t, liveS, 55.0, "live: served again only after the 55s cold start (twin: %.3fs)", twinS)
		t.Logf("recovery: live %.3fs, twin %.3fs", liveS, twinS)
		require.InDelta(t, twinS, liveS, 1, "live recovery %.3fs, twin %.3fs", liveS, twinS)
	})
}
