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

// shadow is one copy in the core (queued or dispatched). Its fields are
// guarded by the gateway's mu (shadowCopies.mu), bar q and body, which
// are set before the copy is offered and then only read.
type shadow struct {
	k   int // the canary
	req sched.Request
	// dispatched is when the core dispatched it, on the gateway's clock
	// (model time) and on the wall's.
	dispatched     time.Duration
	dispatchedWall time.Time
	q              request // what call needs: path, body, stream, class, the key
	running        bool
	// cancelled: its original ended and its canary cancels copies with
	// their primary; stop ends a running copy's call.
	cancelled bool
	stop      context.CancelFunc
	ended     bool
}

// shadowCopies owns the shadow copies in the core and sends them. What a
// copy is, and what its end tells the rollouts, are the request engine's
// (reqengine.Canaries); the copies share the core with the originals, so
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
	// (Gateway.call); deliver carries out the core's Ready after a copy
	// ended (Gateway.deliver, with mu held).
	call    func(ctx context.Context, q *request, rep int, body []byte, hedge bool) *upstream
	deliver func(now time.Duration)

	inFlight map[uint64]*shadow // by the copy's request ID; guarded by mu
	wg       sync.WaitGroup     // copies being sent
}

// mirror sends a copy of q, an original just admitted for the first time,
// to a canary's candidate when the core says so.
func (s *shadowCopies) mirror(q *request) {
	if s.can == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Closing (Close cancels ctx, with mu held, before it marks the
	// gateway closed): nothing more is copied.
	if s.ctx.Err() != nil {
		return
	}
	now := s.clk.now()
	cp, seq, ok := s.can.Mirror(now, s.core, &q.c.Core)
	if !ok {
		return
	}
	sh := &shadow{k: cp.Route - 1, req: cp}
	// The same body, its own idempotency key: an upstream that
	// deduplicates must not answer the copy with the original's answer.
	sh.q = request{path: q.path, body: q.body, stream: q.stream, tenant: q.tenant, class: q.class, model: q.model,
		served: s.sc.Models[q.c.Core.Model].Name}
	sh.q.c.Life.Key = s.nonce + "-shadow-" + strconv.FormatUint(seq, 10)
	// Its ID is what the fault layer draws its fate from, as for any
	// attempt (sched.AttemptFate).
	sh.q.c.Core = cp
	q.shadow = sh
	s.inFlight[sh.req.ID] = sh
	if !s.can.OfferShadow(now, s.core, &sh.req) {
		s.letGo(sh, shadowShed) // shed at once: the engine knows
	}
	s.deliver(now)
}

// primaryDone ends q's copy with q when its canary cancels copies with
// their primary. Called once q has its answer.
func (s *shadowCopies) primaryDone(q *request) {
	if q.shadow == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := q.shadow
	q.shadow = nil
	if sh.ended || !s.can.CancelsWithPrimary(&sh.req) {
		return
	}
	if !sh.running {
		now := s.clk.now()
		s.core.Finish(now, &sh.req) // out of its queue
		s.end(sh, shadowCancelled)
		s.deliver(now)
		return
	}
	sh.cancelled = true
	sh.stop() // its goroutine ends it
}

// start sends a copy the core dispatched to replica rep. Called from
// deliver, with mu held.
func (s *shadowCopies) start(sh *shadow, rep int) {
	if s.ctx.Err() != nil {
		// Closing: the copy is not sent (nobody waits for it).
		s.end(sh, shadowCancelled)
		return
	}
	s.can.ShadowDispatched(&sh.req, s.jurisdiction(rep))
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
	if d := s.sc.Classes[sh.req.Class].Deadline.D(); d > 0 {
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

// done ends a copy that was sent: its figures go to its canary
// unless it was cancelled (with its primary, or by Close).
func (s *shadowCopies) done(sh *shadow, rep int, ok bool, first time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.now()
	switch {
	case sh.cancelled || s.ctx.Err() != nil:
		s.end(sh, shadowCancelled)
	default:
		at := time.Duration(-1) // its first bytes, model time (none)
		if ok && !first.IsZero() {
			at = sh.dispatched + s.clk.model(first.Sub(sh.dispatchedWall))
		}
		s.can.AttemptEnded(now, &sh.req, rep, ok, sh.req.Arrived, at, false)
		outcome := shadowFailed
		if ok {
			outcome = shadowCompleted
		}
		s.end(sh, outcome)
	}
	s.core.Finish(now, &sh.req)
	// The gateway is not closed yet: Close marks it so only once wg's
	// copies are done.
	s.deliver(now)
}

// end lets go of a copy that ended with outcome: a shed or
// cancelled one counts as such for its canary (a completed or failed one
// was observed). It does not tell the core. Called with mu held.
func (s *shadowCopies) end(sh *shadow, outcome string) {
	if sh.ended {
		return
	}
	switch outcome {
	case shadowShed:
		s.can.ShadowEnded(&sh.req, false)
	case shadowCancelled:
		s.can.ShadowEnded(&sh.req, true)
	}
	s.letGo(sh, outcome)
}

// letGo forgets a copy that ended with outcome, the request
// engine told. Called with mu held.
func (s *shadowCopies) letGo(sh *shadow, outcome string) {
	if sh.ended {
		return
	}
	sh.ended = true
	delete(s.inFlight, sh.req.ID)
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

// shed ends the copy id, which the core shed (Ready.ShadowsShed), if it
// is one of ours. Called from deliver, with mu held.
func (s *shadowCopies) shed(id uint64) {
	if sh, ok := s.inFlight[id]; ok {
		s.end(sh, shadowShed)
	}
}
