// Package memlimit keeps the Go runtime's soft memory limit
// (runtime/debug.SetMemoryLimit) at a budget, so that a process whose live
// heap is small collects garbage before its heap doubles (GOGC=100 lets a
// 50 MiB live heap grow to 100 MiB), and raises the limit with the live
// heap, so that a process that really holds more than the budget (many
// series, say) pays ordinary collections instead of the continuous ones a
// fixed limit below the live heap would cost.
//
// The limit counts the memory the Go runtime manages (heap, goroutine
// stacks, its own metadata), not what C code allocates (RocksDB's
// memtables and block cache come on top).
//
// System reports the memory the process may use (the machine's, or its
// cgroup's limit when smaller), from which memory-sized defaults derive.
//
// Concurrency: Start is called once per process; the stop function it
// returns may be called from any goroutine, once.
package memlimit

import (
	"cmp"
	"log/slog"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Defaults of Options.
const (
	DefaultHeadroom = 0.25
	DefaultInterval = time.Second
)

// Options configure Start.
type Options struct {
	// Budget is the Go memory the collector aims to stay within, in bytes.
	// Zero or negative: Start does nothing.
	Budget int64
	// Headroom is the share of the live heap the heap may grow by beyond
	// it, whatever the budget: the limit is at least live × (1+Headroom)
	// plus the runtime's memory outside the heap. Default 0.25.
	Headroom float64
	// Interval is how often the live heap is read and the limit set.
	// Default 1s.
	Interval time.Duration
	// Logger says when the limit rises above the budget. Default: discard.
	Logger *slog.Logger
}

// Limit is the soft memory limit for a live heap of liveHeap bytes and
// nonHeap bytes of runtime memory outside the heap: the budget, or the
// live heap with its headroom, whichever is larger.
func Limit(budget, liveHeap, nonHeap int64, headroom float64) int64 {
	return max(budget, int64(float64(liveHeap)*(1+headroom))+nonHeap)
}

// Start sets the soft memory limit and keeps it current every Interval
// until stop is called, which puts the previous limit back.
func Start(o Options) (stop func()) {
	if o.Budget <= 0 {
		return func() {}
	}
	o.Headroom = cmp.Or(o.Headroom, DefaultHeadroom)
	o.Interval = cmp.Or(o.Interval, DefaultInterval)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	prev := debug.SetMemoryLimit(-1)
	samples := newSamples()
	above := false
	update := func() {
		live, nonHeap := samples.read()
		limit := Limit(o.Budget, live, nonHeap, o.Headroom)
		debug.SetMemoryLimit(limit)
		switch {
		case limit > o.Budget && !above:
			o.Logger.Info("live heap beyond the Go memory budget: the soft memory limit follows it",
				"budget_bytes", o.Budget, "live_heap_bytes", live, "limit_bytes", limit)
		case limit <= o.Budget && above:
			o.Logger.Info("live heap back within the Go memory budget", "budget_bytes", o.Budget, "live_heap_bytes", live)
		}
		above = limit > o.Budget
	}
	update()
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(o.Interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				update()
			}
		}
	}()
	return func() {
		close(done)
		<-exited
		debug.SetMemoryLimit(prev)
	}
}

// samples reads the runtime metrics Limit needs.
type samples struct {
	s []metrics.Sample
}

const (
	mLive     = "/gc/heap/live:bytes"
	mTotal    = "/memory/classes/total:bytes"
	mObjects  = "/memory/classes/heap/objects:bytes"
	mUnused   = "/memory/classes/heap/unused:bytes"
	mFree     = "/memory/classes/heap/free:bytes"
	mReleased = "/memory/classes/heap/released:bytes"
)

func newSamples() *samples {
	names := []string{mLive, mTotal, mObjects, mUnused, mFree, mReleased}
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	return &samples{s: s}
}

// read returns the live heap (as of the last collection) and the runtime's
// memory outside the heap (stacks, metadata, buffers).
func (s *samples) read() (live, nonHeap int64) {
	metrics.Read(s.s)
	v := func(i int) int64 {
		if s.s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(min(s.s[i].Value.Uint64(), math.MaxInt64))
	}
	heap := v(2) + v(3) + v(4) + v(5)
	return v(0), max(0, v(1)-heap)
}
