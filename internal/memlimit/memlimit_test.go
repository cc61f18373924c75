package memlimit

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestLimit_IsTheBudgetUntilTheLiveHeapOutgrowsIt(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		name                  string
		budget, live, nonHeap int64
		headroom              float64
		want                  int64
	}{
		{"small live heap", 96 * mib, 20 * mib, 8 * mib, 0.25, 96 * mib},
		{"live heap near the budget", 96 * mib, 72 * mib, 8 * mib, 0.25, 98 * mib},
		{"live heap beyond the budget", 96 * mib, 400 * mib, 10 * mib, 0.25, 510 * mib},
		{"no headroom", 96 * mib, 100 * mib, 0, 0, 100 * mib},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Limit(tt.budget, tt.live, tt.nonHeap, tt.headroom); got != tt.want {
				t.Errorf("Limit(%d, %d, %d, %v) = %d MiB, want %d MiB", tt.budget, tt.live, tt.nonHeap, tt.headroom, got/mib, tt.want/mib)
			}
		})
	}
}

// TestStart_SetsTheLimitAndStopRestoresIt: Start puts a limit of at least
// the budget (and at least the live heap) in place; stop puts the
// previous one back.
func TestStart_SetsTheLimitAndStopRestoresIt(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	const budget int64 = 1 << 40 // far above anything this test holds
	stop := Start(Options{Budget: budget, Interval: time.Millisecond})
	time.Sleep(10 * time.Millisecond)
	if got := debug.SetMemoryLimit(-1); got != budget {
		t.Errorf("limit while running = %d, want the budget %d", got, budget)
	}
	stop()
	if got := debug.SetMemoryLimit(-1); got != prev {
		t.Errorf("limit after stop = %d, want the previous %d", got, prev)
	}

	// A budget below what the process holds: the limit follows the live
	// heap (known once a collection has measured it).
	keep := make([]byte, 4<<20)
	runtime.GC()
	stop = Start(Options{Budget: 1, Interval: time.Millisecond})
	live, nonHeap := newSamples().read()
	got := debug.SetMemoryLimit(-1)
	stop()
	runtime.KeepAlive(keep)
	if live < 4<<20 || got < live {
		t.Errorf("with a 1-byte budget the limit is %d for a live heap of %d (+%d outside the heap)", got, live, nonHeap)
	}
}

func TestStart_ZeroBudgetDoesNothing(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	stop := Start(Options{})
	if got := debug.SetMemoryLimit(-1); got != prev {
		t.Errorf("limit = %d with no budget, want it unchanged (%d)", got, prev)
	}
	stop()
}
