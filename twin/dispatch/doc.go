// Package dispatch owns the order in which a model's waiting requests leave
// its queue: the dispatch policies of the scheduler core, behind one small
// interface, [Queue].
//
//	fifo      arrival order: Arrived, then ID
//	priority  highest Priority + (now − Arrived)/Aging first; Aging 0 is
//	          strict priority, FIFO within a class
//	wfq       start-time fair queueing across tenants on tokens (Cost),
//	          shares set by Config.Weights
//	edf       earliest Deadline first; items without one after all that have
//	          one, in arrival order
//
// Every policy breaks its ties by Arrived, then ID, lower first, so the order
// is total and the same on every run.
//
// # Usage
//
//	q, err := dispatch.New(dispatch.Config{Policy: dispatch.Priority, Aging: 30 * time.Second})
//	it := &dispatch.Item{ID: 7, Priority: 2, Arrived: now}
//	q.Push(now, it)
//	q.Remove(it)              // its deadline expired: O(log n), false if gone
//	next := q.Pop(now)        // nil when empty; reuse a popped Item freely
//
// # Rules
//
// The package is pure: time comes in as virtual time (now, Item.Arrived,
// Item.Deadline), and there is no clock, no randomness, no goroutine, no
// I/O and no map. It must not import sim or any other fleetdrill package;
// twin/sched stands on it. Queues are not safe for concurrent use.
//
// Every operation is O(log n) (wfq: O(log n + log tenants)); none allocates
// once the queue has reached its largest size and, for wfq, seen its
// tenants. Items are the caller's: a queue stores their pointers and keeps
// their heap position in an unexported field, which is what makes Remove
// O(log n) and reusing a popped Item free.
//
// # Where to start reading
//
// dispatch.go has the public surface; heap.go the index-tracked heap every
// policy stands on; keyed.go fifo, priority and edf, with the proof that
// aging needs no re-keying; wfq.go the fair queue, its rules and its
// fairness bound. reference_test.go holds the slow, obvious reference every
// policy is compared against on random operation sequences; behaviour_test.go
// the tests of what each policy is for; bench_test.go the benchmarks.
package dispatch
