package sched

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scalerEnv is a driver for a Scaler's tests: a fixed queue, nothing in
// flight, the acquisition faults of offer, and what the Scaler did.
type scalerEnv struct {
	queued  int
	offer   Offer
	now     func() time.Duration
	s       *Scaler
	events  []ScalerEvent
	started []int
}

func (e *scalerEnv) Measure() (float64, int, time.Duration) { return 0, e.queued, 0 }
func (e *scalerEnv) Inflight(int) int                       { return 0 }
func (e *scalerEnv) Offer() Offer                           { return e.offer }
func (e *scalerEnv) Quiet() bool                            { return false }
func (e *scalerEnv) Provisioned(k int)                      { e.started = append(e.started, k) }
func (e *scalerEnv) Loaded(k int)                           { e.s.Serving(e.now(), k, e) }
func (e *scalerEnv) Released(int)                           {}
func (e *scalerEnv) Gone(int)                               {}
func (e *scalerEnv) Event(ev ScalerEvent)                   { e.events = append(e.events, ev) }

// seq is a deterministic stand-in for the acquisition stream.
func seq() func() float64 {
	x := 0.0
	return func() float64 { x = math.Mod(x+0.37, 1); return x }
}

func newTestScaler(t *testing.T) *Scaler {
	t.Helper()
	s, err := NewScaler(ScalerConfig{Pool: "p",
		Policy:   AutoscalePolicy{Metric: MetricQueue, Target: 4, Min: 2, Max: 10, SyncPeriod: 15 * time.Second, DownStabilization: 5 * time.Minute},
		Replicas: 2, Max: 10, BurstCap: -1, ColdStart: 12 * time.Second, RetryAfter: 30 * time.Second, MaxBatch: 8,
		Delay: func() time.Duration { return 36 * time.Second }, End: 10 * time.Minute, Draw: seq()}, 10*time.Minute)
	require.NoError(t, err)
	return s
}

// A driver that advances a Scaler late (the live gateway, its timer
// firing some milliseconds after the instant) gets the decisions, draws
// and series of one that advances it exactly at NextAt (the twin): syncs,
// grants and provisioning fall on their own instants, and only a
// replica's serving waits for the driver. Under a stockout granting a
// quarter, the first ask gets 2 of 8, and each retry a quarter of the rest.
func TestScalerAdvancedLateDecidesAlike(t *testing.T) {
	run := func(late time.Duration) (*Scaler, *scalerEnv) {
		s := newTestScaler(t)
		var now time.Duration
		env := &scalerEnv{queued: 200, offer: Offer{Stocked: true, Grant: 0.25, Factor: 1, FreeGPUs: math.MaxInt},
			now: func() time.Duration { return now }, s: s}
		for {
			at := s.NextAt()
			if at < 0 || at > 5*time.Minute {
				break
			}
			now = at + late
			s.Advance(now, env)
		}
		return s, env
	}
	exact, eenv := run(0)
	late, lenv := run(300 * time.Millisecond)

	require.Equal(t, eenv.started, lenv.started, "the same replicas provisioned")
	et, lt := exact.Tally(), late.Tally()
	var grants []string
	for _, ev := range eenv.events {
		if ev.Kind == "grant" {
			grants = append(grants, ev.Detail)
		}
	}
	require.NotEmpty(t, grants)
	require.Equal(t, "pool p: 2 of 8 replicas granted (0 reserved)", grants[0], "a quarter of 8")
	require.Equal(t, et.Granted, lt.Granted)
	require.Equal(t, et.RefusedBy, lt.RefusedBy)
	require.Positive(t, et.RefusedBy[RefusedStockout])
	require.Len(t, lt.Series, len(et.Series))
	for i := range et.Series {
		e, l := et.Series[i], lt.Series[i]
		require.InDelta(t, e.TS, l.TS, 0.3+1e-9, "change %d", i)
		e.TS, l.TS = 0, 0
		require.Equal(t, e, l, "change %d", i)
	}
	// The first scale-up at the first sync, its grants up after the delay
	// and serving after the load.
	require.Equal(t, 15.0, et.Series[1].TS)
	require.Equal(t, ReplicaCount{TS: 15, Requested: 10, Provisioning: 2, Serving: 2}, et.Series[1])
	require.Equal(t, 48*time.Second, et.ToServing[0], "asked at 15 s, up at 51 s, serving at 63 s")
	require.Len(t, lt.ToServing, len(et.ToServing))
	for i, d := range lt.ToServing {
		require.Equal(t, et.ToServing[i]+300*time.Millisecond, d, "the late driver serves late, by its lateness")
	}
}

// A scale-down gives back first what has not arrived: replicas granted
// but not yet up are never provisioned (a driver starts nothing for them),
// and only then are serving ones released.
func TestScalerReleasesWhatHasNotArrivedFirst(t *testing.T) {
	s, err := NewScaler(ScalerConfig{Pool: "p",
		Policy:   AutoscalePolicy{Metric: MetricQueue, Target: 4, Min: 2, Max: 10, SyncPeriod: 15 * time.Second},
		Replicas: 2, Max: 10, BurstCap: -1, ColdStart: 12 * time.Second, MaxBatch: 8,
		Delay: func() time.Duration { return 36 * time.Second }, End: 10 * time.Minute, Draw: seq()}, 10*time.Minute)
	require.NoError(t, err)
	var now time.Duration
	env := &scalerEnv{queued: 200, offer: NoFaults, now: func() time.Duration { return now }, s: s}
	now = 15 * time.Second
	s.Advance(now, env)
	require.Equal(t, ReplicaCount{TS: 15, Requested: 10, Provisioning: 8, Serving: 2}, s.Counts(now))
	env.queued = 0 // the load is gone before the instances are up
	for at := s.NextAt(); at >= 0 && at <= 2*time.Minute; at = s.NextAt() {
		now = at
		s.Advance(now, env)
	}
	require.Equal(t, ReplicaCount{TS: now.Seconds(), Requested: 2, Serving: 2}, s.Counts(now))
	require.Empty(t, env.started, "nothing granted was provisioned: it was given back first")
	require.EqualValues(t, 1, s.Tally().ScaleDowns)
	require.Equal(t, 2, s.Held())
}

// A driver late past a sync does what fell due before the sync first, and
// the sync at its own instant: a scale-down at 30 s gives back the
// replicas granted at 15 s that would have been up at 30.5 s, for the
// late driver as for the exact one; nothing is provisioned, the series
// never goes back in time and nothing is paid for less than nothing.
func TestScalerLateAcrossASync(t *testing.T) {
	run := func(late time.Duration) (*Scaler, *scalerEnv) {
		s, err := NewScaler(ScalerConfig{Pool: "p",
			Policy:   AutoscalePolicy{Metric: MetricQueue, Target: 4, Min: 2, Max: 10, SyncPeriod: 15 * time.Second},
			Replicas: 2, Max: 10, BurstCap: -1, ColdStart: 12 * time.Second, MaxBatch: 8,
			Delay: func() time.Duration { return 15500 * time.Millisecond }, End: 10 * time.Minute, Draw: seq()}, 10*time.Minute)
		require.NoError(t, err)
		var now time.Duration
		env := &scalerEnv{queued: 200, offer: NoFaults, now: func() time.Duration { return now }, s: s}
		for at := s.NextAt(); at >= 0 && at <= 2*time.Minute; at = s.NextAt() {
			now = at + late
			if at >= 30*time.Second {
				env.queued = 0
			}
			s.Advance(now, env)
		}
		return s, env
	}
	for _, late := range []time.Duration{0, time.Second} {
		s, env := run(late)
		require.Empty(t, env.started, "late %v: the scale-down at 30 s came before the grants were up", late)
		series := s.Tally().Series
		for i := 1; i < len(series); i++ {
			require.GreaterOrEqual(t, series[i].TS, series[i-1].TS, "late %v: the series goes forward", late)
		}
		res, burst, up := s.Paid(2 * time.Minute)
		require.GreaterOrEqual(t, min(res, burst, up), 0.0)
	}
}

// drainingEnv holds every released replica draining (its work never
// finishes) until let go.
type drainingEnv struct {
	scalerEnv
	busy bool
}

func (e *drainingEnv) Inflight(int) int {
	if e.busy {
		return 1
	}
	return 0
}

// A slot still draining is not free: a scale-up while released replicas
// drain asks only for the free slots, and asks for the rest once they are
// gone; nothing is counted granted that was not provisioned.
func TestScalerDrainingSlotsAreNotFree(t *testing.T) {
	s, err := NewScaler(ScalerConfig{Pool: "p",
		Policy:   AutoscalePolicy{Metric: MetricQueue, Target: 4, Min: 1, Max: 4, SyncPeriod: 15 * time.Second},
		Replicas: 4, Max: 4, BurstCap: -1, ColdStart: 0, MaxBatch: 8, End: 10 * time.Minute, Draw: seq()}, 10*time.Minute)
	require.NoError(t, err)
	var now time.Duration
	env := &drainingEnv{scalerEnv: scalerEnv{queued: 0, offer: NoFaults, now: func() time.Duration { return now }}, busy: true}
	env.s = s
	now = 15 * time.Second
	s.Advance(now, env) // 4 → 1: three draining
	require.Equal(t, ReplicaCount{TS: 15, Requested: 1, Serving: 1, Draining: 3}, s.Counts(now))
	env.queued = 100
	now = 30 * time.Second
	s.Advance(now, env) // back to 4, no slot free
	require.Equal(t, 4, s.Requested())
	require.Zero(t, s.Tally().Granted, "nothing granted into a slot still draining")
	env.busy = false
	now = 45 * time.Second
	s.Advance(now, env) // gone, then asked for
	require.EqualValues(t, 3, s.Tally().Granted)
	require.Len(t, env.started, 3)
	require.Equal(t, 4, s.Counts(now).Serving)
}
