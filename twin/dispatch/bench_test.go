package dispatch

import (
	"fmt"
	"testing"
	"time"
)

// The benchmarks hold a queue at a steady length and time one dispatch: a
// Pop and the Push of a fresh request (the popped Item, refilled, so no
// allocation is the benchmark's). n=1000 is a busy model's waiting queue;
// n=100000 shows the O(log n) growth. Compare runs with benchstat:
//
//	go test -run '^$' -bench . -benchmem -count 6 ./twin/dispatch/
func BenchmarkPushPop(b *testing.B) {
	for _, p := range Policies() {
		for _, n := range []int{1000, 100000} {
			b.Run(fmt.Sprintf("%s/n=%d", p, n), func(b *testing.B) {
				cfg := Config{Policy: p}
				if p == Priority {
					cfg.Aging = 30 * time.Second
				}
				q, items := steadyQueue(b, cfg, n)
				now, i := time.Duration(n)*time.Millisecond, 0
				b.ReportAllocs()
				for b.Loop() {
					now += time.Millisecond
					i++
					it := q.Pop(now)
					refill(it, uint64(len(items)+i), now, i)
					q.Push(now, it)
				}
			})
		}
	}
}

// BenchmarkRemove times the deadline-expiry path: Remove of a queued item
// from anywhere in the queue, and its Push back, at steady length 1000.
func BenchmarkRemove(b *testing.B) {
	for _, p := range Policies() {
		b.Run(p, func(b *testing.B) {
			q, items := steadyQueue(b, Config{Policy: p}, 1000)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i += 397 // coprime with 1000: visits every position
				it := items[i%len(items)]
				if !q.Remove(it) {
					b.Fatal("Remove of a queued item returned false")
				}
				q.Push(0, it)
			}
		})
	}
}
