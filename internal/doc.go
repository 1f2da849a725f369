// Package internal is the root of fleetdrill's private packages, each in its
// own sub-package named for what it holds. This file reserves the directory
// and maps the tree; layering_test.go holds the import rules the packages'
// doc comments state.
//
// # The tree
//
// The core and what it stands on (docs/architecture.md):
//
//	sim/             discrete-event kernel: virtual clock, timers, seeded streams, pacing
//	sim/stats        streaming statistics (DDSketch quantiles), a leaf
//	twin/sched       the scheduler core: pure, clock-agnostic, no I/O; Ready (its outputs), Lifecycle (a request's life)
//	twin/dispatch    queue disciplines the core dispatches with (fifo, priority, wfq, edf)
//	twin/engine      one replica's continuous batching, KV cache and preemption
//	twin/latency     step-time models (linear profiles, the physical model), GPU table, model shapes
//	twin/fleet       the compatibility registry: can pool P serve model M
//	twin/compile     a scenario compiled: the core's config, registry, profiles, canary routes, scaler config
//	twin             the simulator driver: runs, drills, faults, reports, the live recorder
//	scenarios        the scenario schema, loader, validator and library
//	faults           the fault catalogue
//	features         Gherkin failover specs and their steps
//	cmd/fleetdrill   the one binary
//
// Inputs and outputs:
//
//	internal/trace        trace readers and the canonical JSONL format
//	internal/anonymize    logs and traces made fit to leave the building
//	internal/modelfile    a model's config.json from disk, or a shipped one by name
//	internal/benchmark    published benchmark experiments and their readers
//	internal/calibrate    fitting and scoring the twin on measured runs and benchmarks
//	internal/report       the text summary of a report
//	internal/openmetrics  a run's series in simulated time, for Prometheus backfill
//	internal/signals      the catalogue of Prometheus series the gateway, node and twin share
//
// The live path (the second driver of the core):
//
//	internal/gateway      the live gateway: the core on the wall clock, real HTTP backends
//	internal/node         the emulated inference node, timed by twin/engine
//	internal/openai       the OpenAI HTTP wire format
//	internal/httpguard    listener limits: header, body and idle timeouts, a connection cap
//	internal/livefleet    containers of nodes behind toxiproxy, and live fault injectors
//	internal/liverun      run --live: replay, live report, twin-versus-live comparison
//	internal/gpu          NVML inventory and agent (cgo)
//
// The gateway, the node and the live fleet take their configuration from
// twin/compile and must not import the twin (twin, the root package);
// internal/liverun, which drives both, may.
//
// Tools built on the twin:
//
//	internal/tui          the game-day console
//	internal/compare      policies over seeds
//	internal/plan         failure-aware capacity planning
//	internal/scorecard    the provider portability gate
//	internal/sweep        sharded sweeps (Kubernetes Indexed Jobs)
//	internal/spec         the Gherkin step library
//
// Small helpers: internal/suggest (did-you-mean), internal/shell (shell
// quoting), internal/workers (a bounded pool), internal/promtest (reading
// registries in tests).
package internal
