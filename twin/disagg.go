package twin

import (
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/sim"
	"github.com/fleetdrill/fleetdrill/sim/stats"
	"github.com/fleetdrill/fleetdrill/twin/engine"
	"github.com/fleetdrill/fleetdrill/twin/kvlink"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Disaggregated serving's ground truth (issue 34). Where a prompt is
// prefilled and on which prefill replica is the core's decision
// (sched/disagg.go), made once for both drivers; the twin carries it out:
// the prompt runs on the prefill replica's engine as a one-token
// sequence, its KV cache is kept there (engine.Hold) while it moves over
// the decode replica's link (twin/kvlink, shared fairly by the transfers
// into that replica), and the request then joins the decode replica's
// engine with its prompt's KV in place (engine.Seq.Transferred), where it
// computes the last prompt token and decodes. The request engine hears
// the prefill is over when it is (reqengine.Prefilled): the prefill
// replica's breaker counts a success and its slot is free. A transfer that
// fails is the decode server's to handle, by its kv_load_failure_policy
// (failed), as a real server's is.
//
// An attempt that ends early (its deadline, a lost replica on either
// side) is stopped wherever it is: its prefill cancelled, or its transfer
// and the KV kept for it let go.

// pdPhase is where a request's remote prefill is.
type pdPhase uint8

const (
	pdNone       pdPhase = iota
	pdPrefilling         // on the prefill replica's engine
	pdWaitingKV          // computed, waiting for KV room on its decode replica
	pdMoving             // its KV cache on the link
)

// pdReq is a request's remote prefill: its sequence on prefill replica
// at, where it is, when its prefill and its transfer ended, and a failing
// transfer's fate.
type pdReq struct {
	seq                  *engine.Seq
	at                   int
	phase                pdPhase
	prefilledAt, movedAt time.Duration
	xferFail             bool      // its transfer fails (kv-transfer-failure)
	xferTimer            sim.Timer // a failed transfer's timeout, when it hangs
	srcLost              bool      // its prefill replica was lost while it waited for KV room
	decodeKV             int64     // KV its decode replica reserved for the pull
}

// DisaggReport is what disaggregated serving did, over the measured
// window: where prompts were prefilled, what moved over the links, and how
// the time to first token of a remotely prefilled request splits.
type DisaggReport struct {
	// RemotePrefills and LocalPrefills count the attempts of the
	// disaggregated models' requests by where their prompt was prefilled.
	RemotePrefills uint64 `json:"remote_prefills"`
	LocalPrefills  uint64 `json:"local_prefills"`
	// Transfers counts the KV transfers that ended, Bytes what they
	// carried; Aborted those stopped by their attempt's end.
	Transfers uint64  `json:"transfers"`
	Bytes     float64 `json:"bytes"`
	Aborted   uint64  `json:"aborted"`
	// Failed counts the transfers that failed (kv-transfer-failure),
	// Recomputed those of them whose decode replica then prefilled the
	// prompt itself (its pool's kv_load_failure_policy: recompute).
	Failed     uint64 `json:"failed"`
	Recomputed uint64 `json:"recomputed"`
	// The time to first token of the remotely prefilled requests that
	// completed, split: Prefill from dispatch to the prefill's end (the
	// prefill replica's queue and the prompt), Transfer the KV's move
	// (the link's latency and its share of the bandwidth), Decode from the
	// transfer's end to the first token (the decode replica's queue and
	// the last prompt token).
	Prefill  stats.Summary `json:"prefill_s"`
	Transfer stats.Summary `json:"transfer_s"`
	Decode   stats.Summary `json:"decode_s"`
}

// disaggWorld carries out the core's disaggregation decisions.
type disaggWorld struct {
	r     *runner
	links []*kvlink.Link // per replica: a decode replica's inbound link; nil for the others
	timer []sim.Timer    // per replica: its link's next event
	// prefilled collects the prefills that ended during an engine's
	// Advance, carried on after it (advance), as first tokens are.
	prefilled []*request
	// waiting is, per decode replica, the prompts computed and waiting
	// for KV room there before their pull starts, in order.
	waiting []kvlink.Queue

	rep                       DisaggReport
	prefill, transfer, decode stats.Sketch
}

// newDisagg builds the links of the decode replicas of the disaggregated
// models; nil when no model is served disaggregated.
func newDisagg(r *runner) (*disaggWorld, error) {
	any := false
	for _, l := range r.p.links {
		any = any || l != nil
	}
	if !any {
		return nil, nil
	}
	d := &disaggWorld{r: r, links: make([]*kvlink.Link, len(r.replicas)), timer: make([]sim.Timer, len(r.replicas)),
		waiting: make([]kvlink.Queue, len(r.replicas))}
	for i, rp := range r.p.replicas {
		pp := &r.p.pools[rp.Pool]
		spec := r.p.links[rp.Model]
		if spec == nil || pp.Spec.Role != "decode" {
			continue
		}
		l, err := kvlink.New(spec.Bandwidth(pp.Spec.GPUsPerReplica), spec.Spec.Latency)
		if err != nil {
			return nil, err
		}
		d.links[i] = l
	}
	return d, nil
}

// start carries out the start of req's attempt on decode replica ri, its
// prompt to be prefilled on replica p: p's faults meet it first (a lost or
// failing prefill replica fails the attempt, observed on p); otherwise its
// prompt joins p's engine.
func (d *disaggWorld) start(req *request, p int) {
	r := d.r
	if req.measured {
		d.rep.RemotePrefills++
	}
	if r.faultState != nil {
		if fate := r.faultAtDispatch(req, p); fate.fail {
			r.failAttempt(req, p, fate)
			return
		}
	}
	ps := r.newSeq()
	*ps = engine.Seq{Tag: req.idx, Prompt: req.seq.Prompt, Output: 1, Blocks: req.seq.Blocks}
	if req.pd == nil {
		req.pd = &pdReq{}
	}
	*req.pd = pdReq{seq: ps, at: p, phase: pdPrefilling}
	r.replicas[p].eng.Add(r.s.Now(), ps)
	r.rearm(p)
}

// local counts an attempt of a disaggregated model prefilled on its decode
// replica.
func (d *disaggWorld) local(req *request) {
	if req.measured && d.r.p.links[d.r.replicas[req.Core.Replica].model] != nil {
		d.rep.LocalPrefills++
	}
}

// done is the prefill replica's Done for req's prompt (engine.Sink): its
// KV cache stays on the replica, held for the transfer, which starts
// after the engine's step (moved).
func (d *disaggWorld) done(req *request) {
	d.r.replicas[req.pd.at].eng.Hold(int64(req.pd.seq.Prompt))
	d.prefilled = append(d.prefilled, req)
}

// moved starts the transfers of the prompts prefilled in the last step:
// the core frees the prefill slot, the KV cache goes on the decode
// replica's link.
func (d *disaggWorld) moved() {
	r := d.r
	now := r.s.Now()
	for _, req := range d.prefilled {
		if req.pd.phase != pdPrefilling {
			continue
		}
		r.freeSeq(req.pd.seq)
		req.pd.seq = nil
		req.pd.phase = pdWaitingKV
		req.pd.prefilledAt = now
		ri := req.Core.Replica
		r.eng.Step(now, reqengine.Event{Kind: reqengine.Prefilled, Req: &req.Req, Replica: req.pd.at})
		d.waiting[ri].Push(uint64(req.idx))
		d.pull(ri)
	}
	clear(d.prefilled)
	d.prefilled = d.prefilled[:0]
}

// pull starts the transfers into decode replica ri that its free KV can
// take, in the order their prompts were computed: the decode replica
// reserves the prompt's KV first, then reads it (vLLM's pull connector:
// a request waits for remote KV with its blocks allocated). One that does
// not fit waits, and those behind it: the replica's KV is taken in order.
func (d *disaggWorld) pull(ri int) {
	r := d.r
	now := r.s.Now()
	stale := func(id uint64) bool {
		req := r.reqs[id]
		return req.pd == nil || req.pd.phase != pdWaitingKV || req.Core.Replica != ri // stopped while it waited
	}
	hold := func(id uint64) bool { return r.replicas[ri].eng.TryHold(int64(r.reqs[id].seq.Prompt + 1)) }
	for _, id := range d.waiting[ri].Take(hold, stale) {
		req := r.reqs[id]
		req.pd.decodeKV = int64(req.seq.Prompt + 1)
		req.pd.phase = pdMoving
		if req.pd.srcLost {
			// Its source is gone: the pull fails as it starts.
			d.failed(req)
			continue
		}
		// Its fate on the link: the ground truth's (kv-transfer-failure),
		// a seeded draw of the attempt's own.
		req.pd.xferFail = false
		if st := r.replicaFault(ri); st.TransferFail > 0 &&
			sched.TransferFate(r.p.sc.Seed, req.Core.ID, req.Life.Attempts, ri) < st.TransferFail {
			req.pd.xferFail = true
			if st.TransferTimeout > 0 {
				// A hang: nothing moves, and the decode side hears of
				// it at its timeout.
				req.pd.xferTimer = r.s.After(st.TransferTimeout, func() {
					if req.pd.phase == pdMoving && req.pd.xferFail {
						d.failed(req)
						r.dispatch()
					}
				})
				continue
			}
		}
		spec := r.p.links[r.replicas[ri].model]
		d.links[ri].Start(now, uint64(req.idx), kvlink.Bytes(spec.KVBytesPerToken, req.seq.Prompt))
		d.arm(ri)
	}
}

// unreserve gives back the KV req's decode replica reserved for its pull.
func (d *disaggWorld) unreserve(req *request) {
	if req.pd.decodeKV == 0 {
		return
	}
	ri := req.Core.Replica
	d.r.replicas[ri].eng.Release(d.r.s.Now(), req.pd.decodeKV)
	req.pd.decodeKV = 0
	d.r.rearm(ri)
	if d.waiting[ri].Len() > 0 {
		d.pull(ri) // the room may take a pull that waited
	}
}

// arm points decode replica ri's link timer at its next event.
func (d *disaggWorld) arm(ri int) {
	d.timer[ri].Stop()
	if at, ok := d.links[ri].Next(); ok {
		d.timer[ri] = d.r.s.At(at, func() { d.arrive(ri) })
	}
}

// arrive carries out the transfers into replica ri that ended: the
// prefill replica lets their KV go, and each request joins the decode
// replica's engine with its prompt's KV in place.
func (d *disaggWorld) arrive(ri int) {
	r := d.r
	now := r.s.Now()
	// A copy: carrying one out may step the link again (a cancel).
	for _, id := range slices.Clone(d.links[ri].Advance(now)) {
		req := r.reqs[id]
		if req.pd.phase != pdMoving {
			continue
		}
		if req.pd.xferFail {
			d.failed(req) // heard of as it would have ended
			continue
		}
		d.release(req)
		req.pd.phase = pdNone
		req.pd.movedAt = now
		if req.measured {
			d.rep.Transfers++
			d.rep.Bytes += kvlink.Bytes(r.p.links[r.replicas[ri].model].KVBytesPerToken, req.seq.Prompt)
		}
		req.seq.Transferred = req.seq.Prompt
		// Joined first, then the reservation given back: an idle replica
		// plans at the release, and admits it with the room it held.
		r.replicas[ri].eng.Add(now, req.seq)
		d.unreserve(req)
		r.rearm(ri)
	}
	d.arm(ri)
	r.dispatch()
}

// failed carries out the failure of req's transfer: the prefill replica
// lets its KV go, and the decode server does what its pool's
// kv_load_failure_policy says — as a real one does, with nothing for the
// gateway to decide: recompute, it prefills the prompt itself; fail
// (vLLM's default), it answers the attempt with an error, which the
// request engine hears of as any server error (the decode replica's
// breaker counts it, the lifecycle retries it).
func (d *disaggWorld) failed(req *request) {
	r := d.r
	if req.pd.srcLost {
		d.release(req) // the lost replica's KV goes with it
	} else {
		d.expire(req)
	}
	req.pd.phase, req.pd.xferFail, req.pd.prefilledAt, req.pd.srcLost = pdNone, false, 0, false
	if req.measured {
		d.rep.Failed++
	}
	ri := req.Core.Replica
	if r.p.pools[r.replicas[ri].pool].Spec.KVLoadFailurePolicy == "recompute" {
		if req.measured {
			d.rep.Recomputed++
		}
		req.seq.Transferred = 0
		r.replicas[ri].eng.Add(r.s.Now(), req.seq)
		d.unreserve(req)
		r.rearm(ri)
		return
	}
	d.unreserve(req)
	r.failAttempt(req, ri, attemptFate{fail: true})
}

// sourceLost carries out the loss of the prefill replica holding req's
// KV while it waits for room on its decode replica or moves: the decode
// server's pull fails (NIXL hears of a peer gone), at once for a moving
// one, as its pull starts for a waiting one, and the server does what its
// kv_load_failure_policy says, as for any failed transfer. It reports
// false when req's prefill is not that far (still prefilling: the
// attempt fails on the prefill replica, as the gateway's prefill leg).
func (d *disaggWorld) sourceLost(req *request) bool {
	if d == nil || req.pd == nil {
		return false
	}
	switch req.pd.phase {
	case pdWaitingKV:
		req.pd.srcLost = true
		return true
	case pdMoving:
		ri := req.Core.Replica
		if !req.pd.xferTimer.Stop() {
			d.links[ri].Cancel(d.r.s.Now(), uint64(req.idx))
			d.arm(ri)
		}
		req.pd.srcLost = true
		d.failed(req)
		return true
	}
	return false
}

// applyRates gives each decode replica's link the rate its faults leave
// it (link-degraded): the bandwidth per GPU they set, or the link's own,
// and the latency they add; called whenever the replicas' fault state is
// recomputed.
func (d *disaggWorld) applyRates() {
	r := d.r
	now := r.s.Now()
	for ri, l := range d.links {
		if l == nil {
			continue
		}
		spec := r.p.links[r.replicas[ri].model]
		gpus := r.p.pools[r.replicas[ri].pool].Spec.GPUsPerReplica
		bw, lat := spec.Bandwidth(gpus), spec.Spec.Latency
		st := r.replicaFault(ri)
		if st.LinkBandwidth > 0 {
			bw = st.LinkBandwidth * 1e9 * float64(max(gpus, 1))
		}
		lat += st.LinkLatency
		if b, t := l.Rate(); b == bw && t == lat {
			continue
		}
		if err := l.SetRate(now, bw, lat); err != nil {
			panic(err) // validated: positive bandwidths, latencies >= 0
		}
		d.arm(ri)
	}
}

// DefaultKVLease (kvlink.DefaultLease) is how long a prefill replica keeps a prompt's KV for a
// decode replica that no longer fetches it, unless its pool says
// (kv_lease_duration): vLLM's NIXL kv_lease_duration default
// (vllm-project/vllm#41383).
const DefaultKVLease = kvlink.DefaultLease

// release lets go of the KV the prefill replica holds for req, now: its
// transfer ended, or its decode replica, alive, aborted it (the prefill
// side hears of both).
func (d *disaggWorld) release(req *request) {
	r := d.r
	r.replicas[req.pd.at].eng.Release(r.s.Now(), int64(req.seq.Prompt))
	r.rearm(req.pd.at)
}

// expire lets go of the KV the prefill replica holds for req when its
// lease runs out: nothing tells the prefill side that the decode side
// gave up (its transfer failed) or is gone; it stops renewing the lease,
// and the prefill replica holds the KV until it expires.
func (d *disaggWorld) expire(req *request) {
	r := d.r
	p, tokens := req.pd.at, int64(req.seq.Prompt)
	lease := r.p.pools[r.replicas[p].pool].Spec.KVLeaseDuration.D()
	if lease == 0 {
		lease = DefaultKVLease
	}
	r.s.After(lease, func() {
		r.replicas[p].eng.Release(r.s.Now(), tokens)
		r.rearm(p)
	})
}

// abort stops req's remote prefill wherever it is: its attempt ended
// early. The core's slots are the engine's to free (Finish). decodeLost:
// its decode replica is gone, so nothing aborts the transfer on the
// prefill side, which keeps the KV until its lease expires.
func (d *disaggWorld) abort(req *request, decodeLost bool) {
	if d == nil || req.pd == nil {
		return
	}
	switch req.pd.phase {
	case pdPrefilling:
		d.r.cancelSeq(req.pd.at, req.pd.seq)
		req.pd.seq = nil
	case pdWaitingKV:
		// Left in its replica's queue: pull skips it.
		if decodeLost {
			d.expire(req)
		} else {
			d.release(req)
		}
	case pdMoving:
		ri := req.Core.Replica
		if !req.pd.xferTimer.Stop() { // a hung one is on no link
			d.links[ri].Cancel(d.r.s.Now(), uint64(req.idx))
			d.arm(ri)
		}
		req.pd.xferFail = false
		d.unreserve(req)
		if decodeLost {
			d.expire(req)
		} else {
			d.release(req)
		}
	default:
		return
	}
	req.pd.phase = pdNone
	if req.measured {
		d.rep.Aborted++
	}
}

// completed records the split of a remotely prefilled request's time to
// first token.
func (d *disaggWorld) completed(req *request) {
	if d == nil || !req.measured || req.pd == nil || req.pd.movedAt == 0 {
		return
	}
	d.prefill.AddDuration(req.pd.prefilledAt - req.dispatchedAt)
	d.transfer.AddDuration(req.pd.movedAt - req.pd.prefilledAt)
	d.decode.AddDuration(req.firstAt - req.pd.movedAt)
}

// linkState is decode replica ri's inbound link now, for a snapshot; nil
// for a replica without one.
func (d *disaggWorld) linkState(ri int) *LinkState {
	if d == nil || d.links[ri] == nil {
		return nil
	}
	r := d.r
	spec := r.p.links[r.replicas[ri].model]
	gpus := r.p.pools[r.replicas[ri].pool].Spec.GPUsPerReplica
	bw, lat := d.links[ri].Rate()
	return &LinkState{Transfers: d.links[ri].Len(), BandwidthGBs: bw / 1e9, OwnGBs: spec.Bandwidth(gpus) / 1e9,
		Latency: lat, OwnLatency: spec.Spec.Latency}
}

// report is the run's DisaggReport; nil without disaggregated models.
func (d *disaggWorld) report() *DisaggReport {
	if d == nil {
		return nil
	}
	rep := d.rep
	rep.Prefill, rep.Transfer, rep.Decode = d.prefill.Summary(), d.transfer.Summary(), d.decode.Summary()
	return &rep
}
