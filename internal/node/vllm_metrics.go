package node

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The vLLM flavors' series: the ones of vLLM's PrometheusStatLogger
// (vllm/v1/metrics/loggers.py) a router reads, with vLLM's names, help and
// labels (model_name, and engine "0": a node runs one engine per model).
// vLLM's names hold a colon, which promlint reserves for recording rules;
// they are vLLM's, so they stay.
const (
	vllmEngine = "0"

	vllmRunning     = "vllm:num_requests_running"
	vllmWaiting     = "vllm:num_requests_waiting"
	vllmKVUsage     = "vllm:kv_cache_usage_perc"
	vllmGPUKVUsage  = "vllm:gpu_cache_usage_perc" // its name before 0.9 (FlavorVLLM08)
	vllmPreemptions = "vllm:num_preemptions_total"
	vllmPrompt      = "vllm:prompt_tokens_total"
	vllmGeneration  = "vllm:generation_tokens_total"
	vllmTTFT        = "vllm:time_to_first_token_seconds"
)

var vllmLabels = []string{"model_name", "engine"}

// vllmTTFTBuckets are vLLM's for time to first token.
var vllmTTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
	2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}

func newVLLMTTFT() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: vllmTTFT,
		Help: "Histogram of time to first token in seconds.", Buckets: vllmTTFTBuckets}, vllmLabels)
}

// vllmCollector reads the node's engines at scrape time, as of the loop's
// last wake-up: running is the sequences in the engine's batch, waiting
// those queued, KV usage the fraction of the replica's KV capacity its
// running sequences hold.
type vllmCollector struct {
	n                                                   *Node
	running, waiting, kv, preemptions, prompt, generate *prometheus.Desc
}

func newVLLMCollector(n *Node) vllmCollector {
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, vllmLabels, nil) }
	c := vllmCollector{n: n,
		running:     desc(vllmRunning, "Number of requests in model execution batches."),
		waiting:     desc(vllmWaiting, "Number of requests waiting to be processed."),
		kv:          desc(vllmKVUsage, "KV-cache usage. 1 means 100 percent usage."),
		preemptions: desc(vllmPreemptions, "Cumulative number of preemption from the engine."),
		prompt:      desc(vllmPrompt, "Number of prefill tokens processed."),
		generate:    desc(vllmGeneration, "Number of generation tokens processed."),
	}
	if n.cfg.Flavor == FlavorVLLM08 {
		c.kv = desc(vllmGPUKVUsage, "GPU KV-cache usage. 1 means 100 percent usage.")
	}
	return c
}

func (c vllmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.running, c.waiting, c.kv, c.preemptions, c.prompt, c.generate} {
		ch <- d
	}
}

func (c vllmCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.n.reps {
		m := func(d *prometheus.Desc, t prometheus.ValueType, v float64) {
			ch <- prometheus.MustNewConstMetric(d, t, v, r.model.Name, vllmEngine)
		}
		m(c.running, prometheus.GaugeValue, float64(r.running.Load()))
		m(c.waiting, prometheus.GaugeValue, float64(r.waiting.Load()))
		m(c.kv, prometheus.GaugeValue, float64(r.kvUsed.Load())/float64(r.kvCap))
		m(c.preemptions, prometheus.CounterValue, float64(r.preempted.Load()))
		m(c.prompt, prometheus.CounterValue, float64(r.promptTokens.Load()))
		m(c.generate, prometheus.CounterValue, float64(r.genTokens.Load()))
	}
}
