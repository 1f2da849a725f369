package reqengine

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// world is a driver's side of a scaled pool that writes down what it is
// told; its instances answer at once when instant (the twin's), later
// otherwise (a live driver's).
type world struct {
	instant bool
	calls   []string
	acq     []faults.Spec
}

func (w *world) Start(k int) bool {
	w.calls = append(w.calls, fmt.Sprint("start ", k))
	return w.instant
}
func (w *world) Routable(k int)             { w.calls = append(w.calls, fmt.Sprint("routable ", k)) }
func (w *world) Released(k int)             { w.calls = append(w.calls, fmt.Sprint("released ", k)) }
func (w *world) Gone(k int)                 { w.calls = append(w.calls, fmt.Sprint("gone ", k)) }
func (w *world) Acquisition() []faults.Spec { return w.acq }
func (w *world) Quiet() bool                { return false }
func (w *world) Event(ev sched.ScalerEvent) { w.calls = append(w.calls, ev.Kind) }

// scaled returns a scaled pool "a" of three replicas (one serving) on a
// core whose pool "b" has two fixed replicas at the same provider.
func scaled(t *testing.T, w *world) (*sched.Core, *Scaling, *ScaledPool) {
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
	x := NewScaling(sc, func(int) int { return 2 })
	return core, x, x.Add(core, 0, []int{0, 1, 2}, 1, s, w)
}

// A replica's life as the engine carries it out on the core: present and
// not routable while it starts, routable once it has loaded and (live)
// its instance answers, absent once released.
func TestScaledPoolLife(t *testing.T) {
	for _, instant := range []bool{true, false} {
		t.Run(fmt.Sprint("instant=", instant), func(t *testing.T) {
			w := &world{instant: instant}
			core, _, p := scaled(t, w)
			require.True(t, p.IsUp(0), "the starting replica runs")
			p.now = time.Second
			p.Provisioned(1)
			require.True(t, core.Present(1))
			require.False(t, core.ReplicaReady(1), "not routable while it loads")
			require.Equal(t, instant, p.IsUp(1))
			p.Loaded(1)
			if !instant {
				require.False(t, core.ReplicaReady(1), "loaded, but its instance does not answer yet")
				require.Equal(t, []string{"start 1"}, w.calls)
				p.Up(2*time.Second, 1)
			}
			require.True(t, core.ReplicaReady(1))
			require.Equal(t, []string{"start 1", "routable 1"}, w.calls)
			p.Released(1)
			require.False(t, core.Present(1))
			p.Gone(1)
			require.False(t, p.IsUp(1))
			require.Equal(t, []string{"start 1", "routable 1", "released 1", "gone 1"}, w.calls)
		})
	}
}

// What the provider offers under a quota-cap: its GPUs less what every
// pool of the provider holds, the scaled pool's granted replicas and the
// fixed pool's.
func TestScaledPoolOffer(t *testing.T) {
	w := &world{instant: true}
	_, x, p := scaled(t, w)
	require.Equal(t, sched.NoFaults, p.Offer())
	w.acq = []faults.Spec{{Kind: faults.QuotaCap, GPUs: 40, Target: faults.Target{Provider: "cloud"}}}
	require.Equal(t, 1, x.Held(0))
	require.Equal(t, 2, x.Held(1))
	require.Equal(t, 40-(1+2)*8, p.Offer().FreeGPUs)
}

// The scalers' clock starts at the driver's origin: a sync due 15 s into
// it is due 15 s after the origin on the driver's clock, and its events
// are timed on the scalers' clock.
func TestScalingClock(t *testing.T) {
	w := &world{instant: true}
	_, x, p := scaled(t, w)
	x.Start(time.Minute)
	at, ok := x.NextAt()
	require.True(t, ok)
	require.Equal(t, time.Minute+15*time.Second, at)
	require.Equal(t, 5*time.Second, x.Clock(time.Minute+5*time.Second))
	x.Advance(at)
	require.Equal(t, 15*time.Second, p.Now())
	at2, _ := x.NextAt()
	require.Equal(t, at+15*time.Second, at2, "the next sync, a period later")
}
