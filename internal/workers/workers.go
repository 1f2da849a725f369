// Package workers runs n independent jobs on a bounded number of
// goroutines: the pool behind compare and sweep. Each job writes its result
// into its own slot, so what a caller assembles never depends on the order
// the jobs finished in.
package workers

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// Count is the workers for n jobs when parallel are asked for: GOMAXPROCS
// for parallel <= 0, never more than n, at least 1.
func Count(parallel, n int) int {
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	return max(min(parallel, n), 1)
}

// Run calls do(ctx, i) for i in [0, n) on Count(parallel, n) goroutines.
// The first job to fail cancels the others; Run returns the first error
// that is not a cancellation caused by that (in job order), or ctx's error
// when the caller cancelled. progress, if set, is called after each job
// that succeeds, one call at a time.
func Run(ctx context.Context, n, parallel int, do func(ctx context.Context, i int) error, progress func(done, total int)) error {
	errs := make([]error, n)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, done atomic.Int64
		mu         sync.Mutex
		wg         sync.WaitGroup
	)
	for range Count(parallel, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || runCtx.Err() != nil {
					return
				}
				if err := do(runCtx, i); err != nil {
					errs[i] = err
					cancel() // the whole is lost; stop the other workers
					return
				}
				if progress != nil {
					mu.Lock()
					progress(int(done.Add(1)), n)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	// The first job that failed on its own, not because another's failure
	// cancelled it.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
