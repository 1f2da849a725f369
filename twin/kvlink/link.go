package kvlink

import (
	"fmt"
	"math"
	"time"
)

// Link is one link's transfers: those in their latency (joining) and those
// moving bytes (active), which share the bandwidth equally.
//
// Sharing is kept as a virtual clock, as processor-sharing queues are
// simulated: served is what each active transfer has received since the
// link began, and grows at bandwidth / active; a transfer that joins when
// served is s and carries b bytes ends when served reaches s + b. So a
// join, an end or a change of rate costs no walk over the others'
// remaining bytes, and none accumulates rounding.
type Link struct {
	bw  float64 // bytes per second
	lat time.Duration

	now     time.Duration // the instant served was last brought to
	served  float64
	joining []transfer
	active  []transfer
	pending []uint64 // transfers ended and not yet returned by Advance
	done    []uint64 // Advance's result, reused
	moved   float64  // bytes of transfers ended
	busy    time.Duration
}

type transfer struct {
	id     uint64
	bytes  float64
	joinAt time.Duration // end of its latency
	target float64       // served at which it ends (active only)
}

// New returns an idle link of bandwidth bytes per second and latency
// per transfer, at time 0.
func New(bandwidth float64, latency time.Duration) (*Link, error) {
	if err := check(bandwidth, latency); err != nil {
		return nil, err
	}
	return &Link{bw: bandwidth, lat: latency}, nil
}

func check(bandwidth float64, latency time.Duration) error {
	if !(bandwidth > 0) || math.IsInf(bandwidth, 0) {
		return fmt.Errorf("link bandwidth %v bytes/s: must be positive and finite", bandwidth)
	}
	if latency < 0 {
		return fmt.Errorf("link latency %v: must not be negative", latency)
	}
	return nil
}

// Start begins transfer id of bytes at now: it moves nothing for the
// link's latency, then shares the bandwidth. Transfers that ended by now
// are settled first and returned by the next Advance.
func (l *Link) Start(now time.Duration, id uint64, bytes float64) {
	l.settle(now)
	l.joining = append(l.joining, transfer{id: id, bytes: max(bytes, 0), joinAt: now + l.lat})
}

// Cancel ends transfer id at now without completing it (its decode side
// gave up, its request went away); false when it is not on the link.
func (l *Link) Cancel(now time.Duration, id uint64) bool {
	l.settle(now)
	for i, t := range l.joining {
		if t.id == id {
			l.joining = append(l.joining[:i], l.joining[i+1:]...)
			return true
		}
	}
	for i, t := range l.active {
		if t.id == id {
			l.active = append(l.active[:i], l.active[i+1:]...)
			return true
		}
	}
	return false
}

// SetRate changes the link's bandwidth and latency from now
// (link-degraded, and its end): transfers moving bytes go on at their
// share of the new bandwidth; those in their latency keep the latency
// they started with; transfers started later take the new one.
func (l *Link) SetRate(now time.Duration, bandwidth float64, latency time.Duration) error {
	if err := check(bandwidth, latency); err != nil {
		return err
	}
	l.settle(now)
	l.bw, l.lat = bandwidth, latency
	return nil
}

// Rate returns the link's bandwidth (bytes per second) and latency.
func (l *Link) Rate() (float64, time.Duration) { return l.bw, l.lat }

// Len is the number of transfers on the link, moving bytes or not, and
// ended but not yet returned by Advance.
func (l *Link) Len() int { return len(l.joining) + len(l.active) + len(l.pending) }

// Moved is the bytes of the transfers that ended; Busy the time the link
// moved bytes.
func (l *Link) Moved() float64 { return l.moved }

// Busy is the time the link spent moving bytes (one transfer or more).
func (l *Link) Busy() time.Duration { return l.busy }

// Next returns when the link next needs Advance (a transfer's latency
// over, or one's last byte moved; now, when transfers ended that Advance
// has not returned); false when it is idle.
func (l *Link) Next() (time.Duration, bool) {
	if len(l.pending) > 0 {
		return l.now, true
	}
	return l.next()
}

// next is when the next transfer joins or ends.
func (l *Link) next() (time.Duration, bool) {
	at, ok := time.Duration(math.MaxInt64), false
	for _, t := range l.joining {
		if t.joinAt < at {
			at, ok = t.joinAt, true
		}
	}
	if i := l.first(); i >= 0 {
		if e := l.endOf(l.active[i]); e < at {
			at, ok = e, true
		}
	}
	return at, ok
}

// Advance brings the link to now and returns the transfers that ended by
// then, in the order they ended (those ending at one instant in the order
// they started). The slice is the link's, valid until the next call.
func (l *Link) Advance(now time.Duration) []uint64 {
	l.settle(now)
	l.done = append(l.done[:0], l.pending...)
	l.pending = l.pending[:0]
	return l.done
}

// settle brings the link to now, keeping the transfers that end by then
// for Advance to return.
func (l *Link) settle(now time.Duration) {
	for {
		at, ok := l.next()
		if !ok || at > now {
			break
		}
		l.to(at)
		// Joins first: a transfer that joins at the instant another ends
		// shares nothing with it, as no time passes between them.
		for i := 0; i < len(l.joining); {
			if t := l.joining[i]; t.joinAt <= at {
				t.target = l.served + t.bytes
				l.active = append(l.active, t)
				l.joining = append(l.joining[:i], l.joining[i+1:]...)
				continue
			}
			i++
		}
		for i := 0; i < len(l.active); {
			if t := l.active[i]; l.over(t) {
				l.pending = append(l.pending, t.id)
				l.moved += t.bytes
				l.active = append(l.active[:i], l.active[i+1:]...)
				continue
			}
			i++
		}
	}
	l.to(now)
}

// to moves the virtual clock to at, with no join or end in between.
func (l *Link) to(at time.Duration) {
	if at <= l.now {
		return
	}
	if n := len(l.active); n > 0 {
		l.served += (at - l.now).Seconds() * l.bw / float64(n)
		l.busy += at - l.now
	}
	l.now = at
}

// first returns the active transfer that ends first (the lowest target;
// the first started among equals), -1 when none moves bytes.
func (l *Link) first() int {
	best := -1
	for i, t := range l.active {
		if best < 0 || t.target < l.active[best].target {
			best = i
		}
	}
	return best
}

// endOf is when active transfer t ends if nothing joins or ends before:
// its remaining bytes at its share, rounded up to the nanosecond.
func (l *Link) endOf(t transfer) time.Duration {
	rest := t.target - l.served
	if l.over(t) {
		return l.now
	}
	return l.now + seconds(rest*float64(len(l.active))/l.bw)
}

// over reports whether t has moved its bytes: served within rounding of
// its target (the end time was rounded up to the nanosecond, so served
// may fall short of the target by what a nanosecond carries).
func (l *Link) over(t transfer) bool {
	slack := l.bw * 1e-9 / float64(max(len(l.active), 1)) // one nanosecond's share
	return t.target-l.served <= slack+1e-9*math.Abs(t.target)
}
