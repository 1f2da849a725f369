package twin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// TestTwinScripts runs the twin scripts in testdata/scripts, in the style of
// CockroachDB's allocator simulator (asim): each file declares a scenario,
// injects faults, runs the whole twin (Run) and prints what happened, then
// asserts on the report. twin/sched's scripts drive the core one input at a
// time; these drive everything, the latency model and the fault injector
// included, so they hold the design's behaviours end to end.
//
// Directives:
//
//	scenario
//	<scenario YAML, as in docs/scenarios.md>
//
// Starts a new scenario (forgetting the previous one's faults, expectations,
// overrides and report). It is parsed and validated by the scenarios package
// exactly as a file would be; a refused scenario prints its problems.
// Prints a one-line summary of the fleet.
//
//	set
//	<path=value, one per line>
//
// Overrides (fleetdrill run --set), applied in order before the next runs
// decode the YAML; later ones win. They stay until the next scenario. Ones
// the loader refuses print why and are dropped.
//
//	fault regional-outage region=eu-west at=5m for=10m
//
// Adds a fault in the syntax of docs/faults.md (more may follow in the input
// block, one per line) and prints it back in canonical form. Faults stay
// until the next scenario, after those of the YAML's faults: list.
//
//	expect
//	<expectation, one per line>
//
// Declares expectations of the next run (the syntax of a scenario's
// expect: list, scoped ones included: "during regional-outage(eu-west):
// ..."), added to the YAML's own. The next run evaluates them and forgets
// them: a script that reruns a drill with a broken policy declares what that
// run must show. A scoped expectation must be declared here, before the run,
// because the twin builds the windows it needs as it runs.
//
//	run seed=7
//
// Runs the twin and prints, deterministically: the timeline (time, kind,
// detail); the request counts by outcome and the counts on the way
// (deferred, retries, fallbacks); residency violations; rejections by
// reason; per pool, the requests dispatched to it and its cold starts; and
// the declared expectations, each PASS or FAIL with its value. The seed is
// required, so that every run says which one it is. With every=D it also
// records the run's metrics every D of simulated time (which changes
// nothing in the report) and prints, per pool, the requests it completed in
// each interval: where the traffic went, and when.
//
//	check
//	<expectation, one per line>
//
// Evaluates expectations against the last run's report at once and prints
// each PASS or FAIL with its value: requests.completed >= 100,
// residency_violations == 0, pools.eu.dispatched == 0, tenants.bank.failed
// > 0, faults.regional-outage(eu-west).time_to_detect_s > 0s. Scoped
// expectations need windows: declare them with expect instead.
//
//	faults
//	tenants
//	classes
//
// Print the last run's fault reports (times to detect, mitigate and recover,
// requests lost, SLO attainment during and after), or its counts by tenant
// or by class.
//
// A FAIL, from check or from a declared expectation, fails the test as well
// as printing, with the script's line and how to rerun it; -rewrite does not
// record the output of a failing script, so a FAIL cannot be blessed. A
// mistake in a script (an unknown directive or argument, an expectation
// that does not parse or names no report value) and a run that fails (a
// fleet the twin cannot build, a broken accounting invariant) fail it at
// once. A scenario, override or fault the loaders refuse prints why, as
// fleetdrill would. To regenerate the expected output after a behaviour
// change:
//
//	go test ./twin -run TestTwinScripts -rewrite
//
// and read the diff: only commit it if you understand what caused it.
func TestTwinScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		t.Parallel()
		e := &twinScript{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return e.handle(t, td)
		})
	})
}

// twinScript is one script's state: the scenario being drilled and the
// report of its last run.
type twinScript struct {
	yaml   string   // the scenario's YAML; "" before the first scenario
	sets   []string // --set overrides
	faults []string // faults added by the script, canonical
	expect []string // expectations declared for the next run
	sc     *scenarios.Scenario
	rep    *Report
}

func (e *twinScript) handle(t *testing.T, td *datadriven.TestData) string {
	var b strings.Builder
	switch td.Cmd {
	case "scenario":
		scriptArgs(t, td)
		*e = twinScript{yaml: td.Input}
		sc, err := e.parse()
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		scriptSummary(&b, sc)

	case "set":
		scriptArgs(t, td)
		e.scenario(t, td)
		prev := e.sets
		e.sets = append(slices.Clip(e.sets), scriptLines(td.Input)...)
		if _, err := e.parse(); err != nil {
			e.sets = prev // refused: the runs go on without them
			return "error: " + err.Error() + "\n"
		}

	case "fault":
		e.scenario(t, td)
		lines := scriptLines(td.Input)
		if len(td.CmdArgs) > 0 {
			args := make([]string, len(td.CmdArgs))
			for i, a := range td.CmdArgs {
				args[i] = a.String()
			}
			lines = append([]string{strings.Join(args, " ")}, lines...)
		}
		if len(lines) == 0 {
			td.Fatalf(t, "fault: want a fault, e.g. fault regional-outage region=eu-west at=5m for=10m")
		}
		for _, l := range lines {
			spec, err := faults.Parse(l)
			if err != nil {
				fmt.Fprintf(&b, "error: %s: %v\n", l, err)
				continue
			}
			e.faults = append(e.faults, spec.String())
			fmt.Fprintf(&b, "%s\n", spec)
		}

	case "expect":
		scriptArgs(t, td)
		e.scenario(t, td)
		for _, l := range scriptLines(td.Input) {
			if _, err := scenarios.ParseExpectation(l); err != nil {
				td.Fatalf(t, "expect: %v", err)
			}
			e.expect = append(e.expect, l)
		}

	case "run":
		// Example: run seed=7
		// Example: run seed=7 every=1m
		scriptArgs(t, td, "seed", "every")
		e.scenario(t, td)
		if !td.HasArg("seed") {
			td.Fatalf(t, "run: seed= is required: every run says which seed it is")
		}
		var seed uint64
		td.ScanArgs(t, "seed", &seed)
		sc, err := e.parse()
		if err != nil {
			td.Fatalf(t, "run: the scenario was refused: %v", err)
		}
		sc.Seed = seed
		sc.Faults = append(sc.Faults, e.faults...)
		sc.Expect = append(sc.Expect, e.expect...)
		e.expect = nil
		var opts Options
		if td.HasArg("every") {
			var every string
			td.ScanArgs(t, "every", &every)
			step, err := time.ParseDuration(every)
			if err != nil || step <= 0 {
				td.Fatalf(t, "run: every=%s: want a positive duration", every)
			}
			opts.Metrics = &Metrics{Step: step}
		}
		rep, err := Run(context.Background(), sc, opts)
		if err != nil {
			// A fleet the twin cannot build, an expectation naming no
			// report value, or a broken accounting invariant (a twin bug).
			td.Fatalf(t, "run seed=%d: %v", seed, err)
		}
		e.sc, e.rep = sc, rep
		e.printRun(&b)
		if opts.Metrics != nil {
			e.printServed(&b, opts.Metrics)
		}
		e.printExpectations(t, td, &b, rep.Expectations)

	case "check":
		scriptArgs(t, td)
		rep := e.report(t, td)
		got, err := rep.Check(scriptLines(td.Input)...)
		if err != nil {
			td.Fatalf(t, "check: %v", err) // a script's typo, not a verdict
		}
		e.printExpectations(t, td, &b, got)

	case "faults":
		scriptArgs(t, td)
		rep := e.report(t, td)
		for _, k := range slices.Sorted(maps.Keys(rep.Faults)) {
			f := rep.Faults[k]
			fmt.Fprintf(&b, "%s: %s\n", k, f.Spec)
			fmt.Fprintf(&b, "  detect %s, mitigate %s, recover %s\n",
				scriptSince(f.TimeToDetectS), scriptSince(f.TimeToMitigateS), scriptSince(f.TimeToRecoverS))
			fmt.Fprintf(&b, "  requests lost %d, slo attainment during %.3f, after %.3f\n",
				f.RequestsLost, f.SLOAttainmentDuring, f.SLOAttainmentAfter)
			if f.NotMitigatedFor != "" {
				fmt.Fprintf(&b, "  not mitigated for %s\n", f.NotMitigatedFor)
			}
			for _, tn := range slices.Sorted(maps.Keys(f.Tenants)) {
				im := f.Tenants[tn]
				if im.Displaced == 0 && im.Lost == 0 {
					continue
				}
				fmt.Fprintf(&b, "  tenant %s: arrived %d, displaced %d, served elsewhere %d %v, lost %d %v; mitigate %s, recover %s\n",
					tn, im.Requests, im.Displaced, im.ServedElsewhere, im.ServedByPool, im.Lost, im.Refused,
					scriptSince(im.TimeToMitigateS), scriptSince(im.TimeToRecoverS))
			}
		}
		if len(rep.Faults) == 0 {
			b.WriteString("none\n")
		}

	case "tenants", "classes":
		scriptArgs(t, td)
		rep := e.report(t, td)
		groups := rep.Tenants
		if td.Cmd == "classes" {
			groups = rep.Classes
		}
		for _, k := range slices.Sorted(maps.Keys(groups)) {
			g := groups[k]
			fmt.Fprintf(&b, "%s: %s\n  %s\n", k, scriptOutcomes(g.Counts), scriptOnTheWay(g.Counts))
		}

	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	return b.String()
}

// parse decodes the scenario with the overrides so far.
func (e *twinScript) parse() (*scenarios.Scenario, error) {
	return scenarios.ParseWithSets("scenario", []byte(e.yaml), e.sets)
}

// printRun prints the last run: timeline, counts, rejections, pools.
func (e *twinScript) printRun(b *strings.Builder) {
	rep := e.rep
	b.WriteString("timeline:\n")
	for _, ev := range rep.Timeline {
		fmt.Fprintf(b, "  %-9s %-22s %s\n", scriptTS(ev.TS), ev.Kind, ev.Detail)
	}
	c := rep.Requests
	fmt.Fprintf(b, "requests: %s\n  %s\n", scriptOutcomes(c), scriptOnTheWay(c))
	fmt.Fprintf(b, "residency violations: %d\n", rep.ResidencyViolations)
	b.WriteString("rejections:")
	none := true
	for _, k := range slices.Sorted(maps.Keys(rep.Rejections)) {
		if n := rep.Rejections[k]; n > 0 {
			fmt.Fprintf(b, " %s=%d", k, n)
			none = false
		}
	}
	if none {
		b.WriteString(" none")
	}
	b.WriteString("\npools:\n")
	for _, p := range e.sc.Pools { // the scenario's order
		pr := rep.Pools[p.Name]
		fmt.Fprintf(b, "  %s (%s, %s, %d replicas): dispatched %d, cold starts %d\n",
			p.Name, p.Region, p.Provider, pr.Replicas, pr.Dispatched, pr.ColdStarts)
	}
}

// printServed prints, per pool, the requests it completed in each interval
// of the run's metrics (the end-to-end latency histogram's count, which
// counts every completed request, by the pool that served it): where the
// traffic went, and when.
func (e *twinScript) printServed(b *strings.Builder, m *Metrics) {
	fam := m.Family(signals.E2E)
	pool := slices.Index(fam.Signal.Labels, "pool")
	byPool := map[string][]uint64{} // cumulative, per instant
	for _, s := range fam.Series {
		cum := byPool[s.Labels[pool]]
		if cum == nil {
			cum = make([]uint64, len(m.Times))
			byPool[s.Labels[pool]] = cum
		}
		for i, h := range s.Hist {
			cum[s.First+i] += h.Count
		}
	}
	fmt.Fprintf(b, "completed per pool, every %s (to):\n  %-12s", m.Step, "")
	for _, at := range m.Times[1:] {
		fmt.Fprintf(b, " %6s", at.Round(time.Second))
	}
	b.WriteString("\n")
	for _, p := range e.sc.Pools {
		cum := byPool[p.Name]
		fmt.Fprintf(b, "  %-12s", p.Name)
		for i := 1; i < len(m.Times); i++ {
			var n uint64
			if cum != nil {
				n = cum[i] - cum[i-1]
			}
			fmt.Fprintf(b, " %6d", n)
		}
		b.WriteString("\n")
	}
}

// printExpectations prints each expectation's verdict and value, and fails
// the test on a FAIL.
func (e *twinScript) printExpectations(t *testing.T, td *datadriven.TestData, b *strings.Builder, exps []Expectation) {
	if len(exps) > 0 && td.Cmd == "run" {
		b.WriteString("expectations:\n")
	}
	for _, x := range exps {
		verdict := "PASS"
		if !x.Pass {
			verdict = "FAIL"
			t.Errorf("%s: %s: %s (value %v); rerun: go test ./twin -run 'TestTwinScripts/%s'",
				td.Pos, verdict, x.Expr, x.Value, strings.TrimSuffix(scriptBase(td.Pos), ".txt"))
		}
		fmt.Fprintf(b, "  %s %s (value %v)\n", verdict, x.Expr, x.Value)
	}
}

func (e *twinScript) scenario(t *testing.T, td *datadriven.TestData) {
	if e.yaml == "" {
		td.Fatalf(t, "%s: no scenario yet (start with a scenario block)", td.Cmd)
	}
}

func (e *twinScript) report(t *testing.T, td *datadriven.TestData) *Report {
	if e.rep == nil {
		td.Fatalf(t, "%s: no report yet (run the scenario first)", td.Cmd)
	}
	return e.rep
}

// scriptSummary prints the fleet a scenario declares, in one line.
func scriptSummary(b *strings.Builder, sc *scenarios.Scenario) {
	replicas := 0
	for _, p := range sc.Pools {
		replicas += p.Replicas
	}
	fmt.Fprintf(b, "%s: %d regions, %d pools (%d replicas), %d models, %d tenants, %d classes, %d streams, %s + drain %s\n",
		sc.Name, len(sc.Regions), len(sc.Pools), replicas, len(sc.Models), len(sc.Tenants), len(sc.Classes),
		len(sc.Workload), sc.Duration.D(), sc.Drain.D())
}

// scriptOutcomes prints the outcomes every request ends in exactly once.
func scriptOutcomes(c Counts) string {
	return fmt.Sprintf("arrived %d = completed %d + rejected %d + failed %d + timed_out %d + cancelled %d + in_flight_at_end %d",
		c.Arrived, c.Completed, c.Rejected, c.Failed, c.TimedOut, c.Cancelled, c.InFlightAtEnd)
}

// scriptOnTheWay prints the counts of what happened to requests on the way.
func scriptOnTheWay(c Counts) string {
	return fmt.Sprintf("admitted %d, deferred %d, retries %d, fallbacks %d", c.Admitted, c.Deferred, c.Retries, c.Fallbacks)
}

// scriptTS prints a timeline time, a report's seconds, as a duration.
func scriptTS(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// scriptSince prints a fault report's time, -1 for never.
func scriptSince(s Seconds) string {
	if s < 0 {
		return "never"
	}
	return scriptTS(float64(s))
}

func scriptLines(s string) []string {
	var out []string
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// scriptBase is the file name of a datadriven position, "dir/f.txt:12".
func scriptBase(pos string) string {
	pos, _, _ = strings.Cut(pos, ":")
	return pos[strings.LastIndex(pos, "/")+1:]
}

// scriptArgs fails the script on an argument the command does not take, so
// a typo is not silently ignored.
func scriptArgs(t *testing.T, td *datadriven.TestData, keys ...string) {
	for _, a := range td.CmdArgs {
		if !slices.Contains(keys, a.Key) {
			td.Fatalf(t, "%s: unknown argument %q", td.Cmd, a.Key)
		}
	}
}
