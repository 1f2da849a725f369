package kvlink

// Queue is a decode replica's pulls waiting for KV room, in the order their
// prompts were computed: the decode side reserves a prompt's KV before it
// reads it (vLLM's pull connector allocates the blocks first), and a pull
// that does not fit waits, with those behind it: the replica's KV is taken
// in order. It is the decode server's behaviour, written once for the twin
// (twin/disagg.go) and the emulated node (internal/node), each of which
// holds its replica's engine.
type Queue struct {
	q     []uint64
	taken []uint64
}

// Push adds pull id at the back.
func (q *Queue) Push(id uint64) { q.q = append(q.q, id) }

// Len is the number of pulls waiting, stale ones included.
func (q *Queue) Len() int { return len(q.q) }

// Take reserves, in order, the KV of the pulls at the front that fit
// (hold reserves pull id's KV and reports whether it fit: engine.TryHold
// of its prompt),
// dropping those stale reports gone (stopped while they waited), and stops
// at the first that does not fit. It returns the pulls taken, in order; the
// slice is the queue's, valid until the next call.
func (q *Queue) Take(hold, stale func(id uint64) bool) []uint64 {
	q.taken = q.taken[:0]
	n := 0
	for ; n < len(q.q); n++ {
		id := q.q[n]
		if stale(id) {
			continue
		}
		if !hold(id) {
			break
		}
		q.taken = append(q.taken, id)
	}
	rest := copy(q.q, q.q[n:])
	clear(q.q[rest:])
	q.q = q.q[:rest]
	return q.taken
}
