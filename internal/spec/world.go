package spec

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cucumber/godog"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/liverun"
	"github.com/fleetdrill/fleetdrill/internal/report"
	"github.com/fleetdrill/fleetdrill/internal/shell"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// world is one Gherkin scenario's state: the fleet being edited, as a base
// scenario (a library name or a file) plus --set overrides and fault lines,
// and the report once run. Every edit is a --set override, so the command
// that reproduces a failure is exact.
type world struct {
	base    string // library name, or a file path as the user should type it
	path    string // the file to read, for a file base
	library bool
	sets    []string // --set overrides, in order
	faults  []string // fault lines: the base's, then those the steps add
	edited  bool     // faults changed: emit faults=[...]
	// canaries the steps added (canary.go): emitted as canaries=[...],
	// replacing the fleet's own, once one is added.
	canaries       []stepCanary
	canariesEdited bool

	live    bool     // tagged @live: runs on the live harness
	speed   float64  // live: time compression (0: liverun's default)
	perPool int      // live: at most this many containers per pool (0: all)
	featDir string   // the feature file's directory, for relative fleet paths
	steps   []string // the scenario's step texts, for scoped outcomes

	sc      *scenarios.Scenario
	rep     *twin.Report
	runErr  error
	skipped string
}

func (w *world) requireFleet() error {
	if w.base == "" {
		return errors.New(`no fleet yet: start with a step like Given the fleet "default" (a library scenario or a YAML file)`)
	}
	if w.rep != nil || w.runErr != nil {
		return errors.New("the scenario has already run (an outcome step came before this one); put every Given and When before the first Then")
	}
	return nil
}

// setFleet chooses the base scenario: a library name or a file, relative
// to the feature file. optional: a library name that does not exist skips
// the scenario rather than failing it.
func (w *world) setFleet(name string, optional bool) error {
	if scenarios.IsLibraryName(name) {
		if _, err := scenarios.Source(name); err != nil {
			if optional {
				return w.skip(fmt.Sprintf("this build's library has no scenario %q", name))
			}
			return err
		}
		w.base, w.library = name, true
	} else {
		p := name
		if !filepath.IsAbs(p) && w.featDir != "" {
			p = filepath.Join(w.featDir, p)
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("fleet %q: %w", name, err)
		}
		w.base, w.path = p, p
	}
	sc, err := w.load(nil)
	if err != nil {
		return err
	}
	w.faults = append([]string(nil), sc.Faults...)
	return nil
}

// skip marks the scenario skipped, with a reason printed by the suite.
func (w *world) skip(reason string) error {
	w.skipped = reason
	return fmt.Errorf("%w: %s", godog.ErrSkip, reason)
}

// allSets is the overrides with the faults, as fleetdrill run takes them.
func (w *world) allSets(extra ...string) []string {
	out := append([]string(nil), w.sets...)
	if w.edited {
		out = append(out, "faults="+yamlList(w.faults))
	}
	if w.canariesEdited {
		out = append(out, w.canariesSet())
	}
	return append(out, extra...)
}

// load parses the base with the overrides so far (and extra ones). A
// scenario that needs the shared traces, when they are not beside the
// checkout, skips.
func (w *world) load(extra []string) (*scenarios.Scenario, error) {
	sets := w.allSets(extra...)
	var sc *scenarios.Scenario
	var err error
	if w.library {
		sc, err = scenarios.LoadNamedWithSets(w.base, sets)
	} else {
		sc, err = scenarios.LoadWithSets(w.path, sets)
	}
	if err == nil {
		return sc, nil
	}
	var ve *scenarios.ValidationError
	if errors.As(err, &ve) {
		missing := 0
		for _, p := range ve.Problems {
			if strings.HasSuffix(p.Path, ".trace.path") && strings.Contains(p.Msg, "no such file") {
				missing++
			}
		}
		if missing == len(ve.Problems) {
			return nil, w.skip(fmt.Sprintf("%s replays a trace that is not here: %v", w.base, err))
		}
	}
	return nil, err
}

// set adds an override after checking that the scenario still validates,
// so that a bad edit fails at its own step with the loader's message.
func (w *world) set(sets ...string) error {
	if err := w.requireFleet(); err != nil {
		return err
	}
	if _, err := w.load(sets); err != nil {
		return err
	}
	w.sets = append(w.sets, sets...)
	return nil
}

// addFault parses a fault line (so its errors come with the fault
// syntax's messages) and adds it in canonical form.
func (w *world) addFault(line string) error {
	if err := w.requireFleet(); err != nil {
		return err
	}
	sp, err := faults.Parse(line)
	if err != nil {
		return fmt.Errorf("fault %q: %w", line, err)
	}
	prev, prevEdited := w.faults, w.edited
	w.faults = append(append([]string(nil), w.faults...), sp.String())
	w.edited = true
	if _, err := w.load(nil); err != nil {
		w.faults, w.edited = prev, prevEdited
		return err
	}
	return nil
}

// labelFor resolves how a step names a fault ("the outage", "the quota
// exhaustion", or a label as reports print it, regional-outage(us-east))
// to the label the report uses: the last fault of that kind.
func (w *world) labelFor(what string) (string, error) {
	what = strings.TrimSpace(what)
	if strings.Contains(what, "(") {
		return what, nil
	}
	kind, ok := faultWord(strings.TrimPrefix(what, "the "))
	if !ok {
		var words []string
		for _, k := range faults.Kinds() {
			words = append(words, "the "+faults.Kind(k).Traits().Words[0])
		}
		return "", fmt.Errorf("%q names no fault; write %s, the fault, or a label like regional-outage(us-east)", what, strings.Join(words, ", "))
	}
	return w.lastLabel(kind)
}

// lastLabel is the label of the scenario's last fault of kind, or of any
// kind for "".
func (w *world) lastLabel(kind faults.Kind) (string, error) {
	specs, err := faults.ParseAll(w.faults)
	if err != nil {
		return "", err
	}
	labels := make([]string, len(specs))
	seen := map[string]int{}
	for i, sp := range specs {
		l := twin.Label(sp)
		if n := seen[l]; n > 0 {
			labels[i] = fmt.Sprintf("%s#%d", l, n+1)
		} else {
			labels[i] = l
		}
		seen[l]++
	}
	for i := len(specs) - 1; i >= 0; i-- {
		if kind == "" || specs[i].Kind == kind {
			return labels[i], nil
		}
	}
	if kind == "" {
		return "", errors.New("the scenario has no faults")
	}
	return "", fmt.Errorf("the scenario has no %s fault (faults: %s)", kind, strings.Join(labels, ", "))
}

// faultWord is the kind a step's word names ("outage", "quota
// exhaustion": its faults.Traits.Words), or "" for any kind ("fault",
// "last fault"); false for a word that names none.
func faultWord(word string) (faults.Kind, bool) {
	if word == "fault" || word == "last fault" {
		return "", true
	}
	for _, k := range faults.Kinds() {
		if slices.Contains(faults.Kind(k).Traits().Words, word) {
			return faults.Kind(k), true
		}
	}
	return "", false
}

// run runs the twin once, at the first outcome step. The scoped
// expectations of every outcome step of the scenario go into the run's
// expect list first: the twin measures a window only when an expectation
// names it.
func (w *world) run(ctx context.Context) error {
	if w.skipped != "" {
		return w.skip(w.skipped)
	}
	if w.rep != nil {
		return nil
	}
	if w.runErr != nil {
		return w.runErr
	}
	if w.base == "" {
		return errors.New(`no fleet: start with a step like Given the fleet "default"`)
	}
	w.runErr = w.doRun(ctx)
	return w.runErr
}

func (w *world) doRun(ctx context.Context) error {
	sc, err := w.load(nil)
	if err != nil {
		return err
	}
	scoped := 0
	for _, text := range w.steps {
		d, args := match(text)
		if d == nil || d.exprs == nil {
			continue
		}
		exprs, err := d.exprs(w, args)
		if err != nil {
			continue // reported by its own step
		}
		for _, e := range exprs {
			if p, err := scenarios.ParseExpectation(e); err == nil && p.Scope != "" {
				sc.Expect = append(sc.Expect, e)
				scoped++
			}
		}
	}
	w.sc = sc
	if w.live {
		return w.runLive(ctx, sc.Expect[len(sc.Expect)-scoped:])
	}
	rep, err := twin.Run(ctx, sc, twin.Options{})
	if err != nil {
		return fmt.Errorf("run %s (seed %d): %w\nreproduce with: %s", w.base, sc.Seed, err, w.repro(nil))
	}
	w.rep = rep
	return nil
}

// runLive replays the scenario on the live harness; expect are the scoped
// expectations the steps add (their windows must exist before the run).
func (w *world) runLive(ctx context.Context, expect []string) error {
	name := w.base
	if !w.library {
		name = w.path
	}
	res, err := liverun.Run(ctx, liverun.Options{Scenario: name, Sets: w.allSets(), Expect: expect,
		Speed: w.speed, Replicas: w.perPool, NoTwin: true})
	if err != nil {
		return fmt.Errorf("live run %s: %w\nreproduce with: %s", w.base, err, w.repro(nil))
	}
	w.sc, w.rep = res.Scenario, res.Live
	return nil
}

// check evaluates an outcome's expectations and fails with what was
// expected, what was measured, the seed, the timeline around the fault and
// the command that reproduces it; note, if not nil, says what happened.
func (w *world) check(ctx context.Context, exprs []string, label string, note func() string) error {
	if err := w.run(ctx); err != nil {
		return err
	}
	got, err := w.rep.Check(exprs...)
	if err != nil {
		return err
	}
	var failing []twin.Expectation
	for _, e := range got {
		if !e.Pass {
			failing = append(failing, e)
		}
	}
	if len(failing) == 0 {
		return nil
	}
	n := ""
	if note != nil {
		n = note()
	}
	return w.failure(exprs, failing, label, n)
}

// failure is the failure of an outcome whose expectations are exprs, of
// which failing failed: the expected line is all of them (a step's bound
// as well as its "it happened"), the measured one each failing one's
// figure, and the reproduce command judges all of them, as the step did.
func (w *world) failure(exprs []string, failing []twin.Expectation, label, note string) error {
	var measured []string
	for _, e := range failing {
		measured = append(measured, report.Measured(e))
	}
	if len(slices.Compact(slices.Clone(measured))) > 1 {
		// Different figures: say which is which.
		for i, e := range failing {
			measured[i] = e.Expr + ": " + measured[i]
		}
	} else {
		measured = measured[:1] // one figure (a time that never came fails both)
	}
	return w.failed(strings.Join(exprs, " and "), strings.Join(measured, "; "), label, note, exprs)
}

// failed is an outcome's failure message: expected and measured as the
// step words them, what happened (note, when not ""), the timeline around
// the fault label and the command that reproduces it with expect added.
func (w *world) failed(expected, measured, label, note string, expect []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "outcome failed\n  expected: %s\n  measured: %s\n", expected, measured)
	if note != "" {
		fmt.Fprintf(&b, "  what happened: %s\n", note)
	}
	fmt.Fprintf(&b, "  scenario: %s, seed %d\n", w.sc.Name, w.sc.Seed)
	b.WriteString(w.timelineExcerpt(label))
	fmt.Fprintf(&b, "  reproduce: %s", w.repro(expect))
	if len(expect) == 0 {
		// Say so rather than let a passing command pass for a reproduction.
		b.WriteString("\n  (this outcome has no expectation of the scenario syntax: the command reproduces the run, and the figures above are in its --json report)")
	}
	return errors.New(b.String())
}

// repro is the fleetdrill run command that runs the same scenario and
// judges exactly these expectations, what the failing step judged: the
// scenario's own expectations are replaced, since the spec did not judge
// them (unless its step was "every expectation of the scenario holds",
// whose expectations they are). With none (an outcome read from the
// timeline, or a run that failed), it judges nothing and reproduces the
// run.
func (w *world) repro(expect []string) string {
	return w.reproSets([]string{"expect=" + yamlList(expect)})
}

// reproSets is the fleetdrill run command of the scenario with these
// overrides added, and flags after them.
func (w *world) reproSets(extra []string, flags ...string) string {
	args := []string{"fleetdrill", "run", shell.Quote(w.base)}
	if w.live {
		args = append(args, "--live")
		if w.speed > 0 {
			args = append(args, "--speed", strconv.FormatFloat(w.speed, 'g', -1, 64))
		}
		if w.perPool > 0 {
			args = append(args, "--replicas", strconv.Itoa(w.perPool))
		}
	}
	sets := w.allSets(extra...)
	if slices.ContainsFunc(extra, func(s string) bool { return strings.HasPrefix(s, "expect=") }) {
		// The last expect= wins: an earlier one (the fleet's own
		// expectations dropped) only clutters the command.
		sets = slices.DeleteFunc(sets[:len(sets)-len(extra)], func(s string) bool { return strings.HasPrefix(s, "expect=") })
		sets = append(sets, extra...)
	}
	for _, s := range sets {
		args = append(args, "--set", shell.Quote(s))
	}
	return strings.Join(append(args, flags...), " ")
}

func (w *world) baseExpect() []string {
	sc, err := w.load(nil)
	if err != nil {
		return nil
	}
	return sc.Expect
}

// timelineExcerpt prints the timeline around a fault (a minute either
// side), or its first events when no fault is concerned.
func (w *world) timelineExcerpt(label string) string {
	from, to := math.Inf(-1), math.Inf(1)
	title := "timeline"
	if f, ok := w.rep.Faults[label]; ok {
		from = f.StartS - 60
		if f.EndS >= 0 {
			to = f.EndS + 60
		}
		title = fmt.Sprintf("timeline around %s (%s), a minute either side", label, f.Spec)
	}
	var lines []string
	for _, ev := range w.rep.Timeline {
		if ev.TS < from || ev.TS > to {
			continue
		}
		lines = append(lines, fmt.Sprintf("    %9.1fs  %-20s %s", ev.TS, ev.Kind, ev.Detail))
	}
	const keep = 24
	if len(lines) > keep {
		n := len(lines) - keep
		lines = append(append(lines[:keep/2:keep/2], fmt.Sprintf("    … %d more events …", n)), lines[len(lines)-keep/2:]...)
	}
	if len(lines) == 0 {
		lines = []string{"    (no events)"}
	}
	return "  " + title + ":\n" + strings.Join(lines, "\n") + "\n"
}

// yamlList renders strings as a YAML flow list for a --set value.
func yamlList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
