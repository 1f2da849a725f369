package engine

// BlockTokens is the number of prompt tokens one prefix-block hash covers
// (Mooncake's hash_ids use 512).
const BlockTokens = 512

// prefixCache is a replica's cache of prompt blocks, least recently used
// first out. It models vLLM's automatic prefix caching: blocks stay cached
// in KV memory that no running sequence holds, and a new request whose
// leading blocks are cached skips their prefill. Its capacity is therefore
// not fixed: it is the KV the running sequences leave free, so cache and
// batch compete for the same memory, as they do on a real engine.
//
// Nodes live in a slice and link by index, so the cache allocates only when
// it grows past its largest size so far.
type prefixCache struct {
	index      map[uint64]int32 // block hash → node
	nodes      []lruNode
	free       []int32
	head, tail int32 // most and least recently used; -1 when empty
	n          int

	// Counters, for reports: blocks looked up at admission, and hits.
	Lookups, Hits uint64
}

type lruNode struct {
	hash       uint64
	prev, next int32
}

func newPrefixCache() *prefixCache {
	return &prefixCache{index: map[uint64]int32{}, head: -1, tail: -1}
}

// match returns how many leading blocks of blocks are cached. Only a
// leading run counts: a block's KV depends on every token before it.
func (c *prefixCache) match(blocks []uint64) int {
	for i, h := range blocks {
		if _, ok := c.index[h]; !ok {
			return i
		}
	}
	return len(blocks)
}

// insert makes every block most recently used, adding the missing ones.
// It walks the prompt backwards so that its first block ends up most
// recent: eviction then takes a prompt's tail before its head, which keeps
// the leading run that later requests can actually hit (vLLM's evictor
// likewise evicts the longest prefixes first among equally old blocks).
func (c *prefixCache) insert(blocks []uint64) {
	for k := len(blocks) - 1; k >= 0; k-- {
		h := blocks[k]
		if i, ok := c.index[h]; ok {
			c.unlink(i)
			c.pushFront(i)
			continue
		}
		var i int32
		if n := len(c.free); n > 0 {
			i = c.free[n-1]
			c.free = c.free[:n-1]
		} else {
			i = int32(len(c.nodes))
			c.nodes = append(c.nodes, lruNode{})
		}
		c.nodes[i].hash = h
		c.index[h] = i
		c.pushFront(i)
		c.n++
	}
}

// shrink evicts least recently used blocks until at most limit remain.
func (c *prefixCache) shrink(limit int) {
	for c.n > limit && c.tail >= 0 {
		i := c.tail
		c.unlink(i)
		delete(c.index, c.nodes[i].hash)
		c.free = append(c.free, i)
		c.n--
	}
}

func (c *prefixCache) pushFront(i int32) {
	c.nodes[i].prev, c.nodes[i].next = -1, c.head
	if c.head >= 0 {
		c.nodes[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}

func (c *prefixCache) unlink(i int32) {
	n := &c.nodes[i]
	if n.prev >= 0 {
		c.nodes[n.prev].next = n.next
	} else {
		c.head = n.next
	}
	if n.next >= 0 {
		c.nodes[n.next].prev = n.prev
	} else {
		c.tail = n.prev
	}
}
