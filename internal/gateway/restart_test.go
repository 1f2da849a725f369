package gateway

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/inproc"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// TestRestartLoadsForTheColdStart: a restarted replica is out of routing
// and not probed for its pool's cold_start of model time
// (reqengine.Restarts, which the twin's restartReplica follows too), then
// routable and probed again; a restart while
// it loads keeps the first load. Its breaker is as the restart found it
// (the twin probes no loading replica). In a synctest bubble: no wall-clock
// margin.
func TestRestartLoadsForTheColdStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		probes := map[string]int{}
		tr := &inproc.Transport{}
		for _, host := range []string{"us.inproc", "eu.inproc"} {
			tr.Handle(host, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				probes[host]++
				mu.Unlock()
				_, _ = w.Write([]byte("ok"))
			}))
		}
		count := func(host string) int {
			mu.Lock()
			defer mu.Unlock()
			return probes[host]
		}
		sc := testScenario(t, "pools.use-h100-8b.cold_start=2m", "policy.health.probe_interval=1s")
		gw, err := New(Config{Scenario: sc, Seed: 1, Transport: tr, Keys: []Key{{"global", keyGlobal}},
			Backends: map[string][]string{
				"use-h100-8b": {"fleetdrill+http://us.inproc"}, "euw-a100-8b": {"fleetdrill+http://eu.inproc"}}})
		require.NoError(t, err)
		defer gw.Close()
		us := gw.ReplicaIndex("use-h100-8b", 0)
		ready := func() (ok bool) {
			gw.View(func(core *sched.Core, _ time.Duration) { ok = core.ReplicaReady(us) })
			return ok
		}
		breaker := func() (st sched.BreakerState) {
			gw.View(func(core *sched.Core, now time.Duration) { st = core.BreakerView(now, us) })
			return st
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		require.True(t, ready())
		require.Positive(t, count("us.inproc"), "probed before the restart")

		got, err := gw.Restart([]int{us})
		require.NoError(t, err)
		require.Equal(t, []int{us}, got)
		synctest.Wait()
		before := count("us.inproc")
		require.False(t, ready(), "loading: out of routing")

		time.Sleep(time.Minute)
		got, err = gw.Restart([]int{us})
		require.NoError(t, err)
		require.Empty(t, got, "a loading replica keeps its first load")
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		require.False(t, ready(), "still loading a millisecond before its cold start ends")
		require.Equal(t, before, count("us.inproc"), "a loading replica is not probed")
		require.Equal(t, sched.Closed, breaker(), "no probe failed on it: its breaker is as the restart found it")

		time.Sleep(time.Millisecond)
		synctest.Wait()
		require.True(t, ready(), "routable once its cold start has passed")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Greater(t, count("us.inproc"), before, "probed again")

		_, err = gw.Restart([]int{99})
		require.ErrorContains(t, err, "replica 99: want in [0, 2)")
	})
}
