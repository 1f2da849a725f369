// Package reqengine is the request engine in front of the scheduler core:
// what happens to a request between its arrival and its answer that is
// neither the core's admission and routing (twin/sched) nor a driver's
// carrying out (the twin in virtual time, internal/gateway on the wall
// clock). Each feature here is written once and both drivers call it, so
// that the twin and the gateway cannot drift apart; docs/architecture.md
// says where a new feature goes.
//
// Its front door is Engine (engine.go), as etcd's RawNode is raft's: a
// driver tells it what happened through Step (an arrival, a first token,
// an attempt's end, a duplicate lost, a client gone, a probe's result, an
// instance up or failed, a replica restarted, held canaries or scalers
// started or stopped, Tick at its wake-up), carries out its Ready (the
// ladder's verdicts and moves, the offers and what follows them, attempts
// to cancel and to start — a request's, a duplicate, a shadow copy the
// core dispatched —, outcomes, the canaries' decisions, what the scalers
// ask of the instances, restarts taken and loads over, the core's
// transitions and one wake-up time) and calls Advance. The Engine owns the
// core, the lifecycle, the ladder, the canaries' evaluations, the
// scalers, the restarts, hedging, and each request's state and times
// (deferrals, retries' backoff, the queue time-out, a hedge's delay);
// neither driver times a retry, a hedge, an evaluation or a load, or
// decides what follows an attempt.
//
// Each feature lives in its own file, which the Engine runs; a driver holds
// what the engine decides about in its own records (a request's, a shadow
// copy's: EngineConfig.NewCopy) and carries it out:
//
//   - canary rollouts and their shadow copies (canary.go): the rollouts'
//     clock, the copies' ID space and construction, the rule that a failed
//     canary attempt retries on the baseline, what an attempt's end tells
//     a rollout, and whether a request met its class's objectives (MetSLO,
//     which the reports' tallies use too);
//   - how a hedge race ends (hedge.go): which attempt is cancelled, which
//     goes on, and whether the core hears of a failed duplicate, which the
//     Engine applies;
//   - autoscaling (scaling.go): each autoscaled pool's scaler, what its
//     transitions do to the core, what it measures and is offered, and
//     its clock's origin; the driver starts and stops the instances
//     (Ready.Scaling) and says when one answers (InstanceUp);
//   - restarts in place (restart.go): out of routing for the cold start,
//     one load at a time, routable again unless something holds it;
//   - the degradation ladder (ladder.go): its cadence, what it reads, its
//     judgement of a request, and what an attempt's end tells the ladder
//     and the core (Observed), in one order for both drivers.
//
// What follows a ladder's verdict, a deferral, a failed attempt and a
// retry is the lifecycle's (sched.Lifecycle), which both drivers drive
// the same way.
//
// Like the core, it reads no clock, draws no random number, starts no
// goroutine and does no I/O: every method takes the driver's now. It must
// not import sim, the twin's root package or any live package; it reads
// the scenario's types (internal/layering_test.go holds both rules).
package reqengine
