package compare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteText prints r as tables, one per class and one for the fleet: a row
// per metric, a column per policy, cells "mean ± CI half-width", and "*"
// after a policy's cell when it differs significantly from the baseline.
// A legend follows. The output is a pure function of r less r.Run.
func WriteText(w io.Writer, r *Result) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "compare %s: %s; %s\n", r.Scenario, columnList(r), seedList(r.Seeds))
	for _, v := range r.Variants {
		sets := "the scenario as it is"
		if len(v.Sets) > 0 {
			sets = strings.Join(v.Sets, ", ")
		}
		fmt.Fprintf(&buf, "  %s: %s\n", v.Name, sets)
	}
	buf.WriteString("\n")

	// One tabwriter for every group, so that the columns line up across
	// tables; the blank line between groups carries the cells' tabs to
	// keep them in one tabwriter block.
	tw := tabwriter.NewWriter(&buf, 0, 4, 3, ' ', 0)
	sep := strings.Repeat("\t", len(r.Policies)) + "\n"
	for gi, g := range r.Groups {
		if gi > 0 {
			fmt.Fprint(tw, sep)
		}
		head := "class " + g.Name
		if !g.Class {
			head = "fleet"
		}
		fmt.Fprint(tw, head)
		for _, p := range r.Policies {
			fmt.Fprint(tw, "\t", p)
		}
		fmt.Fprint(tw, "\n")
		for _, m := range g.Metrics {
			fmt.Fprint(tw, "  ", m.Name)
			for _, ps := range m.Policies {
				cell := formatCell(ps.Summary)
				if ps.VsBaseline != nil && ps.VsBaseline.Significant() {
					cell += " *"
				}
				fmt.Fprint(tw, "\t", cell)
			}
			fmt.Fprint(tw, "\n")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	buf.WriteString("\n")
	// Identical columns read as a broken tool; say why they are.
	switch tie, queued := r.Tie(); {
	case !tie || len(r.Policies) < 2:
	case r.Variants != nil:
		buf.WriteString("The variants tie on every figure, seed by seed: their overrides change nothing\n" +
			"these runs measure. Check the paths (fleetdrill run --set ... --json) and that the\n" +
			"overridden part is exercised (an autoscaling target matters only when the pool scales).\n\n")
	case !queued:
		buf.WriteString("The policies tie on every figure, seed by seed: no request waited in the gateway's\n" +
			"queue (queue wait p99 0 everywhere), and a scheduling policy only orders that queue.\n" +
			"Compare them where it fills: fewer replicas or a smaller max_batch (--set\n" +
			"pools.NAME.replicas=1), or more load (--set workload.STREAM.arrivals.rate=...).\n\n")
	default:
		buf.WriteString("The policies tie on every figure, seed by seed: requests queued, but every policy\n" +
			"ordered them alike. They differ only where requests of different classes (priority,\n" +
			"edf) or tenants (wfq) wait in the same model's queue at once, which this run did not\n" +
			"give them.\n\n")
	}
	n := len(r.Seeds)
	if n >= 2 {
		fmt.Fprintf(&buf, "mean ± half-width of the %g%% confidence interval (Student's t, %d df) over %d seeds.\n", Confidence*100, n-1, n)
		fmt.Fprintf(&buf, "* p < %g against the baseline %s: paired t-test on the per-seed differences\n", Alpha, r.Policies[0])
		fmt.Fprintf(&buf, "  (a seed gives every %s the same arrivals); Welch's unpaired p is in --json.\n", columnKind(r))
		fmt.Fprintf(&buf, "  Not corrected for multiple comparisons: about 1 mark in %.0f is chance.\n", 1/Alpha)
	} else {
		fmt.Fprintf(&buf, "mean of 1 seed: the confidence interval (n/a) and the tests need at least 2 seeds.\n")
	}

	// tabwriter pads the separators' empty cells; trim that away.
	lines := strings.SplitAfter(buf.String(), "\n")
	for i, l := range lines {
		if strings.HasSuffix(l, "\n") {
			lines[i] = strings.TrimRight(l, " \n") + "\n"
		}
	}
	_, err := io.WriteString(w, strings.Join(lines, ""))
	return err
}

func policyList(ps []string) string {
	if len(ps) == 0 {
		return "no policies"
	}
	return "policies " + ps[0] + " (baseline)" + strings.Join(append([]string{""}, ps[1:]...), ", ")
}

// columnList names the columns: the policies, or the variants.
func columnList(r *Result) string {
	if r.Variants == nil {
		return policyList(r.Policies)
	}
	return strings.Replace(policyList(r.Policies), "policies", "variants", 1)
}

func columnKind(r *Result) string {
	if r.Variants == nil {
		return "policy"
	}
	return "variant"
}

// seedList prints the seeds, which Run makes consecutive.
func seedList(seeds []uint64) string {
	switch len(seeds) {
	case 0:
		return "no seeds"
	case 1:
		return fmt.Sprintf("1 seed (%d)", seeds[0])
	}
	return fmt.Sprintf("%d seeds (%d..%d)", len(seeds), seeds[0], seeds[len(seeds)-1])
}

// formatCell prints "mean ± ci". The half-width is rounded to two
// significant digits and the mean to the same decimal place, so that no
// digit is printed that the interval says is noise.
func formatCell(s Summary) string {
	if math.IsNaN(s.CI95) {
		return strconv.FormatFloat(s.Mean, 'g', 4, 64) + " ± n/a"
	}
	if s.CI95 == 0 {
		return strconv.FormatFloat(s.Mean, 'g', 4, 64) + " ± 0"
	}
	dec := 1 - int(math.Floor(math.Log10(s.CI95)))
	dec = min(max(dec, 0), 12)
	return strconv.FormatFloat(s.Mean, 'f', dec, 64) + " ± " + strconv.FormatFloat(s.CI95, 'f', dec, 64)
}

// JSONSchema is the version of the layout WriteJSON writes.
const JSONSchema = 1

// The JSON layout, version 1:
//
//	{
//	  "schema": 1,
//	  "scenario": "small",
//	  "policies": ["fifo", "priority"],   // the order of the columns; the first is the baseline
//	  "variants": {"hpa70": ["pools.p.autoscale.target=0.7"], ...},  // only comparing --variant: the columns' overrides
//	  "baseline": "fifo",
//	  "seeds": [42, 43, ...],             // "values" below are in this order
//	  "confidence": 0.95,                 // of "ci95"
//	  "ci_method": "student-t",           // mean ± t(0.975, n-1)·std/√n
//	  "test": "paired-t",                 // what "p_vs_baseline" and "significant" come from
//	  "alpha": 0.05,                      // significant: p_vs_baseline < alpha
//	  "metrics": {"ttft_s.p99": "lower", ...},   // which direction is better, per metric
//	  "classes": {
//	    "interactive": {
//	      "ttft_s.p99": {
//	        "fifo":     {"n": 10, "mean": 1.2, "std": 0.1, "ci95": 0.07, "values": [...],
//	                     "diff_vs_baseline": null, "p_vs_baseline": null, "p_welch": null, "significant": false},
//	        "priority": {..., "diff_vs_baseline": -0.8, "p_vs_baseline": 0.0001, "p_welch": 0.002, "significant": true}
//	      }, ...
//	    }, ...
//	  },
//	  "fleet": {"rejection_rate": {...}, "cost.per_successful_task": {...}, "residency_violations": {...},
//	            "autoscaling.POOL.refused": {...}, ...},   // autoscaling.* per autoscaled pool, if any
//	  "run": {"wall_s": 12.3, "parallel": 2, "version": "devel"}   // the only part that varies
//	}
//
// Comparing variants, "policies" and "baseline" hold the variants' names
// (the layout is the same; "variants" is added). std and ci95 are null with
// one seed; the *_vs_baseline fields and p_welch
// are null for the baseline and with one seed.
type jsonResult struct {
	Schema     int                              `json:"schema"`
	Scenario   string                           `json:"scenario"`
	Policies   []string                         `json:"policies"`
	Variants   map[string][]string              `json:"variants,omitempty"`
	Baseline   string                           `json:"baseline"`
	Seeds      []uint64                         `json:"seeds"`
	Confidence float64                          `json:"confidence"`
	CIMethod   string                           `json:"ci_method"`
	Test       string                           `json:"test"`
	Alpha      float64                          `json:"alpha"`
	Metrics    map[string]Better                `json:"metrics"`
	Classes    map[string]map[string]jsonMetric `json:"classes"`
	Fleet      map[string]jsonMetric            `json:"fleet"`
	Run        struct {
		WallS    float64 `json:"wall_s"`
		Parallel int     `json:"parallel"`
		Version  string  `json:"version"`
	} `json:"run"`
}

// jsonMetric maps a policy's name to its statistics.
type jsonMetric map[string]jsonPolicy

type jsonPolicy struct {
	N           int       `json:"n"`
	Mean        float64   `json:"mean"`
	Std         *float64  `json:"std"`
	CI95        *float64  `json:"ci95"`
	Values      []float64 `json:"values"`
	Diff        *float64  `json:"diff_vs_baseline"`
	P           *float64  `json:"p_vs_baseline"`
	PWelch      *float64  `json:"p_welch"`
	Significant bool      `json:"significant"`
}

// WriteJSON writes r in the layout above, indented, with a final newline.
// Maps are written with sorted keys, so the output is a pure function of r
// less its "run" field.
func WriteJSON(w io.Writer, r *Result) error {
	out := jsonResult{
		Schema: JSONSchema, Scenario: r.Scenario, Policies: r.Policies, Seeds: r.Seeds,
		Confidence: Confidence, CIMethod: "student-t", Test: "paired-t", Alpha: Alpha,
		Metrics: map[string]Better{}, Classes: map[string]map[string]jsonMetric{},
	}
	if len(r.Policies) > 0 {
		out.Baseline = r.Policies[0]
	}
	if r.Variants != nil {
		out.Variants = map[string][]string{}
		for _, v := range r.Variants {
			out.Variants[v.Name] = append([]string{}, v.Sets...) // [] rather than null for none
		}
	}
	for _, g := range r.Groups {
		metrics := map[string]jsonMetric{}
		for _, m := range g.Metrics {
			out.Metrics[m.Name] = m.Better
			jm := jsonMetric{}
			for i, ps := range m.Policies {
				jm[r.Policies[i]] = toJSON(ps)
			}
			metrics[m.Name] = jm
		}
		if g.Class {
			out.Classes[g.Name] = metrics
		} else {
			out.Fleet = metrics
		}
	}
	out.Run.WallS = math.Round(r.Run.Wall.Seconds()*1000) / 1000
	out.Run.Parallel = r.Run.Parallel
	out.Run.Version = r.Run.Version
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func toJSON(ps PolicyStats) jsonPolicy {
	jp := jsonPolicy{N: ps.N, Mean: sig(ps.Mean), Std: finite(ps.Std), CI95: finite(ps.CI95), Values: ps.Values}
	if c := ps.VsBaseline; c != nil {
		jp.Diff, jp.P, jp.PWelch = finite(c.Diff), finite(c.P()), finite(c.Welch.P)
		jp.Significant = c.Significant()
	}
	return jp
}

// finite is a pointer to sig(x), or nil (JSON null) when x is not a
// number.
func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	x = sig(x)
	return &x
}

// sig rounds a computed statistic to 12 significant digits: 45.18, not
// 45.18000000000001. NB: it also hides last-bit differences between
// platforms (fused multiply-add on arm64), which would otherwise change the
// JSON of the same comparison from one machine to another. Values straight
// from the reports are written as they are.
func sig(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	y, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 12, 64), 64)
	return y
}

// Tie reports whether every policy gave the baseline's figures on every
// metric at every seed — a comparison that cannot tell the policies apart
// — and whether any request waited in the queue a policy orders.
func (r *Result) Tie() (tie, queued bool) {
	for _, g := range r.Groups {
		for _, m := range g.Metrics {
			base := m.Policies[0].Values
			for _, ps := range m.Policies[1:] {
				if !slices.Equal(ps.Values, base) {
					return false, false
				}
			}
			if m.Name == "queue_wait_s.p99" && slices.ContainsFunc(base, func(v float64) bool { return v != 0 }) {
				queued = true
			}
		}
	}
	return true, queued
}
