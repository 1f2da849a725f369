package twin

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

func loadDefault(t *testing.T, sets ...string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.LoadNamedWithSets("default", append([]string{"duration=6m", "warmup=1m", "drain=2m"}, sets...))
	require.NoError(t, err)
	return sc
}

// A drill with faults injected and ended by hand, run to its end, gives the
// report Run gives for the scenario with the drill's recorded faults:
// byte for byte, outside the run section.
func TestDrillReplaysAsRun(t *testing.T) {
	d, err := NewDrill(loadDefault(t, `faults=["latency region=eu-west at=30s for=1m latency=200ms"]`), Options{})
	require.NoError(t, err)
	d.Advance(97*time.Second + 123456789)
	outage, err := d.Inject("regional-outage region=us-east at=0s")
	require.NoError(t, err)
	require.Equal(t, "regional-outage(us-east)", outage)
	// Snapshots while it runs change nothing.
	for t0 := d.Now(); d.Now() < t0+2*time.Minute; {
		d.Advance(d.Now() + 7*time.Second + 333*time.Millisecond)
		_ = d.Snapshot()
	}
	require.NoError(t, d.EndFault(outage))
	quota, err := d.Inject("quota-exhaustion provider=gpu-cloud-b at=0s for=45s")
	require.NoError(t, err)
	for !d.Done() {
		d.Advance(d.Now() + 10*time.Second)
		_ = d.Snapshot()
	}
	drillRep, err := d.Report()
	require.NoError(t, err)
	recorded := d.Recorded()
	require.Len(t, recorded, 3)
	t.Logf("recorded: %q", recorded)

	sc := loadDefault(t, "faults="+yamlList(recorded))
	runRep, err := Run(context.Background(), sc, Options{})
	require.NoError(t, err)
	drillRep.Run, runRep.Run = RunInfo{}, RunInfo{}
	a, err := drillRep.JSON()
	require.NoError(t, err)
	b, err := runRep.JSON()
	require.NoError(t, err)
	require.Equal(t, string(b), string(a))
	require.Contains(t, drillRep.Faults, outage)
	require.Contains(t, drillRep.Faults, quota)
	require.GreaterOrEqual(t, drillRep.Faults[outage].TimeToDetectS, 0.0, "the outage was detected")
}

func yamlList(items []string) string {
	out := "["
	for i, s := range items {
		if i > 0 {
			out += ", "
		}
		out += `"` + s + `"`
	}
	return out + "]"
}

// The snapshot is the router's view: an outage shows as open breakers once
// detected, routes move and skip reasons say why; recent figures follow.
func TestDrillSnapshot(t *testing.T) {
	d, err := NewDrill(loadDefault(t), Options{})
	require.NoError(t, err)
	d.Advance(2 * time.Minute)
	s := d.Snapshot()
	require.Equal(t, 2*time.Minute, s.Now)
	require.Len(t, s.Regions, 2)
	for _, r := range s.Regions {
		for _, p := range r.Pools {
			require.Equal(t, "healthy", p.Health, p.Name)
			require.Equal(t, p.Replicas, p.Up, p.Name)
		}
	}
	require.Positive(t, s.Classes[0].Completed)
	require.Positive(t, s.Classes[0].TTFTP99)
	_, err = d.Inject("regional-outage region=eu-west at=0s")
	require.NoError(t, err)
	d.Advance(d.Now() + 30*time.Second)
	s = d.Snapshot()
	var eu RegionState
	for _, r := range s.Regions {
		if r.Name == "eu-west" {
			eu = r
		}
	}
	for _, p := range eu.Pools {
		require.Equal(t, "down", p.Health, "the router has opened every breaker of %s", p.Name)
		require.Equal(t, p.Replicas, p.Open)
	}
	var bank RouteState
	for _, m := range s.Models {
		if m.Name == "llama-3.1-8b" {
			for _, rt := range m.Routes {
				if rt.Tenant == "bank-eu" {
					bank = rt
				}
			}
		}
	}
	require.Empty(t, bank.Served, "nothing in the EU can serve bank-eu")
	require.Contains(t, bank.Skipped, ReasonCount{"circuit open", 1})
	require.Contains(t, bank.Skipped, ReasonCount{"outside jurisdiction eu", 1})
	require.True(t, s.Faults[0].Active)
	require.GreaterOrEqual(t, s.Faults[0].Detect, time.Duration(0))
	require.True(t, s.Faults[0].Injected)
	require.Error(t, d.EndFault("no-such(fault)"))
}

// While a region is dark, the requests it holds have not completed, so the
// completed requests' TTFT p99 stays low; the p99 that counts the waiting
// ones at their age breaches within seconds of the outage and the oldest
// waiting request's age grows, and once the region is back both settle.
// The deadline check is off: with it, the dark region's requests are
// refused at once rather than held.
func TestSnapshotLatencyCountsTheWaiting(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("eu-residency", []string{"duration=10m", "warmup=0s", "policy.admission.deadline_check=false"})
	require.NoError(t, err)
	d, err := NewDrill(sc, Options{})
	require.NoError(t, err)
	d.Advance(2 * time.Minute)
	class := func() ClassState {
		for _, c := range d.Snapshot().Classes {
			if c.SLOTTFT > 0 {
				return c
			}
		}
		t.Fatal("no class with a TTFT objective")
		return ClassState{}
	}
	before := class()
	require.LessOrEqual(t, before.TTFTP99Now(), before.SLOTTFT, "healthy: %+v", before)
	_, err = d.Inject("regional-outage region=eu-west at=0s for=3m")
	require.NoError(t, err)
	d.Advance(d.Now() + 30*time.Second)
	during := class()
	require.Positive(t, during.Waiting, "the dark region holds requests")
	require.Greater(t, during.OldestWaiting, during.SLOTTFT, "the oldest has waited past the objective")
	require.Greater(t, during.TTFTP99Waiting, during.SLOTTFT, "the p99 counting them breaches while it happens: %+v", during)
	d.Advance(d.Now() + 4*time.Minute)
	after := class()
	require.Less(t, after.OldestWaiting, during.OldestWaiting, "after recovery nothing waits that long")
}
