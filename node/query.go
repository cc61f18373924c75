package node

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/model/aggregate"
	"github.com/tributarydb/tributary/node/chunk"
	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// Query runs q and calls emit for each series (or group) in label order.
// The slices passed to emit are owned by the callee.
func (n *Node) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	info, err := n.query(ctx, q, emit)
	n.noteStoreErr(err) // a block that fails its checksum makes the store unhealthy
	return info, err
}

func (n *Node) query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	defer n.observeQuery(ctx, &q, time.Now())
	var info model.QueryInfo
	if n.closed.Load() {
		return info, model.ErrClosed
	}
	if err := q.Validate(); err != nil {
		return info, err
	}
	ctx, span := n.startQuery(ctx, &q)
	defer endQuery(span, &info)
	sel := n.childSpan(ctx, "query.select")
	list, err := n.selectSeries(q.Matchers)
	sel.End()
	if err != nil {
		return info, err
	}
	limit := q.LimitSeries
	if limit <= 0 {
		limit = model.DefaultQuerySeriesLimit
	}
	if len(list) > limit {
		return info, fmt.Errorf("%w: %d series match, limit is %d; narrow the matchers", model.ErrBadQuery, len(list), limit)
	}
	info.Source = q.Source()
	var groups *aggregate.Groups
	if q.Aggregate != rollup.FuncNone {
		groups = aggregate.NewGroups(aggregate.GroupOptions{By: q.GroupBy, Func: q.Aggregate})
	}
	// Series are read in parallel, a window at a time, and emitted in order.
	window := 4 * runtime.GOMAXPROCS(0)
	results := make([]seriesResult, min(window, len(list)))
	read := n.childSpan(ctx, "query.read")
	defer read.End() // ends at once if already ended
	for lo := 0; lo < len(list); lo += window {
		if err := ctx.Err(); err != nil {
			return info, err
		}
		part := list[lo:min(lo+window, len(list))]
		n.readParallel(part, &q, results[:len(part)])
		for i, s := range part {
			r := &results[i]
			if r.err != nil {
				return info, fmt.Errorf("query %s: %w", s.lset, r.err)
			}
			info.Points += r.read
			if len(r.ts) == 0 {
				continue
			}
			if groups == nil {
				info.Series++
				if err := emit(model.Series{Labels: s.lset, Ts: r.ts, Vs: r.vs}); err != nil {
					return info, err
				}
				continue
			}
			if groups.Add(s.lset, r.ts, r.vs); groups.Cells() > model.MaxBuckets {
				return info, errTooManyCells()
			}
		}
	}
	read.End()
	if groups == nil {
		return info, nil
	}
	merge := n.childSpan(ctx, "query.merge")
	defer merge.End()
	for _, g := range groups.Result() {
		info.Series++
		if err := emit(model.Series{Labels: g.Labels, Ts: g.Ts, Vs: g.Vs}); err != nil {
			return info, err
		}
	}
	return info, nil
}

// errTooManyCells is the error of a cross-series aggregation over
// model.MaxBuckets cells.
func errTooManyCells() error {
	return fmt.Errorf("%w: aggregating across series would hold more than %d distinct (group, timestamp) cells; downsample with a step first", model.ErrBadQuery, model.MaxBuckets)
}

type seriesResult struct {
	ts   []int64
	vs   []float64
	read int64
	err  error
}

// readParallel answers q for each series of part into out, using up to
// GOMAXPROCS goroutines (the caller's among them), each reading its
// series' stored chunks through one store.ChunkReader.
func (n *Node) readParallel(part []*memSeries, q *model.Query, out []seriesResult) {
	if len(part) == 1 {
		r := &out[0]
		r.ts, r.vs, r.read, r.err = n.querySeries(part[0], q, nil)
		return
	}
	var next atomic.Int64
	work := func() {
		cr := n.db.NewChunkReader()
		defer cr.Close()
		for i := int(next.Add(1) - 1); i < len(part); i = int(next.Add(1) - 1) {
			r := &out[i]
			r.ts, r.vs, r.read, r.err = n.querySeries(part[i], q, cr)
		}
	}
	// The calling goroutine is one of the readers: one goroutine fewer
	// to start, and its stack has grown already.
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(part)) - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// querySeries answers q for one series, reading stored chunks through cr
// (nil: the store's own Chunks).
func (n *Node) querySeries(s *memSeries, q *model.Query, cr *store.ChunkReader) (ts []int64, vs []float64, read int64, err error) {
	switch {
	case q.Mode == model.ModeLastPoint:
		t, v, ok, err := n.lastPoint(s, q.Start, q.End)
		if err != nil || !ok {
			return nil, nil, 0, err
		}
		return []int64{t}, []float64{v}, 1, nil
	case q.Mode == model.ModeDownsample && q.Step%rollup.Hour == 0 && q.BucketOffset() == 0:
		return n.downsampleRollup(s, q)
	case q.LeftOpenHours():
		return n.downsampleLeftOpen(s, q, cr)
	}
	if q.Mode == model.ModeRaw {
		err = n.eachSampleBatch(s, q.Start, q.End, cr, func(bt []int64, bv []float64) {
			ts, vs = append(ts, bt...), append(vs, bv...)
		})
		return ts, vs, int64(len(ts)), err
	}
	// Samples come sorted, as the fold requires.
	f := bucketFold{step: q.Step, off: aggregate.Offset(q.Offset, q.Step), fn: q.Downsample,
		expect: int(min((q.End-q.Start)/q.Step+2, maxPreallocBuckets))}
	err = n.eachSampleBatch(s, q.Start, q.End, cr, f.addBatch)
	if err != nil {
		return nil, nil, 0, err
	}
	ts, vs = f.result()
	return ts, vs, f.read, nil
}

// bucketFold is aggregate.Downsampler for samples in ascending time order:
// the same buckets, and the same values, with one division per bucket
// instead of one per sample (a 64-bit division costs more than the rest of
// a fold), and only what fn needs folded per sample. The folds are
// rollup.Agg's: max and min compare with > and < from the first value (a
// NaN first stays, a NaN later is passed over), sum and avg add in time
// order, first and last take the first and the newest sample.
type bucketFold struct {
	step, off int64 // REQUIRES: 0 <= off < step
	fn        rollup.Func
	expect    int   // buckets to allocate for at the first close
	lo, hi    int64 // the open bucket [lo, hi), when n > 0
	n         int64 // samples in the open bucket
	v         float64
	ts        []int64
	vs        []float64
	read      int64 // samples folded
}

// add folds one sample. REQUIRES: t is after the previous sample's.
func (f *bucketFold) add(t int64, v float64) {
	f.read++
	if f.n > 0 && t < f.hi {
		f.n++
		switch f.fn {
		case rollup.FuncMax:
			if v > f.v {
				f.v = v
			}
		case rollup.FuncMin:
			if v < f.v {
				f.v = v
			}
		case rollup.FuncLast:
			f.v = v
		case rollup.FuncSum, rollup.FuncAvg:
			f.v += v
		}
		return
	}
	if f.n > 0 {
		f.close()
	}
	f.lo = aggregate.BucketStart(t, f.step, f.off)
	f.hi = f.lo + f.step
	f.n, f.v = 1, v
}

// addBatch folds samples as add does one at a time, the samples of a
// bucket in one tight loop. REQUIRES: ts ascends, after the previous
// sample's; len(vs) == len(ts).
func (f *bucketFold) addBatch(ts []int64, vs []float64) {
	for len(ts) > 0 {
		if f.n == 0 || ts[0] >= f.hi {
			f.add(ts[0], vs[0]) // opens a bucket
			ts, vs = ts[1:], vs[1:]
			continue
		}
		k := 0
		for k < len(ts) && ts[k] < f.hi {
			k++
		}
		in := vs[:k]
		switch f.fn {
		case rollup.FuncMax:
			for _, v := range in {
				if v > f.v {
					f.v = v
				}
			}
		case rollup.FuncMin:
			for _, v := range in {
				if v < f.v {
					f.v = v
				}
			}
		case rollup.FuncLast:
			f.v = in[k-1]
		case rollup.FuncSum, rollup.FuncAvg:
			for _, v := range in {
				f.v += v
			}
		}
		f.n += int64(k)
		f.read += int64(k)
		ts, vs = ts[k:], vs[k:]
	}
}

func (f *bucketFold) close() {
	if f.ts == nil && f.expect > 0 {
		f.ts, f.vs = make([]int64, 0, f.expect), make([]float64, 0, f.expect)
	}
	var v float64
	switch f.fn {
	case rollup.FuncMax, rollup.FuncMin, rollup.FuncFirst, rollup.FuncLast, rollup.FuncSum:
		v = f.v
	case rollup.FuncAvg:
		v = f.v / float64(f.n)
	case rollup.FuncCount:
		v = float64(f.n)
	default:
		v = rollup.Agg{}.Value(f.fn) // as Agg.Value: NaN
	}
	f.ts, f.vs = append(f.ts, f.lo), append(f.vs, v)
	f.n = 0
}

// result returns the start and the value of every bucket that holds a
// sample, in time order.
func (f *bucketFold) result() ([]int64, []float64) {
	if f.n > 0 {
		f.close()
	}
	return f.ts, f.vs
}

// maxPreallocBuckets bounds the buckets allocated before a downsampling
// read has found a sample.
const maxPreallocBuckets = 4096

// eachSample calls fn with every sample of s in [mint, maxt] in time order,
// the samples rawSamples would return, without collecting them: stored
// chunks are decoded one at a time and merged on the fly with the head
// (read first, as in rawSamples), the head winning an equal timestamp.
func (n *Node) eachSample(s *memSeries, mint, maxt int64, fn func(t int64, v float64)) error {
	head := s.snapshot(mint, maxt)
	j := 0
	var it chunk.Iterator
	err := n.db.Chunks(s.id, mint, maxt, func(c store.ChunkMeta, data []byte) error {
		it.Reset(data)
		for it.Next() {
			t, v := it.At()
			if t < mint {
				continue
			}
			if t > maxt {
				break // a chunk's samples ascend: the rest is later still
			}
			for j < len(head) && head[j].t < t {
				fn(head[j].t, head[j].v)
				j++
			}
			if j < len(head) && head[j].t == t {
				fn(head[j].t, head[j].v) // the head is newer
				j++
				continue
			}
			fn(t, v)
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("chunk at %s: %w", fmtMs(c.MinT), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, x := range head[j:] {
		fn(x.t, x.v)
	}
	return nil
}

var iteratorPool = sync.Pool{New: func() any { return new(chunk.Iterator) }}

// eachSampleBatch is eachSample handing the samples over in ascending
// runs: when the head holds nothing in [mint, maxt], stored chunks go to
// fn a decoded batch at a time, without a call per sample; otherwise
// eachSample's merge calls fn with one sample at a time. The slices are
// valid only until fn returns.
func (n *Node) eachSampleBatch(s *memSeries, mint, maxt int64, cr *store.ChunkReader, fn func(ts []int64, vs []float64)) error {
	if !s.headHasData(mint, maxt) {
		// Pooled: fn sees the iterator's buffers, so it would escape.
		it := iteratorPool.Get().(*chunk.Iterator)
		defer iteratorPool.Put(it)
		// After the head: a chunk flushed since is in the store (cr
		// opens a new iterator when the store was written).
		visit := func(c store.ChunkMeta, data []byte) error {
			it.Reset(data)
			for {
				ts, vs, ok := it.NextBatch()
				if !ok {
					break
				}
				if ts[0] < mint {
					i, _ := slices.BinarySearch(ts, mint)
					ts, vs = ts[i:], vs[i:]
				}
				if len(ts) > 0 && ts[len(ts)-1] > maxt {
					// A chunk's samples ascend: the rest is later still.
					i, _ := slices.BinarySearch(ts, maxt+1)
					if i > 0 {
						fn(ts[:i], vs[:i])
					}
					break
				}
				if len(ts) > 0 {
					fn(ts, vs)
				}
			}
			if err := it.Err(); err != nil {
				return fmt.Errorf("chunk at %s: %w", fmtMs(c.MinT), err)
			}
			return nil
		}
		if cr != nil {
			return cr.Chunks(s.id, mint, maxt, visit)
		}
		return n.db.Chunks(s.id, mint, maxt, visit)
	}
	var one [1]int64
	var oneV [1]float64
	return n.eachSample(s, mint, maxt, func(t int64, v float64) {
		one[0], oneV[0] = t, v
		fn(one[:], oneV[:])
	})
}

// rawSamples merges stored chunks and the head for [mint, maxt]. The head
// is read first: a chunk flushed in between is then read from both and
// de-duplicated, never missed.
func (n *Node) rawSamples(s *memSeries, mint, maxt int64) ([]sample, error) {
	head := s.snapshot(mint, maxt)
	stored, err := n.storedSamples(s.id, mint, maxt)
	if err != nil {
		return nil, err
	}
	return mergeLWW(stored, head), nil
}

func (n *Node) storedSamples(id uint64, mint, maxt int64) ([]sample, error) {
	var out []sample
	var it chunk.Iterator
	err := n.db.Chunks(id, mint, maxt, func(c store.ChunkMeta, data []byte) error {
		it.Reset(data)
		for it.Next() {
			t, v := it.At()
			if t > maxt {
				break // a chunk's samples ascend
			}
			if t >= mint {
				out = append(out, sample{t, v})
			}
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("chunk at %s: %w", fmtMs(c.MinT), err)
		}
		return nil
	})
	return out, err
}

// downsampleRollup answers a downsampling query whose step is a multiple
// of an hour from the rollups: whole cells (hours, or days when the step is
// a multiple of a day) come from the stored rollup; cells cut by the query
// range or holding unflushed head samples are computed from raw samples.
func (n *Node) downsampleRollup(s *memSeries, q *model.Query) ([]int64, []float64, int64, error) {
	r := rollupRead{n: n, s: s, q: q, dirty: map[int64]bool{}}
	for _, x := range s.snapshot(q.Start, q.End) {
		r.dirty[rollup.BucketStart(x.t, rollup.Hour)] = true
	}
	// Buckets are indexed from the first one; validate bounds their number.
	// The offset is a multiple of the step here (querySeries), so a rollup
	// cell lies in one bucket.
	r.first = aggregate.BucketStart(q.Start, q.Step, q.Offset)
	r.buckets = make([]rollup.Agg, (q.End-r.first)/q.Step+1)
	var err error
	if q.Step%rollup.Day == 0 {
		err = r.fromDaily()
	} else {
		err = r.fromHourly()
	}
	if err != nil {
		return nil, nil, 0, err
	}
	var ts []int64
	var vs []float64
	for i, a := range r.buckets {
		if a.Count > 0 {
			ts = append(ts, r.first+int64(i)*q.Step)
			vs = append(vs, a.Value(q.Downsample))
		}
	}
	return ts, vs, r.read, nil
}

// rollupRead is one series' downsampling from the rollups.
type rollupRead struct {
	n       *Node
	s       *memSeries
	q       *model.Query
	dirty   map[int64]bool // hours with head samples
	first   int64          // start of buckets[0]
	buckets []rollup.Agg
	read    int64 // rollup values and raw samples read
}

// clean says whether the stored rollup of the cell [cell, cell+width)
// answers for it: the cell lies in the range and holds no head sample.
func (r *rollupRead) clean(cell, width int64) bool {
	if cell < r.q.Start || cell+width-1 > r.q.End {
		return false
	}
	for h := cell; len(r.dirty) > 0 && h < cell+width; h += rollup.Hour {
		if r.dirty[h] {
			return false
		}
	}
	return true
}

// add merges a cell's aggregate into its bucket.
func (r *rollupRead) add(cell int64, a rollup.Agg) {
	if a.Count > 0 {
		r.buckets[(aggregate.BucketStart(cell, r.q.Step, r.q.Offset)-r.first)/r.q.Step].Merge(a)
	}
}

// hours adds the hours of one day that the range touches: clean ones from
// the packed hourly rollup, the others from raw samples.
func (r *rollupRead) hours(day *rollup.Hourly, dayStart int64) error {
	q := r.q
	for h := range 24 {
		start := dayStart + int64(h)*rollup.Hour
		if start+rollup.Hour-1 < q.Start || start > q.End {
			continue
		}
		if r.clean(start, rollup.Hour) {
			r.add(start, day.Hours[h])
			continue
		}
		samples, err := r.n.rawSamples(r.s, max(start, q.Start), min(start+rollup.Hour-1, q.End))
		if err != nil {
			return err
		}
		r.read += int64(len(samples))
		var agg rollup.Agg
		for _, x := range samples {
			agg.Add(x.t, x.v)
		}
		r.add(start, agg)
	}
	return nil
}

// fromDaily adds whole clean days from the daily tier, the others hour by
// hour.
func (r *rollupRead) fromDaily() error {
	firstDay := rollup.BucketStart(r.q.Start, rollup.Day)
	lastDay := rollup.BucketStart(r.q.End, rollup.Day)
	err := r.n.db.Rollups(store.KindRollup1d, r.s.id, rollup.PackStart(firstDay), lastDay, func(p int64, val []byte) error {
		pack, err := rollup.DecodeDaily(val, p)
		if err != nil {
			return fmt.Errorf("daily rollups from %s: %w", fmtMs(p), err)
		}
		r.read++
		for i, a := range pack.Days {
			if d := p + int64(i)*rollup.Day; d >= firstDay && d <= lastDay && r.clean(d, rollup.Day) {
				r.add(d, a)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	partial := []int64{firstDay, lastDay}
	for h := range r.dirty {
		partial = append(partial, rollup.BucketStart(h, rollup.Day))
	}
	slices.Sort(partial)
	for _, d := range slices.Compact(partial) {
		if r.clean(d, rollup.Day) {
			continue
		}
		day, err := r.n.readHourly(r.s.id, d)
		if err != nil {
			return err
		}
		r.read++
		if err := r.hours(&day, d); err != nil {
			return err
		}
	}
	return nil
}

// fromHourly adds the hours of every day the range touches.
func (r *rollupRead) fromHourly() error {
	firstDay := rollup.BucketStart(r.q.Start, rollup.Day)
	lastDay := rollup.BucketStart(r.q.End, rollup.Day)
	seen := map[int64]bool{}
	err := r.n.db.Rollups(store.KindRollup1h, r.s.id, firstDay, lastDay, func(d int64, val []byte) error {
		day, err := rollup.DecodeHourly(val, d)
		if err != nil {
			return fmt.Errorf("hourly rollups of %s: %w", fmtMs(d), err)
		}
		r.read++
		seen[d] = true
		return r.hours(&day, d)
	})
	// Days with no stored rollup may still have head samples.
	for h := range r.dirty {
		if d := rollup.BucketStart(h, rollup.Day); err == nil && !seen[d] {
			seen[d] = true
			err = r.hours(&rollup.Hourly{}, d)
		}
	}
	return err
}

// lastPoint finds the newest sample in [mint, maxt] (mint 0: as far back as
// the daily rollups are kept), from the head and the store.
func (n *Node) lastPoint(s *memSeries, mint, maxt int64) (int64, float64, bool, error) {
	if mint == 0 {
		mint = maxt - n.opts.Retention1d.Milliseconds()
	}
	x, inHead := s.newest(mint, maxt)
	stored, ok, err := n.lastStored(s.id, mint, maxt)
	if err != nil {
		return 0, 0, false, err
	}
	// The head is newer than the store for an equal timestamp.
	if inHead && (!ok || x.t >= stored.t) {
		return x.t, x.v, true, nil
	}
	return stored.t, stored.v, ok, nil
}

// lastStored finds the newest stored sample in [mint, maxt] from the
// rollups, newest pack first: a day whose newest sample is in range answers
// from its daily rollup; the day holding maxt is searched hour by hour, and
// only the hour holding maxt is read from raw chunks.
func (n *Node) lastStored(id uint64, mint, maxt int64) (sample, bool, error) {
	for p := rollup.PackStart(maxt); p+rollup.DailySpan-1 >= mint; p -= rollup.DailySpan {
		pack, err := n.readDaily(id, p)
		if err != nil {
			return sample{}, false, err
		}
		for i := len(pack.Days) - 1; i >= 0; i-- {
			day, a := p+int64(i)*rollup.Day, pack.Days[i]
			if a.Count == 0 || day > maxt {
				continue
			}
			if a.LastT < mint {
				return sample{}, false, nil // everything older is older still
			}
			if a.LastT <= maxt {
				return sample{a.LastT, a.Last}, true, nil
			}
			// maxt falls inside this day, before its newest sample.
			x, ok, err := n.lastInDay(id, day, mint, maxt)
			if err != nil || ok {
				return x, ok, err
			}
		}
	}
	return sample{}, false, nil
}

// lastInDay is lastStored within one day whose newest sample is after maxt.
func (n *Node) lastInDay(id uint64, day, mint, maxt int64) (sample, bool, error) {
	hours, err := n.readHourly(id, day)
	if err != nil {
		return sample{}, false, err
	}
	for h := 23; h >= 0; h-- {
		start, a := day+int64(h)*rollup.Hour, hours.Hours[h]
		if a.Count == 0 || start > maxt {
			continue
		}
		if a.LastT < mint {
			return sample{}, false, nil
		}
		if a.LastT <= maxt {
			return sample{a.LastT, a.Last}, true, nil
		}
		raw, err := n.storedSamples(id, max(start, mint), maxt)
		if err != nil || len(raw) > 0 {
			if len(raw) == 0 {
				return sample{}, false, err
			}
			return raw[len(raw)-1], true, err
		}
	}
	return sample{}, false, nil
}

// selectSeries resolves matchers through the label postings, sorted by
// labels.
func (n *Node) selectSeries(ms []*labels.Matcher) ([]*memSeries, error) {
	var ids []uint64
	have := false
	var exclude [][]uint64
	for _, m := range ms {
		if m.MatchesEmpty() {
			// Series without the label match too: subtract the values that don't.
			out, err := n.matchingPostings(m, true)
			if err != nil {
				return nil, err
			}
			exclude = append(exclude, out)
			continue
		}
		got, err := n.matchingPostings(m, false)
		if err != nil {
			return nil, err
		}
		if !have {
			ids, have = got, true
		} else {
			ids = aggregate.Intersect(nil, ids, got) // ids may be a cached list: not in place
		}
	}
	for _, ex := range exclude {
		ids = aggregate.Subtract(nil, ids, ex)
	}
	n.idxMu.RLock()
	list := make([]*memSeries, 0, len(ids))
	for _, id := range ids {
		if s := n.byID[id]; s != nil {
			list = append(list, s)
		}
	}
	n.idxMu.RUnlock()
	slices.SortFunc(list, func(a, b *memSeries) int { return labels.Compare(a.lset, b.lset) })
	return list, nil
}

// matchingPostings returns the postings of the series whose label m.Name
// has a value that m matches (that m does not match, if invert), from the
// postings cache when it holds them; the slice is shared and must not be
// modified. An equality matcher, or a regexp that matches a small finite
// set of values (`host_1|host_7`), is answered by equality lookups; any
// other matcher tests every value of the label once and caches the result.
func (n *Node) matchingPostings(m *labels.Matcher, invert bool) ([]uint64, error) {
	if !invert {
		if m.Type == labels.MatchEqual {
			return n.cachedPostings(m.Name, m.Value)
		}
		if set, ok := m.LiteralSet(); ok && m.Type == labels.MatchRegexp {
			return n.unionPostings(m.Name, set)
		}
	}
	key := "\x01" + m.String()
	if invert {
		key = "\x02" + m.String()
	}
	ids, gen, ok := n.postings.get(key)
	if ok {
		return ids, nil
	}
	ids, err := n.db.PostingsMatching(m.Name, func(v string) bool { return m.Matches(v) != invert })
	if err != nil {
		return nil, err
	}
	n.postings.put(key, ids, gen)
	return ids, nil
}

// unionPostings returns the union of the postings of name=v for every v in
// values, ascending and unique.
func (n *Node) unionPostings(name string, values []string) ([]uint64, error) {
	if len(values) == 1 {
		return n.cachedPostings(name, values[0])
	}
	var out []uint64
	for _, v := range values {
		ids, err := n.cachedPostings(name, v)
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// cachedPostings returns the postings of name=value, from the cache when
// it holds them. The slice is shared: callers must not modify it.
func (n *Node) cachedPostings(name, value string) ([]uint64, error) {
	key := postingsKey(name, value)
	ids, gen, ok := n.postings.get(key)
	if ok {
		return ids, nil
	}
	ids, err := n.db.Postings(name, value)
	if err != nil {
		return nil, err
	}
	n.postings.put(key, ids, gen)
	return ids, nil
}
