package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ladderConfig: classes interactive (0), batch (1, deferrable) and scrape
// (2, not deferrable); models small (0) and big (1, falling back to small).
func ladderConfig(rungs ...Rung) Config {
	return Config{
		Classes:  []Class{{Name: "interactive"}, {Name: "batch", Deferrable: true}, {Name: "scrape"}},
		Models:   []Model{{Name: "small"}, {Name: "big", Fallbacks: []int{0}}},
		DeferFor: time.Minute,
		Ladder:   rungs,
	}
}

// rung is a rung that fires at saturation 0.5, released under 0.25, held
// 1 m.
func rung(name, action string, mod func(*Rung)) Rung {
	r := Rung{Name: name, Action: action, Trigger: Trigger{Saturation: 0.5}, RecoverBelow: 0.5, Hold: time.Minute}
	if mod != nil {
		mod(&r)
	}
	return r
}

func TestNewLadderWithoutRungsIsNil(t *testing.T) {
	require.Nil(t, NewLadder(ladderConfig()))
}

// step is one evaluation of the ladder: the attempts noted before it, the
// signals it reads, and what it should do.
type step struct {
	at       time.Duration
	ok, fail int // attempts noted before the evaluation
	wait     time.Duration
	sat      float64

	want        string // the change's detail; "" for none
	wantEngaged int
}

func TestLadderEvaluate(t *testing.T) {
	shed := rung("shed", ShedBatch, func(r *Rung) { r.Class = 1; r.Trigger = Trigger{QueueWait: 4 * time.Second} })
	capped := rung("cap", CapOutput, func(r *Rung) { r.MaxOutput = 64; r.Trigger = Trigger{QueueWait: 10 * time.Second} })
	errs := rung("errors", SmallerModel, func(r *Rung) { r.Model = 1; r.Trigger = Trigger{ErrorRate: 0.2}; r.Hold = 0 })
	cache := rung("cache", CachedAnswers, func(r *Rung) {
		r.Class, r.HitRate, r.CacheAge = 0, 0.3, 10*time.Minute
	})
	tests := []struct {
		name  string
		rungs []Rung
		steps []step
	}{
		{name: "quiet: nothing engaged",
			rungs: []Rung{shed, capped},
			steps: []step{{at: 5 * time.Second, wait: 3 * time.Second, sat: 0.9}}},
		{name: "one rung per evaluation, bottom first, even when both fire",
			rungs: []Rung{shed, capped},
			steps: []step{
				{at: 5 * time.Second, wait: 12 * time.Second, sat: 0.5,
					want: "step 1 shed (shed-batch): queue wait 12s, saturation 0.50, error rate 0.00", wantEngaged: 1},
				{at: 10 * time.Second, wait: 12 * time.Second,
					want: "step 2 cap (cap-output): queue wait 12s, saturation 0.00, error rate 0.00", wantEngaged: 2},
				{at: 15 * time.Second, wait: 12 * time.Second, wantEngaged: 2},
			}},
		{name: "the next rung waits for its own trigger",
			rungs: []Rung{shed, capped},
			steps: []step{
				{at: 5 * time.Second, wait: 5 * time.Second, want: "step 1 shed (shed-batch): queue wait 5s, saturation 0.00, error rate 0.00", wantEngaged: 1},
				{at: 10 * time.Second, wait: 9999 * time.Millisecond, wantEngaged: 1},
			}},
		{name: "held for its hold, then released under recover_below, from the top",
			rungs: []Rung{shed, capped},
			steps: []step{
				{at: 5 * time.Second, wait: 10 * time.Second, want: "step 1 shed (shed-batch): queue wait 10s, saturation 0.00, error rate 0.00", wantEngaged: 1},
				{at: 10 * time.Second, wait: 10 * time.Second, want: "step 2 cap (cap-output): queue wait 10s, saturation 0.00, error rate 0.00", wantEngaged: 2},
				{at: 65 * time.Second, wantEngaged: 2}, // cap engaged 55 s: held
				{at: 70 * time.Second, want: "step 2 cap released: queue wait 0s, saturation 0.00, error rate 0.00", wantEngaged: 1},
				// hysteresis: 2 s is under shed's 4 s but not under half of it
				{at: 75 * time.Second, wait: 2 * time.Second, wantEngaged: 1},
				{at: 80 * time.Second, wait: 1999 * time.Millisecond, want: "step 1 shed released: queue wait 1.999s, saturation 0.00, error rate 0.00"},
			}},
		// Release under half of 0.2. The window holds the current 15 s
		// bucket and the one before it: old failures are forgotten.
		{name: "error rate over the last two 15 s buckets",
			rungs: []Rung{errs},
			steps: []step{
				{at: 5 * time.Second, ok: 9, fail: 1}, // 1 of 10
				{at: 10 * time.Second, fail: 2, // 3 of 12
					want: "step 1 errors (smaller-model): queue wait 0s, saturation 0.00, error rate 0.25", wantEngaged: 1},
				{at: 15 * time.Second, ok: 4, wantEngaged: 1},  // 3 of 16, then rolled
				{at: 20 * time.Second, ok: 4, wantEngaged: 1},  // 3 of 16 + 0 of 4
				{at: 30 * time.Second, ok: 10, wantEngaged: 1}, // 3 of 16 + 0 of 14: 0.1 exactly; rolled
				{at: 35 * time.Second, // 0 of 14 + none
					want: "step 1 errors released: queue wait 0s, saturation 0.00, error rate 0.00"},
			}},
		{name: "cached answers disclose their age",
			rungs: []Rung{cache},
			steps: []step{{at: 5 * time.Second, sat: 0.75,
				want: "step 1 cache (cached-answers): queue wait 0s, saturation 0.75, error rate 0.00; cached answers disclosed as up to 10m0s old", wantEngaged: 1}}},
		{name: "a saturation trigger, released under half of it once held",
			rungs: []Rung{rung("a", CapOutput, func(r *Rung) { r.MaxOutput = 1 }), rung("b", CapOutput, func(r *Rung) { r.MaxOutput = 1; r.Trigger = Trigger{Saturation: 0.9} })},
			steps: []step{
				{at: 5 * time.Second, sat: 0.6, want: "step 1 a (cap-output): queue wait 0s, saturation 0.60, error rate 0.00", wantEngaged: 1},
				{at: 70 * time.Second, sat: 0.3, wantEngaged: 1}, // not under 0.25
				{at: 75 * time.Second, sat: 0.2, want: "step 1 a released: queue wait 0s, saturation 0.20, error rate 0.00"},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLadder(ladderConfig(tc.rungs...))
			for i, s := range tc.steps {
				for range s.ok {
					l.NoteAttempt(false)
				}
				for range s.fail {
					l.NoteAttempt(true)
				}
				before := l.Engaged()
				ch, ok := l.Evaluate(s.at, s.wait, s.sat)
				got := ""
				if ok {
					got = ch.Detail
					require.Equal(t, l.Engaged() > before, ch.Engaged, "step %d: engaged, not released", i)
					require.Equal(t, max(before, l.Engaged())-1, ch.Rung, "step %d: the rung", i)
				}
				require.Equal(t, s.want, got, "step %d: Evaluate(%v, %v, %v)", i, s.at, s.wait, s.sat)
				require.Equal(t, s.wantEngaged, l.Engaged(), "step %d: engaged rungs", i)
			}
		})
	}
}

// engage engages every rung of l (they fire at saturation 0.5), one per
// evaluation.
func engage(t *testing.T, l *Ladder) {
	t.Helper()
	for i := range l.Rungs() {
		if _, ok := l.Evaluate(time.Duration(i+1)*LadderEvery, 0, 1); !ok {
			t.Fatalf("rung %d did not engage", i)
		}
	}
}

func TestLadderApply(t *testing.T) {
	shedBatch := rung("shed", ShedBatch, func(r *Rung) { r.Class = 1 })
	shedScrape := rung("shed-scrape", ShedBatch, func(r *Rung) { r.Class = 2 })
	deferScrape := rung("defer-scrape", DeferAsync, func(r *Rung) { r.Class = 2 })
	deferBatch := rung("defer", DeferAsync, func(r *Rung) { r.Class = 1 })
	cap128 := rung("cap128", CapOutput, func(r *Rung) { r.MaxOutput = 128 })
	cap64 := rung("cap64", CapOutput, func(r *Rung) { r.MaxOutput = 64 })
	smaller := rung("smaller", SmallerModel, func(r *Rung) { r.Model = 1 })
	smallerSmall := rung("smaller-small", SmallerModel, func(r *Rung) { r.Model = 0 })
	cache := rung("cache", CachedAnswers, func(r *Rung) { r.Class, r.HitRate, r.CacheAge = 0, 0.3, 10*time.Minute })
	const interactive, batch, scrape = 0, 1, 2
	const small, big = 0, 1
	tests := []struct {
		name                 string
		rungs                []Rung
		idle                 bool // leave the rungs disengaged
		class, model, output int
		again                bool
		draw                 float64 // -1: must not draw
		want                 Effect
		wantReport           LadderReport
	}{
		{name: "nothing engaged: untouched, no draw", rungs: []Rung{shedBatch, cache, cap64, smaller}, idle: true,
			class: interactive, model: big, output: 500, draw: -1,
			want: Effect{Output: 500, Model: big}},
		{name: "shed, deferrable class: deferred for defer_for", rungs: []Rung{shedBatch},
			class: batch, model: big, output: 500, draw: -1,
			want: Effect{Verdict: Defer, After: time.Minute, Output: 500, Model: big}, wantReport: LadderReport{Shed: 1}},
		{name: "shed, class not deferrable: refused", rungs: []Rung{shedScrape},
			class: scrape, model: big, output: 500, draw: -1,
			want: Effect{Verdict: Shed, Output: 500, Model: big}, wantReport: LadderReport{Shed: 1}},
		{name: "defer-async of a class not deferrable: refused", rungs: []Rung{deferScrape},
			class: scrape, model: small, output: 5, draw: -1,
			want: Effect{Verdict: Shed, Output: 5, Model: small}, wantReport: LadderReport{Shed: 1}},
		{name: "deferred again: not counted twice", rungs: []Rung{deferBatch}, again: true,
			class: batch, model: small, output: 5, draw: -1,
			want: Effect{Verdict: Defer, After: time.Minute, Output: 5, Model: small, again: true}},
		{name: "another class passes the shed rung", rungs: []Rung{shedBatch},
			class: interactive, model: small, output: 5, draw: -1,
			want: Effect{Output: 5, Model: small}},
		{name: "cache hit", rungs: []Rung{cache, cap64},
			class: interactive, model: small, output: 500, draw: 0.29,
			want: Effect{Verdict: Cache, CacheAge: 10 * time.Minute, Output: 500, Model: small}, wantReport: LadderReport{Cached: 1}},
		{name: "cache miss: the rungs above apply", rungs: []Rung{cache, cap64},
			class: interactive, model: small, output: 500, draw: 0.3,
			want: Effect{Output: 64, Model: small, Capped: true}, wantReport: LadderReport{Capped: 1}},
		{name: "cache of another class: no draw", rungs: []Rung{cache},
			class: batch, model: small, output: 500, draw: -1,
			want: Effect{Output: 500, Model: small}},
		{name: "shed before the cache: no draw", rungs: []Rung{rung("cache-batch", CachedAnswers, func(r *Rung) { r.Class, r.HitRate = 1, 1 }), shedBatch},
			class: batch, model: small, output: 500, draw: -1,
			want: Effect{Verdict: Defer, After: time.Minute, Output: 500, Model: small}, wantReport: LadderReport{Shed: 1}},
		{name: "the lowest cap wins", rungs: []Rung{cap64, cap128},
			class: interactive, model: small, output: 100, draw: -1,
			want: Effect{Output: 64, Model: small, Capped: true}, wantReport: LadderReport{Capped: 1}},
		{name: "under the cap: not capped", rungs: []Rung{cap64},
			class: interactive, model: small, output: 64, draw: -1,
			want: Effect{Output: 64, Model: small}},
		{name: "smaller model: the first fallback, and capped", rungs: []Rung{smaller, cap64},
			class: scrape, model: big, output: 1000, draw: -1,
			want: Effect{Output: 64, Model: small, Capped: true, Substituted: true}, wantReport: LadderReport{Capped: 1, Substituted: 1}},
		{name: "smaller model of another model: untouched", rungs: []Rung{smaller},
			class: scrape, model: small, output: 10, draw: -1,
			want: Effect{Output: 10, Model: small}},
		{name: "smaller model of a model without fallbacks: untouched", rungs: []Rung{smallerSmall},
			class: scrape, model: small, output: 10, draw: -1,
			want: Effect{Output: 10, Model: small}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLadder(ladderConfig(tc.rungs...))
			if !tc.idle {
				engage(t, l)
			}
			draws := 0
			draw := func() float64 {
				draws++
				if tc.draw < 0 {
					t.Fatal("drew for the cache where no cache rung covers the request")
				}
				return tc.draw
			}
			got := l.Apply(tc.class, tc.model, tc.output, tc.again, draw)
			require.Equal(t, tc.want, got, "Apply(%d, %d, %d, %v)", tc.class, tc.model, tc.output, tc.again)
			if tc.draw >= 0 {
				require.Equal(t, 1, draws, "one draw for the cache")
			}
			l.Count(got)
			rep := l.Report(0)
			rep.Engagements, rep.Engaged = nil, nil
			require.Equal(t, tc.wantReport, rep)
		})
	}
}

// The report counts each rung's engagements and time engaged, closed
// spells and the open one alike, without changing the ladder.
func TestLadderReport(t *testing.T) {
	l := NewLadder(ladderConfig(rung("shed", ShedBatch, func(r *Rung) { r.Class = 1 }),
		rung("cap", CapOutput, func(r *Rung) { r.MaxOutput = 8; r.Hold = 0 })))
	const s = time.Second
	for _, ev := range []struct {
		at  time.Duration
		sat float64
	}{{5 * s, 1}, {10 * s, 1}, {15 * s, 0}, {20 * s, 1}, {25 * s, 0}, {70 * s, 0}} {
		l.Evaluate(ev.at, 0, ev.sat)
	}
	// shed: engaged at 5 s, released at 70 s (held 1 m); cap: 10–15 s and
	// 20–25 s.
	want := LadderReport{Engagements: []int{1, 2}, Engaged: []time.Duration{65 * s, 10 * s}}
	require.Equal(t, want, l.Report(80*s))
	require.Equal(t, 0, l.Engaged())

	l.Evaluate(85*s, 0, 1)
	want = LadderReport{Engagements: []int{2, 2}, Engaged: []time.Duration{65*s + 15*s, 10 * s}}
	require.Equal(t, want, l.Report(100*s), "the open spell counted up to now")
	require.Equal(t, want, l.Report(100*s), "and the ladder left as it was")
}
