package dispatch

import "time"

// entry is one queued Item with its ordering key copied in, so that sifting
// compares contiguous memory and dereferences an Item only to update its
// position. The order is (k, arr, id), smallest first; what k means is up to
// the policy.
type entry struct {
	k   int64         // policy key, smaller first
	arr time.Duration // Item.Arrived
	id  uint64        // Item.ID
	it  *Item
}

func (a *entry) before(b *entry) bool {
	if a.k != b.k {
		return a.k < b.k
	}
	if a.arr != b.arr {
		return a.arr < b.arr
	}
	return a.id < b.id
}

// itemHeap is a binary min-heap of entries that keeps each Item's pos equal
// to 1 + its index, so an Item can be removed in O(log n) from its pointer.
// It is hand-written rather than built on container/heap: that package's
// interface calls cost more than the comparisons here. A 4-ary heap was no
// faster at n=1000 and 1.2–1.6x slower at n=100000 (BenchmarkPushPop): the
// extra comparisons per level cost more than the halved depth saves.
//
// The backing array grows by append and never shrinks, and vacated slots are
// cleared so it does not keep popped Items alive: in steady state no
// operation allocates.
type itemHeap []entry

func (h *itemHeap) push(e entry) {
	*h = append(*h, e)
	h.up(len(*h) - 1)
}

// has reports whether it is in h (and not merely claiming a position that
// another heap gave it).
func (h itemHeap) has(it *Item) bool {
	i := it.pos - 1
	return i >= 0 && i < len(h) && h[i].it == it
}

// removeAt removes and returns the Item at index i, marking it not queued.
func (h *itemHeap) removeAt(i int) *Item {
	a := *h
	it := a[i].it
	n := len(a) - 1
	if i != n {
		a[i] = a[n]
		a[n] = entry{}
		a = a[:n]
		if !a.up(i) {
			a.down(i)
		}
	} else {
		a[n] = entry{}
		a = a[:n]
	}
	*h = a
	it.pos = 0
	return it
}

// up sifts the entry at i towards the root and reports whether it moved.
func (h itemHeap) up(i int) bool {
	e := h[i]
	start := i
	for i > 0 {
		p := (i - 1) / 2
		if !e.before(&h[p]) {
			break
		}
		h[i] = h[p]
		h[i].it.pos = i + 1
		i = p
	}
	h[i] = e
	e.it.pos = i + 1
	return i != start
}

// down sifts the entry at i towards the leaves.
func (h itemHeap) down(i int) {
	n := len(h)
	e := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].before(&h[c]) {
			c = r
		}
		if !h[c].before(&e) {
			break
		}
		h[i] = h[c]
		h[i].it.pos = i + 1
		i = c
	}
	h[i] = e
	e.it.pos = i + 1
}
