package node

import (
	"math"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/model/aggregate"
	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/rollup"
)

// Left-open hours from the hourly rollups.
//
// PromQL evaluates f(x[R]) every R over the windows (e-R, e]; with R a
// whole number of hours and e on the hour, the node's buckets are those
// windows when they are offset by 1 ms (model.Query.LeftOpenHours). Such a
// bucket is made of left-open hours (h, h+1h], and a left-open hour is
// the stored hour [h, h+1h) less its sample at h, plus the sample at
// h+1h, which is the first sample of the next stored hour. A rollup holds
// its first sample (FirstT, First), so:
//
//   - count: the hour's count, less one when FirstT is h, plus one when the
//     next hour's FirstT is h+1h;
//   - last: the next hour's first sample when it is at h+1h, else the
//     hour's last (none when the sample at h was its only one);
//   - max (min): the hour's max when the sample at h is not where it came
//     from — First below Max, or every value of the hour equal — then
//     folded with the sample at h+1h.
//
// When the rollups cannot tell — the sample at h holds the hour's max (or
// min) and others differ from it, a sum that is NaN (a NaN sample, whose
// place in the fold the aggregate does not keep), a max or min of zero
// (whose sign depends on the order the rollup saw the samples), head
// samples in either hour, an hour cut by the query's range — that hour is
// folded from its raw samples instead, as the raw path would. The answer
// is the raw path's, bit for bit (TestQuery_DownsampleOffsetMatchesNaive,
// TestRollups_MatchNaiveAggregation).

// downsampleLeftOpen answers q (LeftOpenHours) for one series, reading
// raw samples through cr (nil: the store's own Chunks).
func (n *Node) downsampleLeftOpen(s *memSeries, q *model.Query, cr *store.ChunkReader) ([]int64, []float64, int64, error) {
	dirty := map[int64]bool{}
	for _, x := range s.snapshot(q.Start, q.End) {
		dirty[rollup.BucketStart(x.t, rollup.Hour)] = true
	}
	first := aggregate.BucketStart(q.Start, q.Step, q.Offset)
	buckets := make([]rollup.Agg, (q.End-first)/q.Step+1)
	packs := hourPacks{n: n, id: s.id}
	var read int64
	for h := rollup.BucketStart(q.Start-1, rollup.Hour); h < q.End; h += rollup.Hour {
		lo, hi := max(h+1, q.Start), min(h+rollup.Hour, q.End) // of (h, h+1h]
		bucket := &buckets[(aggregate.BucketStart(lo, q.Step, q.Offset)-first)/q.Step]
		if lo == h+1 && hi == h+rollup.Hour && !dirty[h] && !dirty[hi] {
			cur, err := packs.hour(h)
			if err != nil {
				return nil, nil, 0, err
			}
			next, err := packs.hour(hi)
			if err != nil {
				return nil, nil, 0, err
			}
			if agg, ok := leftOpenHour(cur, next, h, q.Downsample); ok {
				bucket.Merge(agg) // holds no NaN: merged as folded
				continue
			}
		}
		// Folded into the bucket one sample at a time, as the raw path
		// does: a NaN that starts this hour but not the bucket is passed
		// over, which merging the hour's own aggregate would not do.
		err := n.eachSampleBatch(s, lo, hi, cr, func(ts []int64, vs []float64) {
			for i, t := range ts {
				bucket.Add(t, vs[i])
			}
			read += int64(len(ts))
		})
		if err != nil {
			return nil, nil, 0, err
		}
	}
	var ts []int64
	var vs []float64
	for i, a := range buckets {
		if a.Count > 0 {
			ts = append(ts, first+int64(i)*q.Step)
			vs = append(vs, a.Value(q.Downsample))
		}
	}
	return ts, vs, read + packs.read, nil
}

// leftOpenHour returns the aggregate of (h, h+1h] for fn from the stored
// hours cur = [h, h+1h) and next = [h+1h, h+2h), and false when they do
// not determine it (see above). Only the fields fn reads are meaningful in
// the result.
func leftOpenHour(cur, next rollup.Agg, h int64, fn rollup.Func) (rollup.Agg, bool) {
	switch fn {
	case rollup.FuncMax, rollup.FuncMin, rollup.FuncLast, rollup.FuncCount:
	default:
		return rollup.Agg{}, false
	}
	if math.IsNaN(cur.Sum) || (next.Count > 0 && math.IsNaN(next.First)) {
		return rollup.Agg{}, false
	}
	a := cur
	if cur.Count > 0 && cur.FirstT == h {
		mixed := cur.Min != cur.Max
		switch {
		case cur.Count == 1:
			a = rollup.Agg{}
		case mixed && fn == rollup.FuncMax && cur.First == cur.Max, mixed && fn == rollup.FuncMin && cur.First == cur.Min:
			return rollup.Agg{}, false // the max (min) may be the sample at h alone
		default:
			a.Count--
		}
	}
	if next.Count > 0 && next.FirstT == h+rollup.Hour {
		a.Add(next.FirstT, next.First)
	}
	if (fn == rollup.FuncMax || fn == rollup.FuncMin) && a.Count > 0 && a.Value(fn) == 0 {
		return rollup.Agg{}, false
	}
	return a, true
}

// hourPacks reads a series' hourly rollup packs for an ascending walk over
// its hours, keeping the two latest days.
type hourPacks struct {
	n     *Node
	id    uint64
	day   [2]int64
	have  [2]bool
	packs [2]rollup.Hourly
	read  int64 // packs read
}

// hour returns the stored rollup of the hour [h, h+1h) (empty when none).
func (p *hourPacks) hour(h int64) (rollup.Agg, error) {
	d := rollup.BucketStart(h, rollup.Day)
	slot := 0 // the slots alternate by day
	if rollup.BucketStart(d, 2*rollup.Day) != d {
		slot = 1
	}
	if !p.have[slot] || p.day[slot] != d {
		pack, err := p.n.readHourly(p.id, d)
		if err != nil {
			return rollup.Agg{}, err
		}
		p.day[slot], p.have[slot], p.packs[slot] = d, true, pack
		p.read++
	}
	return p.packs[slot].Hours[(h-d)/rollup.Hour], nil
}
