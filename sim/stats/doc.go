// Package stats holds the streaming statistics that the rest of fleetdrill
// records while a simulation runs: quantile sketches for latencies, time-weighted
// gauges for queue depths and utilisation, and plain counters.
//
// Everything here is streaming and bounded: no type keeps the samples it was
// given, and nothing sorts a sample array. A run of millions of requests costs
// the same memory as a run of a hundred.
//
// What it owns:
//
//   - [Sketch]: a quantile sketch (DataDog's DDSketch, 1% relative accuracy)
//     with exact count, sum, mean, min and max kept alongside. Mergeable, so
//     per-replica sketches can be combined into a fleet-wide one. [Summary] is
//     its JSON-ready digest (p50/p90/p95/p99).
//   - [TimeGauge]: a step function of virtual time (time.Duration since the
//     start of the run) whose integral and time-weighted mean are kept exactly;
//     for queue depths, busy slots, utilisation.
//   - [Counter] and [Counters]: event counts, the latter keyed by reason
//     ("rejected: quota") with sorted, deterministic iteration.
//
// Determinism: every type is a pure function of the calls made on it. The same
// calls in the same order give bit-identical results, which the simulator's
// replay guarantee depends on. Nothing here reads the wall clock or uses
// randomness.
//
// Concurrency: none of the types is safe for concurrent use. The simulator
// drives everything from one goroutine; parallel sweeps keep one set of
// statistics per run and combine them afterwards with [Sketch.Merge].
//
// Layering: stats is a leaf. It must not import the simulation kernel
// (package sim) or anything built on top of it; the kernel and the models
// import stats, never the reverse. Its only non-standard dependency is
// github.com/DataDog/sketches-go.
//
// Where to start reading: sketch.go ([Sketch], [NewSketch], [Sketch.Summary]),
// then gauge.go ([TimeGauge]) and counter.go.
package stats
