package workers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunEveryJobOnce(t *testing.T) {
	var seen [100]atomic.Int32
	var calls []int
	err := Run(context.Background(), 100, 4, func(_ context.Context, i int) error {
		seen[i].Add(1)
		return nil
	}, func(done, total int) { calls = append(calls, done); require.Equal(t, 100, total) })
	require.NoError(t, err)
	for i := range seen {
		require.EqualValues(t, 1, seen[i].Load(), "job %d", i)
	}
	require.Len(t, calls, 100)
	require.Equal(t, 100, calls[99], "progress counts up, one call at a time")
}

// The job that failed on its own is reported, not a job it cancelled.
func TestRunFirstRealError(t *testing.T) {
	boom := errors.New("boom")
	err := Run(context.Background(), 50, 3, func(ctx context.Context, i int) error {
		switch {
		case i < 7:
			return nil
		case i == 7:
			return boom
		}
		<-ctx.Done() // the later jobs wait for the failure to cancel them
		return ctx.Err()
	}, nil)
	require.ErrorIs(t, err, boom)
}

func TestRunCallerCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Run(ctx, 10, 2, func(context.Context, int) error { return nil }, nil)
	require.ErrorIs(t, err, context.Canceled)
}

func TestCount(t *testing.T) {
	require.Equal(t, 3, Count(8, 3))
	require.Equal(t, 1, Count(4, 0))
	require.Equal(t, 2, Count(2, 10))
	require.GreaterOrEqual(t, Count(0, 1000), 1)
}
