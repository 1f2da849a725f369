package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

func prefillBound() latency.Profile {
	// 1ms per step plus 10µs per prefill token: prefill dominates TTFT.
	return latency.Profile{StepBase: 1000, PerPrefillToken: 10, MaxBatchedTokens: 8192}
}

func TestPrefixHitSkipsPrefill(t *testing.T) {
	r, err := New(Config{Profile: prefillBound(), MaxSeqs: 8, KVTokens: 1 << 20, PrefixCaching: true})
	require.NoError(t, err)
	l := newLog()
	a := &Seq{Tag: 1, Prompt: 2048, Output: 2, Blocks: []uint64{1, 2, 3, 4}}
	b := &Seq{Tag: 2, Prompt: 2048, Output: 2, Blocks: []uint64{1, 2, 3, 4}}
	c := &Seq{Tag: 3, Prompt: 2048, Output: 2, Blocks: []uint64{9, 2, 3, 4}}
	drive(t, r, []arrival{{0, a}, {time.Second, b}, {2 * time.Second, c}}, l)
	// a: 2048 tokens of prefill; b: all four blocks cached, one token
	// computed; c: its first block differs, so nothing after it counts.
	require.Equal(t, (1000+2048*10)*time.Microsecond, l.first[1])
	require.Equal(t, 2047, b.CachedTokens)
	require.Equal(t, time.Second+(1000+1*10)*time.Microsecond, l.first[2])
	require.Zero(t, c.CachedTokens)
	lookups, hits := r.PrefixStats()
	require.Equal(t, uint64(12), lookups)
	require.Equal(t, uint64(4), hits)
}

func TestPrefixCacheShrinksUnderKVPressure(t *testing.T) {
	// 4608 tokens of KV: 9 blocks. A request holding about 3000 tokens
	// leaves room for 3 cached blocks, so an earlier prompt is evicted.
	r, err := New(Config{Profile: prefillBound(), MaxSeqs: 8, KVTokens: 4608, PrefixCaching: true})
	require.NoError(t, err)
	l := newLog()
	a := &Seq{Tag: 1, Prompt: 2048, Output: 1, Blocks: []uint64{1, 2, 3, 4}}
	big := &Seq{Tag: 2, Prompt: 3000, Output: 60, Blocks: []uint64{10, 11, 12, 13, 14, 15}}
	r.Add(0, a)
	next, _ := r.Next()
	r.Advance(next, l) // a done; its 4 blocks cached
	require.Equal(t, 4, r.PrefixHits(a.Blocks))
	r.Add(next, big)
	require.Less(t, r.PrefixHits(a.Blocks), 4, "the running request's KV evicted cached blocks")
	drive(t, r, nil, l)
	require.Equal(t, 3, r.PrefixHits(big.Blocks), "the leading blocks survive eviction, the tail does not")
}

func TestWithoutPrefixCachingNothingIsCached(t *testing.T) {
	r, err := New(Config{Profile: prefillBound(), MaxSeqs: 8, KVTokens: 1 << 20})
	require.NoError(t, err)
	l := newLog()
	a := &Seq{Tag: 1, Prompt: 2048, Output: 2, Blocks: []uint64{1, 2, 3, 4}}
	b := &Seq{Tag: 2, Prompt: 2048, Output: 2, Blocks: []uint64{1, 2, 3, 4}}
	drive(t, r, []arrival{{0, a}, {time.Second, b}}, l)
	require.Equal(t, l.first[1], l.first[2]-time.Second)
	require.Zero(t, r.PrefixHits(a.Blocks))
}
