package dispatch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func mustNew(t testing.TB, cfg Config) Queue {
	t.Helper()
	q, err := New(cfg)
	require.NoError(t, err)
	return q
}

// ids pops q empty and returns the IDs in dispatch order.
func ids(q Queue, now time.Duration) []uint64 {
	var out []uint64
	for it := q.Pop(now); it != nil; it = q.Pop(now) {
		out = append(out, it.ID)
	}
	return out
}

func TestPolicies(t *testing.T) {
	require.Equal(t, []string{"fifo", "priority", "wfq", "edf"}, Policies())
	for _, p := range Policies() {
		q, err := New(Config{Policy: p})
		require.NoError(t, err, p)
		require.Zero(t, q.Len(), p)
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // every line of the error, in order
	}{
		{"unknown policy", Config{Policy: "lifo"},
			[]string{`policy: got "lifo", want one of fifo, priority, wfq, edf`}},
		{"empty policy", Config{},
			[]string{`policy: got "", want one of fifo, priority, wfq, edf`}},
		{"negative aging", Config{Policy: Priority, Aging: -time.Second},
			[]string{`aging: got -1s, want >= 0`}},
		{"aging without priority", Config{Policy: FIFO, Aging: time.Second},
			[]string{`aging: got 1s, want 0 for policy "fifo" (only priority ages)`}},
		{"weights without wfq", Config{Policy: EDF, Weights: []float64{1, 2}},
			[]string{`weights: got 2, want none for policy "edf" (only wfq weighs tenants)`}},
		{"every problem at once", Config{Policy: "WFQ", Aging: -1, Weights: []float64{1, 0, -2, math.NaN(), math.Inf(1)}},
			[]string{
				`policy: got "WFQ", want one of fifo, priority, wfq, edf`,
				`aging: got -1ns, want >= 0`,
				`weights: got 5, want none for policy "WFQ" (only wfq weighs tenants)`,
				`weights[1]: got 0, want a finite number > 0`,
				`weights[2]: got -2, want a finite number > 0`,
				`weights[3]: got NaN, want a finite number > 0`,
				`weights[4]: got +Inf, want a finite number > 0`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := New(tc.cfg)
			require.Nil(t, q)
			require.Error(t, err)
			require.Equal(t, tc.want, strings.Split(err.Error(), "\n"))
		})
	}
}

func TestEmptyAndNotQueued(t *testing.T) {
	for _, p := range Policies() {
		t.Run(p, func(t *testing.T) {
			q := mustNew(t, Config{Policy: p})
			require.Nil(t, q.Pop(0), "Pop on empty")
			require.Nil(t, q.Peek(0), "Peek on empty")
			require.False(t, q.Remove(nil), "Remove(nil)")
			require.False(t, q.Remove(&Item{ID: 1}), "Remove of a never-pushed item")

			a, b := &Item{ID: 1, Arrived: 1}, &Item{ID: 2, Arrived: 2}
			q.Push(2, a)
			q.Push(2, b)
			require.False(t, q.Remove(&Item{ID: 1}), "Remove of an equal but distinct item")

			// An item queued elsewhere, at the same position as a here.
			other := mustNew(t, Config{Policy: p})
			c := &Item{ID: 3}
			other.Push(0, c)
			require.False(t, q.Remove(c), "Remove of another queue's item")
			require.Equal(t, 1, other.Len())
			require.Same(t, c, other.Peek(0))

			require.Same(t, a, q.Peek(2))
			require.Same(t, a, q.Pop(2))
			require.False(t, q.Remove(a), "Remove after Pop")
			require.True(t, q.Remove(b))
			require.False(t, q.Remove(b), "Remove twice")
			require.Zero(t, q.Len())
			require.Nil(t, q.Pop(3))

			// Popped and removed items can be pushed again.
			q.Push(3, b)
			q.Push(3, a)
			require.Equal(t, []uint64{1, 2}, ids(q, 3))
		})
	}
}

func TestPushOfQueuedItemPanics(t *testing.T) {
	for _, p := range Policies() {
		t.Run(p, func(t *testing.T) {
			q, other := mustNew(t, Config{Policy: p}), mustNew(t, Config{Policy: p})
			it := &Item{ID: 1}
			q.Push(0, it)
			require.PanicsWithValue(t, "dispatch: Push of an item that is already queued", func() { q.Push(0, it) })
			require.PanicsWithValue(t, "dispatch: Push of an item that is already queued", func() { other.Push(0, it) })
			require.Equal(t, 1, q.Len())
			require.Zero(t, other.Len())
		})
	}
}

func TestWFQPushRejectsBadItems(t *testing.T) {
	for _, it := range []*Item{
		{Tenant: -1},
		{Cost: -1},
		{Cost: math.NaN()},
		{Cost: math.Inf(1)},
	} {
		q := mustNew(t, Config{Policy: WFQ})
		require.Panics(t, func() { q.Push(0, it) }, "%+v", *it)
		require.Zero(t, q.Len())
	}
}

func TestFIFO(t *testing.T) {
	q := mustNew(t, Config{Policy: FIFO})
	// Arrival order, not push order; equal arrivals by ID. Priority,
	// deadline and tenant are ignored.
	q.Push(5, &Item{ID: 4, Arrived: 5, Priority: 9})
	q.Push(5, &Item{ID: 3, Arrived: 2, Deadline: 1})
	q.Push(5, &Item{ID: 2, Arrived: 2})
	q.Push(5, &Item{ID: 1, Arrived: 3, Tenant: 1})
	require.Equal(t, []uint64{2, 3, 1, 4}, ids(q, 5))
}

func TestPriorityStrict(t *testing.T) {
	q := mustNew(t, Config{Policy: Priority})
	q.Push(0, &Item{ID: 1, Arrived: 0, Priority: 0})
	q.Push(0, &Item{ID: 2, Arrived: 1 * time.Hour, Priority: 1})
	q.Push(0, &Item{ID: 3, Arrived: 2 * time.Hour, Priority: 1})
	q.Push(0, &Item{ID: 4, Arrived: 0, Priority: -1})
	q.Push(0, &Item{ID: 5, Arrived: 3 * time.Hour, Priority: 2})
	// However long the low classes have waited.
	require.Equal(t, []uint64{5, 2, 3, 1, 4}, ids(q, 1000*time.Hour))
}

func TestPriorityAgingOrder(t *testing.T) {
	// Aging 10s: one class is worth 10s of waiting. Effective priorities at
	// t=25s: A 0+25/10 = 2.5, B 2+5/10 = 2.5 (tie: A arrived first),
	// C 1+20/10 = 3, D 3+0 = 3 (tie: C arrived first).
	q := mustNew(t, Config{Policy: Priority, Aging: 10 * time.Second})
	s := time.Second
	q.Push(25*s, &Item{ID: 1, Arrived: 0, Priority: 0})      // A
	q.Push(25*s, &Item{ID: 2, Arrived: 20 * s, Priority: 2}) // B
	q.Push(25*s, &Item{ID: 3, Arrived: 5 * s, Priority: 1})  // C
	q.Push(25*s, &Item{ID: 4, Arrived: 25 * s, Priority: 3}) // D
	require.Equal(t, []uint64{3, 4, 1, 2}, ids(q, 25*s))
}

// TestPriorityAgingPreventsStarvation quantifies what aging buys. A
// priority-0 item waits while fresh priority-2 items keep arriving, rate per
// second, and the server dispatches one item a second. Under strict
// priority it is never dispatched. With aging G it is dispatched ahead of
// every item that arrives Δ·G (Δ = 2 classes) or more after it, and behind
// every one that arrived earlier, so it waits for exactly rate·Δ·G items:
// Δ·G = 20s at rate 1, 40s at rate 2.
func TestPriorityAgingPreventsStarvation(t *testing.T) {
	const (
		delta = 2
		aging = 10 * time.Second
	)
	for _, rate := range []int{1, 2} {
		for _, g := range []time.Duration{0, aging} {
			t.Run(fmt.Sprintf("rate=%d/aging=%v", rate, g), func(t *testing.T) {
				q := mustNew(t, Config{Policy: Priority, Aging: g})
				low := &Item{ID: 0, Priority: 0, Arrived: 0}
				q.Push(0, low)
				id := uint64(1)
				var waited time.Duration = -1
				for sec := range 1000 {
					now := time.Duration(sec) * time.Second
					for k := range rate {
						at := now + time.Duration(k)*time.Second/time.Duration(rate)
						q.Push(at, &Item{ID: id, Priority: delta, Arrived: at})
						id++
					}
					if q.Pop(now) == low {
						waited = now - low.Arrived
						break
					}
				}
				if g == 0 {
					require.Equal(t, time.Duration(-1), waited, "strict priority: starved for 1000s")
					return
				}
				require.Equal(t, time.Duration(rate)*delta*aging, waited)
			})
		}
	}
}

func TestAgingKeySaturates(t *testing.T) {
	const big = math.MaxInt64
	for _, tc := range []struct {
		arrived  time.Duration
		priority int
		aging    time.Duration
		want     int64
	}{
		{10, 2, 3, 4},
		{10, -2, 3, 16},
		{0, math.MaxInt64, 2, math.MinInt64},      // Priority·Aging overflows up
		{0, math.MinInt64, 2, math.MaxInt64},      // and down
		{-big, 1, 1, math.MinInt64},               // Arrived − head overflows down
		{big, -1, 1, math.MaxInt64},               // and up
		{-5, math.MinInt64, 1, math.MaxInt64 - 4}, // exact up to the bound
		{5, math.MinInt64, 1, math.MaxInt64},      // and saturating past it
	} {
		got := agingKey(tc.arrived, tc.priority, tc.aging)
		require.Equal(t, tc.want, got, "agingKey(%d, %d, %d)", tc.arrived, tc.priority, tc.aging)
	}
	// Saturation keeps the order monotone in both arguments.
	for p := -3; p <= 3; p++ {
		require.LessOrEqual(t, agingKey(big, p+1, time.Hour*1e6), agingKey(big, p, time.Hour*1e6))
		require.LessOrEqual(t, agingKey(-big, p, time.Hour*1e6), agingKey(big, p, time.Hour*1e6))
	}
}

func TestEDFOrder(t *testing.T) {
	q := mustNew(t, Config{Policy: EDF})
	q.Push(0, &Item{ID: 1, Arrived: 1})                // no deadline
	q.Push(0, &Item{ID: 2, Arrived: 2, Deadline: 9})   //
	q.Push(0, &Item{ID: 3, Arrived: 0})                // no deadline, earlier
	q.Push(0, &Item{ID: 4, Arrived: 3, Deadline: 5})   //
	q.Push(0, &Item{ID: 5, Arrived: 1, Deadline: 9})   // same deadline as 2, earlier
	q.Push(0, &Item{ID: 6, Arrived: 9, Deadline: -10}) // already past: first
	require.Equal(t, []uint64{6, 4, 5, 2, 3, 1}, ids(q, 0))
}

// TestEDFMeetsFeasibleDeadlines builds instances that are feasible by
// construction: n requests wait at t=0, the server dispatches one a second,
// and each request's dispatch deadline is its slot in a random schedule
// plus random slack. EDF is optimal here (an exchange argument), so it must
// meet every deadline; FIFO, in the random arrival order, misses some.
func TestEDFMeetsFeasibleDeadlines(t *testing.T) {
	const n = 50
	var fifoMissed, fifoInstancesMissed int
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 0xedf))
		items := make([]Item, n)
		slot := rng.Perm(n)
		for i := range items {
			items[i] = Item{
				ID:       uint64(i),
				Arrived:  -time.Duration(n-i) * time.Millisecond, // arrival order = index
				Deadline: time.Duration(slot[i]+rng.IntN(3)) * time.Second,
			}
			if items[i].Deadline == 0 {
				items[i].Deadline = time.Nanosecond // 0 means none
			}
		}
		missed := func(policy string) int {
			q := mustNew(t, Config{Policy: policy})
			for i := range items {
				it := items[i] // a fresh copy: not queued
				q.Push(0, &it)
			}
			m := 0
			for sec := 0; q.Len() > 0; sec++ {
				now := time.Duration(sec) * time.Second
				if it := q.Pop(now); now > it.Deadline {
					m++
				}
			}
			return m
		}
		require.Zero(t, missed(EDF), "seed %d: edf missed a feasible deadline", seed)
		if m := missed(FIFO); m > 0 {
			fifoMissed += m
			fifoInstancesMissed++
		}
	}
	t.Logf("fifo missed %d deadlines in %d of 20 feasible instances; edf none", fifoMissed, fifoInstancesMissed)
	require.Equal(t, 20, fifoInstancesMissed, "fifo should miss in every random instance")
}

// TestWFQFairnessBound keeps four tenants with weights 1, 2, 3 and 0.5
// backlogged with random costs (1 to 4000 tokens, the spread of LLM
// requests) and checks SFQ's bound on every pair over every run of
// consecutive dispatches: |W_f/w_f − W_m/w_m| <= Cmax_f/w_f + Cmax_m/w_m.
// Then the long-run token shares must match the weights' to within 1%.
func TestWFQFairnessBound(t *testing.T) {
	weights := []float64{1, 2, 3, 0.5}
	const pops = 20000
	for seed := range uint64(5) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0xfa1))
			q := mustNew(t, Config{Policy: WFQ, Weights: weights})
			var id uint64
			now := time.Duration(0)
			push := func(tenant int) {
				id++
				q.Push(now, &Item{ID: id, Tenant: tenant, Arrived: now, Cost: float64(1 + rng.IntN(4000))})
			}
			for f := range weights {
				for range 8 {
					push(f)
				}
			}
			T := len(weights)
			w := make([]float64, T)    // tokens dispatched per tenant so far
			cmax := make([]float64, T) // largest cost dispatched per tenant
			// lo and hi of W_f/w_f − W_m/w_m over all prefixes, per pair.
			lo, hi := make([]float64, T*T), make([]float64, T*T)
			for range pops {
				now += time.Millisecond
				it := q.Pop(now)
				w[it.Tenant] += it.Cost
				cmax[it.Tenant] = max(cmax[it.Tenant], it.Cost)
				push(it.Tenant) // every tenant stays backlogged
				for f := range T {
					for m := range T {
						d := w[f]/weights[f] - w[m]/weights[m]
						lo[f*T+m], hi[f*T+m] = min(lo[f*T+m], d), max(hi[f*T+m], d)
					}
				}
			}
			total, wsum := 0.0, 0.0
			for f := range T {
				total += w[f]
				wsum += weights[f]
				for m := range T {
					bound := cmax[f]/weights[f] + cmax[m]/weights[m]
					require.LessOrEqual(t, hi[f*T+m]-lo[f*T+m], bound,
						"tenants %d and %d: spread of normalized service over some interval exceeds the SFQ bound", f, m)
				}
			}
			for f := range T {
				share, want := w[f]/total, weights[f]/wsum
				require.InDelta(t, want, share, 0.01*want, "tenant %d share", f)
			}
		})
	}
}

// TestWFQNoCreditNoDebt: a tenant that had the queue to itself is not
// punished when another arrives, and an idle tenant banks no credit; from
// the moment both are backlogged, the bound holds as if they had just met.
func TestWFQNoCreditNoDebt(t *testing.T) {
	q := mustNew(t, Config{Policy: WFQ})
	var id uint64
	push := func(tenant int, cost float64) {
		id++
		q.Push(0, &Item{ID: id, Tenant: tenant, Arrived: time.Duration(id), Cost: cost})
	}
	// Tenant 0 alone, and never idle, so one busy period: 1000 dispatches
	// of 100 tokens while tenant 1 has nothing queued.
	push(0, 100)
	for range 1000 {
		push(0, 100)
		require.Equal(t, 0, q.Pop(0).Tenant)
	}
	for range 3 {
		push(0, 100)
		push(1, 100)
	}
	// Tenant 1 arrives and they alternate at once. Tenant 1 starts at v,
	// the start tag of tenant 0's last dispatch, one item (100 tokens)
	// below tenant 0's next start tag, so it goes first: with credit it
	// would go three times in a row, with debt for tenant 0 likewise.
	var got []int
	for q.Len() > 0 {
		got = append(got, q.Pop(0).Tenant)
	}
	require.Equal(t, []int{1, 0, 1, 0, 1, 0, 0}, got)
}

// TestWFQForgetsWhenIdle: once the queue empties, the busy period is over
// and past service no longer counts: tenants that then arrive together start
// level and go in arrival order.
func TestWFQForgetsWhenIdle(t *testing.T) {
	q := mustNew(t, Config{Policy: WFQ})
	for i := range 100 {
		q.Push(0, &Item{ID: uint64(i), Tenant: 0, Arrived: time.Duration(i), Cost: 1000})
	}
	require.Len(t, ids(q, 0), 100)
	q.Push(0, &Item{ID: 200, Tenant: 0, Arrived: 200, Cost: 10})
	q.Push(0, &Item{ID: 201, Tenant: 1, Arrived: 201, Cost: 10})
	q.Push(0, &Item{ID: 202, Tenant: 0, Arrived: 202, Cost: 10})
	q.Push(0, &Item{ID: 203, Tenant: 1, Arrived: 203, Cost: 10})
	require.Equal(t, []uint64{200, 201, 202, 203}, ids(q, 0))
}

// TestWFQRemoveDoesNotCharge: a removed item never costs its tenant
// anything, even when it was the head.
func TestWFQRemoveDoesNotCharge(t *testing.T) {
	q := mustNew(t, Config{Policy: WFQ})
	big := &Item{ID: 1, Tenant: 0, Arrived: 0, Cost: 1e6}
	q.Push(0, big)
	for i := range 3 {
		q.Push(0, &Item{ID: uint64(10 + i), Tenant: 0, Arrived: time.Duration(10 + i), Cost: 10})
		q.Push(0, &Item{ID: uint64(20 + i), Tenant: 1, Arrived: time.Duration(20 + i), Cost: 10})
	}
	require.True(t, q.Remove(big))
	require.Equal(t, []uint64{10, 20, 11, 21, 12, 22}, ids(q, 0))
}

func TestWFQTiesByArrival(t *testing.T) {
	// Tenants that become backlogged at the same virtual time tie on start
	// tags and go by their heads' arrival; within a tenant, arrival order.
	q := mustNew(t, Config{Policy: WFQ})
	q.Push(0, &Item{ID: 1, Tenant: 2, Arrived: 5, Cost: 1})
	q.Push(0, &Item{ID: 2, Tenant: 0, Arrived: 7, Cost: 1})
	q.Push(0, &Item{ID: 3, Tenant: 1, Arrived: 6, Cost: 1})
	q.Push(0, &Item{ID: 4, Tenant: 1, Arrived: 1, Cost: 1}) // new head of tenant 1
	require.Equal(t, []uint64{4, 1, 2, 3}, ids(q, 0))
}

// TestSteadyStateAllocatesNothing pins the claim in doc.go.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	for _, p := range Policies() {
		t.Run(p, func(t *testing.T) {
			q, items := steadyQueue(t, Config{Policy: p}, 1000)
			now, i := time.Hour, 0
			allocs := testing.AllocsPerRun(1000, func() {
				now += time.Millisecond
				i++
				it := q.Pop(now)
				refill(it, uint64(len(items)+i), now, i)
				q.Push(now, it)
				victim := items[i%len(items)]
				if q.Remove(victim) {
					q.Push(now, victim)
				}
			})
			require.Zero(t, allocs)
			require.Equal(t, 1000, q.Len())
		})
	}
}

// steadyQueue returns a queue holding n items, and the items.
func steadyQueue(t testing.TB, cfg Config, n int) (Queue, []*Item) {
	if cfg.Policy == WFQ && cfg.Weights == nil {
		cfg.Weights = []float64{1, 2, 3, 4, 1, 1, 0.5, 8}
	}
	q := mustNew(t, cfg)
	items := make([]*Item, n)
	for i := range items {
		items[i] = &Item{}
		refill(items[i], uint64(i), time.Duration(i)*time.Millisecond, i)
		q.Push(items[i].Arrived, items[i])
	}
	return q, items
}

// refill makes it a fresh request arriving at now, with fields that vary
// with i and no randomness in the loop.
func refill(it *Item, id uint64, now time.Duration, i int) {
	h := uint64(i) * 0x9e3779b97f4a7c15
	*it = Item{
		ID:       id,
		Tenant:   int(h>>60) & 7,
		Priority: int(h>>56) & 3,
		Arrived:  now,
		Deadline: now + time.Duration(h>>40&0xffff)*time.Millisecond,
		Cost:     float64(1 + h>>20&0xfff),
	}
}
