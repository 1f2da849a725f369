package gateway

import (
	"context"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Shadow copies, live: an original's copy to a canary's candidate, sent
// while the core holds it dispatched (see canary.go for what the request
// engine decides and what the gateway carries out).

// Outcomes of a shadow copy, each counted once when it ends.
const (
	shadowCompleted = "completed"
	shadowFailed    = "failed"
	shadowShed      = "shed"
	shadowCancelled = "cancelled"
)

// shadow is one copy in the core (queued or dispatched): the request
// engine's record of it is q.c (its Req), which NewCopy gave it. Its
// fields are guarded by the gateway's mu (shadowCopies.mu), bar q's
// request fields, which are set before the copy is offered and then only
// read.
type shadow struct {
	k int // the canary
	// dispatched is when the core dispatched it, on the gateway's clock
	// (model time) and on the wall's.
	dispatched     time.Duration
	dispatchedWall time.Time
	q              request // what call needs: path, body, stream, class, the key; q.c is the engine's record
	running        bool
	// cancelled: the engine cancelled it with its original; stop ends a
	// running copy's call.
	cancelled bool
	stop      context.CancelFunc
	ended     bool
}

// core is the copy as the core holds it.
func (sh *shadow) core() *sched.Request { return &sh.q.c.Core }

// shadowCopies owns the shadow copies' records and sends them. When a copy
// is made, what its end tells its rollout, and when it is cancelled with
// its original are the request engine's (reqengine.Engine, with
// reqengine.Canaries); the copies share the core with the originals, so
// they live under the gateway's lock.
type shadowCopies struct {
	// Set by New, then only read.
	mu       *sync.Mutex         // the gateway's: it guards the core, the canaries, inFlight and each copy (see shadow)
	core     *sched.Core         // the gateway's
	can      *reqengine.Canaries // the gateway's; nil without canaries: nothing is copied then
	sc       *scenarios.Scenario
	replicas []replica
	clk      clock
	nonce    string                 // the gateway's, for the copies' idempotency keys
	counted  *prometheus.CounterVec // fleetdrill_shadow_requests_total: canary, outcome
	// ctx is the gateway's probeCtx: Close cancels it, with mu held, and
	// then waits for wg.
	ctx context.Context
	// call sends a copy upstream as an original's attempt is sent
	// (Gateway.call); step steps the engine and carries out its Ready
	// (Gateway.stepLocked, with mu held).
	call func(ctx context.Context, q *request, rep int, body []byte, hedge bool) *upstream
	step func(now time.Duration, ev reqengine.Event)

	inFlight map[uint64]*shadow // by the copy's request ID; guarded by mu
	wg       sync.WaitGroup     // copies being sent
}

// newCopy is the gateway's record of copy cp of orig, an original the
// engine mirrors to a canary's candidate (EngineConfig.NewCopy): the same
// body, its own idempotency key. Called with mu held, from a step.
func (s *shadowCopies) newCopy(orig *reqengine.Req, cp sched.Request, seq uint64) *reqengine.Req {
	o := requestOf(orig)
	sh := &shadow{k: cp.Route - 1}
	// The same body, its own idempotency key: an upstream that
	// deduplicates must not answer the copy with the original's answer.
	sh.q = request{path: o.path, body: o.body, stream: o.stream, tenant: o.tenant, class: o.class, model: o.model,
		served: s.sc.Models[orig.Core.Model].Name}
	sh.q.c.Life.Key = s.nonce + "-shadow-" + strconv.FormatUint(seq, 10)
	// Its ID is what the fault layer draws its fate from, as for any
	// attempt (sched.AttemptFate).
	sh.q.c.Core = cp
	s.inFlight[cp.ID] = sh
	return &sh.q.c.Req
}

// cancel stops a running copy the engine cancelled with its original
// (Ready.Cancels); its goroutine ends it. Called from deliver, with mu
// held.
func (s *shadowCopies) cancel(id uint64) {
	if sh, ok := s.inFlight[id]; ok && sh.running && !sh.cancelled {
		sh.cancelled = true
		sh.stop()
	}
}

// ended forgets a copy the engine ended (Ready.CopiesEnded), counting its
// outcome. Called from deliver, with mu held.
func (s *shadowCopies) ended(c reqengine.CopyEnd) {
	sh, ok := s.inFlight[c.Req.Core.ID]
	if !ok {
		return
	}
	s.letGo(sh, [...]string{reqengine.CopyCompleted: shadowCompleted, reqengine.CopyFailed: shadowFailed,
		reqengine.CopyShed: shadowShed, reqengine.CopyCancelled: shadowCancelled}[c.How])
}

// start sends a copy the core dispatched to replica rep. Called from
// deliver, with mu held.
func (s *shadowCopies) start(sh *shadow, rep int) {
	if s.ctx.Err() != nil {
		// Closing: the copy is not sent (nobody waits for it).
		s.closing(sh)
		return
	}
	s.can.ShadowDispatched(sh.core(), s.jurisdiction(rep))
	sh.running = true
	ctx, stop := context.WithCancel(s.ctx)
	sh.stop = stop
	sh.dispatched, sh.dispatchedWall = s.clk.now(), time.Now()
	// Close cancels ctx with mu held, so no Add follows its Wait.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer stop()
		ok, first := s.send(ctx, sh, rep)
		s.done(sh, rep, ok, first)
	}()
}

// jurisdiction is replica rep's pool's region's jurisdiction ("": none).
func (s *shadowCopies) jurisdiction(rep int) string {
	for _, r := range s.sc.Regions {
		if r.Name == s.replicas[rep].region {
			return r.Jurisdiction
		}
	}
	return ""
}

// send sends a copy to replica rep and reads its answer to the end,
// discarding it: ok when it answered 2xx in full; first is when its first
// bytes came (zero: none). A copy waits no longer than its class's
// deadline.
func (s *shadowCopies) send(ctx context.Context, sh *shadow, rep int) (ok bool, first time.Time) {
	if d := s.sc.Classes[sh.q.c.Core.Class].Deadline.D(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.clk.wall(d))
		defer cancel()
	}
	u := s.call(ctx, &sh.q, rep, sh.q.body, false)
	defer u.close()
	if !u.answered() {
		return false, time.Time{}
	}
	first = u.firstAt
	if u.eof {
		return u.resp.StatusCode < 300, first
	}
	// The rest, read and dropped; a backend silent for the health
	// timeout has died under the copy, as under an original.
	stall := time.AfterFunc(s.clk.wall(s.sc.Policy.Health.Timeout.D()), u.cancel)
	defer stall.Stop()
	buf := *u.bp
	for {
		_, err := u.resp.Body.Read(buf)
		if err == io.EOF {
			return u.resp.StatusCode < 300, first
		}
		if err != nil {
			return false, first
		}
		stall.Reset(s.clk.wall(s.sc.Policy.Health.Timeout.D()))
	}
}

// done steps the end of a copy that was sent to the engine, which tells
// its canary and ends it (Ready.CopiesEnded), unless the engine ended it
// already (cancelled with its original) or the gateway is closing.
func (s *shadowCopies) done(sh *shadow, rep int, ok bool, first time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.now()
	switch {
	case sh.ended:
		return
	case s.ctx.Err() != nil:
		s.closing(sh)
		s.core.Finish(now, sh.core())
		return
	}
	var at time.Duration // its first bytes, model time (0: none)
	if ok && !first.IsZero() {
		at = sh.dispatched + s.clk.model(first.Sub(sh.dispatchedWall))
	}
	kind := reqengine.AttemptFailed
	if ok {
		kind = reqengine.Answered
	}
	// The gateway is not closed yet: Close marks it so only once wg's
	// copies are done.
	s.step(now, reqengine.Event{Kind: kind, Req: &sh.q.c.Req, Replica: rep, First: at})
}

// closing ends a copy the gateway, closing, will not send or wait for:
// cancelled, for its canary. Called with mu held.
func (s *shadowCopies) closing(sh *shadow) {
	if sh.ended {
		return
	}
	s.can.ShadowEnded(sh.core(), true)
	s.letGo(sh, shadowCancelled)
}

// letGo forgets a copy that ended with outcome, the request
// engine told. Called with mu held.
func (s *shadowCopies) letGo(sh *shadow, outcome string) {
	if sh.ended {
		return
	}
	sh.ended = true
	delete(s.inFlight, sh.core().ID)
	s.counted.WithLabelValues(s.sc.Canaries[sh.k].Name, outcome).Inc()
}

// dispatched sends a copy the core dispatched. Called from deliver with
// mu held; it reports whether d was a copy's.
func (s *shadowCopies) dispatched(d sched.Dispatch) bool {
	sh, ok := s.inFlight[d.Req.ID]
	if !ok {
		return false
	}
	s.start(sh, d.Replica)
	return true
}
