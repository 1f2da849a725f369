// Package twin is fleetdrill's digital twin: it resolves a scenario into a
// simulated fleet, drives the scheduler core (twin/sched) and the replicas'
// continuous-batching model (twin/engine) with the discrete-event kernel
// (sim), and produces the report.
//
// The pieces below it are pure and clock-agnostic, so the live gateway can
// drive the same core on the wall clock:
//
//   - twin/fleet: capabilities and the compatibility registry;
//   - twin/latency: step-time profiles, built-in measured profiles;
//   - twin/engine: one replica's iteration-level batching, with skip-ahead;
//   - twin/dispatch: the queue policies (fifo, priority, wfq, edf);
//   - twin/sched: admission, queues, routing, fallback; its Ready is the
//     core's one output; its Lifecycle decides a request's next step
//     (wait, re-offer, retry, refuse, give up) for this driver and the
//     gateway alike, so neither holds any logic of a request's life;
//   - twin/compile: a scenario compiled into the core's configuration, the
//     registry, the pools' profiles and the autoscalers' configuration,
//     which the live gateway and node take from it too (its only I/O is
//     reading a pool's model_config).
//
// Start reading at Run (run.go), then twin/compile (Compile) for how a
// scenario becomes a fleet, and report.go for what a run reports.
// metrics.go records the operational series of internal/signals in
// simulated time (fleetdrill run --openmetrics), and forecast.go the
// demand forecast every report scores.
// Every request is accounted for exactly once; Run fails loudly if the
// invariant breaks.
//
// Faults: faults.go runs them (targets, replicas, start and end, detection,
// mitigation, recovery) and knows no kind; what each kind does to the
// ground truth is its effect type in effects.go, one per kind of the
// catalogue.
package twin
