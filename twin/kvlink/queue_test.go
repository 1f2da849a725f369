package kvlink

import (
	"slices"
	"testing"
)

// A pull that does not fit holds back those behind it, even one that
// would fit; a stale pull is dropped without reserving anything.
func TestQueueTakesInOrder(t *testing.T) {
	free := int64(100)
	need := map[uint64]int64{1: 40, 2: 30, 3: 50, 4: 10}
	hold := func(id uint64) bool {
		n := need[id]
		if n > free {
			return false
		}
		free -= n
		return true
	}
	gone := map[uint64]bool{}
	stale := func(id uint64) bool { return gone[id] }
	var q Queue
	q.Push(1)
	q.Push(2)
	q.Push(3) // 50: does not fit after 1 and 2
	q.Push(4) // 10: would fit, waits behind 3
	if got := q.Take(hold, stale); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("first take: %v, want [1 2]", got)
	}
	if free != 30 || q.Len() != 2 {
		t.Fatalf("free %d, waiting %d; want 30 and 2", free, q.Len())
	}
	gone[3] = true // stopped while it waited: dropped, reserves nothing
	if got := q.Take(hold, stale); !slices.Equal(got, []uint64{4}) {
		t.Fatalf("second take: %v, want [4]", got)
	}
	if free != 20 || q.Len() != 0 {
		t.Fatalf("free %d, waiting %d; want 20 and 0", free, q.Len())
	}
}
