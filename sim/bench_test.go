package sim

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The hold model (Jones, 1986) is the classic benchmark for event queues: a
// fixed population of pending timers, each of which, when it fires,
// reschedules itself after an exponential delay. Its cost per event is the
// cost of the queue and the callback machinery, nothing else.

const (
	holdTimers = 1000
	holdMean   = time.Millisecond // mean delay of a rescheduled timer
)

// bareHeap is the baseline the kernel must beat: a binary min-heap of float64
// timestamps, hand-written (no container/heap interface calls), with no
// callbacks, no tie-breaking and no cancellation.
type bareHeap []float64

func (h *bareHeap) push(v float64) {
	a := append(*h, v)
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p] <= v {
			break
		}
		a[i] = a[p]
		i = p
	}
	a[i] = v
	*h = a
}

func (h *bareHeap) pop() float64 {
	a := *h
	top := a[0]
	n := len(a) - 1
	v := a[n]
	a = a[:n]
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && a[c+1] < a[c] {
			c++
		}
		if v <= a[c] {
			break
		}
		a[i] = a[c]
		i = c
	}
	if n > 0 {
		a[i] = v
	}
	*h = a
	return top
}

// runBareHold runs n events of the hold model on the bare heap and returns
// the wall time it took.
func runBareHold(n int) time.Duration {
	rng := rand.New(rand.NewPCG(1, 2))
	mean := float64(holdMean)
	h := make(bareHeap, 0, holdTimers)
	for range holdTimers {
		h.push(rng.ExpFloat64() * mean)
	}
	start := time.Now()
	for range n {
		t := h.pop()
		h.push(t + rng.ExpFloat64()*mean)
	}
	return time.Since(start)
}

func BenchmarkBareHeap(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	mean := float64(holdMean)
	h := make(bareHeap, 0, holdTimers)
	for range holdTimers {
		h.push(rng.ExpFloat64() * mean)
	}
	for b.Loop() {
		t := h.pop()
		h.push(t + rng.ExpFloat64()*mean)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// reportVsBare runs the bare heap for as many events as the benchmark fired
// and reports the kernel's speed as a multiple of the baseline's, so one run
// prints the ratio the design goal is stated in (>= 1).
func reportVsBare(b *testing.B) {
	kernel := float64(b.N) / b.Elapsed().Seconds()
	bare := float64(b.N) / runBareHold(b.N).Seconds()
	b.ReportMetric(kernel, "events/s")
	b.ReportMetric(kernel/bare, "x-bare-heap")
}

func BenchmarkHold(b *testing.B) {
	s := New(Config{Seed: 1})
	rng := s.Rand("hold")
	mean := float64(holdMean)
	for range holdTimers {
		var fn func()
		fn = func() { s.After(time.Duration(rng.ExpFloat64()*mean), fn) }
		s.After(time.Duration(rng.ExpFloat64()*mean), fn)
	}
	for b.Loop() {
		s.Step()
	}
	reportVsBare(b)
}

// BenchmarkHoldCancel is the hold model where every event also arms a
// deadline that is stopped, before it can fire, when the timer next fires:
// the pattern of a request timeout in a serving system.
func BenchmarkHoldCancel(b *testing.B) {
	s := New(Config{Seed: 1})
	rng := s.Rand("hold")
	mean := float64(holdMean)
	expired := func() { b.Fatal("a deadline fired") }
	for range holdTimers {
		var deadline Timer
		var fn func()
		fn = func() {
			deadline.Stop()
			d := time.Duration(rng.ExpFloat64() * mean)
			s.After(d, fn)
			deadline = s.After(d+time.Hour, expired)
		}
		s.After(time.Duration(rng.ExpFloat64()*mean), fn)
	}
	for b.Loop() {
		s.Step()
	}
	reportVsBare(b)
}
