package dispatch

import (
	"math"
	"time"
)

// wfq is start-time fair queueing (SFQ: Goyal, Vin and Cheng, SIGCOMM 1996)
// with tenants as the flows, Item.Cost (tokens) as the packet length and
// Config.Weights as the shares.
//
// # Rules
//
// The queue keeps a virtual time v; each tenant f keeps a finish tag F_f,
// the virtual time at which its last dispatched item finished, and, while it
// has queued items ("is backlogged"), a start tag S_f for its head item.
// Within a tenant, items go in arrival order (Arrived, then ID).
//
//  1. Push into a tenant with nothing queued: S_f = max(v, F_f).
//  2. Pop takes the head of the backlogged tenant with the smallest S_f,
//     ties by the heads' (Arrived, ID); then v = S_f,
//     F_f = S_f + Cost/w_f, and, if f is still backlogged, S_f = max(v, F_f)
//     (which is F_f).
//  3. When the queue becomes empty (a busy period ends), v and every F_f go
//     back to 0.
//
// v is therefore the start tag of the last dispatched item: it moves only
// on Pop, never with the clock, and never decreases within a busy period.
// Rule 3 is Goyal's end-of-busy-period rule, v = max F, translated by that
// max: every F_f is at most it, so each tenant's next start tag is v either
// way. Resetting keeps tags small, so float precision never degrades over a
// long run; an epoch counter makes it O(1) rather than O(tenants).
//
// NB: SFQ proper tags every packet on arrival, S = max(v, F of the previous
// packet). Tagging only the head, as here, gives the same tags and the same
// order while nothing is removed and each tenant's items are pushed in
// arrival order: a backlogged tenant's next tag is the
// previous item's finish either way (v never passes a queued start tag), and
// an idle tenant's is max(v, F_f) at the Push either way. The difference is
// Remove: a removed item was never tagged, so a tenant is charged only for
// what it actually dispatched.
//
// # Fairness
//
// SFQ's fairness bound (Goyal et al., Theorem 1) holds for the dispatch
// sequence: over any run of consecutive Pops during which tenants f and m
// are both backlogged, with W the tokens each had dispatched in the run and
// Cmax the largest Cost each had dispatched,
//
//	|W_f/w_f − W_m/w_m| <= Cmax_f/w_f + Cmax_m/w_m
//
// so under backlog the tokens dispatched converge to the weights' ratio.
// TestWFQFairnessBound checks it.
//
// # Why SFQ
//
// Virtual-finish WFQ (PGPS) advances v at rate C/Σw of the backlogged
// weights, which needs the server's capacity C in tokens per second; a
// continuous batcher has no fixed C, and this queue sees only dispatches.
// SFQ's v needs nothing but the dispatch sequence. Self-clocked fair
// queueing needs no C either, but it orders by finish tag, so a tenant's
// long prompt waits behind short ones of tenants that are no further ahead;
// SFQ dispatches on start tags, whatever the size, and charges the tenant
// afterwards, with the same bound. The Virtual Token Counter of Sheng et al.
// (OSDI 2024), for fair LLM serving, is in effect the same rule.
//
// Determinism: tags are computed as S + Cost/w, a division and an addition,
// so no platform can fuse them into an FMA and round differently.
type wfq struct {
	weights []float64 // Config.Weights; a tenant past the end weighs 1
	tenants []*tenant // indexed by Item.Tenant, created on first sight
	active  []*tenant // min-heap of backlogged tenants by (start, head)
	v       float64   // virtual time, in tokens per unit weight
	epoch   uint64    // busy periods ended so far (rule 3)
	n       int       // queued items, all tenants
}

type tenant struct {
	h      itemHeap // queued items in arrival order (entry.k = 0)
	start  float64  // S_f; meaningful while backlogged
	finish float64  // F_f; meaningful when epoch matches the queue's
	epoch  uint64   // the queue's epoch when finish was set
	weight float64
	apos   int // 1 + index in active, 0 when not backlogged
}

var _ Queue = (*wfq)(nil)

func newWFQ(weights []float64) *wfq {
	return &wfq{weights: append([]float64(nil), weights...)}
}

// tenant returns tenant i's state, creating it (and any below it) on first
// sight. Tenants are dense indices, so this allocates only while new tenants
// appear.
func (q *wfq) tenant(i int) *tenant {
	for len(q.tenants) <= i {
		w := 1.0
		if j := len(q.tenants); j < len(q.weights) {
			w = q.weights[j]
		}
		q.tenants = append(q.tenants, &tenant{weight: w})
	}
	return q.tenants[i]
}

func (q *wfq) Push(_ time.Duration, it *Item) {
	if it.pos != 0 {
		panic("dispatch: Push of an item that is already queued")
	}
	if it.Tenant < 0 {
		panic("dispatch: wfq Push of an item with a negative Tenant")
	}
	if !(it.Cost >= 0) || math.IsInf(it.Cost, 1) {
		panic("dispatch: wfq Push of an item whose Cost is not a finite number >= 0")
	}
	t := q.tenant(it.Tenant)
	t.h.push(entry{arr: it.Arrived, id: it.ID, it: it})
	q.n++
	switch {
	case len(t.h) == 1: // rule 1: t becomes backlogged
		if t.epoch != q.epoch {
			t.finish, t.epoch = 0, q.epoch
		}
		t.start = max(q.v, t.finish)
		q.activePush(t)
	case it.pos == 1: // a new, earlier head: only the tie-break key fell
		q.activeUp(t.apos - 1)
	}
}

func (q *wfq) Pop(time.Duration) *Item {
	if q.n == 0 {
		return nil
	}
	t := q.active[0]
	it := t.h.removeAt(0)
	q.n--
	// Rule 2.
	q.v = t.start
	t.finish = t.start + it.Cost/t.weight
	if len(t.h) > 0 {
		t.start = max(q.v, t.finish)
		q.activeDown(0)
	} else {
		q.activeRemove(0)
	}
	q.endBusyPeriod()
	return it
}

func (q *wfq) Peek(time.Duration) *Item {
	if q.n == 0 {
		return nil
	}
	return q.active[0].h[0].it
}

func (q *wfq) Remove(it *Item) bool {
	if it == nil || it.Tenant < 0 || it.Tenant >= len(q.tenants) {
		return false
	}
	t := q.tenants[it.Tenant]
	if !t.h.has(it) {
		return false
	}
	head := t.h[0].it
	t.h.removeAt(it.pos - 1)
	q.n--
	switch {
	case len(t.h) == 0: // t is no longer backlogged; F_f stands
		q.activeRemove(t.apos - 1)
	case t.h[0].it != head: // same start tag, later head: the key rose
		q.activeDown(t.apos - 1)
	}
	q.endBusyPeriod()
	return true
}

func (q *wfq) Len() int { return q.n }

// endBusyPeriod applies rule 3 if the queue is empty.
func (q *wfq) endBusyPeriod() {
	if q.n == 0 {
		q.v = 0
		q.epoch++
	}
}

// The active heap: backlogged tenants by (start, head's Arrived, head's ID).

func tenantBefore(a, b *tenant) bool {
	if a.start != b.start {
		return a.start < b.start
	}
	return a.h[0].before(&b.h[0])
}

func (q *wfq) activePush(t *tenant) {
	q.active = append(q.active, t)
	q.activeUp(len(q.active) - 1)
}

func (q *wfq) activeRemove(i int) {
	a := q.active
	t := a[i]
	n := len(a) - 1
	if i != n {
		a[i] = a[n]
		a[n] = nil
		q.active = a[:n]
		if !q.activeUp(i) {
			q.activeDown(i)
		}
	} else {
		a[n] = nil
		q.active = a[:n]
	}
	t.apos = 0
}

func (q *wfq) activeUp(i int) bool {
	a := q.active
	t := a[i]
	start := i
	for i > 0 {
		p := (i - 1) / 2
		if !tenantBefore(t, a[p]) {
			break
		}
		a[i] = a[p]
		a[i].apos = i + 1
		i = p
	}
	a[i] = t
	t.apos = i + 1
	return i != start
}

func (q *wfq) activeDown(i int) {
	a := q.active
	n := len(a)
	t := a[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && tenantBefore(a[r], a[c]) {
			c = r
		}
		if !tenantBefore(a[c], t) {
			break
		}
		a[i] = a[c]
		a[i].apos = i + 1
		i = c
	}
	a[i] = t
	t.apos = i + 1
}
