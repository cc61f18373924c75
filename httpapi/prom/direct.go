package prom

import (
	"context"
	"math"
	"slices"
	"time"

	pmodel "github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/schema"
	"github.com/prometheus/prometheus/storage"
)

// Queries answered without the engine.
//
// Dashboards and TSBS mostly ask queries of two shapes, as instant queries
// or range queries evaluated every window (step == R):
//
//	f(sel[R])                    f: max_over_time, min_over_time, last_over_time
//	agg [by (g…)] (f(sel[R]))    agg: max, min
//
// When Select answers such a selector from downsampled data (see
// downsample.go) with no window from raw samples, it returns at most one
// sample per window, placed at the window's end, which is the evaluation
// step the window belongs to; with a max or min by labels above it, at
// most one series per group. The engine's evaluation is then a copy: f of
// one sample is that sample, the aggregation keeps the value its
// comparisons keep (done by foldSeries, in the engine's order), and
// delayed name removal drops __name__ from the result unless f is
// last_over_time; a range result is sorted by labels, an instant one keeps
// the order of its series (or groups). evalDirect does exactly that from
// one Select, with the hints the engine would pass, and skips the
// engine's parsing, planning, per-step evaluation and bookkeeping, which
// cost as much as the read for a one-series query.
//
// The shape of a query string is parsed once and kept (directCache,
// bounded); it depends on the string alone, never on data. Every answer
// is read from the store per request, as the engine reads it.
//
// Whatever evalDirect is not sure to answer as the engine would goes to
// the engine: a Select that is not downsampled, fails, or has a window
// from raw samples or a NaN; result series that collide once the name is
// dropped (the engine merges them or refuses the query), except the one
// case keepname.go answers, which evalDirect answers the same way; and
// answers large enough that the engine's sample limit might apply. The
// request's select memo then hands the engine the answer already read.

// directShape is the parsed form of a query evalDirect may answer.
type directShape struct {
	fn       string // the range function
	rng      int64  // its range R, in milliseconds
	matchers []*labels.Matcher
	// fold is the aggregation above the function, nil for none; its
	// matcher key is matchers[0], as groupFolds keys it.
	fold *groupFold
	// dropName: delayed name removal drops __name__ from the result.
	dropName bool
	// byName: the aggregation groups by __name__ (see keepname.go).
	byName bool
}

// directFuncs are the range functions evalDirect answers: those whose
// value over one sample is that sample (first_over_time is experimental
// and not always parsed).
var directFuncs = map[string]bool{"max_over_time": true, "min_over_time": true, "last_over_time": true}

// parseDirectShape returns the shape of qs, or nil when qs has none of
// the shapes evalDirect answers.
func parseDirectShape(qs string) *directShape {
	expr, err := parser.ParseExpr(qs)
	if err != nil {
		return nil
	}
	es := &parser.EvalStmt{Expr: expr}
	if !downsamplable(es) {
		return nil
	}
	var agg *parser.AggregateExpr
	e := unparen(expr)
	if a, ok := e.(*parser.AggregateExpr); ok {
		if (a.Op != parser.MAX && a.Op != parser.MIN) || a.Without || a.Param != nil {
			return nil
		}
		agg, e = a, unparen(a.Expr)
	}
	c, ok := e.(*parser.Call)
	if !ok || !directFuncs[c.Func.Name] || len(c.Args) != 1 {
		return nil
	}
	m, ok := unparen(c.Args[0]).(*parser.MatrixSelector)
	if !ok || m.Range <= 0 {
		return nil
	}
	vs, ok := m.VectorSelector.(*parser.VectorSelector)
	if !ok || len(vs.LabelMatchers) == 0 || vs.OriginalOffset != 0 || vs.Timestamp != nil || vs.StartOrEnd != 0 {
		return nil
	}
	s := &directShape{
		fn:       c.Func.Name,
		rng:      m.Range.Milliseconds(),
		matchers: vs.LabelMatchers,
		dropName: c.Func.Name != "last_over_time",
	}
	if s.rng <= 0 || time.Duration(s.rng)*time.Millisecond != m.Range {
		return nil
	}
	if agg != nil {
		s.fold = groupFolds(es)[vs.LabelMatchers[0]]
		if s.fold == nil {
			return nil
		}
		s.byName = slices.Contains(s.fold.by, pmodel.MetricNameLabel)
	}
	return s
}

// directCache keeps parseDirectShape by query string. It is safe for
// concurrent use and bounded like literalCache: at most maxCachedQueries
// strings of at most maxCachedQueryBytes each (cleared when full; longer
// queries are parsed every time), each with a shape about its own size. A
// shape is read-only once built.
type directCache struct {
	shapes memo[*directShape] // nil value: no shape
}

func (c *directCache) shape(qs string) *directShape {
	return c.shapes.get(qs, maxCachedQueries, parseDirectShape)
}

// rangeParams are a query's times, in milliseconds; step 0 is an instant
// query at start (== end).
type rangeParams struct {
	start, end, step int64
}

// evalDirect answers the query qs at rp as the engine would (see above),
// or reports false, having at most filled env.memo (made if need be), when
// the engine must.
func (a *API) evalDirect(env *queryEnv, qs string, rp rangeParams) (*promql.Result, bool) {
	if a.opts.DisableDownsampling || a.opts.DisableDelayedNameRemoval || a.noDirect {
		return nil, false
	}
	s := a.direct.shape(a.literals.rewriteLiteralRegexps(qs))
	if s == nil || (rp.step != 0 && rp.step != s.rng) {
		return nil, false
	}
	// No memo for this Select: its answer is put in env.memo only when
	// the engine is to answer (see leave), which spares building its key.
	q := &queryable{api: a, downsample: true, staleness: env.staleness, fresh: &env.fresh}
	if s.fold != nil {
		q.folds = map[*labels.Matcher]*groupFold{s.matchers[0]: s.fold}
	}
	// The engine's hints for the selector (populateSeries).
	hints := &storage.SelectHints{Start: rp.start - s.rng + 1, End: rp.end, Step: rp.step, Range: s.rng, Func: s.fn}
	if _, ok := q.plan(hints); !ok {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(env.ctx, a.opts.QueryTimeout)
	defer cancel()
	qr := &querier{q: q, mint: hints.Start, maxt: hints.End}
	set := qr.Select(ctx, false, hints, s.matchers...)
	ss, ok := set.(*seriesSet)
	if !ok || set.Err() != nil {
		return nil, false
	}
	// leave hands the read to the engine, through the request's memo
	// under the key its own Select will have.
	leave := func() (*promql.Result, bool) {
		if env.memo == nil {
			env.memo = &selectMemo{}
		}
		key := selectKey(true, s.fold, hints.Start, hints.End, hints, s.matchers)
		env.memo.put(key, memoSet{list: ss.list, samples: int(q.loaded.Load()), warnings: ss.warnings})
		return nil, false
	}
	if q.rawWindows.Load() {
		return leave()
	}
	// Every sample must be one window's, at its end, and a number.
	total := 0
	for _, sr := range ss.list {
		for i, t := range sr.ts {
			if !rp.evalTime(t) || (i > 0 && t <= sr.ts[i-1]) || math.IsNaN(sr.vs[i]) {
				return leave()
			}
		}
		total += len(sr.ts)
	}
	// The engine holds the selected samples and the result at once; leave
	// any query near its limit to it.
	if 2*total+len(ss.list) > a.opts.MaxSamples/2 {
		return leave()
	}
	list := ss.list
	if s.fold != nil {
		list = foldAll(list, s.fold)
	}
	warns := ss.Warnings()
	// Delayed name removal, then the engine's check for collisions.
	instant := rp.step == 0
	mat := directMatrix(list, total, s.dropName, false, !instant)
	collide, overlap := collisions(mat, instant)
	if collide {
		// The engine merges colliding series without common steps, and
		// refuses the others; keepname.go answers those of an
		// aggregation by __name__ with the name kept.
		if !overlap || !s.byName {
			return leave()
		}
		if _, ok := a.keptNames.keepGroupedNames(qs); !ok {
			return leave()
		}
		mat = directMatrix(list, total, s.dropName, true, !instant)
		if c, _ := collisions(mat, instant); c {
			return leave()
		}
		warns.Add(errKeptName)
	}
	a.stats.Inc(StatQueriesDirect)
	if instant {
		// One sample per series, at the evaluation time.
		vec := make(promql.Vector, len(mat))
		for i, sr := range mat {
			vec[i] = promql.Sample{Metric: sr.Metric, T: rp.start, F: sr.Floats[0].F}
		}
		return &promql.Result{Value: vec, Warnings: warns}, true
	}
	return &promql.Result{Value: mat, Warnings: warns}, true
}

// evalTime reports whether t is an evaluation time of the query.
func (rp rangeParams) evalTime(t int64) bool {
	if rp.step == 0 {
		return t == rp.start
	}
	return t >= rp.start && t <= rp.end && (t-rp.start)%rp.step == 0
}

// directMatrix is the engine's result for the per-window series list
// (total samples): __name__ dropped when dropName, except, when keepName,
// from a series that has one (label_replace of the name by itself, as
// keepname.go wraps the aggregation); sorted by labels as a range query's
// result is, or else in the order of list, as an instant query's is.
func directMatrix(list []series, total int, dropName, keepName, sorted bool) promql.Matrix {
	mat := make(promql.Matrix, 0, len(list))
	pts := make([]promql.FPoint, total) // one allocation for every series
	for _, sr := range list {
		if len(sr.ts) == 0 {
			continue
		}
		p := pts[:len(sr.ts):len(sr.ts)]
		pts = pts[len(sr.ts):]
		for i := range sr.ts {
			p[i] = promql.FPoint{T: sr.ts[i], F: sr.vs[i]}
		}
		m := sr.lset
		if dropName && !(keepName && m.Get(pmodel.MetricNameLabel) != "") {
			m = m.DropReserved(schema.IsMetadataLabel)
		}
		mat = append(mat, promql.Series{Metric: m, Floats: p})
	}
	if sorted {
		slices.SortFunc(mat, func(x, y promql.Series) int { return labels.Compare(x.Metric, y.Metric) })
	}
	return mat
}

// collisions reports whether mat has series with equal labels, and
// whether two of those have a sample at the same time; mat is sorted by
// labels unless instant (one sample per series, all at the same time).
func collisions(mat promql.Matrix, instant bool) (collide, overlap bool) {
	if instant {
		c := mat.ContainsSameLabelset()
		return c, c
	}
	for i := 1; i < len(mat); i++ {
		if !labels.Equal(mat[i].Metric, mat[i-1].Metric) {
			continue
		}
		collide = true
		j := i
		for j+1 < len(mat) && labels.Equal(mat[j+1].Metric, mat[i].Metric) {
			j++
		}
		seen := map[int64]bool{}
		for _, s := range mat[i-1 : j+1] {
			for _, p := range s.Floats {
				if seen[p.T] {
					return true, true
				}
				seen[p.T] = true
			}
		}
		i = j
	}
	return collide, false
}

// foldAll folds list, sorted by labels, by f's groups as the engine's
// aggregation does, labelled with the group's labels; unlike foldGroups it
// also relabels groups of one series.
func foldAll(list []series, f *groupFold) []series {
	out := foldGroups(list, f)
	if len(out) != len(list) || len(list) == 0 {
		return out
	}
	// Groups of one: foldGroups returned list itself.
	out = make([]series, len(list))
	for i, s := range list {
		out[i] = series{lset: s.lset.MatchLabels(true, f.by...), ts: s.ts, vs: s.vs}
	}
	return out
}
