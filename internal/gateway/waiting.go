package gateway

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Requests waiting for their first token: every request from its arrival
// (once it has a class and a model: past authentication and validation)
// until its answer's first bytes reach the gateway or it ends, wherever it
// is meanwhile — deferred by the degradation ladder or the core, queued in
// the core, dispatched and waiting for its backend, backing off before a
// retry. The twin counts the same requests (twin/waiting.go), so
// fleetdrill_oldest_waiting_seconds and fleetdrill_waiting_requests, and
// the console's p99 that counts the waiting at their age, read alike live
// and simulated.
//
// A non-streamed answer's first bytes come with the whole answer: such a
// request waits until it is answered, its generation included (the twin,
// which sees the engine, stops at its first token).

// awaiting tracks the requests waiting for their first token, by request
// ID. Its own lock: the proxy marks a first token without the core's.
type awaiting struct {
	mu   sync.Mutex
	reqs map[uint64]awaited
}

type awaited struct {
	class, tenant int
	arrived       time.Duration // model time
}

// add starts tracking request id of class and tenant (the scenario's
// indices), arrived at model time arrived.
func (a *awaiting) add(id uint64, class, tenant int, arrived time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reqs == nil {
		a.reqs = map[uint64]awaited{}
	}
	a.reqs[id] = awaited{class, tenant, arrived}
}

// done stops tracking request id: its first token came, or it ended.
func (a *awaiting) done(id uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.reqs, id)
}

// ages returns, for each of classes, the ages at model time now of its
// waiting requests, oldest first.
func (a *awaiting) ages(now time.Duration, classes int) [][]time.Duration {
	out := make([][]time.Duration, classes)
	a.mu.Lock()
	for _, w := range a.reqs {
		out[w.class] = append(out[w.class], max(now-w.arrived, 0))
	}
	a.mu.Unlock()
	for _, c := range out {
		slices.SortFunc(c, func(x, y time.Duration) int { return cmp.Compare(y, x) })
	}
	return out
}

// tenants returns, for each of tenants, how many of its requests wait and
// the oldest's age at model time now.
func (a *awaiting) tenants(now time.Duration, tenants int) (n []int, oldest []time.Duration) {
	n, oldest = make([]int, tenants), make([]time.Duration, tenants)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.reqs {
		if w.tenant >= 0 && w.tenant < tenants {
			n[w.tenant]++
			oldest[w.tenant] = max(oldest[w.tenant], now-w.arrived)
		}
	}
	return n, oldest
}

// TenantWaiting is one tenant's requests waiting for their first token now.
type TenantWaiting struct {
	Tenant string // the scenario's alias
	Count  int
	Oldest time.Duration // model time; 0 when none waits
}

// TenantsWaiting returns, for every tenant of the scenario in its order,
// its requests waiting for their first token, as Waiting does by class:
// the live console's tenant pane shows a tenant whose requests an outage
// holds before any of them ends.
func (g *Gateway) TenantsWaiting() []TenantWaiting {
	n, oldest := g.first.tenants(g.clk.now(), len(g.sc.Tenants))
	out := make([]TenantWaiting, len(n))
	for i := range n {
		out[i] = TenantWaiting{Tenant: g.sc.Tenants[i].Name, Count: n[i], Oldest: oldest[i]}
	}
	return out
}

// ClassWaiting is one class's requests waiting for their first token now.
type ClassWaiting struct {
	Class  string
	Count  int
	Oldest time.Duration   // the oldest's age, model time; 0 when none waits
	Ages   []time.Duration // every one's age, model time, oldest first
}

// Waiting returns, for every class of the scenario in its order, the
// requests that arrived and have no first token yet (queued, deferred,
// dispatched and waiting for their backend, or retrying): what
// fleetdrill_oldest_waiting_seconds and fleetdrill_waiting_requests
// export, with every age, for a p99 that counts them
// (twin.Recorder.AddWaiting).
func (g *Gateway) Waiting() []ClassWaiting {
	ages := g.first.ages(g.clk.now(), len(g.sc.Classes))
	out := make([]ClassWaiting, len(ages))
	for ci, a := range ages {
		out[ci] = ClassWaiting{Class: g.sc.Classes[ci].Name, Count: len(a), Ages: a}
		if len(a) > 0 {
			out[ci].Oldest = a[0]
		}
	}
	return out
}
