// Package pace holds timing policies: jittered exponential backoff
// between connection attempts (the replicator), a token bucket that
// limits bytes per second (the replicator's shipping, the replica store's
// copies), and the loop of a background goroutine that does one thing
// every interval (Every).
//
// Backoff and Bucket take the current time as an argument instead of
// reading a clock, so they are deterministic under test. Neither is safe
// for concurrent use. Every's contract is in its comment.
package pace

import (
	"math/rand/v2"
	"time"
)

// Every calls fn every interval, and on each receive from wake (nil:
// none), until stop is closed (a context's Done, or a component's stop
// channel). It returns only once stop is closed, and only between calls
// of fn: a call under way when stop closes finishes first.
//
// Every runs in the caller's goroutine and calls fn there, one call at a
// time. Ticks are not queued: a tick that comes while fn runs waits, at
// most one, and later ones are dropped (time.Ticker), so a slow fn is
// called again at once but does not fall behind by more than one call.
// When stop is closed while a tick or wake is ready too, either may be
// taken first, so fn may run once more after stop is closed.
func Every(stop <-chan struct{}, interval time.Duration, wake <-chan struct{}, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-wake:
		}
		fn()
	}
}

// Backoff computes jittered exponential delays: attempt k waits a random
// duration in [d*(1-Jitter), d], where d = min(Initial * 2^k, Max).
// Randomising the delay keeps a fleet of edges that lost the same
// coordinator from reconnecting in lockstep.
type Backoff struct {
	Initial, Max time.Duration
	Jitter       float64 // 0..1
	Rand         *rand.Rand

	attempt int
}

// Next returns the delay before the next attempt and counts the attempt.
func (b *Backoff) Next() time.Duration {
	d := b.Initial
	for i := 0; i < b.attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.attempt < 62 {
		b.attempt++
	}
	if b.Jitter > 0 && d > 0 {
		d -= time.Duration(b.Jitter * b.Rand.Float64() * float64(d))
	}
	return d
}

// Reset makes the next delay Initial again (after a connection that made
// progress).
func (b *Backoff) Reset() { b.attempt = 0 }

// Bucket limits a byte rate. Sending may run into debt: Take always
// succeeds, and Delay says how long to wait until the debt is paid back,
// so a message larger than the burst still goes through and the long-run
// rate holds. The zero Rate means unlimited.
type Bucket struct {
	Rate  int64 // bytes per second; 0: unlimited
	Burst int64 // most bytes that may go at once after idling; 0: Rate

	tokens float64
	last   time.Time
}

func (b *Bucket) refill(now time.Time) {
	burst := float64(b.Burst)
	if burst == 0 {
		burst = float64(b.Rate)
	}
	if b.last.IsZero() {
		b.tokens, b.last = burst, now
		return
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = min(burst, b.tokens+dt.Seconds()*float64(b.Rate))
		b.last = now
	}
}

// Delay returns how long to wait before the next Take.
func (b *Bucket) Delay(now time.Time) time.Duration {
	if b.Rate <= 0 {
		return 0
	}
	b.refill(now)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens/float64(b.Rate)*float64(time.Second)).Round(time.Millisecond) + time.Millisecond
}

// Take spends n bytes.
func (b *Bucket) Take(n int64, now time.Time) {
	if b.Rate <= 0 {
		return
	}
	b.refill(now)
	b.tokens -= float64(n)
}
