package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// log records what a replica reports.
type log struct {
	first, done map[int]time.Duration
	preempted   int
	events      []string
}

func newLog() *log { return &log{first: map[int]time.Duration{}, done: map[int]time.Duration{}} }

func (l *log) FirstToken(s *Seq, at time.Duration) {
	l.first[s.Tag] = at
	l.events = append(l.events, fmt.Sprintf("%v first %d", at, s.Tag))
}
func (l *log) Done(s *Seq, at time.Duration) {
	l.done[s.Tag] = at
	l.events = append(l.events, fmt.Sprintf("%v done %d", at, s.Tag))
}
func (l *log) Dropped(s *Seq, at time.Duration) {
	l.events = append(l.events, fmt.Sprintf("%v dropped %d", at, s.Tag))
}
func (l *log) Preempted(s *Seq, at time.Duration) {
	l.preempted++
	l.events = append(l.events, fmt.Sprintf("%v preempt %d", at, s.Tag))
}

// drive runs a replica through arrivals (time → seq) until idle, returning
// the number of Advance calls (events).
func drive(t *testing.T, r *Replica, arrivals []arrival, out Sink) int {
	t.Helper()
	events := 0
	i := 0
	for {
		next, busy := r.Next()
		if i < len(arrivals) && (!busy || arrivals[i].at <= next) {
			r.Add(arrivals[i].at, arrivals[i].s)
			i++
			continue
		}
		if !busy {
			return events
		}
		r.Advance(next, out)
		require.NoError(t, r.Invariants())
		events++
		require.Less(t, events, 10_000_000, "runaway")
	}
}

type arrival struct {
	at time.Duration
	s  *Seq
}

func flat(stepUS float64) latency.Profile {
	return latency.Profile{StepBase: stepUS, MaxBatchedTokens: 8192}
}

func TestSingleRequestTimeline(t *testing.T) {
	r, err := New(Config{Profile: flat(10_000), MaxSeqs: 8, KVTokens: 100_000})
	require.NoError(t, err)
	l := newLog()
	s := &Seq{Tag: 1, Prompt: 100, Output: 5}
	events := drive(t, r, []arrival{{0, s}}, l)
	// One prefill step (10ms) yields the first token; four decode steps follow.
	require.Equal(t, 10*time.Millisecond, l.first[1])
	require.Equal(t, 50*time.Millisecond, l.done[1])
	require.Equal(t, 2, events, "the four decode steps are one skipped-ahead segment")
	require.Equal(t, uint64(5), r.Steps)
	require.Equal(t, 50*time.Millisecond, r.BusyTime)
	require.Zero(t, r.KVUsed(), "KV is freed at completion")
}

func TestStepTimeGrowsWithKV(t *testing.T) {
	// step = 1000µs + 1µs per KV token held by decoders.
	p := latency.Profile{StepBase: 1000, PerKVToken: 1, MaxBatchedTokens: 8192}
	r, err := New(Config{Profile: p, MaxSeqs: 8, KVTokens: 100_000})
	require.NoError(t, err)
	l := newLog()
	drive(t, r, []arrival{{0, &Seq{Tag: 1, Prompt: 100, Output: 3}}}, l)
	// Prefill: no decoders, 1000µs. Decodes hold 101 then 102 tokens.
	require.Equal(t, 1000*time.Microsecond, l.first[1])
	require.Equal(t, (1000+1101+1102)*time.Microsecond, l.done[1])
}

func TestChunkedPrefill(t *testing.T) {
	p := latency.Profile{StepBase: 1000, PerPrefillToken: 1, MaxBatchedTokens: 512}
	r, err := New(Config{Profile: p, MaxSeqs: 8, KVTokens: 100_000})
	require.NoError(t, err)
	l := newLog()
	drive(t, r, []arrival{{0, &Seq{Tag: 1, Prompt: 1200, Output: 1}}}, l)
	// Chunks of 512, 512, 176 tokens.
	require.Equal(t, (1512+1512+1176)*time.Microsecond, l.first[1])
	require.Equal(t, l.first[1], l.done[1], "a one-token output is done at its first token")
}

func TestArrivalCutsDecodeRunAtStepBoundary(t *testing.T) {
	r, err := New(Config{Profile: flat(10_000), MaxSeqs: 8, KVTokens: 100_000})
	require.NoError(t, err)
	l := newLog()
	a := &Seq{Tag: 1, Prompt: 10, Output: 100}
	b := &Seq{Tag: 2, Prompt: 10, Output: 2}
	// b arrives at 35ms, during a's fourth step (30–40ms); it is admitted at
	// 40ms, prefilled with a's decode in the 40–50ms step.
	drive(t, r, []arrival{{0, a}, {35 * time.Millisecond, b}}, l)
	require.Equal(t, 50*time.Millisecond, l.first[2])
	require.Equal(t, 60*time.Millisecond, l.done[2])
	require.Equal(t, time.Second, l.done[1], "a is not delayed by the flat profile")
}

// TestAsyncSchedulingJoinsOneStepLater: with vLLM's async scheduling the
// step after the one in progress is already scheduled, so a newcomer joins
// the one after that; an idle engine schedules at once.
func TestAsyncSchedulingJoinsOneStepLater(t *testing.T) {
	prof := flat(10_000)
	prof.AsyncScheduling = true
	r, err := New(Config{Profile: prof, MaxSeqs: 8, KVTokens: 100_000})
	require.NoError(t, err)
	l := newLog()
	a := &Seq{Tag: 1, Prompt: 10, Output: 100}
	b := &Seq{Tag: 2, Prompt: 10, Output: 2}
	// b arrives at 35ms, during a's fourth step (30–40ms); the 40–50ms step
	// is already scheduled, so b is prefilled in the 50–60ms step.
	drive(t, r, []arrival{{0, a}, {35 * time.Millisecond, b}}, l)
	require.Equal(t, 10*time.Millisecond, l.first[1], "an idle engine schedules a newcomer at once")
	require.Equal(t, 60*time.Millisecond, l.first[2])
	require.Equal(t, 70*time.Millisecond, l.done[2])

	// A newcomer queued during a prefill step (a one-step segment) waits
	// for the next step to run without it, too.
	r, err = New(Config{Profile: prof, MaxSeqs: 8, KVTokens: 100_000})
	require.NoError(t, err)
	l = newLog()
	c := &Seq{Tag: 3, Prompt: 10, Output: 50}
	d := &Seq{Tag: 4, Prompt: 10, Output: 2}
	drive(t, r, []arrival{{0, c}, {5 * time.Millisecond, d}}, l)
	require.Equal(t, 30*time.Millisecond, l.first[4])
}

// TestAsyncSkipAheadMatchesStepByStepAtTies: a newcomer queued at the very
// instant a step ends and the next begins (before or after the replica's
// Advance at that instant), and a cancellation in the middle of a run, land
// on the same step whether the replica skips ahead or steps one at a time.
func TestAsyncSkipAheadMatchesStepByStepAtTies(t *testing.T) {
	prof := flat(10_000)
	prof.AsyncScheduling = true
	type result struct {
		first, done map[int]time.Duration
		events      []string
	}
	const tie = 30 * time.Millisecond // a finishes then: a segment ends in both modes
	run := func(noSkip, afterAdvance bool, cancelAt time.Duration) result {
		r, err := New(Config{Profile: prof, MaxSeqs: 8, KVTokens: 100_000})
		require.NoError(t, err)
		r.noSkip = noSkip
		l := newLog()
		a := &Seq{Tag: 1, Prompt: 10, Output: 3}
		b := &Seq{Tag: 2, Prompt: 10, Output: 3}
		c := &Seq{Tag: 3, Prompt: 10, Output: 50}
		r.Add(0, a)
		r.Add(0, c)
		added, cancelled := false, false
		for {
			next, busy := r.Next()
			if !busy {
				break
			}
			if !cancelled && cancelAt > 0 && cancelAt < next {
				r.Cancel(cancelAt, c)
				cancelled = true
				continue
			}
			if !added && !afterAdvance && next >= tie {
				r.Add(tie, b)
				added = true
				continue
			}
			r.Advance(next, l)
			require.NoError(t, r.Invariants())
			if !added && afterAdvance && next == tie {
				r.Add(tie, b)
				added = true
			}
		}
		require.True(t, added)
		return result{l.first, l.done, l.events}
	}
	for _, after := range []bool{false, true} {
		for _, cancelAt := range []time.Duration{0, 65 * time.Millisecond} {
			fast, slow := run(false, after, cancelAt), run(true, after, cancelAt)
			require.Equal(t, slow.events, fast.events, "after advance %v, cancel at %v", after, cancelAt)
		}
	}
	require.Equal(t, tie, run(false, false, 0).done[1], "a ends at the tie")
	// Queued at 30ms, as the 30–40ms step is scheduled (before or after the
	// replica sees the 20–30ms step end), b is prefilled in 40–50ms: the
	// newcomer joins the step after the one being scheduled as it arrives.
	require.Equal(t, 50*time.Millisecond, run(false, false, 0).first[2])
	require.Equal(t, 50*time.Millisecond, run(false, true, 0).first[2])
}

func physicsProfile(t *testing.T, chunk int, async bool) latency.Profile {
	t.Helper()
	g, err := latency.LookupGPU("H100")
	require.NoError(t, err)
	m, err := latency.LookupModel("llama-3.1-8b-instruct")
	require.NoError(t, err)
	c, _ := latency.CoeffsFor(g)
	ph, err := latency.NewPhysics(latency.Placement{GPU: g, Model: m, TP: 1}, c)
	require.NoError(t, err)
	return latency.Profile{Physics: ph, MinStep: 100, MaxBatchedTokens: chunk, AsyncScheduling: async}
}

func TestMaxSeqsQueues(t *testing.T) {
	r, err := New(Config{Profile: flat(10_000), MaxSeqs: 1, KVTokens: 100_000})
	require.NoError(t, err)
	l := newLog()
	drive(t, r, []arrival{{0, &Seq{Tag: 1, Prompt: 10, Output: 3}}, {0, &Seq{Tag: 2, Prompt: 10, Output: 3}}}, l)
	require.Equal(t, 30*time.Millisecond, l.done[1])
	require.Equal(t, 40*time.Millisecond, l.first[2])
	require.Equal(t, 60*time.Millisecond, l.done[2])
}

func TestKVPressurePreemptsAndRecomputes(t *testing.T) {
	// Two sequences of 60 + 40 tokens cannot both finish in 150 KV tokens:
	// the later one is preempted, recomputed after the first completes, and
	// still finishes. Preemptions are counted on the replica and the seq.
	r, err := New(Config{Profile: flat(1000), MaxSeqs: 8, KVTokens: 150})
	require.NoError(t, err)
	l := newLog()
	a := &Seq{Tag: 1, Prompt: 60, Output: 40}
	b := &Seq{Tag: 2, Prompt: 60, Output: 40}
	drive(t, r, []arrival{{0, a}, {0, b}}, l)
	require.Len(t, l.done, 2)
	require.Positive(t, r.Preemptions)
	require.Equal(t, int(r.Preemptions), b.Preemptions+a.Preemptions)
	require.Positive(t, b.Preemptions, "the most recently admitted is preempted")
	require.Less(t, l.done[1], l.done[2])
	require.Zero(t, r.KVUsed())
	require.Equal(t, 40, b.Generated)
}

func TestCancelFreesSlotAndKV(t *testing.T) {
	r, err := New(Config{Profile: flat(10_000), MaxSeqs: 1, KVTokens: 100_000})
	require.NoError(t, err)
	l := newLog()
	a := &Seq{Tag: 1, Prompt: 10, Output: 1000}
	b := &Seq{Tag: 2, Prompt: 10, Output: 2}
	r.Add(0, a)
	r.Add(0, b)
	// Run a for a while, then cancel it at 55ms: it leaves at the end of the
	// step in progress (60ms) and b starts.
	next, _ := r.Next()
	r.Advance(next, l) // prefill step ends at 10ms
	require.True(t, r.Cancel(55*time.Millisecond, a))
	next, _ = r.Next()
	require.Equal(t, 60*time.Millisecond, next)
	drive(t, r, nil, l)
	require.NotContains(t, l.done, 1)
	require.Equal(t, 70*time.Millisecond, l.first[2])
	require.Zero(t, r.KVUsed())
	require.False(t, r.Cancel(time.Second, a), "cancelling twice is a no-op")
}

func TestCancelWaiting(t *testing.T) {
	r, err := New(Config{Profile: flat(10_000), MaxSeqs: 1, KVTokens: 100_000})
	require.NoError(t, err)
	l := newLog()
	a := &Seq{Tag: 1, Prompt: 10, Output: 3}
	b := &Seq{Tag: 2, Prompt: 10, Output: 3}
	r.Add(0, a)
	r.Add(0, b)
	require.True(t, r.Cancel(time.Millisecond, b))
	require.Equal(t, 1, r.Load())
	drive(t, r, nil, l)
	require.Len(t, l.done, 1)
}

// TestSkipAheadMatchesStepByStep compares the skip-ahead engine with the
// same engine forced to one step per event, the slow obvious reference, on
// random workloads with KV pressure, chunking and a step floor.
func TestSkipAheadMatchesStepByStep(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			prof := latency.Profile{
				StepBase: 2000 + rng.Float64()*8000, PerSeq: rng.Float64() * 50,
				PerPrefillToken: rng.Float64() * 0.5, PerKVToken: rng.Float64() * 0.05,
				MinStep: rng.Float64() * 6000, MaxBatchedTokens: 256 + rng.IntN(4096),
			}
			// Odd seeds schedule asynchronously; the last ten time steps
			// with the physical model of a real placement.
			prof.AsyncScheduling = seed%2 == 1
			if seed >= 20 {
				prof = physicsProfile(t, prof.MaxBatchedTokens, prof.AsyncScheduling)
			}
			cfg := Config{Profile: prof, MaxSeqs: 1 + rng.IntN(16), KVTokens: int64(2000 + rng.IntN(20000))}
			var arr []arrival
			at := time.Duration(0)
			for i := range 60 {
				at += time.Duration(rng.ExpFloat64() * float64(200*time.Millisecond))
				arr = append(arr, arrival{at, &Seq{Tag: i, Prompt: 1 + rng.IntN(1500), Output: 1 + rng.IntN(300)}})
			}
			run := func(noSkip bool) (*log, int) {
				r, err := New(cfg)
				require.NoError(t, err)
				r.noSkip = noSkip
				l := newLog()
				var copyArr []arrival
				for _, a := range arr {
					s := *a.s
					if !r.Fits(s.Prompt, s.Output) {
						continue
					}
					copyArr = append(copyArr, arrival{a.at, &s})
				}
				return l, drive(t, r, copyArr, l)
			}
			fast, fastEvents := run(false)
			slow, slowEvents := run(true)
			require.Equal(t, len(slow.done), len(fast.done))
			require.Equal(t, slow.preempted, fast.preempted)
			for tag, want := range slow.done {
				// Segment sums are rounded to the nanosecond once per event
				// instead of once per step: allow half a nanosecond per step
				// (at most one step per 2 ms, from the floor of the profile)
				// plus a microsecond.
				tol := func(d time.Duration) float64 { return float64(time.Microsecond) + float64(d)/4e6 }
				require.InDelta(t, float64(want), float64(fast.done[tag]), tol(want), "done %d", tag)
				require.InDelta(t, float64(slow.first[tag]), float64(fast.first[tag]), tol(want), "first %d", tag)
			}
			require.LessOrEqual(t, fastEvents, slowEvents)
		})
	}
}

func TestEventsPerRequestStayConstant(t *testing.T) {
	// With skip-ahead the number of events depends on composition changes,
	// not on output length: 10× longer outputs must not give 10× events.
	count := func(out int) int {
		r, err := New(Config{Profile: flat(20_000), MaxSeqs: 64, KVTokens: 1_000_000})
		require.NoError(t, err)
		var arr []arrival
		for i := range 50 {
			arr = append(arr, arrival{time.Duration(i) * 300 * time.Millisecond, &Seq{Tag: i, Prompt: 500, Output: out}})
		}
		return drive(t, r, arr, newLog())
	}
	short, long := count(100), count(1000)
	require.Less(t, long, 2*short, "events: %d for 100-token outputs, %d for 1000", short, long)
}

func TestNewRejectsUnusableConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Profile: flat(1), MaxSeqs: 0, KVTokens: 10},
		{Profile: flat(1), MaxSeqs: 1, KVTokens: 0},
		{Profile: latency.Profile{}, MaxSeqs: 1, KVTokens: 10},
	} {
		_, err := New(cfg)
		require.Error(t, err)
	}
}

func TestArrivalOnStepBoundaryJoinsNextStep(t *testing.T) {
	for _, noSkip := range []bool{false, true} {
		r, err := New(Config{Profile: flat(10_000), MaxSeqs: 8, KVTokens: 100_000})
		require.NoError(t, err)
		r.noSkip = noSkip
		l := newLog()
		a := &Seq{Tag: 1, Prompt: 10, Output: 100}
		b := &Seq{Tag: 2, Prompt: 10, Output: 2}
		drive(t, r, []arrival{{0, a}, {30 * time.Millisecond, b}}, l)
		require.Equal(t, 40*time.Millisecond, l.first[2], "noSkip=%v", noSkip)
		require.Equal(t, 50*time.Millisecond, l.done[2], "noSkip=%v", noSkip)
	}
}

func TestPrefillCompletionTokenFitsKV(t *testing.T) {
	// A prefill's first token needs a KV slot too: with 12 tokens of KV a
	// running 1+3 sequence and two 4+2 arrivals must never exceed it.
	r, err := New(Config{Profile: flat(1000), MaxSeqs: 8, KVTokens: 12})
	require.NoError(t, err)
	l := newLog()
	drive(t, r, []arrival{
		{0, &Seq{Tag: 1, Prompt: 1, Output: 3}},
		{500 * time.Microsecond, &Seq{Tag: 2, Prompt: 4, Output: 2}},
		{500 * time.Microsecond, &Seq{Tag: 3, Prompt: 4, Output: 2}},
	}, l)
	require.Len(t, l.done, 3)
}

func TestCancelledSequenceIsDroppedNotReported(t *testing.T) {
	r, err := New(Config{Profile: flat(10_000), MaxSeqs: 8, KVTokens: 100_000})
	require.NoError(t, err)
	l := newLog()
	a := &Seq{Tag: 1, Prompt: 10, Output: 10}
	r.Add(0, a)
	require.True(t, r.Cancel(time.Millisecond, a)) // during its prefill step
	drive(t, r, nil, l)
	require.NotContains(t, l.first, 1, "a cancelled sequence produces no first token")
	require.Contains(t, l.events, "10ms dropped 1")
	require.Zero(t, r.KVUsed())
}

// A prompt whose KV cache a prefill replica moved here computes only its
// last token before decoding: one chunk of 1 where the whole prompt would
// take three.
func TestTransferredPromptSkipsPrefill(t *testing.T) {
	p := latency.Profile{StepBase: 1000, PerPrefillToken: 1, MaxBatchedTokens: 512}
	r, err := New(Config{Profile: p, MaxSeqs: 8, KVTokens: 100_000})
	require.NoError(t, err)
	l := newLog()
	s := &Seq{Tag: 1, Prompt: 1200, Output: 2, Transferred: 1200}
	drive(t, r, []arrival{{0, s}}, l)
	require.Equal(t, 1001*time.Microsecond, l.first[1], "one prefill token, not chunks of 512, 512, 176")
	require.Equal(t, 2001*time.Microsecond, l.done[1])
	require.Equal(t, uint64(2), r.Steps)
}

// Held KV (a prefill replica's prompt kept for its transfer) keeps a
// sequence that would fit out until it is released; the invariants count
// it.
func TestHoldKeepsKVUntilRelease(t *testing.T) {
	r, err := New(Config{Profile: flat(1000), MaxSeqs: 8, KVTokens: 1000})
	require.NoError(t, err)
	l := newLog()
	r.Hold(900)
	require.NoError(t, r.Invariants())
	s := &Seq{Tag: 1, Prompt: 200, Output: 2}
	r.Add(0, s)
	_, busy := r.Next()
	require.False(t, busy, "no room beside the held KV")
	require.True(t, r.Blocked())
	require.Equal(t, int64(900), r.KVHeld())
	r.Release(5*time.Millisecond, 900)
	require.NoError(t, r.Invariants())
	require.Zero(t, r.KVHeld())
	drive(t, r, nil, l)
	require.Equal(t, 6*time.Millisecond, l.first[1], "admitted at the release")
	r.Release(0, 10) // nothing held: nothing released
	require.Zero(t, r.KVUsed())
}
