// Package gateway is the live gateway: an OpenAI-compatible front end
// (/v1/chat/completions, /v1/completions, streamed as server-sent events or
// not, /v1/models, /healthz, /metrics) that drives the same scheduler core
// as the twin (twin/sched) on the wall clock, in front of real backends.
//
// # How the wall clock drives the core
//
// One mutex owns the core. Every input carries now = time.Since(start) (the
// gateway's start): an arrival (Arrive), a finished attempt (Finish), a
// result or probe (Observe). After each call the dispatches the core decided
// are handed to the waiting requests (each has a one-slot channel), and when
// the core asks to be woken (WakeAt: a provider quota refills) one
// time.Timer is armed to call Tick then. The core itself never reads a clock.
//
// # Backends
//
// A scenario's pools say what runs where (region, jurisdiction, models,
// max_batch, quotas); a backends file says where each replica answers. One
// replica per line, "POOL BASE-URL", '#' starts a comment:
//
//	# pool          base URL (the OpenAI API lives under BASE-URL/v1)
//	euw-a100-8b     http://10.0.1.5:8000
//	euw-a100-8b     http://10.0.1.6:8000
//	use-h100-8b     http://10.0.2.5:8000
//
// A pool gets exactly as many replicas as it has lines (the scenario's
// replicas count is replaced); a pool without lines gets none. A pool serving
// several models assigns them to its replicas in turn, as the twin does. The
// flag --backend POOL=URL adds lines.
//
// # Keys
//
// Tenants are identified by API key (Authorization: Bearer KEY). A keys file
// holds one "TENANT KEY" per line ('#' comments), TENANT being the scenario's
// tenant name; a tenant may have several keys, a key only one tenant. Keys are
// compared in constant time against every key (SHA-256 digests, crypto/subtle);
// an unknown key gets 401. The key never reaches a backend, a log or a metric:
// telemetry names tenants by their scenario name.
//
// # Token counts
//
// The core charges quotas in tokens before the backend has tokenized
// anything, so the gateway estimates: input tokens = ceil(B/4) + 4 per chat
// message, B being the bytes of the JSON-encoded prompt or messages' content
// (about four bytes per token for English BPE vocabularies); output tokens =
// max_completion_tokens, else max_tokens, else Config.DefaultMaxTokens.
// Prompts are never logged.
//
// # Requests, retries, outcomes
//
// Every request that passes authentication and validation ends with exactly
// one outcome, counted in fleetdrill_gateway_requests_total{tenant, class,
// outcome}: completed (an upstream 2xx), failed (upstream errors after the
// last attempt, an upstream 4xx passed through, a stream broken midway),
// rejected (the core refused it, or upstream 429s outlasted the retries:
// 429 with Retry-After), cancelled (the client went away), timed_out (the
// class deadline or the queue timeout passed).
//
// A failed attempt (transport error, 5xx, no response headers within
// policy.health.timeout) counts against its backend's breaker (core.Observe)
// and is retried as in the twin: up to policy.retries.max_attempts, after an
// exponential backoff with full jitter, within the retry budget (the
// requests retrying at once at most budget × requests in flight, or 10). An
// upstream 429 is quota, not ill health: it is retried after at least its
// Retry-After, and does not count against the breaker. Where a retry goes
// is the core's routing decision (breakers, residency, fallbacks).
//
// A served response carries X-Fleetdrill-Pool, X-Fleetdrill-Replica,
// X-Fleetdrill-Model (the model that served it: a fallback shows) and
// X-Fleetdrill-Attempts, so a drill can check routing from the client side.
//
// Cancellation runs end to end: the upstream request's context derives from
// the client's, so a client that disconnects cancels the backend request,
// and the core is told Finish.
package gateway
