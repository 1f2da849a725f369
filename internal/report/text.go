// Package report renders a twin run's report for people: a summary table on
// a terminal or in a CI log. The JSON form is the report's own
// (twin.Report.JSON); this package only formats.
//
// It must not import the scheduler or the kernel: it reads a finished
// report.
package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// Text writes a readable summary of rep.
func Text(w io.Writer, rep *twin.Report) error {
	ew := &errWriter{w: w}
	c := rep.Requests
	ew.printf("scenario %s  seed %d  simulated %s (warm-up %s)  %d events\n\n",
		rep.Scenario, rep.Seed, secs(rep.SimDurationS), secs(rep.WarmupS), rep.Events)
	ew.printf("requests  arrived %d  admitted %d  completed %d  rejected %d  deferred %d  failed %d  cancelled %d  timed out %d  in flight at end %d  retries %d  fallbacks %d\n\n",
		c.Arrived, c.Admitted, c.Completed, c.Rejected, c.Deferred, c.Failed, c.Cancelled, c.TimedOut, c.InFlightAtEnd, c.Retries, c.Fallbacks)

	for _, name := range slices.Sorted(maps.Keys(rep.Workload)) {
		if n := rep.Workload[name].SkippedRows; n > 0 {
			ew.printf("warning: workload %s skipped %d malformed trace rows (skip_bad_rows); see fleetdrill trace stats\n\n", name, n)
		}
	}

	groups := func(title string, m map[string]*twin.Group) {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\tarrived\tcompleted\trejected\ttimed out\tTTFT p50\tTTFT p99\tTPOT p50\tTPOT p99\tE2E p99\twait p99\tSLO met\tgoodput/s\t\n", title)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			g := m[name]
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%.2f\t\n", name,
				g.Arrived, g.Completed, g.Rejected, g.TimedOut,
				secs(g.TTFT.P50), secs(g.TTFT.P99), secs(g.TPOT.P50), secs(g.TPOT.P99),
				secs(g.E2E.P99), secs(g.QueueWait.P99), 100*g.SLOAttainment, g.GoodputRPS)
		}
		tw.Flush()
		ew.printf("\n")
	}
	groups("class", rep.Classes)
	groups("tenant", rep.Tenants)

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "pool\tregion\treplicas\tutilization\tbusy GPU-h\tcost\tcold starts\tpreemptions\tdispatched\tprefix hits\t\n")
	for _, name := range slices.Sorted(maps.Keys(rep.Pools)) {
		p := rep.Pools[name]
		hits := "-"
		if p.PrefixBlocks > 0 {
			hits = fmt.Sprintf("%.1f%%", 100*p.PrefixHitRate)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f%%\t%.2f\t%.2f\t%d\t%d\t%d\t%s\t\n", name, p.Region, p.Replicas,
			100*p.Utilization, p.BusyGPUHours, p.Cost, p.ColdStarts, p.Preemptions, p.Dispatched, hits)
	}
	tw.Flush()
	if len(rep.Jobs) > 0 {
		ew.printf("\n")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "jobs\tkind\tsubmitted\tcompleted\tin window\tpreempted\tunplaceable\tpending\trunning\tGPU-h used\tGPU-h wasted\twait p50\t\n")
		for _, name := range slices.Sorted(maps.Keys(rep.Jobs)) {
			j := rep.Jobs[name]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.2f\t%s\t\n", name, j.Kind, j.Submitted, j.Completed,
				j.CompletedInWindow, j.Preemptions, j.Unplaceable, j.PendingAtEnd, j.RunningAtEnd, j.GPUHoursUsed, j.GPUHoursWasted, secs(j.Wait.P50))
		}
		tw.Flush()
	}
	ew.printf("\ncost %.2f total, %.5f per successful task   residency violations %d\n", rep.Cost.Total, rep.Cost.PerSuccessfulTask, rep.ResidencyViolations)

	var reasons []string
	for _, k := range slices.Sorted(maps.Keys(rep.Rejections)) {
		if n := rep.Rejections[k]; n > 0 {
			reasons = append(reasons, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(reasons) > 0 {
		ew.printf("rejections: %s\n", strings.Join(reasons, ", "))
	}
	if len(rep.Timeline) > 0 {
		ew.printf("\ntimeline\n")
		for _, e := range rep.Timeline {
			ew.printf("  %9s  %-24s %s\n", secs(e.TS), e.Kind, e.Detail)
		}
	}
	if len(rep.Faults) > 0 {
		faultImpact(ew, rep)
	}
	if len(rep.Expectations) > 0 {
		ew.printf("\nexpectations\n")
		for _, e := range rep.Expectations {
			mark := "PASS"
			switch {
			case e.Skipped:
				mark = "SKIP"
			case !e.Pass:
				mark = "FAIL"
			}
			ew.printf("  %s  %-40s (%s)\n", mark, e.Expr, Measured(e))
		}
	}
	return ew.err
}

// Measured is an expectation's value as a reader wants it, in the unit of
// its line: a latency as one (511.7ms), an attainment or share as a
// percentage, a count as an integer; or why there is none ("no data: not
// detected"), never a bare 0.
func Measured(e twin.Expectation) string {
	if e.NoData != "" {
		switch {
		case e.Skipped:
			return "no data: " + e.NoData + "; skipped, if any"
		case e.Pass:
			return "never: " + e.NoData // what "== never" asked
		}
		return "no data: " + e.NoData
	}
	v := e.Value
	if x, err := scenarios.ParseExpectation(e.Expr); err == nil {
		field := x.LHS[strings.LastIndexByte(x.LHS, '.')+1:]
		switch {
		case x.IsDuration || strings.HasSuffix(field, "_s") || x.LHS != field && isLatencyStat(x.LHS):
			if v < 0 {
				return strconv.FormatFloat(v, 'g', 4, 64) + "s"
			}
			return secs(v)
		case strings.Contains(field, "attainment") || field == "share" || strings.HasSuffix(field, "_ratio"):
			return strconv.FormatFloat(100*v, 'f', 2, 64) + "%"
		}
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// isLatencyStat is whether a report path names a latency's statistic:
// interactive.ttft.p99, classes.batch.e2e_s.mean.
func isLatencyStat(lhs string) bool {
	parts := strings.Split(lhs, ".")
	if len(parts) < 2 {
		return false
	}
	switch strings.TrimSuffix(parts[len(parts)-2], "_s") {
	case "ttft", "tpot", "e2e", "queue_wait":
		return true
	}
	return false
}

// faultImpact prints each fault's detection, mitigation and recovery, and
// what it did to each tenant it touched: the fault's mitigation and
// recovery are its worst touched tenant's.
func faultImpact(ew *errWriter, rep *twin.Report) {
	ew.printf("\nfaults (detect and mitigate from the start, recover from the end)\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  fault / tenant\tdetect\tmitigate\trecover\tarrived\tdisplaced\tserved elsewhere\tlost\tSLO during\tSLO after\t\n")
	for _, k := range slices.Sorted(maps.Keys(rep.Faults)) {
		f := rep.Faults[k]
		mit := sinceOrNot(f.TimeToMitigateS)
		if f.NotMitigatedFor != "" {
			mit = "not for " + f.NotMitigatedFor
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t\t\t\t%d\t%.1f%%\t%.1f%%\t\n", k, sinceOrNot(f.TimeToDetectS), mit,
			sinceOrNot(f.TimeToRecoverS), f.RequestsLost, 100*f.SLOAttainmentDuring, 100*f.SLOAttainmentAfter)
		for _, t := range slices.Sorted(maps.Keys(f.Tenants)) {
			im := f.Tenants[t]
			if im.Displaced == 0 && im.Lost == 0 {
				continue
			}
			fmt.Fprintf(tw, "    %s\t\t%s\t%s\t%d\t%d\t%s\t%s\t%.1f%%\t%.1f%%\t\n", t, sinceOrNot(im.TimeToMitigateS),
				sinceOrNot(im.TimeToRecoverS), im.Requests, im.Displaced, servedWhere(im), lostWhy(im),
				100*im.SLOAttainmentDuring, 100*im.SLOAttainmentAfter)
		}
	}
	tw.Flush()
}

// sinceOrNot is a fault timing, "never" for -1.
func sinceOrNot(s twin.Seconds) string {
	if !s.Happened() {
		return "never"
	}
	return secs(float64(s))
}

// servedWhere is how many displaced requests were served elsewhere, and by
// which pools.
func servedWhere(im *twin.Impact) string {
	if im.ServedElsewhere == 0 {
		return "0"
	}
	var by []string
	for _, p := range slices.Sorted(maps.Keys(im.ServedByPool)) {
		by = append(by, fmt.Sprintf("%s %d", p, im.ServedByPool[p]))
	}
	return fmt.Sprintf("%d (%s)", im.ServedElsewhere, strings.Join(by, ", "))
}

// lostWhy is the requests lost and how: refused by reason, failed, timed
// out.
func lostWhy(im *twin.Impact) string {
	if im.Lost == 0 {
		return "0"
	}
	var why []string
	for _, r := range slices.Sorted(maps.Keys(im.Refused)) {
		why = append(why, fmt.Sprintf("refused %s %d", r, im.Refused[r]))
	}
	if im.Failed > 0 {
		why = append(why, fmt.Sprintf("failed %d", im.Failed))
	}
	if im.TimedOut > 0 {
		why = append(why, fmt.Sprintf("timed out %d", im.TimedOut))
	}
	return fmt.Sprintf("%d (%s)", im.Lost, strings.Join(why, ", "))
}

// secs formats seconds compactly: 0.0123 → 12.3ms, 75 → 1m15s.
func secs(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 1e-3:
		return fmt.Sprintf("%.0fµs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.1fms", s*1e3)
	case s < 60:
		return fmt.Sprintf("%.2fs", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", int(s)/60, int(s)%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(s)/3600, int(s)%3600/60)
	}
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
