package query_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/model/aggregate"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// memEdge is an edge's Source holding its series in memory: a point every
// 10 s over the hour before endMs, answered as a node would (downsampling
// with model/aggregate).
type memEdge struct {
	series []labels.Labels
	ts     []int64
	calls  *atomic.Int64
}

func (m memEdge) Query(_ context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	m.calls.Add(1)
	var info model.QueryInfo
	for i, ls := range m.series {
		ok := true
		for _, mt := range q.Matchers {
			if !mt.Matches(ls.Get(mt.Name)) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		var ts []int64
		var vs []float64
		for _, t := range m.ts {
			if t >= q.Start && t <= q.End {
				ts, vs = append(ts, t), append(vs, float64(i)+float64(t%600))
			}
		}
		if q.Mode == model.ModeDownsample {
			ts, vs = aggregate.Downsample(ts, vs, q.Step, q.Offset, q.Downsample)
		}
		info.Series++
		info.Points += int64(len(ts))
		if err := emit(model.Series{Labels: ls, Ts: ts, Vs: vs}); err != nil {
			return info, err
		}
	}
	return info, nil
}

func (m memEdge) Series(context.Context, []*labels.Matcher, int) ([]labels.Labels, error) {
	return nil, nil
}
func (m memEdge) LabelNames(context.Context, []*labels.Matcher) ([]string, error) { return nil, nil }
func (m memEdge) LabelValues(context.Context, string, []*labels.Matcher) ([]string, error) {
	return nil, nil
}

// BenchmarkFrontend_OneSeriesAtFleetScale: one series over 1 h, 1-minute
// avg, ending before every edge's registration watermark, through a
// front end whose catalog holds N edges of 8 announced series each (no
// replicated data: the edge answers the whole hour). Reports the edges
// asked per query, which must stay 1 whatever N.
func BenchmarkFrontend_OneSeriesAtFleetScale(b *testing.B) {
	const perEdge = 8
	endMs := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	var ts []int64
	for t := endMs - time.Hour.Milliseconds(); t <= endMs; t += 10_000 {
		ts = append(ts, t)
	}
	for _, edges := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("edges=%d", edges), func(b *testing.B) {
			cat := catalog.New()
			idx := uint64(0)
			apply := func(c catalog.Command) {
				idx++
				if _, err := cat.ApplyCommand(idx, c); err != nil {
					b.Fatal(err)
				}
			}
			idx++
			if err := cat.ApplyMembership(idx, catalog.Membership{Voters: []uint64{1, 2, 3}}); err != nil {
				b.Fatal(err)
			}
			for i := range 3 {
				apply(catalog.RegisterNode{ID: fmt.Sprintf("c%d", i+1), Role: catalog.RoleCoordinator, RaftID: uint64(i + 1), Addr: "c:1"})
			}
			sources := map[string]memEdge{}
			var calls atomic.Int64
			var ann catalog.AnnounceSeries
			for e := range edges {
				id := fmt.Sprintf("e%05d", e)
				apply(catalog.RegisterNode{ID: id, Role: catalog.RoleEdge, Addr: id + ":1"})
				src := memEdge{ts: ts, calls: &calls}
				for s := range perEdge {
					src.series = append(src.series, labels.FromStrings("__name__", "temp", "edge", id, "probe", fmt.Sprintf("p%d", s)))
				}
				sources[id] = src
				ann.Edges = append(ann.Edges, catalog.EdgeAnnouncement{Edge: id, ThroughMs: endMs + 1000, Series: src.series})
				if len(ann.Edges) == 500 {
					apply(ann)
					ann = catalog.AnnounceSeries{}
				}
			}
			if len(ann.Edges) > 0 {
				apply(ann)
			}
			fe, err := query.New(query.Options{Catalog: cat,
				Replica: func(string) (query.ReplicaSource, error) { return nil, fmt.Errorf("no replicas in this benchmark") },
				Edge: func(id, _ string) (query.Source, error) {
					if s, ok := sources[id]; ok {
						return s, nil
					}
					return nil, fmt.Errorf("no edge %s", id)
				}})
			if err != nil {
				b.Fatal(err)
			}
			target := fmt.Sprintf("e%05d", edges/2)
			q := model.Query{Matchers: []*labels.Matcher{
				must(b, labels.MatchEqual, "__name__", "temp"), must(b, labels.MatchEqual, "edge", target), must(b, labels.MatchEqual, "probe", "p0")},
				Start: endMs - time.Hour.Milliseconds(), End: endMs, Mode: model.ModeDownsample, Step: 60_000, Downsample: rollup.FuncAvg}
			ctx := context.Background()
			calls.Store(0)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				n := 0
				info, err := fe.Query(ctx, q, func(s model.Series) error { n += len(s.Ts); return nil })
				if err != nil || n != 61 || len(info.Warnings) != 0 {
					b.Fatalf("answer: %d points, %+v, %v", n, info, err)
				}
			}
			b.ReportMetric(float64(calls.Load())/float64(b.N), "edges/op")
		})
	}
}
