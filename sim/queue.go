package sim

import (
	"math/bits"
	"time"
)

// The event queue is a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990).
// It relies on one property of a discrete-event simulation: time never goes
// backwards, so no event is ever scheduled before the last one removed. Under
// that promise a key's bucket is the position of the highest bit in which it
// differs from the last removed key:
//
//	bucket(k) = bits.Len64(k ^ last)     // 0 means k == last
//
// Every key in bucket i is smaller than every key in bucket j > i. Insertion
// is an append, O(1). Removal takes from bucket 0; when that is empty, the
// lowest non-empty bucket is scanned for its minimum, which becomes last, and
// its entries are redistributed into strictly lower buckets. An entry moves
// down at most 64 times in its life and, in practice, a handful.
//
// Ties need no sequence number. Entries with equal keys always share a bucket,
// enter it by appending, and move between buckets together and in order, so
// an append-only bucket keeps them in scheduling order and bucket 0 (all keys
// equal to last) is consumed first in, first out.
//
// We measured it against a hand-written binary heap of float64 and a 4-ary
// heap of (time, seq) entries on the hold model; see bench_test.go and the
// README's performance section for the figures.
type queue struct {
	last time.Duration // key of the last removed entry; all keys are >= last

	// buckets[0] holds entries with at == last, consumed from head0.
	// buckets[i], i > 0, holds entries whose highest bit differing from last
	// is bit i-1. Keys are non-negative int64, so i <= 63.
	buckets [64][]entry
	head0   int
	mask    uint64 // bit i set when buckets[i] (i > 0) may be non-empty
	n       int    // queued entries, stopped ones included
}

// entry is one scheduled event. It holds no pointers, so the garbage
// collector never scans the queue; the callback lives in the Sim's slot
// table.
type entry struct {
	at   time.Duration
	slot uint32
}

func (q *queue) bucket(at time.Duration) int {
	return bits.Len64(uint64(at ^ q.last))
}

// push queues e. The caller guarantees e.at >= q.last.
func (q *queue) push(e entry) {
	i := q.bucket(e.at)
	q.buckets[i] = append(q.buckets[i], e)
	q.mask |= 1 << i
	q.n++
}

// pop removes and returns the earliest live entry if it is due at or before
// limit. Stopped entries met on the way are discarded through drop.
func (s *Sim) pop(limit time.Duration) (entry, bool) {
	q := &s.q
	for {
		b := q.buckets[0]
		for q.head0 < len(b) {
			e := &b[q.head0]
			if !s.live(e) {
				q.head0++
				s.drop(e)
				continue
			}
			if e.at > limit {
				return entry{}, false
			}
			q.head0++
			q.n--
			return *e, true
		}
		q.buckets[0] = b[:0]
		q.head0 = 0
		i, min, ok := s.lowest()
		if !ok {
			return entry{}, false
		}
		if min > limit {
			// Leave last alone: the clock may stop short of min, and events
			// scheduled in between must still satisfy at >= last.
			return entry{}, false
		}
		q.redistribute(i, min)
	}
}

// peek returns the time of the earliest live entry without removing it or
// changing last.
func (s *Sim) peek() (time.Duration, bool) {
	q := &s.q
	b := q.buckets[0]
	for q.head0 < len(b) {
		e := &b[q.head0]
		if s.live(e) {
			return e.at, true
		}
		q.head0++
		s.drop(e)
	}
	_, min, ok := s.lowest()
	return min, ok
}

// lowest finds the lowest non-empty bucket above 0, discarding stopped
// entries from the buckets it scans, and returns it with its minimum key.
// Bucket 0 must be empty.
func (s *Sim) lowest() (int, time.Duration, bool) {
	q := &s.q
	for q.mask&^1 != 0 {
		i := bits.TrailingZeros64(q.mask &^ 1)
		b := q.buckets[i]
		if s.stopped == 0 && len(b) > 0 {
			// Fast path: nothing to discard, so no slot lookups.
			min := b[0].at
			for k := 1; k < len(b); k++ {
				min = minDuration(min, b[k].at)
			}
			return i, min, true
		}
		w := 0
		var min time.Duration
		for k := range b {
			e := &b[k]
			if !s.live(e) {
				s.drop(e)
				continue
			}
			if w == 0 || e.at < min {
				min = e.at
			}
			b[w] = *e
			w++
		}
		q.buckets[i] = b[:w]
		if w > 0 {
			return i, min, true
		}
		q.mask &^= 1 << i
	}
	return 0, 0, false
}

// redistribute makes min the new last and moves every entry of bucket i
// (i > 0, minimum min) into a lower bucket, in order.
func (q *queue) redistribute(i int, min time.Duration) {
	q.last = min
	b := q.buckets[i]
	for k := range b {
		j := q.bucket(b[k].at)
		q.buckets[j] = append(q.buckets[j], b[k])
		q.mask |= 1 << j
	}
	q.buckets[i] = b[:0]
	q.mask &^= 1 << i
}

// compact drops every stopped entry from the queue, keeping order within each
// bucket (which is what keeps ties in scheduling order).
func (s *Sim) compact() {
	q := &s.q
	for i := range q.buckets {
		b := q.buckets[i]
		start := 0
		if i == 0 {
			start = q.head0
		}
		w := 0
		for k := start; k < len(b); k++ {
			if !s.live(&b[k]) {
				s.drop(&b[k])
				continue
			}
			b[w] = b[k]
			w++
		}
		q.buckets[i] = b[:w]
		if w == 0 && i > 0 {
			q.mask &^= 1 << i
		}
	}
	q.head0 = 0
}

func minDuration(a, b time.Duration) time.Duration {
	if b < a {
		return b
	}
	return a
}
