package liverun

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fleetdrill/fleetdrill/sim/stats"
	"github.com/fleetdrill/fleetdrill/twin"
)

// Comparison sets a live report beside the twin's for the same scenario:
// how far the twin's prediction is from what the live fleet did.
type Comparison struct {
	Latency []LatencyRow `json:"latency"`
	Faults  []FaultRow   `json:"faults"`
	// Canaries: each canary's rollback and traffic, twin and live.
	Canaries []CanaryRow `json:"canaries,omitempty"`
	// Autoscaling: each autoscaled pool's replica timeline, twin and live.
	Autoscaling []AutoscaleRow `json:"autoscaling,omitempty"`
	Counts      []CountRow     `json:"counts"`
}

// AutoscaleRow is one autoscaled pool, twin and live: its asks and their
// outcomes, and its replica timeline (requested, provisioning, warming,
// serving, draining at each change, within the scenario's duration) set
// side by side. The timelines agree when they pass through the same
// counts in the same order; MaxOffsetS is then the largest gap between
// the twin's and the live time of a change.
type AutoscaleRow struct {
	Pool          string `json:"pool"`
	TwinAsked     uint64 `json:"twin_asked"`
	LiveAsked     uint64 `json:"live_asked"`
	TwinGranted   uint64 `json:"twin_granted"`
	LiveGranted   uint64 `json:"live_granted"`
	TwinRefused   uint64 `json:"twin_refused"`
	LiveRefused   uint64 `json:"live_refused"`
	TwinMaxServed int    `json:"twin_max_serving"`
	LiveMaxServed int    `json:"live_max_serving"`
	TwinChanges   int    `json:"twin_changes"`
	LiveChanges   int    `json:"live_changes"`
	// Agree: the same counts in the same order; MaxOffsetS then, else
	// Diverge says where they part.
	Agree      bool    `json:"agree"`
	MaxOffsetS float64 `json:"max_offset_s"`
	Diverge    string  `json:"diverge,omitempty"`
}

// compareSeries sets two replica timelines side by side up to until
// (seconds).
func compareSeries(tw, live []twin.ReplicaCount, until float64) (agree bool, maxOff float64, diverge string, nt, nl int) {
	cut := func(s []twin.ReplicaCount) []twin.ReplicaCount {
		i := 0
		for i < len(s) && s[i].TS <= until {
			i++
		}
		return s[:i]
	}
	tw, live = cut(tw), cut(live)
	counts := func(c twin.ReplicaCount) twin.ReplicaCount { c.TS = 0; return c }
	for i := range min(len(tw), len(live)) {
		if counts(tw[i]) != counts(live[i]) {
			return false, maxOff, fmt.Sprintf("change %d: twin %s at %.1fs, live %s at %.1fs", i+1,
				countsText(tw[i]), tw[i].TS, countsText(live[i]), live[i].TS), len(tw), len(live)
		}
		maxOff = max(maxOff, math.Abs(tw[i].TS-live[i].TS))
	}
	if len(tw) != len(live) {
		return false, maxOff, fmt.Sprintf("twin %d changes, live %d", len(tw), len(live)), len(tw), len(live)
	}
	return true, maxOff, "", len(tw), len(live)
}

// countsText is a replica count in short: requested/provisioning/warming/
// serving/draining.
func countsText(c twin.ReplicaCount) string {
	return fmt.Sprintf("%d/%d/%d/%d/%d", c.Requested, c.Provisioning, c.Warming, c.Serving, c.Draining)
}

// CanaryRow is one canary, twin and live: when it was rolled back after
// its candidate's fault began (null: not), and what each side sent it.
type CanaryRow struct {
	Canary           string       `json:"canary"`
	TwinRollbackS    twin.Seconds `json:"twin_time_to_rollback_s"`
	LiveRollbackS    twin.Seconds `json:"live_time_to_rollback_s"`
	TwinState        string       `json:"twin_state"`
	LiveState        string       `json:"live_state"`
	TwinAttempts     uint64       `json:"twin_canary_attempts"`
	LiveAttempts     uint64       `json:"live_canary_attempts"`
	TwinFailed       uint64       `json:"twin_canary_failed"`
	LiveFailed       uint64       `json:"live_canary_failed"`
	TwinShadowSent   uint64       `json:"twin_shadow_sent"`
	LiveShadowSent   uint64       `json:"live_shadow_sent"`
	TwinShadowFailed uint64       `json:"twin_shadow_failed"`
	LiveShadowFailed uint64       `json:"live_shadow_failed"`
	RollbackRelErr   *float64     `json:"rollback_rel_err"` // (live − twin) / live; null unless both rolled back
}

// LatencyRow is one class's quantile of TTFT or end-to-end latency.
type LatencyRow struct {
	Class    string  `json:"class"`
	Metric   string  `json:"metric"`   // ttft or e2e
	Quantile string  `json:"quantile"` // p50, p95, p99
	TwinS    float64 `json:"twin_s"`
	LiveS    float64 `json:"live_s"`
	// RelErr is (live − twin) / live: the twin's error relative to what
	// happened; nil when live is 0 and twin is not.
	RelErr *float64 `json:"rel_err"`
}

// FaultRow is one fault's times, twin and live (-1: did not happen).
type FaultRow struct {
	Fault         string       `json:"fault"`
	TwinDetectS   twin.Seconds `json:"twin_detect_s"`
	LiveDetectS   twin.Seconds `json:"live_detect_s"`
	TwinMitigateS twin.Seconds `json:"twin_mitigate_s"`
	LiveMitigateS twin.Seconds `json:"live_mitigate_s"`
	TwinRecoverS  twin.Seconds `json:"twin_recover_s"`
	LiveRecoverS  twin.Seconds `json:"live_recover_s"`
	TwinLost      uint64       `json:"twin_lost"`
	LiveLost      uint64       `json:"live_lost"`
	TwinSLODuring twin.Ratio   `json:"twin_slo_during"` // null: nothing finished
	LiveSLODuring twin.Ratio   `json:"live_slo_during"`
}

// CountRow is one request count, twin and live.
type CountRow struct {
	Count string `json:"count"`
	Twin  uint64 `json:"twin"`
	Live  uint64 `json:"live"`
}

// Compare sets live beside tw.
func Compare(tw, live *twin.Report) *Comparison {
	c := &Comparison{}
	classes := make([]string, 0, len(live.Classes))
	for name := range live.Classes {
		classes = append(classes, name)
	}
	slices.Sort(classes)
	for _, name := range classes {
		lg, tg := live.Classes[name], tw.Classes[name]
		if tg == nil {
			continue
		}
		for _, m := range []struct {
			name       string
			twin, live stats.Summary
		}{{"ttft", tg.TTFT, lg.TTFT}, {"e2e", tg.E2E, lg.E2E}} {
			for _, q := range []struct {
				name string
				pick func(stats.Summary) float64
			}{{"p50", func(s stats.Summary) float64 { return s.P50 }},
				{"p95", func(s stats.Summary) float64 { return s.P95 }},
				{"p99", func(s stats.Summary) float64 { return s.P99 }}} {
				t, l := q.pick(m.twin), q.pick(m.live)
				c.Latency = append(c.Latency, LatencyRow{Class: name, Metric: m.name, Quantile: q.name,
					TwinS: t, LiveS: l, RelErr: relErr(t, l)})
			}
		}
	}
	labels := make([]string, 0, len(live.Faults))
	for l := range live.Faults {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	for _, l := range labels {
		lf, tf := live.Faults[l], tw.Faults[l]
		if tf == nil {
			continue
		}
		c.Faults = append(c.Faults, FaultRow{Fault: l,
			TwinDetectS: tf.TimeToDetectS, LiveDetectS: lf.TimeToDetectS,
			TwinMitigateS: tf.TimeToMitigateS, LiveMitigateS: lf.TimeToMitigateS,
			TwinRecoverS: tf.TimeToRecoverS, LiveRecoverS: lf.TimeToRecoverS,
			TwinLost: tf.RequestsLost, LiveLost: lf.RequestsLost,
			TwinSLODuring: tf.SLOAttainmentDuring, LiveSLODuring: lf.SLOAttainmentDuring})
	}
	for _, name := range slices.Sorted(maps.Keys(live.Canaries)) {
		lc, tc := live.Canaries[name], tw.Canaries[name]
		if tc == nil {
			continue
		}
		row := CanaryRow{Canary: name, TwinRollbackS: tc.TimeToRollbackS, LiveRollbackS: lc.TimeToRollbackS,
			TwinState: tc.State, LiveState: lc.State, TwinAttempts: tc.Canary.Attempts, LiveAttempts: lc.Canary.Attempts,
			TwinFailed: tc.Canary.Failed, LiveFailed: lc.Canary.Failed, TwinShadowSent: tc.Shadow.Sent,
			LiveShadowSent: lc.Shadow.Sent, TwinShadowFailed: tc.Shadow.Failed, LiveShadowFailed: lc.Shadow.Failed}
		if tc.TimeToRollbackS.Happened() && lc.TimeToRollbackS.Happened() {
			row.RollbackRelErr = relErr(float64(tc.TimeToRollbackS), float64(lc.TimeToRollbackS))
		}
		c.Canaries = append(c.Canaries, row)
	}
	for _, name := range slices.Sorted(maps.Keys(live.Autoscaling)) {
		la, ta := live.Autoscaling[name], tw.Autoscaling[name]
		if ta == nil {
			continue
		}
		row := AutoscaleRow{Pool: name, TwinAsked: ta.Asked, LiveAsked: la.Asked, TwinGranted: ta.Granted, LiveGranted: la.Granted,
			TwinRefused: ta.Refused, LiveRefused: la.Refused, TwinMaxServed: ta.MaxServing, LiveMaxServed: la.MaxServing}
		row.Agree, row.MaxOffsetS, row.Diverge, row.TwinChanges, row.LiveChanges = compareSeries(ta.Series, la.Series, live.ArrivalsS)
		row.MaxOffsetS = math.Round(row.MaxOffsetS*1e3) / 1e3
		c.Autoscaling = append(c.Autoscaling, row)
	}
	t, l := tw.Requests, live.Requests
	c.Counts = []CountRow{
		{"arrived", t.Arrived, l.Arrived}, {"admitted", t.Admitted, l.Admitted}, {"completed", t.Completed, l.Completed},
		{"rejected", t.Rejected, l.Rejected}, {"failed", t.Failed, l.Failed},
		{"timed_out", t.TimedOut, l.TimedOut}, {"cancelled", t.Cancelled, l.Cancelled},
		{"in_flight_at_end", t.InFlightAtEnd, l.InFlightAtEnd}, {"retries", t.Retries, l.Retries},
		{"deferred", t.Deferred, l.Deferred}, {"fallbacks", t.Fallbacks, l.Fallbacks},
	}
	return c
}

func relErr(twin, live float64) *float64 {
	var e float64
	switch {
	case live != 0:
		e = (live - twin) / live
	case twin != 0:
		return nil
	}
	return &e
}

// MaxRelErr returns the largest |relative error| of the quantile q (p50,
// p95, p99) over every class and both metrics; rows without one are skipped.
func (c *Comparison) MaxRelErr(q string) float64 {
	m := 0.0
	for _, r := range c.Latency {
		if r.Quantile == q && r.RelErr != nil {
			m = max(m, math.Abs(*r.RelErr))
		}
	}
	return m
}

// Text writes the comparison as tables.
func (c *Comparison) Text(w io.Writer) error {
	err := table(w, false, "class\tmetric\tquantile\ttwin\tlive\terror\t", len(c.Latency), func(i int) string {
		r := c.Latency[i]
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t", r.Class, r.Metric, r.Quantile, secs(r.TwinS), secs(r.LiveS), pct(r.RelErr))
	})
	if err == nil {
		err = table(w, true, "fault\tdetect twin/live\tmitigate twin/live\trecover twin/live\tlost twin/live\tSLO during twin/live\t", len(c.Faults), func(i int) string {
			r := c.Faults[i]
			return fmt.Sprintf("%s\t%s / %s\t%s / %s\t%s / %s\t%d / %d\t%s / %s\t", r.Fault,
				opt(r.TwinDetectS), opt(r.LiveDetectS), opt(r.TwinMitigateS), opt(r.LiveMitigateS),
				opt(r.TwinRecoverS), opt(r.LiveRecoverS), r.TwinLost, r.LiveLost, ratio3(r.TwinSLODuring), ratio3(r.LiveSLODuring))
		})
	}
	if err == nil {
		err = table(w, true, "canary\trolled back twin/live\terror\tstate twin/live\tattempts twin/live\tfailed twin/live\tshadow sent twin/live\t", len(c.Canaries), func(i int) string {
			r := c.Canaries[i]
			return fmt.Sprintf("%s\t%s / %s\t%s\t%s / %s\t%d / %d\t%d / %d\t%d / %d\t", r.Canary,
				opt(r.TwinRollbackS), opt(r.LiveRollbackS), pct(r.RollbackRelErr), r.TwinState, r.LiveState,
				r.TwinAttempts, r.LiveAttempts, r.TwinFailed, r.LiveFailed, r.TwinShadowSent, r.LiveShadowSent)
		})
	}
	if err == nil {
		err = table(w, true, "autoscaled pool\tasked twin/live\tgranted twin/live\trefused twin/live\tmax serving twin/live\treplica timeline\t", len(c.Autoscaling), func(i int) string {
			r := c.Autoscaling[i]
			tl := fmt.Sprintf("%d changes agree within %.3fs", r.TwinChanges, r.MaxOffsetS)
			if !r.Agree {
				tl = "differ: " + r.Diverge
			}
			return fmt.Sprintf("%s\t%d / %d\t%d / %d\t%d / %d\t%d / %d\t%s\t", r.Pool, r.TwinAsked, r.LiveAsked,
				r.TwinGranted, r.LiveGranted, r.TwinRefused, r.LiveRefused, r.TwinMaxServed, r.LiveMaxServed, tl)
		})
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	var parts []string
	for _, r := range c.Counts {
		parts = append(parts, fmt.Sprintf("%s %d/%d", r.Count, r.Twin, r.Live))
	}
	_, err = fmt.Fprintf(w, "requests twin/live: %s\n", strings.Join(parts, ", "))
	return err
}

// table writes a right-aligned table of n rows under header (cells
// tab-terminated). A spaced table follows a blank line and is left out
// when it has no rows.
func table(w io.Writer, spaced bool, header string, n int, row func(i int) string) error {
	if spaced {
		if n == 0 {
			return nil
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, header)
	for i := range n {
		fmt.Fprintln(tw, row(i))
	}
	return tw.Flush()
}

func secs(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.1fms", s*1000)
	}
	return fmt.Sprintf("%.3fs", s)
}

func pct(x *float64) string {
	if x == nil {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100**x)
}

func opt(s twin.Seconds) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1fs", s)
}

// ratio3 is a ratio to three decimals, "-" for one of nothing.
func ratio3(r twin.Ratio) string {
	if !r.Measured() {
		return "-"
	}
	return fmt.Sprintf("%.3f", float64(r))
}
