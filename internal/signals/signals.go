// Package signals names the operational signals fleetdrill exports: the
// series the live gateway and the emulated node serve on /metrics, and the
// same series the twin writes in simulated time (fleetdrill run
// --openmetrics), so one dashboard reads both.
//
// Where an established gateway already names a signal, the name follows it
// so existing dashboards and alerts carry over: LiteLLM's deployment state,
// fallbacks and cool-downs; the OpenTelemetry GenAI semantic conventions for
// time to first token and time per output token (gen_ai.server.* become
// gen_ai_server_*_seconds in Prometheus). Labels name scenario objects —
// model, pool, region, class, reason, canary — never prompt text and never a raw
// tenant identifier (tenants appear only by their scenario alias, and only
// where a per-tenant quota makes them an operator's concern).
package signals

// Type is a series' Prometheus type.
type Type string

const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Signal is one series family.
type Signal struct {
	Name   string
	Type   Type
	Help   string
	Labels []string
}

// The catalogue. Names are Prometheus base names (histograms add _bucket,
// _sum, _count; counters end in _total).
var (
	TTFT = Signal{"gen_ai_server_time_to_first_token_seconds", Histogram,
		"Time to first token (OpenTelemetry gen_ai.server.time_to_first_token), by served model, pool, region and class.",
		[]string{"model", "pool", "region", "class"}}
	TPOT = Signal{"gen_ai_server_time_per_output_token_seconds", Histogram,
		"Time per output token after the first (OpenTelemetry gen_ai.server.time_per_output_token).",
		[]string{"model", "pool", "region", "class"}}
	E2E = Signal{"fleetdrill_request_duration_seconds", Histogram,
		"End-to-end latency of completed requests, arrival at the gateway to the last token.",
		[]string{"model", "pool", "region", "class"}}
	Requests = Signal{"fleetdrill_requests_total", Counter,
		"Requests by requested model, class and outcome (completed, rejected, failed, timed_out, cancelled); each request counted once, when it ends.",
		[]string{"model", "class", "outcome"}}
	Rejected = Signal{"fleetdrill_rejected_requests_total", Counter,
		"Requests the gateway refused, by class and reason (tenant-concurrency, tenant-token-rate, queue-full, deadline-infeasible, no-compatible-pool, upstream-quota, jurisdiction-unavailable).",
		[]string{"class", "reason"}}
	Throttled = Signal{"fleetdrill_throttled_requests_total", Counter,
		"Upstream attempts answered 429 (provider quota), by pool and region.",
		[]string{"pool", "region"}}
	QueueDepth = Signal{"fleetdrill_queue_depth", Gauge,
		"Requests waiting in the gateway's queues, by model.",
		[]string{"model"}}
	OldestWaiting = Signal{"fleetdrill_oldest_waiting_seconds", Gauge,
		"Age of the oldest request of the class still waiting for its first token (queued, deferred, retrying or prefilling), in model seconds; 0 when none waits.",
		[]string{"class"}}
	WaitingRequests = Signal{"fleetdrill_waiting_requests", Gauge,
		"Requests of the class waiting for their first token (queued, deferred, retrying or prefilling).",
		[]string{"class"}}
	KVAllocatable = Signal{"fleetdrill_kv_allocatable_tokens", Gauge,
		"KV-cache tokens free for new sequences, by pool and region (summed over replicas).",
		[]string{"pool", "region"}}
	Saturation = Signal{"fleetdrill_saturation_ratio", Gauge,
		"Share of the fleet's batch slots in use (0 to 1).",
		nil}
	Preemptions = Signal{"fleetdrill_preemptions_total", Counter,
		"Sequences preempted (KV exhausted), by pool.",
		[]string{"pool", "region"}}
	ColdStarts = Signal{"fleetdrill_cold_starts_total", Counter,
		"Replica cold starts (model loads), by pool.",
		[]string{"pool", "region"}}
	Routes = Signal{"fleetdrill_route_decisions_total", Counter,
		"Dispatches by requested model and the model that served (a fallback when they differ).",
		[]string{"model", "served_model"}}
	FallbacksOK = Signal{"litellm_deployment_successful_fallbacks_total", Counter,
		"Requests served by a fallback model (LiteLLM's name).",
		[]string{"requested_model", "fallback_model"}}
	FallbacksFailed = Signal{"litellm_deployment_failed_fallbacks_total", Counter,
		"Requests that had a fallback and still failed or were refused (LiteLLM's name).",
		[]string{"requested_model"}}
	DeploymentState = Signal{"litellm_deployment_state", Gauge,
		"Pool health from the router's view (LiteLLM's name): 0 healthy, 1 partial outage, 2 complete outage.",
		[]string{"pool", "region"}}
	CooledDown = Signal{"litellm_deployment_cooled_down", Gauge,
		"Replicas of a pool whose circuit breaker is open (LiteLLM's cool-down).",
		[]string{"pool", "region"}}
	Breaker = Signal{"fleetdrill_breaker_state", Gauge,
		"Circuit-breaker state per replica: 0 closed, 1 open, 2 half-open.",
		[]string{"pool", "region", "replica"}}
	DegradationStep = Signal{"fleetdrill_degradation_step", Gauge,
		"Rungs of the degradation ladder engaged (0: none).",
		nil}
	ForecastError = Signal{"fleetdrill_forecast_error_ratio", Gauge,
		"Relative error of the last window's demand forecast, |actual - forecast| / actual, by class (tokens).",
		[]string{"class"}}
	CanaryShare = Signal{"fleetdrill_canary_share", Gauge,
		"Each canary's share of its eligible traffic now (0 to 1), as its rollout last set it.",
		[]string{"canary"}}
	CanaryDecisions = Signal{"fleetdrill_canary_decisions_total", Counter,
		"Decisions of each canary's rollout by action (start, step-up, promote, hold, resume, rollback).",
		[]string{"canary", "action"}}
	ShadowRequests = Signal{"fleetdrill_shadow_requests_total", Counter,
		"Shadow copies sent to each canary's candidate, by how they ended (completed, failed, shed, cancelled); never answered to a client nor counted in the request series.",
		[]string{"canary", "outcome"}}
	AutoscaleReplicas = Signal{"fleetdrill_autoscale_replicas", Gauge,
		"An autoscaled pool's replicas now by state: requested (what its autoscaler asks for), provisioning (granted, the instance not up), warming (loading its model), serving, draining.",
		[]string{"pool", "state"}}
	AutoscaleAsks = Signal{"fleetdrill_autoscale_asks_total", Counter,
		"Replicas an autoscaled pool asked of its provider, by outcome: granted, or refused_reservation, refused_stockout, refused_quota; a replica asked again after a refusal counts again.",
		[]string{"pool", "outcome"}}
)

// All lists the catalogue.
var All = []Signal{TTFT, TPOT, E2E, Requests, Rejected, Throttled, QueueDepth, OldestWaiting, WaitingRequests,
	KVAllocatable, Saturation, Preemptions, ColdStarts, Routes, FallbacksOK, FallbacksFailed, DeploymentState, CooledDown, Breaker,
	DegradationStep, ForecastError, CanaryShare, CanaryDecisions, ShadowRequests,
	AutoscaleReplicas, AutoscaleAsks}

// AutoscaleStates are the AutoscaleReplicas signal's state label values,
// AutoscaleOutcomes the AutoscaleAsks signal's outcome label values, in
// the order series are created.
var (
	AutoscaleStates   = []string{"requested", "provisioning", "warming", "serving", "draining"}
	AutoscaleOutcomes = []string{"granted", "refused_reservation", "refused_stockout", "refused_quota"}
)

// LatencyBuckets are the histogram buckets of the latency signals, seconds.
var LatencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// TokenBuckets are the buckets of time per output token, seconds.
var TokenBuckets = []float64{.005, .01, .02, .03, .05, .075, .1, .15, .2, .3, .5, 1}
