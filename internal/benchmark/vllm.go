package benchmark

import (
	"errors"
	"fmt"
	"math"
)

// StageInfo is what a result file says about the load it measured, so that
// Import can check it against the experiment it is put into.
type StageInfo struct {
	// Rate is the arrival rate asked for, in requests per second; 0 when the
	// file does not say, +Inf for vLLM's "inf" (every request at once).
	Rate float64
	// Arrivals is ArrivalsPoisson or ArrivalsConstant, or "" when the file
	// does not say or the process is neither (vLLM's gamma arrivals).
	Arrivals string
	// MaxConcurrency caps requests in flight (vLLM --max-concurrency,
	// inference-perf concurrency stages); 0 for an open-loop run.
	MaxConcurrency int
	// RampUp is vLLM's --ramp-up-strategy (linear, exponential); "" if none.
	RampUp string
	// Summary says the figures cover all stages of a run together
	// (inference-perf's summary_lifecycle_metrics.json).
	Summary bool
	// DurationS is the run's length as the tool reports it, in seconds:
	// vLLM's duration (first request to last response), inference-perf's
	// benchmark_time_seconds or, in reports older than that field,
	// load_summary.send_duration (first to last request sent). 0 if absent.
	DurationS float64
	Completed int // requests that succeeded
	Failed    int
	// MeanInputLen and MeanOutputLen are tokens per completed request;
	// 0 when the file does not say.
	MeanInputLen, MeanOutputLen float64
}

// vllmFamilies maps vLLM's metric stems to ours. TPOT has only a mean here
// (tpot_mean); its percentiles are not kept.
var vllmFamilies = []struct{ stem, family string }{
	{"ttft", "ttft"},
	{"itl", "itl"},
	{"e2el", "e2e"},
}

// FromVLLMBenchServe reads the JSON file `vllm bench serve --save-result`
// writes (vllm/benchmarks/serve.py). It takes mean_<m>_ms, median_<m>_ms
// (as p50) and p90_/p99_<m>_ms for m in ttft, itl, e2el (as e2e), and
// mean_tpot_ms. Which of them exist depends on the run's options: by default
// vLLM reports ttft, tpot and itl with p99 only (--percentile-metrics
// ttft,tpot,itl, --metric-percentiles 99), so e2e figures are absent unless
// the run asked for e2el. Absent figures stay absent in the Metrics.
//
// vLLM's ITL is the mean gap between streamed chunks over all gaps of all
// requests, which is the study's itl_mean (total decode time over total
// inter-token gaps) when every chunk carries one token.
func FromVLLMBenchServe(data []byte) (Metrics, StageInfo, error) {
	d := doc{what: "vllm bench serve result"}
	var info StageInfo
	obj, err := decodeResult(data, d.what)
	if err != nil {
		return nil, info, err
	}
	completed, ok, err := d.count(obj, "", "completed")
	if err != nil {
		return nil, info, err
	}
	if !ok {
		return nil, info, fmt.Errorf("%s: completed: missing; is this the file --save-result wrote?", d.what)
	}
	if completed == 0 {
		// vLLM writes 0 for every latency when nothing completed: those are
		// not measurements.
		return nil, info, fmt.Errorf("%s: completed: 0 requests completed, so its latencies were not measured", d.what)
	}
	info.Completed = completed
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var n int
	n, _, err = d.count(obj, "", "failed")
	info.Failed = n
	keep(err)
	info.DurationS, _, err = d.number(obj, "", "duration")
	keep(err)
	if in, ok, err := d.number(obj, "", "total_input_tokens"); ok {
		info.MeanInputLen = in / float64(completed)
	} else {
		keep(err)
	}
	if out, ok, err := d.number(obj, "", "total_output_tokens"); ok {
		info.MeanOutputLen = out / float64(completed)
	} else {
		keep(err)
	}
	if rate, ok, err := d.number(obj, "", "request_rate"); ok {
		if math.IsNaN(rate) || rate <= 0 {
			keep(d.errorf("request_rate", "got %s, want a rate > 0 or \"inf\"", formatFloat(rate)))
		}
		info.Rate = rate
	} else {
		keep(err)
	}
	// burstiness 1 (vLLM's default, also when the field predates it) is a
	// Poisson process; infinite burstiness is constant spacing; anything
	// else is gamma-distributed gaps, which an experiment cannot describe.
	info.Arrivals = ArrivalsPoisson
	if b, ok, err := d.number(obj, "", "burstiness"); ok {
		switch {
		case b == 1:
		case math.IsInf(b, 1):
			info.Arrivals = ArrivalsConstant
		default:
			info.Arrivals = ""
		}
	} else {
		keep(err)
	}
	n, _, err = d.count(obj, "", "max_concurrency")
	info.MaxConcurrency = n
	keep(err)
	if s, ok := obj["ramp_up_strategy"].(string); ok {
		info.RampUp = s
	}

	m := Metrics{}
	for _, f := range vllmFamilies {
		for _, src := range []struct{ key, metric string }{
			{"mean_" + f.stem + "_ms", f.family + "_mean"},
			{"median_" + f.stem + "_ms", f.family + "_p50"},
			{"p50_" + f.stem + "_ms", f.family + "_p50"}, // --metric-percentiles 50 repeats the median
			{"p90_" + f.stem + "_ms", f.family + "_p90"},
			{"p99_" + f.stem + "_ms", f.family + "_p99"},
		} {
			if _, done := m[src.metric]; done {
				continue
			}
			v, ok, err := d.latency(obj, "", src.key, 1)
			keep(err)
			if ok {
				m[src.metric] = v
			}
		}
	}
	if v, ok, err := d.latency(obj, "", "mean_tpot_ms", 1); ok {
		m["tpot_mean"] = v
	} else {
		keep(err)
	}
	if len(errs) > 0 {
		return nil, info, errors.Join(errs...)
	}
	if len(m) == 0 {
		return nil, info, fmt.Errorf("%s: no latency figures (mean_ttft_ms, mean_itl_ms, mean_e2el_ms, …) in the file", d.what)
	}
	if err := checkMetrics(d.what, m); err != nil {
		return nil, info, err
	}
	return m, info, nil
}

// checkMetrics applies the experiment's checks on figures (percentiles in
// order, end-to-end not below first token) to figures just read.
func checkMetrics(what string, m Metrics) error {
	var c checker
	c.metrics("", m)
	if len(c.ps) == 0 {
		return nil
	}
	errs := make([]error, len(c.ps))
	for i, p := range c.ps {
		errs[i] = fmt.Errorf("%s: figures as read: %s", what, p)
	}
	return errors.Join(errs...)
}
