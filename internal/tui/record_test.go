package tui

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// drillSets make the default scenario short: five minutes of arrivals and
// two of drain.
var drillSets = []string{"duration=5m", "drain=2m", "seed=7"}

// replay writes the drill's record, loads it as fleetdrill run would and
// runs it; it returns the record's text and the replay's report.
func replay(t *testing.T, base Base, recorded []string) ([]byte, *twin.Report) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "drill.yaml")
	data, err := RecordScenario(base, recorded, path)
	if err != nil {
		t.Fatalf("RecordScenario: %v", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenarios.LoadNamed(path)
	if err != nil {
		t.Fatalf("the record does not load: %v\n%s", err, data)
	}
	if !slices.Equal(sc.Faults, recorded) {
		t.Fatalf("the record's faults = %q, want %q", sc.Faults, recorded)
	}
	rep, err := twin.Run(context.Background(), sc, twin.Options{})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	return data, rep
}

// sameReport fails unless the reports are identical but for their run
// section (wall time, version).
func sameReport(t *testing.T, drill, replayed *twin.Report) {
	t.Helper()
	a, b := *drill, *replayed
	a.Run, b.Run = twin.RunInfo{}, twin.RunInfo{}
	ja, err := a.JSON()
	if err != nil {
		t.Fatal(err)
	}
	jb, err := b.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ja, jb) {
		al, bl := strings.Split(string(ja), "\n"), strings.Split(string(jb), "\n")
		for i := range min(len(al), len(bl)) {
			if al[i] != bl[i] {
				t.Fatalf("the replay's report differs from the drill's at line %d:\n drill:  %s\n replay: %s", i+1, al[i], bl[i])
			}
		}
		t.Fatalf("the replay's report differs from the drill's in length: %d lines against %d", len(al), len(bl))
	}
}

// outageDrill runs a drill of base to its end with an outage of eu-west
// injected at simulated time inject and ended at end, by hand as an
// operator would, and returns it with its report.
func outageDrill(t *testing.T, base Base, inject, end time.Duration) (*twin.Drill, *twin.Report) {
	t.Helper()
	sc, err := scenarios.LoadNamedWithSets(base.Name, base.Sets)
	if err != nil {
		t.Fatal(err)
	}
	d, err := twin.NewDrill(sc, twin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Advance(inject)
	label, err := d.Inject("regional-outage region=eu-west at=0s")
	if err != nil {
		t.Fatalf("Inject: %v", err)
	}
	d.Advance(end)
	if err := d.EndFault(label); err != nil {
		t.Fatalf("EndFault(%s): %v", label, err)
	}
	d.Advance(d.End())
	if !d.Done() {
		t.Fatalf("the drill is not done at its end (%v)", d.End())
	}
	rep, err := d.Report()
	if err != nil {
		t.Fatal(err)
	}
	return d, rep
}

// TestRecordedDrillReplays is the determinism check: a drill with
// an outage injected and ended by hand, recorded and replayed with
// fleetdrill run's loader and twin.Run, gives the same report.
func TestRecordedDrillReplays(t *testing.T) {
	base := Base{Name: "default", Sets: drillSets}
	d, rep := outageDrill(t, base, 90*time.Second+123*time.Millisecond, 3*time.Minute+17*time.Millisecond)
	label := "regional-outage(eu-west)"
	rec := d.Recorded()
	if len(rec) != 1 || !regexp.MustCompile(`^regional-outage region=eu-west at=1m30\.12\d*s for=1m2\d\.\d+s$`).MatchString(rec[0]) {
		t.Fatalf("Recorded() = %q, want the injected outage with its exact times", rec)
	}
	data, replayed := replay(t, base, rec)
	if !bytes.Contains(data, []byte("duration: 5m")) || !bytes.Contains(data, []byte("seed: 7")) {
		t.Errorf("the record lacks the --set overrides:\n%s", data)
	}
	if _, ok := rep.Faults[label]; !ok {
		t.Fatalf("the drill's report has no fault %s", label)
	}
	sameReport(t, rep, replayed)
}

// shellSplit splits a command line as sh does.
func shellSplit(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", "set -- "+line+`; for a in "$@"; do printf '%s\0' "$a"; done`).Output()
	if err != nil {
		t.Fatalf("sh could not read %q: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// TestReplayCommandReplays runs the summary's replay command, as the shell
// would split it, with fleetdrill run's loader: a drill with an outage
// injected and ended by hand and a --set override gives the same report.
func TestReplayCommandReplays(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on PATH to split the command line")
	}
	base := Base{Name: "default", Sets: append(slices.Clone(drillSets), "policy.routing.strategy=cheapest")}
	d, rep := outageDrill(t, base, 70*time.Second+7*time.Millisecond, 2*time.Minute+3*time.Millisecond)
	line := ReplayCommand(base, d.Recorded())
	words := shellSplit(t, line)
	if len(words) < 3 || words[0] != "fleetdrill" || words[1] != "run" || words[2] != "default" {
		t.Fatalf("ReplayCommand = %q, want fleetdrill run default …", line)
	}
	var sets []string
	for i := 3; i < len(words); i++ {
		if words[i] != "--set" || i+1 >= len(words) {
			t.Fatalf("ReplayCommand = %q: word %d is %q, want --set path=value", line, i, words[i])
		}
		sets = append(sets, words[i+1])
		i++
	}
	rsc, err := scenarios.LoadNamedWithSets(words[2], sets)
	if err != nil {
		t.Fatalf("the replay command's overrides do not load: %v\n%s", err, line)
	}
	if !slices.Equal(rsc.Faults, d.Recorded()) {
		t.Fatalf("the replay's faults = %q, want %q", rsc.Faults, d.Recorded())
	}
	replayed, err := twin.Run(context.Background(), rsc, twin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameReport(t, rep, replayed)
}

// TestDriverDrillReplays runs the same check through the driver, headless,
// as the console does: an outage injected and ended by command at
// whatever simulated times the wall clock gives, the run to its end.
func TestDriverDrillReplays(t *testing.T) {
	base := Base{Name: "default", Sets: drillSets}
	sc, err := scenarios.LoadNamedWithSets(base.Name, base.Sets)
	if err != nil {
		t.Fatal(err)
	}
	d, err := twin.NewDrill(sc, twin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	drv, err := NewDriver(d, DriverOptions{Speed: 1200, FrameEvery: 10 * time.Millisecond, Paused: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resc := make(chan Result, 1)
	go func() { resc <- drv.Run(ctx) }()
	next := func() Frame {
		t.Helper()
		select {
		case f, ok := <-drv.Frames():
			if !ok {
				t.Fatal("frames closed early")
			}
			return f
		case <-ctx.Done():
			t.Fatal("no frame in time")
		}
		return Frame{}
	}
	next()
	drv.Send(command{kind: cmdStep}) // 12 s of simulated time
	drv.Send(command{kind: cmdInject, line: "regional-outage region=eu-west at=0s"})
	var label string
	for label == "" {
		for _, n := range next().Notices {
			if n.Err {
				t.Fatalf("inject: %s", n.Text)
			}
			label = n.Label
		}
	}
	for range 5 {
		drv.Send(command{kind: cmdStep})
	}
	drv.Send(command{kind: cmdEndFault, label: label})
	drv.Send(command{kind: cmdResume})
	var final *Result
	for final == nil {
		final = next().Final
	}
	if !final.Ended || final.Err != nil {
		t.Fatalf("final = %+v, want a drill that ran to its end", final)
	}
	drv.Finish()
	res := <-resc
	if res.Report != final.Report {
		t.Fatal("Run's result is not the final frame's")
	}
	if len(res.Recorded) != 1 || !strings.Contains(res.Recorded[0], " for=") {
		t.Fatalf("Recorded = %q, want the outage with its end", res.Recorded)
	}
	_, replayed := replay(t, base, res.Recorded)
	sameReport(t, res.Report, replayed)
}

func TestRecordScenarioFile(t *testing.T) {
	// A scenario file elsewhere, with a trace beside it: the record, in
	// another directory, must still find the trace.
	src, err := scenarios.Source("default")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "fleet", "my-fleet.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(filepath.Dir(path), "trace.jsonl")
	if err := os.WriteFile(trace, []byte(`{"t":0,"input":100,"output":20}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// NB: the last stream, research-batch, holds no YAML anchor; emptying
	// an anchored node through --set would empty its aliases too.
	sets := []string{
		"workload[5].trace={path: trace.jsonl, format: canonical}",
		"workload[5].arrivals=", "workload[5].input_tokens=", "workload[5].output_tokens=",
	}
	if _, err := scenarios.LoadWithSets(path, sets); err != nil {
		t.Fatalf("the fixture does not load: %v", err)
	}
	rec := []string{"node-loss pool=use-h100-8b at=1m count=1", "regional-outage region=eu-west at=2m for=1m"}
	out := filepath.Join(dir, "records", "drill.yaml")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := RecordScenario(Base{Name: path, Sets: sets}, rec, out)
	if err != nil {
		t.Fatalf("RecordScenario: %v", err)
	}
	text := string(data)
	for _, want := range []string{
		"# Recorded by fleetdrill tui from " + path,
		`path: "../fleet/trace.jsonl"`,
		"faults:\n  - node-loss pool=use-h100-8b at=1m count=1\n  - regional-outage region=eu-west at=2m for=1m\n",
		"# default: ", // the original comments survive
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the record lacks %q:\n%s", want, text)
		}
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenarios.Load(out)
	if err != nil {
		t.Fatalf("the record does not load from its directory: %v", err)
	}
	if !slices.Equal(sc.Faults, rec) {
		t.Fatalf("faults = %q, want %q", sc.Faults, rec)
	}
}

func TestRecordScenarioErrors(t *testing.T) {
	if _, err := RecordScenario(Base{Name: "no-such-scenario"}, nil, "x.yaml"); err == nil || !strings.Contains(err.Error(), "no-such-scenario") {
		t.Errorf("unknown scenario: err = %v", err)
	}
	if _, err := RecordScenario(Base{Name: "default"}, []string{"regional-outage regoin=eu-west at=1m"}, filepath.Join(t.TempDir(), "x.yaml")); err == nil {
		t.Error("a record whose fault does not validate was written")
	}
}
