package cluster

import (
	"math"
	"sort"
)

// NewestAckedMs is the newest acknowledged timestamp of any series (0:
// none). With one Writer (requests one after another, every series given
// the same timestamps), every point up to it was acknowledged or is in
// doubt by the time it is read: a query over [start, NewestAckedMs()]
// sent after that must answer all acknowledged points of the range.
func (l *Ledger) NewestAckedMs() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.newestMs
}

// OldestAckedMs is the oldest acknowledged timestamp (0: none).
func (l *Ledger) OldestAckedMs() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.oldestMs == math.MaxInt64 {
		return 0
	}
	return l.oldestMs
}

// AckedIn counts the acknowledged points with a timestamp in
// [startMs, endMs].
func (l *Ledger) AckedIn(startMs, endMs int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.acked {
		for t := range m {
			if t >= startMs && t <= endMs {
				n++
			}
		}
	}
	return n
}

// CompareWindow compares an answer to a query over [startMs, endMs] with
// the points the ledger acknowledged in that window: acknowledged points
// of the window that are missing are lost, points outside it or neither
// acknowledged nor in doubt are phantom.
func CompareWindow(ans RawAnswer, l *Ledger, startMs, endMs int64) CheckResult {
	r := CheckResult{Series: len(ans.Points), Warnings: ans.Warnings}
	l.mu.Lock()
	want := make(map[string]map[int64]bool, len(l.acked))
	for s, m := range l.acked {
		w := map[int64]bool{}
		for t := range m {
			if t >= startMs && t <= endMs {
				w[t] = true
			}
		}
		want[s] = w
	}
	l.mu.Unlock()
	for series, pts := range ans.Points {
		seen := map[int64]bool{}
		for _, p := range pts {
			r.Returned++
			if seen[p.TimestampMs] {
				r.Duplicated++
				r.example("duplicate %s@%d", series, p.TimestampMs)
				continue
			}
			seen[p.TimestampMs] = true
			v, acked, doubt := l.lookup(series, p.TimestampMs)
			switch {
			case p.TimestampMs < startMs || p.TimestampMs > endMs:
				r.Phantom++
				r.example("%s@%d outside the asked range [%d, %d]", series, p.TimestampMs, startMs, endMs)
				continue
			case !acked && !doubt:
				r.Phantom++
				r.example("phantom %s@%d=%v", series, p.TimestampMs, p.Value)
				continue
			case v != p.Value:
				r.WrongValue++
				r.example("wrong value %s@%d: %v, want %v", series, p.TimestampMs, p.Value, v)
			case doubt:
				r.InDoubt++
			}
			delete(want[series], p.TimestampMs)
		}
	}
	var lostSeries []string
	for s, m := range want {
		if len(m) > 0 {
			r.Lost += len(m)
			lostSeries = append(lostSeries, s)
		}
	}
	sort.Strings(lostSeries)
	for _, s := range lostSeries {
		ts := make([]int64, 0, len(want[s]))
		for t := range want[s] {
			ts = append(ts, t)
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		if r.LostTimes == nil {
			r.LostTimes = map[string][]int64{}
		}
		r.LostTimes[s] = ts
		r.example("lost %d points of %s in [%d, %d]", len(ts), s, ts[0], ts[len(ts)-1])
	}
	return r
}
