package pace

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestBackoff_GrowsJittersAndResets(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: 0.5, Rand: rand.New(rand.NewPCG(1, 2))}
	ceil := []time.Duration{100, 200, 400, 800, 1600, 2000, 2000, 2000}
	for i, c := range ceil {
		c *= time.Millisecond
		d := b.Next()
		if d > c || d < c/2 {
			t.Fatalf("attempt %d: delay %v outside [%v, %v]", i, d, c/2, c)
		}
	}
	b.Reset()
	if d := b.Next(); d > 100*time.Millisecond {
		t.Fatalf("after Reset: %v", d)
	}
	for range 200 { // no overflow however long the outage
		if d := b.Next(); d <= 0 || d > 2*time.Second {
			t.Fatalf("delay %v", d)
		}
	}
}

func TestBackoff_JitterSpreadsDelays(t *testing.T) {
	seen := map[time.Duration]bool{}
	for i := range 20 {
		b := Backoff{Initial: time.Second, Max: time.Second, Jitter: 1, Rand: rand.New(rand.NewPCG(uint64(i), 7))}
		seen[b.Next()] = true
	}
	if len(seen) < 15 {
		t.Fatalf("20 edges drew only %d distinct delays", len(seen))
	}
}

func TestBucket_HoldsTheLongRunRate(t *testing.T) {
	b := Bucket{Rate: 1000}
	now := time.Unix(0, 0)
	start := now
	sent := int64(0)
	for sent < 100_000 {
		now = now.Add(b.Delay(now))
		b.Take(700, now)
		sent += 700
		if b.Delay(now) < 0 {
			t.Fatal("negative delay")
		}
	}
	elapsed := now.Sub(start).Seconds()
	// 100 kB at 1 kB/s after a 1 kB burst: about 99 s.
	if elapsed < 97 || elapsed > 101 {
		t.Fatalf("sent %d bytes in %.1fs at 1000 B/s", sent, elapsed)
	}
}

func TestBucket_OversizedMessageGoesThroughThenWaits(t *testing.T) {
	b := Bucket{Rate: 1000, Burst: 1000}
	now := time.Unix(0, 0)
	if d := b.Delay(now); d != 0 {
		t.Fatalf("first delay %v", d)
	}
	b.Take(5000, now)
	if d := b.Delay(now); d < 4*time.Second || d > 4100*time.Millisecond {
		t.Fatalf("after 5 kB with a 1 kB burst, delay %v, want about 4s", d)
	}
	if d := b.Delay(now.Add(4100 * time.Millisecond)); d != 0 {
		t.Fatalf("debt not paid back: %v", d)
	}
}

func TestBucket_ZeroRateIsUnlimited(t *testing.T) {
	var b Bucket
	b.Take(1<<40, time.Unix(0, 0))
	if d := b.Delay(time.Unix(0, 0)); d != 0 {
		t.Fatalf("delay %v", d)
	}
}

func TestEvery_CallsOnTicksAndWakesUntilStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stop, wake := make(chan struct{}), make(chan struct{})
		var calls atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			Every(stop, time.Second, wake, func() { calls.Add(1) })
		}()
		time.Sleep(3*time.Second + time.Millisecond)
		synctest.Wait()
		if n := calls.Load(); n != 3 {
			t.Fatalf("after 3 intervals: %d calls, want 3", n)
		}
		wake <- struct{}{}
		synctest.Wait()
		if n := calls.Load(); n != 4 {
			t.Fatalf("after a wake: %d calls, want 4", n)
		}
		close(stop)
		<-done
		time.Sleep(5 * time.Second)
		if n := calls.Load(); n != 4 {
			t.Fatalf("after stop: %d calls, want 4", n)
		}
	})
}

func TestEvery_NilWakeOnlyTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var calls atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			Every(ctx.Done(), time.Minute, nil, func() { calls.Add(1) })
		}()
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		if n := calls.Load(); n != 0 {
			t.Fatalf("before the first interval: %d calls", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := calls.Load(); n != 1 {
			t.Fatalf("after one interval: %d calls, want 1", n)
		}
		cancel()
		<-done
	})
}
