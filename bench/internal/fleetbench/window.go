package fleetbench

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
)

// window accumulates what the measured window saw, and turns it into a
// run's figures (fill). The fleet's goroutines call it concurrently.
type window struct {
	mu             sync.Mutex
	start, end     time.Time // zero until set
	lags           []float64 // seconds, segments sealed in the window
	ackedPoints    int64     // acknowledged in the window
	ackedSegments  int64
	sealedPoints   int64 // sealed in the window
	sealedSegments int64
	unresolvedN    int
}

// shipperTotals are the edges' Shipper statistics at the end of a run.
type shipperTotals struct {
	gapPoints                             uint64
	refusals, shippedBytes, shippedPoints int64
}

// inWindow reports whether t falls in the window. REQUIRES: w.mu held.
func (w *window) inWindow(t time.Time) bool {
	return !w.start.IsZero() && !t.Before(w.start) && (w.end.IsZero() || t.Before(w.end))
}

// open starts the window at t.
func (w *window) open(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.start = t
}

// close ends the window at t and returns its length.
func (w *window) close(t time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.end = t
	return w.end.Sub(w.start)
}

// sealedIn reports whether a segment sealed at t was sealed in the closed
// window.
func (w *window) sealedIn(t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !t.Before(w.start) && t.Before(w.end)
}

// sealed counts a segment of points sealed at now.
func (w *window) sealed(now time.Time, points int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inWindow(now) {
		w.sealedPoints += points
		w.sealedSegments++
	}
}

// acked counts segment p, found acknowledged at now: its lag if it was
// sealed in the window, its points if acknowledged in it.
func (w *window) acked(now time.Time, p pendingSeg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inWindow(p.at) {
		w.lags = append(w.lags, now.Sub(p.at).Seconds())
	}
	if w.inWindow(now) {
		w.ackedPoints += p.points
		w.ackedSegments++
	}
}

// unresolved counts the window's segments still not acknowledged at now,
// with their age as their lag.
func (w *window) unresolved(now time.Time, left []pendingSeg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range left {
		w.lags = append(w.lags, now.Sub(p.at).Seconds())
		w.unresolvedN++
	}
}

// fill sets the run's lag, intake and edge figures from the window, the
// Shippers' totals and the measurement.
func (w *window) fill(r *RunResult, t shipperTotals, m measurement) {
	w.mu.Lock()
	defer w.mu.Unlock()
	elapsed := m.elapsed
	slices.Sort(w.lags)
	r.LagP50S = report.Number(report.Round(percentile(w.lags, 0.50), 3))
	r.LagP99S = report.Number(report.Round(percentile(w.lags, 0.99), 3))
	r.LagMaxS = report.Number(report.Round(percentile(w.lags, 1), 3))
	r.LagSegments = len(w.lags)
	r.LagUnresolved = w.unresolvedN
	r.PointsPerS = report.Round(float64(w.ackedPoints)/elapsed, 1)
	r.SegmentsPerS = report.Round(float64(w.ackedSegments)/elapsed, 2)
	r.OfferedPointsPerS = report.Round(float64(w.sealedPoints)/elapsed, 1)
	r.OfferedSegmentsPerS = report.Round(float64(w.sealedSegments)/elapsed, 2)
	r.GapPoints = int64(t.gapPoints)
	r.Refusals = t.refusals
	r.BytesPerPointShipped = report.Number(math.NaN())
	if t.shippedPoints > 0 {
		r.BytesPerPointShipped = report.Number(report.Round(float64(t.shippedBytes)/float64(t.shippedPoints), 3))
	}
	r.EdgesCores = report.Round((m.cpu1-m.cpu0).Seconds()/elapsed, 3)
	r.WindowS = report.Round(elapsed, 2)
	r.LoadAvg1 = m.load
}
