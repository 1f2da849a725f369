package liverun

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin"
)

// gameDays are the library's game days as a live run takes them, squeezed
// into five minutes: each fault moved into the first four, its kind and
// targets kept. apart names those whose counts do not yet agree, and why
// (docs/live.md, "Twin versus live"); the rest must.
var gameDays = []struct {
	name  string
	sets  []string
	apart string
}{
	{name: "gameday-regional-outage", sets: []string{`faults=["regional-outage region=eu-west at=1m for=3m"]`}},
	{name: "gameday-quota-exhaustion", sets: []string{`faults=["quota-exhaustion provider=gpu-cloud-a at=1m for=2m"]`}},
	{name: "gameday-model-retirement", sets: []string{`faults=["model-retirement model=llama-3.1-70b at=2m notice=1m"]`}},
	{name: "gameday-canary-rollback", sets: []string{"workload.azure-conv.trace.duration=5m", "canaries.neocloud.start=30s",
		`faults=["brownout pool=neo-h100 at=2m for=2m fail=0.2 latency=800ms"]`}},
	{name: "gameday-driver-upgrade", sets: []string{`faults=["driver-upgrade pool=use-h100-8b-a at=1m driver=570.124.06 runtime=vllm-0.8.5", "driver-upgrade pool=use-h100-8b-b at=3m for=1m driver=535.104.05"]`}},
	{name: "gameday-full", sets: []string{"workload.azure-conv.trace.duration=5m",
		`faults=["brownout region=eu-west at=30s for=1m fail=0.05 latency=1500ms", "regional-outage region=us-east at=2m for=1m", "node-loss pool=usw-h100-8b at=3m30s for=1m count=1"]`}},
	{name: "gameday-spot-loss", sets: []string{"jobs=[]", `faults=["node-loss pool=use-h100-spot at=1m for=2m count=4"]`}},
	{name: "gameday-autoscale-stockout", sets: []string{`faults=["regional-outage region=us-east at=1m for=3m", "stockout pool=usw-h100-8b at=1m for=1m grant=0.25", "stockout pool=usw-h100-8b at=2m"]`}},
	// The P/D game day's faults one by one (the live pulls, the link's
	// failures and its degradation by the decode nodes), then together.
	{name: "gameday-pd-link", sets: []string{`faults=["kv-transfer-failure pool=use-h100-decode at=30s for=30s fail=1"]`},
		apart: "live varies from run to run: completed 2,389 and failed 74 as the twin in three runs, 2,394 and 69 in the fourth (make test's alone group): the order in which the handlers of requests failed at the same instant reach the engine decides which retries land after the window"},
	{name: "gameday-pd-link", sets: []string{`faults=["link-degraded pool=use-h100-decode at=1m30s for=1m30s bandwidth=0.5"]`}},
	{name: "gameday-pd-link", sets: []string{`faults=["kv-transfer-failure pool=use-h100-decode at=30s for=30s fail=1", "link-degraded pool=use-h100-decode at=1m30s for=1m30s bandwidth=0.5", "node-loss pool=use-h100-prefill at=3m for=1m percent=100"]`},
		apart: "each fault alone agrees within one (bar retries); together, live varies from run to run (completed 2194 and 2199 against the twin's 2207, timed out 23 and 14 against 5, refused 2 and 3 against 10): a request's live pull on a degraded link meets the prefill pool's loss at the instant its goroutines reach the engine"},
	{name: "default", sets: []string{`faults=["regional-outage region=us-east at=1m for=2m"]`},
		apart: "live varies from run to run with the order in which the handlers of requests cut at the outage's onset reach the engine: over six runs, twice within one of the twin, three times 5 apart (failures and retries, then refusals against time-outs), once 22 apart (8 refused as jurisdiction-unavailable)"},
	{name: "gameday-cpu-fallback", sets: []string{`faults=["node-loss pool=use-h100-8b at=1m for=2m percent=100"]`},
		apart: "deadline-infeasible refusals against time-outs while the CPU pool carries the load (±13)"},
}

// TestGameDayCountsBothDrivers runs each library game day through the twin
// and through a whole live run in this process (the gateway, emulated
// nodes, the replay; testing/synctest's clock) and requires their request
// counts by outcome within one of each other, as the goal has it
// for `run --live`. gameday-retry-storm is left out: 13,500 requests, and
// its counts are apart (a retry storm amplifies every difference of order).
func TestGameDayCountsBothDrivers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a live run per game day")
	}
	if raceDetector {
		t.Skip("runs without the race detector (make test runs it in its last group)")
	}
	base := []string{"duration=5m", "warmup=0s", "drain=2m", "expect=[]"}
	for _, gd := range gameDays {
		t.Run(gd.name, func(t *testing.T) {
			opts := Options{Scenario: gd.name, Sets: append(append([]string{}, base...), gd.sets...), InProcess: true, NoTwin: true}
			_, sc, err := liveScenario(opts)
			require.NoError(t, err)
			tw, err := twin.Run(context.Background(), sc, twin.Options{})
			require.NoError(t, err)
			var lv *twin.Report
			synctest.Test(t, func(t *testing.T) {
				res, err := Run(context.Background(), opts)
				require.NoError(t, err)
				lv = res.Live
			})
			a, b := tw.Requests, lv.Requests
			require.Equal(t, a.Arrived, b.Arrived, "arrived")
			t.Logf("twin %s", countsLine(a))
			t.Logf("live %s", countsLine(b))
			if gd.apart != "" {
				t.Logf("apart, not checked: %s", gd.apart)
				return
			}
			for _, c := range []struct {
				what       string
				twin, live uint64
			}{
				{"completed", a.Completed, b.Completed}, {"rejected", a.Rejected, b.Rejected}, {"failed", a.Failed, b.Failed},
				{"timed out", a.TimedOut, b.TimedOut}, {"cancelled", a.Cancelled, b.Cancelled}, {"in flight", a.InFlightAtEnd, b.InFlightAtEnd},
			} {
				require.InDelta(t, float64(c.twin), float64(c.live), 1, "%s: twin %d, live %d", c.what, c.twin, c.live)
			}
		})
	}
}

func countsLine(c twin.Counts) string {
	return fmt.Sprintf("arrived %d: completed %d, rejected %d, failed %d, timed out %d, cancelled %d, in flight %d; retries %d",
		c.Arrived, c.Completed, c.Rejected, c.Failed, c.TimedOut, c.Cancelled, c.InFlightAtEnd, c.Retries)
}

// Migration is refused before anything starts, by name: the live gateway
// cannot splice a second answer onto a stream its client is reading.
func TestMigrationRefusedLive(t *testing.T) {
	_, err := Run(context.Background(), Options{Scenario: "default", Sets: []string{"policy.retries.migration_limit=1"}, InProcess: true, NoTwin: true})
	require.ErrorContains(t, err, "cannot migrate a cut stream")
}
