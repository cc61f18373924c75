package prom

import (
	"context"
	"maps"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/tributarydb/tributary/model"
	nlabels "github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// Answering range functions from downsampled data.
//
// For `f(x[R])` evaluated every R (hints.Range == hints.Step), PromQL
// evaluates f over the samples of consecutive, non-overlapping windows
// (e-R, e] (left-open since Prometheus 3.0; the engine selects from
// hints.Start = first e - R + 1, and each window is the inclusive
// [hints.Start + i*R, hints.Start + (i+1)*R - 1]). When f only looks at
// one sample of a window — the largest, the smallest, the first, the last,
// or whether there is any — Select may return that sample alone, placed at
// the window's end e, which lies in exactly that window. The node computes
// it per bucket [b, b+R) with Query.Offset = hints.Start mod R, so its
// buckets are exactly the windows. An instant query (hints.Step == 0) has
// one window, hints.Start..hints.End.
//
// The answer is then bit-for-bit the engine's answer on raw data, with one
// catch: NaN. The engine drops staleness markers (a NaN) before looking at
// a window and its max/min skip a NaN that is not first, while the node's
// aggregate takes whatever sample comes first. Whenever the node's value
// for a window is NaN, that window is answered with its raw samples
// instead; when it is not NaN, no NaN came first in the window, and the
// node's max, min, first and last equal the engine's (a NaN later in the
// window is ignored by both, or is not the first or last sample). For the
// same reason max and min never use the hourly rollups in exact mode: a
// rollup merges per-hour aggregates, and an hour that starts with a NaN
// would hide its other samples. The windows of a range function evaluated
// every R, R whole hours, that end on the hour are different: their
// buckets are offset by 1 ms (left-open hours), and the node answers them
// from its hourly rollups only where those give the raw answer bit for
// bit, reading an hour with a NaN, or whose sample on the hour may hold
// its max or min, from raw samples (node/leftopen.go).
//
// sum_over_time and avg_over_time are not answered this way in exact mode:
// the engine adds with Kahan compensation and the node does not, so the
// last bits can differ. count_over_time never is: the engine would count
// the one sample, and the node's count includes the staleness markers the
// engine drops, so no one sample stands for it. rate, increase and delta
// are not either: they need every counter reset inside the window, which
// no per-window aggregate of the node (first, last, min, max, sum, count)
// determines.
//
// An instant query of last_over_time (present_over_time, absent_over_time)
// has one window and wants its newest sample: the node answers it with its
// last-point read (model.ModeLastPoint), the newest sample in the window
// from the head or else the stored rollups (a daily rollup whose newest
// sample is in the window answers at once; raw chunks are read only for
// the hour that the window's end cuts), not a scan of the window. It is the
// sample the downsampling path would return (the newest by time, the head
// winning an equal timestamp), so the same NaN rule applies: a NaN newest
// sample sends the window to raw samples.
//
// Approximate mode (Options.ApproximateRollups) additionally serves
// windows that are whole hours (R a multiple of 1h, window starts on a
// multiple of R since the epoch) from the node's rollup buckets [b, b+R):
// the node then reads hourly and daily rollups, and sum_over_time and
// avg_over_time are served too. A sample exactly on an edge between two
// windows is then counted in the window that starts there instead of the
// one that ends there: an approximation at the edges, and the only way to
// query ranges longer than the raw retention.

// exactFuncs are the range functions answered exactly from one sample per
// window, with the node function that picks the sample.
var exactFuncs = map[string]rollup.Func{
	"max_over_time":     rollup.FuncMax,
	"min_over_time":     rollup.FuncMin,
	"first_over_time":   rollup.FuncFirst,
	"last_over_time":    rollup.FuncLast,
	"present_over_time": rollup.FuncLast,
	"absent_over_time":  rollup.FuncLast,
}

// approxFuncs are those answered from rollup buckets in approximate mode:
// the exact ones, and sums and averages.
var approxFuncs = func() map[string]rollup.Func {
	m := maps.Clone(exactFuncs)
	m["sum_over_time"] = rollup.FuncSum
	m["avg_over_time"] = rollup.FuncAvg
	return m
}()

// plan is how a Select is answered from downsampled data.
type plan struct {
	fn     rollup.Func
	width  int64 // window length R, the node query's step
	offset int64 // node bucket alignment
	// qStart and qEnd are the node query's range.
	qStart, qEnd int64
	// end is the last evaluated window end (hints.End); buckets whose
	// window ends later are never looked at and are dropped.
	end int64
	// approx: buckets are [b, b+R) standing for the window (b, b+R];
	// otherwise they are the windows [b, b+R-1] themselves.
	approx bool
	// newest: the one window [qStart, qEnd] of an instant query of a
	// function that looks at the last sample alone, answered with the
	// node's newest sample in it (model.ModeLastPoint: the head, then the
	// stored rollups, and raw chunks only for a window that cuts an hour
	// short) instead of scanning the window.
	newest bool
	// fold, when not nil, says the engine reads the series only through a
	// max or min aggregation by labels (see groupFolds).
	fold *groupFold
}

// windowOf returns the window (inclusive bounds) that the node bucket
// starting at b stands for.
func (p *plan) windowOf(b int64) (lo, hi int64) {
	if p.approx {
		return b + 1, b + p.width
	}
	return b, b + p.width - 1
}

func floorMod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}

// plan decides whether a Select with these hints can be answered from
// downsampled data.
func (q *queryable) plan(h *storage.SelectHints) (plan, bool) {
	if h == nil || !q.downsample || h.Range <= 0 || h.End < h.Start {
		return plan{}, false
	}
	r := h.Range
	switch {
	case h.Step == 0 && h.End-h.Start+1 == r: // instant query: one window
	case h.Step == r:
	default:
		return plan{}, false
	}
	if (h.End-h.Start)/r >= model.MaxBuckets {
		return plan{}, false
	}
	if q.api.opts.ApproximateRollups && r%rollup.Hour == 0 && floorMod(h.Start-1, r) == 0 {
		if f, ok := approxFuncs[h.Func]; ok {
			return plan{fn: f, width: r, qStart: h.Start - 1, qEnd: h.End - 1, end: h.End, approx: true}, true
		}
	}
	f, ok := exactFuncs[h.Func]
	if !ok {
		return plan{}, false
	}
	off := floorMod(h.Start, r)
	if off == 0 && r%rollup.Hour == 0 && (f == rollup.FuncMax || f == rollup.FuncMin) {
		return plan{}, false // the node would merge hourly rollups; see above
	}
	newest := f == rollup.FuncLast && h.Step == 0 && h.Start > 0
	return plan{fn: f, width: r, offset: off, qStart: h.Start, qEnd: h.End, end: h.End, newest: newest}, true
}

// window is a time range, inclusive.
type window struct{ lo, hi int64 }

// fallback is a series some of whose windows need raw samples.
type fallback struct {
	idx     int      // in the result list
	windows []window // sorted
	// nan holds the node's (NaN) value of each window, kept in
	// approximate mode when raw samples are gone.
	nan []float64
}

func (qr *querier) selectDownsampled(ctx context.Context, ms []*nlabels.Matcher, p plan) ([]series, error) {
	var out []series
	fallbacks := map[string]*fallback{}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	var read int64
	nq := model.Query{Matchers: ms, Start: p.qStart, End: p.qEnd, Mode: model.ModeDownsample,
		Step: p.width, Offset: p.offset, Downsample: p.fn}
	if p.newest {
		nq = model.Query{Matchers: ms, Start: p.qStart, End: p.qEnd, Mode: model.ModeLastPoint}
	}
	err := qr.query(ctx, nq, func(lset labels.Labels, s model.Series) error {
		read += int64(len(s.Ts))
		var fb *fallback
		ts, vs := s.Ts[:0], s.Vs[:0] // in place: the backend hands the slices over
		for i, b := range s.Ts {
			wlo, whi := p.windowOf(b)
			if p.newest {
				wlo, whi = p.qStart, p.qEnd // b is the newest sample's time
			}
			if whi > p.end {
				continue
			}
			v := s.Vs[i]
			if !math.IsNaN(v) {
				ts, vs = append(ts, whi), append(vs, v)
				continue
			}
			if fb == nil {
				fb = &fallback{idx: len(out)}
				fallbacks[string(s.Labels.AppendKey(nil))] = fb
			}
			fb.windows = append(fb.windows, window{wlo, whi})
			fb.nan = append(fb.nan, v)
			lo, hi = min(lo, wlo), max(hi, whi)
		}
		out = append(out, series{lset: lset, ts: ts, vs: vs})
		return nil
	})
	qr.q.api.stats.Add(StatSamplesRead, read)
	if err == nil && len(fallbacks) == 0 && p.fold != nil && len(out) > 1 {
		folded := foldGroups(out, p.fold)
		if len(folded) < len(out) {
			qr.q.api.stats.Inc(StatSelectsFolded)
		}
		return folded, nil
	}
	if err != nil || len(fallbacks) == 0 {
		return out, err
	}
	qr.q.api.stats.Add(StatWindowsFromRaw, int64(len(fallbacks)))
	qr.q.rawWindows.Store(true)
	raw := map[string]model.Series{}
	err = qr.query(ctx, model.Query{Matchers: ms, Start: lo, End: hi, Mode: model.ModeRaw}, func(_ labels.Labels, s model.Series) error {
		key := string(s.Labels.AppendKey(nil))
		if fallbacks[key] != nil {
			raw[key] = s
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for key, fb := range fallbacks {
		s := &out[fb.idx]
		s.ts, s.vs = mergeWindows(s.ts, s.vs, fb, raw[key], p.approx)
	}
	return out, nil
}

// Folding the series of a group before the engine sees them.
//
// In `max by (g) (max_over_time(x[R]))` evaluated every R (likewise min,
// and min_over_time, first_over_time and last_over_time inside), the
// engine computes one value per series and window, then at each step
// folds the values of the series of each group, in the order Select
// returned them, keeping a value that is larger (smaller) than the one it
// holds. When every per-window value the node returned is a number (no
// window fell back to raw samples: see NaN above), Select may do that fold
// itself and return one series per group, labelled with the group's
// labels alone: the engine then evaluates the function over one sample
// per window of that series, which is the folded value, and the
// aggregation of one series per group, which keeps it. The answer is the
// same, bit for bit (the fold compares as the engine does, in the same
// order, so even +0 and -0 come out alike); the engine just evaluates one
// series per group instead of all of them, which is most of its work for
// `max(max_over_time({hostname=~"a|b|…"}[1m]))`.
//
// Only `by` groupings fold (`without` keeps labels that differ between
// the series of a group), and only with delayed name removal (without it,
// the function drops __name__ and series that then collide are an error,
// which folding would hide). A statement whose shape does not match, or a
// Select with a window answered from raw samples, is answered per series.

// groupFold is the aggregation a selector's series are folded with.
type groupFold struct {
	max bool     // max, else min
	by  []string // the grouping labels, sorted
}

// foldFuncs are the range functions whose per-window value the node
// gives exactly (exactFuncs) and that a max or min may fold.
var foldFuncs = map[string]bool{"max_over_time": true, "min_over_time": true, "first_over_time": true, "last_over_time": true}

// groupFolds returns the selectors of a downsamplable statement whose
// series may be folded, by their first matcher (the engine passes the
// selector's own matchers to Select), or nil.
func groupFolds(stmt parser.Statement) map[*labels.Matcher]*groupFold {
	es, ok := stmt.(*parser.EvalStmt)
	if !ok {
		return nil
	}
	var folds map[*labels.Matcher]*groupFold
	parser.Inspect(es.Expr, func(n parser.Node, _ []parser.Node) error {
		a, ok := n.(*parser.AggregateExpr)
		if !ok || (a.Op != parser.MAX && a.Op != parser.MIN) || a.Without || a.Param != nil {
			return nil
		}
		c, ok := unparen(a.Expr).(*parser.Call)
		if !ok || !foldFuncs[c.Func.Name] || len(c.Args) != 1 {
			return nil
		}
		m, ok := unparen(c.Args[0]).(*parser.MatrixSelector)
		if !ok {
			return nil
		}
		vs, ok := m.VectorSelector.(*parser.VectorSelector)
		if !ok || len(vs.LabelMatchers) == 0 {
			return nil
		}
		if folds == nil {
			folds = map[*labels.Matcher]*groupFold{}
		}
		by := slices.Clone(a.Grouping)
		slices.Sort(by)
		folds[vs.LabelMatchers[0]] = &groupFold{max: a.Op == parser.MAX, by: slices.Compact(by)}
		return nil
	})
	return folds
}

func unparen(e parser.Expr) parser.Expr {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

// foldGroups folds the per-window samples of list, sorted by labels, by
// f's groups: one series per group, labelled with the group's labels, in
// the order of each group's first series. When every group has one
// series, it returns list as it is.
func foldGroups(list []series, f *groupFold) []series {
	type group struct {
		first int // in list
		ts    []int64
		vs    []float64
	}
	groups := make([]group, 0, len(list))
	index := make(map[string]int, len(list))
	var key []byte
	for i, s := range list {
		key = s.lset.BytesWithLabels(key[:0], f.by...)
		if g, ok := index[string(key)]; ok {
			groups[g].ts, groups[g].vs = foldSeries(groups[g].ts, groups[g].vs, s.ts, s.vs, f.max)
			continue
		}
		index[string(key)] = len(groups)
		groups = append(groups, group{first: i, ts: s.ts, vs: s.vs})
	}
	if len(groups) == len(list) {
		return list // groups of one: nothing folds
	}
	out := make([]series, len(groups))
	for i, g := range groups {
		out[i] = series{lset: list[g.first].lset.MatchLabels(true, f.by...), ts: g.ts, vs: g.vs}
	}
	return out
}

// foldSeries folds the samples (bt, bv) into (at, av), both sorted by
// time: at a time both have, b's value replaces a's when it is larger
// (max) or smaller, as the engine's max and min aggregations compare.
func foldSeries(at []int64, av []float64, bt []int64, bv []float64, isMax bool) ([]int64, []float64) {
	ot := make([]int64, 0, max(len(at), len(bt)))
	ov := make([]float64, 0, max(len(at), len(bt)))
	i, j := 0, 0
	for i < len(at) || j < len(bt) {
		switch {
		case j >= len(bt) || (i < len(at) && at[i] < bt[j]):
			ot, ov = append(ot, at[i]), append(ov, av[i])
			i++
		case i >= len(at) || bt[j] < at[i]:
			ot, ov = append(ot, bt[j]), append(ov, bv[j])
			j++
		default:
			v := av[i]
			if (isMax && v < bv[j]) || (!isMax && v > bv[j]) {
				v = bv[j]
			}
			ot, ov = append(ot, at[i]), append(ov, v)
			i++
			j++
		}
	}
	return ot, ov
}

// mergeWindows merges the per-window samples of a series with the raw
// samples of its fallback windows; both are sorted and the windows are
// disjoint, so the result is sorted. In approximate mode a fallback window
// without raw samples (they are older than the raw retention) keeps the
// node's value at its end.
func mergeWindows(ts []int64, vs []float64, fb *fallback, raw model.Series, approx bool) ([]int64, []float64) {
	var add []int64
	var addV []float64
	j := 0
	for w, win := range fb.windows {
		for j < len(raw.Ts) && raw.Ts[j] < win.lo {
			j++
		}
		n := 0
		for ; j < len(raw.Ts) && raw.Ts[j] <= win.hi; j++ {
			add, addV = append(add, raw.Ts[j]), append(addV, raw.Vs[j])
			n++
		}
		if n == 0 && approx {
			add, addV = append(add, win.hi), append(addV, fb.nan[w])
		}
	}
	outT := make([]int64, 0, len(ts)+len(add))
	outV := make([]float64, 0, len(ts)+len(add))
	i, k := 0, 0
	for i < len(ts) || k < len(add) {
		if k >= len(add) || (i < len(ts) && ts[i] < add[k]) {
			outT, outV = append(outT, ts[i]), append(outV, vs[i])
			i++
			continue
		}
		outT, outV = append(outT, add[k]), append(outV, addV[k])
		k++
	}
	return outT, outV
}

// downsamplable reports whether a statement's shape allows plan at all:
// every selector is evaluated on the query's own step grid. Subqueries
// evaluate on their own grid, @ pins a selector to one time (the hints then
// ignore its offset), and the extended range selectors (anchored, smoothed)
// look outside the window. (A selector inside a StepInvariantExpr always
// has an @.)
func downsamplable(stmt parser.Statement) bool {
	es, ok := stmt.(*parser.EvalStmt)
	if !ok {
		return false
	}
	allowed := true
	parser.Inspect(es.Expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.SubqueryExpr:
			allowed = false
		case *parser.VectorSelector:
			if n.Timestamp != nil || n.StartOrEnd != 0 || n.Anchored || n.Smoothed {
				allowed = false
			}
		}
		return nil
	})
	return allowed
}
