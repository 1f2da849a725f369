package node

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/fleetdrill/fleetdrill/twin/engine"
	"github.com/fleetdrill/fleetdrill/twin/kvlink"
)

// Job ends, in job.end.
const (
	jobActive int32 = iota
	jobDone         // every token generated
	jobFailed       // cancelled, or the node stopped
)

// job is one request on the engine. The loop owns seq and the fields below
// "loop-owned"; the handler reads only the atomics and notify.
type job struct {
	seq   engine.Seq
	rep   *replica
	avail atomic.Int64 // tokens released to the client so far
	end   atomic.Int32 // jobActive until the job ends
	// notify has room for one wake-up: the loop never blocks on a handler,
	// and a handler that wakes reads the latest avail and end.
	notify chan struct{}

	// loop-owned
	base        int  // seq.Generated at the start of the replica's segment
	decoding    bool // decodes in every step of the current segment
	recomputing bool // preempted, not yet producing again
	lastGen     int
	counted     int // tokens added to replica.genTokens

	// Disaggregated serving (kv.go). kvHold: a prefill job whose KV the
	// replica keeps at its end, under lease kvID (set before its end is
	// stored). pull: a decode job's pull, until it joins the engine.
	// fail: how a failed job failed, when not because the node stopped.
	kvHold bool
	kvID   string
	pull   *pullState
	fail   *failure
}

func (j *job) wake() {
	select {
	case j.notify <- struct{}{}:
	default:
	}
}

// release makes n tokens available to the client (never fewer than before).
func (j *job) release(n int) {
	if int64(n) > j.avail.Load() {
		j.avail.Store(int64(n))
		j.wake()
	}
}

// give counts and releases j's first n tokens.
func (r *replica) give(j *job, n int) {
	if n > j.counted {
		r.genTokens.Add(uint64(n - j.counted))
		j.counted = n
	}
	j.release(n)
}

// replica is one model's engine and the loop's plan for its current
// segment (a run of steps from segS to segE).
type replica struct {
	model *Model
	eng   *engine.Replica
	kvCap int64 // immutable; handlers read it
	jobs  []*job

	busy       bool
	segS, segE time.Duration
	steps      int // steps predicted in the segment
	released   int // steps whose tokens were released by interpolation

	running, waiting atomic.Int64 // for Stats and metrics
	kvUsed           atomic.Int64
	preempted        atomic.Uint64 // the engine's preemptions so far
	// The engine's prompt tokens (counted when a sequence's prefill
	// completes) and output tokens so far, vLLM's counters: tokens count
	// as the loop releases them to their client (give), so a client that
	// has read them finds them counted.
	promptTokens, genTokens atomic.Uint64
	gauges                  queueGauges

	// A decode replica's inbound KV link and pulls (kv.go); nil and
	// empty elsewhere. kv is the node's, for a prefill replica's leases.
	kv      *kvState
	link    *kvlink.Link
	pulls   kvlink.Queue
	pulling map[uint64]*job
}

// Sink methods: the engine reports to the replica.
func (r *replica) find(s *engine.Seq) *job {
	for _, j := range r.jobs {
		if &j.seq == s {
			return j
		}
	}
	return nil
}

func (r *replica) FirstToken(s *engine.Seq, _ time.Duration) {
	r.promptTokens.Add(uint64(s.Prompt))
}

func (r *replica) Done(s *engine.Seq, now time.Duration) {
	if j := r.find(s); j != nil {
		if j.kvHold {
			j.kvID = r.kv.add(r, int64(j.seq.Prompt), now)
			r.kvUsed.Store(r.eng.KVUsed()) // in Stats before the answer leaves
		}
		r.give(j, j.seq.Output)
		r.remove(j, jobDone)
	}
}

func (r *replica) Preempted(s *engine.Seq, _ time.Duration) {
	if j := r.find(s); j != nil {
		j.recomputing = true
	}
}

func (r *replica) Dropped(s *engine.Seq, _ time.Duration) {
	if j := r.find(s); j != nil {
		r.remove(j, jobFailed)
	}
}

func (r *replica) remove(j *job, end int32) {
	for i, x := range r.jobs {
		if x == j {
			last := len(r.jobs) - 1
			r.jobs[i] = r.jobs[last]
			r.jobs[last] = nil
			r.jobs = r.jobs[:last]
			break
		}
	}
	j.end.Store(end)
	j.wake()
}

// plan reads the segment the engine started at now and predicts its steps:
// one when it contains prefill work (or after a preemption, conservatively),
// else the engine's own rule for a pure decode run: until the first
// decoder finishes or the KV cache cannot take another step.
func (r *replica) plan(now time.Duration) {
	r.segE, r.busy = r.eng.Next()
	r.segS, r.released = now, 0
	if !r.busy {
		return
	}
	prefill, dec, n := false, 0, math.MaxInt
	for _, j := range r.jobs {
		j.decoding = false
		j.base = j.seq.Generated
		if !j.seq.Held() || !j.seq.Admitted {
			continue
		}
		if j.seq.Generated == 0 || j.recomputing {
			prefill = true
			continue
		}
		j.decoding = true
		dec++
		n = min(n, j.seq.Output-j.seq.Generated)
	}
	switch {
	case prefill || dec == 0:
		n = 1
	default:
		if free := (r.kvCap - r.eng.KVUsed()) / int64(dec); free < int64(n) {
			n = int(max(free, 1))
		}
	}
	r.steps = n
}

// recut follows a cut of the segment (an arrival or a cancellation in the
// middle of a decode run ends it at the step in progress).
func (r *replica) recut() {
	e, busy := r.eng.Next()
	if !busy || e == r.segE || r.steps <= 1 {
		r.segE, r.busy = e, busy
		return
	}
	d := float64(r.segE-r.segS) / float64(r.steps)
	r.steps = max(1, min(r.steps, int(math.Round(float64(e-r.segS)/d))))
	r.released = min(r.released, r.steps-1)
	r.segE = e
}

// interpolate releases the tokens of the steps of a decode run that have
// ended by now (evenly spaced, see the package doc); the run's last step is
// released by Advance. It returns when the next step ends, or false.
func (r *replica) interpolate(now time.Duration) (time.Duration, bool) {
	if !r.busy || r.steps <= 1 || r.segE <= r.segS {
		return 0, false
	}
	span := float64(r.segE - r.segS)
	k := int(float64(r.steps) * float64(now-r.segS) / span)
	k = min(k, r.steps-1)
	if k > r.released {
		r.released = k
		for _, j := range r.jobs {
			if j.decoding {
				r.give(j, min(j.base+k, j.seq.Output-1))
			}
		}
	}
	if r.released >= r.steps-1 {
		return 0, false
	}
	next := r.segS + time.Duration(math.Ceil(span*float64(r.released+1)/float64(r.steps)))
	return max(next, now+1), true
}

// advance completes every segment of r that has ended by now.
func (r *replica) advance(now time.Duration) {
	for r.busy && r.segE <= now {
		at := r.segE
		r.eng.Advance(at, r)
		for _, j := range r.jobs {
			if g := j.seq.Generated; g > j.lastGen {
				j.lastGen, j.recomputing = g, false
				r.give(j, min(g, j.seq.Output))
			}
		}
		r.plan(at)
	}
}

func (r *replica) publish() {
	run := int64(r.eng.Running())
	r.running.Store(run)
	r.waiting.Store(int64(r.eng.Load()) - run)
	r.kvUsed.Store(r.eng.KVUsed())
	r.preempted.Store(r.eng.Preemptions)
}

// clock converts between engine time and the wall clock.
type clock struct {
	start time.Time
	speed float64
}

func (c clock) now() time.Duration {
	return time.Duration(float64(time.Since(c.start)) * c.speed)
}

func (c clock) wall(t time.Duration) time.Time {
	return c.start.Add(time.Duration(float64(t) / c.speed))
}

// Run drives the engines until ctx ends; then every unfinished request
// fails and Run returns ctx's error. Call it once.
func (n *Node) Run(ctx context.Context) error {
	defer close(n.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := n.clk.now()
		wake, have := time.Duration(0), false
		n.kv.expire(now)
		for _, r := range n.reps {
			r.advance(now)
			n.linkEnded(now, r)
			if t, ok := r.linkNext(); ok && (!have || t < wake) {
				wake, have = t, true
			}
			if t, ok := r.interpolate(now); ok && (!have || t < wake) {
				wake, have = t, true
			}
			if r.busy && (!have || r.segE < wake) {
				wake, have = r.segE, true
			}
			r.publish()
			n.metrics.setQueues(r)
		}
		// After the replicas: a prefill that ended just now leased its KV.
		if t, ok := n.kv.nextExpiry(); ok && (!have || t < wake) {
			wake, have = t, true
		}
		if have {
			timer.Reset(time.Until(n.clk.wall(wake)))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case j := <-n.addc:
			now := n.clk.now()
			r := j.rep
			r.advance(now)
			if j.pull != nil {
				n.startPull(now, j) // joins the engine once its KV is here
				break
			}
			r.jobs = append(r.jobs, j)
			idle := !r.busy
			r.eng.Add(now, &j.seq)
			if idle {
				r.plan(now)
			} else {
				r.recut()
			}
		case j := <-n.cancelc:
			now := n.clk.now()
			r := j.rep
			r.advance(now)
			if j.end.Load() != jobActive {
				break
			}
			if j.pull != nil {
				n.abortPull(now, j)
				r.remove(j, jobFailed)
				break
			}
			// The handler sends a cancel only after its add was received,
			// so the engine has seen the sequence. A waiting one leaves at
			// once; a running one at the end of the step in progress
			// (Dropped).
			if j.seq.Held() {
				r.eng.Cancel(now, &j.seq)
			}
			if j.seq.Held() {
				r.recut()
			} else {
				r.remove(j, jobFailed)
			}
		case op := <-n.opc:
			op(n.clk.now())
		case w := <-n.wirec:
			n.pulled(n.clk.now(), w)
		case <-timer.C:
		case <-ctx.Done():
			n.kv.closeWire()
			for _, r := range n.reps {
				for _, j := range r.pulling {
					n.abortPull(n.clk.now(), j)
					r.remove(j, jobFailed)
				}
				for len(r.jobs) > 0 {
					r.remove(r.jobs[0], jobFailed)
				}
				r.running.Store(0)
				r.waiting.Store(0)
				n.metrics.setQueues(r)
			}
			return ctx.Err()
		}
	}
}
