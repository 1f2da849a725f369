// Package sim is fleetdrill's discrete-event kernel: a virtual clock, a queue
// of cancellable callbacks, named seeded random streams, and a [Pacer] that
// drives the kernel in wall time for the game-day console. Streaming
// statistics live in the sub-package sim/stats.
//
// It knows nothing about GPUs, requests or schedulers, and must not import
// anything from fleetdrill: everything else stands on it.
//
// # Usage
//
//	s := sim.New(sim.Config{Seed: 42})
//	arrivals := s.Rand("arrivals")     // one independent stream per name
//	var arrive func()
//	arrive = func() {
//		deadline := s.After(30*time.Second, onTimeout)
//		_ = deadline.Stop()            // O(1); cancelled timers do not pile up
//		s.After(time.Duration(arrivals.ExpFloat64()*float64(time.Second)), arrive)
//	}
//	s.At(0, arrive)
//	s.RunUntil(time.Hour)              // events at exactly 1h fire; later ones stay queued
//
// The caller's responsibilities:
//
//  1. Drive the Sim from one goroutine. Callbacks run on it and may schedule
//     and stop events; nothing in the kernel is safe for concurrent use. To
//     drive it from a UI, hand it to a [Pacer] and talk to the Pacer.
//  2. Draw every random number from [Sim.Rand] (or [NewSource]). Adding a
//     stream never changes the draws of another, so a new feature does not
//     reshuffle an old scenario.
//  3. Never rely on map order in a callback that schedules: the kernel's
//     order is (time, scheduling order), and it can only replay what the
//     callbacks do deterministically.
//
// # Ordering
//
// Events fire in order of virtual time; events at the same instant fire in
// the order they were scheduled, including those scheduled for "now" from a
// callback (they run after the ones already due). Same seed, same schedule:
// same sequence, byte for byte.
//
// # Where to start reading
//
// sim.go has the public surface and the slot table behind [Timer]; queue.go
// the event queue, a radix heap, with the reasoning for choosing it;
// pacer.go the wall-clock driver. bench_test.go holds the hold-model
// benchmarks and the bare binary heap the kernel is measured against;
// queueing_test.go validates the kernel against Erlang C.
package sim
