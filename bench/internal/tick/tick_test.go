package tick

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func TestEvery_CallsOncePerPeriodAfterTheFirstPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 3500*time.Millisecond)
		defer cancel()
		start := time.Now()
		var at []time.Duration
		Every(ctx, time.Second, func(now time.Time) bool {
			at = append(at, now.Sub(start))
			return true
		})
		want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
		if !slices.Equal(at, want) {
			t.Fatalf("calls at %v, want %v", at, want)
		}
	})
}

func TestEvery_StopsWhenFReturnsFalse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		Every(t.Context(), time.Second, func(time.Time) bool { n++; return n < 2 })
		if n != 2 {
			t.Fatalf("%d calls, want 2", n)
		}
	})
}

func TestPaced_CallsAtOnceThenEveryPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		start := time.Now()
		var at []time.Duration
		Paced(ctx, time.Second, func() bool {
			at = append(at, time.Since(start))
			return true
		})
		want := []time.Duration{0, time.Second, 2 * time.Second}
		if !slices.Equal(at, want) {
			t.Fatalf("calls at %v, want %v", at, want)
		}
	})
}

func TestPaced_StopsWhenFReturnsFalseOrContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		Paced(t.Context(), time.Second, func() bool { n++; return n < 3 })
		if n != 3 {
			t.Fatalf("%d calls, want 3", n)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		n = 0
		Paced(ctx, time.Second, func() bool { n++; return true })
		if n != 1 {
			t.Fatalf("with an ended context: %d calls, want 1 (the first is at once)", n)
		}
	})
}

func TestUntil_ReturnsWhenTheConditionHoldsTheTimeoutPassesOrTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		err := Until(t.Context(), time.Second, time.Minute, func() bool { calls++; return calls == 3 })
		if err != nil || calls != 3 || time.Since(start) != 2*time.Second {
			t.Errorf("met at the third call: err %v, %d calls, after %v", err, calls, time.Since(start))
		}

		start = time.Now()
		err = Until(t.Context(), time.Second, 5*time.Second, func() bool { return false })
		var te *TimeoutError
		if !errors.As(err, &te) || te.Timeout != 5*time.Second || err.Error() != "not within 5s" || time.Since(start) != 6*time.Second {
			t.Errorf("never met: err %v after %v", err, time.Since(start))
		}

		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		err = Until(ctx, time.Second, time.Minute, func() bool { return false })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("context ended: err %v", err)
		}
	})
}
