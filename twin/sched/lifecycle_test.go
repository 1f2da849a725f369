package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// half is a draw that always gives 0.5, so backoffs are predictable.
func half() float64 { return 0.5 }

// noDraw fails the test if the lifecycle draws when it should not.
func noDraw(t *testing.T) func() float64 {
	return func() float64 { t.Fatal("drew a backoff where none is due"); return 0 }
}

func TestLifecycleOffered(t *testing.T) {
	policy := RetryPolicy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: 8 * time.Second, Budget: 0.2}
	tests := []struct {
		name          string
		retryRejected bool
		life          Life
		d             Decision
		want          Next
		wantLife      Life
		draws         bool
	}{
		{name: "dispatched: admitted for the first time",
			d:        Decision{Outcome: Dispatched},
			want:     Next{Action: Wait, FirstAdmit: true},
			wantLife: Life{Attempts: 1, Admitted: true}},
		{name: "queued after an earlier admission: not first",
			life:     Life{Attempts: 1, Admitted: true, Deferrals: 0},
			d:        Decision{Outcome: Queued},
			want:     Next{Action: Wait},
			wantLife: Life{Attempts: 2, Admitted: true}},
		{name: "deferred: offer again after the core's hint, no budget",
			d:        Decision{Outcome: Deferred, Reason: ReasonQueueFull, RetryAfter: 40 * time.Second},
			want:     Next{Action: Reoffer, After: 40 * time.Second, Reason: ReasonQueueFull},
			wantLife: Life{Attempts: 1, Deferrals: 1}},
		{name: "rejected, clients do not retry refusals",
			d:        Decision{Outcome: Rejected, Reason: ReasonTenantTokens, RetryAfter: 3 * time.Second},
			want:     Next{Action: Refuse, Reason: ReasonTenantTokens, RetryAfter: 3 * time.Second},
			wantLife: Life{Attempts: 1}},
		{name: "rejected, retried after at least the hint",
			retryRejected: true,
			d:             Decision{Outcome: Rejected, Reason: ReasonQueueFull, RetryAfter: 3 * time.Second},
			want:          Next{Action: Reoffer, After: 3 * time.Second, Retry: true, Reason: ReasonQueueFull},
			wantLife:      Life{Attempts: 1, Retries: 1, InRetry: true}, draws: true},
		{name: "no route is never retried",
			retryRejected: true,
			d:             Decision{Outcome: Rejected, Reason: ReasonNoRoute, Detail: "2 pools skipped: 2 outside jurisdiction eu"},
			want:          Next{Action: Refuse, Reason: ReasonNoRoute, Detail: "2 pools skipped: 2 outside jurisdiction eu"},
			wantLife:      Life{Attempts: 1}},
		{name: "rejected at the last attempt: refused",
			retryRejected: true,
			life:          Life{Attempts: 2, Retries: 1, InRetry: true},
			d:             Decision{Outcome: Rejected, Reason: ReasonQueueFull, RetryAfter: time.Second},
			want:          Next{Action: Refuse, Reason: ReasonQueueFull, RetryAfter: time.Second},
			wantLife:      Life{Attempts: 3, Retries: 1, InRetry: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lc := NewLifecycle(policy, tt.retryRejected)
			lc.Begin()
			if tt.life.InRetry {
				lc.retrying = 1
			}
			draw := noDraw(t)
			if tt.draws {
				draw = half
			}
			l := tt.life
			got := lc.Offered(&l, tt.d, draw)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.wantLife, l)
		})
	}
}

// dispatched begins one request under a policy of maxAttempts (budget 1)
// and has the core dispatch it.
func dispatched(t *testing.T, maxAttempts int) (*Lifecycle, *Life) {
	t.Helper()
	policy := RetryPolicy{MaxAttempts: maxAttempts, Backoff: time.Second, MaxBackoff: 8 * time.Second, Budget: 1}
	lc := NewLifecycle(policy, false)
	lc.Begin()
	var l Life
	require.Equal(t, Wait, lc.Offered(&l, Decision{Outcome: Dispatched}, noDraw(t)).Action)
	return lc, &l
}

func TestLifecycleFailed(t *testing.T) {
	lc, lp := dispatched(t, 2)
	l := *lp

	// A 429 with Retry-After: the core keeps the pool out of routing that
	// long; the request only backs off (half of the first backoff) and may
	// go elsewhere.
	n := lc.Failed(&l, AttemptThrottled, 5*time.Second, half)
	require.Equal(t, Next{Action: Reoffer, After: 500 * time.Millisecond, Retry: true}, n)
	require.True(t, l.Throttled)
	now, peak := lc.Retrying()
	require.Equal(t, 1, now)
	require.Equal(t, 1, peak)

	// The second attempt is throttled too: out of attempts, refused for the
	// provider's quota.
	require.Equal(t, Wait, lc.Offered(&l, Decision{Outcome: Queued}, noDraw(t)).Action)
	n = lc.Failed(&l, AttemptThrottled, 7*time.Second, noDraw(t))
	require.Equal(t, Next{Action: GiveUp, Reason: ReasonUpstreamQuota, RetryAfter: 7 * time.Second}, n)

	// An error at the last attempt fails without a reason.
	l.Throttled = false
	n = lc.Failed(&l, AttemptError, 0, noDraw(t))
	require.Equal(t, Next{Action: GiveUp}, n)

	lc.Finish(&l)
	lc.Release()
	now, peak = lc.Retrying()
	require.Zero(t, now, "a finished request leaves the budget")
	require.Equal(t, 1, peak)
	require.Zero(t, lc.Live())
}

// TestLifecycleCutStreamFails: an attempt cut after its first tokens
// reached the client gives up with attempts and budget to spare, where the
// same failure before the first token is retried.
func TestLifecycleCutStreamFails(t *testing.T) {
	lc, lp := dispatched(t, 3)
	l := *lp
	require.Equal(t, Reoffer, lc.Failed(&l, AttemptError, 0, half).Action, "an error before the first token is retried")
	require.Equal(t, Wait, lc.Offered(&l, Decision{Outcome: Dispatched}, noDraw(t)).Action)
	n := lc.Failed(&l, AttemptCut, 0, noDraw(t))
	require.Equal(t, Next{Action: GiveUp}, n, "a stream cut after its first tokens fails: no second answer can be spliced on")
	require.False(t, l.Throttled)
	require.Equal(t, 1, l.Retries, "the cut is not counted a retry")
}

// spentBudget begins RetryFloor+1 requests under a zero budget and fails
// each once: the first RetryFloor retry, the last gives up, the floor
// spent.
func spentBudget(t *testing.T) (*Lifecycle, []Life) {
	t.Helper()
	policy := RetryPolicy{MaxAttempts: 5, Backoff: time.Millisecond, MaxBackoff: time.Second, Budget: 0}
	lc := NewLifecycle(policy, false)
	lives := make([]Life, RetryFloor+1)
	for i := range lives {
		lc.Begin()
		lc.Offered(&lives[i], Decision{Outcome: Dispatched}, noDraw(t))
	}
	for i := range RetryFloor {
		require.Equal(t, Reoffer, lc.Failed(&lives[i], AttemptError, 0, half).Action, "request %d within the floor", i)
	}
	require.Equal(t, GiveUp, lc.Failed(&lives[RetryFloor], AttemptError, 0, noDraw(t)).Action, "the floor is spent")
	return lc, lives
}

// TestLifecycleBudget: with the budget spent, a request not already retrying
// may not start; one already counted may go on.
func TestLifecycleBudget(t *testing.T) {
	lc, lives := spentBudget(t)
	last := &lives[RetryFloor]
	require.False(t, last.InRetry)
	// One already retrying retries again.
	lc.Offered(&lives[0], Decision{Outcome: Dispatched}, noDraw(t))
	require.Equal(t, Reoffer, lc.Failed(&lives[0], AttemptError, 0, half).Action)
	require.Equal(t, 2, lives[0].Retries)
	_, peak := lc.Retrying()
	require.Equal(t, RetryFloor, peak)
}

// TestLifecycleIgnoreRetryAfter: a retry storm retries at once and draws
// nothing, whatever the budget.
func TestLifecycleIgnoreRetryAfter(t *testing.T) {
	lc := NewLifecycle(RetryPolicy{MaxAttempts: 3, IgnoreRetryAfter: true}, true)
	lc.Begin()
	var l Life
	n := lc.Offered(&l, Decision{Outcome: Rejected, Reason: ReasonQueueFull, RetryAfter: time.Minute}, noDraw(t))
	require.Equal(t, Next{Action: Reoffer, Retry: true, Reason: ReasonQueueFull}, n)
	require.True(t, l.InRetry, "storming requests still count as retrying")
}

// The ladder's verdicts go through the lifecycle as the core's do: a
// deferral is an offer deferred (counted in Offers and AllDeferrals, not in
// the core's Attempts, so the retry budget is the core's alone), and the
// ladder judges a request until its first offer to the core, never its
// retries.
func TestLadderVerdictsInTheLifecycle(t *testing.T) {
	lc := NewLifecycle(RetryPolicy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: 8 * time.Second, Budget: 0.2}, true)
	var l Life
	require.True(t, l.LadderJudges(), "a new request")
	for _, tc := range []struct {
		e    Effect
		want Next
	}{
		{Effect{Verdict: Defer, After: 30 * time.Second}, Next{Action: Reoffer, After: 30 * time.Second, Reason: ReasonLoadShed}},
		{Effect{Verdict: Defer, After: 30 * time.Second}, Next{Action: Reoffer, After: 30 * time.Second, Reason: ReasonLoadShed}},
		{Effect{Verdict: Shed}, Next{Action: Refuse, Reason: ReasonLoadShed, RetryAfter: LadderEvery}},
		{Effect{Verdict: Cache}, Next{Action: AnswerCached}},
		{Effect{Verdict: Pass, Output: 64, Capped: true}, Next{Action: OfferNow}},
	} {
		require.Equal(t, tc.want, lc.degraded(&l, tc.e), "%v", tc.e.Verdict)
	}
	require.Equal(t, 2, l.Shed)
	require.True(t, l.LadderJudges(), "back from the ladder's deferrals, still before its first offer")
	require.Equal(t, 2, l.Offers())
	require.Equal(t, 2, l.AllDeferrals())

	d := lc.Offered(&l, Decision{Outcome: Deferred, RetryAfter: time.Second, Reason: "tenant-concurrency"}, func() float64 { return 0 })
	require.Equal(t, Reoffer, d.Action)
	require.False(t, l.LadderJudges(), "offered to the core: its re-offers and retries skip the ladder")
	require.Equal(t, 1, l.Attempts, "the core's attempts, which the retry budget counts")
	require.Equal(t, 3, l.Offers())
	require.Equal(t, 3, l.AllDeferrals())
}

// TestLifecycleEndFreesTheBudgetAtOnce: a request ended (End) leaves the
// budget and the flight at the instant its outcome is decided, once
// however many times its driver calls End on the way out, so that a retry
// decided next counts it out in both drivers.
func TestLifecycleEndFreesTheBudgetAtOnce(t *testing.T) {
	lc, lives := spentBudget(t)
	last := &lives[RetryFloor]
	// One retrying request is answered: ended, it frees its place.
	lc.End(&lives[0])
	lc.End(&lives[0]) // the driver's way out: counted once
	now, _ := lc.Retrying()
	require.Equal(t, RetryFloor-1, now)
	require.Equal(t, RetryFloor, lc.Live())
	lc.Offered(last, Decision{Outcome: Dispatched}, noDraw(t))
	require.Equal(t, Reoffer, lc.Failed(last, AttemptError, 0, half).Action, "the ended request's place in the budget")
}

// A stream cut after its first tokens fails unless the policy migrates
// it: then it is offered again at once (no backoff), up to the limit,
// outside the retry budget, and the next cut past the limit fails.
func TestLifecycleMigratesCutStreams(t *testing.T) {
	lc := NewLifecycle(RetryPolicy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: time.Second, Budget: 0.2, MigrationLimit: 1}, false)
	var l Life
	lc.Begin()
	l.Attempts = 1
	next := lc.Failed(&l, AttemptCut, 0, func() float64 { return 0.5 })
	require.Equal(t, Next{Action: Reoffer, Retry: true}, next)
	require.Equal(t, 1, l.Migrations)
	require.False(t, l.InRetry, "a migration is outside the retry budget")
	require.Equal(t, Next{Action: GiveUp}, lc.Failed(&l, AttemptCut, 0, func() float64 { return 0.5 }), "past the limit a cut stream fails")

	lc = NewLifecycle(RetryPolicy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: time.Second, Budget: 0.2}, false)
	l = Life{Attempts: 1}
	require.Equal(t, Next{Action: GiveUp}, lc.Failed(&l, AttemptCut, 0, func() float64 { return 0.5 }), "no migration by default")
}
