package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/tui"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// The console itself needs a terminal; these tests check what happens
// before it starts (flags, scenario, record path) and after it ends (the
// report and the record), without one.
func TestTUIFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such", "dir", "drill.yaml")
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"zero speed", []string{"--speed", "0"}, "--speed: got 0, want > 0"},
		{"negative speed", []string{"--speed", "-2"}, "--speed: got -2"},
		{"speed too high", []string{"--speed", "1e9"}, "want > 0 and <= 86400"},
		{"not a number", []string{"--speed", "fast"}, `invalid argument "fast"`},
		{"unknown scenario", []string{"no-such-scenario"}, `no library scenario named "no-such-scenario"`},
		{"bad set", []string{"--set", "pools.nope.replicas=2"}, "pools.nope"},
		{"two scenarios", []string{"default", "mmc"}, "accepts at most 1 arg"},
		{"record into a missing directory", []string{"--record", missing}, "no directory"},
		{"no terminal", []string{"default", "--speed", "600"}, "stdin and stdout must be a terminal"},
		{"replicas need --live", []string{"--replicas", "1"}, "--replicas needs --live"},
		{"live speed too high", []string{"--live", "--speed", "5000"}, "with --live"},
		{"live needs a terminal too", []string{"--live"}, "stdin and stdout must be a terminal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCommand(t, newTUICmd(), tt.args...)
			if code != exitInvalid || !strings.Contains(stderr, tt.wantStderr) {
				t.Fatalf("tui %v: exit %d, stderr %q; want exit %d and %q", tt.args, code, stderr, exitInvalid, tt.wantStderr)
			}
		})
	}
}

func TestTUIRegistered(t *testing.T) {
	code, stdout, _ := runCLI(t, "tui", "--help")
	if code != exitOK || !strings.Contains(stdout, "--record FILE") || !strings.Contains(stdout, "--speed") {
		t.Fatalf("fleetdrill tui --help: exit %d\n%s", code, stdout)
	}
}

// TestTUIRecordReplays runs a drill headless as the console's driver
// would leave it (an outage injected and ended by hand, run to the end),
// lets the command print and record it, and replays the record with
// fleetdrill run: the JSON reports agree but for their run sections.
func TestTUIRecordReplays(t *testing.T) {
	sets := []string{"duration=4m", "drain=1m", "seed=5"}
	base := tui.Base{Name: "default", Sets: sets}
	sc, err := scenarios.LoadNamedWithSets(base.Name, sets)
	if err != nil {
		t.Fatal(err)
	}
	d, err := twin.NewDrill(sc, twin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Advance(70 * time.Second)
	label, err := d.Inject("regional-outage region=us-east at=0s")
	if err != nil {
		t.Fatal(err)
	}
	d.Advance(2 * time.Minute)
	if err := d.EndFault(label); err != nil {
		t.Fatal(err)
	}
	d.Advance(d.End())
	rep, err := d.Report()
	if err != nil {
		t.Fatal(err)
	}
	res := tui.Result{Report: rep, Recorded: d.Recorded(), Ended: d.Done(), At: d.Now()}

	dir := t.TempDir()
	record := filepath.Join(dir, "drill.yaml")
	cmd := newTUICmd()
	var out strings.Builder
	cmd.SetOut(&out)
	err = finishDrill(cmd, base, sc, res, record, nil)
	var ec exitCoder
	if err != nil && (!asExitCoder(err, &ec) || ec.ExitCode() != exitFailed) {
		t.Fatalf("finishDrill: %v", err)
	}
	for _, want := range []string{"game day default (seed 5) ran to its end; 1 fault(s)", "regional-outage(us-east)", "recorded to " + record} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	replayJSON := filepath.Join(dir, "replay.json")
	if code, _, stderr := runCLI(t, "run", record, "--json", replayJSON); code != exitOK && code != exitFailed {
		t.Fatalf("fleetdrill run %s: exit %d: %s", record, code, stderr)
	}
	data, err := os.ReadFile(replayJSON)
	if err != nil {
		t.Fatal(err)
	}
	var replayed twin.Report
	if err := json.Unmarshal(data, &replayed); err != nil {
		t.Fatal(err)
	}
	a, b := *rep, replayed
	a.Run, b.Run = twin.RunInfo{}, twin.RunInfo{}
	ja, _ := a.JSON()
	jb, _ := b.JSON()
	if string(ja) != string(jb) {
		t.Fatalf("fleetdrill run of the record gives another report than the drill:\n--- drill\n%.2000s\n--- replay\n%.2000s", ja, jb)
	}
}
