package nodeproc

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Concurrently calls f(i) for every i < n, each on its own goroutine, and
// returns once all have returned, with their errors joined in the order of
// i. A fleet's processes start and stop this way: a raft cluster needs a
// quorum of its members up before any of them is ready.
func Concurrently(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// StartAll starts every process of ps concurrently (see Restartable.Start)
// and returns once all are ready or have failed.
func StartAll[P interface{ Start(context.Context) error }](ctx context.Context, ps []P) error {
	return Concurrently(len(ps), func(i int) error { return ps[i].Start(ctx) })
}

// StopAll stops every process of ps concurrently (see Restartable.Stop).
func StopAll[P interface{ Stop(time.Duration) error }](timeout time.Duration, ps []P) error {
	return Concurrently(len(ps), func(i int) error { return ps[i].Stop(timeout) })
}
