// Package liverun replays a scenario through the live harness — a live fleet
// of emulated nodes in containers (internal/livefleet), behind toxiproxy,
// fronted by the live gateway (internal/gateway) — and reports it in the
// twin's own report shape, beside the twin's prediction for the same
// requests and faults.
//
// # Time
//
// Everything runs in model time compressed by Options.Speed: the nodes'
// engines, the gateway's scheduler clock (probes, breakers, backoff,
// deadlines) and the replay's arrival schedule all run Speed model seconds
// per wall second, so a 5-minute scenario at speed 10 takes 30 seconds.
// Times in the report are model times, read from the gateway's clock. What
// does not compress — HTTP, the loopback proxies, Docker's port forwarding,
// goroutine scheduling on a busy machine — is multiplied by Speed when seen
// in model time, so a higher speed costs fidelity: see docs/live.md for the
// measured trade-off.
//
// # Requests
//
// The replay sends exactly the requests the twin simulates (twin.Arrivals:
// same arrival times, tenants, classes, models and token counts), as
// streamed chat completions with a synthetic prompt of the right length
// (" the" repeated: about one token per word for common tokenizers; never
// real text), max_tokens set to the output length, and the exact lengths in
// the x_fleetdrill extension for emulated nodes (ignore_eos and min_tokens
// for vLLM). Each tenant gets a random API key for the run; classes travel
// in X-Fleetdrill-Class. The gateway lets x_fleetdrill through only with the
// run's random replay secret (gateway.Config.ReplaySecret), which every
// request carries in X-Fleetdrill-Replay.
//
// # Accounting
//
// Every request ends as exactly one twin.Outcome — completed, rejected,
// failed, timed out, cancelled, or in flight when the replay stopped
// waiting — read from the gateway's X-Fleetdrill-Outcome header and from the
// stream itself (a stream cut before its end is a failure), and a
// twin.Recorder builds the report, so the accounting invariant is checked
// on the live report as on the twin's.
//
// # Faults
//
// Each scenario fault, and each fault the console injects, is injected at
// its (compressed) time on the replicas a twin run hits (twin.FaultPlan) and
// undone at its end (inject.go: injectSpec). Its HTTP-level part (its
// kind's faults.Traits.Live has LiveGateway: a quota's 429s, a retired
// model's 404s, a driver's 503s, error shares) goes to the gateway's fault
// layer (Gateway.Faults().Inject), which answers the attempts before they
// leave, the same whatever the backend; its TCP-level part (LiveProxy,
// LiveContainer: outages, latency, lost nodes) to the fleet, through
// livefleet.InjectOn. A model retirement's notice (a kind whose
// faults.Traits say it starts FromNotice) steers new requests to fallbacks
// through Gateway.SetRetiring, the notice the twin's core gets. Faults the
// harness cannot emulate (faults.Spec.LiveGap: cold-start storms, tenant
// targets, non-zero quota cuts, a runtime-only driver upgrade) are refused
// before anything starts, with the fault named. Where a kind restarts
// replicas (faults.Traits.Restarts: a node loss's end, a driver upgrade
// and its rollback), the run restarts them at the instant the twin does
// (inject.go's injectSpec): the gateway
// holds each out of routing and probing for its pool's cold start
// (Gateway.Restart), and its instance is started again; a driver upgrade
// also takes the models the new driver cannot run off the pool's routes
// (Gateway.SetServes), from the compatibility registry the twin's
// upgradeDriver reads. Two tables here are keyed by a fault's kind:
// inject.go's gateway faults, one row per LiveGateway kind, and hybrid.go's
// external faults (the proxies' part on an endpoint with no proxy), one
// row per LiveProxy kind; tests hold both to the traits. Everything else
// reads the kind's faults.Traits.
package liverun
