// Package ackwatch watches a value that grows as acknowledgements arrive
// (an edge's acknowledged-through segment sequence) on several sources at
// a fixed period and records when it moved, so that the longest pause
// between two acknowledgements of a source can be measured to within the
// period: the figure the end-to-end tests and the heal benchmark report of
// a fault.
package ackwatch

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Source is one thing watched.
type Source struct {
	ID string
	// Read reads the value. ok false skips the round (the source is not
	// running, or has no value yet); an error counts as a failed read.
	Read func(ctx context.Context) (v float64, ok bool, err error)
}

// Watch reads every source each period, all at once, each read bounded
// by four periods. Its methods are safe for concurrent use.
type Watch struct {
	sources []Source
	every   time.Duration
	cancel  context.CancelFunc
	done    chan struct{}

	mu       sync.Mutex
	advances map[string][]time.Time // per source, when the value moved
	last     map[string]float64
	errs     int
	stopped  time.Time
}

// Start starts reading sources every period.
func Start(every time.Duration, sources ...Source) *Watch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watch{sources: sources, every: every, cancel: cancel, done: make(chan struct{}),
		advances: map[string][]time.Time{}, last: map[string]float64{}}
	go w.run(ctx)
	return w
}

func (w *Watch) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for _, s := range w.sources {
			wg.Go(func() { w.readOne(ctx, s) })
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readOne reads s once and records an advance: a positive value that
// differs from the last one read.
func (w *Watch) readOne(ctx context.Context, s Source) {
	cctx, cancel := context.WithTimeout(ctx, 4*w.every)
	v, ok, err := s.Read(cctx)
	cancel()
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil:
		if ctx.Err() == nil { // a read cut short by Stop did not fail
			w.errs++
		}
		return
	case !ok:
		return
	}
	w.observeLocked(s.ID, v, now)
}

// observeLocked records value v of source id read at now. REQUIRES: mu
// held.
func (w *Watch) observeLocked(id string, v float64, now time.Time) {
	if prev, seen := w.last[id]; v > 0 && (!seen || v != prev) {
		w.advances[id] = append(w.advances[id], now)
	}
	w.last[id] = v
}

// Stop ends the reading; pauses are measured up to now.
func (w *Watch) Stop() {
	w.cancel()
	<-w.done
	w.mu.Lock()
	w.stopped = time.Now()
	w.mu.Unlock()
}

// Errors counts the failed reads.
func (w *Watch) Errors() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errs
}

// Acks counts the advances seen per source.
func (w *Watch) Acks() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for id, ts := range w.advances {
		out[id] = len(ts)
	}
	return out
}

// Pause is the longest time a source went without an acknowledgement.
type Pause struct {
	Edge     string
	Pause    time.Duration
	From, To time.Time // the acknowledgements around it (To: Stop, if none came)
}

func (p Pause) String() string {
	return fmt.Sprintf("%s %v (%s to %s)", p.Edge, p.Pause.Round(10*time.Millisecond), p.From.Format("15:04:05.000"), p.To.Format("15:04:05.000"))
}

// Pauses returns, per source, the longest pause between acknowledgements
// that overlaps [from, to] (zero times: the whole watch), longest first.
// The first acknowledgement a source gave starts its watch; a pause still
// open when the watch stopped (or now, if it runs) counts up to the stop.
func (w *Watch) Pauses(from, to time.Time) []Pause {
	w.mu.Lock()
	defer w.mu.Unlock()
	return pauses(w.sources, w.advances, w.stopped, from, to)
}

// pauses is Pauses over advances, for a watch stopped at stopped (zero:
// still running).
func pauses(sources []Source, advances map[string][]time.Time, stopped, from, to time.Time) []Pause {
	end := stopped
	if end.IsZero() {
		end = time.Now()
	}
	if to.IsZero() || to.After(end) {
		to = end
	}
	var out []Pause
	for _, s := range sources {
		ts := advances[s.ID]
		if len(ts) == 0 {
			continue
		}
		best := Pause{Edge: s.ID}
		for i := range ts {
			next := end
			if i+1 < len(ts) {
				next = ts[i+1]
			}
			if next.Before(from) || ts[i].After(to) {
				continue
			}
			if d := next.Sub(ts[i]); d > best.Pause {
				best.Pause, best.From, best.To = d, ts[i], next
			}
		}
		out = append(out, best)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pause > out[j].Pause })
	return out
}
