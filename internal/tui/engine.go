package tui

import (
	"time"

	"github.com/fleetdrill/fleetdrill/twin"
)

// Engine is what the driver needs of a drill. *twin.Drill satisfies it;
// tests use a fake. Only the driver's goroutine calls it.
type Engine interface {
	Now() time.Duration
	End() time.Duration
	Done() bool
	// Advance runs every event up to simulated time to (capped at End).
	Advance(to time.Duration)
	// Step runs up to the next event; false when the run is over.
	Step() (time.Duration, bool)
	// TimelineLen is the number of entries on the drill's timeline so
	// far (Snapshot.Events holds only the latest): the "next event" key
	// steps until it grows.
	TimelineLen() int
	// Inject starts a fault now from a line of the fault syntax and
	// returns its label; EndFault ends an active fault now.
	Inject(line string) (string, error)
	EndFault(label string) error
	Snapshot() twin.Snapshot
	// Report finishes the run at Now; the engine cannot advance after it.
	Report() (*twin.Report, error)
	// Recorded returns every fault line with its exact at= and for=.
	Recorded() []string
}

var _ Engine = (*twin.Drill)(nil)

// cmdKind is what the operator asked the driver to do.
type cmdKind int

const (
	cmdPause     cmdKind = iota
	cmdResume            // resume pacing from the current simulated time
	cmdStep              // pause, then advance one frame of simulated time (speed × frame interval)
	cmdStepEvent         // pause, then run to the next entry of the timeline (or the end)
	cmdSpeed             // set the speed to command.speed
	cmdInject            // inject command.line now
	cmdEndFault          // end the active fault command.label now
	cmdFinish            // finish the drill at Now: report, record, stop
)

// command is one operator request, sent from the model to the driver.
type command struct {
	kind  cmdKind
	speed float64 // cmdSpeed: simulated seconds per wall second
	line  string  // cmdInject: a fault line
	label string  // cmdEndFault: the fault's label
}

// Frame is what the driver sends the model: a snapshot and the driver's
// own state. Frames replace each other; notices carried by a frame that was
// replaced before the model read it move to the next one, so none is lost.
type Frame struct {
	Snap   twin.Snapshot
	Paused bool
	Live   bool    // a live replay: the wall clock drives it, no pause or step
	Speed  float64 // simulated seconds per wall second
	// Behind is set when the simulation could not keep up with Speed in
	// the last frame: the driver then drops the lag rather than racing to
	// catch up, so the effective speed is lower than Speed.
	Behind  bool
	Notices []Notice
	// Final is set on the last frame, after the drill finished.
	Final *Result
}

// Notice is an outcome of an operator command: a fault injected or ended,
// or why it was refused.
type Notice struct {
	Text  string
	Err   bool
	Label string // the label of the fault injected, when one was
}

// Result is how a drill ended: its report and the fault lines that replay
// it (scenario's and injected, with exact times).
type Result struct {
	Report   *twin.Report
	Recorded []string
	// Ended is true when the drill ran to its end, false when the operator
	// stopped it earlier (the report is then of the run so far).
	Ended bool
	At    time.Duration // simulated time at the finish
	Err   error         // from Report
}
