package kvlink_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/kvlink"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// drain advances l through every event and returns each transfer's end.
func drain(t *testing.T, l *kvlink.Link) map[uint64]time.Duration {
	t.Helper()
	ends := map[uint64]time.Duration{}
	for steps := 0; l.Len() > 0; steps++ {
		require.Less(t, steps, 10000, "the link never emptied")
		at, ok := l.Next()
		require.True(t, ok)
		for _, id := range l.Advance(at) {
			ends[id] = at
		}
	}
	return ends
}

// The goal: one transfer's time within 1 % of base latency +
// bytes / bandwidth, its bytes computed from the model's own config.
func TestSingleTransferFromModelConfig(t *testing.T) {
	m, err := latency.LookupModel("meta-llama/Llama-3.1-8B-Instruct")
	require.NoError(t, err)
	perToken := m.KVBytesPerToken(2) // bf16 KV
	// 32 layers × 8 KV heads × 128 × K and V × 2 bytes, from config.json.
	require.InDelta(t, 2*32*8*128*2, perToken, 0)
	for _, kind := range kvlink.Kinds() {
		t.Run(kind, func(t *testing.T) {
			s, err := kvlink.Lookup(kind)
			require.NoError(t, err)
			const gpus, tokens = 1, 5000
			bw := s.BandwidthGBs * 1e9 * gpus
			bytes := kvlink.Bytes(perToken, tokens)
			want := s.Latency.Seconds() + bytes/bw

			l, err := kvlink.New(bw, s.Latency)
			require.NoError(t, err)
			l.Start(0, 1, bytes)
			ends := drain(t, l)
			got := ends[1].Seconds()
			require.InEpsilon(t, want, got, 0.01)
			require.InDelta(t, want, got, 1e-9, "exact to the nanosecond")
			require.Equal(t, kvlink.Duration(bytes, bw, s.Latency), ends[1])
			require.InDelta(t, bytes, l.Moved(), 1e-3)
			require.Equal(t, ends[1]-s.Latency, l.Busy())
		})
	}
}

// Fair sharing, exact: transfers under way together divide the bandwidth
// equally, so each end follows from the others' bytes.
func TestFairShare(t *testing.T) {
	const bw = 1e9 // 1 GB/s: a byte a nanosecond
	const lat = 10 * time.Microsecond
	type start struct {
		at    time.Duration
		id    uint64
		bytes float64
	}
	for _, tc := range []struct {
		name   string
		starts []start
		want   map[uint64]time.Duration
	}{
		{
			name:   "three equal, together: all end at latency + 3b/bw",
			starts: []start{{0, 1, 1e6}, {0, 2, 1e6}, {0, 3, 1e6}},
			want:   map[uint64]time.Duration{1: lat + 3*time.Millisecond, 2: lat + 3*time.Millisecond, 3: lat + 3*time.Millisecond},
		},
		{
			// Both move 1 MB by 2 ms; the larger then runs alone.
			name:   "b and 2b together",
			starts: []start{{0, 1, 1e6}, {0, 2, 2e6}},
			want:   map[uint64]time.Duration{1: lat + 2*time.Millisecond, 2: lat + 3*time.Millisecond},
		},
		{
			// 1 alone for 1 ms (1 MB of its 3), then shares with 2: the
			// 2 MB each has left move at half the rate, in 4 ms.
			name:   "staggered: the second joins when the first is a third done",
			starts: []start{{0, 1, 3e6}, {time.Millisecond, 2, 2e6}},
			want:   map[uint64]time.Duration{1: lat + 5*time.Millisecond, 2: lat + 5*time.Millisecond},
		},
		{
			// 1 alone 1 ms (1 MB), then shared: 2 ends after moving 1 MB
			// at half rate (+2 ms), 1 has 1 MB left alone (+1 ms).
			name:   "staggered, the later one smaller",
			starts: []start{{0, 1, 3e6}, {time.Millisecond, 2, 1e6}},
			want:   map[uint64]time.Duration{1: lat + 4*time.Millisecond, 2: lat + 3*time.Millisecond},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := kvlink.New(bw, lat)
			require.NoError(t, err)
			ends := map[uint64]time.Duration{}
			for _, s := range tc.starts {
				// Events due before the next start happen first.
				for {
					at, ok := l.Next()
					if !ok || at > s.at {
						break
					}
					for _, id := range l.Advance(at) {
						ends[id] = at
					}
				}
				l.Start(s.at, s.id, s.bytes)
			}
			for id, at := range drain(t, l) {
				ends[id] = at
			}
			require.Equal(t, tc.want, ends)
		})
	}
}

// A degraded link (RDMA falling back to TCP) slows what is under way from
// that instant; a transfer still in its latency keeps the latency it began
// with, and one started afterwards takes the new one.
func TestSetRateMidTransfer(t *testing.T) {
	l, err := kvlink.New(1e9, time.Millisecond)
	require.NoError(t, err)
	l.Start(0, 1, 4e6) // alone: would end at 1 + 4 = 5 ms
	// At 3 ms half is moved (2 MB); the rest at a tenth of the rate takes
	// 20 ms.
	require.NoError(t, l.SetRate(3*time.Millisecond, 1e8, 5*time.Millisecond))
	l.Start(3*time.Millisecond, 2, 0) // joins at 8 ms under the new latency
	ends := drain(t, l)
	require.Equal(t, 23*time.Millisecond, ends[1])
	require.Equal(t, 8*time.Millisecond, ends[2])
	bw, lat := l.Rate()
	require.Equal(t, 1e8, bw)
	require.Equal(t, 5*time.Millisecond, lat)
}

// A cancelled transfer gives its share back at once and is not counted as
// moved.
func TestCancelFreesShare(t *testing.T) {
	l, err := kvlink.New(1e9, 0)
	require.NoError(t, err)
	l.Start(0, 1, 4e6)
	l.Start(0, 2, 4e6)
	// Together to 2 ms (1 MB each); 2 gone, 1 has 3 MB alone: ends at 5.
	require.True(t, l.Cancel(2*time.Millisecond, 2))
	require.False(t, l.Cancel(2*time.Millisecond, 2), "a transfer is cancelled once")
	require.False(t, l.Cancel(2*time.Millisecond, 99))
	ends := drain(t, l)
	require.Equal(t, map[uint64]time.Duration{1: 5 * time.Millisecond}, ends)
	require.InDelta(t, 4e6, l.Moved(), 1e-3)

	// One cancelled in its latency never moves anything.
	l, err = kvlink.New(1e9, time.Millisecond)
	require.NoError(t, err)
	l.Start(0, 1, 1e6)
	require.True(t, l.Cancel(500*time.Microsecond, 1))
	_, busy := l.Next()
	require.False(t, busy)
	require.Zero(t, l.Busy())
}

// Processor sharing is work-conserving: transfers started together end
// in the order of their sizes, the last when all their bytes have moved at
// the full rate, and every byte of each is counted once — on seeded random
// sizes.
func TestSharingConservesWork(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 1))
	for trial := range 50 {
		const bw = 3.7e9
		n := 1 + rng.IntN(40)
		l, err := kvlink.New(bw, 0)
		require.NoError(t, err)
		sizes := make([]float64, n)
		total := 0.0
		for i := range sizes {
			sizes[i] = math.Round(1e3 + rng.Float64()*1e8)
			total += sizes[i]
			l.Start(0, uint64(i), sizes[i])
		}
		ends := drain(t, l)
		require.Len(t, ends, n)
		last := time.Duration(0)
		for _, e := range ends {
			last = max(last, e)
		}
		require.InDelta(t, total/bw, last.Seconds(), 1e-9*float64(n)+1e-12, "trial %d: the last ends when all bytes moved", trial)
		require.InEpsilon(t, total, l.Moved(), 1e-12)
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			return int(ends[uint64(a)] - ends[uint64(b)])
		})
		for k := 1; k < n; k++ {
			require.LessOrEqual(t, sizes[order[k-1]], sizes[order[k]]+1, "trial %d: the smaller ends first", trial)
		}
	}
}

func TestBadRatesAndKinds(t *testing.T) {
	for _, bw := range []float64{0, -1, math.Inf(1), math.NaN()} {
		_, err := kvlink.New(bw, 0)
		require.ErrorContains(t, err, "must be positive and finite")
	}
	_, err := kvlink.New(1e9, -time.Second)
	require.ErrorContains(t, err, "must not be negative")
	l, err := kvlink.New(1e9, 0)
	require.NoError(t, err)
	require.Error(t, l.SetRate(0, 0, 0))
	_, err = kvlink.Lookup("infiniband")
	require.ErrorContains(t, err, `unknown link kind "infiniband": one of nvlink, rdma, tcp`)
	for _, k := range kvlink.Kinds() {
		s, err := kvlink.Lookup(k)
		require.NoError(t, err)
		require.Positive(t, s.BandwidthGBs, k)
		require.NotEmpty(t, s.Source, "%s: every figure says where it comes from", k)
	}
}

// A transfer that ends at the instant another starts (or is cancelled, or
// the rate changes) is not lost: the next Advance returns it, and Next
// asks for that Advance at once.
func TestEndsSettledByStartAreReturned(t *testing.T) {
	l, err := kvlink.New(1e9, 0)
	require.NoError(t, err)
	l.Start(0, 1, 1e6) // ends at 1 ms
	l.Start(time.Millisecond, 2, 1e6)
	at, ok := l.Next()
	require.True(t, ok)
	require.Equal(t, time.Millisecond, at, "transfer 1 ended and waits to be returned")
	require.Equal(t, 2, l.Len())
	require.Equal(t, []uint64{1}, l.Advance(time.Millisecond))
	require.False(t, l.Cancel(time.Millisecond, 1), "over, so not on the link")
	ends := drain(t, l)
	require.Equal(t, map[uint64]time.Duration{2: 2 * time.Millisecond}, ends)
}
