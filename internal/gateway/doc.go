// Package gateway is the live gateway: an OpenAI-compatible front end
// (/v1/chat/completions, /v1/completions, streamed as server-sent events or
// not, /v1/models and /v1/models/{id}, /healthz, /metrics) that drives the
// request engine (twin/reqengine) and the scheduler core (twin/sched) on
// the wall clock, in front of real backends. What the official OpenAI SDKs parse comes out of it:
// error objects with OpenAI's string codes, and a stream that fails midway
// ends with an error event (see Errors).
//
// # Imports
//
// The gateway takes its configuration from twin/compile (the core's config,
// the retry policy, the autoscalers') and drives twin/sched. It must not
// import the twin (twin, the root package): the two are drivers of one
// core, and what a report or a console needs of the gateway (the ladder,
// the scalers, the canaries' inputs) it hands through callbacks
// ([Gateway.Ladder], [Autoscaling.Scalers], [Gateway.CanaryInputs]) that
// its caller (internal/liverun) turns into the twin's types.
//
// # How the wall clock drives the request engine
//
// One mutex owns the request engine (reqengine.Engine), which owns the
// core. Every input carries now, the model time since the gateway started
// (see Time compression), and goes through the engine's Step: an arrival, an
// attempt's end (answered, failed, throttled with the provider's
// Retry-After, a stream cut), a client gone or a deadline passed, and Tick
// at the engine's wake-up. After each step the engine's Ready is carried out
// (one Ready, then Advance, in both drivers): breaker transitions and
// ejections are logged, and each request's decisions — the ladder's verdict,
// an offer and what follows it, a re-offer, an attempt to start on its
// replica, the outcome — are posted to its handler, which carries them out
// in order. The engine keeps the requests' own times (a deferral, a retry's
// backoff, the queue time-out), the core's (a quota refilling, a
// throttle ending), the ladder's, the canaries' and the scalers'
// evaluations and the restarted replicas' loads, and asks for one
// wake-up: the gateway's model-time schedule calls Tick then, and carries
// out what they decided (a ladder's move and a canary's decision logged
// and counted, an instance started or stopped: autoscale.go). No handler
// sleeps or arms a timer of its own; the core and the engine never read a
// clock. A probe's result, an instance answering, a restart and a shadow
// copy's end are steps too. With policy.routing.hedge_after, the
// engine sends a duplicate (a hedge) to the handler still waiting for its
// attempt's first bytes, which steps the first result back and cancels
// the loser the engine names (each leg runs under its own context).
//
// # Time compression
//
// Config.Speed (fleetdrill gateway --speed) is model seconds per wall
// second, as the emulated nodes' --speed, so that a scenario can be replayed
// through the gateway and nodes N times faster than real time. The gateway
// lives in model time: the core's clock is wall time since the start ×
// Speed ([Gateway.Now]), and every duration it takes from the scenario or
// its config is model time, turned into wall time (÷ Speed) only where a
// timer is armed: the core's wake-up, the probe interval (at least 1 ms of
// wall time) and the health timeout (policy.health), the degradation
// ladder's evaluations (every 5 s, at least 1 ms of wall time), the
// engine's wake-up (its deferrals, policy.admission.defer_for, the retry
// backoff and policy.admission.queue_timeout among them), an upstream's
// Retry-After (a node at the same speed gives it in model seconds) and the
// class deadline. What the gateway
// reports is model time too: the Retry-After it sends, every latency
// histogram (gen_ai_server_time_to_first_token_seconds and the rest of the
// catalogue's, fleetdrill_gateway_ttft_seconds, _e2e_seconds), the TTFT fed
// to the lowest-latency routing strategy, X-Fleetdrill-Queue-Wait and the
// Observer's stamps. Speed 1 (the default) is real time. The
// network's own latency is compressed with the rest: a millisecond of HTTP
// overhead counts as Speed milliseconds of model time, so choose a speed
// that keeps it small beside the scenario's latencies and timeouts.
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
// several models assigns them to its replicas in turn (twin/compile). The
// flag --backend POOL=URL adds lines.
//
// # Keys
//
// Tenants are identified by API key (Authorization: Bearer KEY). A keys file
// holds one "TENANT KEY" per line ('#' comments), TENANT being the scenario's
// tenant name; a tenant may have several keys, a key only one tenant. Keys are
// compared in constant time against every key (SHA-256 digests, crypto/subtle);
// an unknown key gets 401 invalid_api_key. The key never reaches a backend, a log or a metric:
// telemetry names tenants by their scenario name.
//
// ReadKeysFile refuses a file its group or others may read (chmod 600)
// and a key shorter than 32 characters (naming the line, never the key);
// a line may give a key by its SHA-256 digest, "TENANT sha256:HEX", so
// that the file need not hold the keys. Config.MetricsApart (fleetdrill
// gateway --metrics-listen) keeps /metrics, which names tenants and
// backends, off the serving Handler: MetricsHandler serves it on a
// listener of its own.
//
// Backends started with an API key (fleetdrill node's, vLLM's --api-key)
// get Config.BackendKey: the gateway's transport adds "Authorization:
// Bearer KEY" to every upstream request, completions, hedges, probes, load
// scrapes and Backends.Check alike (backendkey.go). A client's Authorization
// is never forwarded: upstream requests are built afresh. A backend's 401
// or 403 at Backends.Check says whether the key is missing or refused.
//
// # Token counts
//
// The core charges quotas in tokens before the backend has tokenized
// anything, so the gateway estimates: input tokens = ceil(B/4) + 4 per chat
// message, B being the bytes of the JSON-encoded prompt or messages' content
// (about four bytes per token for English BPE vocabularies); output tokens =
// max_completion_tokens, else max_tokens, else Config.DefaultMaxTokens,
// times the choices asked for: max(n, best_of), each a generation of its
// own (more than 8, or fewer than 1, is 400 invalid_value with param n or
// best_of). Prompts are never logged.
//
// When the upstream's answer says what it used (OpenAI's usage:
// prompt_tokens and completion_tokens, in a non-streamed body or in a
// stream's usage chunk, which a client gets by asking
// stream_options.include_usage), the core is told (sched.Core.Reconcile)
// and the tenant's token bucket is charged that instead of the estimate:
// the difference is refunded, or taken (never below an empty bucket, each
// side capped at the bucket's burst). An answer that says nothing keeps the
// estimate's charge. Only the attempt that answered is reconciled.
//
// A client cannot make a backend do work the gateway did not charge:
// x_fleetdrill (the emulated node's exact lengths) is removed from every
// body unless the request carries Config.ReplaySecret in
// X-Fleetdrill-Replay (compared in constant time; no secret configured:
// nobody may), which the live harness's replay sets per run. No client
// header goes upstream: the gateway sends its own (X-Fleetdrill-Class the
// class it resolved, Idempotency-Key, Content-Type, Accept), so a client's
// X-Fleetdrill-Input-Tokens or X-Fleetdrill-Output-Tokens never reaches a
// node.
//
// # Requests, retries, outcomes
//
// A request the gateway refuses itself, before the core sees it (401, 413,
// 400, 404 for an unknown model, 429 when the in-flight body budget is
// full), is counted in fleetdrill_gateway_requests_total with outcome
// refused (tenant "-" when no key matched, class "-" when not yet known)
// and in fleetdrill_gateway_refused_total{reason}, and logged in one line
// ("refused": tenant, class, status, reason; never the key, the prompt or
// the client's address). limits.go holds these limits.
//
// Every request that passes authentication and validation ends with exactly
// one outcome, counted in fleetdrill_gateway_requests_total{tenant, class,
// outcome}: completed (an upstream 2xx), failed (upstream errors after the
// last attempt, an upstream 4xx passed through, a stream broken midway),
// rejected (the core refused it, or upstream 429s outlasted the retries:
// 429 with Retry-After), cancelled (the client went away), timed_out (the
// class deadline or the queue timeout passed).
//
// A request of a deferrable class that the core defers (sched.Deferred: its
// tenant's quota or a full queue) is not refused (sched.Lifecycle's Reoffer,
// both drivers'): it waits the core's retry-after (policy.admission.defer_for at least) and is
// offered again, until it is admitted, its class deadline passes (504,
// timed_out) or its client goes away. Each deferral is counted in
// fleetdrill_gateway_deferrals_total{tenant, class, reason}. Every offer to
// the core counts as an attempt, deferred ones included (sched.Life).
//
// A failed attempt (transport error, 5xx, no response headers within
// policy.health.timeout) counts against its backend's breaker (core.Observe)
// and is retried by sched.Lifecycle's rule: up to policy.retries.max_attempts, after an
// exponential backoff with full jitter, within the retry budget (the
// requests retrying at once at most budget × requests in flight, or 10).
// What happens next is sched.Lifecycle's answer: the gateway only carries
// it out. An upstream 429 is quota, not ill health: it
// does not count against the breaker; the core keeps the pool out of
// routing for its Retry-After (core.Throttled, what a simulated quota fault
// calls too), and the request is retried after its backoff, elsewhere; only
// when its attempts run out does the client get 429 upstream-quota with
// that Retry-After. Where a retry goes is the core's routing decision
// (breakers, throttles, residency, fallbacks).
//
// # Errors
//
// Every error of the gateway's own is OpenAI's error object,
// {"error": {"message", "type", "param", "code"}}, code a string and param
// null unless a field of the request is at fault, so that the official SDKs
// decode it (openai-go: *openai.Error with StatusCode, Type, Param, Code):
//
//   - 401 invalid_request_error invalid_api_key: an unknown key (every
//     endpoint).
//   - 404 invalid_request_error model_not_found, param model: a model the
//     gateway does not know (GET /v1/models/{id}: one it does not serve).
//   - 400 invalid_request_error invalid_body: the body unreadable or not
//     JSON; unknown_request_class: X-Fleetdrill-Class names no class;
//     invalid_value, param max_tokens or max_completion_tokens: a negative
//     one; param n or best_of: not between 1 and 8.
//   - 413 invalid_request_error request_too_large: a body over
//     Config.MaxBodyBytes (default 1 MiB), refused from its Content-Length
//     before it is read, or when a chunked body runs over while it is.
//   - 429 requests rate_limit_exceeded, with Retry-After: the request
//     bodies in flight fill Config.MaxInflightBodyBytes (default 128 MiB;
//     each body is reserved, from its Content-Length or the body limit
//     when unknown, before it is read).
//   - 400 invalid_request_error context_length_exceeded, param max_tokens,
//     max_completion_tokens, messages or prompt: too large for every pool
//     that may serve it (below).
//   - 429 requests or tokens, rate_limit_exceeded, with Retry-After: the
//     core's refusals (tenant-concurrency, tenant-token-rate, queue-full,
//     deadline-infeasible, upstream-quota when every pool that may serve it
//     is throttled past its deadline), load-shed, upstream-quota.
//   - 503 server_error no_route: no pool may serve the request (residency,
//     no pool serving the model); jurisdiction_unavailable, with
//     Retry-After: every pool that may serve it is down now (breakers
//     open, replicas lost), reason jurisdiction-unavailable, the hint when
//     the first is expected back; queue_timeout, with Retry-After: no
//     replica within policy.admission.queue_timeout (the twin's
//     timeout too).
//   - 504 server_error deadline_exceeded: the class deadline passed.
//   - 502 server_error upstream_error: upstream failures outlasted the
//     retries.
//
// A 429's type is tokens for tenant-token-rate, requests otherwise, as
// OpenAI names the limit. A backend's own answer (a 4xx) passes through as
// it came; one for the request's own fault (clientFault: 400, 413, 422...,
// not 401, 403, 404, 408 or 429) is a refusal, outcome rejected, reason
// upstream-invalid-request: not retried, no breaker or canary hears of it.
//
// The largest request a pool takes is the smaller of the scenario's (its
// replicas' KV capacity) and what its servers publish, read at
// Backends.Check (serverlimits.go: vLLM's and SGLang's max_model_len on
// /v1/models, TGI's max_total_tokens on /info) and given to the core
// (sched.Core.LimitContext), which every routing and feasibility check
// reads.
//
// The core refuses a request no pool can ever take with no-compatible-pool
// (X-Fleetdrill-Reason). When size alone is why (sched.Core.TooLarge: a
// pool serving the model, or an allowed fallback, in the tenant's
// jurisdiction would take a smaller request; all of them are too small for
// its KV) the answer is 400 context_length_exceeded, the client's to fix,
// which an SDK does not retry; param is the prompt's field (messages or
// prompt) when the prompt alone is too large, else the output's
// (max_completion_tokens when given, else max_tokens), and the message
// gives the estimate and the largest pool's KV tokens. Any other
// no-compatible-pool (residency, no pool serving the model) is the fleet's:
// 503 no_route (which an SDK retries, as any 5xx, unless told not to).
//
// A streamed answer's status goes out with its first byte. When the
// backend breaks under it afterwards (a transport error, or silence for
// the health timeout) or its class deadline passes, the stream ends with
// an error event and no data: [DONE]:
//
//	data: {"error":{"message":"...","type":"server_error","param":null,"code":"upstream_error"}}
//
// (code deadline_exceeded at the deadline), preceded by a newline that
// closes a line the backend left open. openai-go ends a stream with an
// error on an event whose data has an "error" member (Stream.Err is an
// *ssestream.StreamError); a stream that just stopped reads there as a
// short answer (Stream.Err nil). A client that asked for stream_options.include_usage gets
// the backend's usage chunk: the body goes upstream as sent.
//
// # Degradation ladder
//
// A scenario's policy.degradation runs from the code the twin runs too
// (sched.Ladder, and sched.Lifecycle.Degrade for the verdict and what follows;
// degrade.go carries it out). Every sched.LadderEvery (5 s
// of model time) the request engine, at a wake-up the gateway's schedule
// (schedule.go) steps, reads the core's oldest queued wait
// (core.OldestWait) and saturation (core.Saturation) and the error rate of
// the gateway's own attempts over the last 30 s (an attempt counts where it
// tells the breaker how it went: a 2xx or a response passed through is ok,
// a transport error, 5xx, header timeout or stream broken midway failed; a
// 429 or a cancelled attempt does not count), and engages or releases at
// most one step, logging it ("degradation") and telling the Observer. Each
// new request meets the engaged steps before its first offer:
//
//   - shed-batch, defer-async: a request of a deferrable class waits
//     policy.admission.defer_for and meets the ladder again, until its
//     class is no longer shed, its deadline passes (504) or its client goes
//     away; each wait is a deferral (X-Fleetdrill-Deferrals and
//     X-Fleetdrill-Attempts count it, fleetdrill_gateway_deferrals_total
//     with reason load-shed). A request of any other class is refused: 429,
//     X-Fleetdrill-Reason load-shed, Retry-After 5 (the ladder's next
//     evaluation, model seconds); it never reached the core
//     (X-Fleetdrill-Attempts 0).
//   - cap-output: the core's output estimate and the body sent upstream
//     are capped: max_completion_tokens and max_tokens where present,
//     max_tokens when neither is.
//   - smaller-model: the request is for the model's first fallback, and
//     the body's model says so; it is counted under that model, as in the
//     twin.
//   - cached-answers: the gateway has no answer cache; New refuses a ladder
//     with this step rather than run another policy than the twin.
//
// Requests the ladder changed are counted in
// fleetdrill_gateway_degraded_requests_total{action}; the steps engaged in
// fleetdrill_degradation_step (the catalogue's) and
// fleetdrill_gateway_degradation_step_engaged{step, action}.
//
// # Response headers
//
// Every answer to a request that passed authentication and validation
// says what happened, so that a drill (or a replay driver) can account for
// each request from the client side, in a run's report's terms:
//
//   - X-Fleetdrill-Outcome: completed, rejected, failed or timed_out, the
//     outcome label of fleetdrill_gateway_requests_total. On a response
//     passed through it is completed for a 2xx and failed otherwise; it goes
//     out with the first byte, so a stream that breaks afterwards (failed in
//     the metric) still says completed, and ends with an error event
//     instead of data: [DONE] (see Errors).
//   - X-Fleetdrill-Reason: on a rejection, the core's reason
//     (tenant-concurrency, tenant-token-rate, queue-full,
//     deadline-infeasible, jurisdiction-unavailable,
//     no-compatible-pool: 400 or 503, see Errors),
//     upstream-quota when
//     upstream 429s outlasted the retries, or load-shed when the
//     degradation ladder shed it; absent otherwise.
//   - X-Fleetdrill-Attempts: the offers to the core (the first, retries and
//     re-offers after a deferral), and the degradation ladder's deferrals
//     (offers deferred before the core saw them), so that the retries are
//     the attempts less the first and the deferrals (sched.Life.Offers,
//     Life.AllDeferrals).
//   - X-Fleetdrill-Deferrals: how many times the core (or the degradation
//     ladder) deferred the request; absent when none.
//
// A response passed through from a backend also carries X-Fleetdrill-Pool,
// X-Fleetdrill-Replica (the replica's index, see [Gateway.ReplicaIndex]),
// X-Fleetdrill-Model (the model that served it: a fallback shows) and
// X-Fleetdrill-Queue-Wait: the model seconds the request waited in the
// core's queue between its last offer and its dispatch, in decimal (0 when
// dispatched at once). Answers to requests that fail authentication or
// validation (401, 400, 404 for an unknown model) carry none of these.
//
// # Metrics
//
// /metrics serves the gateway's registry (Config.Registry, never the global
// one): the shared catalogue's series that the gateway observes ([Exported];
// names, help and labels from internal/signals, which a run's recorded
// metrics use too, so one dashboard reads both) and its own fleetdrill_gateway_* series. The
// time to first token and per output token come from the server-sent events
// of streamed responses as they pass through (metrics.go: streamMeter);
// queue depth, saturation, breakers and deployment state are read from the
// core at scrape time, without advancing its breakers; the requests waiting
// for their first token (how many, and the oldest's age, by class) are
// tracked from arrival to the answer's first bytes (waiting.go) and read at
// scrape time too, and [Gateway.Waiting] gives every age, for the live
// console's p99 that counts them. Each request's class goes upstream in
// X-Fleetdrill-Class, so an emulated node labels its own latencies alike.
// docs/metrics.md has every series and what it counts.
//
// # Observer and control
//
// Config.Observer is told, as they happen, every breaker transition, every
// failed upstream attempt (transport error or timeout as status 0, else the
// upstream's status) and every step of the degradation ladder engaged or
// released, stamped with the core's clock and naming the replica by its
// index. [Gateway.SetRetiring] announces a model's
// retirement, as a model-retirement fault's notice does in the twin: new
// requests for it go to its fallbacks first.
//
// # Injected faults
//
// [FaultLayer.Inject] ([Gateway.Faults]) puts an HTTP-level fault
// ([UpstreamFault]) on some replicas until its remove is called, in the
// manner of Envoy's HTTP fault filter: a drill injects it the same way in
// front of any backend (vLLM, SGLang, TGI, an emulated node), none of
// which needs an admin API. Every
// upstream attempt goes through the fault layer (faultlayer.go: one round
// trip, send, called from call) before it leaves: added latency (model
// time, counted against the health timeout as a slow link's), then an
// answer of the layer's own — a status such as 429 with Retry-After, 404
// model_not_found or 503 for some models only, or a seeded share of 500s
// (a stream of its own from Config.Seed) — or a dead backend (a refused
// connection, or nothing until the health timeout); otherwise the backend
// is contacted. The backend never sees an attempt the layer answers, and
// the rest of the gateway cannot tell the answer from a backend's: a 429
// throttles the pool in the core, a 5xx counts against the breaker, a 404
// is passed to the client, and the Observer hears of each. Faults on one
// replica stack and combine by faults.Condition, which the twin's use too
// (down first; a fault on the attempt's model; the highest fail rate; a
// fault on every model; latencies add up). Health probes do not go through the layer. Each
// injection and removal is logged ("fault injected", "fault removed");
// fleetdrill_gateway_injected_faults{pool, kind} counts the faults on
// each pool's replicas now, fleetdrill_gateway_fault_answers_total{pool,
// status} the attempts the layer answered (status 0: failed as down).
//
// Cancellation runs end to end: the upstream request's context derives from
// the client's, so a client that disconnects cancels the backend request,
// and the core is told Finish.
package gateway
