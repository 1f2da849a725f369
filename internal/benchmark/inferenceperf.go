package benchmark

import (
	"errors"
	"fmt"
)

// FromInferencePerf reads one of inference-perf's lifecycle reports: a
// stage report (stage_<N>_lifecycle_metrics.json) or the run's summary
// (summary_lifecycle_metrics.json), as inference_perf/reportgen/base.py
// writes them. Latencies there are in seconds; the Metrics are in
// milliseconds:
//
//   - successes.latency.time_to_first_token: ttft_mean, ttft_p50 (its
//     "median"), ttft_p90, ttft_p99;
//   - successes.latency.request_latency: e2e_mean, e2e_p50, e2e_p90, e2e_p99;
//   - successes.latency.inter_token_latency: itl_mean only;
//   - successes.latency.time_per_output_token: tpot_mean.
//
// The ITL percentiles are left out on purpose: inference-perf stamps every
// token of a streamed chunk with the chunk's arrival time, so its gap
// distribution mixes zero gaps inside chunks with whole gaps between them,
// and its median is near zero. The mean survives (the gaps still sum to the
// decode time) and is the study's itl_mean.
//
// A latency summary is null when nothing was measured (TTFT of a
// non-streaming run): those figures stay absent.
func FromInferencePerf(data []byte) (Metrics, StageInfo, error) {
	d := doc{what: "inference-perf report"}
	var info StageInfo
	obj, err := decodeResult(data, d.what)
	if err != nil {
		return nil, info, err
	}
	successes, ok, err := d.object(obj, "", "successes")
	if err != nil {
		return nil, info, err
	}
	load, ok2, err := d.object(obj, "", "load_summary")
	if err != nil {
		return nil, info, err
	}
	if !ok || !ok2 {
		return nil, info, fmt.Errorf("%s: no successes or load_summary; want a stage_<N>_lifecycle_metrics.json "+
			"or summary_lifecycle_metrics.json report", d.what)
	}
	count, ok, err := d.count(successes, "successes", "count")
	if err != nil {
		return nil, info, err
	}
	if !ok || count == 0 {
		return nil, info, fmt.Errorf("%s: successes.count: no request succeeded, so nothing was measured", d.what)
	}
	info.Completed = count

	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	// A stage report carries the stage's requested rate; the summary,
	// which spans stages, does not (reportgen passes no stage_rate).
	rate, ok, err := d.number(load, "load_summary", "requested_rate")
	keep(err)
	info.Rate = rate
	info.Summary = !ok && err == nil
	var n int
	n, _, err = d.count(load, "load_summary", "concurrency")
	info.MaxConcurrency = n
	keep(err)
	info.DurationS, ok, err = d.number(obj, "", "benchmark_time_seconds")
	keep(err)
	if !ok && err == nil {
		info.DurationS, _, err = d.number(load, "load_summary", "send_duration")
		keep(err)
	}
	if failures, ok, err := d.object(obj, "", "failures"); ok {
		n, _, err = d.count(failures, "failures", "count")
		info.Failed = n
		keep(err)
	} else {
		keep(err)
	}
	// Newer reports give prompt_tokens (server-counted when available),
	// older ones prompt_len; both have a mean.
	info.MeanInputLen = d.firstMean(successes, &errs, "prompt_tokens", "prompt_len")
	info.MeanOutputLen = d.firstMean(successes, &errs, "output_len", "output_tokens")

	m := Metrics{}
	latency, ok, err := d.object(successes, "successes", "latency")
	keep(err)
	if ok {
		for _, src := range []struct {
			key    string
			stats  []string // the report's keys
			metric []string // ours, in the same order
		}{
			{"time_to_first_token", []string{"mean", "median", "p90", "p99"}, []string{"ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99"}},
			{"request_latency", []string{"mean", "median", "p90", "p99"}, []string{"e2e_mean", "e2e_p50", "e2e_p90", "e2e_p99"}},
			{"inter_token_latency", []string{"mean"}, []string{"itl_mean"}},
			{"time_per_output_token", []string{"mean"}, []string{"tpot_mean"}},
		} {
			dist, ok, err := d.object(latency, "successes.latency", src.key)
			keep(err)
			if !ok {
				continue
			}
			path := "successes.latency." + src.key
			for i, stat := range src.stats {
				v, ok, err := d.latency(dist, path, stat, 1000)
				keep(err)
				if ok {
					m[src.metric[i]] = v
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, info, errors.Join(errs...)
	}
	if len(m) == 0 {
		return nil, info, fmt.Errorf("%s: successes.latency: no latency figures in the report", d.what)
	}
	if err := checkMetrics(d.what, m); err != nil {
		return nil, info, err
	}
	return m, info, nil
}

// firstMean returns the mean of the first of keys that successes holds as a
// distribution, or 0.
func (d doc) firstMean(successes map[string]any, errs *[]error, keys ...string) float64 {
	for _, k := range keys {
		dist, ok, err := d.object(successes, "successes", k)
		if err != nil {
			*errs = append(*errs, err)
			return 0
		}
		if !ok {
			continue
		}
		v, ok, err := d.number(dist, "successes."+k, "mean")
		if err != nil {
			*errs = append(*errs, err)
		}
		if ok {
			return v
		}
	}
	return 0
}
