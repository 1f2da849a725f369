package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// disaggFixture: model 0 served disaggregated; decode pool 0 (two
// replicas, batch 4) in region A fed by prefill pool 1 (one replica,
// batch 1); decode pool 2 (one replica) in region B, fed by prefill pool 3
// (one replica).
func disaggFixture(d Disagg) *Core {
	return fixture(func(cfg *Config) {
		cfg.Models = []Model{{Name: "m", Disagg: &d}}
		cfg.Pools = []Pool{
			{Name: "decode-a", Serves: []bool{true}, KVTokens: []int64{1e6}, PrefillPools: []int{1}},
			{Name: "prefill-a", Serves: []bool{false}, KVTokens: []int64{1e6}, Prefill: true},
			{Name: "decode-b", Serves: []bool{true}, KVTokens: []int64{1e6}, PrefillPools: []int{3}},
			{Name: "prefill-b", Serves: []bool{false}, KVTokens: []int64{1e6}, Prefill: true},
		}
		cfg.Replicas = []Replica{
			{Pool: 0, MaxBatch: 4}, {Pool: 0, MaxBatch: 4}, {Pool: 1, MaxBatch: 1},
			{Pool: 2, MaxBatch: 4}, {Pool: 3, MaxBatch: 1},
		}
		cfg.QueueLimit = 10
	})
}

func disaggDispatched(c *Core) (decode, prefill []int) {
	for _, d := range take(c).Dispatches {
		decode = append(decode, d.Replica)
		prefill = append(prefill, d.Req.Prefilling())
	}
	return decode, prefill
}

func TestDisaggAlwaysWaitsForAPrefillSlot(t *testing.T) {
	c := disaggFixture(Disagg{Mode: DisaggAlways})
	a, b, x := req(0, 0, 0), req(0, 0, 0), req(0, 0, 0)
	require.Equal(t, Dispatched, c.Arrive(0, a).Outcome)
	require.Equal(t, Dispatched, c.Arrive(0, b).Outcome, "region B's decode pool has its own prefill replica")
	dec, pre := disaggDispatched(c)
	require.Equal(t, []int{0, 3}, dec)
	require.Equal(t, []int{2, 4}, pre, "each decode pool prefills in its own region")
	// Decode slots are free, but no prefill replica is: it waits.
	require.Equal(t, Queued, c.Arrive(0, x).Outcome)
	require.Empty(t, take(c).Dispatches)

	// a's prefill is over: its prefill slot goes to x, a keeps decoding.
	c.PrefillDone(time.Second, a)
	require.Equal(t, -1, a.Prefilling())
	require.Equal(t, 0, a.Replica)
	dec, pre = disaggDispatched(c)
	require.Equal(t, []int{1}, dec, "the least-loaded decode replica")
	require.Equal(t, []int{2}, pre)
	c.PrefillDone(time.Second, a) // a second call changes nothing
	require.Equal(t, 1, c.Inflight(2))

	// Finishing a request whose prefill is under way frees both slots.
	c.Finish(2*time.Second, x)
	require.Zero(t, c.Inflight(2))
	require.Zero(t, c.Inflight(1))
	require.Equal(t, -1, x.Prefilling())
}

func TestDisaggAlwaysStopsWithItsPrefillPoolAndResumes(t *testing.T) {
	c := disaggFixture(Disagg{Mode: DisaggAlways})
	c.SetReady(0, 2, false) // region A's prefill replica is lost
	r := req(0, 0, 0)
	r.Tenant = 0
	// Region B's pool takes it: its prefill replica is up.
	require.Equal(t, Dispatched, c.Arrive(0, r).Outcome)
	dec, _ := disaggDispatched(c)
	require.Equal(t, []int{3}, dec)
	w := req(0, 0, 0)
	require.Equal(t, Queued, c.Arrive(0, w).Outcome, "B's prefill slot is taken, A's pool is down")
	require.Empty(t, take(c).Dispatches)
	c.SetReady(time.Minute, 2, true)
	dec, pre := disaggDispatched(c)
	require.Equal(t, []int{0}, dec, "the prefill replica back lets the decode pool take the waiting request")
	require.Equal(t, []int{2}, pre)
}

func TestDisaggConditionalAndNever(t *testing.T) {
	c := disaggFixture(Disagg{Mode: DisaggConditional, MaxLocalPrefill: 500, MaxPrefillQueue: 1})
	short := req(0, 0, 0) // 100 tokens
	long := req(0, 0, 0)
	long.Input = 4000
	long2 := req(0, 0, 0)
	long2.Input = 4000
	for _, r := range []*Request{short, long, long2} {
		require.Equal(t, Dispatched, c.Arrive(0, r).Outcome)
	}
	_, pre := disaggDispatched(c)
	require.Equal(t, []int{-1, 2, -1}, pre,
		"short: local; long: remote; the second long: local, one remote prefill is the queue's bound")

	c = disaggFixture(Disagg{Mode: DisaggNever})
	long = req(0, 0, 0)
	long.Input = 4000
	require.Equal(t, Dispatched, c.Arrive(0, long).Outcome)
	_, pre = disaggDispatched(c)
	require.Equal(t, []int{-1}, pre)

	// A prefill pool serves no client, whatever the mode.
	c = disaggFixture(Disagg{Mode: DisaggConditional, MaxLocalPrefill: 500})
	for range 9 {
		c.Arrive(0, req(0, 0, 0))
	}
	dec, _ := disaggDispatched(c)
	require.NotContains(t, dec, 2)
	require.NotContains(t, dec, 4)
}

// A prefill replica's breaker closing is room for the decode replicas
// waiting for one, as a freed slot or a load's end is.
func TestDisaggBreakerClosingReleasesTheQueue(t *testing.T) {
	c := disaggFixture(Disagg{Mode: DisaggAlways})
	c.health = Health{Threshold: 1, OpenFor: time.Minute}
	c.SetReady(0, 4, false) // region B's prefill replica is away
	c.Observe(0, 2, false)  // region A's opens
	require.Equal(t, Open, c.Breaker(0, 2))
	w := req(0, 0, 0)
	require.Equal(t, Queued, c.Arrive(time.Second, w).Outcome)
	require.Empty(t, take(c).Dispatches)
	c.Observe(2*time.Minute, 2, true) // its trial probe answers, once OpenFor has passed
	dec, pre := disaggDispatched(c)
	require.Equal(t, []int{0}, dec)
	require.Equal(t, []int{2}, pre)
}

// With prefix affinity, the prefill replica holding most of the prompt's
// leading blocks takes it, within the load bound; without, the least
// loaded does.
func TestDisaggPrefillByPrefix(t *testing.T) {
	d := Disagg{Mode: DisaggAlways}
	c := fixture(func(cfg *Config) {
		cfg.Models = []Model{{Name: "m", Disagg: &d}}
		cfg.Pools = []Pool{
			{Name: "decode", Serves: []bool{true}, KVTokens: []int64{1e6}, PrefillPools: []int{1}},
			{Name: "prefill", Serves: []bool{false}, KVTokens: []int64{1e6}, Prefill: true},
		}
		cfg.Replicas = []Replica{{Pool: 0, MaxBatch: 8}, {Pool: 1, MaxBatch: 4}, {Pool: 1, MaxBatch: 4}}
		cfg.QueueLimit = 10
		// Replica 2 holds the prompts' prefix; the decode replica nothing.
		cfg.PrefixHits = func(_ *Request, r int) int {
			if r == 2 {
				return 3
			}
			return 0
		}
	})
	a := req(0, 0, 0)
	require.Equal(t, Dispatched, c.Arrive(0, a).Outcome)
	require.Equal(t, 2, a.Prefilling(), "the replica with the prefix, not the lowest index")
	b := req(0, 0, 0)
	require.Equal(t, Dispatched, c.Arrive(0, b).Outcome)
	require.Equal(t, 2, b.Prefilling(), "within the bound: 1 in flight against 1.25×0+1")
	x := req(0, 0, 0)
	require.Equal(t, Dispatched, c.Arrive(0, x).Outcome)
	require.Equal(t, 1, x.Prefilling(), "past the bound (2 in flight): the least loaded, prefix or not")
}
