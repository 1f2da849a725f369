package sched

import "time"

// RetryPolicy is how clients retry failed attempts. The twin and the live
// gateway both decide with it, so a retry policy proven in the twin is the
// one that runs live.
type RetryPolicy struct {
	MaxAttempts      int           // attempts per request, the first included
	Backoff          time.Duration // base of the exponential backoff
	MaxBackoff       time.Duration // its cap
	Budget           float64       // retrying at once ≤ Budget × in flight (or RetryFloor)
	IgnoreRetryAfter bool          // a retry storm: no backoff, no budget
	// MigrationLimit is how many times a request whose stream was cut
	// after its first tokens (its replica lost under it) is migrated:
	// offered again at once, outside the retry budget (it counts as an
	// attempt), its prompt now what it was plus what it had generated (Dynamo's request
	// migration, which continues the client's stream); 0: a cut stream
	// fails, as no gateway can splice a second answer onto it.
	MigrationLimit int
}

// RetryFloor is the number of requests that may be retrying at once whatever
// the budget, so that a quiet fleet can still retry (Envoy's
// min_retry_concurrency plays the same part).
const RetryFloor = 10

// Allow reports whether a request that has made attempts attempts may try
// again, with retrying requests already retrying and inFlight requests in
// flight; counted says whether this request is already among the retrying.
// The budget is Envoy's: it tracks the load of the moment rather than the
// whole run's history.
func (p RetryPolicy) Allow(attempts, retrying, inFlight int, counted bool) bool {
	if attempts >= p.MaxAttempts {
		return false
	}
	if p.IgnoreRetryAfter {
		return true
	}
	if !counted {
		retrying++
	}
	return retrying <= max(RetryFloor, int(p.Budget*float64(inFlight)))
}

// Delay is the wait before the next attempt of a request that has made
// attempts attempts: exponential backoff with full jitter (u is a uniform
// draw in [0, 1) from the caller's seeded stream), at least retryAfter;
// zero for clients that ignore retry-after.
func (p RetryPolicy) Delay(attempts int, u float64, retryAfter time.Duration) time.Duration {
	if p.IgnoreRetryAfter {
		return 0
	}
	ceiling := min(p.MaxBackoff, p.Backoff<<min(attempts-1, 20))
	return max(time.Duration(u*float64(ceiling)), retryAfter)
}
