package replbench

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
)

// lagTracker is the lag bookkeeping: every acknowledged write batch is
// recorded with its ack time and the edge's open WAL segment at that
// moment; each poll of the edge's acked_through_seq resolves the batches
// whose segment the cloud now holds, at the poll's time.
//
// NB: the segment is read just after the ack, so it can only be the one the
// batch went to or a later one: the lag is never under-stated, and it is
// over-stated by at most the poll interval plus the Status round trip.
//
// Concurrency: safe for concurrent use.
type lagTracker struct {
	mu      sync.Mutex
	pending []pendingBatch // REQUIRES: mu held
	lags    []time.Duration
}

// pendingBatch is an acknowledged batch the cloud does not hold yet.
type pendingBatch struct {
	ackAt time.Time
	seq   uint64
}

// record notes a batch acknowledged at ackAt while the edge's open segment
// was seq.
func (l *lagTracker) record(ackAt time.Time, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(l.pending, pendingBatch{ackAt: ackAt, seq: seq})
}

// observe says that at time at the cloud held every segment up to
// ackedThrough. A batch acknowledged after at is left pending: its Status
// answer may have raced the poll.
func (l *lagTracker) observe(at time.Time, ackedThrough uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := l.pending[:0]
	for _, b := range l.pending {
		if b.seq <= ackedThrough && !b.ackAt.After(at) {
			l.lags = append(l.lags, at.Sub(b.ackAt))
			continue
		}
		keep = append(keep, b)
	}
	l.pending = keep
}

// pendingCount is the number of batches not resolved yet.
func (l *lagTracker) pendingCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// result returns the resolved lags and, for each batch still pending, its
// age at end: a lower bound of its lag, so that a batch that never arrived
// still counts against the percentiles instead of vanishing from them.
func (l *lagTracker) result(end time.Time) (lags []time.Duration, unresolved int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lags = slices.Clone(l.lags)
	for _, b := range l.pending {
		lags = append(lags, end.Sub(b.ackAt))
	}
	return lags, len(l.pending)
}

// percentile returns the nearest-rank q-quantile (0 < q ≤ 1) of ds in
// seconds, or NaN when ds is empty. It sorts ds.
func percentile(ds []time.Duration, q float64) float64 {
	slices.Sort(ds)
	p, ok := report.NearestRank(ds, q)
	if !ok {
		return math.NaN()
	}
	return p.Seconds()
}
