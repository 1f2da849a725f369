package reqengine

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// world is a provider's acquisition faults, as a driver says them.
type world struct{ acq []faults.Spec }

func (w *world) Acquisition() []faults.Spec { return w.acq }

// actions transcribes what the engine asked of the instances, and its
// scalers' timeline kinds, then advances.
func actions(e *Engine) []string {
	var out []string
	rd := e.Ready()
	for _, a := range rd.Scaling {
		out = append(out, fmt.Sprint([]string{"", "start", "routable", "released", "gone"}[a.Kind], " ", a.K))
	}
	e.Advance()
	return out
}

// scaled returns a scaled pool "a" of three replicas (one serving) on a
// core whose pool "b" has two fixed replicas at the same provider, and
// the engine running it; instances answer once started when instant.
func scaled(t *testing.T, w *world, instant, held bool) (*Engine, *Scaling, *ScaledPool) {
	t.Helper()
	core, err := sched.New(sched.Config{
		Tenants: []sched.Tenant{{Name: "any", Weight: 1}},
		Classes: []sched.Class{{Name: "interactive", Priority: 1}},
		Models:  []sched.Model{{Name: "m"}},
		Pools: []sched.Pool{
			{Name: "a", PricePerHour: 1, Serves: []bool{true}, KVTokens: []int64{1e6}},
			{Name: "b", PricePerHour: 1, Serves: []bool{true}, KVTokens: []int64{1e6}},
		},
		Replicas: []sched.Replica{{Pool: 0, MaxBatch: 4}, {Pool: 0, MaxBatch: 4, Absent: true}, {Pool: 0, MaxBatch: 4, Absent: true},
			{Pool: 1, MaxBatch: 4}, {Pool: 1, MaxBatch: 4}},
		Policy: "fifo", QueueLimit: 10, Strategy: "least-loaded",
	})
	require.NoError(t, err)
	s, err := sched.NewScaler(sched.ScalerConfig{Pool: "a",
		Policy:   sched.AutoscalePolicy{Metric: sched.MetricQueue, Target: 4, Min: 1, Max: 3, SyncPeriod: 15 * time.Second},
		Replicas: 1, Max: 3, BurstCap: -1, ColdStart: 10 * time.Second, MaxBatch: 4, GPUsPerReplica: 8,
		End: time.Hour, Draw: func() float64 { return 0.5 }}, time.Hour)
	require.NoError(t, err)
	sc := &scenarios.Scenario{Pools: []scenarios.Pool{
		{Name: "a", Provider: "cloud", GPUsPerReplica: 8},
		{Name: "b", Provider: "cloud", GPUsPerReplica: 8},
	}}
	x := NewScaling(sc, func(int) int { return 2 }, held)
	p := x.Add(core, 0, []int{0, 1, 2}, 1, s, w, instant)
	e := NewEngine(core, sched.NewLifecycle(sched.RetryPolicy{}, false), nil, EngineConfig{Scaling: x})
	return e, x, p
}

// A replica's life as the engine carries it out on the core: present and
// not routable while it starts, routable once it has loaded and (live)
// its instance answers, absent once released.
func TestScaledPoolLife(t *testing.T) {
	for _, instant := range []bool{true, false} {
		t.Run(fmt.Sprint("instant=", instant), func(t *testing.T) {
			e, _, p := scaled(t, &world{}, instant, false)
			core := e.Core()
			require.True(t, p.IsUp(0), "the starting replica runs")
			p.now = time.Second
			p.Provisioned(1)
			require.True(t, core.Present(1))
			require.False(t, core.ReplicaReady(1), "not routable while it loads")
			require.Equal(t, instant, p.IsUp(1))
			p.Loaded(1)
			if !instant {
				require.False(t, core.ReplicaReady(1), "loaded, but its instance does not answer yet")
				require.Equal(t, []string{"start 1"}, actions(e))
				e.Step(2*time.Second, Event{Kind: InstanceUp, Replica: 1})
				require.True(t, core.ReplicaReady(1))
				require.Equal(t, []string{"routable 1"}, actions(e))
			} else {
				require.True(t, core.ReplicaReady(1))
				require.Equal(t, []string{"start 1", "routable 1"}, actions(e))
			}
			p.Released(1)
			require.False(t, core.Present(1))
			p.Gone(1)
			require.False(t, p.IsUp(1))
			require.Equal(t, []string{"released 1", "gone 1"}, actions(e))
		})
	}
}

// What the provider offers under a quota-cap: its GPUs less what every
// pool of the provider holds, the scaled pool's granted replicas and the
// fixed pool's.
func TestScaledPoolOffer(t *testing.T) {
	w := &world{}
	_, x, p := scaled(t, w, true, false)
	require.Equal(t, sched.NoFaults, p.Offer())
	w.acq = []faults.Spec{{Kind: faults.QuotaCap, GPUs: 40, Target: faults.Target{Provider: "cloud"}}}
	require.Equal(t, 1, x.Held(0))
	require.Equal(t, 2, x.Held(1))
	require.Equal(t, 40-(1+2)*8, p.Offer().FreeGPUs)
}

// Held scalers wait for StartScaling; their clock starts at the driver's
// origin: a sync due 15 s into it is the engine's wake-up 15 s after the
// origin on the driver's clock, and its events are timed on the scalers'
// clock. Stopped, they are due no more.
func TestScalingClock(t *testing.T) {
	e, x, p := scaled(t, &world{}, true, true)
	require.Equal(t, NoWake, e.WakeAt(), "held: nothing due")
	e.Step(time.Minute, Event{Kind: StartScaling, At: time.Minute})
	at := e.WakeAt()
	require.Equal(t, time.Minute+15*time.Second, at)
	require.Equal(t, 5*time.Second, x.Clock(time.Minute+5*time.Second))
	e.Step(at, Event{Kind: Tick})
	require.Equal(t, 15*time.Second, p.Now())
	require.Equal(t, at+15*time.Second, e.WakeAt(), "the next sync, a period later")
	e.Step(at, Event{Kind: StopScaling})
	require.Equal(t, NoWake, e.WakeAt(), "stopped: nothing due")
}

// An instance that does not start is handed back: the scaler asks for a
// replica under a long queue, the engine asks the driver to start its
// instance (ScaleStart), hears through Step that it failed
// (InstanceFailed), and hands it back (ScaleGone): the replica leaves the
// core and a late answer changes nothing.
func TestInstanceFailedHandsTheReplicaBack(t *testing.T) {
	e, _, p := scaled(t, &world{}, false, false)
	core := e.Core()
	for id := range uint64(20) {
		e.Step(time.Second, Event{Kind: Arrival, Req: &Req{Core: sched.Request{ID: id, Input: 10, Output: 10, Arrived: time.Second}}})
	}
	actions(e)
	for at := e.WakeAt(); at >= 0 && at <= time.Minute; at = e.WakeAt() {
		if slices.Contains(actionsAt(e, at), "start 1") {
			break // the scaler asked for a second replica
		}
	}
	require.True(t, core.Present(1), "provisioned: present, not routable")
	require.False(t, core.ReplicaReady(1))
	e.Step(time.Minute, Event{Kind: InstanceFailed, Replica: 1})
	require.Equal(t, []string{"gone 1"}, actions(e))
	require.False(t, core.Present(1), "handed back")
	require.False(t, p.IsUp(1))
	e.Step(time.Minute, Event{Kind: InstanceUp, Replica: 1})
	require.Empty(t, actions(e), "a late answer of a replica handed back changes nothing")
	require.False(t, core.ReplicaReady(1))
}

// actionsAt steps Tick at at and transcribes what followed.
func actionsAt(e *Engine, at time.Duration) []string {
	e.Step(at, Event{Kind: Tick})
	return actions(e)
}
