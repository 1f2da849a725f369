// Package benchmark holds published benchmark experiments: the aggregate
// latencies a real serving engine showed under a known load, which the
// twin is calibrated on and scored against. It is data and its checks, not
// per-request logs and not the twin.
//
// # The format
//
// One experiment per JSON file:
//
//	{"name": "64-qwen2.5-7b-tp1", "gpu": "H100", "tensor_parallel": 1, "dp": 1,
//	 "model_config": "model_configs/qwen2.5-7b-instruct.json", "precision": "fp16",
//	 "engine_version": "vllm 0.15.1", "source": "where the figures come from",
//	 "engine": {"max_num_seqs": 128, "max_num_batched_tokens": 2048, "max_model_len": 4096,
//	            "total_kv_blocks": 36000, "block_size": 16, "prefix_caching": true},
//	 "workload": {"arrivals": "poisson", "stages": [{"rate": 8, "duration_s": 600}],
//	              "shared_prefix": {"system_prompt_len": 100, "question_len": 447, "output_len": 248,
//	                                "num_unique_system_prompts": 9, "num_users_per_system_prompt": 5,
//	                                "enable_multi_turn_chat": true},
//	              "seed": 42, "num_requests": 4800},
//	 "measured_ms": {"-1": {"ttft_mean": 27.4, "e2e_p99": 2100.7}, "0": {"ttft_mean": 27.4}}}
//
// model_config is relative to the file's directory, or absolute. dp
// (default 1), engine.block_size (default 16), engine.total_kv_blocks (0 or
// absent: derive it), source, engine_version and the workload's seed,
// num_requests, num_users_per_system_prompt and enable_multi_turn_chat are
// optional. measured_ms is keyed by stage: "0", "1", … index
// workload.stages, "-1" is the whole run.
//
// # Metrics
//
// All in milliseconds, client-side: ttft (time to first token), itl
// (inter-token latency), e2e (end-to-end latency), each as _mean, _p50,
// _p90, _p99, and tpot_mean (mean over requests of (e2e − ttft) /
// (output tokens − 1)). itl_mean is the token-weighted mean gap between
// output tokens: vLLM's mean_itl_ms, inference-perf's inter_token_latency
// mean, and what the sim-to-real study derived as (e2e_mean − ttft_mean) /
// (mean output tokens − 1) are all that quantity. A metric that was not
// measured is absent; a present 0 is a measured 0.
//
// # Loading and writing
//
// Parse decodes strictly: unknown or repeated fields, wrong types and
// values out of range are problems, and a *ValidationError lists all of
// them, each with the file and JSON path:
//
//	bench/64.json: workload.stages[1].rate: got 0, want a finite number > 0
//
// Load and LoadAll read files (a directory stands for its *.json); Write
// and Marshal give the canonical form, which parses back to the same
// experiment (FuzzParse checks this).
//
// # Where figures come from
//
// FromVLLMBenchServe and FromInferencePerf read the result files of vllm
// bench serve --save-result and of inference-perf's lifecycle reports;
// Import puts one into an experiment's measured stage. ConvertSimToReal
// converts the sim-to-real study's train/validation data (shared, outside
// the repository); its 13 experiments are committed under
// testdata/simtoreal/ with the model configs they need, and
// TestSimToRealTrainVal -update regenerates them.
//
// # Imports
//
// The standard library and internal/suggest only: the twin and the
// calibration code import this package, never the reverse.
//
// # Where to start reading
//
// experiment.go (the types, whose JSON names are the format), parse.go and
// validate.go (the checks), then import.go.
package benchmark
