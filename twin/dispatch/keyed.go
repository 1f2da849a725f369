package dispatch

import (
	"math"
	"time"
)

// fifo, priority and edf are one heap each, ordered by (k, Arrived, ID) with
// k computed once at Push:
//
//	fifo      k = 0                         arrival order
//	priority  k = Arrived − Priority·Aging  Aging > 0 (proof below)
//	          k = −Priority                 Aging = 0: strict priority
//	edf       k = Deadline                  math.MaxInt64 when Deadline = 0
//
// Priority with aging. An item's effective priority at virtual time t is
//
//	e(t) = Priority + (t − Arrived)/Aging
//
// which grows by one class per Aging waited. Write G for Aging (> 0) and
// k = Arrived − Priority·G. For any two items i, j and any t,
//
//	e_i(t) − e_j(t) = (P_i − P_j) + (A_j − A_i)/G
//	                = ((A_j − P_j·G) − (A_i − P_i·G))/G
//	                = (k_j − k_i)/G
//
// The t terms cancel: which of two items has the higher effective priority
// is the same at every instant, and e_i(t) > e_j(t) exactly when k_i < k_j.
// So a heap ordered by k when an item is pushed stays correctly ordered as
// time passes, and nothing is ever re-keyed; items that tie in effective
// priority (equal k) go in arrival order. Read k as the arrival time the item
// would have had at priority 0: each class of priority is a head start of
// Aging.
//
// k is exact int64 nanoseconds, so no rounding can reorder two items, as
// float effective priorities could. It saturates at ±math.MaxInt64 when
// |Arrived| + |Priority·Aging| exceeds 2^63 ns (about 292 years), which keeps
// the order monotone but makes such extreme items tie.
type keyed struct {
	h      itemHeap
	policy policyKind
	aging  time.Duration
}

type policyKind uint8

const (
	policyFIFO policyKind = iota
	policyPriority
	policyEDF
)

var _ Queue = (*keyed)(nil)

func (q *keyed) key(it *Item) int64 {
	switch q.policy {
	case policyPriority:
		if q.aging == 0 {
			return -int64(it.Priority)
		}
		return agingKey(it.Arrived, it.Priority, q.aging)
	case policyEDF:
		if it.Deadline == 0 {
			return math.MaxInt64
		}
		return int64(it.Deadline)
	default:
		return 0
	}
}

// agingKey returns arrived − priority·aging, saturating at the int64 bounds.
// aging > 0.
func agingKey(arrived time.Duration, priority int, aging time.Duration) int64 {
	p, g, a := int64(priority), int64(aging), int64(arrived)
	head := p * g
	if p != 0 && head/p != g { // overflowed: g > 0, so the sign is p's
		if p > 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	switch {
	case head > 0 && a < math.MinInt64+head:
		return math.MinInt64
	case head < 0 && a > math.MaxInt64+head:
		return math.MaxInt64
	}
	return a - head
}

func (q *keyed) Push(_ time.Duration, it *Item) {
	if it.pos != 0 {
		panic("dispatch: Push of an item that is already queued")
	}
	q.h.push(entry{k: q.key(it), arr: it.Arrived, id: it.ID, it: it})
}

func (q *keyed) Pop(time.Duration) *Item {
	if len(q.h) == 0 {
		return nil
	}
	return q.h.removeAt(0)
}

func (q *keyed) Peek(time.Duration) *Item {
	if len(q.h) == 0 {
		return nil
	}
	return q.h[0].it
}

func (q *keyed) Remove(it *Item) bool {
	if it == nil || !q.h.has(it) {
		return false
	}
	q.h.removeAt(it.pos - 1)
	return true
}

func (q *keyed) Len() int { return len(q.h) }
