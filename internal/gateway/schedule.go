package gateway

import (
	"context"
	"math"
	"sync"
	"time"
)

// The gateway's model-time schedule: one goroutine and one timer for what
// is due at a time of the model's — the request engine's wake-up
// (Ready.WakeAt: a quota refill, a breaker due half-open, an ejection's
// end, a request's retry or time-out, the ladder's, the canaries' and the
// scalers' evaluations) and the restarted replicas' loads (restart.go).
// Only the health probes keep their own loop (their interval, and I/O).

// noDue is a due time that never comes.
const noDue = time.Duration(math.MaxInt64)

// schedule runs its jobs at their due times (model time). It owns only
// the timer's wake-ups: what is due, and what firing does, are its jobs',
// which read the gateway's state under the gateway's lock.
type schedule struct {
	mu     *sync.Mutex // the gateway's: the jobs' due times are read under it
	clk    clock
	kicked chan struct{} // buffered (1): a kick is never lost, never blocks
	jobs   []job         // in the order they fire when due together
}

// job is one thing on the schedule.
type job struct {
	due  func() time.Duration // when next, on the gateway's clock; noDue: never. Called with mu held
	fire func()               // takes mu itself
}

func newSchedule(mu *sync.Mutex, clk clock, jobs ...job) *schedule {
	return &schedule{mu: mu, clk: clk, kicked: make(chan struct{}, 1), jobs: jobs}
}

// run runs what is due at its time until ctx ends; a kick (an earlier
// wake-up, canaries or scalers started) reads the times again.
func (s *schedule) run(ctx context.Context) {
	runAt(ctx, s.mu, s.kicked, func() time.Duration {
		next := noDue
		for _, j := range s.jobs {
			next = min(next, j.due())
		}
		if next == noDue {
			return -1 // nothing due: wait for a kick
		}
		return max(s.clk.wall(next-s.clk.now()), 0)
	}, s.fireDue)
}

// fireDue runs what is due now, in the jobs' order. The due times are
// read together, under one hold of the lock, so a job fired first does
// not make a later one due in the same pass.
func (s *schedule) fireDue() {
	due := make([]time.Duration, len(s.jobs))
	s.mu.Lock()
	for i, j := range s.jobs {
		due[i] = j.due()
	}
	now := s.clk.now()
	s.mu.Unlock()
	for i, j := range s.jobs {
		if due[i] <= now {
			j.fire()
		}
	}
}

// kick wakes run to read the due times again. Callers hold mu, as they
// changed a due time under it.
func (s *schedule) kick() {
	select {
	case s.kicked <- struct{}{}:
	default:
	}
}

// runAt calls fire when wait says (wall time, read with mu held; -1:
// nothing due, wait for a kick), and reads wait again after each fire or
// kick, until ctx ends.
func runAt(ctx context.Context, mu *sync.Mutex, kick <-chan struct{}, wait func() time.Duration, fire func()) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		mu.Lock()
		w := wait()
		mu.Unlock()
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
