package tui

import (
	"context"
	"fmt"
	"math"
	"time"
)

// DefaultFrameEvery is the wall time between two snapshots: ten frames a
// second is smooth enough for a console and costs the simulation little
// (a snapshot is a walk over pools, classes and models).
const DefaultFrameEvery = 100 * time.Millisecond

// Driver owns an Engine and runs it paced to the wall clock: the simulated
// time it aims for is the simulated time at the last resume (or speed
// change) plus the wall time since, times the speed. It is the only
// goroutine that touches the engine. It sends a Frame at most every
// FrameEvery on a channel of one, replacing a frame the model has not read
// yet, so the model's speed never holds it back.
type Driver struct {
	eng        Engine
	live       bool // the engine runs on the wall clock (a live replay)
	frameEvery time.Duration
	speed      float64
	paused     bool

	cmds chan command
	out  chan Frame
	done chan struct{}

	// Pacing anchor: at wall time anchorWall the simulation was at
	// anchorSim.
	anchorWall time.Time
	anchorSim  time.Duration
	behind     bool
	dirty      bool // the engine moved or a command ran since the last frame
	// seeking is set while the driver runs to the next timeline entry
	// (cmdStepEvent), one frame of wall time per tick, until the timeline
	// is longer than seekFrom or the run ends.
	seeking  bool
	seekFrom int
	notices  []Notice
	final    *Result
}

// DriverOptions configures a Driver.
type DriverOptions struct {
	// Speed is simulated seconds per wall second (60: a simulated minute
	// each second). Must be > 0.
	Speed float64
	// FrameEvery is the wall time between frames; 0 means
	// DefaultFrameEvery.
	FrameEvery time.Duration
	// Paused starts the driver paused.
	Paused bool
}

// NewDriver returns a driver for eng; nothing runs until Run.
func NewDriver(eng Engine, opts DriverOptions) (*Driver, error) {
	if !(opts.Speed > 0) || math.IsInf(opts.Speed, 0) {
		return nil, fmt.Errorf("speed: got %g, want > 0 (simulated seconds per wall second)", opts.Speed)
	}
	if opts.FrameEvery <= 0 {
		opts.FrameEvery = DefaultFrameEvery
	}
	live := false
	if l, ok := eng.(interface{ Live() bool }); ok {
		live = l.Live()
	}
	return &Driver{
		eng:        eng,
		live:       live,
		frameEvery: opts.FrameEvery,
		speed:      opts.Speed,
		paused:     opts.Paused,
		// NB: commands are rare (key presses); 64 is far more than a
		// person can queue up while the driver advances one slice.
		cmds: make(chan command, 64),
		out:  make(chan Frame, 1),
		done: make(chan struct{}),
	}, nil
}

// Frames is the channel the model reads; it is closed after the final
// frame.
func (d *Driver) Frames() <-chan Frame { return d.out }

// Send queues a command for the driver. It never blocks once the driver
// has stopped.
func (d *Driver) Send(c command) {
	select {
	case d.cmds <- c:
	case <-d.done:
	}
}

// Finish asks the driver to finish the drill at Now; Run then returns.
func (d *Driver) Finish() { d.Send(command{kind: cmdFinish}) }

// Run drives the engine until the operator finishes the drill or ctx is
// done, and returns how it ended. When the run reaches its end by itself,
// the final frame is sent at once, and Run waits for Finish or ctx to
// return.
func (d *Driver) Run(ctx context.Context) Result {
	defer close(d.done)
	tick := time.NewTicker(d.frameEvery)
	defer tick.Stop()
	d.rebase()
	d.dirty = true
	d.publish()
	for {
		select {
		case <-ctx.Done():
			return d.finish()
		case c := <-d.cmds:
			if c.kind == cmdFinish {
				return d.finish()
			}
			d.handle(c)
			d.publish()
		case <-tick.C:
			if d.final != nil {
				continue
			}
			switch {
			case d.seeking:
				d.seek()
			case !d.paused:
				d.pace()
			}
			if d.eng.Done() {
				d.end()
				continue
			}
			d.publish()
		}
	}
}

// rebase moves the pacing anchor to now, so that pacing restarts from the
// current simulated time (after a resume, a speed change or a lag).
func (d *Driver) rebase() {
	d.anchorWall = time.Now()
	d.anchorSim = d.eng.Now()
}

// pace advances the engine to where the wall clock says it should be, in
// slices of a quarter frame's simulated time, giving up after one frame of
// wall time: a simulation slower than the speed falls behind and drops
// the lag instead of starving the operator's commands.
func (d *Driver) pace() {
	start := time.Now()
	target := d.anchorSim + time.Duration(float64(start.Sub(d.anchorWall))*d.speed)
	target = min(target, d.eng.End())
	slice := max(time.Duration(float64(d.frameEvery)*d.speed/4), 10*time.Millisecond)
	d.behind = false
	for now := d.eng.Now(); now < target && !d.eng.Done(); {
		d.eng.Advance(min(now+slice, target))
		d.dirty = true
		next := d.eng.Now()
		if next <= now { // the engine cannot go further
			break
		}
		now = next
		if now < target && time.Since(start) > d.frameEvery {
			d.behind = true
			d.rebase()
			break
		}
	}
}

// handle runs one operator command other than finish.
func (d *Driver) handle(c command) {
	if d.final != nil {
		if c.kind == cmdInject || c.kind == cmdEndFault {
			d.note(Notice{Text: "the drill has ended", Err: true})
		}
		return
	}
	d.dirty = true
	if d.live {
		switch c.kind {
		case cmdPause, cmdResume, cmdStep, cmdStepEvent, cmdSpeed:
			d.note(Notice{Text: "a live replay runs on the wall clock: it cannot pause, step or change speed", Err: true})
			return
		}
	}
	switch c.kind {
	case cmdPause, cmdResume, cmdStep, cmdStepEvent:
		d.seeking = false // the operator's latest say wins
	}
	switch c.kind {
	case cmdPause:
		d.paused = true
	case cmdResume:
		d.paused = false
		d.rebase()
	case cmdStep:
		d.paused = true
		step := max(time.Duration(float64(d.frameEvery)*d.speed), time.Millisecond)
		d.eng.Advance(min(d.eng.Now()+step, d.eng.End()))
	case cmdStepEvent:
		d.paused = true
		d.seeking, d.seekFrom = true, d.eng.TimelineLen()
		d.seek()
	case cmdSpeed:
		if c.speed > 0 && !math.IsInf(c.speed, 0) {
			d.speed = c.speed
			d.rebase()
		}
	case cmdInject:
		label, err := d.eng.Inject(c.line)
		if err != nil {
			d.note(Notice{Text: fmt.Sprintf("inject %s: %v", c.line, err), Err: true})
			return
		}
		d.note(Notice{Text: fmt.Sprintf("%s injected at %s", label, clock(d.eng.Now())), Label: label})
	case cmdEndFault:
		if err := d.eng.EndFault(c.label); err != nil {
			d.note(Notice{Text: fmt.Sprintf("end %s: %v", c.label, err), Err: true})
			return
		}
		d.note(Notice{Text: fmt.Sprintf("%s ended at %s", c.label, clock(d.eng.Now()))})
	}
	if d.eng.Done() {
		d.end()
	}
}

// seek steps the engine, event by event, until its timeline grows (a
// fault starts, a breaker opens, the ladder moves…) or the run ends: the
// next thing worth seeing, not the next kernel event, which is a request a
// few milliseconds away. It gives up the goroutine after a frame of wall
// time and carries on at the next tick, so a quiet stretch of simulated
// time never holds up the operator's commands; End bounds it.
func (d *Driver) seek() {
	start := time.Now()
	still := 0 // steps in a row that left the engine's time where it was
	for {
		if d.eng.Done() {
			d.seeking = false
			d.note(Notice{Text: "no more events: the run has reached its end"})
			return
		}
		before := d.eng.Now()
		now, _ := d.eng.Step()
		d.dirty = true
		if d.eng.TimelineLen() > d.seekFrom {
			d.seeking = false
			return
		}
		if now > before {
			still = 0
		} else if still++; still >= maxStillSteps {
			// NB: an engine that cannot be stepped would otherwise spin
			// at every tick until the run ends.
			d.seeking = false
			d.note(Notice{Text: "the drill does not move under a step", Err: true})
			return
		}
		if time.Since(start) > d.frameEvery {
			return
		}
	}
}

// maxStillSteps is how many steps in a row may leave the engine's time
// unchanged (events at one instant) before seek gives up.
const maxStillSteps = 10000

func (d *Driver) note(n Notice) { d.notices = append(d.notices, n) }

// end reports a run that reached its end and sends the final frame; the
// driver then only waits for Finish.
func (d *Driver) end() {
	if d.final != nil {
		return
	}
	d.settle(true)
}

// finish ends the drill at Now (if it has not ended), sends the final
// frame and closes the channel.
func (d *Driver) finish() Result {
	if d.final == nil {
		d.settle(d.eng.Done())
	}
	close(d.out)
	return *d.final
}

// settle takes the last snapshot, then the report and the recorded faults,
// and publishes them as the final frame.
func (d *Driver) settle(ended bool) {
	snap := d.eng.Snapshot()
	res := &Result{Ended: ended, At: d.eng.Now(), Recorded: nil}
	res.Report, res.Err = d.eng.Report()
	res.Recorded = d.eng.Recorded()
	d.final = res
	d.paused = true
	d.send(Frame{Snap: snap, Paused: true, Live: d.live, Speed: d.speed, Notices: d.takeNotices(), Final: res})
}

// publish sends a frame when anything changed since the last one.
func (d *Driver) publish() {
	// NB: after the final frame nothing is published: a frame sent after it
	// would replace it in the one-frame channel, and the model would never
	// see the drill end (a command that ran the drill to its end, as . can,
	// publishes after handling it).
	if !d.dirty || d.final != nil {
		return
	}
	d.dirty = false
	d.send(Frame{Snap: d.eng.Snapshot(), Paused: d.paused, Live: d.live, Speed: d.speed, Behind: d.behind, Notices: d.takeNotices()})
}

func (d *Driver) takeNotices() []Notice {
	n := d.notices
	d.notices = nil
	return n
}

// send puts f on the channel of one, replacing a frame the model has not
// read yet; that frame's notices move to f. The driver is the only sender,
// so after the drain the send cannot block.
func (d *Driver) send(f Frame) {
	select {
	case old := <-d.out:
		f.Notices = append(old.Notices, f.Notices...)
	default:
	}
	d.out <- f
}
