package query_test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// staleModel is the raw answer over [start, end] when each edge in cut
// contributes only its samples at or before cut[edge] (its replicas'
// data), and every other edge all of its samples: of equal timestamps of
// one series, the edge sorting last wins.
func staleModel(f *fleet, ms []*labels.Matcher, start, end int64, cut map[string]int64) []model.Series {
	type point struct {
		ls  labels.Labels
		pts map[int64]float64
	}
	all := map[string]*point{}
	edges := slices.Clone(f.edges)
	slices.SortFunc(edges, func(a, b *edgeData) int { return cmp.Compare(a.id, b.id) })
	for _, d := range edges {
		through, isCut := cut[d.id]
		for k, ss := range d.series {
			ls := d.lsets[k]
			if !matchesAll(ms, ls) {
				continue
			}
			for _, s := range ss {
				if s.t < start || s.t > end || isCut && s.t > through {
					continue
				}
				p := all[k]
				if p == nil {
					p = &point{ls: ls, pts: map[int64]float64{}}
					all[k] = p
				}
				p.pts[s.t] = s.v
			}
		}
	}
	var out []model.Series
	for _, p := range all {
		s := model.Series{Labels: p.ls}
		for ts := range p.pts {
			s.Ts = append(s.Ts, ts)
		}
		slices.Sort(s.Ts)
		for _, ts := range s.Ts {
			s.Vs = append(s.Vs, p.pts[ts])
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b model.Series) int { return labels.Compare(a.Labels, b.Labels) })
	return out
}

func matchesAll(ms []*labels.Matcher, ls labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (f *fleet) wmOf(edge string) int64 {
	for _, d := range f.edges {
		if d.id == edge {
			return d.wm
		}
	}
	panic("no edge " + edge)
}

// The fleet's watermarks: e1 20h17m before now, e2 3h before, e3 an hour
// after; e4 has replicated nothing. Every edge announced its series
// through now.
func TestFrontend_MaxStalenessLeavesEdgesWithinItUnasked(t *testing.T) {
	f := theFleet
	ctx := context.Background()
	now := t0.UnixMilli()
	var log askLog
	regs := map[string]int64{"e1": now, "e2": now, "e3": now, "e4": now}
	cat := announced(t, f, nil, regs)
	newFE := func(fs faults, def time.Duration) *query.Frontend {
		return f.frontend(t, fs, func(o *query.Options) {
			o.Catalog = cat
			o.MaxStaleness = def
			o.Edge = func(id, _ string) (query.Source, error) {
				if f.edge[id] == nil || slices.Contains(fs.deadEdges, id) {
					return nil, errUnreachable
				}
				return loggedSource{f.edge[id], id, &log}, nil
			}
		})
	}
	cpu := []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "cpu")}
	run := func(fe *query.Frontend, staleness int64) ([]model.Series, model.QueryInfo, query.Coverage) {
		t.Helper()
		log.reset()
		q := model.Query{Matchers: cpu, Start: f.start, End: now, Mode: model.ModeRaw, MaxStaleness: staleness}
		var cov query.Coverage
		got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
			var info model.QueryInfo
			var err error
			info, cov, err = fe.QueryWithCoverage(ctx, q, emit)
			return info, err
		})
		return got, info, cov
	}
	covOf := func(cov query.Coverage, edge string) query.EdgeCoverage {
		for _, c := range cov.Edges {
			if c.Edge == edge {
				return c
			}
		}
		t.Fatalf("no coverage of %s in %+v", edge, cov)
		return query.EdgeCoverage{}
	}
	wm2 := f.wmOf("e2")
	fresh := staleModel(f, cpu, f.start, now, nil)
	e2Stale := staleModel(f, cpu, f.start, now, map[string]int64{"e2": wm2})

	// Within the allowance (e2 is 3h behind, 4h allowed): e2 is answered
	// by its replicas alone, e1 (20h behind) and e4 (nothing replicated)
	// are asked; nothing is missing, and the answer is fresh through e2's
	// watermark.
	fe := newFE(faults{}, 0)
	got, info, cov := run(fe, (4 * time.Hour).Milliseconds())
	sameAnswer(t, "4h allowed", got, e2Stale)
	if edges := log.edges(); !slices.Equal(edges, []string{"e1", "e4"}) {
		t.Fatalf("4h allowed: edges asked %v, want [e1 e4]", edges)
	}
	if info.FreshThroughMs != wm2 || len(info.Warnings) != 0 || !cov.Complete() {
		t.Fatalf("4h allowed: fresh through %d (want e2's watermark %d), warnings %q, coverage %+v", info.FreshThroughMs, wm2, info.Warnings, cov)
	}
	if c := covOf(cov, "e2"); !c.StaleTail || c.EdgeAnswered || c.ReplicaAnswered == "" || len(c.Missing) != 0 {
		t.Fatalf("e2's coverage %+v, want its stale tail answered by a replica", c)
	}
	if c := covOf(cov, "e1"); c.StaleTail || !c.EdgeAnswered {
		t.Fatalf("e1's coverage %+v, want the edge asked", c)
	}

	// Beyond the allowance (2h): e2 is asked as without one; the answer
	// is complete and fresh through the query's end.
	got, info, _ = run(fe, (2 * time.Hour).Milliseconds())
	sameAnswer(t, "2h allowed", got, fresh)
	if edges := log.edges(); !slices.Equal(edges, []string{"e1", "e2", "e4"}) {
		t.Fatalf("2h allowed: edges asked %v", edges)
	}
	if info.FreshThroughMs != now {
		t.Fatalf("2h allowed: fresh through %d, want the end %d", info.FreshThroughMs, now)
	}

	// No allowance (the default 0): today's answer, no freshness.
	got, info, _ = run(fe, 0)
	sameAnswer(t, "no allowance", got, fresh)
	if edges := log.edges(); !slices.Equal(edges, []string{"e1", "e2", "e4"}) || info.FreshThroughMs != 0 {
		t.Fatalf("no allowance: edges asked %v, fresh through %d", edges, info.FreshThroughMs)
	}

	// A front end's default applies to queries that set none; AlwaysFresh
	// overrides it.
	fe = newFE(faults{}, 4*time.Hour)
	got, info, _ = run(fe, 0)
	sameAnswer(t, "default 4h", got, e2Stale)
	if edges := log.edges(); !slices.Equal(edges, []string{"e1", "e4"}) || info.FreshThroughMs != wm2 {
		t.Fatalf("default 4h: edges asked %v, fresh through %d", edges, info.FreshThroughMs)
	}
	got, info, _ = run(fe, model.AlwaysFresh)
	sameAnswer(t, "always fresh", got, fresh)
	if edges := log.edges(); !slices.Equal(edges, []string{"e1", "e2", "e4"}) || info.FreshThroughMs != 0 {
		t.Fatalf("always fresh: edges asked %v, fresh through %d", edges, info.FreshThroughMs)
	}

	// e2's replicas (c2, c3) down: the edge stands in for the whole range;
	// the answer is complete and e2's tail is fresh.
	fe = newFE(faults{down: []string{"c2", "c3"}}, 0)
	got, info, cov = run(fe, (4 * time.Hour).Milliseconds())
	sameAnswer(t, "replicas down", got, fresh)
	if c := covOf(cov, "e2"); c.StaleTail || !c.EdgeAnswered || len(c.Missing) != 0 || info.FreshThroughMs != now {
		t.Fatalf("replicas down: e2's coverage %+v, fresh through %d", c, info.FreshThroughMs)
	}
	// ... and the edge unreachable too: its range is missing, and said so.
	fe = newFE(faults{down: []string{"c2", "c3"}, deadEdges: []string{"e2"}}, 0)
	_, info, cov = run(fe, (4 * time.Hour).Milliseconds())
	c := covOf(cov, "e2")
	if c.StaleTail || c.EdgeAnswered || len(c.Missing) != 1 || c.Missing[0] != (query.TimeRange{StartMs: f.start, EndMs: now}) {
		t.Fatalf("replicas and edge down: e2's coverage %+v", c)
	}
	if !slices.ContainsFunc(info.Warnings, func(w string) bool { return strings.Contains(w, "edge e2: neither the edge nor a replica") }) {
		t.Fatalf("replicas and edge down: warnings %q", info.Warnings)
	}
}

// An edge without catalog-matching series is not asked for new series
// when the catalog knows its series within the allowance of the end: by
// its registration watermark, or, for an edge that does not announce, by
// its data watermark; the answer's freshness counts it.
func TestFrontend_MaxStalenessVouchesForEdgesWithoutMatchingSeries(t *testing.T) {
	f := theFleet
	ctx := context.Background()
	now := t0.UnixMilli()
	var log askLog
	extra := []string{"e5", "e6", "e7"} // unreachable
	regs := map[string]int64{"e1": now, "e2": now, "e3": now, "e4": now, "e5": now - 3*hour - 1000, "e7": now}
	cat := announced(t, f, extra, regs)
	// e6 does not announce; its data is replicated through 10 minutes ago.
	pl := placeEdge(t, cat, "e6")
	if _, err := cat.ApplyCommand(cat.AppliedIndex()+1, catalog.RecordHeld{Edge: "e6", Epoch: pl.Epoch,
		Ranges:       []catalog.HeldRange{{FirstSeq: 1, LastSeq: 1, Points: 1, MinTimeMs: now - hour, MaxTimeMs: now - 10*minute}},
		WatermarkSeq: 1, WatermarkTimeMs: now - 10*minute}); err != nil {
		t.Fatal(err)
	}
	fe := f.frontend(t, faults{}, func(o *query.Options) {
		o.Catalog = cat
		o.Edge = func(id, _ string) (query.Source, error) {
			if f.edge[id] == nil {
				return nil, errUnreachable
			}
			return loggedSource{f.edge[id], id, &log}, nil
		}
	})
	mem := []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "mem")}
	for _, tc := range []struct {
		name      string
		staleness time.Duration
		fresh     int64
		unasked   string // the unreachable edges the warning names
	}{
		{"none", 0, 0, "2 other edges unreachable (e5, e6)"},
		{"1h", time.Hour, now - 10*minute, "1 other edge unreachable (e5)"},
		{"4h", 4 * time.Hour, min(now-3*hour-1000, f.wmOf("e2")), ""},
	} {
		log.reset()
		q := model.Query{Matchers: mem, Start: f.start, End: now, Mode: model.ModeRaw, MaxStaleness: tc.staleness.Milliseconds()}
		if tc.staleness == 0 {
			q.MaxStaleness = model.AlwaysFresh
		}
		cut := map[string]int64{}
		if tc.staleness >= 4*time.Hour {
			cut["e2"] = f.wmOf("e2")
		}
		got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return fe.Query(ctx, q, emit) })
		sameAnswer(t, tc.name, got, staleModel(f, mem, f.start, now, cut))
		if info.FreshThroughMs != tc.fresh {
			t.Errorf("%s: fresh through %d, want %d", tc.name, info.FreshThroughMs, tc.fresh)
		}
		var warned []string
		for _, w := range info.Warnings {
			if strings.Contains(w, "unreachable") {
				warned = append(warned, w)
			}
		}
		switch {
		case tc.unasked == "" && len(warned) != 0:
			t.Errorf("%s: warnings %q, want none", tc.name, warned)
		case tc.unasked != "" && (len(warned) != 1 || !strings.HasPrefix(warned[0], tc.unasked)):
			t.Errorf("%s: warnings %q, want %q", tc.name, warned, tc.unasked)
		}
	}
}

// placeEdge places edge on c1 and c2 and returns its placement.
func placeEdge(t *testing.T, cat *catalog.FSM, edge string) catalog.Placement {
	t.Helper()
	if _, err := cat.ApplyCommand(cat.AppliedIndex()+1, catalog.SetPlacement{Edge: edge, Replicas: []string{"c1", "c2"}}); err != nil {
		t.Fatal(err)
	}
	pl, ok := cat.Placement(edge)
	if !ok {
		t.Fatalf("no placement of %s", edge)
	}
	return pl
}

func TestFrontend_RefusesANegativeDefaultStaleness(t *testing.T) {
	o := query.Options{Catalog: catalog.New(), Replica: func(string) (query.ReplicaSource, error) { return nil, nil }, MaxStaleness: -time.Second}
	if _, err := query.New(o); err == nil || !strings.Contains(err.Error(), "negative max staleness") {
		t.Fatalf("negative default staleness: %v", err)
	}
}

// Last points and downsampling within the allowance come from e2's
// replicas alone, as its data through its watermark.
func TestFrontend_MaxStalenessLastPointsAndBuckets(t *testing.T) {
	f := theFleet
	ctx := context.Background()
	now := t0.UnixMilli()
	var log askLog
	cat := announced(t, f, nil, map[string]int64{"e1": now, "e2": now, "e3": now, "e4": now})
	fe := f.frontend(t, faults{}, func(o *query.Options) {
		o.Catalog = cat
		o.Edge = func(id, _ string) (query.Source, error) { return loggedSource{f.edge[id], id, &log}, nil }
	})
	e2 := []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "cpu"), must(t, labels.MatchRegexp, "host", "e2-.*")}
	want := staleModel(f, e2, f.start, now, map[string]int64{"e2": f.wmOf("e2")})
	allowed := (4 * time.Hour).Milliseconds()

	last := model.Query{Matchers: e2, Start: f.start, End: now, Mode: model.ModeLastPoint, MaxStaleness: allowed}
	got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return fe.Query(ctx, last, emit) })
	if len(got) != len(want) || len(log.edges()) != 0 || info.FreshThroughMs != f.wmOf("e2") {
		t.Fatalf("last points: %d series (want %d), edges asked %v, fresh through %d", len(got), len(want), log.edges(), info.FreshThroughMs)
	}
	for i, s := range got {
		w := want[i]
		if !labels.Equal(s.Labels, w.Labels) || len(s.Ts) != 1 || s.Ts[0] != w.Ts[len(w.Ts)-1] || s.Vs[0] != w.Vs[len(w.Vs)-1] {
			t.Fatalf("last point of %s: %v %v, want %d %v", w.Labels, s.Ts, s.Vs, w.Ts[len(w.Ts)-1], w.Vs[len(w.Vs)-1])
		}
	}

	log.reset()
	sum := model.Query{Matchers: e2, Start: f.start, End: now, Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncCount, MaxStaleness: allowed}
	got, _ = collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return fe.Query(ctx, sum, emit) })
	if len(log.edges()) != 0 || len(got) != len(want) {
		t.Fatalf("counts: edges asked %v, %d series, want %d", log.edges(), len(got), len(want))
	}
	for i, s := range got {
		var n float64
		for _, v := range s.Vs {
			n += v
		}
		if int(n) != len(want[i].Ts) {
			t.Fatalf("%s: %v points counted, want %d (its replicated points)", s.Labels, n, len(want[i].Ts))
		}
	}
}
