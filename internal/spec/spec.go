// Package spec is fleetdrill's Gherkin step library: failover specs in
// operator language ("region us-east goes down at 10m for 15m", "interactive
// p99 TTFT stays below 2s during the outage") run on the digital twin.
//
// Every step is a row of one table (steps.go): its pattern, a line of
// documentation and an example. Givens edit a scenario as --set overrides,
// Whens add fault lines, and the first Then runs the twin; outcomes are
// expectations of the scenario syntax, judged by the twin's report, so a
// failure prints the fleetdrill run command that reproduces it exactly.
// docs/specs.md's step reference is generated from the table.
//
// features/ runs the project's own specs with go test; fleetdrill spec runs
// users' specs with the same steps.
package spec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cucumber/godog"
)

// LiveTag marks scenarios that run on the live harness (internal/liverun):
// emulated nodes in Docker containers behind toxiproxy and the live
// gateway, rather than the twin.
const LiveTag = "@live"

// DefaultTags selects what runs by default: everything not tagged @live
// (untagged scenarios are @twin); the live ones need Docker and minutes.
const DefaultTags = "~" + LiveTag

// Tally counts what happened to scenarios, for exit statuses and notes.
type Tally struct {
	mu      sync.Mutex
	Skipped []string          // "scenario: reason"
	reasons map[string]string // skip reasons by pickle ID, for the JUnit report
}

func (t *Tally) skip(id, name, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.Skipped = append(t.Skipped, name+": "+reason)
	if t.reasons == nil {
		t.reasons = map[string]string{}
	}
	t.reasons[id] = reason
}

// reason is why the scenario with this pickle ID was skipped, or "".
func (t *Tally) reason(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reasons[id]
}

// Initializer returns a godog ScenarioInitializer that registers every step
// for one scenario. Skip reasons are written to out (if not nil) and
// counted in tally (if not nil).
func Initializer(out io.Writer, tally *Tally) func(*godog.ScenarioContext) {
	return func(sc *godog.ScenarioContext) {
		w := &world{}
		sc.Before(func(ctx context.Context, s *godog.Scenario) (context.Context, error) {
			w.featDir = filepath.Dir(s.Uri)
			for _, st := range s.Steps {
				w.steps = append(w.steps, st.Text)
			}
			for _, t := range s.Tags {
				if t.Name == LiveTag {
					w.live = true
				}
			}
			return ctx, nil
		})
		sc.After(func(ctx context.Context, s *godog.Scenario, err error) (context.Context, error) {
			if w.skipped != "" {
				if out != nil {
					fmt.Fprintf(out, "skipped %q: %s\n", s.Name, w.skipped)
				}
				if tally != nil {
					tally.skip(s.Id, s.Name, w.skipped)
				}
			}
			return ctx, nil
		})
		for _, s := range steps {
			sc.Step(s.re, handler(w, s))
		}
		sc.Step(`^(.*)$`, func(text string) error { return undefined(text) })
	}
}

// perform runs step s with its captures a: its action, or its outcome's
// expectations checked against the run, with its fault's window and its
// note.
func (w *world) perform(ctx context.Context, s *step, a []string) error {
	if s.do != nil {
		return s.do(ctx, w, a)
	}
	exprs, err := s.exprs(w, a)
	if err != nil {
		return err
	}
	label := ""
	if s.fault != nil {
		label = s.fault(w, a)
	}
	var note func() string
	if s.note != nil {
		note = func() string { return s.note(w, a) }
	}
	return w.check(ctx, exprs, label, note)
}

// handler adapts a table row to the function godog calls, which must take
// one string per capture group.
func handler(w *world, s *step) any {
	call := func(ctx context.Context, a ...string) error {
		if w.skipped != "" {
			return w.skip(w.skipped)
		}
		return w.perform(ctx, s, a)
	}
	switch s.re.NumSubexp() {
	case 0:
		return func(ctx context.Context) error { return call(ctx) }
	case 1:
		return func(ctx context.Context, a string) error { return call(ctx, a) }
	case 2:
		return func(ctx context.Context, a, b string) error { return call(ctx, a, b) }
	case 3:
		return func(ctx context.Context, a, b, c string) error { return call(ctx, a, b, c) }
	case 4:
		return func(ctx context.Context, a, b, c, d string) error { return call(ctx, a, b, c, d) }
	case 5:
		return func(ctx context.Context, a, b, c, d, e string) error { return call(ctx, a, b, c, d, e) }
	case 6:
		return func(ctx context.Context, a, b, c, d, e, f string) error { return call(ctx, a, b, c, d, e, f) }
	}
	panic(fmt.Sprintf("spec: step %q has %d arguments; handler takes at most 6", s.pattern, s.re.NumSubexp()))
}

// Step describes one step definition for references and --list.
type Step struct {
	Keyword, Pattern, Doc, Example string
}

// Steps returns the step library, in matching order.
func Steps() []Step {
	out := make([]Step, len(steps))
	for i, s := range steps {
		out[i] = Step{s.keyword, s.pattern, s.doc, s.example}
	}
	return out
}

// ErrNoScenarios is returned by Run when the paths and tags select nothing.
var ErrNoScenarios = errors.New("no scenarios selected")

// Options for Run.
type Options struct {
	Paths  []string
	Tags   string // godog tag expression; DefaultTags when empty
	Format string // godog formats, e.g. pretty,junit:report.xml
	Output io.Writer
	Colors bool
}

// Result of Run.
type Result struct {
	Status int // godog's: 0 passed, 1 failed, 2 invalid input
	Tally  *Tally
}

// Format is one entry of Options.Format: a formatter's name and the file
// it writes ("" for Output).
type Format struct {
	Name, File string
}

// formatNames are the formats fleetdrill spec offers; junit is fleetdrill's
// own (junit.go), the others are godog's.
var formatNames = []string{"pretty", "progress", "junit", "cucumber", "events"}

// ParseFormats splits godog's format syntax, "pretty,junit:report.xml",
// and checks every name.
func ParseFormats(s string) ([]Format, error) {
	var out []Format
	for _, e := range strings.Split(s, ",") {
		name, file, hasFile := strings.Cut(strings.TrimSpace(e), ":")
		if !slices.Contains(formatNames, name) {
			return nil, fmt.Errorf("unknown format %q in %q; want %s, each NAME or NAME:FILE, comma-separated", name, s, strings.Join(formatNames, ", "))
		}
		if hasFile && file == "" {
			return nil, fmt.Errorf("format %q has an empty file name; write %s:FILE, or %s for the console", e, name, name)
		}
		out = append(out, Format{name, file})
	}
	return out, nil
}

// Run runs feature files with the step library.
func Run(opts Options) Result {
	tally := &Tally{}
	tags := opts.Tags
	if tags == "" {
		tags = DefaultTags
	}
	format := opts.Format
	if format == "" {
		format = "pretty"
	}
	formats, err := ParseFormats(format)
	if err != nil {
		fmt.Fprintf(opts.Output, "spec: %v\n", err)
		return Result{Status: 2, Tally: tally}
	}
	var godogFormats []string
	junit := ""
	for _, f := range formats {
		name := f.Name
		if name == "junit" {
			if junit == "" {
				junit = junitFormat(tally)
			}
			name = junit
		}
		if f.File != "" {
			name += ":" + f.File
		}
		godogFormats = append(godogFormats, name)
	}
	suite := godog.TestSuite{
		Name:                "fleetdrill",
		ScenarioInitializer: Initializer(opts.Output, tally),
		Options: &godog.Options{
			Format:   strings.Join(godogFormats, ","),
			Paths:    slices.Clone(opts.Paths),
			Tags:     tags,
			Output:   opts.Output,
			NoColors: !opts.Colors,
			Strict:   false, // the catch-all step turns undefined steps into failures; pending is counted in Tally
		},
	}
	return Result{Status: suite.Run(), Tally: tally}
}
