// Package trace reads request and GPU-job traces: the Azure LLM inference
// traces (2023 and 2024 formats), Mooncake's JSONL traces with prefix-block
// hashes, BurstGPT's CSV, Alibaba's GPU cluster pod traces and node lists,
// and fleetdrill's own canonical JSONL. Readers stream with constant memory,
// open .gz transparently and report a malformed row with its line number.
//
// It must not import the twin or the kernel: it turns files into records.
package trace

import "time"

// BlockTokens is the prompt length covered by one prefix-block hash
// (Mooncake's hash_ids).
const BlockTokens = 512

// Record is one request of a trace. Readers reuse the Record they are given,
// so a caller that keeps one must copy it (and its Blocks slice).
//
// Tenant, User and Session hold raw identifiers as the trace has them. They
// are sensitive: nothing may write them out except the anonymizer, which
// replaces them with keyed pseudonyms.
type Record struct {
	// Time is the arrival time relative to the trace's origin: the first
	// request for traces with absolute timestamps (Azure, Alibaba GenAI),
	// the file's own zero for relative ones (Mooncake, BurstGPT, canonical).
	Time time.Duration

	Tenant  string
	User    string
	Session string
	Class   string // a class or log type from the trace (BurstGPT's Log Type)
	Model   string // the model the trace names, if any

	Input  int // prompt tokens
	Output int // generated tokens

	// Blocks are the prompt's prefix-block hashes, one per BlockTokens
	// tokens, when the trace has them.
	Blocks []uint64

	// Deadline is relative to arrival; 0 means none.
	Deadline time.Duration

	// Service is the execution time the trace measured for the request
	// (Alibaba GenAI's exec_time_seconds); 0 means the trace has none.
	Service time.Duration

	// Line is the record's line in its file, for messages.
	Line int
}

// Clone returns a copy of rec that shares nothing with it, for callers that
// keep records a reader will reuse.
func (rec *Record) Clone() Record {
	c := *rec
	if rec.Blocks != nil {
		c.Blocks = append([]uint64(nil), rec.Blocks...)
	}
	return c
}
