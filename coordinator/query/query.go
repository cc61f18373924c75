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
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// Query runs q over the fleet; see QueryWithCoverage. When the answer is
// incomplete, QueryInfo.Warnings says what is missing.
func (f *Frontend) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	info, _, err := f.QueryWithCoverage(ctx, q, emit)
	return info, err
}

// queryWithCoverage is QueryWithCoverage (metrics.go times the call).
func (f *Frontend) queryWithCoverage(ctx context.Context, q model.Query, emit func(model.Series) error) (_ model.QueryInfo, _ Coverage, err error) {
	var info model.QueryInfo
	var cov Coverage
	ctx, span := startQuery(ctx, q)
	defer func() { endQuery(span, &info, len(cov.Edges), &err) }()
	_, plan := telemetry.StartChild(ctx, "query.plan")
	defer plan.End() // ends at once if already ended
	q.Matchers = slices.Clone(q.Matchers)
	q.GroupBy = slices.Clone(q.GroupBy)
	// A node's checks, in its words: a bad query fails before any source
	// is asked.
	if err := q.Validate(); err != nil {
		return info, cov, err
	}
	if err := f.barrier(ctx); err != nil {
		return info, cov, err
	}
	refs, err := f.o.Catalog.Select(q.Matchers, 0)
	if err != nil {
		return info, cov, fmt.Errorf("select series in the catalog: %w", err)
	}
	limit := q.LimitSeries
	if limit <= 0 {
		limit = f.o.MaxSeries
	}
	if len(refs) > limit {
		return info, cov, fmt.Errorf("%w: %d series match, limit is %d; narrow the matchers", model.ErrBadQuery, len(refs), limit)
	}
	info.Source = q.Source()
	ids := make([]uint64, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	edges, matched := f.planEdges(ids)

	sub := q
	sub.Aggregate, sub.GroupBy = rollup.FuncNone, nil
	sub.LimitSeries = limit
	plans := make([]*legPlan, len(edges))
	var planned []*legPlan
	for i, edge := range edges {
		if matched[edge] {
			p := f.planEdge(edge, sub)
			plans[i] = &p
			planned = append(planned, &p)
		}
	}
	shareReplicaLegs(planned, sub)
	plan.SetAttributes(attribute.Int("tributary.query.edges", len(edges)), attribute.Int("tributary.query.series", len(refs)))
	plan.End()
	results := make([]edgeResult, len(edges))
	sem := make(chan struct{}, f.o.MaxParallelEdges)
	var wg sync.WaitGroup
	for i, edge := range edges {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, leg := startLeg(ctx, edge)
			if p := plans[i]; p != nil {
				results[i] = f.queryEdge(ctx, *p, sub)
			} else {
				results[i] = f.queryFresh(ctx, edge, sub)
			}
			endLeg(leg, &results[i])
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return info, cov, err
	}

	_, merge := telemetry.StartChild(ctx, "query.merge")
	defer merge.End()
	merged := map[string]*seriesData{}
	var unreachable []string // edges without catalog-matching series
	for i := range results {
		r := &results[i]
		if r.skipped {
			continue
		}
		if r.unreachable {
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
		info.Warnings = append(info.Warnings, unreachableWarning(unreachable, len(matched) > 0))
	}
	list := make([]*seriesData, 0, len(merged))
	for _, s := range merged {
		if len(s.ts) > 0 {
			list = append(list, s)
		}
	}
	slices.SortFunc(list, func(a, b *seriesData) int { return labels.Compare(a.ls, b.ls) })
	if len(list) > limit {
		return info, cov, fmt.Errorf("%w: %d series match, limit is %d; narrow the matchers", model.ErrBadQuery, len(list), limit)
	}
	if q.Aggregate == rollup.FuncNone {
		for _, s := range list {
			info.Series++
			if err := emit(model.Series{Labels: s.ls, Ts: s.ts, Vs: s.vs}); err != nil {
				return info, cov, err
			}
		}
		return info, cov, nil
	}
	out, err := aggregate(list, q)
	if err != nil {
		return info, cov, err
	}
	for _, s := range out {
		info.Series++
		if err := emit(s); err != nil {
			return info, cov, err
		}
	}
	return info, cov, nil
}

// planEdges returns the edges a query asks, sorted: every edge of the
// catalog, and any other edge that registered one of ids. matched holds
// the edges that registered one of ids; the others may hold matching
// series created after their watermark, which the catalog has not seen.
func (f *Frontend) planEdges(ids []uint64) (edges []string, matched map[string]bool) {
	matched = map[string]bool{}
	for _, es := range f.o.Catalog.EdgesOf(ids) {
		matched[es.Edge] = true
		edges = append(edges, es.Edge)
	}
	for _, n := range f.o.Catalog.Nodes() {
		if n.Role == catalog.RoleEdge && !matched[n.ID] {
			edges = append(edges, n.ID)
		}
	}
	slices.Sort(edges)
	return edges, matched
}

// maxListedEdges bounds the edge ids named in one warning line.
const maxListedEdges = 5

// unreachableWarning is the one line summarizing the unreachable edges
// that have no catalog-matching series (sorted ids).
func unreachableWarning(ids []string, others bool) string {
	list := strings.Join(ids[:min(len(ids), maxListedEdges)], ", ")
	if len(ids) > maxListedEdges {
		list += fmt.Sprintf(", and %d more", len(ids)-maxListedEdges)
	}
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

// aggregate groups the series (in label order) by q.GroupBy and folds each
// timestamp across a group's series with q.Aggregate, as a node does.
func aggregate(list []*seriesData, q model.Query) ([]model.Series, error) {
	type group struct {
		lset labels.Labels
		byT  map[int64]*rollup.Agg
	}
	groups := map[string]*group{}
	cells := 0
	for _, s := range list {
		var pairs []labels.Label
		var key strings.Builder
		for _, name := range q.GroupBy {
			v := s.ls.Get(name)
			key.WriteString(name)
			key.WriteByte(0)
			key.WriteString(v)
			key.WriteByte(0)
			if v != "" {
				pairs = append(pairs, labels.Label{Name: name, Value: v})
			}
		}
		g := groups[key.String()]
		if g == nil {
			g = &group{lset: labels.Labels(pairs), byT: map[int64]*rollup.Agg{}}
			groups[key.String()] = g
		}
		for i, t := range s.ts {
			a := g.byT[t]
			if a == nil {
				a = &rollup.Agg{}
				g.byT[t] = a
				cells++
			}
			a.Add(t, s.vs[i])
		}
		if cells > model.MaxBuckets {
			return nil, fmt.Errorf("%w: aggregating across series would hold more than %d distinct (group, timestamp) cells; downsample with a step first", model.ErrBadQuery, model.MaxBuckets)
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]model.Series, 0, len(keys))
	for _, k := range keys {
		g := groups[k]
		s := model.Series{Labels: g.lset}
		ts := make([]int64, 0, len(g.byT))
		for t := range g.byT {
			ts = append(ts, t)
		}
		slices.Sort(ts)
		for _, t := range ts {
			s.Ts = append(s.Ts, t)
			s.Vs = append(s.Vs, g.byT[t].Value(q.Aggregate))
		}
		out = append(out, s)
	}
	return out, nil
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
