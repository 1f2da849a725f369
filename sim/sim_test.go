package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder appends a label to a log when an event fires, with the time.
type recorder struct {
	s   *Sim
	log []string
}

func (r *recorder) ev(label string) func() {
	return func() { r.log = append(r.log, fmt.Sprintf("%v:%s", r.s.Now(), label)) }
}

func TestOrderingAndTies(t *testing.T) {
	s := New(Config{Seed: 1})
	r := &recorder{s: s}
	s.After(3*time.Second, r.ev("c"))
	s.At(1*time.Second, r.ev("a1"))
	s.After(2*time.Second, r.ev("b"))
	s.At(1*time.Second, r.ev("a2"))
	s.After(1*time.Second, r.ev("a3"))
	s.After(0, r.ev("zero"))
	s.Run()
	require.Equal(t, []string{"0s:zero", "1s:a1", "1s:a2", "1s:a3", "2s:b", "3s:c"}, r.log)
	require.Equal(t, uint64(6), s.Events())
	require.Equal(t, 3*time.Second, s.Now())
}

func TestTiesScheduledFromCallbacksKeepOrder(t *testing.T) {
	// An event scheduled for "now" from a callback fires after the events
	// already scheduled for now: scheduling order is the tie-breaker.
	s := New(Config{})
	r := &recorder{s: s}
	s.At(time.Second, func() {
		r.log = append(r.log, "first")
		s.After(0, r.ev("child"))
	})
	s.At(time.Second, r.ev("second"))
	s.Run()
	require.Equal(t, []string{"first", "1s:second", "1s:child"}, r.log)
}

func TestPastTimesClampToNow(t *testing.T) {
	s := New(Config{})
	r := &recorder{s: s}
	s.At(5*time.Second, func() {
		s.At(time.Second, r.ev("past"))
		s.After(-time.Hour, r.ev("negative"))
	})
	s.Run()
	require.Equal(t, []string{"5s:past", "5s:negative"}, r.log)
}

func TestAfterSaturatesInsteadOfOverflowing(t *testing.T) {
	s := New(Config{})
	r := &recorder{s: s}
	s.At(time.Second, func() {
		s.After(time.Duration(math.MaxInt64), r.ev("end-of-time"))
		s.After(time.Second, r.ev("soon"))
	})
	s.RunUntil(time.Hour)
	require.Equal(t, []string{"2s:soon"}, r.log)
	next, ok := s.Next()
	require.True(t, ok)
	require.Equal(t, time.Duration(math.MaxInt64), next)
	s.Run()
	require.Len(t, r.log, 2)
}

func TestRunUntilBoundaries(t *testing.T) {
	tests := []struct {
		name    string
		until   time.Duration
		want    []string
		wantNow time.Duration
		left    int
	}{
		{"before first", 999 * time.Millisecond, nil, 999 * time.Millisecond, 3},
		{"exactly at first", time.Second, []string{"1s:a"}, time.Second, 2},
		{"between", 1500 * time.Millisecond, []string{"1s:a"}, 1500 * time.Millisecond, 2},
		{"exactly at last", 2 * time.Second, []string{"1s:a", "2s:b", "2s:c"}, 2 * time.Second, 0},
		{"past last", time.Hour, []string{"1s:a", "2s:b", "2s:c"}, time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Config{})
			r := &recorder{s: s}
			s.At(time.Second, r.ev("a"))
			s.At(2*time.Second, r.ev("b"))
			s.At(2*time.Second, r.ev("c"))
			s.RunUntil(tt.until)
			require.Equal(t, tt.want, r.log)
			require.Equal(t, tt.wantNow, s.Now())
			require.Equal(t, tt.left, s.Pending())
		})
	}
}

func TestRunUntilFiresEventsScheduledInsideWindow(t *testing.T) {
	s := New(Config{})
	r := &recorder{s: s}
	s.At(time.Second, func() {
		s.After(time.Second, r.ev("in-window")) // at 2s == until
		s.After(time.Second+1, r.ev("outside")) // 1ns after until
	})
	s.RunUntil(2 * time.Second)
	require.Equal(t, []string{"2s:in-window"}, r.log)
	require.Equal(t, 1, s.Pending())
	next, ok := s.Next()
	require.True(t, ok)
	require.Equal(t, 2*time.Second+1, next)
}

func TestRunUntilInThePastKeepsClock(t *testing.T) {
	s := New(Config{})
	s.RunUntil(10 * time.Second)
	s.RunUntil(5 * time.Second)
	require.Equal(t, 10*time.Second, s.Now())
}

func TestStepFiresOneAtATime(t *testing.T) {
	s := New(Config{})
	r := &recorder{s: s}
	require.False(t, s.Step(), "empty sim steps nothing")
	s.At(2*time.Second, r.ev("b"))
	s.At(time.Second, r.ev("a"))
	require.True(t, s.Step())
	require.Equal(t, []string{"1s:a"}, r.log)
	require.Equal(t, time.Second, s.Now())
	require.True(t, s.Step())
	require.False(t, s.Step())
	require.Equal(t, 2*time.Second, s.Now(), "an empty step does not move the clock")
	require.Equal(t, uint64(2), s.Events())
}

func TestStopSemantics(t *testing.T) {
	s := New(Config{})
	r := &recorder{s: s}

	var zero Timer
	require.False(t, zero.Stop(), "zero timer")
	require.False(t, zero.Pending())

	a := s.After(time.Second, r.ev("a"))
	b := s.After(2*time.Second, r.ev("b"))
	require.True(t, a.Pending())
	require.True(t, a.Stop(), "pending timer stops")
	require.False(t, a.Pending())
	require.False(t, a.Stop(), "second stop is a no-op")
	require.Equal(t, 1, s.Pending())

	s.Run()
	require.Equal(t, []string{"2s:b"}, r.log)
	require.False(t, b.Stop(), "fired timer does not stop")
	require.False(t, b.Pending())
	require.Equal(t, uint64(1), s.Events(), "stopped events are not counted")
}

func TestStaleHandleDoesNotStopSlotReuser(t *testing.T) {
	// A fired timer's slot is reused by the next event; the old handle must
	// not cancel the new event.
	s := New(Config{})
	r := &recorder{s: s}
	old := s.After(time.Second, r.ev("old"))
	s.Run()
	fresh := s.After(time.Second, r.ev("fresh"))
	require.Equal(t, old.slot, fresh.slot, "test premise: the slot is reused")
	require.False(t, old.Stop())
	require.True(t, fresh.Pending())
	s.Run()
	require.Equal(t, []string{"1s:old", "2s:fresh"}, r.log)
}

func TestCallbackCanStopItsOwnFiringTimerAndOthers(t *testing.T) {
	s := New(Config{})
	r := &recorder{s: s}
	var self, other Timer
	self = s.After(time.Second, func() {
		require.False(t, self.Stop(), "a firing timer has already fired")
		require.True(t, other.Stop())
	})
	other = s.After(time.Second, r.ev("other"))
	s.Run()
	require.Empty(t, r.log)
}

func TestStoppedTimersDoNotPileUp(t *testing.T) {
	// Arm and cancel a far deadline for every one of many events: the heap
	// must stay bounded by a small multiple of the live timers.
	s := New(Config{})
	var fired int
	var deadline Timer
	var tick func()
	tick = func() {
		fired++
		deadline.Stop()
		if fired < 100_000 {
			deadline = s.After(time.Hour, func() { t.Fatal("deadline fired") })
			s.After(time.Millisecond, tick)
		}
	}
	s.After(0, tick)
	maxHeap := 0
	for s.Step() {
		maxHeap = max(maxHeap, s.q.n)
	}
	require.Equal(t, 100_000, fired)
	require.LessOrEqual(t, maxHeap, 80, "stopped entries must be compacted")
	require.LessOrEqual(t, len(s.slots), 80)
}

func TestNilCallbackIsAnEventNotACancellation(t *testing.T) {
	s := New(Config{})
	tm := s.After(time.Second, nil)
	require.True(t, tm.Pending())
	s.Run()
	require.Equal(t, uint64(1), s.Events())
}

func TestRandStreamsAreIndependent(t *testing.T) {
	draw := func(s *Sim, name string) []uint64 {
		r := s.Rand(name)
		out := make([]uint64, 8)
		for i := range out {
			out[i] = r.Uint64()
		}
		return out
	}
	base := draw(New(Config{Seed: 7}), "arrivals")

	// Creating and draining another stream first changes nothing.
	s := New(Config{Seed: 7})
	draw(s, "service")
	draw(s, "zzz")
	require.Equal(t, base, draw(s, "arrivals"))

	// The same name returns the same stream, continuing where it left off.
	s2 := New(Config{Seed: 7})
	first := draw(s2, "arrivals")
	require.Equal(t, base, first)
	require.NotEqual(t, base, draw(s2, "arrivals"))

	// Another name or another seed gives other draws.
	require.NotEqual(t, base, draw(New(Config{Seed: 7}), "arrival"))
	require.NotEqual(t, base, draw(New(Config{Seed: 8}), "arrivals"))

	// NewSource reproduces a Sim's stream outside it.
	require.Equal(t, base, draw(&Sim{seed: 7, streams: map[string]*rand.Rand{
		"arrivals": rand.New(NewSource(7, "arrivals")),
	}}, "arrivals"))
}

// trace runs a random workload of schedules, stops and re-schedules driven
// only by the seed, and returns the firing log.
func trace(seed uint64) string {
	s := New(Config{Seed: seed})
	rng := s.Rand("test")
	var b strings.Builder
	var timers []Timer
	var spawn func(id int) func()
	spawn = func(id int) func() {
		return func() {
			fmt.Fprintf(&b, "%d@%d ", id, s.Now())
			if s.Events() > 20_000 {
				return
			}
			for range rng.IntN(3) {
				// Coarse times make ties frequent.
				d := time.Duration(rng.IntN(5)) * time.Millisecond
				timers = append(timers, s.After(d, spawn(rng.IntN(1000))))
			}
			if len(timers) > 0 && rng.IntN(4) == 0 {
				timers[rng.IntN(len(timers))].Stop()
			}
		}
	}
	for i := range 50 {
		s.At(time.Duration(rng.IntN(10))*time.Millisecond, spawn(i))
	}
	s.Run()
	return b.String()
}

func TestDeterminism(t *testing.T) {
	a, b := trace(42), trace(42)
	require.Greater(t, len(a), 1000)
	require.Equal(t, a, b, "same seed, same schedule: same sequence")
	require.NotEqual(t, a, trace(43))
}

// refQueue is the slow, obvious reference: a sorted slice scanned linearly.
type refQueue struct {
	items []refItem
	seq   uint64
}

type refItem struct {
	at   time.Duration
	seq  uint64
	id   int
	live bool
}

func TestQueueMatchesReference(t *testing.T) {
	// Random interleavings of schedule, stop and step must fire exactly what
	// a linear-scan reference fires, in the same order.
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			s := New(Config{})
			ref := &refQueue{}
			var got, want []int
			var handles []Timer
			var refIdx []int
			for op := range 5000 {
				switch k := rng.IntN(10); {
				case k < 5:
					at := s.Now() + time.Duration(rng.IntN(20))
					id := op
					handles = append(handles, s.At(at, func() { got = append(got, id) }))
					refIdx = append(refIdx, len(ref.items))
					ref.items = append(ref.items, refItem{at: at, seq: ref.seq, id: id, live: true})
					ref.seq++
				case k < 7 && len(handles) > 0:
					i := rng.IntN(len(handles))
					wasLive := ref.items[refIdx[i]].live
					require.Equal(t, wasLive, handles[i].Stop())
					ref.items[refIdx[i]].live = false
				default:
					best := -1
					for j, it := range ref.items {
						if it.live && (best < 0 || it.at < ref.items[best].at ||
							(it.at == ref.items[best].at && it.seq < ref.items[best].seq)) {
							best = j
						}
					}
					require.Equal(t, best >= 0, s.Step())
					if best >= 0 {
						want = append(want, ref.items[best].id)
						ref.items[best].live = false
					}
				}
			}
			require.Equal(t, want, got)
		})
	}
}
