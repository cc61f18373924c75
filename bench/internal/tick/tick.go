// Package tick runs the periodic work of the system benchmarks: the pollers
// that sample a process's metrics, the probes and the paced writers. Each
// of them is one loop over a time.Ticker that ends with its context; this
// package is that loop, written once, and the wait for a condition that
// polls it.
//
// The functions run f on the calling goroutine, never concurrently with
// itself; a slow f makes the ticker drop ticks (time.Ticker's rule), it
// never queues them.
package tick

import (
	"context"
	"fmt"
	"time"
)

// Every calls f at each tick of a ticker of period d (the first call one
// period after the start) until ctx ends or f returns false. now is the
// tick's time. d must be positive.
func Every(ctx context.Context, d time.Duration, f func(now time.Time) bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if !f(now) {
				return
			}
		}
	}
}

// Paced calls f at once and then at each tick of a ticker of period d,
// until ctx ends or f returns false: a call that takes longer than d is
// followed by the next one at once, so the calls keep to the period while
// they can. d must be positive.
func Paced(ctx context.Context, d time.Duration, f func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		if !f() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// TimeoutError is what Until returns when its timeout passes first.
type TimeoutError struct{ Timeout time.Duration }

func (e *TimeoutError) Error() string { return fmt.Sprintf("not within %v", e.Timeout) }

// Until calls cond at once and then every period until it holds (nil), ctx
// ends (ctx.Err()) or timeout has passed since the start with cond still
// false (a *TimeoutError).
func Until(ctx context.Context, period, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return &TimeoutError{Timeout: timeout}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(period):
		}
	}
	return nil
}
