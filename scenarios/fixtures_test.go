package scenarios

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Config fixtures in the Prometheus style: testdata/*.good.yaml must parse;
// each testdata/*.bad.yaml must fail with exactly the problems listed here,
// in order. When a message changes on purpose, update the table and read
// the diff: these lines are what users see.

func TestGoodFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.good.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f)
			require.NoError(t, err)
		})
	}
}

var badFixtures = map[string][]string{
	"disagg.bad.yaml": {
		"disagg.bad.yaml:26: models[0].disaggregation.decider: got \"sometimes\", want one of always, conditional, never",
		"disagg.bad.yaml:27: models[0].disaggregation.link.bandwidth_gbs: got -1, want >= 0",
		"disagg.bad.yaml:27: models[0].disaggregation.link.kind: got \"infiniband\", want one of nvlink, rdma, tcp",
		"disagg.bad.yaml:37: models[1].disaggregation.decider: got \"always\", max_local_prefill_length and max_prefill_queue_size are the conditional decider's; want decider: conditional, or leave them out",
		"disagg.bad.yaml:49: pools[0].models[1]: got \"plain\", a prefill pool serves disaggregated models only, and model plain has no disaggregation block; want one under models[2], or role both",
		"disagg.bad.yaml:51: pools[2].role: got \"decode\", decode pool d-west has no prefill pool for split in its region west (a KV cache moves within a region); want a pool with role prefill there, or role both",
		"disagg.bad.yaml:52: pools[3].role: got \"middle\", want one of both, prefill, decode",
		"disagg.bad.yaml:53: pools[4].role: got \"decode\", a service-time pool has no KV cache to move; want both (or leave it out), or profiles instead of service",
		"disagg.bad.yaml:53: pools[4].role: got \"decode\", decode pool s has no prefill pool for tidy in its region west (a KV cache moves within a region); want a pool with role prefill there, or role both",
	},
	"compat.bad.yaml": {
		"compat.bad.yaml:45: pools[0].gpus_per_replica: got 1, the bf16 weights of big (131.5 GiB) and a 4096-token KV cache do not fit in 1 x 72.0 GiB usable on a100; want >= 2",
		"compat.bad.yaml:48: pools[0].driver: got \"530.30.02\", want >= 535.104, the min_driver of model small-fp8",
		"compat.bad.yaml:49: pools[0].models[0]: got \"small-fp8\", runtime old cannot serve this model (its runtimes: new); want a model of that runtime or another runtime",
		"compat.bad.yaml:49: pools[0].models[0]: got \"small-fp8\", the model is fp8 and accelerator a100 supports only bf16, fp16; want a model in a precision it supports",
		"compat.bad.yaml:54: pools[0].profiles.big.ref: got \"a100-sxm-80gb/llama-3.1-70b/tp4\", the profile was measured at tensor parallelism 4 but the pool has gpus_per_replica 1; want a tp1 profile",
		"compat.bad.yaml:62: pools[1].driver: got \"550.54.15\", want >= 570.26, the min_driver of runtime new",
		"compat.bad.yaml:64: pools[1].max_batch: got 8, want 1 (or leave it out): a service-time pool serves one request per replica at a time",
		"compat.bad.yaml:67: pools[1].service: set either service (a fixed service-time queue) or profiles (the batching model), not both",
	},
	"trace.bad.yaml": {
		"trace.bad.yaml:59: workload[0].trace.path: got \"no-such-trace.csv\", no such file (looked for testdata/no-such-trace.csv); want a trace file, relative to the scenario file",
		"trace.bad.yaml:60: workload[0].trace.format: got \"parquet\", want one of azure, mooncake, burstgpt, canonical",
		"trace.bad.yaml:61: workload[0].arrivals: a trace stream takes its arrivals from the trace; leave arrivals out",
		"trace.bad.yaml:63: workload[0].mapping[0].share: got 1.5, want a fraction in (0, 1], or leave it out to take every matching request",
		"trace.bad.yaml:65: workload[0].mapping[1].model: got \"gpt-9\", no such model; want one of m",
		"trace.bad.yaml:66: workload[0].mapping[2]: the rule assigns nothing; want at least one of tenant, class, model",
		"trace.bad.yaml:69: jobs[0].kind: got \"inference\", want one of training, fine-tuning, batch-embedding",
		"trace.bad.yaml:70: jobs[0].gpus: got 0, want >= 1",
		"trace.bad.yaml:72: jobs[0].accelerators[0]: got \"tpu\", no such accelerator; did you mean \"gpu\"? (accelerators: gpu)",
		"trace.bad.yaml:77: jobs[1].trace: a trace job stream takes GPUs, run times and arrivals from the trace; leave gpus, duration and arrivals out",
		"trace.bad.yaml:78: jobs[1].trace.path: got \"embedded:alibaba_gpu_v2023/openb_pod_list_gpuspec33.csv\", no such embedded trace; want one of embedded:azure_llm_2023/AzureLLMInferenceTrace_conv.csv, embedded:mooncake_fast25/conversation_trace.jsonl, or a pod trace's path relative to the scenario file",
		"trace.bad.yaml:80: jobs[1].trace.gpu_map.G2: got \"h200\", no such accelerator; want one of gpu",
		"trace.bad.yaml:84: policy.jobs.max_pool_share: got 2, want a fraction in (0, 1]: the share of a pool's replicas jobs may hold",
	},
	"duplicate.bad.yaml": {
		"duplicate.bad.yaml:6: seed: duplicate key; first set at line 5",
		"duplicate.bad.yaml:14: accelerators[0].memory_gib: duplicate key; first set at line 13",
		"duplicate.bad.yaml:44: pools[0].profiles.m: duplicate key; first set at line 43",
	},
	"empty.bad.yaml": {
		"empty.bad.yaml: empty document; want a scenario, starting with schema: 1",
	},
	"enums.bad.yaml": {
		"enums.bad.yaml:14: accelerators[0].precisions[1]: got \"bf16\", listed twice",
		"enums.bad.yaml:14: accelerators[0].precisions[2]: got \"tf32\", want one of fp32, bf16, fp16, fp8, int8, int4, fp4",
		"enums.bad.yaml:16: runtimes[0].cuda: got \"twelve\", want a dotted version of numbers such as 12.4",
		"enums.bad.yaml:16: runtimes[0].min_driver: got \"550.x\", want a dotted version of numbers such as 550.54",
		"enums.bad.yaml:23: models[0].precision: got \"bfloat16\", want one of fp32, bf16, fp16, fp8, int8, int4, fp4",
		"enums.bad.yaml:26: models[0].min_driver: got \"535-104\", want a dotted version of numbers such as 535.104",
		"enums.bad.yaml:36: pools[0].driver: got \"latest\", want a dotted version of numbers such as 550.54.15",
		"enums.bad.yaml:41: pools[0].service.distribution: got \"normal\", want one of exponential, deterministic",
		"enums.bad.yaml:41: pools[0].service.mean: got 0s, want > 0, e.g. 2s",
		"enums.bad.yaml:52: workload[0].arrivals.process: got \"hawkes\", want one of poisson, gamma",
		"enums.bad.yaml:53: workload[0].input_tokens.dist: got \"normal\", want one of constant, uniform, exponential, lognormal",
		"enums.bad.yaml:54: workload[0].output_tokens.dist: missing; want one of constant, uniform, exponential, lognormal",
		"enums.bad.yaml:56: policy.scheduler: got \"lifo\", want one of fifo, priority, wfq, edf",
		"enums.bad.yaml:57: policy.routing.strategy: got \"random\", want one of least-loaded, cheapest, round-robin, ordered, lowest-latency",
	},
	"multidoc.bad.yaml": {
		"multidoc.bad.yaml:3: a second YAML document (after ---); want one scenario per file",
	},
	"notamapping.bad.yaml": {
		"notamapping.bad.yaml:1: got a list, want a mapping of scenario keys, starting with schema: 1",
	},
	"ranges.bad.yaml": {
		"ranges.bad.yaml:5: duration: got 0s, want > 0: the simulated time during which requests arrive, e.g. 30m",
		"ranges.bad.yaml:6: warmup: got -1m0s, want a duration >= 0",
		"ranges.bad.yaml:7: drain: got -5m0s, want a duration >= 0",
		"ranges.bad.yaml:13: accelerators[0].memory_gib: got 0, want > 0",
		"ranges.bad.yaml:14: accelerators[0].usable_fraction: got 1.5, want a fraction in (0, 1]",
		"ranges.bad.yaml:16: accelerators[0].bandwidth_gbs: got -1, want >= 0",
		"ranges.bad.yaml:21: models[0].parameters_b: got -8, want > 0",
		"ranges.bad.yaml:22: models[0].layers: got 0, want >= 1",
		"ranges.bad.yaml:23: models[0].kv_heads: got 0, want >= 1",
		"ranges.bad.yaml:24: models[0].head_dim: got 0, want >= 1",
		"ranges.bad.yaml:26: models[0].context_length: got 0, want >= 1",
		"ranges.bad.yaml:28: models[0].quality: got 1.2, want a number in [0, 1]",
		"ranges.bad.yaml:34: pools[0].gpus_per_replica: got 0, want >= 1",
		"ranges.bad.yaml:35: pools[0].replicas: got -1, want >= 0",
		"ranges.bad.yaml:39: pools[0].max_batch: got 0, want >= 1",
		"ranges.bad.yaml:40: pools[0].price_per_gpu_hour: got -2, want >= 0",
		"ranges.bad.yaml:41: pools[0].cold_start: got -1s, want a duration >= 0",
		"ranges.bad.yaml:42: pools[0].quota.requests_per_minute: got -1, want >= 0",
		"ranges.bad.yaml:42: pools[0].quota.tokens_per_minute: got NaN, want >= 0",
		"ranges.bad.yaml:44: pools[0].profiles.m.kv_tokens: got -1, want >= 0",
		"ranges.bad.yaml:44: pools[0].profiles.m.per_kv_token_us: got -0.5, want >= 0",
		"ranges.bad.yaml:44: pools[0].profiles.m.per_prefill_token_us: got -1, want > 0 (or a ref to a built-in profile)",
		"ranges.bad.yaml:44: pools[0].profiles.m.step_base_us: got 0, want > 0 (or a ref to a built-in profile)",
		"ranges.bad.yaml:47: tenants[0].weight: got -1, want > 0 (leave it out for the default 1)",
		"ranges.bad.yaml:48: tenants[0].tokens_per_minute: got -5, want >= 0",
		"ranges.bad.yaml:49: tenants[0].max_concurrency: got -1, want >= 0",
		"ranges.bad.yaml:53: classes[0].slo.e2e: got 1m0s, want <= deadline (30s): requests are cancelled at the deadline, so this objective could never be met late",
		"ranges.bad.yaml:53: classes[0].slo.ttft: got 1m30s, want <= slo.e2e (1m0s): the first token cannot come after the last",
		"ranges.bad.yaml:60: workload[0].arrivals.cv: got -1, want >= 0",
		"ranges.bad.yaml:60: workload[0].arrivals.rate: got 0, want > 0",
		"ranges.bad.yaml:65: policy.aging: got -1s, want a duration >= 0",
		"ranges.bad.yaml:66: policy.admission.defer_for: got -1s, want a duration >= 0",
		"ranges.bad.yaml:66: policy.admission.queue_limit: got -1, want >= 0",
		"ranges.bad.yaml:66: policy.admission.retry_after: got -1s, want a duration >= 0",
	},
	"derived.bad.yaml": {
		"derived.bad.yaml:33: pools[0].gpu: got \"H1000\", not in the GPU spec table a derived profile needs; want gpu: one of A100-SXM-40GB, A100-SXM-80GB, B200, H100-PCIe, H100-SXM, H200-SXM, L40S, MI300X, RTX4090, RTXPRO6000",
		"derived.bad.yaml:35: pools[0].tensor_parallel: got 2, want gpus_per_replica (1): a replica's GPUs are its tensor-parallel group; give one of the two",
		"derived.bad.yaml:36: pools[0].model_config: got \"llama-9\", unknown model \"llama-9\": the shipped models are codellama-34b-instruct-hf, deepseek-v2-lite, glm-5.2-fp8, llama-2-70b-hf, llama-2-7b-hf, llama-3.1-70b-instruct, llama-3.1-8b-instruct, llama-4-scout-17b-16e-instruct-fp8-dynamic, mistral-nemo-instruct-2407, mixtral-8x22b-v0.1, mixtral-8x7b-v0.1, qwen2.5-7b-instruct, qwen3-14b, qwen3-30b-a3b, qwen3-32b, yi-34b (Hugging Face names such as meta-llama/Llama-3.1-8B-Instruct also match, as do names that differ only by an -Instruct, -hf or release-tag suffix); for another model, pass the path to its config.json (from its Hugging Face repository) instead",
		"derived.bad.yaml:37: pools[0].precision: got \"int3\", want one of bf16, fp16, fp8",
		"derived.bad.yaml:45: pools[1].gpus_per_replica: got 1, the weights of llama-3.1-70b-instruct (141.1 GB per GPU in bf16) leave room for 0 KV tokens on H100-SXM at 90 % of memory, want >= 4096; want more GPUs per replica or precision: fp8",
		"derived.bad.yaml:61: pools[2].precision: got \"bf16\", precision bf16: the llama-4-scout-17b-16e-instruct-fp8-dynamic checkpoint is FP8; want fp8 (or leave precision out), or a 16-bit checkpoint's config",
	},
	"purchasable.bad.yaml": {
		"purchasable.bad.yaml:25: pools[0].purchase.lead_time: got \"2 weeks\", want days, weeks or years, such as 90d, 8w or 1y (or a duration such as 36h)",
		"purchasable.bad.yaml:25: pools[0].purchase.max_replicas: got 2, want >= replicas (4): it is the most the provider sells, today's included",
		"purchasable.bad.yaml:27: purchasable[0].name: got \"p1\", already the name of pools[0]; want a name of its own (the plan adds it to the fleet)",
		"purchasable.bad.yaml:37: purchasable[1].price_per_gpu_hour: got 0, want > 0: the plan buys the cheapest fleet, and a free type would always be chosen",
		"purchasable.bad.yaml:38: purchasable[1].region: got \"r9\", no such region; did you mean \"r1\"? (regions: r1)",
		"purchasable.bad.yaml:47: purchasable[1].purchase.min_term: got \"-1y\", want days, weeks or years, such as 90d, 8w or 1y (or a duration such as 36h)",
	},
	"refs.bad.yaml": {
		"refs.bad.yaml:10: regions[1].name: got \"r1\", want a unique name; regions[0] has it already",
		"refs.bad.yaml:12: regions[2].name: missing; want a name such as use-h100",
		"refs.bad.yaml:28: models[0].runtimes[1]: got \"rt2\", no such runtime; did you mean \"rt\"? (runtimes: rt)",
		"refs.bad.yaml:30: models[0].fallbacks[1]: got \"a\", a model cannot fall back to itself; want a different model",
		"refs.bad.yaml:40: models[1].fallbacks[0]: got \"a\", fallback chains form a cycle (a -> b -> a); want a chain that ends",
		"refs.bad.yaml:40: models[1].fallbacks[1]: got \"zz\", no such model; did you mean \"a\"? (models: a, b)",
		"refs.bad.yaml:42: pools[0].name: got \"p 1\", want letters, digits, '.', '-' and '_', starting with a letter or digit",
		"refs.bad.yaml:43: pools[0].region: got \"r2\", no such region; did you mean \"r1\"? (regions: r1)",
		"refs.bad.yaml:45: pools[0].accelerator: got \"gpu2\", no such accelerator; did you mean \"gpu\"? (accelerators: gpu)",
		"refs.bad.yaml:50: pools[0].models[1]: got \"a\", listed twice; first at pools[0].models[0]",
		"refs.bad.yaml:50: pools[0].models[2]: got \"c\", no such model; did you mean \"a\"? (models: a, b)",
		"refs.bad.yaml:55: pools[0].profiles.a.ref: got \"no/such/ref\", no such built-in profile ...",
		"refs.bad.yaml:56: pools[0].profiles.b: got \"b\", a profile for a model this pool does not serve; want one of its models: a, c",
		"refs.bad.yaml:59: tenants[0].jurisdiction: got \"ch\", no region has this jurisdiction, so no request of this tenant could be served; want one of eu, us, or none for anywhere",
		"refs.bad.yaml:65: workload[0].tenant: got \"tt\", no such tenant; did you mean \"t\"? (tenants: t)",
		"refs.bad.yaml:66: workload[0].class: missing; want the name of a class: c",
		"refs.bad.yaml:67: workload[0].model: got \"b\", no pool serves this model or (with policy.routing.fallback) any model of its fallback chain, so every request would be rejected; want a model some pool lists",
	},
	"syntax.bad.yaml": {
		"syntax.bad.yaml:3: invalid YAML: did not find expected '-' indicator",
	},
	"top.bad.yaml": {
		"top.bad.yaml:3: schema: got 2, want 1; this build reads schema version 1 only",
		"top.bad.yaml:4: name: missing; want a name such as use-h100",
		"top.bad.yaml:7: warmup: got 10m0s, want less than duration (10m0s), or nothing would be reported",
		"top.bad.yaml:8: regions: missing; want at least one entry",
		"top.bad.yaml:9: accelerators: missing; want at least one entry",
		"top.bad.yaml:10: runtimes: missing; want at least one entry",
		"top.bad.yaml:11: models: missing; want at least one entry",
		"top.bad.yaml:12: pools: missing; want at least one entry",
		"top.bad.yaml:13: tenants: missing; want at least one entry",
		"top.bad.yaml:14: classes: missing; want at least one entry",
		"top.bad.yaml:15: workload: missing; want at least one entry",
		"top.bad.yaml:20: expect[1]: expectation \"interactive.ttft.p99 2s\" has no comparison: want <lhs> <op> <value> with op one of < <= > >= == !=, e.g. interactive.ttft.p99 < 2s",
		"top.bad.yaml:21: expect[2]: expectation \"< 5\" has nothing left of <: want a report figure such as interactive.ttft.p99",
		"top.bad.yaml:22: expect[3]: expectation \"ttft p99 < 2s\": left side \"ttft p99\" is not a dotted name: want letters, digits, - and _ separated by dots, e.g. tenants.acme.e2e.p95",
		"top.bad.yaml:23: expect[4]: expectation \"requests.rejected <= ten\": \"ten\" is neither a number nor a duration: want e.g. 10, 0.95 or 2s (or never, for a time that may not come)",
	},
	"types.bad.yaml": {
		"types.bad.yaml:5: seed: got -1, want an integer from 0 to 18446744073709551615",
		"types.bad.yaml:6: duration: got 30, want a duration with a unit, such as 2s, 150ms or 1h30m",
		"types.bad.yaml:12: accelerators[0].memory_gib: got \"lots\", want a number",
		"types.bad.yaml:14: accelerators[0].precisions: got \"bf16\", want a list",
		"types.bad.yaml:20: models[0].layers: got 32.5, want an integer",
		"types.bad.yaml:26: models[0].quality: got \"0.7\", want a number",
		"types.bad.yaml:33: pools[0].replicas: got a list, want an integer",
		"types.bad.yaml:47: classes[0].deferrable: got \"yes\", want true or false",
		"types.bad.yaml:56: policy: got \"fifo\", want a mapping of scheduler, aging, admission, routing, ...",
	},
	"unknown-keys.bad.yaml": {
		"unknown-keys.bad.yaml:7: regoins: unknown key \"regoins\"; did you mean regions?",
		"unknown-keys.bad.yaml:11: regions[0].zone: unknown key \"zone\"; known keys: name, jurisdiction",
		"unknown-keys.bad.yaml:34: pools[0].gpus: unknown key \"gpus\"; did you mean gpu or gpus_per_replica?",
		"unknown-keys.bad.yaml:43: pools[0].quota.tokens_per_min: unknown key \"tokens_per_min\"; did you mean tokens_per_minute?",
		"unknown-keys.bad.yaml:45: pools[0].profiles.m.step_base: unknown key \"step_base\"; did you mean step_base_us?",
		"unknown-keys.bad.yaml:51: classes[0].slo.ttft_p99: unknown key \"ttft_p99\"; did you mean ttft?",
		"unknown-keys.bad.yaml:62: policy.routing.stratgy: unknown key \"stratgy\"; did you mean strategy?",
	},
	"workload.bad.yaml": {
		"workload.bad.yaml:62: workload[0].arrivals.cv: got 0, want > 0: a gamma process needs the coefficient of variation of its gaps (1 is Poisson, 2 is bursty)",
		"workload.bad.yaml:63: workload[0].input_tokens.cv: got 0, want > 0",
		"workload.bad.yaml:64: workload[0].output_tokens.max: got 10, want >= min (100)",
		"workload.bad.yaml:69: workload[1].arrivals.cv: got 2, a Poisson process has cv 1; want process: gamma for another cv, or leave cv out",
		"workload.bad.yaml:70: workload[1].input_tokens.cv: got 1, cv applies to lognormal only; a constant has none",
		"workload.bad.yaml:70: workload[1].input_tokens.mean: got 10.5, want a whole number of tokens >= 1",
		"workload.bad.yaml:71: workload[1].output_tokens.cv: got 1, cv applies to lognormal only; an exponential distribution has cv 1",
		"workload.bad.yaml:71: workload[1].output_tokens.max: got 50, want >= mean (100): clipping below the mean leaves a different distribution",
		"workload.bad.yaml:72: workload[1].diurnal.amplitude: got 1.5, want a number in [0, 1]",
		"workload.bad.yaml:72: workload[1].diurnal.peak: got 2h0m0s, want an offset in [0, period) = [0, 1h0m0s)",
		"workload.bad.yaml:74: workload[1].stop: got 2m0s, want later than start (5m0s), or 0 for the end of the run",
		"workload.bad.yaml:80: workload[2].input_tokens.mean: got 2000, a uniform distribution's mean is (min+max)/2; want it left out",
		"workload.bad.yaml:81: workload[2].output_tokens: up to 4000 input plus 500 output tokens exceed m's context_length 4096; want smaller maxima",
		"workload.bad.yaml:81: workload[2].output_tokens.min: got 300, want <= mean (200): clipping above the mean leaves a different distribution",
		"workload.bad.yaml:82: workload[2].start: got 10m0s, want less than duration (10m0s), or the stream sends nothing",
		"workload.bad.yaml:86: workload[3].model: got \"unserved\", no pool serves this model or (with policy.routing.fallback) any model of its fallback chain, so every request would be rejected; want a model some pool lists",
		"workload.bad.yaml:88: workload[3].input_tokens: prompts of up to 5000 tokens leave no room to generate in unserved's context_length 4096; want a smaller max",
		"workload.bad.yaml:90: workload[3].stop: got 11m0s, want <= duration (10m0s): no request arrives after it",
		"workload.bad.yaml:94: workload[4].model: got \"m\", tenant t-eu is bound to jurisdiction eu, where no pool serves this model or (with policy.routing.fallback) its fallbacks, so every request would be rejected; want a model served in a region of jurisdiction eu",
	},
}

var builtinList = regexp.MustCompile(`(no such built-in profile).*`)

func TestBadFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.bad.yaml")
	require.NoError(t, err)
	for _, f := range files {
		_, ok := badFixtures[filepath.Base(f)]
		require.True(t, ok, "%s has no entry in badFixtures", f)
	}
	for file, want := range badFixtures {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", file))
			require.NoError(t, err)
			// Parsed in testdata, as Load would, so trace paths resolve
			// next to the fixture.
			s, err := ParseInDir(file, "testdata", data, nil)
			require.Nil(t, s)
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "Parse(%s) = %v, want a *ValidationError", file, err)
			got := strings.Split(ve.Error(), "\n")
			for i := range got {
				// The list of built-in refs grows with twin/latency.
				got[i] = builtinList.ReplaceAllString(got[i], "$1 ...")
			}
			require.Equal(t, want, got)
			for _, p := range ve.Problems {
				require.Equal(t, file, p.File)
			}
		})
	}
}
