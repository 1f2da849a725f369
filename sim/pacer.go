package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Speed limits of a [Pacer], in virtual seconds per wall second. Below
// MinSpeed a game day barely moves; above MaxSpeed the wall clock no longer
// means anything to a person watching, and [Unbounded] says so honestly.
const (
	MinSpeed = 0.1
	MaxSpeed = 10_000
)

// Unbounded is the [Pacer] speed that ignores the wall clock and fires events
// as fast as the callbacks allow. It is +Inf, which Go cannot express as a
// constant; the Pacer recognises any +Inf, so the value of this variable is
// only a convenient name for it.
var Unbounded = math.Inf(1)

// DefaultTick is the [PacerConfig.Tick] used when none is given: 20 clock
// advances per wall second, enough for a clock on screen to look continuous.
const DefaultTick = 50 * time.Millisecond

// pacerChunk is how many events the run loop fires before it looks at its
// commands and context again. At Unbounded speed, or when the callbacks
// cannot keep up with the speed, this bounds how long Pause or a cancel
// waits: a few thousand events is well under a millisecond of kernel work.
const pacerChunk = 4096

// ErrPacerStopped is returned by the control methods of a [Pacer] whose Run
// has returned (or by a second call to Run).
var ErrPacerStopped = errors.New("sim: pacer stopped")

// PacerConfig configures a [Pacer].
type PacerConfig struct {
	// Speed is the pace, in virtual seconds per wall second: 1 is real time,
	// 60 runs a virtual minute per wall second. It must lie in
	// [MinSpeed, MaxSpeed] or be [Unbounded]; there is no default, so the
	// zero value is rejected rather than silently picking one.
	Speed float64

	// Paused starts the Pacer paused: the clock stays at [Sim.Now] until
	// Resume or Step.
	Paused bool

	// Tick is the longest wall interval between two advances of the virtual
	// clock while running, so the clock visibly moves between sparse events.
	// Zero means DefaultTick; negative is an error.
	Tick time.Duration

	// OnAdvance, if set, is called on the run goroutine after every advance
	// of the simulation: after each tick or chunk of events, and after Step
	// and Do. It may read the Sim freely (that is its purpose: a UI copies
	// what it shows from here without racing the kernel), but it must not
	// call the Pacer's control methods, which would wait on the goroutine
	// that is running it.
	OnAdvance func(s *Sim)
}

// PacerStatus is a consistent snapshot of a paced run, taken between events.
type PacerStatus struct {
	Now     time.Duration // virtual time
	Speed   float64       // virtual seconds per wall second; +Inf when Unbounded
	Paused  bool
	Events  uint64 // events fired so far ([Sim.Events])
	Pending int    // events still scheduled ([Sim.Pending])
}

// Pacer runs a [Sim] paced to the wall clock, for interactive game days.
//
// While running, the target virtual time is
//
//	vAnchor + (wallNow − wAnchor) × speed
//
// and the Pacer fires every event due by the target, then moves the clock to
// it. The anchors are reset on every speed change, pause and resume, so a
// change of pace never makes the clock jump.
//
// The Sim stays single-goroutine: [Pacer.Run]'s goroutine is the only one
// that touches it. The control methods (Pause, Resume, Step, SetSpeed, Do,
// Status) may be called from any goroutine; each sends a command to the run
// loop, which executes it between events, and waits for it to be done. A
// control call made before Run starts blocks until Run starts; once Run has
// returned, control calls return [ErrPacerStopped]. Control methods must not
// be called from the run goroutine (event callbacks, OnAdvance, a Do
// function): they would wait for themselves forever.
type Pacer struct {
	s         *Sim
	tick      time.Duration
	onAdvance func(*Sim)

	cmds    chan command
	done    chan struct{} // closed when Run returns
	started atomic.Bool

	// Run-loop state, touched only by the goroutine in Run (and by NewPacer
	// before it starts).
	speed   float64
	paused  bool
	vAnchor time.Duration // virtual time at wAnchor
	wAnchor time.Time
}

// command is a control call travelling to the run loop. The loop runs fn
// between events and closes ack once it has.
type command struct {
	fn  func()
	ack chan struct{}
}

// NewPacer returns a Pacer for s. It does not start it: call [Pacer.Run].
func NewPacer(s *Sim, cfg PacerConfig) (*Pacer, error) {
	if s == nil {
		return nil, errors.New("sim: pacer needs a non-nil *Sim")
	}
	if err := checkSpeed(cfg.Speed); err != nil {
		return nil, err
	}
	if cfg.Tick < 0 {
		return nil, fmt.Errorf("sim: pacer tick %v is negative; want > 0, or 0 for the default %v", cfg.Tick, DefaultTick)
	}
	tick := cfg.Tick
	if tick == 0 {
		tick = DefaultTick
	}
	return &Pacer{
		s:         s,
		tick:      tick,
		onAdvance: cfg.OnAdvance,
		cmds:      make(chan command),
		done:      make(chan struct{}),
		speed:     cfg.Speed,
		paused:    cfg.Paused,
	}, nil
}

// checkSpeed reports whether x is an allowed speed. NaN fails every
// comparison, so it is rejected along with the rest.
func checkSpeed(x float64) error {
	if math.IsInf(x, 1) || (x >= MinSpeed && x <= MaxSpeed) {
		return nil
	}
	return fmt.Errorf("sim: pacer speed %v out of range: want %v to %v virtual seconds per wall second, or Unbounded", x, MinSpeed, MaxSpeed)
}

// Run drives the Sim until the drill is over, on the calling goroutine. It
// returns nil when no event is pending and the Pacer is not paused (a paused
// Pacer with an empty queue waits, since a Do may still schedule more), and
// ctx.Err() when ctx ends first. Run may be called only once: a second call
// returns an error at once (ErrPacerStopped if the first has returned).
func (p *Pacer) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		select {
		case <-p.done:
			return ErrPacerStopped
		default:
			return errors.New("sim: pacer already running")
		}
	}
	defer close(p.done)

	p.anchor(time.Now())
	// A stopped timer sends nothing (Go 1.23 timer semantics), so waiting on
	// its channel while paused simply never fires.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()

	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !p.advance(time.Now()) {
			// Behind the target after a full chunk: keep firing, but let
			// commands and cancellation in first.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case c := <-p.cmds:
				p.exec(c)
			default:
			}
			continue
		}
		if !p.paused && p.s.Pending() == 0 {
			return nil
		}
		if d, ok := p.sleep(time.Now()); ok {
			timer.Reset(d)
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case c := <-p.cmds:
			p.exec(c)
		case <-timer.C:
		}
	}
}

// exec runs a command on the run loop. The sim is first brought up to the
// current target, so the command sees (and a Pause freezes) the clock as it
// is at this wall instant, not as it was at the last tick.
func (p *Pacer) exec(c command) {
	p.advance(time.Now())
	c.fn()
	close(c.ack)
}

// anchor restarts the pace from the sim's current clock at wall time now.
// Anchoring at Sim.Now rather than at the old target forgives any backlog a
// slow run had built up, so a speed change never causes a burst.
func (p *Pacer) anchor(now time.Time) {
	p.vAnchor = p.s.Now()
	p.wAnchor = now
}

// target returns the virtual time the clock should show at wall time now,
// saturating instead of overflowing. The product is truncated, so the clock
// never runs ahead of the pace.
func (p *Pacer) target(now time.Time) time.Duration {
	if math.IsInf(p.speed, 1) {
		// Not computed: at the anchor instant, 0 × Inf would be NaN.
		return math.MaxInt64
	}
	room := time.Duration(math.MaxInt64) - p.vAnchor
	v := float64(now.Sub(p.wAnchor)) * p.speed
	if v >= float64(room) {
		return math.MaxInt64
	}
	d := time.Duration(v)
	if d > room { // float64(room) rounded up: d fits int64 but not the sum
		return math.MaxInt64
	}
	return p.vAnchor + d
}

// advance fires the events due by the target at wall time now, at most
// pacerChunk of them, and reports whether it caught up. Once caught up at a
// finite speed the clock moves to the target, as Sim.RunUntil does; at
// Unbounded speed it stays at the last event, because the target is
// meaningless. A paused Pacer is always caught up.
func (p *Pacer) advance(now time.Time) bool {
	if p.paused {
		return true
	}
	s := p.s
	target := p.target(now)
	for range pacerChunk {
		next, ok := s.Next()
		if !ok || next > target {
			if !math.IsInf(p.speed, 1) {
				s.RunUntil(target)
			}
			p.notify()
			return true
		}
		s.Step()
	}
	p.notify()
	return false
}

func (p *Pacer) notify() {
	if p.onAdvance != nil {
		p.onAdvance(p.s)
	}
}

// sleep returns how long the run loop may sleep at wall time now, having
// caught up: until the next event is due or a tick has passed, whichever is
// sooner. ok is false when paused: then only a command can wake the loop.
func (p *Pacer) sleep(now time.Time) (d time.Duration, ok bool) {
	if p.paused {
		return 0, false
	}
	next, ok := p.s.Next()
	if !ok || math.IsInf(p.speed, 1) {
		// Not reached while running: Run returns on an empty queue, and at
		// Unbounded speed advance only catches up by emptying it.
		return p.tick, true
	}
	// w is the first wall offset from wAnchor (ns) at which target reaches
	// next. The ceiling of the quotient can be off by one ulp either way, so
	// it is corrected against target's own formula, so the loop wakes exactly
	// when the event is due rather than a nanosecond early (a wasted wake)
	// or late. Beyond 2^53 ns (104 days) steps of one are lost to rounding,
	// and a tick bounds the sleep anyway.
	need := float64(next - p.vAnchor)
	w := math.Ceil(need / p.speed)
	if w < 1<<53 {
		for w > 0 && math.Trunc((w-1)*p.speed) >= need {
			w--
		}
		for math.Trunc(w*p.speed) < need {
			w++
		}
	}
	wait := w - float64(now.Sub(p.wAnchor))
	if wait >= float64(p.tick) {
		return p.tick, true
	}
	// At least 1ns: the wall clock must move for the target to move.
	return max(time.Duration(wait), time.Nanosecond), true
}

// call sends fn to the run loop and waits until it has run. It returns
// ErrPacerStopped if Run has returned (or returns before running fn).
func (p *Pacer) call(fn func()) error {
	c := command{fn: fn, ack: make(chan struct{})}
	select {
	case p.cmds <- c:
	case <-p.done:
		return ErrPacerStopped
	}
	select {
	case <-c.ack:
		return nil
	case <-p.done:
		// Run closes ack before done, so if fn ran, ack is closed by now
		// even if select happened to pick this case.
		select {
		case <-c.ack:
			return nil
		default:
			return ErrPacerStopped
		}
	}
}

// Pause stops the virtual clock at its current target. Pausing a paused
// Pacer does nothing.
func (p *Pacer) Pause() error {
	return p.call(func() { p.paused = true })
}

// Resume restarts the clock from where it was paused, at the current speed.
// Resuming a running Pacer does nothing. If no event is pending, Run returns.
func (p *Pacer) Resume() error {
	return p.call(func() {
		if p.paused {
			p.paused = false
			p.anchor(time.Now())
		}
	})
}

// Step pauses the Pacer if it is running (after firing what is due by now),
// then fires exactly one event, moving the clock to that event's time. It
// reports whether an event fired: false means none was pending. The Pacer
// stays paused afterwards.
func (p *Pacer) Step() (bool, error) {
	var fired bool
	err := p.call(func() {
		p.paused = true
		fired = p.s.Step()
		p.notify()
	})
	return fired, err
}

// SetSpeed changes the pace to x virtual seconds per wall second, from the
// current virtual time on. The speed is checked before Run is involved, so
// an invalid x is reported even after Run has returned.
func (p *Pacer) SetSpeed(x float64) error {
	if err := checkSpeed(x); err != nil {
		return err
	}
	return p.call(func() {
		p.speed = x
		if !p.paused {
			p.anchor(time.Now())
		}
	})
}

// Do runs fn on the run goroutine between events, with the clock brought up
// to the current target, and returns once it has run. fn may schedule and
// stop events (this is how faults are injected) but must not call the
// Pacer's control methods. If fn moves the clock past the target (by calling
// Sim.Step or Sim.RunUntil itself), the pace restarts from the new time.
func (p *Pacer) Do(fn func(*Sim)) error {
	return p.call(func() {
		fn(p.s)
		if now := time.Now(); !p.paused && p.s.Now() > p.target(now) {
			p.anchor(now)
		}
		p.notify()
	})
}

// Status returns a snapshot of the run, with the clock brought up to the
// current target.
func (p *Pacer) Status() (PacerStatus, error) {
	var st PacerStatus
	err := p.call(func() {
		st = PacerStatus{
			Now:     p.s.Now(),
			Speed:   p.speed,
			Paused:  p.paused,
			Events:  p.s.Events(),
			Pending: p.s.Pending(),
		}
	})
	return st, err
}
