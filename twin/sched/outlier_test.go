package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// outlierFleet: one model served by two pools of four replicas each, with
// ejection at its defaults unless mod changes them.
func outlierFleet(mod func(*Config)) *Core {
	cfg := Config{
		Tenants: []Tenant{{Name: "any", Weight: 1}},
		Classes: []Class{{Name: "interactive", Priority: 10}},
		Models:  []Model{{Name: "m"}},
		Pools: []Pool{
			{Name: "a", Serves: []bool{true}, KVTokens: []int64{1e6}},
			{Name: "b", Serves: []bool{true}, KVTokens: []int64{1e6}},
		},
		Policy: "fifo", QueueLimit: 100, Strategy: LeastLoaded,
	}
	for p := range 2 {
		for range 4 {
			cfg.Replicas = append(cfg.Replicas, Replica{Pool: p, Model: 0, MaxBatch: 8})
		}
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return c
}

// feed gives every replica n latency samples at now, slow ones taking
// 5× the others' 200 ms, and returns the ejections it caused.
func feed(c *Core, now time.Duration, n int, slow ...int) []Ejection {
	var out []Ejection
	for range n {
		for r := range c.replicas {
			lat := 200 * time.Millisecond
			for _, s := range slow {
				if s == r {
					lat *= 5
				}
			}
			c.ObserveLatency(now, r, lat)
			out = append(out, take(c).Ejections...)
		}
	}
	return out
}

func TestOutlierEjectedAfterMinSamplesAndReturns(t *testing.T) {
	c := outlierFleet(nil)
	// Below the minimum sample count nobody is judged.
	require.Empty(t, feed(c, time.Second, DefaultOutlierMinSamples-1, 2))
	// The fifth sample makes replica 2 (5× its peers) an outlier.
	ej := feed(c, 2*time.Second, 1, 2)
	require.Equal(t, []Ejection{{Replica: 2, At: 2 * time.Second, Until: 32 * time.Second,
		Latency: time.Second, Reference: 200 * time.Millisecond}}, ej)
	require.True(t, c.Ejected(10*time.Second, 2))
	require.Equal(t, 32*time.Second, c.Ready().WakeAt, "asks for a wake-up at the return")

	// No request goes to it while ejected, though it is the least loaded.
	for range 7 {
		c.Arrive(3*time.Second, req(0, 0, 0))
	}
	for _, d := range take(c).Dispatches {
		require.NotEqual(t, 2, d.Replica, "dispatched to an ejected replica")
	}

	// The Tick at the wake-up returns it, and it takes requests again.
	c.Tick(32 * time.Second)
	rd := take(c)
	require.Equal(t, []Ejection{{Replica: 2, At: 32 * time.Second, Returned: true}}, rd.Ejections)
	require.False(t, c.Ejected(32*time.Second, 2))
	c.Arrive(33*time.Second, req(0, 0, 0))
	require.Equal(t, 2, take(c).Dispatches[0].Replica, "the least loaded again")

	// Still slow: judged afresh after MinSamples, ejected for twice as long.
	ej = feed(c, 40*time.Second, DefaultOutlierMinSamples, 2)
	require.Len(t, ej, 1)
	require.Equal(t, 2*DefaultOutlierEjection, ej[0].Until-ej[0].At)
}

func TestOutlierMaxShareKeepsHalfThePool(t *testing.T) {
	for _, tc := range []struct {
		name    string
		share   float64
		slow    []int // in pool a: replicas 0-3
		ejected []int
	}{
		{name: "half of four", share: 0.5, slow: []int{0, 1, 2}, ejected: []int{0, 1}},
		{name: "a quarter of four", share: 0.25, slow: []int{0, 1, 2}, ejected: []int{0}},
		{name: "all allowed keeps one", share: 1, slow: []int{0, 1, 2, 3}, ejected: []int{0, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := outlierFleet(func(cfg *Config) { cfg.Outlier.MaxShare = tc.share })
			// Everyone reaches the minimum sample count first, so that
			// the slow are judged against the whole pool.
			require.Empty(t, feed(c, time.Second, DefaultOutlierMinSamples, tc.slow...))
			var got []int
			for _, e := range feed(c, 2*time.Second, 1, tc.slow...) {
				got = append(got, e.Replica)
			}
			require.Equal(t, tc.ejected, got)
		})
	}
}

func TestOutlierDisabledAndAbsoluteBound(t *testing.T) {
	c := outlierFleet(func(cfg *Config) { cfg.Outlier.Disabled = true })
	require.Empty(t, feed(c, time.Second, 10, 2), "disabled: no ejection")

	// Every replica slow alike: no outlier by the median, but the
	// absolute bound ejects (half of each pool).
	c = outlierFleet(func(cfg *Config) { cfg.Outlier.MaxLatency = 500 * time.Millisecond })
	ej := feed(c, time.Second, DefaultOutlierMinSamples, 0, 1, 2, 3, 4, 5, 6, 7)
	require.Len(t, ej, 4)
}

func TestOutlierConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Outlier
		want string
	}{
		{"factor", Outlier{Factor: 0.5}, "sched: outlier factor 0.5, want > 1 (a multiple of the peers' median)"},
		{"share", Outlier{MaxShare: 2}, "sched: outlier max share 2, want a fraction in (0, 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Policy: "fifo", QueueLimit: 1, Strategy: LeastLoaded, Outlier: tc.o}
			_, err := New(cfg)
			require.EqualError(t, err, tc.want)
		})
	}
}

// TestLowestLatencyRecoversAfterLatencyFault: a pool slowed by a latency
// fault loses its traffic to the other, and gets it back once the fault is
// over — the stale estimate decays until the pool is tried again, and the
// fresh sample is fast.
func TestLowestLatencyRecoversAfterLatencyFault(t *testing.T) {
	c := outlierFleet(func(cfg *Config) {
		cfg.Strategy = LowestLatency
		cfg.Outlier.Disabled = true // routing alone
	})
	poolOf := func(r int) int { return c.replicas[r].Pool }
	// serve sends one request a second for d from start, each answered
	// after lat(pool), and counts what each pool got.
	serve := func(start, d time.Duration, lat func(pool int) time.Duration) [2]int {
		var n [2]int
		for now := start; now < start+d; now += time.Second {
			rq := req(0, 0, 0)
			c.Arrive(now, rq)
			r := take(c).Dispatches[0].Replica
			n[poolOf(r)]++
			c.ObserveLatency(now, r, lat(poolOf(r)))
			c.Finish(now, rq)
			take(c)
		}
		return n
	}
	fast := func(int) time.Duration { return 200 * time.Millisecond }
	serve(0, 10*time.Second, fast)
	// Pool a browned out (+1.5 s) for five minutes: it keeps only the
	// requests that re-measure it.
	during := serve(10*time.Second, 5*time.Minute, func(p int) time.Duration {
		if p == 0 {
			return 1700 * time.Millisecond
		}
		return 200 * time.Millisecond
	})
	require.Less(t, during[0], 20, "pool a during its fault: %v", during)
	// After the fault, within a few half-lives, pool a is tried and
	// found fast: it gets its share back.
	after := serve(5*time.Minute+10*time.Second, 5*time.Minute, fast)
	require.Greater(t, after[0], 100, "pool a after its fault: %v", after)
}

// Ejection judges recent samples only (issue 36). Replicas 0 and 1 of pool
// a are slow through a brownout; with a quarter of four allowed out, 0 is
// ejected (for 5s) and 1 spared. The brownout ends: 1 answers well again.
// When 0 returns and the share frees up, 1 is not ejected on what it did
// during the brownout — with an EWMA it was, its average (0.78s after
// three healthy samples) still over 3 × 200ms and 500ms above it — while a
// replica still slow now is.
func TestOutlierJudgesRecentSamplesOnly(t *testing.T) {
	s := time.Second
	for _, still := range []bool{false, true} {
		c := outlierFleet(func(cfg *Config) {
			cfg.Outlier.MaxShare = 0.25
			cfg.Outlier.BaseEjection = 5 * s
		})
		require.Empty(t, feed(c, s, DefaultOutlierMinSamples, 0, 1))
		ej := feed(c, 2*s, 1, 0, 1)
		require.Len(t, ej, 1)
		require.Equal(t, 0, ej[0].Replica, "the quarter: one of the two slow")
		var slow []int
		if still {
			slow = []int{1}
		}
		require.Empty(t, feed(c, 3*s, 2, slow...), "replica 0 still ejected: no room for 1")
		c.Tick(7 * s) // 0 returns: the quarter is free again
		take(c)
		ej = feed(c, 7*s, 1, slow...)
		if !still {
			require.Empty(t, ej, "a healthy replica ejected on its past")
			continue
		}
		require.Len(t, ej, 1, "still slow now: ejected")
		require.Equal(t, 1, ej[0].Replica)
	}
}

// The window's median: one slow request in five (a long prompt) ejects
// nothing, however many times it comes.
func TestOutlierWindowMedian(t *testing.T) {
	c := outlierFleet(nil)
	require.Empty(t, feed(c, time.Second, DefaultOutlierMinSamples)) // everyone has samples
	var ej []Ejection
	for i := range 4 * DefaultOutlierMinSamples {
		var slow []int
		if i%5 == 0 {
			slow = []int{2}
		}
		ej = append(ej, feed(c, 2*time.Second, 1, slow...)...)
	}
	require.Empty(t, ej, "one slow sample in five")
}
