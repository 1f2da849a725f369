package liverun

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin"
)

// TestScriptsBothDrivers runs the scripts in testdata/both twice: once
// with the twin driving the request engine (twin.Run, virtual time), once
// with the live gateway driving it (a whole live run in this process: the
// gateway, an emulated node per replica and the replay, over
// internal/inproc, inside a testing/synctest bubble whose fake clock is
// the wall clock the gateway reads). Both must print the file's expected
// output: what a script shows of the engine's decisions — the requests'
// outcomes, retries, deferrals and fallbacks, where they went, the
// engine's entries on the timeline — is one engine's, whichever driver
// carries it out.
//
// Directives:
//
//	run scenario=NAME
//	<path=value, one per line: fleetdrill run --set>
//
// Runs the scenario (the live fleet's version of it: see liveScenario)
// and prints its report's summary (printSummary). To regenerate the
// expected output from the twin: go test ./internal/liverun -run
// TestScriptsBothDrivers/twin -rewrite; then the gateway's half must
// agree.
func TestScriptsBothDrivers(t *testing.T) {
	for _, driver := range []string{"twin", "gateway"} {
		t.Run(driver, func(t *testing.T) {
			if driver == "gateway" && testing.Short() {
				t.Skip("-short: the gateway's half runs a live run per directive")
			}
			datadriven.Walk(t, "testdata/both", func(t *testing.T, path string) {
				if driver == "gateway" && raceDetector && (strings.Contains(path, "gameday") || strings.Contains(path, "scaling")) {
					// A whole game day, or 8,800 requests through an
					// autoscaled fleet, is minutes of CPU under the race
					// detector, beside make test's raced packages; make
					// test runs them again in its last group, without it.
					t.Skip("a long script: runs without the race detector")
				}
				datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
					return runBoth(t, td, driver)
				})
			})
		})
	}
}

func runBoth(t *testing.T, td *datadriven.TestData, driver string) string {
	if td.Cmd != "run" {
		td.Fatalf(t, "unknown directive %q (want run)", td.Cmd)
	}
	var name string
	td.ScanArgs(t, "scenario", &name)
	var sets []string
	for _, l := range strings.Split(td.Input, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			sets = append(sets, l)
		}
	}
	opts := Options{Scenario: name, Sets: sets, InProcess: true, NoTwin: true}
	var rep *twin.Report
	switch driver {
	case "twin":
		_, sc, err := liveScenario(opts)
		require.NoError(t, err)
		rep, err = twin.Run(context.Background(), sc, twin.Options{})
		require.NoError(t, err)
	case "gateway":
		synctest.Test(t, func(t *testing.T) {
			res, err := Run(context.Background(), opts)
			require.NoError(t, err)
			rep = res.Live
		})
	}
	var b strings.Builder
	printSummary(&b, rep)
	return b.String()
}

// printSummary prints what a run's report says of the engine's decisions.
func printSummary(b *strings.Builder, rep *twin.Report) {
	c := rep.Requests
	fmt.Fprintf(b, "requests: arrived %d, admitted %d, completed %d, rejected %d, failed %d, timed out %d, cancelled %d, in flight %d\n",
		c.Arrived, c.Admitted, c.Completed, c.Rejected, c.Failed, c.TimedOut, c.Cancelled, c.InFlightAtEnd)
	fmt.Fprintf(b, "on the way: retries %d, deferred %d, fallbacks %d\n", c.Retries, c.Deferred, c.Fallbacks)
	for _, why := range slices.Sorted(maps.Keys(rep.Rejections)) {
		if n := rep.Rejections[why]; n > 0 {
			fmt.Fprintf(b, "rejected %s: %d\n", why, n)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(rep.Pools)) {
		fmt.Fprintf(b, "pool %s: dispatched %d\n", p, rep.Pools[p].Dispatched)
	}
	for _, name := range slices.Sorted(maps.Keys(rep.Canaries)) {
		cr := rep.Canaries[name]
		sh := cr.Shadow
		fmt.Fprintf(b, "canary %s: %s at share %g; shadow copies sent %d, completed %d, failed %d, shed %d, cancelled %d, in flight %d\n",
			name, cr.State, cr.Share, sh.Sent, sh.Completed, sh.Failed, sh.Shed, sh.Cancelled, sh.InFlightAtEnd)
	}
	// Entries at one instant have no order of their own: the twin writes
	// them in its events' order, the gateway as its goroutines reach
	// them (probes of a round, a fault's end and the next one's start).
	// They print sorted.
	tl := slices.Clone(rep.Timeline)
	slices.SortStableFunc(tl, func(a, b twin.TimelineEvent) int {
		if a.TS != b.TS {
			return cmp.Compare(a.TS, b.TS)
		}
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Detail, b.Detail))
	})
	for _, ev := range tl {
		fmt.Fprintf(b, "%v %s: %s\n", time.Duration(ev.TS*float64(time.Second)).Round(time.Second), ev.Kind, ev.Detail)
	}
}
