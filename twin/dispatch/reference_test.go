package dispatch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// ref is the slow, obvious reference every policy is compared against: a
// slice of the live items and a linear scan that applies each policy's
// definition at now. Priority is compared through the effective priority at
// now, not through the time-invariant key keyed.go proves equivalent; wfq
// replays the rules written in wfq.go with per-tenant slices, scans for
// heads, and Goyal's literal end-of-busy-period rule (v = max F) in place of
// the reset.
type ref struct {
	cfg  Config
	live []*Item

	// wfq
	v      float64
	start  []float64 // S_f, meaningful while f has live items
	finish []float64 // F_f
}

func (r *ref) weight(t int) float64 {
	if t < len(r.cfg.Weights) {
		return r.cfg.Weights[t]
	}
	return 1
}

// arrival is fifo order and every policy's tie-break.
func arrival(a, b *Item) bool {
	if a.Arrived != b.Arrived {
		return a.Arrived < b.Arrived
	}
	return a.ID < b.ID
}

// before reports whether a goes before b at now (fifo, priority, edf).
func (r *ref) before(now time.Duration, a, b *Item) bool {
	switch r.cfg.Policy {
	case Priority:
		g := r.cfg.Aging
		if g == 0 {
			if a.Priority != b.Priority {
				return a.Priority > b.Priority
			}
			break
		}
		// Effective priority P + (now − A)/G, multiplied through by G > 0
		// to stay exact: P·G + (now − A).
		ea := time.Duration(a.Priority)*g + (now - a.Arrived)
		eb := time.Duration(b.Priority)*g + (now - b.Arrived)
		if ea != eb {
			return ea > eb
		}
	case EDF:
		switch {
		case a.Deadline != 0 && b.Deadline == 0:
			return true
		case a.Deadline == 0 && b.Deadline != 0:
			return false
		case a.Deadline != b.Deadline:
			return a.Deadline < b.Deadline
		}
	}
	return arrival(a, b)
}

func (r *ref) backlogged(t int) bool {
	return slices.ContainsFunc(r.live, func(it *Item) bool { return it.Tenant == t })
}

// heads returns each tenant's first item in arrival order, nil if none.
func (r *ref) heads() []*Item {
	h := make([]*Item, len(r.start))
	for _, it := range r.live {
		if h[it.Tenant] == nil || arrival(it, h[it.Tenant]) {
			h[it.Tenant] = it
		}
	}
	return h
}

func (r *ref) push(it *Item) {
	if r.cfg.Policy == WFQ {
		for len(r.start) <= it.Tenant {
			r.start = append(r.start, 0)
			r.finish = append(r.finish, 0)
		}
		if !r.backlogged(it.Tenant) {
			r.start[it.Tenant] = max(r.v, r.finish[it.Tenant])
		}
	}
	r.live = append(r.live, it)
}

// next returns the index in live of the item to dispatch, -1 when empty.
func (r *ref) next(now time.Duration) int {
	best := -1
	if r.cfg.Policy != WFQ {
		for i, it := range r.live {
			if best < 0 || r.before(now, it, r.live[best]) {
				best = i
			}
		}
		return best
	}
	var bt *Item
	for t, h := range r.heads() {
		if h == nil {
			continue
		}
		if bt == nil || r.start[t] < r.start[bt.Tenant] ||
			r.start[t] == r.start[bt.Tenant] && arrival(h, bt) {
			bt = h
		}
	}
	if bt != nil {
		best = slices.Index(r.live, bt)
	}
	return best
}

func (r *ref) pop(now time.Duration) *Item {
	i := r.next(now)
	if i < 0 {
		return nil
	}
	it := r.live[i]
	r.live = slices.Delete(r.live, i, i+1)
	if r.cfg.Policy == WFQ {
		t := it.Tenant
		r.v = r.start[t]
		r.finish[t] = r.start[t] + it.Cost/r.weight(t)
		if r.backlogged(t) {
			r.start[t] = max(r.v, r.finish[t])
		}
		r.endBusyPeriod()
	}
	return it
}

func (r *ref) remove(it *Item) bool {
	i := slices.Index(r.live, it)
	if i < 0 {
		return false
	}
	r.live = slices.Delete(r.live, i, i+1)
	if r.cfg.Policy == WFQ {
		r.endBusyPeriod()
	}
	return true
}

// endBusyPeriod is Goyal's rule as written: when the queue empties, v
// becomes the largest finish tag.
func (r *ref) endBusyPeriod() {
	if len(r.live) == 0 {
		r.v = max(r.v, slices.Max(r.finish))
	}
}

// checkInvariants verifies the heaps' shape and every Item's recorded
// position, independently of the reference.
func checkInvariants(t *testing.T, q Queue) {
	t.Helper()
	checkHeap := func(tenant int, h itemHeap) { // tenant -1: the keyed heap
		for i := range h {
			if h[i].it.pos != i+1 {
				t.Fatalf("tenant %d, heap[%d]: item %d has pos %d, want %d", tenant, i, h[i].id, h[i].it.pos, i+1)
			}
			if p := (i - 1) / 2; i > 0 && h[i].before(&h[p]) {
				t.Fatalf("tenant %d, heap[%d] (item %d) is before its parent [%d] (item %d)", tenant, i, h[i].id, p, h[p].id)
			}
		}
	}
	switch q := q.(type) {
	case *keyed:
		checkHeap(-1, q.h)
	case *wfq:
		n := 0
		for ti, tn := range q.tenants {
			checkHeap(ti, tn.h)
			n += len(tn.h)
			if (len(tn.h) > 0) != (tn.apos != 0) {
				t.Fatalf("tenant %d: %d queued, apos %d", ti, len(tn.h), tn.apos)
			}
			if tn.apos != 0 && q.active[tn.apos-1] != tn {
				t.Fatalf("tenant %d: apos %d names another tenant", ti, tn.apos)
			}
		}
		if n != q.n {
			t.Fatalf("tenants hold %d items, n = %d", n, q.n)
		}
		for i := 1; i < len(q.active); i++ {
			if tenantBefore(q.active[i], q.active[(i-1)/2]) {
				t.Fatalf("active[%d] is before its parent", i)
			}
		}
	}
}

// referenceConfigs are the configurations TestAgainstReference runs. The
// generator's times are whole milliseconds, so agings of 1ms and 3ms make
// effective priorities tie often. wfq weights are powers of two and costs
// whole tokens, so every tag is exact in float64 and the reference's
// untranslated tags order exactly as the queue's reset ones do.
var referenceConfigs = []struct {
	name string
	cfg  Config
}{
	{"fifo", Config{Policy: FIFO}},
	{"priority/strict", Config{Policy: Priority}},
	{"priority/aging=1ms", Config{Policy: Priority, Aging: time.Millisecond}},
	{"priority/aging=3ms", Config{Policy: Priority, Aging: 3 * time.Millisecond}},
	{"priority/aging=1h", Config{Policy: Priority, Aging: time.Hour}},
	{"edf", Config{Policy: EDF}},
	{"wfq/equal", Config{Policy: WFQ}},
	{"wfq/weighted", Config{Policy: WFQ, Weights: []float64{1, 2, 0.5, 4}}},
}

const referenceSeeds = 16

// TestAgainstReference drives each policy and the reference with the same
// random sequence of Push, Pop, Peek and Remove (of queued and of
// non-queued items) at random, non-decreasing times, and requires the same
// answer to every call.
func TestAgainstReference(t *testing.T) {
	seeds := uint64(referenceSeeds)
	if testing.Short() {
		seeds = 4
	}
	for _, c := range referenceConfigs {
		for seed := range seeds {
			name := fmt.Sprintf("%s/seed=%d", c.name, seed)
			t.Run(name, func(t *testing.T) {
				runAgainstReference(t, c.cfg, seed, 5000,
					fmt.Sprintf("rerun: go test ./twin/dispatch -run 'TestAgainstReference/%s$'", name))
			})
		}
	}
}

func runAgainstReference(t *testing.T, cfg Config, seed uint64, ops int, rerun string) {
	q, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &ref{cfg: cfg}
	rng := rand.New(rand.NewPCG(seed, 0xd15a7c4))
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	var (
		now      time.Duration
		nextID   uint64
		gone     []*Item // popped or removed: not queued
		other    = &Item{ID: 1 << 62}
		otherQ   Queue
		pushing  bool
		phaseEnd int
	)
	// An item queued in another queue must never be removable here.
	otherQ, _ = New(cfg)
	otherQ.Push(0, other)
	id := func(it *Item) any {
		if it == nil {
			return "nil"
		}
		return it.ID
	}
	for op := range ops {
		now += ms(rng.IntN(3))
		if op == phaseEnd {
			// Alternate filling and draining for random stretches, so the
			// queue both grows to hundreds and empties now and then.
			pushing = !pushing
			phaseEnd += 50 + rng.IntN(600)
		}
		pPush := 35
		if pushing {
			pPush = 65
		}
		where := func() string { return fmt.Sprintf("seed %d, op %d, now %v (%s)", seed, op, now, rerun) }
		switch x := rng.IntN(100); {
		case x < pPush:
			nextID++
			it := &Item{
				// Odd multiplier: unique IDs whose order differs from push order.
				ID:       nextID * 0x9e3779b97f4a7c15,
				Tenant:   rng.IntN(6),
				Priority: rng.IntN(5) - 1,
				Arrived:  now - ms(rng.IntN(6)),
				Cost:     float64(rng.IntN(1000)),
			}
			if rng.IntN(3) > 0 {
				it.Deadline = now + ms(rng.IntN(25)-3)
				if it.Deadline == 0 {
					it.Deadline = ms(1)
				}
			}
			q.Push(now, it)
			r.push(it)
		case x < pPush+5:
			if got, want := q.Peek(now), r.next(now); want < 0 && got != nil || want >= 0 && got != r.live[want] {
				var w *Item
				if want >= 0 {
					w = r.live[want]
				}
				t.Fatalf("%s: Peek = %v, want %v", where(), id(got), id(w))
			}
		case x < 90:
			got, want := q.Pop(now), r.pop(now)
			if got != want {
				t.Fatalf("%s: Pop = %v, want %v", where(), id(got), id(want))
			}
			if got != nil {
				gone = append(gone, got)
			}
		default:
			var it *Item
			switch y := rng.IntN(10); {
			case y < 6 && len(r.live) > 0:
				it = r.live[rng.IntN(len(r.live))]
			case y < 8 && len(gone) > 0:
				it = gone[rng.IntN(len(gone))]
			case y < 9:
				it = other
			default:
				it = &Item{ID: 1 << 63, Tenant: rng.IntN(8)}
			}
			got, want := q.Remove(it), r.remove(it)
			if got != want {
				t.Fatalf("%s: Remove(%d) = %v, want %v", where(), it.ID, got, want)
			}
			if got {
				gone = append(gone, it)
			}
		}
		if q.Len() != len(r.live) {
			t.Fatalf("%s: Len = %d, want %d", where(), q.Len(), len(r.live))
		}
		if q.Len() < 32 || op%7 == 0 { // O(n): sampled, to keep -race fast
			checkInvariants(t, q)
		}
	}
	if otherQ.Len() != 1 || otherQ.Pop(now) != other {
		t.Fatalf("seed %d: the other queue lost its item (%s)", seed, rerun)
	}
	// Drain: the rest must come out in the same order too.
	for q.Len() > 0 {
		if got, want := q.Pop(now), r.pop(now); got != want {
			t.Fatalf("seed %d, drain: Pop = %v, want %v (%s)", seed, id(got), id(want), rerun)
		}
	}
}
