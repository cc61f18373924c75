package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// ackedThroughGauge is the edge's gauge of the newest segment the cloud
// acknowledged contiguously.
const ackedThroughGauge = "tributary_replication_acked_through_seq"

// AckWatch scrapes every edge's acknowledged-through gauge at a fixed
// period and records when it moved, so that the longest pause between two
// acknowledgements of an edge can be measured (to within the period). It
// is safe for concurrent use.
type AckWatch struct {
	edges  []*Edge
	every  time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	advances map[string][]time.Time // per edge, when acked_through moved
	last     map[string]float64
	errs     int
	stopped  time.Time
}

// WatchAcks starts scraping edges every period.
func WatchAcks(edges []*Edge, every time.Duration) *AckWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &AckWatch{edges: edges, every: every, cancel: cancel, done: make(chan struct{}),
		advances: map[string][]time.Time{}, last: map[string]float64{}}
	go w.run(ctx)
	return w
}

func (w *AckWatch) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		for _, e := range w.edges {
			if !e.Running() {
				continue
			}
			wg.Go(func() {
				cctx, cancel := context.WithTimeout(ctx, w.every*4)
				m, err := Metrics(cctx, e.HTTP, ackedThroughGauge)
				cancel()
				now := time.Now()
				w.mu.Lock()
				defer w.mu.Unlock()
				if err != nil {
					w.errs++
					return
				}
				v, ok := m[ackedThroughGauge]
				if !ok {
					return
				}
				if prev, seen := w.last[e.ID]; v > 0 && (!seen || v != prev) {
					w.advances[e.ID] = append(w.advances[e.ID], now)
				}
				w.last[e.ID] = v
			})
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Stop ends the scraping; pauses are measured up to now.
func (w *AckWatch) Stop() {
	w.cancel()
	<-w.done
	w.mu.Lock()
	w.stopped = time.Now()
	w.mu.Unlock()
}

// AckPause is the longest time an edge went without an acknowledgement.
type AckPause struct {
	Edge     string
	Pause    time.Duration
	From, To time.Time // the acknowledgements around it (To: Stop, if none came)
}

func (p AckPause) String() string {
	return fmt.Sprintf("%s %v (%s to %s)", p.Edge, p.Pause.Round(10*time.Millisecond), p.From.Format("15:04:05.000"), p.To.Format("15:04:05.000"))
}

// Pauses returns, per edge, the longest pause between acknowledgements
// that overlaps [from, to] (zero times: the whole watch), longest first.
// The first acknowledgement an edge received starts its watch; a pause
// still open when the watch stopped counts up to the stop.
func (w *AckWatch) Pauses(from, to time.Time) []AckPause {
	w.mu.Lock()
	defer w.mu.Unlock()
	end := w.stopped
	if end.IsZero() {
		end = time.Now()
	}
	if to.IsZero() || to.After(end) {
		to = end
	}
	var out []AckPause
	for _, e := range w.edges {
		ts := w.advances[e.ID]
		if len(ts) == 0 {
			continue
		}
		best := AckPause{Edge: e.ID}
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
	sort.Slice(out, func(i, j int) bool { return out[i].Pause > out[j].Pause })
	return out
}

// Acks counts the acknowledgement advances seen per edge.
func (w *AckWatch) Acks() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for id, ts := range w.advances {
		out[id] = len(ts)
	}
	return out
}

// Summary is one line: the longest pause of each edge, and scrape errors.
func (w *AckWatch) Summary(from, to time.Time) string {
	ps := w.Pauses(from, to)
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	w.mu.Lock()
	errs := w.errs
	w.mu.Unlock()
	return fmt.Sprintf("longest acknowledgement pauses: %s; %d failed scrapes", strings.Join(parts, ", "), errs)
}
