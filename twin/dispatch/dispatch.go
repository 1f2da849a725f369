package dispatch

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// The policies New accepts, in the order Policies lists them.
const (
	FIFO     = "fifo"     // arrival order
	Priority = "priority" // class priority with linear aging
	WFQ      = "wfq"      // start-time fair queueing across tenants, on tokens
	EDF      = "edf"      // earliest deadline first
)

// Policies returns the names New accepts, in a fixed order.
func Policies() []string { return []string{FIFO, Priority, WFQ, EDF} }

// Item is one waiting request. The caller owns it: it allocates it (or reuses
// one it got back from Pop or Remove), sets the exported fields, and pushes
// it. A queue keeps only the pointer, so a steady stream of reused Items
// costs no allocation.
//
// NB: the exported fields must not change while the Item is queued; a queue
// reads them at Push (and wfq reads Cost and Tenant at Pop and Remove). An
// Item is in at most one queue at a time; Push panics otherwise.
type Item struct {
	// ID identifies the request. IDs should be unique: ID is the last
	// tie-breaker, lower first, after Arrived. With duplicate IDs the order
	// among exact ties is still deterministic but unspecified.
	ID uint64
	// Tenant is a dense tenant index, 0..T-1; only wfq reads it. The wfq
	// queue keeps per-tenant state in a slice indexed by it, so it must be
	// small and must not be negative.
	Tenant int
	// Priority is the class priority, higher first; only priority reads it.
	Priority int
	// Arrived is when the request entered the queue, in virtual time. Push
	// does not set it: the caller does, usually to now, or to the original
	// arrival when it requeues a preempted request.
	Arrived time.Duration
	// Deadline is the absolute virtual time by which the request should be
	// dispatched; 0 means none (and so does math.MaxInt64). Only edf reads
	// it. No queue drops late items: the caller expires them with Remove.
	Deadline time.Duration
	// Cost is what the request charges its tenant in wfq, in tokens (input
	// plus expected output); it must be finite and >= 0. Only wfq reads it.
	Cost float64

	// pos is 1 + the Item's index in the heap that holds it, 0 when it is
	// not queued. Storing it off by one makes the zero Item "not queued".
	pos int
}

// Queue is one model's waiting queue under one dispatch policy. It is not
// safe for concurrent use; the scheduler core owns it.
//
// Every method that orders takes now, the current virtual time, so that a
// policy whose order depends on the clock fits behind the interface. The
// four policies here are time-invariant (see keyed.go and wfq.go): their
// order changes only when items are pushed, popped or removed, so they
// ignore now, and every operation is O(log n) with no re-keying as time
// passes.
type Queue interface {
	// Push queues it. It panics if it is already queued (here or in any
	// other queue), and wfq panics on a negative Tenant or a Cost that is
	// negative, infinite or NaN.
	Push(now time.Duration, it *Item)
	// Pop removes and returns the item to dispatch next, nil when empty.
	Pop(now time.Duration) *Item
	// Peek returns what Pop would return, without removing it.
	Peek(now time.Duration) *Item
	// Remove takes it out of the queue (a deadline expired, the client went
	// away) and reports whether it was queued here. Removing an item that
	// is not in this queue, nil included, returns false and changes
	// nothing.
	Remove(it *Item) bool
	// Len is the number of queued items.
	Len() int
}

// Config selects and tunes a policy. Its zero value is invalid: the policy
// must be named.
type Config struct {
	// Policy is one of Policies().
	Policy string
	// Aging is how long an item must wait to gain one class of priority
	// (priority only): its effective priority is
	// Priority + (now − Arrived)/Aging. 0 means strict priority, FIFO
	// within a class.
	Aging time.Duration
	// Weights are the tenants' shares (wfq only), indexed by Item.Tenant.
	// A tenant past the end of the slice weighs 1. Each weight must be
	// finite and > 0.
	Weights []float64
}

// New returns an empty queue for cfg. It reports every problem with cfg at
// once, one "field: got X, want Y" line each (errors.Join), so a loader can
// prefix its own file and field path.
func New(cfg Config) (Queue, error) {
	var errs []error
	switch cfg.Policy {
	case FIFO, Priority, WFQ, EDF:
	default:
		errs = append(errs, fmt.Errorf("policy: got %q, want one of %s", cfg.Policy, strings.Join(Policies(), ", ")))
	}
	switch {
	case cfg.Aging < 0:
		errs = append(errs, fmt.Errorf("aging: got %v, want >= 0", cfg.Aging))
	case cfg.Aging != 0 && cfg.Policy != Priority:
		errs = append(errs, fmt.Errorf("aging: got %v, want 0 for policy %q (only %s ages)", cfg.Aging, cfg.Policy, Priority))
	}
	if len(cfg.Weights) != 0 && cfg.Policy != WFQ {
		errs = append(errs, fmt.Errorf("weights: got %d, want none for policy %q (only %s weighs tenants)", len(cfg.Weights), cfg.Policy, WFQ))
	}
	for i, w := range cfg.Weights {
		if !(w > 0) || math.IsInf(w, 1) {
			errs = append(errs, fmt.Errorf("weights[%d]: got %v, want a finite number > 0", i, w))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	switch cfg.Policy {
	case WFQ:
		return newWFQ(cfg.Weights), nil
	case Priority:
		return &keyed{policy: policyPriority, aging: cfg.Aging}, nil
	case EDF:
		return &keyed{policy: policyEDF}, nil
	default:
		return &keyed{policy: policyFIFO}, nil
	}
}
