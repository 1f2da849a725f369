package sched

import (
	"math"
	"slices"
	"time"
)

// Prefill/decode disaggregation (issue 34): a model served disaggregated
// has decode pools, which serve it as any pool does (the request is
// queued for and dispatched to a decode replica, which holds its slot
// until the answer ends, as llm-d's and Dynamo's decode-first routing
// does), and prefill pools, whose replicas compute prompts for the decode
// replicas and serve no client themselves. At dispatch the core decides
// where the prompt is prefilled — on a prefill replica, whose KV cache is
// then moved to the decode replica, or locally on the decode replica —
// and picks the prefill replica; the driver carries it out (the prefill,
// the transfer, the decode) and tells the core when the prefill is over
// (PrefillDone), which frees the prefill replica's slot.
//
// The decider, per model:
//
//   - DisaggAlways: every prompt is prefilled remotely. With no prefill
//     replica able to take one (all busy, down or open), nothing is
//     dispatched: requests wait in the queue, and the decode replicas idle
//     (losing a prefill pool stops the model, as it does in an llm-d
//     fleet that always disaggregates).
//   - DisaggConditional: remotely when the prompt is longer than
//     MaxLocalPrefill and fewer than MaxPrefillQueue remote prefills are
//     under way for the model, and a prefill replica can take it;
//     otherwise locally (Dynamo's disaggregated router, with its
//     max_local_prefill_length and max_prefill_queue_size). The prompt's
//     length is its whole length: a decode replica's prefix cache is the
//     engine's, which the core does not see.
//   - DisaggNever: every prompt locally (the prefill pools idle).
//
// A decode pool takes its prefills from the prefill pools of its own
// region (Pool.PrefillPools: a KV cache crosses no region, so no
// jurisdiction). A prefill replica takes up to MaxBatch remote prefills at
// once; the least loaded routable one is picked, the lowest index among
// equals.

// DisaggMode is a model's decider.
type DisaggMode uint8

const (
	DisaggNever DisaggMode = iota
	DisaggAlways
	DisaggConditional
)

// Disagg is how a model served disaggregated is prefilled.
type Disagg struct {
	Mode DisaggMode
	// MaxLocalPrefill and MaxPrefillQueue are DisaggConditional's
	// thresholds (see the file comment); 0 MaxPrefillQueue: no bound.
	MaxLocalPrefill int
	MaxPrefillQueue int
}

// disaggState is what the core keeps per disaggregated model.
type disaggState struct {
	remote int // remote prefills dispatched and not over
}

// decodeGate reports whether a request of model m may be dispatched now
// to decode pool pi as far as its prefill goes: false only when m always
// disaggregates and no prefill replica of pi's can take a prompt.
func (c *Core) decodeGate(now time.Duration, m, pi int) bool {
	d := c.cfg.Models[m].Disagg
	return d == nil || d.Mode != DisaggAlways || c.pickPrefill(now, m, pi) >= 0
}

// prefillFor decides where req, dispatched to a decode replica of model m
// in pool pi, is prefilled: the prefill replica, or -1 for the decode
// replica.
func (c *Core) prefillFor(now time.Duration, req *Request, m, pi int) int {
	d := c.cfg.Models[m].Disagg
	if d == nil || d.Mode == DisaggNever || req.Shadow {
		return -1
	}
	if d.Mode == DisaggConditional {
		if req.Input <= d.MaxLocalPrefill || (d.MaxPrefillQueue > 0 && c.disagg[m].remote >= d.MaxPrefillQueue) {
			return -1
		}
	}
	if c.cfg.PrefixHits != nil {
		return c.pickPrefillByPrefix(req, m, pi)
	}
	return c.pickPrefill(now, m, pi)
}

// pickPrefillByPrefix is pickPrefill with prefix affinity under bounded
// load, as pickByPrefix routes (policy.routing.prefix_affinity): among the
// prefill replicas with room whose load is within a quarter (plus one) of
// the least loaded, the one holding most of the prompt's leading blocks
// wins, then the least loaded, then the lowest index. A prefill replica's
// prefix cache saves the prompt's compute; the transfer still carries it
// whole.
func (c *Core) pickPrefillByPrefix(req *Request, m, pi int) int {
	from := c.cfg.Pools[pi].PrefillPools
	c.cands = c.cands[:0]
	minLoad := math.Inf(1)
	for _, gi := range c.groupsOf[m] {
		g := &c.groups[gi]
		if !slices.Contains(from, g.pool) {
			continue
		}
		minLoad = c.gatherRoom(g, minLoad)
	}
	return c.mostPrefix(req, minLoad)
}

// pickPrefill returns the least-loaded prefill replica of model m that can
// take a prompt for decode pool pi now, or -1.
func (c *Core) pickPrefill(_ time.Duration, m, pi int) int {
	best := -1
	var bestLoad float64
	from := c.cfg.Pools[pi].PrefillPools
	for _, gi := range c.groupsOf[m] {
		g := &c.groups[gi]
		if len(g.heap) == 0 || !slices.Contains(from, g.pool) {
			continue
		}
		r := g.heap[0] // the group's least loaded (fix keeps the heap)
		rs := &c.replicas[r]
		if !rs.hasRoom() {
			continue
		}
		load := float64(rs.inflight) / float64(rs.MaxBatch)
		if best < 0 || load < bestLoad || (load == bestLoad && r < best) {
			best, bestLoad = r, load
		}
	}
	return best
}

// takePrefill gives req's prefill to replica p at now.
func (c *Core) takePrefill(now time.Duration, req *Request, p int) {
	c.occupy(now, p)
	req.prefill = p + 1
	c.disagg[c.replicas[p].Model].remote++
}

// PrefillDone tells the core req's remote prefill is over (its KV cache
// computed, or its attempt ended): the prefill replica's slot is free,
// which may dispatch requests waiting for one. A no-op when req holds no
// prefill replica.
func (c *Core) PrefillDone(now time.Duration, req *Request) {
	if req.prefill == 0 {
		return
	}
	p := req.prefill - 1
	req.prefill = 0
	rs := &c.replicas[p]
	rs.inflight--
	c.poolSlots(now, rs.Pool, -1)
	c.fix(p)
	c.disagg[rs.Model].remote--
	c.fill(now, p)
}

// Prefilling returns the prefill replica req's prompt is computed on, or
// -1 (none, or over).
func (req *Request) Prefilling() int { return req.prefill - 1 }

// fillDecode fills model m's decode replicas: a prefill slot freed or
// back may let requests that wait for one go.
func (c *Core) fillDecode(now time.Duration, m int) {
	if d := c.cfg.Models[m].Disagg; d == nil || d.Mode != DisaggAlways {
		return
	}
	for _, gi := range c.groupsOf[m] {
		g := &c.groups[gi]
		if c.cfg.Pools[g.pool].Prefill {
			continue
		}
		// fill reorders the heap it walks: walk a copy.
		c.fillScratch = append(c.fillScratch[:0], g.heap...)
		for _, r := range c.fillScratch {
			c.fill(now, r)
		}
	}
}
