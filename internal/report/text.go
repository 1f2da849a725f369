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
	"github.com/fleetdrill/fleetdrill/sim/stats"
	"github.com/fleetdrill/fleetdrill/twin"
)

// width is the text report's width: every line fits 100 columns but a
// table with unusually long names, which grows as it must.
const width = 100

// Text writes a readable summary of rep, every figure with its unit.
func Text(w io.Writer, rep *twin.Report) error {
	ew := &errWriter{w: w}
	c := rep.Requests
	sim := "simulated " + secs(rep.SimDurationS)
	if rep.ArrivalsS > 0 && rep.SimDurationS > rep.ArrivalsS {
		sim = fmt.Sprintf("simulated %s of arrivals + %s of drain", secs(rep.ArrivalsS), secs(rep.SimDurationS-rep.ArrivalsS))
	}
	ew.printf("scenario %s  seed %d\n%s (warm-up %s), %d events\n\n",
		rep.Scenario, rep.Seed, sim, secs(rep.WarmupS), rep.Events)
	ew.printf("requests  arrived %d = completed %d + rejected %d + failed %d + cancelled %d + timed out %d\n",
		c.Arrived, c.Completed, c.Rejected, c.Failed, c.Cancelled, c.TimedOut)
	ew.printf("          + in flight at end %d;  on the way: admitted %d, deferred %d, retries %d, fallbacks %d\n\n",
		c.InFlightAtEnd, c.Admitted, c.Deferred, c.Retries, c.Fallbacks)

	for _, name := range slices.Sorted(maps.Keys(rep.Workload)) {
		if n := rep.Workload[name].SkippedRows; n > 0 {
			ew.printf("warning: workload %s skipped %d malformed trace rows (skip_bad_rows); see fleetdrill trace stats\n\n", name, n)
		}
	}

	// Each group twice: what happened to its requests, then how long they
	// took, so that neither table passes the width.
	groups := func(title string, m map[string]*twin.Group) {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\tarrived\tcompleted\trejected\ttimed out\tin flight\tSLO met\tgoodput\t\n", title)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			g := m[name]
			met := "-" // nothing finished: no attainment
			if g.Arrived > g.InFlightAtEnd {
				met = fmt.Sprintf("%.1f%%", 100*float64(g.SLOAttainment))
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%.2f/s\t\n", name,
				g.Arrived, g.Completed, g.Rejected, g.TimedOut, g.InFlightAtEnd, met, g.GoodputRPS)
		}
		tw.Flush()
		ew.printf("\n")
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\tTTFT p50\tTTFT p99\tTPOT p50\tTPOT p99\tE2E p50\tE2E p99\tqueue wait p99\t\n", title)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			g := m[name]
			if g.Completed == 0 {
				fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t\n", name) // no latency without a completion
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name,
				secs(g.TTFT.P50), secs(g.TTFT.P99), secs(g.TPOT.P50), secs(g.TPOT.P99),
				secs(g.E2E.P50), secs(g.E2E.P99), secs(g.QueueWait.P99))
		}
		tw.Flush()
		ew.printf("\n")
	}
	groups("class", rep.Classes)
	groups("tenant", rep.Tenants)

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "pool\tregion\treplicas\tbusy\tGPU-h\tcost\tcold\tpreempt\tdispatched\tprefix hit\t\n")
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
		fmt.Fprintf(tw, "jobs\tkind\tsubmitted\tcompleted\tin window\tpreempted\tunplaceable\tpending\trunning\t\n")
		for _, name := range slices.Sorted(maps.Keys(rep.Jobs)) {
			j := rep.Jobs[name]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, j.Kind, j.Submitted, j.Completed,
				j.CompletedInWindow, j.Preemptions, j.Unplaceable, j.PendingAtEnd, j.RunningAtEnd)
		}
		tw.Flush()
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "jobs\tGPU-h used\tGPU-h wasted\twait p50\t\n")
		for _, name := range slices.Sorted(maps.Keys(rep.Jobs)) {
			j := rep.Jobs[name]
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%s\t\n", name, j.GPUHoursUsed, j.GPUHoursWasted, secs(j.Wait.P50))
		}
		tw.Flush()
	}
	// Cost is in the scenario's currency (price_per_gpu_hour): the fleet
	// paid for the arrivals' duration, and per hour.
	perHour := ""
	if rep.ArrivalsS > 0 {
		perHour = fmt.Sprintf(" (%.2f/h)", rep.Cost.Total/(rep.ArrivalsS/3600))
	}
	ew.printf("\ncost %.2f for %s%s, %.5f per successful task   residency violations %d\n",
		rep.Cost.Total, secs(rep.ArrivalsS), perHour, rep.Cost.PerSuccessfulTask, rep.ResidencyViolations)
	ew.printf("(busy: share of replica-time with a batch running, GPU-h: busy GPU-hours; cold: cold\n" +
		"starts; preempt: sequences preempted; cost: replicas × GPUs × price_per_gpu_hour)\n")

	var reasons []string
	for _, k := range slices.Sorted(maps.Keys(rep.Rejections)) {
		if n := rep.Rejections[k]; n > 0 {
			reasons = append(reasons, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(reasons) > 0 {
		ew.printf("%s\n", wrapText("rejections: "+strings.Join(reasons, ", "), width, "  "))
	}
	if len(rep.Timeline) > 0 {
		ew.printf("\ntimeline\n")
		for _, e := range rep.Timeline {
			lead := fmt.Sprintf("  %9s  %-24s ", secs(e.TS), e.Kind)
			ew.printf("%s%s\n", lead, wrapText(e.Detail, width-len(lead), strings.Repeat(" ", len(lead))))
		}
	}
	if len(rep.Faults) > 0 {
		faultImpact(ew, rep)
	}
	if len(rep.Canaries) > 0 {
		canaries(ew, rep)
	}
	if len(rep.Autoscaling) > 0 {
		autoscaling(ew, rep)
	}
	if rep.Disaggregation != nil {
		disaggregation(ew, rep.Disaggregation)
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
			ew.printf("  %s  %s\n", mark, wrapText(fmt.Sprintf("%-40s (%s)", e.Expr, Measured(e)), width-8, "        "))
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
		case x.IsDuration || strings.HasSuffix(field, "_s") || isLatencyStat(x.LHS):
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
	if len(parts) < 2 || parts[len(parts)-1] == "count" {
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
	ew.printf("\nfaults (detect and mitigate from the start, recover from the end; SLO attainment\n" +
		"during the fault and in the ten minutes after it)\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "fault / tenant\tdetect\tmitigate\trecover\tarrived\tdisplaced\tlost\tduring\tafter\t\n")
	// Where the displaced requests went, and why the lost ones were, for
	// each tenant under the table: a column of them would pass the width.
	var notes []string
	for _, k := range slices.Sorted(maps.Keys(rep.Faults)) {
		f := rep.Faults[k]
		mit := sinceOrNot(f.TimeToMitigateS)
		if f.NotMitigatedFor != "" {
			mit = "never*"
			notes = append(notes, fmt.Sprintf("* %s: not mitigated for %s, which nothing else may serve", k, f.NotMitigatedFor))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\t\t%d\t%s\t%s\t\n", k, sinceOrNot(f.TimeToDetectS), mit,
			sinceOrNot(f.TimeToRecoverS), f.RequestsLost, share(float64(f.SLOAttainmentDuring), f.FinishedDuring), share(float64(f.SLOAttainmentAfter), f.FinishedAfter))
		for _, t := range slices.Sorted(maps.Keys(f.Tenants)) {
			im := f.Tenants[t]
			if im.Displaced == 0 && im.Lost == 0 {
				continue
			}
			fmt.Fprintf(tw, "  %s\t\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t\n", t, sinceOrNot(im.TimeToMitigateS),
				sinceOrNot(im.TimeToRecoverS), im.Requests, im.Displaced, im.Lost,
				share(float64(im.SLOAttainmentDuring), im.FinishedDuring), share(float64(im.SLOAttainmentAfter), im.FinishedAfter))
			note := fmt.Sprintf("%s, %s: served elsewhere %s", k, t, servedWhere(im))
			if im.Lost > 0 {
				note += "; lost " + lostWhy(im)
			}
			notes = append(notes, note)
		}
	}
	tw.Flush()
	for _, n := range notes {
		ew.printf("  %s\n", wrapText(n, width-2, "      "))
	}
}

// autoscaling prints each autoscaled pool: the replicas it served with,
// what it asked of its provider and got, how long a replica took to serve,
// and what the replicas cost (the series of counts is in the JSON report).
func autoscaling(ew *errWriter, rep *twin.Report) {
	ew.printf("\nautoscaling (replicas asked of the provider, granted, refused; time from the ask to serving)\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "pool\tserving\tups\tdowns\tasked\tgranted\treserved\trefused\tto serving p50\tmax\tcost\t\n")
	var notes []string
	for _, name := range slices.Sorted(maps.Keys(rep.Autoscaling)) {
		a := rep.Autoscaling[name]
		p50, mx := "-", "-"
		if a.ToServing.Count > 0 {
			p50, mx = secs(a.ToServing.P50), secs(a.ToServing.Max)
		}
		fmt.Fprintf(tw, "%s\t%d–%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%.2f\t\n", name, a.MinServing, a.MaxServing,
			a.ScaleUps, a.ScaleDowns, a.Asked, a.Granted, a.Reserved, a.Refused, p50, mx, a.ReservedCost+a.BurstCost)
		var why []string
		for _, k := range slices.Sorted(maps.Keys(a.RefusedBy)) {
			if n := a.RefusedBy[k]; n > 0 {
				why = append(why, fmt.Sprintf("%s %d", k, n))
			}
		}
		note := fmt.Sprintf("%s: cost %.2f reserved (%.2f replica-h) + %.2f on demand (%.2f replica-h)", name,
			a.ReservedCost, a.ReservedHours, a.BurstCost, a.BurstHours)
		if len(why) > 0 {
			note += "; refused: " + strings.Join(why, ", ")
		}
		notes = append(notes, note, shortfall(name, a, rep.ArrivalsS, rep.WarmupS))
	}
	tw.Flush()
	for _, n := range notes {
		ew.printf("  %s\n", wrapText(n, width-2, "      "))
	}
}

// disaggregation is the P/D section: where prompts were prefilled, what
// moved over the links, and the split of a remotely prefilled request's
// time to first token.
func disaggregation(ew *errWriter, d *twin.DisaggReport) {
	ew.printf("\ndisaggregation (prefill on prefill pools or locally; KV moved over the decode replicas' links)\n")
	ew.printf("  prefilled remotely %d, locally %d; transfers %d (%.1f GB), stopped %d, failed %d (recomputed %d)\n",
		d.RemotePrefills, d.LocalPrefills, d.Transfers, d.Bytes/1e9, d.Aborted, d.Failed, d.Recomputed)
	if d.Transfer.Count == 0 {
		return
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  TTFT, remote prefill\tmean\tp50\tp99\tmax\t\n")
	for _, part := range []struct {
		name string
		s    stats.Summary
	}{{"prefill (its queue, the prompt)", d.Prefill}, {"transfer (latency, bandwidth share)", d.Transfer}, {"decode (its queue, first token)", d.Decode}} {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\n", part.name, secs(part.s.Mean), secs(part.s.P50), secs(part.s.P99), secs(part.s.Max))
	}
	tw.Flush()
}

// shortfall is pool name's line on its shortfall (serving fewer replicas
// than it asked for) over the run's arrivals (of duration s), and the SLO
// attainment of each tenant with measured requests (after warmup s) that
// arrived while it was short, short against not.
func shortfall(name string, a *twin.AutoscaleReport, duration, warmup float64) string {
	if a.ShortS == 0 {
		return name + ": never short (serving what it asked for throughout)"
	}
	line := fmt.Sprintf("%s: short %s of %s (%.0f replica-s; longest %s); SLO attainment of requests arriving while short vs not:",
		name, secs(a.ShortS), secs(duration), a.ShortReplicaS, secs(a.LongestShortS))
	var by []string
	for _, t := range slices.Sorted(maps.Keys(a.Tenants)) {
		if st := a.Tenants[t]; st.ArrivedShort > 0 {
			by = append(by, fmt.Sprintf("%s %s of %d vs %s of %d", t, share(float64(st.SLOAttainmentShort), st.FinishedShort),
				st.ArrivedShort, share(float64(st.SLOAttainmentNotShort), st.FinishedNotShort), st.Arrived-st.ArrivedShort))
		}
	}
	switch {
	case len(by) == 0 && warmup > 0:
		return line + " no request arrived while short after the warm-up"
	case len(by) == 0:
		return line + " no request arrived while short"
	}
	return line + " " + strings.Join(by, "; ")
}

// canaries prints each canary: where it stands, what each route version
// served, its shadow copies, and the share it measured minute by minute
// (its decisions, with why, are on the timeline).
func canaries(ew *errWriter, rep *twin.Report) {
	ew.printf("\ncanaries (eligible traffic by route version, per attempt: a request retried from the\n" +
		"canary to the baseline counts on each; decisions and why on the timeline)\n")
	for _, name := range slices.Sorted(maps.Keys(rep.Canaries)) {
		c := rep.Canaries[name]
		state := fmt.Sprintf("%s at %.4g%%", c.State, 100*c.Share)
		if c.RolledBackAtS.Happened() {
			state = "rolled back at " + secs(float64(c.RolledBackAtS))
			if c.TimeToRollbackS.Happened() {
				state += ", " + secs(float64(c.TimeToRollbackS)) + " after its candidate's fault began"
			}
		}
		ew.printf("  %s\n", wrapText(fmt.Sprintf("%s: %s on %s, %s", name, c.Model, strings.Join(c.Candidate, ", "), state), width-2, "    "))
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "version\tattempts\tfailed\tSLO met\tTTFT p50\tTTFT p99\tE2E p99\tcost/success\t\n")
		for _, v := range []struct {
			name string
			r    twin.VersionReport
		}{{"canary", c.Canary}, {"baseline", c.Baseline}, {"shadow", c.Shadow.Latency}} {
			lat := func(x float64) string {
				if v.r.Succeeded == 0 {
					return "-"
				}
				return secs(x)
			}
			cost := "-"
			if v.r.Succeeded > 0 {
				cost = fmt.Sprintf("%.6f", v.r.CostPerSuccess)
			}
			met := "-" // no client waits for a copy
			if a := v.r.SLOAttainment; a != nil {
				met = share(*a, v.r.Attempts)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", v.name, v.r.Attempts, v.r.Failed,
				met, lat(v.r.TTFTP50S), lat(v.r.TTFTP99S), lat(v.r.E2EP99S), cost)
		}
		tw.Flush()
		sh := c.Shadow
		if sh.Sent > 0 {
			ew.printf("    %s\n", wrapText(fmt.Sprintf("shadow copies: %d sent, %d completed, %d failed, %d shed, %d cancelled, %d in flight at the end; none answered a client", sh.Sent, sh.Completed, sh.Failed, sh.Shed, sh.Cancelled, sh.InFlightAtEnd), width-4, "      "))
		}
		var mins []string
		for _, m := range c.ShareByMinute {
			if m == nil {
				mins = append(mins, "-")
			} else {
				mins = append(mins, strconv.FormatFloat(100**m, 'f', 1, 64))
			}
		}
		if len(mins) > 0 {
			ew.printf("    %s\n", wrapText("canary share by minute (%): "+strings.Join(mins, " "), width-4, "      "))
		}
	}
}

// share is an attainment over n requests, "-" over none (no data).
func share(v float64, n uint64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
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

// wrapText breaks s at spaces into lines of at most w cells, the lines
// after the first led by indent (whose width w does not count).
func wrapText(s string, w int, indent string) string {
	if w < 20 || len([]rune(s)) <= w {
		return s
	}
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		n := len([]rune(word))
		switch {
		case i == 0:
		case line+1+n > w:
			b.WriteString("\n" + indent)
			line = 0
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += n
	}
	return b.String()
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
