package query

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/model/aggregate"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// Query runs q over the fleet; see QueryWithCoverage. When the answer is
// incomplete, QueryInfo.Warnings says what is missing.
func (f *Frontend) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	info, _, err := f.QueryWithCoverage(ctx, q, emit)
	return info, err
}

// queryWithCoverage is QueryWithCoverage (metrics.go times the call): it
// plans the query (plan), runs every edge's legs (runEdges), merges their
// answers and coverage (merge) and emits the merged series, aggregated
// across series when q asks for it (emitAnswer).
func (f *Frontend) queryWithCoverage(ctx context.Context, q model.Query, emit func(model.Series) error) (_ model.QueryInfo, _ Coverage, err error) {
	var info model.QueryInfo
	var cov Coverage
	ctx, span := startQuery(ctx, q)
	defer func() { endQuery(span, &info, len(cov.Edges), &err) }()
	qp, err := f.plan(ctx, q)
	if err != nil {
		return info, cov, err
	}
	results := f.runEdges(ctx, qp)
	if err := ctx.Err(); err != nil {
		return info, cov, err
	}
	_, merge := telemetry.StartChild(ctx, "query.merge")
	defer merge.End()
	var list []*seriesData
	list, info, cov = mergeResults(results, qp.q, qp.matched > 0)
	info.FreshThroughMs = qp.freshThrough(cov)
	if len(list) > qp.limit {
		return info, cov, fmt.Errorf("%w: %d series match, limit is %d; narrow the matchers", model.ErrBadQuery, len(list), qp.limit)
	}
	return info, cov, emitAnswer(list, qp.q, &info, emit)
}

// queryPlan is a query resolved in the catalog.
type queryPlan struct {
	q     model.Query // validated
	sub   model.Query // what edges and replicas are asked: no cross-series aggregation
	limit int         // on the series of the answer
	// edges are every edge asked, sorted; plans[i] is the plan of
	// edges[i] when it registered matching series (nil: it is asked for
	// the series it created since its watermark, queryFresh).
	edges   []string
	plans   []*legPlan
	matched int // edges with catalog-matching series
	// vouched counts the edges not asked: no catalog-matching series, and
	// a registration watermark at or after the query's end.
	vouched int
	// stale is the query's staleness allowance in ms (0: none). With one,
	// staleVouched counts the edges without catalog-matching series not
	// asked because the catalog knows their series within it of the end,
	// and staleThrough is the oldest time through which it knows them
	// (math.MaxInt64: none).
	stale        int64
	staleVouched int
	staleThrough int64
}

// staleness is q's allowance in ms: its own, or the front end's default
// when it sets none (model.AlwaysFresh: none).
func (f *Frontend) staleness(q model.Query) int64 {
	switch {
	case q.MaxStaleness > 0:
		return q.MaxStaleness
	case q.MaxStaleness == 0:
		return f.o.MaxStaleness.Milliseconds()
	}
	return 0
}

// within reports whether wm is at most d before end (without overflow).
func within(wm, end, d int64) bool {
	return wm >= end || uint64(end)-uint64(wm) <= uint64(d)
}

// freshThrough is the answer's QueryInfo.FreshThroughMs: 0 without a
// staleness allowance; otherwise the oldest of the query's end, the
// watermarks of the edges whose newest data was not asked for (StaleTail)
// and the times through which the catalog knows the series of the edges
// left unasked for new series.
func (qp *queryPlan) freshThrough(cov Coverage) int64 {
	if qp.stale == 0 {
		return 0
	}
	t := min(qp.q.End, qp.staleThrough)
	for _, e := range cov.Edges {
		if e.StaleTail {
			t = min(t, e.WatermarkMs)
		}
	}
	return t
}

// plan validates q and resolves it in the catalog: the matching series,
// the edges to ask and, per edge with matching series, how its range is
// split between it and its replicas.
func (f *Frontend) plan(ctx context.Context, q model.Query) (*queryPlan, error) {
	_, span := telemetry.StartChild(ctx, "query.plan")
	defer span.End()
	q.Matchers = slices.Clone(q.Matchers)
	q.GroupBy = slices.Clone(q.GroupBy)
	// A node's checks, in its words: a bad query fails before any source
	// is asked.
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if err := f.barrier(ctx); err != nil {
		return nil, err
	}
	refs, err := f.o.Catalog.Select(q.Matchers, 0)
	if err != nil {
		return nil, fmt.Errorf("select series in the catalog: %w", err)
	}
	qp := &queryPlan{q: q, limit: q.LimitSeries}
	if qp.limit <= 0 {
		qp.limit = f.o.MaxSeries
	}
	if len(refs) > qp.limit {
		return nil, fmt.Errorf("%w: %d series match, limit is %d; narrow the matchers", model.ErrBadQuery, len(refs), qp.limit)
	}
	ids := make([]uint64, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	qp.stale, qp.staleThrough = f.staleness(q), math.MaxInt64
	var matched map[string]bool
	qp.edges, matched, qp.vouched = f.planEdges(ids, q.End)
	qp.matched = len(matched)
	qp.sub = q
	qp.sub.Aggregate, qp.sub.GroupBy = rollup.FuncNone, nil
	qp.sub.LimitSeries = qp.limit
	qp.sub.MaxStaleness = 0 // the allowance is the front end's: sources answer from what they hold
	if qp.stale > 0 {
		qp.edges = qp.leaveFresh(f, matched)
	}
	qp.plans = make([]*legPlan, len(qp.edges))
	var planned []*legPlan
	for i, edge := range qp.edges {
		if matched[edge] {
			p := f.planEdge(edge, qp.sub, qp.stale)
			qp.plans[i] = &p
			planned = append(planned, &p)
		}
	}
	shareReplicaLegs(planned, qp.sub)
	span.SetAttributes(attribute.Int("tributary.query.edges", len(qp.edges)), attribute.Int("tributary.query.series", len(refs)),
		attribute.Int("tributary.query.edges_vouched", qp.vouched), attribute.Int("tributary.query.edges_stale", qp.staleVouched))
	return qp, nil
}

// runEdges answers the plan's sub-query for every edge, at most
// MaxParallelEdges at once.
func (f *Frontend) runEdges(ctx context.Context, qp *queryPlan) []edgeResult {
	results := make([]edgeResult, len(qp.edges))
	sem := make(chan struct{}, f.o.MaxParallelEdges)
	var wg sync.WaitGroup
	for i, edge := range qp.edges {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, leg := startLeg(ctx, edge)
			if p := qp.plans[i]; p != nil {
				results[i] = f.queryEdge(ctx, *p, qp.sub)
			} else {
				results[i] = f.queryFresh(ctx, edge, qp.sub)
			}
			endLeg(leg, &results[i])
		}()
	}
	wg.Wait()
	return results
}

// mergeResults merges the edges' answers (the same series from two
// edges with combine) into a list sorted by labels, and their coverage
// and warnings into the answer's: the unreachable edges without
// catalog-matching series whose coverage misses something share one
// warning line (others: some edge had matching series).
func mergeResults(results []edgeResult, q model.Query, others bool) ([]*seriesData, model.QueryInfo, Coverage) {
	var info model.QueryInfo
	var cov Coverage
	merged := map[string]*seriesData{}
	var unreachable []string // edges without catalog-matching series
	for i := range results {
		r := &results[i]
		if r.skipped {
			continue
		}
		if r.unreachable && len(r.cov.Missing) > 0 {
			unreachable = append(unreachable, r.cov.Edge)
		}
		info.Points += r.points
		cov.Edges = append(cov.Edges, r.cov)
		info.Warnings = append(info.Warnings, r.warnings...)
		for k, s := range r.series {
			if have := merged[k]; have != nil {
				combine(have, s, q)
			} else {
				merged[k] = s
			}
		}
	}
	if len(unreachable) > 0 {
		info.Warnings = append(info.Warnings, unreachableWarning(unreachable, others))
	}
	info.Source = q.Source()
	list := make([]*seriesData, 0, len(merged))
	for _, s := range merged {
		if len(s.ts) > 0 {
			list = append(list, s)
		}
	}
	slices.SortFunc(list, func(a, b *seriesData) int { return labels.Compare(a.ls, b.ls) })
	return list, info, cov
}

// emitAnswer emits list (sorted by labels), aggregated across series by
// q.GroupBy with q.Aggregate when q asks for it, exactly as a node does
// (model/aggregate).
func emitAnswer(list []*seriesData, q model.Query, info *model.QueryInfo, emit func(model.Series) error) error {
	if q.Aggregate == rollup.FuncNone {
		for _, s := range list {
			info.Series++
			if err := emit(model.Series{Labels: s.ls, Ts: s.ts, Vs: s.vs}); err != nil {
				return err
			}
		}
		return nil
	}
	groups := aggregate.NewGroups(aggregate.GroupOptions{By: q.GroupBy, Func: q.Aggregate})
	for _, s := range list {
		if groups.Add(s.ls, s.ts, s.vs); groups.Cells() > model.MaxBuckets {
			return fmt.Errorf("%w: aggregating across series would hold more than %d distinct (group, timestamp) cells; downsample with a step first", model.ErrBadQuery, model.MaxBuckets)
		}
	}
	for _, g := range groups.Result() {
		info.Series++
		if err := emit(model.Series{Labels: g.Labels, Ts: g.Ts, Vs: g.Vs}); err != nil {
			return err
		}
	}
	return nil
}

// planEdges returns the edges a query ending at endMs asks, sorted: the
// edges that registered one of ids (matched), and every other edge of the
// catalog that may hold matching series the catalog does not know: one
// without a registration watermark (it does not announce its series: the
// catalog learns them from its segments only), or whose registration
// watermark is before endMs (it may have created one since). The others
// are vouched for by the catalog: every series they created before the
// query's end is registered, and none matches.
func (f *Frontend) planEdges(ids []uint64, endMs int64) (edges []string, matched map[string]bool, vouched int) {
	matched = map[string]bool{}
	for _, es := range f.o.Catalog.EdgesOf(ids) {
		matched[es.Edge] = true
		edges = append(edges, es.Edge)
	}
	others, vouched := f.o.Catalog.EdgesToAsk(endMs, matched)
	edges = append(edges, others...)
	slices.Sort(edges)
	return edges, matched, vouched
}

// leaveFresh returns qp.edges without the edges without catalog-matching
// series that the staleness allowance lets the query leave unasked
// (seriesKnownThrough), counting them in staleVouched and keeping the
// oldest time through which their series are known in staleThrough.
func (qp *queryPlan) leaveFresh(f *Frontend, matched map[string]bool) []string {
	out := qp.edges[:0]
	for _, edge := range qp.edges {
		if !matched[edge] {
			if t, ok := f.seriesKnownThrough(edge, qp.q, qp.stale); ok {
				qp.staleVouched++
				qp.staleThrough = min(qp.staleThrough, t)
				continue
			}
		}
		out = append(out, edge)
	}
	return out
}

// seriesKnownThrough returns, for an edge without catalog-matching series,
// the time through which the catalog knows every series it created, and
// whether that is within the allowance d of q's end (the edge need not
// be asked for new series): its registration watermark when it announces
// its series; otherwise its data watermark (every series with data at or
// before it is registered), unless a recorded gap meets q's range below
// it (the gap may hide series the catalog never saw).
func (f *Frontend) seriesKnownThrough(edge string, q model.Query, d int64) (int64, bool) {
	if reg, ok := f.o.Catalog.Registration(edge); ok {
		return reg, within(reg, q.End, d)
	}
	prog, ok := f.o.Catalog.Progress(edge)
	if !ok || !within(prog.WatermarkTimeMs, q.End, d) {
		return 0, false
	}
	below := span{q.Start, min(prog.WatermarkTimeMs, q.End)}
	for _, g := range gapsOf(prog) {
		if !g.known() || g.meets(below) {
			return 0, false
		}
	}
	return prog.WatermarkTimeMs, true
}

// maxListedEdges bounds the edge ids named in one warning line.
const maxListedEdges = 5

// unreachableWarning is the one line summarizing the unreachable edges
// that have no catalog-matching series (sorted ids).
func unreachableWarning(ids []string, others bool) string {
	list := listIDs(ids)
	what, they, their := "edges", "they", "their"
	if len(ids) == 1 {
		what, they, their = "edge", "it", "its"
	}
	if others {
		what = "other " + what
	}
	return fmt.Sprintf("%d %s unreachable (%s): series %s created after %s watermark would be missing",
		len(ids), what, list, they, their)
}

// seriesData is one series' answer, sorted by time, unique timestamps.
type seriesData struct {
	ls labels.Labels
	ts []int64
	vs []float64
}

// answer collects the series of one leg.
type answer map[string]*seriesData

func (a answer) add(s model.Series) {
	k := string(s.Labels.AppendKey(nil))
	d := a[k]
	if d == nil {
		d = &seriesData{ls: s.Labels}
		a[k] = d
	}
	d.ts = append(d.ts, s.Ts...)
	d.vs = append(d.vs, s.Vs...)
}

// absorb adds the series of b, an answer for a time range disjoint from
// a's (or, for last-point queries, keeps the newer point).
func (a answer) absorb(b answer, lastPoint bool) {
	for k, s := range b {
		d := a[k]
		switch {
		case d == nil:
			a[k] = s
		case lastPoint:
			if len(s.ts) > 0 && (len(d.ts) == 0 || s.ts[len(s.ts)-1] >= d.ts[len(d.ts)-1]) {
				a[k] = s
			}
		default:
			d.ts = append(d.ts, s.ts...)
			d.vs = append(d.vs, s.vs...)
			sortSeries(d)
		}
	}
}

// sortSeries sorts d by time; of equal timestamps the later one wins.
func sortSeries(d *seriesData) {
	idx := make([]int, len(d.ts))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return d.ts[idx[i]] < d.ts[idx[j]] })
	ts := make([]int64, 0, len(idx))
	vs := make([]float64, 0, len(idx))
	for _, i := range idx {
		if n := len(ts); n > 0 && ts[n-1] == d.ts[i] {
			vs[n-1] = d.vs[i]
			continue
		}
		ts, vs = append(ts, d.ts[i]), append(vs, d.vs[i])
	}
	d.ts, d.vs = ts, vs
}

// combine merges b, the same series from an edge sorting after the one(s)
// that gave a, into a: per timestamp, sum and count add, min and max
// combine, anything else (raw values, avg, first, last) takes b's value.
// Last-point answers keep the newest point.
func combine(a, b *seriesData, q model.Query) {
	if q.Mode == model.ModeLastPoint {
		if len(b.ts) > 0 && (len(a.ts) == 0 || b.ts[0] >= a.ts[0]) {
			a.ts, a.vs = b.ts, b.vs
		}
		return
	}
	fn := rollup.FuncNone
	if q.Mode == model.ModeDownsample {
		fn = q.Downsample
	}
	ts := make([]int64, 0, len(a.ts)+len(b.ts))
	vs := make([]float64, 0, len(a.ts)+len(b.ts))
	i, j := 0, 0
	for i < len(a.ts) || j < len(b.ts) {
		switch {
		case j == len(b.ts) || i < len(a.ts) && a.ts[i] < b.ts[j]:
			ts, vs = append(ts, a.ts[i]), append(vs, a.vs[i])
			i++
		case i == len(a.ts) || b.ts[j] < a.ts[i]:
			ts, vs = append(ts, b.ts[j]), append(vs, b.vs[j])
			j++
		default:
			v := b.vs[j]
			switch fn {
			case rollup.FuncSum, rollup.FuncCount:
				v = a.vs[i] + b.vs[j]
			case rollup.FuncMin:
				v = math.Min(a.vs[i], b.vs[j])
			case rollup.FuncMax:
				v = math.Max(a.vs[i], b.vs[j])
			}
			ts, vs = append(ts, a.ts[i]), append(vs, v)
			i++
			j++
		}
	}
	a.ts, a.vs = ts, vs
}

// gapSpan is a recorded gap of an edge as the front end needs it.
type gapSpan struct {
	minMs, maxMs int64 // both 0: unknown
	points       int64 // -1: unknown
	reason       string
}

func (g gapSpan) known() bool { return g.minMs != 0 || g.maxMs != 0 }

// gapsOf returns the recorded gaps of an edge.
func gapsOf(p catalog.EdgeProgress) []gapSpan {
	out := make([]gapSpan, 0, len(p.Gaps))
	for _, g := range p.Gaps {
		out = append(out, gapSpan{
			minMs: g.MinTimeMs, maxMs: g.MaxTimeMs, points: g.Points,
			reason: strings.ReplaceAll(g.Reason.String(), "-", " "),
		})
	}
	return out
}
