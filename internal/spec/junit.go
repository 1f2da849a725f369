package spec

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cucumber/godog"
)

// JUnit XML for CI test reporters (Jenkins, GitLab, GitHub's reporters).
// godog's own junit formatter is not used: it derives a scenario's status
// from its step results in storage order, so a failed scenario can be
// written status="passed" beside its <failure> and left out of failures=;
// it leaves classname empty and writes skipped steps as errors that
// errors= does not count. This one decides each scenario from all its
// step events:
//
//   - a failed step: exactly one <failure>, the first failed step and its
//     error (counted in failures=);
//   - else an undefined, pending or ambiguous step: one <error>
//     (errors=); fleetdrill's catch-all step makes an undefined step fail
//     in godog, so the report tells it apart by its error type;
//   - else a skipped step: <skipped> with the scenario's reason (skipped=);
//   - else passed.
//
// One <testsuite> per feature (name = the feature's name), one <testcase>
// per scenario (classname = the feature's name, name = the scenario's).

// junitRuns numbers the per-run formatter names.
var junitRuns atomic.Int64

// junitFormat registers a JUnit formatter for one run and returns its
// name. godog builds a formatter from the suite name and a writer alone;
// this one also needs the run's skip reasons, so each run registers a
// name of its own (godog has no way to unregister; a run leaves a closure
// over its tally behind).
func junitFormat(tally *Tally) string {
	name := "fleetdrill-junit-" + strconv.FormatInt(junitRuns.Add(1), 10)
	godog.Format(name, "JUnit XML for CI test reporters", func(suite string, w io.Writer) godog.Formatter {
		return newJUnit(suite, w, time.Now, tally.reason)
	})
	return name
}

// junit collects godog's events and writes the report at Summary.
type junit struct {
	mu         sync.Mutex
	suite      string
	out        io.Writer
	now        func() time.Time
	skipReason func(pickleID string) string

	start    time.Time
	features []*junitFeature // in the order godog ran them
	byURI    map[string]*junitFeature
	cases    map[string]*junitCase // by pickle ID
}

type junitFeature struct {
	name  string
	cases []*junitCase
}

type junitCase struct {
	id, name   string
	start, end time.Time
	failure    *junitProblem // the first failed step
	err        *junitProblem // the first undefined, pending or ambiguous step
	skipped    string        // the first skipped step's text
}

func newJUnit(suite string, out io.Writer, now func() time.Time, skipReason func(string) string) *junit {
	return &junit{
		suite: suite, out: out, now: now, skipReason: skipReason,
		byURI: map[string]*junitFeature{}, cases: map[string]*junitCase{},
	}
}

func (f *junit) TestRunStarted() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.start = f.now()
}

func (f *junit) Feature(doc *godog.GherkinDocument, uri string, _ []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.feature(uri, doc)
}

// feature returns the feature of uri, adding it on first sight. A feature
// without a name is named by its file, so classname is never empty.
func (f *junit) feature(uri string, doc *godog.GherkinDocument) *junitFeature {
	if ft, ok := f.byURI[uri]; ok {
		return ft
	}
	name := uri
	if doc != nil && doc.Feature != nil && strings.TrimSpace(doc.Feature.Name) != "" {
		name = strings.TrimSpace(doc.Feature.Name)
	}
	ft := &junitFeature{name: name}
	f.byURI[uri] = ft
	f.features = append(f.features, ft)
	return ft
}

func (f *junit) Pickle(p *godog.Scenario) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addCase(p)
}

func (f *junit) addCase(p *godog.Scenario) *junitCase {
	now := f.now()
	c := &junitCase{id: p.Id, name: p.Name, start: now, end: now}
	if len(p.Steps) == 0 {
		c.err = &junitProblem{Type: "undefined", Message: "the scenario has no steps"}
	}
	f.cases[p.Id] = c
	ft := f.feature(p.Uri, nil)
	ft.cases = append(ft.cases, c)
	return c
}

// step returns the case of p with its end time moved to now.
func (f *junit) step(p *godog.Scenario) *junitCase {
	c, ok := f.cases[p.Id]
	if !ok { // godog announces every pickle before its steps; be safe anyway
		c = f.addCase(p)
	}
	c.end = f.now()
	return c
}

func (f *junit) Defined(*godog.Scenario, *godog.Step, *godog.StepDefinition) {}

func (f *junit) Passed(p *godog.Scenario, _ *godog.Step, _ *godog.StepDefinition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.step(p)
}

func (f *junit) Failed(p *godog.Scenario, st *godog.Step, _ *godog.StepDefinition, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.step(p)
	var u *undefinedStepError
	if errors.As(err, &u) {
		c.setErr(problem("undefined", st, err))
		return
	}
	if c.failure == nil {
		c.failure = problem("failed", st, err)
	}
}

func (f *junit) Skipped(p *godog.Scenario, st *godog.Step, _ *godog.StepDefinition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.step(p)
	if c.skipped == "" {
		c.skipped = st.Text
	}
}

func (f *junit) Undefined(p *godog.Scenario, st *godog.Step, _ *godog.StepDefinition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.step(p).setErr(problem("undefined", st, godog.ErrUndefined))
}

func (f *junit) Pending(p *godog.Scenario, st *godog.Step, _ *godog.StepDefinition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.step(p).setErr(problem("pending", st, godog.ErrPending))
}

func (f *junit) Ambiguous(p *godog.Scenario, st *godog.Step, _ *godog.StepDefinition, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.step(p).setErr(problem("ambiguous", st, err))
}

func (c *junitCase) setErr(p *junitProblem) {
	if c.err == nil {
		c.err = p
	}
}

// problem is a <failure> or <error>: the message, which a reporter shows
// in its list, names the step and the error's gist (its first lines, up to
// a list); the body has the whole error, with the reproduce command.
func problem(typ string, st *godog.Step, err error) *junitProblem {
	text := err.Error()
	msg := fmt.Sprintf("step %q: ", st.Text)
	if typ == "undefined" { // the error's first line says as much; the body lists the nearest steps
		msg = fmt.Sprintf("undefined step %q", st.Text)
	} else {
		var gist []string
		for _, l := range strings.Split(text, "\n") {
			l = strings.TrimSpace(l)
			if l == "" {
				continue
			}
			if len(gist) == 3 || (len(gist) > 0 && strings.HasSuffix(l, ":")) {
				break
			}
			gist = append(gist, l)
		}
		msg += strings.Join(gist, "; ")
	}
	return &junitProblem{Type: typ, Message: xmlText(msg), Text: xmlText(fmt.Sprintf("step %q\n%s\n", st.Text, text))}
}

// xmlText drops what XML 1.0 cannot carry (terminal escapes from a
// colored error, other control characters): a report with them is one
// that no CI reporter parses.
func xmlText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20 || r == 0xFFFE || r == 0xFFFF || (r >= 0xD800 && r <= 0xDFFF):
			return -1
		}
		return r
	}, s)
}

func (f *junit) Summary() {
	f.mu.Lock()
	defer f.mu.Unlock()
	doc := f.report(f.now())
	enc := xml.NewEncoder(f.out)
	enc.Indent("", "  ")
	_, err := io.WriteString(f.out, xml.Header)
	if err == nil {
		err = enc.Encode(doc)
	}
	if err == nil {
		_, err = io.WriteString(f.out, "\n")
	}
	if err != nil {
		// godog's Summary returns nothing; the console is the only place left.
		fmt.Fprintf(os.Stderr, "spec: writing the JUnit report failed: %v (check the --format junit:FILE path and free disk space)\n", err)
	}
}

// report builds the XML document; end is when the run finished.
func (f *junit) report(end time.Time) junitReport {
	r := junitReport{Name: f.suite, Time: seconds(end.Sub(f.start))}
	for _, ft := range f.features {
		s := junitSuite{Name: ft.name}
		var first, last time.Time
		seen := map[string]int{}
		for _, c := range ft.cases {
			seen[c.name]++
		}
		n := map[string]int{}
		for _, c := range ft.cases {
			if first.IsZero() || c.start.Before(first) {
				first = c.start
			}
			if c.end.After(last) {
				last = c.end
			}
			tc := junitTestCase{Name: c.name, Classname: ft.name, Time: seconds(c.end.Sub(c.start))}
			if seen[c.name] > 1 { // outline examples share a name; reporters would merge them
				n[c.name]++
				tc.Name += " #" + strconv.Itoa(n[c.name])
			}
			s.Tests++
			switch {
			case c.failure != nil:
				tc.Failure = c.failure
				s.Failures++
			case c.err != nil:
				tc.Error = c.err
				s.Errors++
			case c.skipped != "":
				reason := f.skipReason(c.id)
				if reason == "" {
					reason = fmt.Sprintf("step %q skipped", c.skipped)
				}
				tc.Skipped = &junitSkipped{Message: reason}
				s.Skipped++
			}
			s.Cases = append(s.Cases, tc)
		}
		s.Time = seconds(last.Sub(first))
		r.Tests += s.Tests
		r.Failures += s.Failures
		r.Errors += s.Errors
		r.Skipped += s.Skipped
		r.Suites = append(r.Suites, s)
	}
	return r
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}

// The JUnit XML shapes, as Jenkins, GitLab and GitHub's reporters read
// them (the Ant schema; no godog-only attributes such as status).
type junitReport struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string          `xml:"name,attr"`
	Tests    int             `xml:"tests,attr"`
	Failures int             `xml:"failures,attr"`
	Errors   int             `xml:"errors,attr"`
	Skipped  int             `xml:"skipped,attr"`
	Time     string          `xml:"time,attr"`
	Cases    []junitTestCase `xml:"testcase"`
}

type junitTestCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure"`
	Error     *junitProblem `xml:"error"`
	Skipped   *junitSkipped `xml:"skipped"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"` // multi-line; CDATA keeps it readable in the file
}

type junitSkipped struct {
	Message string `xml:"message,attr,omitempty"`
}
