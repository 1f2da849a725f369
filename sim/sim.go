package sim

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"
)

// Config configures a [Sim].
type Config struct {
	// Seed is the run seed. Every named random stream ([Sim.Rand]) is derived
	// from it, so the same seed and the same schedule replay the same run.
	Seed uint64
}

// slot holds the callback of a scheduled event. fn == nil marks an event that
// was stopped while still queued; its entry is discarded when the queue next
// touches it, or when the queue is compacted. gen increments every time the
// slot is released, so a Timer that names an old generation is inert.
type slot struct {
	fn  func()
	gen uint32
}

// Sim is a discrete-event simulator: a virtual clock and a queue of callbacks.
//
// A Sim is not safe for concurrent use. It is driven by one goroutine: the
// caller of [Sim.Run], [Sim.RunUntil] or [Sim.Step], or a [Pacer]. Callbacks
// run on that goroutine and may schedule and stop events freely.
type Sim struct {
	now    time.Duration
	events uint64

	q     queue
	slots []slot
	free  []uint32 // released slot indexes, reused LIFO

	// dead has one bit per slot, set while the slot's event is stopped but
	// still queued. The queue's scans test it instead of loading the slot:
	// the bitset of a few thousand timers stays in L1 where the slot table
	// does not.
	dead []uint64

	// stopped counts queued entries whose slot has been stopped. When they
	// outnumber the live ones the queue is compacted, so workloads that cancel
	// most deadlines (the common case in serving) keep it at most twice the
	// number of pending timers.
	stopped int

	seed    uint64
	streams map[string]*rand.Rand
}

// New returns an empty simulator at virtual time zero.
func New(cfg Config) *Sim {
	return &Sim{seed: cfg.Seed, streams: make(map[string]*rand.Rand)}
}

// Timer is a handle on a scheduled event. The zero Timer is valid and inert.
// Timers are values: copying one copies the handle, not the event.
type Timer struct {
	s    *Sim
	slot uint32
	gen  uint32
}

// Stop cancels the event. It reports whether the event was still pending:
// stopping an event that already fired or was already stopped does nothing
// and returns false. Stop is O(1); the queue entry is reclaimed lazily.
func (t Timer) Stop() bool {
	s := t.s
	if s == nil {
		return false
	}
	sl := &s.slots[t.slot]
	if sl.gen != t.gen || sl.fn == nil {
		return false
	}
	sl.fn = nil
	s.dead[t.slot>>6] |= 1 << (t.slot & 63)
	s.stopped++
	if s.stopped > 32 && s.stopped > s.q.n/2 {
		s.compact()
	}
	return true
}

// Pending reports whether the event is still scheduled: not fired, not stopped.
func (t Timer) Pending() bool {
	if t.s == nil {
		return false
	}
	sl := &t.s.slots[t.slot]
	return sl.gen == t.gen && sl.fn != nil
}

// noop stands in for a nil callback, so that a nil fn cannot be confused with
// a stopped event.
func noop() {}

// After schedules fn to run d after the current virtual time. A negative d is
// treated as zero, as time.AfterFunc does; a d that would overflow the clock
// schedules at the end of time (math.MaxInt64), which a run never reaches.
func (s *Sim) After(d time.Duration, fn func()) Timer {
	if d < 0 {
		d = 0
	}
	if d > math.MaxInt64-s.now {
		return s.schedule(math.MaxInt64, fn)
	}
	return s.schedule(s.now+d, fn)
}

// At schedules fn at absolute virtual time at. A time in the past is treated
// as now: the event fires before time advances, after the events already
// scheduled for now.
func (s *Sim) At(at time.Duration, fn func()) Timer {
	if at < s.now {
		at = s.now
	}
	return s.schedule(at, fn)
}

func (s *Sim) schedule(at time.Duration, fn func()) Timer {
	if fn == nil {
		fn = noop
	}
	var idx uint32
	if n := len(s.free); n > 0 {
		idx = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		idx = uint32(len(s.slots))
		s.slots = append(s.slots, slot{})
		if int(idx>>6) >= len(s.dead) {
			s.dead = append(s.dead, 0)
		}
	}
	sl := &s.slots[idx]
	sl.fn = fn
	s.q.push(entry{at: at, slot: idx})
	return Timer{s: s, slot: idx, gen: sl.gen}
}

// Now returns the current virtual time, measured from the start of the run.
func (s *Sim) Now() time.Duration { return s.now }

// Events returns the number of events fired so far. Stopped events are not
// counted.
func (s *Sim) Events() uint64 { return s.events }

// Pending returns the number of events scheduled and not stopped.
func (s *Sim) Pending() int { return s.q.n - s.stopped }

// Next returns the time of the next pending event, and false when there is
// none. It does not fire anything or move the clock.
func (s *Sim) Next() (time.Duration, bool) {
	return s.peek()
}

// Step fires the next pending event, advancing the clock to its time. It
// returns false, without moving the clock, when no event is pending.
func (s *Sim) Step() bool {
	return s.fireUntil(math.MaxInt64)
}

// Run fires events until none remain.
func (s *Sim) Run() {
	for s.fireUntil(math.MaxInt64) {
	}
}

// RunUntil fires every event scheduled at or before at, including those that
// the fired callbacks schedule within the window, then advances the clock to
// at. Later events stay queued. If at is before Now, nothing happens.
func (s *Sim) RunUntil(at time.Duration) {
	for s.fireUntil(at) {
	}
	if at > s.now {
		s.now = at
	}
}

// fireUntil fires the next pending event if it is due at or before limit.
func (s *Sim) fireUntil(limit time.Duration) bool {
	e, ok := s.pop(limit)
	if !ok {
		return false
	}
	sl := &s.slots[e.slot]
	fn := sl.fn
	// Release the slot before the callback runs: the event has fired, so its
	// Timer must report not pending, and the callback may reuse the slot.
	sl.fn = nil
	s.release(e.slot)
	s.now = e.at
	s.events++
	fn()
	return true
}

// live reports whether a queued entry has not been stopped.
func (s *Sim) live(e *entry) bool { return s.dead[e.slot>>6]&(1<<(e.slot&63)) == 0 }

// drop reclaims a stopped entry that the queue has discarded.
func (s *Sim) drop(e *entry) {
	s.q.n--
	s.dead[e.slot>>6] &^= 1 << (e.slot & 63)
	s.release(e.slot)
	s.stopped--
}

func (s *Sim) release(idx uint32) {
	s.slots[idx].gen++
	s.free = append(s.free, idx)
}

// Rand returns the random stream called name. Each name gets an independent
// PCG stream seeded from (Seed, name) alone, so adding a stream, or drawing
// from one, never changes the draws of another. The same name returns the
// same *rand.Rand; like the Sim, it is not safe for concurrent use.
func (s *Sim) Rand(name string) *rand.Rand {
	if r, ok := s.streams[name]; ok {
		return r
	}
	r := rand.New(NewSource(s.seed, name))
	s.streams[name] = r
	return r
}

// NewSource returns the PCG source that [Sim.Rand] uses for stream name under
// seed. It is exported for code that needs a stream outside a Sim (a worker
// goroutine, a parallel sweep) and must still draw exactly what the Sim would.
func NewSource(seed uint64, name string) *rand.PCG {
	h := fnv.New64a()
	h.Write([]byte(name))
	k := h.Sum64()
	return rand.NewPCG(splitmix(seed^k), splitmix(seed+k+0x9e3779b97f4a7c15))
}

// splitmix is SplitMix64's finaliser: it spreads nearby seeds (1, 2, 3...)
// across the whole state space so their streams do not start correlated.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
