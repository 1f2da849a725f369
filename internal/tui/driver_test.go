package tui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/twin"
)

// startDriver runs a driver of eng until the test ends.
func startDriver(t *testing.T, eng Engine, opts DriverOptions) (*Driver, <-chan Result) {
	t.Helper()
	d, err := NewDriver(eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	resc := make(chan Result, 1)
	go func() { resc <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-d.done
	})
	return d, resc
}

// frameWhere reads frames until one satisfies ok.
func frameWhere(t *testing.T, d *Driver, ok func(Frame) bool) Frame {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f, open := <-d.Frames():
			if !open {
				t.Fatal("frames closed")
			}
			if ok(f) {
				return f
			}
		case <-timeout:
			t.Fatal("no such frame within 10s")
		}
	}
}

func TestNewDriverRejectsBadSpeed(t *testing.T) {
	for _, s := range []float64{0, -1} {
		if _, err := NewDriver(newFake(calmSnapshot()), DriverOptions{Speed: s}); err == nil || !strings.Contains(err.Error(), "speed") {
			t.Errorf("NewDriver(speed %g) err = %v, want a speed error", s, err)
		}
	}
}

func TestDriverPaces(t *testing.T) {
	eng := newFake(calmSnapshot())
	start := time.Now()
	d, _ := startDriver(t, eng, DriverOptions{Speed: 60, FrameEvery: 10 * time.Millisecond})
	f := frameWhere(t, d, func(f Frame) bool { return f.Snap.Now >= 5*time.Minute+6*time.Second })
	elapsed := time.Since(start)
	// 6 simulated seconds at ×60 take at least 100 ms of wall time.
	if elapsed < 100*time.Millisecond {
		t.Fatalf("6 s of simulated time at ×60 took %v of wall time, want >= 100ms", elapsed)
	}
	if f.Paused || f.Speed != 60 {
		t.Fatalf("frame says paused=%v speed=%g, want running at 60", f.Paused, f.Speed)
	}
}

func TestDriverPausedDoesNotAdvance(t *testing.T) {
	eng := newFake(calmSnapshot())
	eng.later = []twin.TimelineEvent{{TS: 304, Kind: "breaker-open", Detail: "pool euw-a100-8b replica 1: closed→open"}}
	d, _ := startDriver(t, eng, DriverOptions{Speed: 600, FrameEvery: 5 * time.Millisecond, Paused: true})
	f := frameWhere(t, d, func(Frame) bool { return true })
	if !f.Paused {
		t.Fatal("the first frame of a paused driver is not paused")
	}
	time.Sleep(50 * time.Millisecond)
	if _, _, n, _ := eng.calls(); n != 0 {
		t.Fatalf("a paused driver advanced the engine %d times", n)
	}
	// A step advances exactly one frame of simulated time: 600 × 5 ms.
	d.Send(command{kind: cmdStep})
	f = frameWhere(t, d, func(f Frame) bool { return f.Snap.Now != 5*time.Minute })
	if want := 5*time.Minute + 3*time.Second; f.Snap.Now != want || !f.Paused {
		t.Fatalf("after a step: now %v paused %v, want %v paused", f.Snap.Now, f.Paused, want)
	}
	// An event step runs to the next entry of the timeline, at 5:04.
	d.Send(command{kind: cmdStepEvent})
	f = frameWhere(t, d, func(f Frame) bool { return f.Snap.Now != 5*time.Minute+3*time.Second })
	if want := 5*time.Minute + 4*time.Second; f.Snap.Now != want || !f.Paused {
		t.Fatalf("after an event step: now %v paused %v, want %v paused", f.Snap.Now, f.Paused, want)
	}
	d.Send(command{kind: cmdSpeed, speed: 1200})
	d.Send(command{kind: cmdResume})
	f = frameWhere(t, d, func(f Frame) bool { return !f.Paused && f.Speed == 1200 })
	frameWhere(t, d, func(g Frame) bool { return g.Snap.Now > f.Snap.Now })
}

func TestDriverInjectsAndEnds(t *testing.T) {
	eng := newFake(calmSnapshot())
	d, resc := startDriver(t, eng, DriverOptions{Speed: 60, Paused: true})
	d.Send(command{kind: cmdInject, line: "regional-outage region=eu-west at=0s"})
	d.Send(command{kind: cmdInject, line: "regional-outage regoin=eu-west at=0s"})
	d.Send(command{kind: cmdEndFault, label: "regional-outage(eu-west)"})
	d.Send(command{kind: cmdEndFault, label: "regional-outage(eu-west)"})
	var notices []Notice
	for len(notices) < 4 {
		notices = append(notices, frameWhere(t, d, func(f Frame) bool { return len(f.Notices) > 0 }).Notices...)
	}
	want := []struct {
		text  string
		err   bool
		label string
	}{
		{"regional-outage(eu-west) injected at 05:00", false, "regional-outage(eu-west)"},
		{"regoin: unknown key", true, ""},
		{"regional-outage(eu-west) ended at 05:00", false, ""},
		{"no active fault regional-outage(eu-west)", true, ""},
	}
	for i, w := range want {
		n := notices[i]
		if !strings.Contains(n.Text, w.text) || n.Err != w.err || n.Label != w.label {
			t.Errorf("notice %d = %+v, want text with %q, err %v, label %q", i, n, w.text, w.err, w.label)
		}
	}
	d.Finish()
	res := <-resc
	if injected, ended, _, reported := eng.calls(); len(injected) != 1 || len(ended) != 1 || !reported {
		t.Fatalf("engine saw injected %q, ended %q, reported %v", injected, ended, reported)
	}
	if res.Ended || res.At != 5*time.Minute || len(res.Recorded) != 1 || res.Report == nil {
		t.Fatalf("result = %+v, want a stopped drill at 5m with one recorded fault and a report", res)
	}
	// The final frame, then the channel closes.
	f := frameWhere(t, d, func(f Frame) bool { return f.Final != nil })
	if f.Final.Report != res.Report {
		t.Fatal("the final frame's result is not Run's")
	}
	if _, open := <-d.Frames(); open {
		t.Fatal("frames still open after the final frame")
	}
	// Commands after the end neither block nor reach the engine.
	d.Send(command{kind: cmdInject, line: "regional-outage region=us-east at=0s"})
}

func TestDriverEndsByItself(t *testing.T) {
	s := calmSnapshot()
	s.End = s.Now + 30*time.Second
	eng := newFake(s)
	d, resc := startDriver(t, eng, DriverOptions{Speed: 3000, FrameEvery: 5 * time.Millisecond})
	f := frameWhere(t, d, func(f Frame) bool { return f.Final != nil })
	if !f.Final.Ended || f.Snap.Now != s.End {
		t.Fatalf("final frame: ended %v at %v, want ended at %v", f.Final.Ended, f.Snap.Now, s.End)
	}
	// The driver waits for Finish; the engine is not touched after Report.
	time.Sleep(30 * time.Millisecond)
	d.Finish()
	if res := <-resc; !res.Ended || res.Report != f.Final.Report {
		t.Fatalf("Run returned %+v, want the final frame's result", res)
	}
}

// TestSendReplacesStaleFrames checks the channel of one: an unread frame
// is replaced by the next, and its notices carried over.
func TestSendReplacesStaleFrames(t *testing.T) {
	d, err := NewDriver(newFake(calmSnapshot()), DriverOptions{Speed: 1})
	if err != nil {
		t.Fatal(err)
	}
	d.send(Frame{Speed: 1, Notices: []Notice{{Text: "a"}}})
	d.send(Frame{Speed: 2})
	d.send(Frame{Speed: 3, Notices: []Notice{{Text: "b"}}})
	f := <-d.out
	if f.Speed != 3 || len(f.Notices) != 2 || f.Notices[0].Text != "a" || f.Notices[1].Text != "b" {
		t.Fatalf("frame = %+v, want the latest with notices a, b", f)
	}
	select {
	case g := <-d.out:
		t.Fatalf("a second frame %+v was queued", g)
	default:
	}
}

// liveFake is an engine on the wall clock, as a live replay is.
type liveFake struct{ *fakeEngine }

func (liveFake) Live() bool { return true }

// A live replay cannot pause, step or change speed: the driver says so and
// keeps the frames marked live; faults still go through.
func TestDriverRefusesPauseOnALiveReplay(t *testing.T) {
	eng := liveFake{newFake(calmSnapshot())}
	d, _ := startDriver(t, eng, DriverOptions{Speed: 5, FrameEvery: 10 * time.Millisecond})
	d.Send(command{kind: cmdPause})
	f := frameWhere(t, d, func(f Frame) bool { return len(f.Notices) > 0 })
	if !f.Live || f.Paused || !f.Notices[0].Err || !strings.Contains(f.Notices[0].Text, "cannot pause") {
		t.Fatalf("frame live=%v paused=%v notices=%+v, want live, running, and a refusal", f.Live, f.Paused, f.Notices)
	}
	// Nor step to the next event: the engine is not stepped.
	d.Send(command{kind: cmdStepEvent})
	f = frameWhere(t, d, func(f Frame) bool { return len(f.Notices) > 0 })
	if !f.Notices[0].Err || !strings.Contains(f.Notices[0].Text, "cannot pause, step") {
		t.Fatalf("after .: notices %+v, want a refusal", f.Notices)
	}
	eng.mu.Lock()
	steps := eng.steps
	eng.mu.Unlock()
	if steps != 0 {
		t.Fatalf("a live replay was stepped %d times", steps)
	}
	d.Send(command{kind: cmdInject, line: "regional-outage region=us-east at=0s"})
	frameWhere(t, d, func(f Frame) bool { return len(f.Notices) > 0 && !f.Notices[0].Err })
	if injected, _, _, _ := eng.calls(); len(injected) != 1 {
		t.Fatalf("injected %v, want the outage", injected)
	}
}

// The next-event key steps the drill to the next entry of its timeline,
// however many kernel events lie before it, and stops at the end of the
// run when none is left.
func TestDriverStepsToTheNextTimelineEvent(t *testing.T) {
	s := calmSnapshot()
	s.End = s.Now + 10*time.Second
	eng := newFake(s)
	at := func(sec float64, kind string) twin.TimelineEvent {
		return twin.TimelineEvent{TS: sec, Kind: kind, Detail: kind}
	}
	// Two entries at one instant, then one more: each . stops at the
	// first step whose timeline is longer than before.
	eng.later = []twin.TimelineEvent{at(301, "fault-start"), at(301, "detected"), at(302.5, "degrade")}
	d, resc := startDriver(t, eng, DriverOptions{Speed: 60, FrameEvery: 5 * time.Millisecond, Paused: true})
	frameWhere(t, d, func(Frame) bool { return true })
	for _, tt := range []struct {
		now    time.Duration
		events int
	}{
		{5*time.Minute + time.Second, 7},
		{5*time.Minute + 2500*time.Millisecond, 8},
	} {
		d.Send(command{kind: cmdStepEvent})
		f := frameWhere(t, d, func(f Frame) bool { return len(f.Snap.Events) == tt.events })
		if f.Snap.Now != tt.now || !f.Paused || f.Final != nil {
			t.Fatalf("after . : now %v paused %v final %v, want %v paused with %d events", f.Snap.Now, f.Paused, f.Final != nil, tt.now, tt.events)
		}
	}
	// Nothing is left on the timeline: . runs to the end and says so.
	d.Send(command{kind: cmdStepEvent})
	f := frameWhere(t, d, func(f Frame) bool { return f.Final != nil })
	if !f.Final.Ended || f.Snap.Now != s.End {
		t.Fatalf("final frame: ended %v at %v, want ended at %v", f.Final.Ended, f.Snap.Now, s.End)
	}
	if len(f.Notices) == 0 || !strings.Contains(f.Notices[len(f.Notices)-1].Text, "no more events") {
		t.Fatalf("final frame notices %+v, want one saying no more events", f.Notices)
	}
	d.Finish()
	<-resc
}

// A command that runs the drill to its end (a step at the last moment)
// leaves the final frame for the model: nothing published after it may
// replace it in the one-frame channel.
func TestFinalFrameSurvivesTheCommandThatEndedTheRun(t *testing.T) {
	s := calmSnapshot()
	s.End = s.Now + 100*time.Millisecond
	eng := newFake(s)
	d, resc := startDriver(t, eng, DriverOptions{Speed: 60, FrameEvery: 5 * time.Millisecond, Paused: true})
	frameWhere(t, d, func(Frame) bool { return true })
	d.Send(command{kind: cmdStep}) // a frame's step is 300 ms: past the end
	// A second command is taken only after the first was handled and its
	// frame published: then the channel holds what the model will read.
	d.Send(command{kind: cmdSpeed, speed: 30})
	select {
	case f := <-d.Frames():
		if f.Final == nil {
			t.Fatalf("the model reads a frame at %v without the final result: the final frame was replaced", f.Snap.Now)
		}
	case <-time.After(10 * time.Second): // a hang bound, not a margin
		t.Fatal("no frame")
	}
	d.Finish()
	<-resc
}
