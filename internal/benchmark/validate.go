package benchmark

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// namePattern is what an experiment's name must match: it is used as a file
// name (the sim-to-real goldens are <name>.json) and in report rows.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

const maxNameLen = 128

// Validate checks an experiment's values: what Parse checks after decoding,
// for experiments built in code (a converter, an importer). It returns a
// *ValidationError listing every problem, with paths but no file name.
func (e *Experiment) Validate() error {
	if ps := e.problems(); len(ps) > 0 {
		return &ValidationError{Problems: ps}
	}
	return nil
}

type checker struct {
	ps []Problem
}

func (c *checker) add(path, value, msg string) {
	c.ps = append(c.ps, Problem{Path: path, Value: value, Msg: msg})
}

// count checks an integer field against its least allowed value and maxCount.
func (c *checker) count(path string, v, least int) {
	switch {
	case v < least:
		c.add(path, strconv.Itoa(v), fmt.Sprintf("want >= %d", least))
	case v > maxCount:
		c.add(path, strconv.Itoa(v), fmt.Sprintf("want at most %d", maxCount))
	}
}

// positive checks a rate or duration: finite and above zero.
func (c *checker) positive(path string, v float64) {
	if !(v > 0) || math.IsInf(v, 0) {
		c.add(path, formatFloat(v), "want a finite number > 0")
	}
}

// Workload bounds (see problems).
const (
	maxStageSeconds = 30 * 86400 // 30 days
	minRate         = 1e-4       // one request in under three hours
	maxRequests     = 10_000_000
)

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// problems lists everything wrong with e's values, in schema order.
func (e *Experiment) problems() []Problem {
	var c checker
	if !namePattern.MatchString(e.Name) || len(e.Name) > maxNameLen {
		c.add("name", shorten(strconv.Quote(e.Name)),
			fmt.Sprintf("want letters, digits, '.', '-' and '_', starting with a letter or digit, at most %d characters", maxNameLen))
	}
	if strings.TrimSpace(e.GPU) == "" || strings.TrimSpace(e.GPU) != e.GPU {
		c.add("gpu", strconv.Quote(e.GPU), "want the GPU model, such as H100, without surrounding spaces")
	}
	c.count("tensor_parallel", e.TensorParallel, 1)
	c.count("dp", e.DP, 1)
	if strings.TrimSpace(e.ModelConfig) == "" {
		c.add("model_config", strconv.Quote(e.ModelConfig), "want the path of the model's config.json, relative to this file or absolute")
	}
	switch e.Precision {
	case PrecisionFP16, PrecisionBF16, PrecisionFP8:
	default:
		c.add("precision", shorten(strconv.Quote(e.Precision)), "want one of fp16, bf16, fp8")
	}

	g := e.Engine
	c.count("engine.max_num_seqs", g.MaxNumSeqs, 1)
	c.count("engine.max_num_batched_tokens", g.MaxNumBatchedTokens, 1)
	c.count("engine.max_model_len", g.MaxModelLen, 1)
	c.count("engine.total_kv_blocks", g.TotalKVBlocks, 0)
	c.count("engine.block_size", g.BlockSize, 1)

	wl := e.Workload
	switch wl.Arrivals {
	case ArrivalsPoisson, ArrivalsConstant:
	default:
		c.add("workload.arrivals", shorten(strconv.Quote(wl.Arrivals)), "want poisson or constant")
	}
	if len(wl.Stages) == 0 {
		c.add("workload.stages", "", "want at least one stage")
	}
	total := 0.0
	for i, s := range wl.Stages {
		p := joinIndex("workload.stages", i)
		c.positive(p+".rate", s.Rate)
		c.positive(p+".duration_s", s.DurationS)
		// Bounds that keep a replay's clock (nanoseconds in an int64) and
		// its memory sane: a benchmark runs for hours, not years.
		switch {
		case s.DurationS > maxStageSeconds:
			c.add(p+".duration_s", formatFloat(s.DurationS), fmt.Sprintf("want at most %g (about %d days): a stage of a benchmark run", float64(maxStageSeconds), maxStageSeconds/86400))
		case s.Rate > 0 && s.Rate < minRate:
			c.add(p+".rate", formatFloat(s.Rate), fmt.Sprintf("want at least %g requests per second", minRate))
		case s.Rate*s.DurationS > maxRequests:
			c.add(p+".rate", formatFloat(s.Rate), fmt.Sprintf("with duration_s %s it sends %.3g requests; want at most %d in a stage", formatFloat(s.DurationS), s.Rate*s.DurationS, maxRequests))
		}
		if s.Rate > 0 && s.DurationS > 0 {
			total += s.Rate * s.DurationS
		}
	}
	if total > maxRequests {
		c.add("workload.stages", "", fmt.Sprintf("the stages send %.3g requests in all; want at most %d", total, maxRequests))
	}
	sp := wl.SharedPrefix
	const spp = "workload.shared_prefix"
	c.count(spp+".system_prompt_len", sp.SystemPromptLen, 0)
	c.count(spp+".question_len", sp.QuestionLen, 0)
	c.count(spp+".output_len", sp.OutputLen, 1)
	c.count(spp+".num_unique_system_prompts", sp.NumUniqueSystemPrompts, 1)
	c.count(spp+".num_users_per_system_prompt", sp.NumUsersPerSystemPrompt, 0)
	if sp.SystemPromptLen == 0 && sp.QuestionLen == 0 {
		c.add(spp+".question_len", "0", "want >= 1 when system_prompt_len is 0: a request needs a prompt")
	}
	// A request longer than max_model_len is refused by vLLM, so such an
	// experiment cannot have been run as written.
	if total := sp.SystemPromptLen + sp.QuestionLen + sp.OutputLen; g.MaxModelLen >= 1 && total > g.MaxModelLen &&
		sp.SystemPromptLen >= 0 && sp.QuestionLen >= 0 && sp.OutputLen >= 0 {
		c.add(spp, "", fmt.Sprintf("system_prompt_len + question_len + output_len = %d tokens exceeds engine.max_model_len %d; "+
			"vLLM would refuse such requests", total, g.MaxModelLen))
	}
	c.count("workload.num_requests", wl.NumRequests, 0)

	for _, stage := range e.Measured.Stages() {
		p := joinKey("measured_ms", strconv.Itoa(stage))
		if stage != WholeRun && (stage < 0 || stage >= len(wl.Stages)) {
			c.add(p, "", fmt.Sprintf(`unknown stage; want "-1" (the whole run) or an index into workload.stages (0 to %d)`, len(wl.Stages)-1))
			continue
		}
		c.metrics(p, e.Measured[stage])
	}
	return c.ps
}

// percentileOrder lists each metric family's percentiles, lowest first.
var percentileOrder = [][]string{
	{"ttft_p50", "ttft_p90", "ttft_p99"},
	{"itl_p50", "itl_p90", "itl_p99"},
	{"e2e_p50", "e2e_p90", "e2e_p99"},
}

// metrics checks one stage's figures: known names, finite non-negative
// values, and the relations every real measurement satisfies, which catch
// figures copied into the wrong field.
func (c *checker) metrics(path string, m Metrics) {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		v := m[n]
		switch {
		case !slices.Contains(metricNames, n):
			c.add(joinKey(path, n), "", "unknown metric; want one of "+strings.Join(metricNames, ", "))
		case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
			c.add(joinKey(path, n), formatFloat(v), "want a finite number >= 0 (milliseconds)")
		}
	}
	for _, family := range percentileOrder {
		prev := ""
		for _, n := range family {
			v, ok := m[n]
			if !ok {
				continue
			}
			if prev != "" && v < m[prev] {
				c.add(joinKey(path, n), formatFloat(v), fmt.Sprintf("want >= %s (%s): percentiles cannot decrease; check the figures",
					prev, formatFloat(m[prev])))
			}
			prev = n
		}
	}
	if e2e, ok := m["e2e_mean"]; ok {
		if ttft, ok := m["ttft_mean"]; ok && e2e < ttft {
			c.add(joinKey(path, "e2e_mean"), formatFloat(e2e), fmt.Sprintf("want >= ttft_mean (%s): a request's end-to-end latency includes its time to first token",
				formatFloat(ttft)))
		}
	}
}
