package scenarios

import (
	"os"
	"path/filepath"

	"github.com/fleetdrill/fleetdrill/traces"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// The scenario schema, version 1. Field names are the YAML keys; units are in
// the names or in the types (Duration). Every field is documented with
// an example in docs/scenarios.md, which a test keeps in step with this file.

// SchemaVersion is the only schema version this build reads.
const SchemaVersion = 1

// Scenario is one fleet, workload, policy and set of expectations.
type Scenario struct {
	Schema      int    `yaml:"schema"`
	Name        string `yaml:"name"`
	Description string `yaml:"description,omitempty"`

	Seed     uint64   `yaml:"seed"`
	Duration Duration `yaml:"duration"`         // simulated time during which requests arrive
	Warmup   Duration `yaml:"warmup,omitempty"` // requests arriving before this are run but not reported
	// Drain is how long the run continues after Duration so that requests in
	// flight can finish; what is still running then is reported as
	// in_flight_at_end. Default 10m.
	Drain Duration `yaml:"drain,omitempty"`

	Regions      []Region      `yaml:"regions"`
	Accelerators []Accelerator `yaml:"accelerators"`
	Runtimes     []Runtime     `yaml:"runtimes"`
	Models       []Model       `yaml:"models"`
	Pools        []Pool        `yaml:"pools"`
	// Purchasable are pool types not in the fleet today that could be
	// bought (each with its price and purchase terms). fleetdrill plan
	// chooses how many to buy. A type given replicas (usually by --set
	// purchasable[i].replicas=N, "as if N were bought") joins Pools when the
	// scenario is loaded (a copy: the list stays as written). Bought tells
	// which pools came from here.
	Purchasable []Pool      `yaml:"purchasable,omitempty"`
	Tenants     []Tenant    `yaml:"tenants"`
	Classes     []Class     `yaml:"classes"`
	Workload    []Stream    `yaml:"workload"`
	Jobs        []JobStream `yaml:"jobs,omitempty"`
	// Faults are injected during the run, one per line in the fault
	// syntax of docs/faults.md: "regional-outage region=us-east at=10m for=15m".
	Faults []string `yaml:"faults,omitempty"`
	// Canaries are route versions: a share of a model's eligible traffic
	// moved to candidate pools step by step, rolled back by triggers, or
	// mirrored to them as shadow traffic (canary.go, docs/canary.md).
	Canaries []Canary `yaml:"canaries,omitempty"`
	Policy   Policy   `yaml:"policy"`
	Expect   []string `yaml:"expect,omitempty"`

	// Dir is the directory of the scenario file, against which relative
	// trace paths resolve; empty for library scenarios, whose trace paths
	// resolve from the working directory.
	Dir string `yaml:"-"`
}

// Region is a failure domain with a data-residency tag.
type Region struct {
	Name         string `yaml:"name"`
	Jurisdiction string `yaml:"jurisdiction"` // e.g. "eu", "us"
}

// Accelerator is a GPU (or other accelerator) type.
type Accelerator struct {
	Name           string   `yaml:"name"`
	MemoryGiB      float64  `yaml:"memory_gib"`
	UsableFraction float64  `yaml:"usable_fraction"` // of memory, for weights + KV (vLLM's gpu_memory_utilization)
	Precisions     []string `yaml:"precisions"`      // e.g. [bf16, fp16, fp8]
	// BandwidthGBs is the memory bandwidth in GB/s, informative; profiles
	// carry the measured step costs.
	BandwidthGBs float64 `yaml:"bandwidth_gbs,omitempty"`
}

// Runtime is a serving engine build.
type Runtime struct {
	Name      string `yaml:"name"`       // e.g. vllm-0.6.3
	Server    string `yaml:"server"`     // e.g. vllm, tgi, trtllm, sglang
	Version   string `yaml:"version"`    // e.g. 0.6.3
	CUDA      string `yaml:"cuda"`       // e.g. "12.4"; empty for non-CUDA runtimes
	MinDriver string `yaml:"min_driver"` // e.g. "550.54"
}

// Model is a served model (one version).
type Model struct {
	Name          string   `yaml:"name"`
	ParametersB   float64  `yaml:"parameters_b"` // billions of parameters
	Layers        int      `yaml:"layers"`
	KVHeads       int      `yaml:"kv_heads"`
	HeadDim       int      `yaml:"head_dim"`
	Precision     string   `yaml:"precision"` // weights and KV precision, e.g. bf16
	ContextLength int      `yaml:"context_length"`
	Runtimes      []string `yaml:"runtimes"`   // runtimes that can serve it
	MinDriver     string   `yaml:"min_driver"` // e.g. "535.104"
	Quality       float64  `yaml:"quality"`    // 0..1, higher is better
	Fallbacks     []string `yaml:"fallbacks,omitempty"`
	// Disaggregation serves the model with prefill and decode on different
	// pools (the pools' role): nil, every pool that serves it prefills its
	// own prompts.
	Disaggregation *Disaggregation `yaml:"disaggregation,omitempty"`
}

// Disaggregation is how a model served disaggregated is prefilled
// (twin/sched/disagg.go): its decode pools (role decode) take the
// requests, and each prompt is prefilled on a prefill pool (role prefill)
// of the decode pool's region and its KV cache moved over the link, or on
// the decode replica itself, as the decider says.
type Disaggregation struct {
	// Decider: always (every prompt remotely), conditional (remotely when
	// longer than max_local_prefill_length and fewer than
	// max_prefill_queue_size remote prefills are under way, as Dynamo's
	// disaggregated router decides) or never.
	Decider               string `yaml:"decider"`
	MaxLocalPrefillLength int    `yaml:"max_local_prefill_length,omitempty"`
	MaxPrefillQueueSize   int    `yaml:"max_prefill_queue_size,omitempty"`
	// Link is what the KV cache moves over, from a prefill replica to a
	// decode replica.
	Link KVLink `yaml:"link"`
}

// KVLink is a P/D link: a built-in kind (twin/kvlink: nvlink, rdma, tcp)
// and, to replace the kind's figures with measured ones, the bandwidth per
// GPU of the decode replica and the latency per transfer.
type KVLink struct {
	Kind         string   `yaml:"kind"`
	BandwidthGBs float64  `yaml:"bandwidth_gbs,omitempty"`
	Latency      Duration `yaml:"latency,omitempty"`
}

// Pool is a set of identical replicas in one region from one provider.
type Pool struct {
	Name           string   `yaml:"name"`
	Region         string   `yaml:"region"`
	Provider       string   `yaml:"provider"`
	Accelerator    string   `yaml:"accelerator"`
	GPUsPerReplica int      `yaml:"gpus_per_replica"` // tensor-parallel degree
	Replicas       int      `yaml:"replicas"`
	Runtime        string   `yaml:"runtime"`
	Driver         string   `yaml:"driver"`
	Models         []string `yaml:"models"`
	// MaxBatch caps the sequences a replica runs at once (vLLM max_num_seqs)
	// and so the requests the router dispatches to it.
	MaxBatch        int      `yaml:"max_batch"`
	PricePerGPUHour float64  `yaml:"price_per_gpu_hour"` // currency units per GPU-hour
	ColdStart       Duration `yaml:"cold_start"`         // time to load a model onto a replica
	// PrefixCaching keeps prompt blocks cached in each replica's free KV
	// memory (vLLM's automatic prefix caching): a request whose leading
	// blocks are cached skips their prefill. Only traces with prefix-block
	// hashes (Mooncake's hash_ids) give the twin blocks to cache.
	PrefixCaching bool `yaml:"prefix_caching,omitempty"`
	// StartCold makes the replicas load their model at the start of the
	// run (a fresh deployment) instead of starting warm.
	StartCold bool  `yaml:"start_cold,omitempty"`
	Quota     Quota `yaml:"quota,omitempty"`
	// Profiles gives the measured performance for each served model, keyed
	// by model name. A pairing without a profile is untested.
	Profiles map[string]Profile `yaml:"profiles,omitempty"`
	// GPU, TensorParallel, ModelConfig and Precision derive a profile from
	// the physical step-time model (twin/latency/physics.go) for the pool's
	// model that has no entry in profiles, without a measured run: GPU names
	// a row of the spec table (H100, H200, A100-80GB, L40S, B200, …; empty:
	// the accelerator's name), ModelConfig a Hugging Face config.json (a
	// path relative to the scenario, or a shipped model such as
	// llama-3.1-70b-instruct), Precision the weights' (bf16, fp16 or fp8;
	// empty: the checkpoint's own). TensorParallel is gpus_per_replica.
	GPU            string `yaml:"gpu,omitempty"`
	TensorParallel int    `yaml:"tensor_parallel,omitempty"`
	ModelConfig    string `yaml:"model_config,omitempty"`
	Precision      string `yaml:"precision,omitempty"`
	// KVCacheDtype is vLLM's --kv-cache-dtype for a derived profile:
	// empty or auto keeps 16-bit KV, fp8 halves each token's KV bytes (and
	// doubles the cache's tokens).
	KVCacheDtype string `yaml:"kv_cache_dtype,omitempty"`
	// ExpertParallel spreads a MoE model's routed experts, whole, over this
	// many GPUs: the TP GPUs of ExpertParallel/TP replicas (vLLM's
	// --enable-expert-parallel with data parallelism). 0 or 1: every GPU
	// of a replica holds a slice of every expert.
	ExpertParallel int `yaml:"expert_parallel,omitempty"`
	// Coefficients replace the GPU family's built-in coefficients of a
	// derived profile (as fleetdrill calibrate --benchmark --out writes
	// them).
	Coefficients *latency.Coeffs `yaml:"coefficients,omitempty"`
	// Service, when set, replaces the batching model: each replica serves
	// one request at a time with the given service-time distribution, which
	// makes the pool an M/M/c (or M/D/c) queue.
	Service *Service `yaml:"service,omitempty"`
	// Purchase says how more of this pool's capacity is bought: how long
	// an order takes to arrive and the shortest term it binds to. Only
	// fleetdrill plan reads it (to date orders); nil is on demand, at once.
	Purchase *Purchase `yaml:"purchase,omitempty"`
	// Role is the pool's part in disaggregated serving: prefill (it
	// computes prompts for the decode pools of its region and serves no
	// client), decode (it serves a disaggregated model, its prompts
	// prefilled by a prefill pool as the model's decider says) or both
	// (empty: every pool today; it prefills its own prompts).
	Role string `yaml:"role,omitempty"`
	// KVLoadFailurePolicy is what a decode pool's replicas do when a
	// prompt's KV transfer fails: fail (the attempt fails, and is retried:
	// vLLM's default since vllm-project/vllm#34896) or recompute (the
	// decode replica prefills the prompt itself).
	KVLoadFailurePolicy string `yaml:"kv_load_failure_policy,omitempty"`
	// KVLeaseDuration is how long a prefill pool's replica keeps a
	// computed prompt's KV for a decode replica that no longer fetches it
	// (its transfer failed, or it was lost): vLLM's NIXL kv_lease_duration,
	// 30 s by default since vllm-project/vllm#41383 (older releases held it
	// VLLM_NIXL_ABORT_REQUEST_TIMEOUT, 480 s). A transfer's end, or a
	// request aborted by a decode replica still alive, frees it at once.
	KVLeaseDuration Duration `yaml:"kv_lease_duration,omitempty"`
	// Autoscale makes the pool's replica count follow a metric, as a
	// Kubernetes HPA (or KEDA) does; replicas is then the count it starts
	// with. nil: a fixed count.
	Autoscale *Autoscale `yaml:"autoscale,omitempty"`
	// Acquisition is how the pool's provider answers a scale-up: the
	// reservation, the on-demand cap and the provisioning delay. nil with
	// autoscale: on demand, granted at once, without limit.
	Acquisition *Acquisition `yaml:"acquisition,omitempty"`
}

// Autoscale is a pool's autoscaling policy, the HPA's (see
// twin/sched/autoscale.go for the rule and DefaultAutoscale* for the
// defaults).
type Autoscale struct {
	Metric string `yaml:"metric"` // utilization | queue | wait
	// Target is the busy batch-slot share for utilization, the requests
	// waiting per replica for queue; TargetWait the predicted wait for
	// wait.
	Target      float64  `yaml:"target,omitempty"`
	TargetWait  Duration `yaml:"target_wait,omitempty"`
	MinReplicas int      `yaml:"min_replicas"`
	MaxReplicas int      `yaml:"max_replicas"`
	SyncPeriod  Duration `yaml:"sync_period,omitempty"`
	// The stabilization windows; nil scale-down: the HPA's 5 m.
	ScaleUpStabilization   Duration  `yaml:"scale_up_stabilization,omitempty"`
	ScaleDownStabilization *Duration `yaml:"scale_down_stabilization,omitempty"`
	// Tolerance around the target inside which nothing changes; nil: 0.1.
	Tolerance *float64 `yaml:"tolerance,omitempty"`
	// The most replicas added or removed per sync period; 0: 4 up, no
	// limit down.
	ScaleUpMax   int `yaml:"scale_up_max,omitempty"`
	ScaleDownMax int `yaml:"scale_down_max,omitempty"`
}

// Acquisition is how a pool's provider answers a scale-up request.
type Acquisition struct {
	// Reserved replicas are held: granted at once (only the cold start
	// before serving).
	Reserved int `yaml:"reserved,omitempty"`
	// Burst caps the on-demand replicas beyond the reservation; nil: no
	// cap (max_replicas).
	Burst *int `yaml:"burst,omitempty"`
	// Delay is an on-demand replica's provisioning delay, before its cold
	// start; nil: none.
	Delay *Delay `yaml:"delay,omitempty"`
	// BurstPrice multiplies price_per_gpu_hour for replicas beyond the
	// reservation; 0: 1 (the same price).
	BurstPrice float64 `yaml:"burst_price,omitempty"`
	// RetryAfter is how long a refused request waits before the pool asks
	// again; 0: one sync period.
	RetryAfter Duration `yaml:"retry_after,omitempty"`
}

// Delay is a provisioning-delay distribution.
type Delay struct {
	Distribution string   `yaml:"distribution"` // constant | exponential | lognormal
	Mean         Duration `yaml:"mean"`
	// Sigma is the lognormal's shape (the log's standard deviation);
	// 0: 0.5.
	Sigma float64 `yaml:"sigma,omitempty"`
}

// Purchase is how capacity of a pool type is bought.
type Purchase struct {
	// LeadTime is from order to serving traffic: procurement, racking,
	// burn-in, or a cloud's reservation queue.
	LeadTime Period `yaml:"lead_time,omitempty"`
	// MinTerm is the shortest commitment a purchase binds to (a reserved
	// instance's or a colocation contract's term); 0 is pay as you go.
	MinTerm Period `yaml:"min_term,omitempty"`
	// MaxReplicas is the most replicas the provider will sell in total,
	// today's included; 0 is no limit.
	MaxReplicas int `yaml:"max_replicas,omitempty"`
}

// Quota is a provider's rate limit on a pool. Zero means unlimited.
type Quota struct {
	RequestsPerMinute float64 `yaml:"requests_per_minute,omitempty"`
	TokensPerMinute   float64 `yaml:"tokens_per_minute,omitempty"`
}

// Profile is the measured performance of one model on one pool's replica:
// the step-time model of iteration-level continuous batching,
//
//	step = step_base + per_seq·B + per_prefill_token·P + per_kv_token·K
//
// for B running sequences, P prefill tokens in the step and K KV tokens held
// by the decoding sequences, never less than min_step. Costs are in
// microseconds (floats: a KV token costs hundredths of a microsecond).
type Profile struct {
	// Ref names a built-in profile (e.g. "h100-sxm/llama-3.1-8b/tp1");
	// fields set alongside it override the built-in values.
	Ref               string  `yaml:"ref,omitempty"`
	StepBaseUS        float64 `yaml:"step_base_us,omitempty"`
	PerSeqUS          float64 `yaml:"per_seq_us,omitempty"`
	PerPrefillTokenUS float64 `yaml:"per_prefill_token_us,omitempty"`
	PerKVTokenUS      float64 `yaml:"per_kv_token_us,omitempty"`
	MinStepUS         float64 `yaml:"min_step_us,omitempty"`
	// MaxBatchedTokens is the prefill token budget per step (vLLM
	// max_num_batched_tokens); prompts longer than it are chunked.
	MaxBatchedTokens int `yaml:"max_batched_tokens,omitempty"`
	// KVTokens overrides the KV capacity derived from memory (tokens per
	// replica). Use the engine's reported num_gpu_blocks × block_size.
	KVTokens int `yaml:"kv_tokens,omitempty"`
}

// Service is a request-level service-time distribution (see Pool.Service).
type Service struct {
	Distribution string   `yaml:"distribution"` // exponential | deterministic
	Mean         Duration `yaml:"mean"`
}

// Tenant is a customer of the fleet. Its name is an identifier that never
// reaches reports raw: reports use the name given here, which scenario
// authors choose (anonymised trace readers map raw ids to such names).
type Tenant struct {
	Name         string  `yaml:"name"`
	Jurisdiction string  `yaml:"jurisdiction,omitempty"` // requests must be served in regions with this tag; empty: anywhere
	Weight       float64 `yaml:"weight,omitempty"`       // fair-share weight, default 1
	// TokensPerMinute is the token-rate quota (input + output tokens);
	// zero is unlimited. Enforced by a token bucket with a one-minute burst.
	TokensPerMinute float64 `yaml:"tokens_per_minute,omitempty"`
	MaxConcurrency  int     `yaml:"max_concurrency,omitempty"` // requests admitted and unfinished; zero is unlimited
	// Cohort groups tenants that lend each other unused quota, reclaimed
	// when the lender needs it (Kueue's cohorts).
	Cohort string `yaml:"cohort,omitempty"`
}

// Class is a request class with its priority and SLOs.
type Class struct {
	Name     string `yaml:"name"`
	Priority int    `yaml:"priority"` // higher is served first by the priority policy
	SLO      SLO    `yaml:"slo"`
	// Deadline is the end-to-end time after which a request is cancelled
	// (timed out) wherever it is. Zero: no deadline.
	Deadline Duration `yaml:"deadline,omitempty"`
	// Deferrable classes (batch) are deferred rather than rejected when
	// admission is refused, and retried later.
	Deferrable bool `yaml:"deferrable,omitempty"`
	// QualityFloor is the lowest model quality this class accepts: a
	// fallback to a smaller model happens only if its quality meets it.
	QualityFloor float64 `yaml:"quality_floor,omitempty"`
}

// SLO are per-request latency objectives; a request meets the SLO when every
// non-zero objective is met.
type SLO struct {
	TTFT Duration `yaml:"ttft,omitempty"`
	TPOT Duration `yaml:"tpot,omitempty"`
	E2E  Duration `yaml:"e2e,omitempty"`
}

// Stream is one request stream: synthetic (arrivals and token
// distributions) or a trace replay (trace, with mapping rules).
type Stream struct {
	Name   string `yaml:"name"`
	Tenant string `yaml:"tenant"` // default tenant (trace streams: when no mapping rule sets one)
	Class  string `yaml:"class"`
	Model  string `yaml:"model"`
	// Trace replays a recorded trace instead of drawing synthetic
	// arrivals; Arrivals, InputTokens, OutputTokens and Diurnal must then
	// be left out.
	Trace *TraceSource `yaml:"trace,omitempty"`
	// Mapping assigns trace requests to tenants, classes and models, first
	// matching rule wins; fields a rule leaves empty keep the stream's.
	Mapping      []MapRule    `yaml:"mapping,omitempty"`
	Arrivals     Arrivals     `yaml:"arrivals,omitempty"`
	InputTokens  Distribution `yaml:"input_tokens,omitempty"`
	OutputTokens Distribution `yaml:"output_tokens,omitempty"`
	Diurnal      *Diurnal     `yaml:"diurnal,omitempty"`
	Start        Duration     `yaml:"start,omitempty"` // stream starts at this offset
	Stop         Duration     `yaml:"stop,omitempty"`  // and stops here; zero: at Duration
}

// TraceSource is a recorded trace replayed as a stream.
type TraceSource struct {
	// Path is the trace file (.gz is read transparently), relative to the
	// scenario file's directory.
	Path   string `yaml:"path"`
	Format string `yaml:"format,omitempty"` // azure | mooncake | burstgpt | canonical; empty: detect
	// Start and Duration select a window of the trace (relative to its
	// origin); the window's start arrives at the stream's start. Zero
	// duration: to the end of the trace.
	Start    Duration `yaml:"start,omitempty"`
	Duration Duration `yaml:"duration,omitempty"`
	// TimeScale multiplies every arrival time: 0.5 halves each gap, so the
	// same requests arrive twice as fast. Default 1.
	TimeScale float64 `yaml:"time_scale,omitempty"`
	// RateScale changes the rate without changing the trace's pace: above
	// 1 it superposes copies shifted by a seeded offset, below 1 it thins
	// with a seeded draw (keeping each request with probability RateScale).
	// Default 1.
	RateScale float64 `yaml:"rate_scale,omitempty"`
	// SkipBadRows counts and reports malformed rows instead of failing.
	SkipBadRows bool `yaml:"skip_bad_rows,omitempty"`
}

// MapRule assigns trace requests: when every field set in When equals the
// request's (the trace's own model, class or log type, tenant), and, for a
// rule with a share, a seeded draw falls in its share, the rule's tenant,
// class and model apply. Rules with shares split the requests they match
// in proportion (shares of one group should sum to at most 1).
type MapRule struct {
	When   MapMatch `yaml:"when,omitempty"`
	Share  float64  `yaml:"share,omitempty"`
	Tenant string   `yaml:"tenant,omitempty"`
	Class  string   `yaml:"class,omitempty"`
	Model  string   `yaml:"model,omitempty"`
}

// MapMatch selects trace requests by the trace's own fields.
type MapMatch struct {
	Model  string `yaml:"model,omitempty"`
	Class  string `yaml:"class,omitempty"`
	Tenant string `yaml:"tenant,omitempty"`
}

// Arrivals is an arrival process.
type Arrivals struct {
	Process string  `yaml:"process"` // poisson | gamma
	Rate    float64 `yaml:"rate"`    // mean requests per second
	CV      float64 `yaml:"cv,omitempty"`
}

// Diurnal modulates the rate: rate·(1 + amplitude·cos(2π(t − peak)/period)).
type Diurnal struct {
	Amplitude float64  `yaml:"amplitude"` // 0..1
	Period    Duration `yaml:"period"`    // default 24h
	Peak      Duration `yaml:"peak"`      // offset of the peak within the period
}

// Distribution is a named distribution of token counts.
type Distribution struct {
	Dist string  `yaml:"dist"` // constant | uniform | exponential | lognormal
	Mean float64 `yaml:"mean,omitempty"`
	CV   float64 `yaml:"cv,omitempty"` // lognormal: coefficient of variation
	// Min and Max are the bounds of a uniform distribution; for the others
	// they clip samples (Max 0: no upper clip). Samples are never below 1.
	Min int `yaml:"min,omitempty"`
	Max int `yaml:"max,omitempty"`
}

// JobStream is a stream of GPU jobs — training, fine-tuning, batch
// embedding — that take whole replicas out of serving while they run:
// synthetic (arrivals with a fixed shape) or from a pod trace.
type JobStream struct {
	Name   string `yaml:"name"`
	Kind   string `yaml:"kind"`             // training | fine-tuning | batch-embedding
	Tenant string `yaml:"tenant,omitempty"` // for residency: jobs run only in its jurisdiction
	// GPUs each job needs, on one pool (synthetic streams).
	GPUs int `yaml:"gpus,omitempty"`
	// Accelerators the jobs may run on; empty: any.
	Accelerators []string `yaml:"accelerators,omitempty"`
	// Duration is the work of each job: its run time without preemption
	// (synthetic streams).
	Duration Duration `yaml:"duration,omitempty"`
	// Window is how long after submission a job should be done; 0: none.
	Window Duration `yaml:"window,omitempty"`
	// CheckpointInterval is how often a running job saves its progress;
	// a preempted job resumes from its last checkpoint. 0: never, so a
	// preemption loses all progress.
	CheckpointInterval Duration `yaml:"checkpoint_interval,omitempty"`
	// Preemptible jobs may be stopped to give their replicas back to
	// serving when the policy says so (policy.jobs.preempt_queue).
	Preemptible bool     `yaml:"preemptible,omitempty"`
	Arrivals    Arrivals `yaml:"arrivals,omitempty"`
	// Trace takes the jobs from a pod trace instead (Alibaba's
	// openb_pod_list format): arrivals, GPU counts, GPU-type constraints
	// and run times.
	Trace *JobTrace `yaml:"trace,omitempty"`
}

// JobTrace is a pod trace replayed as GPU jobs.
type JobTrace struct {
	Path      string   `yaml:"path"`
	Format    string   `yaml:"format,omitempty"` // alibaba-pod; empty: detect
	Start     Duration `yaml:"start,omitempty"`
	Duration  Duration `yaml:"duration,omitempty"`
	TimeScale float64  `yaml:"time_scale,omitempty"`
	// GPUMap maps the trace's GPU types (G2, T4, V100M32...) to the
	// scenario's accelerators; a job constrained to unmapped types only is
	// reported unplaceable.
	GPUMap      map[string]string `yaml:"gpu_map,omitempty"`
	SkipBadRows bool              `yaml:"skip_bad_rows,omitempty"`
}

// Policy is the scheduling policy under test.
type Policy struct {
	Scheduler string    `yaml:"scheduler"`       // fifo | priority | wfq | edf
	Aging     Duration  `yaml:"aging,omitempty"` // priority: one level gained per Aging waited
	Admission Admission `yaml:"admission,omitempty"`
	Routing   Routing   `yaml:"routing,omitempty"`
	Jobs      JobPolicy `yaml:"jobs,omitempty"`
	Health    Health    `yaml:"health,omitempty"`
	Retries   Retries   `yaml:"retries,omitempty"`
	// Degradation is the ladder of graceful degradation, engaged step by
	// step as its triggers fire and released in reverse order, with
	// hysteresis.
	Degradation []DegradeStep `yaml:"degradation,omitempty"`
}

// DegradeStep is one rung of the degradation ladder.
type DegradeStep struct {
	Name string `yaml:"name"`
	// Action: shed-batch (refuse, or defer if deferrable, the class's new
	// requests), cap-output (cap output tokens), smaller-model (send the
	// model's requests to its fallback), cached-answers (serve a share of
	// the class from cache, its age disclosed), defer-async (defer the
	// class's deferrable requests).
	Action  string  `yaml:"action"`
	Trigger Trigger `yaml:"trigger"`
	// RecoverBelow is the fraction of every trigger threshold the signals
	// must fall under before the step is released; default 0.5.
	RecoverBelow float64 `yaml:"recover_below,omitempty"`
	// Hold is the least time a step stays engaged; default 1m.
	Hold Duration `yaml:"hold,omitempty"`

	Class           string   `yaml:"class,omitempty"`             // shed-batch, cached-answers, defer-async
	Model           string   `yaml:"model,omitempty"`             // smaller-model
	MaxOutputTokens int      `yaml:"max_output_tokens,omitempty"` // cap-output
	HitRate         float64  `yaml:"hit_rate,omitempty"`          // cached-answers: share served from cache
	CacheAge        Duration `yaml:"cache_age,omitempty"`         // cached-answers: the age disclosed
}

// Trigger engages a step when any set signal reaches its threshold.
type Trigger struct {
	QueueWait  Duration `yaml:"queue_wait,omitempty"` // the oldest queued request's wait
	Saturation float64  `yaml:"saturation,omitempty"` // share of replicas that cannot take a request
	ErrorRate  float64  `yaml:"error_rate,omitempty"` // failed attempts / attempts over the last 30 s
}

// Health is how the gateway learns that replicas fail: it never reads the
// fault schedule, only request results and probes, through a circuit
// breaker per replica.
type Health struct {
	// ProbeInterval between health probes of every replica; default 10s.
	ProbeInterval Duration `yaml:"probe_interval,omitempty"`
	// Timeout after which a request or probe to an unresponsive replica
	// counts as failed; default 5s.
	Timeout Duration `yaml:"timeout,omitempty"`
	// Threshold is the consecutive failures that open a breaker; default 3.
	Threshold int `yaml:"threshold,omitempty"`
	// OpenFor is how long an open breaker waits before a trial; default 10s.
	OpenFor Duration `yaml:"open_for,omitempty"`
	// Outlier ejects replicas whose latency stands out from their peers',
	// as Envoy's outlier detection: breakers count failures only, so
	// without it a latency-only brownout goes undetected. On by default.
	Outlier Outlier `yaml:"outlier,omitempty"`
}

// Outlier is latency outlier ejection: a replica whose EWMA of dispatch to
// first token exceeds Factor × the median of the replicas serving the same
// model (or MaxLatency) once it has MinSamples samples is taken out of
// routing for BaseEjection × the times it was ejected, never more than
// MaxEjectionShare of its pool, and returns when that ends.
type Outlier struct {
	// Disabled turns ejection off: latency is then never a detection.
	Disabled bool `yaml:"disabled,omitempty"`
	// Factor over the peers' median that makes a replica an outlier;
	// default 3 (leaves room for slower hardware beside faster).
	Factor float64 `yaml:"factor,omitempty"`
	// MaxLatency ejects a replica slower than this whatever its peers do;
	// zero (the default): no absolute bound, since a fleet-wide overload
	// would eject half of every pool.
	MaxLatency Duration `yaml:"max_latency,omitempty"`
	// MinExcess over the peers' median below which nothing is an outlier
	// whatever the ratio; default 500ms (small latencies' ratios are
	// noise).
	MinExcess Duration `yaml:"min_excess,omitempty"`
	// MinSamples a replica needs before it is judged; default 5.
	MinSamples int `yaml:"min_samples,omitempty"`
	// BaseEjection is the first ejection's length; the n-th lasts n times
	// as long (at most ten times); default 30s.
	BaseEjection Duration `yaml:"base_ejection,omitempty"`
	// MaxEjectionShare of a pool's replicas ejected at once; default 0.5.
	// A pool's last replica is never ejected.
	MaxEjectionShare float64 `yaml:"max_ejection_share,omitempty"`
}

// Retries is how failed attempts are retried.
type Retries struct {
	// MaxAttempts per request, the first included; default 3. 1 disables
	// retries.
	MaxAttempts int `yaml:"max_attempts,omitempty"`
	// Backoff is the base of the exponential backoff (full jitter, seeded);
	// default 500ms. MaxBackoff caps it; default 10s.
	Backoff    Duration `yaml:"backoff,omitempty"`
	MaxBackoff Duration `yaml:"max_backoff,omitempty"`
	// Budget caps the requests retrying at once at this fraction of the
	// requests in flight (at least 10 may always retry), as Envoy's retry
	// budget; 0 means the default, 0.2.
	Budget float64 `yaml:"budget,omitempty"`
	// RetryRejected makes clients retry rejected requests too, after the
	// retry-after hint. IgnoreRetryAfter makes them retry at once, without
	// backoff or budget: a retry storm.
	RetryRejected    bool `yaml:"retry_rejected,omitempty"`
	IgnoreRetryAfter bool `yaml:"ignore_retry_after,omitempty"`
	// MigrationLimit migrates a request whose stream is cut after its
	// first tokens (its replica lost under it) up to this many times, as
	// Dynamo's frontend does: offered again at once, its prompt extended
	// by what it had generated, its stream continued. 0 (the default): a
	// cut stream fails.
	MigrationLimit int `yaml:"migration_limit,omitempty"`
}

// JobPolicy governs how GPU jobs share pools with serving.
type JobPolicy struct {
	// MaxPoolShare is the largest fraction of a pool's replicas that jobs
	// may hold at once; default 0.5.
	MaxPoolShare float64 `yaml:"max_pool_share,omitempty"`
	// PreemptQueue preempts the most recently started preemptible job on
	// a pool serving a model whose queue holds more than this many
	// requests; 0: jobs are never preempted.
	PreemptQueue int `yaml:"preempt_queue,omitempty"`
}

// Admission limits.
type Admission struct {
	// QueueLimit bounds the requests waiting per model; zero: 1000.
	QueueLimit int `yaml:"queue_limit,omitempty"`
	// DeadlineCheck rejects at arrival a request that no pool that may
	// serve it can start before its deadline (throttled, down, or the
	// queue ahead too slow; docs/scenarios.md, admission).
	DeadlineCheck bool `yaml:"deadline_check,omitempty"`
	// RetryAfter is the hint given with a rejection; zero: derived from the
	// predicted wait.
	RetryAfter Duration `yaml:"retry_after,omitempty"`
	// DeferFor is how long a deferred (batch) request waits before it is
	// offered to admission again; zero: 1m.
	DeferFor Duration `yaml:"defer_for,omitempty"`
	// QueueTimeout bounds each wait in the core's queue for a replica:
	// a request still queued that long times out (in the twin and the
	// live gateway alike, which answers 503 queue_timeout); zero: no bound
	// but the class deadline.
	QueueTimeout Duration `yaml:"queue_timeout,omitempty"`
}

// Routing chooses among the pools that can serve a request.
type Routing struct {
	Strategy string `yaml:"strategy,omitempty"` // least-loaded (default) | cheapest | round-robin
	// PrefixAffinity prefers, among replicas with room, the one that holds
	// the longest cached prefix of the request's prompt (pools with
	// prefix_caching), trading some load balance for prefill skipped.
	PrefixAffinity bool `yaml:"prefix_affinity,omitempty"`
	// HedgeAfter sends a duplicate of a request that has no first token
	// after this long to a second replica; whichever answers first wins
	// and the other is cancelled. Zero: no hedging.
	HedgeAfter    Duration `yaml:"hedge_after,omitempty"`
	AllowUntested bool     `yaml:"allow_untested,omitempty"`
	// Fallback lets a request go to the next model of its model's fallback
	// chain when no pool of its own model can take it.
	Fallback bool `yaml:"fallback,omitempty"`
	// IgnoreResidency routes regardless of tenants' jurisdictions: a
	// deliberately broken policy, to see what the residency check catches.
	IgnoreResidency bool `yaml:"ignore_residency,omitempty"`
	// LatencyHalfLife (lowest-latency) is how fast a pool's latency
	// estimate decays toward zero while it gets no traffic, so that a pool
	// left after a brownout is tried again; default 30s.
	LatencyHalfLife Duration `yaml:"latency_half_life,omitempty"`
}

// TracePath resolves a trace path of the scenario: absolute paths as they
// are, relative ones against the scenario file's directory. A library
// scenario has no directory: its relative paths resolve against the working
// directory or, failing that, the nearest of its parents where the path
// exists, so that `../shared/traces/...` works from anywhere in a checkout
// that has the shared folder beside it. An embedded trace's path
// ("embedded:NAME", package traces) is no file's and comes back as it is:
// the trace readers open it (the library's scenarios replay only those, so
// that they run anywhere).
func (s *Scenario) TracePath(path string) string {
	if _, ok := traces.Name(path); ok || filepath.IsAbs(path) {
		return path
	}
	if s.Dir != "" {
		return filepath.Join(s.Dir, path)
	}
	dir, err := os.Getwd()
	if err != nil {
		return path
	}
	for {
		cand := filepath.Join(dir, path)
		if _, err := os.Stat(cand); err == nil {
			return cand
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return path
		}
		dir = parent
	}
}

// Derives reports whether a pool derives a profile from the physical model
// (any of gpu, tensor_parallel, model_config, precision, coefficients).
func (pl *Pool) Derives() bool {
	return pl.GPU != "" || pl.TensorParallel != 0 || pl.ModelConfig != "" || pl.Precision != "" || pl.Coefficients != nil || pl.ExpertParallel != 0 || pl.KVCacheDtype != ""
}

// LimitsOnly reports whether a profile gives only engine limits
// (max_batched_tokens, kv_tokens, min_step_us) and no costs: on a pool that
// derives its profile, such an entry sets the derived profile's limits (the
// engine's own max_num_batched_tokens and reported KV capacity) instead of
// replacing it.
func (p Profile) LimitsOnly() bool {
	return p.Ref == "" && p.StepBaseUS == 0 && p.PerSeqUS == 0 && p.PerPrefillTokenUS == 0 && p.PerKVTokenUS == 0
}

// GPUName is the spec-table name a derived profile looks up, and the key
// that gives it: gpu, or else the accelerator's name.
func (pl *Pool) GPUName() (name, key string) {
	if pl.GPU != "" {
		return pl.GPU, "gpu"
	}
	return pl.Accelerator, "accelerator"
}

// Placement lays a model of shape m out on gpu as the pool's derived-profile
// keys say (tensor parallelism, precisions, expert parallelism): the one
// place the validator and the twin build it. Normalize checks it.
func (pl *Pool) Placement(gpu latency.GPU, m latency.ModelConfig) latency.Placement {
	return latency.Placement{GPU: gpu, Model: m, TP: max(pl.GPUsPerReplica, 1), Precision: pl.Precision,
		EP: pl.ExpertParallel, KVDtype: pl.KVCacheDtype}
}
