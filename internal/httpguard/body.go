package httpguard

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
)

// Why a body was not read (BodyBudget.Read). The caller answers each in its
// own words: the gateway and the node have their own error bodies.
var (
	// ErrBodyTooLarge: the body is over the size limit (by its
	// Content-Length, or while it was read). Answer 413.
	ErrBodyTooLarge = errors.New("request body too large")
	// ErrBodyBudget: the bodies in flight leave no room for this one.
	// Answer 429 with a Retry-After: room frees up as requests end.
	ErrBodyBudget = errors.New("in-flight body budget full")
	// ErrBodyUnreadable: the client's body broke off (a malformed chunk, a
	// deadline). Answer 400.
	ErrBodyUnreadable = errors.New("request body unreadable")
)

// MemoryHeadroom is what a server needs beyond the request bodies it holds:
// connections, buffers, streams, its own state.
const MemoryHeadroom = 128 << 20

// SoftMemoryLimit is the Go runtime's soft memory limit for a server whose
// in-flight body budget is budget (fleetdrill gateway and fleetdrill node
// set it unless GOMEMLIMIT or --memory-limit says otherwise): the budget
// plus MemoryHeadroom. Without it the garbage collector lets the heap reach
// twice what is live, so a burst of maximum-size bodies would double the
// process's footprint; near the limit it collects sooner instead, trading
// CPU for a bounded resident set.
func SoftMemoryLimit(budget int64) int64 { return budget + MemoryHeadroom }

// BodyBudget reads request bodies within two limits: each at most MaxBody
// bytes, and all held at once at most Budget bytes, so that a burst of
// large bodies cannot take a server's memory. It is safe for concurrent
// use.
type BodyBudget struct {
	maxBody, budget int64
	inflight        atomic.Int64 // bytes reserved now
}

// NewBodyBudget returns a budget of budget bytes for bodies of at most
// maxBody bytes each (both > 0; a budget below maxBody is raised to it, so
// that one maximum-size body always fits).
func NewBodyBudget(maxBody, budget int64) *BodyBudget {
	return &BodyBudget{maxBody: maxBody, budget: max(budget, maxBody)}
}

// MaxBody is the largest body Read accepts.
func (b *BodyBudget) MaxBody() int64 { return b.maxBody }

// Budget is the most body bytes held at once.
func (b *BodyBudget) Budget() int64 { return b.budget }

// InFlight is the body bytes reserved now.
func (b *BodyBudget) InFlight() int64 { return b.inflight.Load() }

// reserve takes n bytes of the budget; false when they do not fit.
func (b *BodyBudget) reserve(n int64) bool {
	for {
		cur := b.inflight.Load()
		if cur+n > b.budget {
			return false
		}
		if b.inflight.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// Read reads r's body within the limits: ErrBodyTooLarge beyond MaxBody
// (from Content-Length before reading, and while reading: the server then
// closes the connection), ErrBodyBudget when the budget has no room for it
// (reserved before reading: its Content-Length, or MaxBody when unknown),
// ErrBodyUnreadable when the body broke off. On success the caller must
// call release when it no longer holds the body (the request's end); on
// failure nothing is held.
func (b *BodyBudget) Read(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err error) {
	limit := b.maxBody
	if r.ContentLength > limit {
		return nil, nil, ErrBodyTooLarge
	}
	n := limit
	if r.ContentLength >= 0 {
		n = r.ContentLength
	}
	if !b.reserve(n) {
		return nil, nil, ErrBodyBudget
	}
	release = func() { b.inflight.Add(-n) }
	// A known length is read into one buffer (+1: the read that sees EOF
	// needs no growth); an unknown one grows as it comes, up to the limit.
	size := int64(4 << 10)
	if r.ContentLength >= 0 {
		size = r.ContentLength + 1
	}
	buf := make([]byte, 0, size)
	rd := http.MaxBytesReader(w, r.Body, limit)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, release, nil
		}
		if err != nil {
			release()
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return nil, nil, ErrBodyTooLarge
			}
			return nil, nil, ErrBodyUnreadable
		}
	}
}
