// Package engine models one inference replica doing iteration-level
// continuous batching, the way vLLM does it: every step runs the (chunked)
// prefill of newly admitted sequences and one decode token for every running
// one; its duration comes from the replica's measured profile; the KV cache
// bounds what can run, and a decode that outgrows it preempts the most
// recently admitted sequence (recompute).
//
// The model is a clock-agnostic state machine, like the scheduler core: the
// caller tells it the time, asks when it next needs attention ([Replica.Next])
// and calls [Replica.Advance] then. The twin drives it from the simulation
// kernel; the emulated node of the live harness drives it from the wall clock.
// It must not import sim, read a clock, start goroutines or do I/O.
//
// # Skipping ahead
//
// Between two changes of batch composition (an admission, a completion, a
// preemption, a prefill chunk) every step decodes the same sequences, each
// step one KV token per sequence longer than the last, so the step times form
// an arithmetic series and the whole run of steps is one event: a replica
// costs O(1) events per composition change, not one per token. An arrival in
// the middle of such a run cuts it at the end of the step in progress, where
// a real engine would admit the newcomer.
package engine

import (
	"fmt"
	"math"
	"time"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// Seq is one request on a replica. The caller owns it; the replica keeps a
// pointer while it is queued or running.
type Seq struct {
	Tag    int // the caller's handle for the request
	Prompt int // input tokens
	Output int // tokens to generate, >= 1
	// Blocks are the prompt's prefix-block hashes (BlockTokens each), for
	// prefix caching; nil when the workload has none.
	Blocks []uint64
	// CachedTokens is how much of the prompt the replica's prefix cache
	// held at the sequence's last admission.
	CachedTokens int
	// Transferred is how much of the prompt's KV cache a prefill replica
	// computed and moved here (disaggregated serving): at its first
	// admission it needs no prefill but for the last prompt token, whose
	// logits give the first token. A preemption loses it (recompute).
	Transferred int

	// Progress, maintained by the replica.
	Generated   int           // output tokens produced so far
	FirstToken  time.Duration // when the first token was produced; valid when Generated > 0
	Preemptions int           // times it was preempted and recomputed
	// Scheduled is when the replica first admitted the sequence into its
	// batch (vLLM's scheduled_ts); valid once Admitted.
	Scheduled time.Duration
	Admitted  bool

	added     time.Duration // when it was last queued on the replica
	prefilled int           // tokens of the current (re)computation already in the KV cache
	kv        int64         // KV tokens this sequence holds (reserved at admission)
	state     seqState
	cancelled bool
}

type seqState uint8

const (
	seqIdle seqState = iota
	seqWaiting
	seqRunning
	seqDone
)

// Held reports whether a replica still holds the sequence: queued or
// running, including a cancelled one until the end of its step (see
// Sink.Dropped).
func (s *Seq) Held() bool { return s.state == seqWaiting || s.state == seqRunning }

// pending returns how many tokens must still be prefilled before the
// sequence decodes: its prompt plus, after a preemption, what it had
// generated (recompute).
func (s *Seq) pending() int {
	return s.Prompt + s.Generated - s.prefilled
}

// Sink receives what happens on a replica. Times are virtual (or wall) time
// as the caller supplies it.
type Sink interface {
	FirstToken(s *Seq, at time.Duration)
	Done(s *Seq, at time.Duration)
	Preempted(s *Seq, at time.Duration)
	// Dropped reports that a cancelled running sequence has left the
	// replica (at the end of the step it was in); the caller may reuse it
	// from now on, not before.
	Dropped(s *Seq, at time.Duration)
}

// Config sizes a replica.
type Config struct {
	Profile  latency.Profile
	MaxSeqs  int   // sequences running at once (vLLM max_num_seqs)
	KVTokens int64 // KV cache capacity in tokens
	// PrefixCaching keeps prompt blocks cached in free KV memory, so that a
	// request whose leading blocks are cached skips their prefill.
	PrefixCaching bool
	// BlockTokens is the prompt tokens one of Seq.Blocks covers; 0 is
	// BlockTokens (Mooncake's 512). vLLM caches 16-token blocks.
	BlockTokens int
}

// Replica is one serving replica.
type Replica struct {
	prof     latency.Profile
	maxSeqs  int
	kvCap    int64
	waiting  []*Seq // FIFO; preempted sequences return to the front
	wHead    int
	running  []*Seq // in admission order; preemption takes from the end
	kvUsed   int64  // reserved by running sequences, and held (Hold)
	kvHeld   int64  // kept by Hold for transfers under way
	kvDecode int64  // held by running sequences that decode (the PerKVToken term)

	// The current segment: steps that started at segStart. prefill is the
	// prefill work of its (single) step, or nil for a pure decode run.
	busy     bool
	segStart time.Duration
	segSteps int
	segEnd   time.Duration
	prefill  []chunk
	decoders int // sequences decoding in every step of the segment

	noSkip bool // tests: one step per segment, the slow obvious reference

	// The decode run's step times, a + c·i (Profile.DecodeRun), fixed when
	// the segment is planned.
	runA, runC float64
	batch      latency.Batch // reused for every step with prefill work
	blockTok   int
	// lastStart is when the step that just ended started: with async
	// scheduling only sequences queued before it can join the next step
	// (the one after was scheduled while it ran).
	lastStart time.Duration

	cache *prefixCache // nil without prefix caching

	// blocked is true when the last planning left sequences waiting: the
	// replica is full (KV, running slots or prefill budget) and a router
	// should send it nothing more for now.
	blocked bool

	// Counters, for reports.
	Steps       uint64 // engine iterations executed
	Preemptions uint64
	BusyTime    time.Duration // time with a step in progress
}

// chunk is the prefill of part of one sequence within a step.
type chunk struct {
	s      *Seq
	tokens int
}

// New returns an idle replica. It returns an error when the configuration
// cannot run anything.
func New(cfg Config) (*Replica, error) {
	if cfg.MaxSeqs < 1 {
		return nil, fmt.Errorf("engine: max sequences %d, want >= 1", cfg.MaxSeqs)
	}
	if cfg.KVTokens < 1 {
		return nil, fmt.Errorf("engine: KV capacity %d tokens, want >= 1", cfg.KVTokens)
	}
	if cfg.Profile.MaxBatchedTokens < 1 {
		return nil, fmt.Errorf("engine: max batched tokens %d, want >= 1", cfg.Profile.MaxBatchedTokens)
	}
	r := &Replica{prof: cfg.Profile, maxSeqs: cfg.MaxSeqs, kvCap: cfg.KVTokens, blockTok: cfg.BlockTokens}
	if r.blockTok <= 0 {
		r.blockTok = BlockTokens
	}
	if cfg.PrefixCaching {
		r.cache = newPrefixCache()
	}
	return r, nil
}

// Fits reports whether a request could ever complete on this replica: its
// prompt and output must fit the KV cache on their own.
func (r *Replica) Fits(prompt, output int) bool {
	return int64(prompt+output) <= r.kvCap
}

// Load returns the number of sequences on the replica, waiting or running.
func (r *Replica) Load() int { return len(r.waiting) - r.wHead + len(r.running) }

// Running returns the number of running sequences.
func (r *Replica) Running() int { return len(r.running) }

// PrefixStats returns the prefix cache's block lookups and hits since the
// start (zero without prefix caching).
func (r *Replica) PrefixStats() (lookups, hits uint64) {
	if r.cache == nil {
		return 0, 0
	}
	return r.cache.Lookups, r.cache.Hits
}

// PrefixHits returns how many leading blocks of blocks the replica has
// cached now, for routing by prefix affinity.
func (r *Replica) PrefixHits(blocks []uint64) int {
	if r.cache == nil {
		return 0
	}
	return r.cache.match(blocks)
}

// Hold keeps KV cache for tokens no sequence of the replica holds any
// more: a prefill replica's prompt, computed, kept until its transfer to
// the decode replica ends (disaggregated serving). Call it from Sink.Done
// for the sequence whose KV it keeps, which has just given the same room
// back. Release gives it back.
func (r *Replica) Hold(tokens int64) {
	t := max(tokens, 0)
	r.kvUsed += t
	r.kvHeld += t
}

// TryHold is Hold for KV that must fit: a decode replica's blocks
// reserved for a prompt about to be pulled from a prefill replica (vLLM's
// pull connector allocates them before it reads). It holds nothing and
// reports false when the free KV cannot take tokens.
func (r *Replica) TryHold(tokens int64) bool {
	if r.kvUsed+max(tokens, 0) > r.kvCap {
		return false
	}
	r.Hold(tokens)
	return true
}

// Release gives back KV cache Hold kept, at now: an idle replica may then
// admit what waited for it. The caller must then re-read Next.
func (r *Replica) Release(now time.Duration, tokens int64) {
	t := min(max(tokens, 0), r.kvHeld)
	r.kvUsed -= t
	r.kvHeld -= t
	if !r.busy && r.wHead < len(r.waiting) {
		r.plan(now, nil)
	}
}

// KVHeld is the KV cache Hold keeps.
func (r *Replica) KVHeld() int64 { return r.kvHeld }

// Blocked reports whether the replica turned sequences away at its last
// step boundary (no KV, running slot or prefill budget for them). It is the
// replica's back-pressure signal: a router should hold further requests
// until it clears.
func (r *Replica) Blocked() bool { return r.blocked }

// KVCapacity returns the replica's KV capacity in tokens.
func (r *Replica) KVCapacity() int64 { return r.kvCap }

// KVUsed returns the KV tokens reserved.
func (r *Replica) KVUsed() int64 { return r.kvUsed }

// Next returns when the replica next needs Advance, and false when idle.
func (r *Replica) Next() (time.Duration, bool) { return r.segEnd, r.busy }

// Add queues a sequence at time now. If the replica is idle, a step starts
// now; if it is in a run of decode steps, the run is cut at the end of the
// step in progress so the sequence joins the next step (with async
// scheduling, the step after that: the next one was scheduled when the one
// in progress started). The caller must then re-read Next.
func (r *Replica) Add(now time.Duration, s *Seq) {
	if s.Output < 1 {
		s.Output = 1
	}
	s.state = seqWaiting
	s.added = now
	r.waiting = append(r.waiting, s)
	if !r.busy {
		r.plan(now, nil) // nothing in flight: schedules at once
		return
	}
	r.cut(now, true)
}

// Cancel removes a sequence (its deadline expired, or the client went away).
// A waiting sequence leaves at once. A running one is marked and leaves at
// the end of the step in progress, with its KV (an engine aborts between
// iterations); the run of steps is cut there. It reports whether the
// sequence was on the replica.
func (r *Replica) Cancel(now time.Duration, s *Seq) bool {
	switch s.state {
	case seqWaiting:
		for i := r.wHead; i < len(r.waiting); i++ {
			if r.waiting[i] == s {
				copy(r.waiting[i:], r.waiting[i+1:])
				r.waiting[len(r.waiting)-1] = nil
				r.waiting = r.waiting[:len(r.waiting)-1]
				break
			}
		}
		s.state = seqDone
		return true
	case seqRunning:
		s.cancelled = true
		r.cut(now, false)
		return true
	}
	return false
}

// Advance completes the segment that ends at now (now must equal Next) and
// starts the next one, reporting first tokens, completions and preemptions
// to out.
func (r *Replica) Advance(now time.Duration, out Sink) {
	if !r.busy || now != r.segEnd {
		return
	}
	r.BusyTime += r.segEnd - r.segStart
	r.Steps += uint64(r.segSteps)
	n := r.segSteps
	r.lastStart = r.segStart
	if n > 1 {
		r.lastStart = r.segStart + latency.US(r.sum(n-1))
	}

	// Prefill progress of the (single) step with prefill work.
	for _, c := range r.prefill {
		c.s.prefilled += c.tokens
	}
	// Every running sequence with nothing left to prefill produced one token
	// per step: n in a decode run; in a step with prefill work (always a
	// single step) one, which for a sequence whose prefill completed in it
	// is its first token (or, after a recompute, its next).
	w := 0
	for _, s := range r.running {
		if s.pending() == 0 && !s.cancelled {
			produced := n
			if s.Generated == 0 {
				s.FirstToken = now
				out.FirstToken(s, now)
			}
			s.Generated += produced
			s.prefilled += produced
			// The sequence holds its prompt and what it generated; the
			// first generated token's slot was reserved at admission.
			if held := int64(s.Prompt + s.Generated); held > s.kv {
				r.kvUsed += held - s.kv
				s.kv = held
			}
		}
		if s.cancelled || s.Generated >= s.Output {
			r.kvUsed -= s.kv
			s.kv = 0
			if s.cancelled {
				s.state = seqDone
				// Only now may the caller reuse the sequence: until this
				// step ended the replica still held it.
				out.Dropped(s, now)
			} else {
				s.Generated = s.Output
				s.state = seqDone
				out.Done(s, now)
			}
			continue
		}
		r.running[w] = s
		w++
	}
	clear(r.running[w:])
	r.running = r.running[:w]
	r.prefill = r.prefill[:0]
	r.busy = false
	r.plan(now, out)
}

// plan starts the next segment at now, or leaves the replica idle.
func (r *Replica) plan(now time.Duration, out Sink) {
	// Decode needs one more KV token per decoding sequence at the end of
	// the step; preempt the most recently admitted until that fits.
	for {
		dec := 0
		for _, s := range r.running {
			if s.pending() == 0 {
				dec++
			}
		}
		if r.kvUsed+int64(dec) <= r.kvCap || len(r.running) <= 1 {
			break
		}
		last := r.running[len(r.running)-1]
		r.running = r.running[:len(r.running)-1]
		r.kvUsed -= last.kv
		last.kv = 0
		last.prefilled = 0
		last.Preemptions++
		r.Preemptions++
		last.state = seqWaiting
		r.pushFront(last)
		if out != nil {
			out.Preempted(last, now)
		}
	}

	decoders := 0
	r.kvDecode = 0
	for _, s := range r.running {
		if s.pending() == 0 {
			decoders++
			r.kvDecode += s.kv
		}
	}
	budget := r.prof.MaxBatchedTokens - decoders
	r.prefill = r.prefill[:0]
	prefillTokens := 0
	// Continue the chunked prefills already running, in admission order.
	for _, s := range r.running {
		if budget <= 0 {
			break
		}
		if p := s.pending(); p > 0 {
			t := min(p, budget)
			r.prefill = append(r.prefill, chunk{s, t})
			prefillTokens += t
			budget -= t
		}
	}
	// Admit waiting sequences while there is room: a running slot, prefill
	// budget, and KV for the whole (re)computation, reserved up front so an
	// admitted prompt never thrashes. With async scheduling, only those
	// queued before the step that just ended started (an engine with
	// nothing in flight schedules at once).
	cutoff := now
	if r.prof.AsyncScheduling && len(r.running) > 0 {
		cutoff = r.lastStart
	}
	for budget > 0 && len(r.running) < r.maxSeqs && r.wHead < len(r.waiting) {
		s := r.waiting[r.wHead]
		if s.added > cutoff {
			break
		}
		// Its prompt (and, after a preemption, what it had generated),
		// plus the token its prefill produces; the decoders need one more
		// each at the end of this step.
		need := int64(s.Prompt + s.Generated + 1)
		if r.kvUsed+need+int64(decoders) > r.kvCap {
			break
		}
		r.waiting[r.wHead] = nil
		r.wHead++
		s.state = seqRunning
		if !s.Admitted {
			s.Admitted, s.Scheduled = true, now
		}
		s.kv = need
		r.kvUsed += need
		r.running = append(r.running, s)
		if s.Transferred > 0 && s.Preemptions == 0 {
			s.prefilled = max(s.prefilled, min(s.Transferred, s.Prompt-1))
		}
		if r.cache != nil && len(s.Blocks) > 0 {
			// Cached leading blocks need no prefill; at least the last
			// prompt token is always computed, as vLLM does, to produce
			// the first token's logits.
			hit := r.cache.match(s.Blocks)
			r.cache.Lookups += uint64(len(s.Blocks))
			r.cache.Hits += uint64(hit)
			s.CachedTokens = min(hit*r.blockTok, s.Prompt-1)
			s.prefilled = max(s.prefilled, s.CachedTokens)
			r.cache.insert(s.Blocks)
		}
		t := min(s.pending(), budget)
		r.prefill = append(r.prefill, chunk{s, t})
		prefillTokens += t
		budget -= t
	}
	if r.wHead == len(r.waiting) {
		r.waiting = r.waiting[:0]
		r.wHead = 0
	}
	lagging := r.wHead < len(r.waiting) && r.waiting[r.wHead].added > cutoff
	r.blocked = r.wHead < len(r.waiting) && !lagging
	if r.cache != nil {
		r.cache.shrink(int((r.kvCap - r.kvUsed) / int64(r.blockTok)))
	}
	if len(r.running) == 0 {
		return
	}

	r.busy = true
	r.segStart = now
	r.decoders = decoders
	if prefillTokens > 0 {
		r.batch.Decoders, r.batch.DecodeKV = decoders, r.kvDecode
		r.batch.Chunks = r.batch.Chunks[:0]
		for _, c := range r.prefill {
			r.batch.Chunks = append(r.batch.Chunks, latency.Chunk{Tokens: c.tokens, Context: c.s.prefilled})
		}
		r.segSteps = 1
		r.segEnd = now + latency.US(r.prof.StepBatch(len(r.running), r.batch))
		return
	}
	r.runA, r.runC = r.prof.DecodeRun(decoders, r.kvDecode)
	// A pure decode run: until the first sequence finishes, or the KV cache
	// cannot take another step.
	n := math.MaxInt
	for _, s := range r.running {
		n = min(n, s.Output-s.Generated)
	}
	if r.noSkip || lagging {
		n = 1 // the newcomers join after this step
	}
	if free := (r.kvCap - r.kvUsed) / int64(max(decoders, 1)); free < int64(n) {
		n = int(max(free, 1))
	}
	r.segSteps = n
	r.segEnd = now + latency.US(r.sum(n))
}

// sum returns the duration in µs of the first k steps of the current decode
// run: step i takes max(MinStep, a + c·i) (Profile.DecodeRun).
func (r *Replica) sum(k int) float64 {
	if k <= 0 {
		return 0
	}
	a, c := r.runA, r.runC
	m := r.prof.MinStep
	// Steps below the floor come first (the series increases).
	j := 0
	if a < m {
		if c <= 0 {
			j = k
		} else {
			// Clamp in float: a tiny c would overflow the conversion.
			j = int(math.Min(math.Ceil((m-a)/c), float64(k)))
		}
	}
	kf, jf := float64(k), float64(j)
	// Σ_{i=j}^{k-1} (a + c·i) = (k−j)·a + c·(k(k−1) − j(j−1))/2
	return jf*m + (kf-jf)*a + c*(kf*(kf-1)-jf*(jf-1))/2
}

// cut shortens a run of decode steps to end with the step in progress at
// now. For a newcomer (join) under async scheduling, the run ends one step
// later when the step in progress started before now: the step after it
// was scheduled then, without the newcomer. A cancellation takes effect at
// the end of the step in progress either way.
func (r *Replica) cut(now time.Duration, join bool) {
	if !r.busy || r.segSteps <= 1 {
		return
	}
	// The run is cut after the first step that ends at or after now (in
	// the same rounded nanoseconds as segEnd): a newcomer joins the step
	// that starts then, as it would stepping one iteration at a time.
	lo, hi := 1, r.segSteps // the last step ends at segEnd >= now
	for lo < hi {
		mid := (lo + hi) / 2
		if r.segStart+latency.US(r.sum(mid)) >= now {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if join && r.prof.AsyncScheduling && r.segStart+latency.US(r.sum(lo-1)) < now {
		lo++ // the step after the one in progress is already scheduled
	}
	if lo < r.segSteps {
		r.segSteps = lo
		r.segEnd = r.segStart + latency.US(r.sum(lo))
	}
}

func (r *Replica) pushFront(s *Seq) {
	if r.wHead > 0 {
		r.wHead--
		r.waiting[r.wHead] = s
		return
	}
	r.waiting = append(r.waiting, nil)
	copy(r.waiting[1:], r.waiting)
	r.waiting[0] = s
}

// Invariants checks the replica's books: the running sequences' KV sums to
// kvUsed, which never exceeds capacity. Tests call it after every event.
func (r *Replica) Invariants() error {
	var sum int64
	for _, s := range r.running {
		sum += s.kv
	}
	switch {
	case sum+r.kvHeld != r.kvUsed:
		return fmt.Errorf("engine: running sequences hold %d KV tokens and %d are held, kvUsed says %d", sum, r.kvHeld, r.kvUsed)
	case r.kvUsed > r.kvCap:
		return fmt.Errorf("engine: %d KV tokens used, capacity %d", r.kvUsed, r.kvCap)
	case len(r.running) > r.maxSeqs:
		return fmt.Errorf("engine: %d running, max %d", len(r.running), r.maxSeqs)
	}
	return nil
}
