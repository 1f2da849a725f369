package sched

// peerSet keeps, for one model, the replicas whose latency EWMA counts
// towards its peers' median (in routing, MinSamples samples or more), as
// two indexed heaps: lo, a max-heap of the lower half (the lower median at
// its top), and hi, a min-heap of the upper half, len(lo) = len(hi) or one
// more. A replica's sample moves it in O(log n); the median is read in
// O(1). Before it, the median was a sort of every peer's EWMA per model per
// second and at every join: at 32,768 replicas, 38 % of a run's CPU
// (issue 35). It gives the very same value, so nothing simulated changes.
type peerSet struct {
	lo, hi []int32
}

// Where a replica is in its model's peerSet (replicaState.peer).
const (
	peerNone uint8 = iota
	peerLo
	peerHi
)

// lat is replica x's latency EWMA as its peerSet holds it (Core.plat,
// dense: a sift reads 8 bytes per replica, not its state).
func (c *Core) lat(x int32) float64 { return c.plat[x] }

// repeer puts replica r where its outlier state says after a change: in
// its model's peers with its current EWMA, or out of them.
func (c *Core) repeer(r int) {
	rs := &c.replicas[r]
	ps := &c.peers[rs.Model]
	o := &rs.out
	eligible := !o.ejected && o.samples >= c.outlier.MinSamples
	c.plat[r] = o.lat
	switch {
	case rs.peer != peerNone && eligible:
		c.peerUpdate(ps, int32(r))
	case rs.peer != peerNone:
		c.peerRemove(ps, int32(r))
	case eligible:
		c.peerInsert(ps, int32(r))
	}
}

// peerUpdate restores ps's order after member x's EWMA moved: within its
// heap, then across the two when it crossed the other's top (one swap of
// the tops suffices: only x is out of place).
func (c *Core) peerUpdate(ps *peerSet, x int32) {
	which, i := c.replicas[x].peer, int(c.replicas[x].ppos)
	h := *ps.heap(which)
	c.siftUp(h, i, which)
	c.siftDown(h, int(c.replicas[x].ppos), which)
	if len(ps.hi) == 0 || c.lat(ps.lo[0]) <= c.lat(ps.hi[0]) {
		return
	}
	a, b := ps.lo[0], ps.hi[0]
	ps.lo[0], ps.hi[0] = b, a
	c.replicas[b].peer, c.replicas[b].ppos = peerLo, 0
	c.replicas[a].peer, c.replicas[a].ppos = peerHi, 0
	c.siftDown(ps.lo, 0, peerLo)
	c.siftDown(ps.hi, 0, peerHi)
}

// peerMedianOf is the lower median of ps's EWMAs, 0 with fewer than two.
func (c *Core) peerMedianOf(ps *peerSet) float64 {
	if len(ps.lo)+len(ps.hi) < 2 {
		return 0
	}
	return c.lat(ps.lo[0])
}

func (c *Core) peerInsert(ps *peerSet, x int32) {
	if len(ps.lo) == 0 || c.lat(x) <= c.lat(ps.lo[0]) {
		c.heapPush(ps, peerLo, x)
	} else {
		c.heapPush(ps, peerHi, x)
	}
	c.peerBalance(ps)
}

func (c *Core) peerRemove(ps *peerSet, x int32) {
	which := c.replicas[x].peer
	h := ps.heap(which)
	i := c.replicas[x].ppos
	last := len(*h) - 1
	c.peerSwap(*h, int(i), last, which)
	*h = (*h)[:last]
	c.replicas[x].peer = peerNone
	if int(i) < last {
		c.siftDown(*h, int(i), which)
		c.siftUp(*h, int(i), which)
	}
	c.peerBalance(ps)
}

// peerBalance moves a top across so that len(lo) is len(hi) or one more;
// the tops keep max(lo) <= min(hi).
func (c *Core) peerBalance(ps *peerSet) {
	switch {
	case len(ps.lo) > len(ps.hi)+1:
		x := c.heapPop(ps, peerLo)
		c.heapPush(ps, peerHi, x)
	case len(ps.hi) > len(ps.lo):
		x := c.heapPop(ps, peerHi)
		c.heapPush(ps, peerLo, x)
	}
}

func (ps *peerSet) heap(which uint8) *[]int32 {
	if which == peerLo {
		return &ps.lo
	}
	return &ps.hi
}

// above reports whether a belongs above b in heap which: lo keeps the
// largest on top, hi the smallest.
func (c *Core) above(a, b int32, which uint8) bool {
	if which == peerLo {
		return c.lat(a) > c.lat(b)
	}
	return c.lat(a) < c.lat(b)
}

func (c *Core) heapPush(ps *peerSet, which uint8, x int32) {
	h := ps.heap(which)
	*h = append(*h, x)
	c.replicas[x].peer, c.replicas[x].ppos = which, int32(len(*h)-1)
	c.siftUp(*h, len(*h)-1, which)
}

func (c *Core) heapPop(ps *peerSet, which uint8) int32 {
	h := ps.heap(which)
	x := (*h)[0]
	last := len(*h) - 1
	c.peerSwap(*h, 0, last, which)
	*h = (*h)[:last]
	c.replicas[x].peer = peerNone
	c.siftDown(*h, 0, which)
	return x
}

func (c *Core) peerSwap(h []int32, i, j int, which uint8) {
	h[i], h[j] = h[j], h[i]
	c.replicas[h[i]].ppos, c.replicas[h[j]].ppos = int32(i), int32(j)
	c.replicas[h[i]].peer, c.replicas[h[j]].peer = which, which
}

func (c *Core) siftUp(h []int32, i int, which uint8) {
	for i > 0 {
		p := (i - 1) / 2
		if !c.above(h[i], h[p], which) {
			return
		}
		c.peerSwap(h, i, p, which)
		i = p
	}
}

func (c *Core) siftDown(h []int32, i int, which uint8) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if l+1 < n && c.above(h[l+1], h[l], which) {
			m = l + 1
		}
		if !c.above(h[m], h[i], which) {
			return
		}
		c.peerSwap(h, i, m, which)
		i = m
	}
}
