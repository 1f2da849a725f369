// Package latency is the twin's inference latency model: the step time of
// iteration-level continuous batching as a function of what is in the batch,
// KV-cache sizing, and the built-in profiles measured on real accelerators.
//
// It is pure arithmetic: no time source, no randomness, no I/O. It must not
// import sim or anything above twin/latency.
package latency

import (
	"math"
	"time"
)

// Profile is the measured performance of one model on one replica
// (accelerator type × tensor-parallel degree × runtime):
//
//	step = StepBase + PerSeq·B + PerPrefillToken·P + PerKVToken·K
//
// for B running sequences, P prefill tokens processed in the step and K KV
// tokens held by the sequences that decode in it, never less than MinStep.
// Decode is memory-bound (weights read once per step: StepBase; each
// sequence's KV read once per step: PerKVToken); prefill is compute-bound
// (PerPrefillToken). All costs are in microseconds.
type Profile struct {
	StepBase        float64 // µs per step
	PerSeq          float64 // µs per running sequence per step
	PerPrefillToken float64 // µs per prefill token in the step
	PerKVToken      float64 // µs per KV token held by decoding sequences, per step
	MinStep         float64 // µs; steps never take less (Dynamo's mocker uses 1 ms)

	// MaxBatchedTokens is the prefill token budget of one step (vLLM
	// max_num_batched_tokens). Longer prompts are chunked across steps.
	MaxBatchedTokens int
	// KVTokens is the replica's KV capacity in tokens when measured (the
	// engine's num_gpu_blocks × block_size); 0 means derive it from memory.
	KVTokens int

	// AsyncScheduling is vLLM's async scheduling (on by default since
	// 0.11): the engine schedules step k+1 while step k runs, so a request
	// that arrives during step k joins step k+2, not k+1. It adds about one
	// step to TTFT, which the sim-to-real runs show (docs/fidelity.md).
	AsyncScheduling bool

	// Physics, when set, replaces the linear model: the step time comes
	// from the batch's composition on a placement (physics.go), and the
	// linear costs above are ignored (MinStep and the engine limits still
	// apply).
	Physics *Physics

	// Source says where the numbers come from, for reports and docs.
	Source string
}

// StepBatch returns the duration in µs of a step running b, where running
// is the number of sequences on the replica (the linear model charges each,
// whether or not it has work in this step).
func (p *Profile) StepBatch(running int, b Batch) float64 {
	if p.Physics != nil {
		return math.Max(p.Physics.Step(b), p.MinStep)
	}
	tokens := 0
	for _, c := range b.Chunks {
		tokens += c.Tokens
	}
	return p.Step(running, tokens, b.DecodeKV)
}

// DecodeRun returns the time of step i of a run of pure decode steps as
// a + c·i (before the MinStep floor), for decoders sequences holding kv
// KV tokens when the run starts.
func (p *Profile) DecodeRun(decoders int, kv int64) (a, c float64) {
	if p.Physics != nil {
		return p.Physics.DecodeRun(decoders, kv)
	}
	B := float64(decoders)
	return p.StepBase + p.PerSeq*B + p.PerKVToken*float64(kv), p.PerKVToken * B
}

// Step returns the duration of one engine iteration in microseconds.
func (p *Profile) Step(seqs, prefillTokens int, kvTokens int64) float64 {
	t := p.StepBase + p.PerSeq*float64(seqs) + p.PerPrefillToken*float64(prefillTokens) +
		p.PerKVToken*float64(kvTokens)
	return math.Max(t, p.MinStep)
}

// US converts microseconds to a Duration, rounded to the nanosecond.
func US(us float64) time.Duration { return time.Duration(math.Round(us * 1e3)) }

// KVBytesPerToken is the KV-cache footprint of one token on one replica:
// K and V, for every layer and KV head, split across the tensor-parallel
// group.
func KVBytesPerToken(layers, kvHeads, headDim, dtypeBytes, tp int) float64 {
	return 2 * float64(layers) * float64(kvHeads) * float64(headDim) * float64(dtypeBytes) / float64(tp)
}
