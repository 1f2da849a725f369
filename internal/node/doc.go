// Package node is fleetdrill's emulated inference node: an OpenAI-compatible
// HTTP server (/v1/chat/completions, /v1/completions, /v1/models, /health
// and /healthz, /metrics; the /v1 paths optionally behind an API key) whose
// timing comes from the twin's continuous-batching model (twin/engine
// driven by a twin/latency profile) run against the wall clock, plus an
// admin API that switches the application-level faults TCP cannot express
// (quota exhaustion, model retirement, a driver change, an error rate). It
// stands in for a vLLM/TGI replica in live drills: in a FROM scratch
// container behind toxiproxy, or in-process in tests.
//
// It configures itself from a scenario with twin/compile (FromScenario:
// the compatibility registry and the pool's profiles, resolved once there
// for every driver) and must not import the twin (twin, the root package).
//
// # Timing
//
// One goroutine (the loop, loop.go) owns one engine.Replica per served
// model. Engine time is wall time since the node started, times Config.Speed.
// The loop sleeps until the earliest of: the end of a replica's current
// segment (engine.Replica.Next), the next interpolated token release, a new
// request, a cancellation, or shutdown. At a segment end it calls Advance and
// releases to each request exactly the tokens the engine says it generated.
// The engine skips ahead over runs of identical decode steps (one event per
// batch composition change), so within such a run the loop releases tokens
// one step at a time at evenly spaced times between the run's start and end:
// step times in a run differ only by the KV term (PerKVToken·B per step, well
// under a percent of StepBase), so even spacing is what a client of a real
// engine sees, within scheduling jitter. The last token, and so [DONE],
// arrives exactly at the engine's completion time.
//
// # Requests
//
// Prompt content is never stored, logged or exported: only its length is
// used, counted in place as the body is decoded. A body is read within the
// gateway's limits (httpguard.BodyBudget: Config.MaxBodyBytes,
// MaxInflightBodyBytes) and by its rules (openai.DecodeRequest: UTF-8, one
// JSON value; n and best_of 1). A count a client states is an integer in
// [1, MaxTokenCount], checked before any arithmetic. Input tokens are the
// x_fleetdrill.input_tokens body field or the
// X-Fleetdrill-Input-Tokens header when given, otherwise estimated as
// ceil(characters/4) of the prompt (or of each message's content, summed),
// at least 1. Output tokens are x_fleetdrill.output_tokens or
// X-Fleetdrill-Output-Tokens, else max_completion_tokens, else max_tokens,
// else Config.DefaultMaxTokens, raised to vLLM's min_tokens when the request
// names no length (min_tokens above a named length, or negative, is a 400
// as in vLLM); the node always generates exactly that many tokens of filler
// text, so vLLM's ignore_eos changes nothing. stream_options.include_usage
// ends a stream with a usage chunk (empty choices) before [DONE]. A client
// that disconnects cancels its sequence in the engine, which frees its
// batch slot and KV at the end of the step in progress.
//
// # Metrics
//
// Config.Registerer receives the node's series: its own fleetdrill_node_*
// ones (wall seconds) and the shared catalogue's that a replica observes
// ([Exported]: time to first token, per output token and end to end in
// engine seconds; KV allocatable, preemptions and cold starts), labelled by
// Config.Pool and Config.Region and by the request's X-Fleetdrill-Class
// when it names one of Config.Classes (the gateway forwards it), else
// "unknown". A node emulates no model load: its cold-start counter stays 0.
//
// The vLLM flavors add vLLM's series a router reads, labelled model_name
// and engine ("0"), read from the engines: vllm:num_requests_running (the
// batch), vllm:num_requests_waiting (the queue), vllm:kv_cache_usage_perc
// (KV used over capacity, 0 to 1; vllm:gpu_cache_usage_perc for 0.8),
// vllm:num_preemptions_total, vllm:prompt_tokens_total (counted when a
// sequence's prefill completes), vllm:generation_tokens_total (counted as
// tokens are released, so a client that read a token finds it counted) and
// vllm:time_to_first_token_seconds (engine seconds, as the catalogue's).
// docs/metrics.md has every series.
//
// # Flavors
//
// Config.Flavor chooses the server the node answers as; the engine times
// every flavor alike. FlavorFleetdrill (the default) serves /healthz ("ok")
// and /health, OpenAI error bodies with string codes (model_not_found) and
// models owned by fleetdrill. FlavorVLLM answers as vLLM's OpenAI server
// does since 0.10.1 (checked against vllm/entrypoints/openai and
// vllm/v1/metrics/loggers.py): /health only (200, empty body; /healthz is
// vLLM's 404), {"error": {"message", "type", "param", "code"}} bodies with
// the HTTP status as an integer code and vLLM's types and messages ("The
// model `x` does not exist.", NotFoundError, param "model"), vLLM's model
// cards (owned_by "vllm", root, max_model_len: the replica's KV capacity,
// past which the node refuses a request), a request without a model served
// by the first, an unfinished stream ending in an error event and [DONE],
// and vLLM's series beside the node's own (see Metrics). FlavorVLLM08
// answers as vLLM 0.8: flat {"object": "error", ...} bodies, the older
// context-length sentence, and vllm:gpu_cache_usage_perc for
// vllm:kv_cache_usage_perc. The admin API keeps fleetdrill's bodies in every
// flavor.
//
// # API key
//
// With Config.APIKey the node guards its API as vLLM's --api-key does:
// every path under /v1 needs "Authorization: Bearer KEY" (compared by
// SHA-256 digest, in constant time), else a 401: OpenAI's invalid_api_key
// error, or vLLM's {"error": "Unauthorized"} in the vLLM flavors. /health,
// /healthz and /metrics stay open for probes and scrapes; the admin API
// has its own token. Without a key the API is open.
//
// It must not be imported by twin/ or sim/. Start reading at New and
// Node.Handler.
package node
