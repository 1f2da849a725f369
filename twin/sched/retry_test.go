package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryPolicy(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 3, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second, Budget: 0.2}
	require.False(t, p.Allow(3, 0, 100, false), "attempts spent")
	require.True(t, p.Allow(1, 9, 0, false), "the floor: the tenth may retry")
	require.False(t, p.Allow(1, 10, 0, false), "the eleventh may not")
	require.True(t, p.Allow(1, 10, 0, true), "one already counted is not counted twice")
	require.True(t, p.Allow(1, 19, 100, false), "20 % of 100 in flight")
	require.False(t, p.Allow(1, 20, 100, false))

	require.Equal(t, 50*time.Millisecond, p.Delay(1, 0.5, 0), "full jitter under the base")
	require.Equal(t, 200*time.Millisecond, p.Delay(2, 0.999999999, 0).Round(time.Millisecond), "doubling")
	require.Equal(t, time.Second, p.Delay(10, 0.999999999, 0).Round(time.Millisecond), "capped")
	require.Equal(t, 3*time.Second, p.Delay(1, 0.5, 3*time.Second), "never before retry-after")

	storm := p
	storm.IgnoreRetryAfter = true
	require.True(t, storm.Allow(1, 1000, 0, false), "a storm ignores the budget")
	require.Zero(t, storm.Delay(5, 0.9, 3*time.Second), "and the backoff")
}
