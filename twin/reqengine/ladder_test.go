package reqengine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// ladderCore is a core of two replicas whose ladder sheds the deferrable
// batch class when a third of the attempts fail.
func ladderCore(t *testing.T, rungs ...sched.Rung) (*sched.Core, sched.Config) {
	t.Helper()
	cfg := sched.Config{
		Tenants:  []sched.Tenant{{Name: "any", Weight: 1}},
		Classes:  []sched.Class{{Name: "interactive", Priority: 1}, {Name: "batch", Deferrable: true}},
		Models:   []sched.Model{{Name: "m"}},
		Pools:    []sched.Pool{{Name: "a", PricePerHour: 1, Serves: []bool{true}, KVTokens: []int64{1e6}}},
		Replicas: []sched.Replica{{Pool: 0, MaxBatch: 4}, {Pool: 0, MaxBatch: 4}},
		Policy:   "fifo", QueueLimit: 10, Strategy: "least-loaded",
		DeferFor: time.Minute,
		Ladder:   rungs,
	}
	c, err := sched.New(cfg)
	require.NoError(t, err)
	return c, cfg
}

var shedOnErrors = sched.Rung{Name: "shed", Action: sched.ShedBatch, Class: 1,
	Trigger: sched.Trigger{ErrorRate: 0.3}, RecoverBelow: 0.5, Hold: time.Minute}

func TestLadderWithoutRungs(t *testing.T) {
	c, cfg := ladderCore(t)
	l := NewLadder(cfg, 0, sched.LadderEvery)
	require.Nil(t, l)
	// A nil ladder judges nothing, and an attempt's end still reaches the
	// core's health.
	var life sched.Life
	_, _, judged := l.Judge(sched.NewLifecycle(sched.RetryPolicy{}, false), &life, &sched.Request{Class: 1}, true, nil)
	require.False(t, judged)
	for range 10 {
		Observed(time.Second, c, l, 0, false, 0)
	}
	require.Equal(t, sched.Open, c.Breaker(time.Second, 0))
}

// The ladder's cadence: from its driver's start, every period, never
// faster than sched.LadderEvery.
func TestLadderCadence(t *testing.T) {
	c, cfg := ladderCore(t, shedOnErrors)
	l := NewLadder(cfg, 7*time.Second, sched.LadderEvery)
	require.Equal(t, 7*time.Second+sched.LadderEvery, l.NextAt())
	require.Equal(t, 3*sched.LadderEvery, NewLadder(cfg, 0, 3*sched.LadderEvery).NextAt())
	require.Equal(t, sched.LadderEvery, NewLadder(cfg, 0, time.Nanosecond).NextAt(), "floored at LadderEvery")
	_, changed := l.Evaluate(20*time.Second, c)
	require.False(t, changed)
	require.Equal(t, 20*time.Second+sched.LadderEvery, l.NextAt())
}

// What an attempt's end feeds: the ladder's error rate, which engages the
// rung at the next evaluation, and whose judgement then defers a batch
// request, counted or not as the driver says.
func TestLadderObservedAndJudge(t *testing.T) {
	c, cfg := ladderCore(t, shedOnErrors)
	l := NewLadder(cfg, 0, sched.LadderEvery)
	Observed(time.Second, c, l, 0, true, 100*time.Millisecond)
	Observed(time.Second, c, l, 1, false, 0)
	require.InDelta(t, 0.5, l.ErrorRate(), 1e-9)
	ch, changed := l.Evaluate(2*time.Second, c)
	require.True(t, changed)
	require.Equal(t, "degrade", ChangeKind(ch))
	require.Equal(t, 1, l.Engaged())

	lc := sched.NewLifecycle(sched.RetryPolicy{}, false)
	var life sched.Life
	interactive := &sched.Request{Class: 0, Output: 10}
	n, _, judged := l.Judge(lc, &life, interactive, true, nil)
	require.True(t, judged)
	require.Equal(t, sched.OfferNow, n.Action, "the rung sheds batch only")

	for _, counted := range []bool{false, true} {
		var life sched.Life
		n, _, judged := l.Judge(lc, &life, &sched.Request{Class: 1, Output: 10}, counted, nil)
		require.True(t, judged)
		require.Equal(t, sched.Reoffer, n.Action, "a deferrable class is deferred")
		require.Equal(t, time.Minute, n.After)
	}
	require.Equal(t, uint64(1), l.Report(3*time.Second).Shed, "only the counted judgement is in the report")
}

// The engine runs the ladder at its wake-ups: its evaluation is the
// engine's WakeAt, a move is in Ready.Changes, and once arrivals have
// ended with nothing live the ladder stops (no wake-up for it).
func TestEngineEvaluatesLadder(t *testing.T) {
	c, cfg := ladderCore(t, shedOnErrors)
	l := NewLadder(cfg, 0, sched.LadderEvery)
	lc := sched.NewLifecycle(sched.RetryPolicy{}, false)
	e := NewEngine(c, lc, l, EngineConfig{ArrivalsEnd: 5 * sched.LadderEvery / 2})
	require.Equal(t, sched.LadderEvery, e.WakeAt(), "the first evaluation")
	Observed(time.Second, c, l, 0, false, 0)
	e.Step(sched.LadderEvery, Event{Kind: Tick})
	rd := drain(e)
	require.Len(t, rd.Changes, 1)
	require.Equal(t, "degrade", ChangeKind(rd.Changes[0]))
	require.Equal(t, 2*sched.LadderEvery, rd.WakeAt, "the next, a period later")

	e.Step(2*sched.LadderEvery, Event{Kind: Tick})
	require.Empty(t, drain(e).Changes, "held: no move")
	require.Equal(t, 3*sched.LadderEvery, e.WakeAt(), "arrivals go on until 2.5 periods")
	e.Step(3*sched.LadderEvery, Event{Kind: Tick})
	drain(e)
	require.Equal(t, NoWake, e.WakeAt(), "past the arrivals with nothing live: the ladder stops")
}
