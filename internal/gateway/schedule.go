package gateway

import (
	"context"
	"math"
	"time"
)

// The gateway's model-time schedule: one goroutine and one timer for what
// is due at a time of the model's — the core's wake-up (Ready.WakeAt: a
// quota refill, a breaker due half-open, an ejection's end), the
// degradation ladder's evaluations (every sched.LadderEvery), the
// canaries' (their NextAt) and the scalers' (theirs), each the request
// engine's due time. Only the health probes keep their own loop (their
// interval, and I/O).

// noDue is a due time that never comes.
const noDue = time.Duration(math.MaxInt64)

// dueAt is when the core, the ladder, the canaries and the scalers next
// have something to do, on the gateway's clock (model time); noDue for
// nothing. Called with mu held.
func (g *Gateway) dueAt() (wake, ladder, canary, scale time.Duration) {
	wake, ladder, canary, scale = noDue, noDue, noDue, noDue
	if g.wakeAt > 0 {
		wake = g.wakeAt
	}
	if g.ladder != nil {
		ladder = g.ladder.NextAt()
	}
	if g.can != nil {
		if at, ok := g.can.NextAt(); ok {
			canary = at
		}
	}
	if g.asStarted && !g.asStopped {
		if at, ok := g.scaling.NextAt(); ok {
			scale = at
		}
	}
	return wake, ladder, canary, scale
}

// scheduleLoop runs what is due at its time until ctx ends; a kick
// (kickSchedule: an earlier wake-up, canaries or scalers started) reads the
// times again. It is started with the gateway.
func (g *Gateway) scheduleLoop(ctx context.Context) {
	g.runAt(ctx, g.kick, func() time.Duration {
		w, l, c, s := g.dueAt()
		next := min(w, l, c, s)
		if next == noDue {
			return -1 // nothing due: wait for a kick
		}
		return max(g.clk.wall(next-g.clk.now()), 0)
	}, g.fireDue)
}

// fireDue runs what is due now: the core's wake-up first, then the
// ladder, the canaries and the scalers, each under the gateway's lock.
func (g *Gateway) fireDue() {
	g.mu.Lock()
	w, l, c, s := g.dueAt()
	now := g.clk.now()
	g.mu.Unlock()
	if w <= now {
		g.onWake()
	}
	if l <= now {
		g.evaluateLadder()
	}
	if c <= now {
		g.evaluateCanaries()
	}
	if s <= now {
		g.advanceScalers()
	}
}

// kickSchedule wakes scheduleLoop to read the due times again. Called with
// mu held.
func (g *Gateway) kickSchedule() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// runAt calls fire when wait says (wall time, read with mu held; -1:
// nothing due, wait for a kick), and reads wait again after each fire or
// kick, until ctx ends. It is the loop of a goroutine counted in probeWG.
func (g *Gateway) runAt(ctx context.Context, kick <-chan struct{}, wait func() time.Duration, fire func()) {
	defer g.probeWG.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		g.mu.Lock()
		w := wait()
		g.mu.Unlock()
		var tc <-chan time.Time
		if w >= 0 {
			t.Reset(w)
			tc = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
			t.Stop()
			continue
		case <-tc:
		}
		fire()
	}
}
