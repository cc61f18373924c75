package query_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// askLog records which edges were asked, by what.
type askLog struct {
	mu    sync.Mutex
	asked map[string][]string // edge → "query" / "series" / ...
}

func (l *askLog) add(edge, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.asked == nil {
		l.asked = map[string][]string{}
	}
	l.asked[edge] = append(l.asked[edge], what)
}

func (l *askLog) edges() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for e := range l.asked {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

func (l *askLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = nil
}

// loggedSource is an edge's Source that logs every call.
type loggedSource struct {
	query.Source
	edge string
	log  *askLog
}

func (s loggedSource) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	s.log.add(s.edge, "query")
	return s.Source.Query(ctx, q, emit)
}

func (s loggedSource) Series(ctx context.Context, ms []*labels.Matcher, limit int) ([]labels.Labels, error) {
	s.log.add(s.edge, "series")
	return s.Source.Series(ctx, ms, limit)
}

func (s loggedSource) LabelNames(ctx context.Context, ms []*labels.Matcher) ([]string, error) {
	s.log.add(s.edge, "label names")
	return s.Source.LabelNames(ctx, ms)
}

func (s loggedSource) LabelValues(ctx context.Context, name string, ms []*labels.Matcher) ([]string, error) {
	s.log.add(s.edge, "label values")
	return s.Source.LabelValues(ctx, name, ms)
}

// announced returns a copy of the fleet's catalog with extra edges
// registered (holding nothing, unreachable) and, for each edge of
// throughMs, an AnnounceSeries of every series the edge holds with that
// registration watermark.
func announced(t *testing.T, f *fleet, extra []string, throughMs map[string]int64) *catalog.FSM {
	t.Helper()
	cat := withEdges(t, f, extra...)
	var cmd catalog.AnnounceSeries
	for edge, ms := range throughMs {
		a := catalog.EdgeAnnouncement{Edge: edge, ThroughMs: ms}
		if n := f.edge[edge]; n != nil {
			all, err := n.Series(context.Background(), []*labels.Matcher{must(t, labels.MatchRegexp, "__name__", ".+")}, 0)
			if err != nil {
				t.Fatal(err)
			}
			a.Series = all
		}
		cmd.Edges = append(cmd.Edges, a)
	}
	res, err := cat.ApplyCommand(cat.AppliedIndex()+1, cmd)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range res.(catalog.AnnounceSeriesResult).Edges {
		if e.Skipped != "" || !e.Registered {
			t.Fatalf("announcement %d: %+v", i, e)
		}
	}
	return cat
}

func TestFrontend_AsksOnlyEdgesWithMatchingSeriesOrPastTheirRegistration(t *testing.T) {
	f := theFleet
	ctx := context.Background()
	now := t0.UnixMilli()
	extra := []string{"e5", "e6", "e7"} // not in f.edge: unreachable
	regs := map[string]int64{"e1": now, "e2": now, "e3": now, "e4": now, "e5": now, "e6": now, "e7": now}
	var log askLog
	newFE := func(cat *catalog.FSM) *query.Frontend {
		return f.frontend(t, faults{}, func(o *query.Options) {
			o.Catalog = cat
			o.Edge = func(id, _ string) (query.Source, error) {
				if f.edge[id] == nil {
					return nil, errUnreachable
				}
				return loggedSource{f.edge[id], id, &log}, nil
			}
		})
	}
	cat := announced(t, f, extra, regs)
	fe := newFE(cat)

	// Every edge announced through the query's end: only the edges whose
	// registered series match are asked, and only those whose data is
	// not all replicated (e3's is, to past now).
	for _, name := range []string{"disk", "mem", "cpu"} {
		log.reset()
		q := model.Query{Matchers: []*labels.Matcher{must(t, labels.MatchEqual, "__name__", name)}, Start: f.start, End: now,
			Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncMax}
		var cov query.Coverage
		got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
			var info model.QueryInfo
			var err error
			info, cov, err = fe.QueryWithCoverage(ctx, q, emit)
			return info, err
		})
		sameAnswer(t, name, got, answerOf(t, f.oracle, q))
		if len(info.Warnings) != 0 || !cov.Complete() {
			t.Fatalf("%s: warnings %q, coverage %+v", name, info.Warnings, cov)
		}
		refs, err := cat.Select(q.Matchers, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64
		for _, r := range refs {
			ids = append(ids, r.ID)
		}
		var matching []string
		for _, es := range cat.EdgesOf(ids) {
			matching = append(matching, es.Edge)
		}
		for _, e := range log.edges() {
			if !slices.Contains(matching, e) {
				t.Fatalf("%s: edge %s asked; edges asked %v, edges with matching series %v", name, e, log.edges(), matching)
			}
		}
		for _, c := range cov.Edges {
			if slices.Contains(extra, c.Edge) {
				t.Fatalf("%s: the unreachable %s, vouched for by its registration, has coverage %+v", name, c.Edge, c)
			}
		}
	}
	// The disk series live on e2 and e4 only (registered by their
	// announcements): nobody else is asked.
	log.reset()
	disk := model.Query{Matchers: []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "disk")}, Start: f.start, End: now, Mode: model.ModeRaw}
	collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return fe.Query(ctx, disk, emit) })
	if got := log.edges(); !slices.Equal(got, []string{"e2", "e4"}) {
		t.Fatalf("disk: edges asked %v, want [e2 e4]", got)
	}

	// e5 announced up to a second before the query's end, e6 never: both
	// may hold matching series the catalog does not know, so both are
	// asked (they are unreachable: one warning names them); e7 is vouched
	// for.
	regs["e5"] = now - 1000
	delete(regs, "e6")
	fe = newFE(announced(t, f, extra, regs))
	log.reset()
	mem := model.Query{Matchers: []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "mem")}, Start: f.start, End: now, Mode: model.ModeRaw}
	var cov query.Coverage
	got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
		var info model.QueryInfo
		var err error
		info, cov, err = fe.QueryWithCoverage(ctx, mem, emit)
		return info, err
	})
	sameAnswer(t, "mem", got, answerOf(t, f.oracle, mem))
	want := "2 other edges unreachable (e5, e6): series they created after their watermark would be missing"
	if !slices.Equal(info.Warnings, []string{want}) {
		t.Fatalf("warnings %q, want %q", info.Warnings, want)
	}
	for _, c := range cov.Edges {
		if c.Edge == "e7" {
			t.Fatalf("e7 has coverage %+v", c)
		}
	}
	// A query ending before e5's registration watermark does not ask it.
	early := mem
	early.End = now - 2000
	_, info = collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return fe.Query(ctx, early, emit) })
	if len(info.Warnings) != 1 || !strings.Contains(info.Warnings[0], "(e6)") {
		t.Fatalf("warnings of a query ending before e5's registration %q", info.Warnings)
	}
}

var errUnreachable = errorString("connection refused")

type errorString string

func (e errorString) Error() string { return string(e) }

func TestFrontend_ListingsComeFromTheCatalogWithWarnings(t *testing.T) {
	f := theFleet
	now := t0.UnixMilli()
	var log askLog
	clock := time.UnixMilli(now)
	newFE := func(cat *catalog.FSM, dead ...string) *query.Frontend {
		return f.frontend(t, faults{}, func(o *query.Options) {
			o.Catalog = cat
			o.Now = func() time.Time { return clock }
			o.Edge = func(id, _ string) (query.Source, error) {
				if f.edge[id] == nil || slices.Contains(dead, id) {
					return nil, errUnreachable
				}
				return loggedSource{f.edge[id], id, &log}, nil
			}
		})
	}
	regs := map[string]int64{"e1": now, "e2": now, "e3": now, "e4": now}
	cat := announced(t, f, nil, regs)
	fe := newFE(cat)
	// Every edge announces: the catalog alone answers, complete.
	ctx, warns := backend.WithWarnings(context.Background())
	sameMetadata(t, fe, f.oracle)
	if _, err := fe.Series(ctx, []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "disk")}, 0); err != nil {
		t.Fatal(err)
	}
	if got := log.edges(); len(got) != 0 {
		t.Fatalf("edges asked for listings: %v", got)
	}
	if w := warns.List(); len(w) != 0 {
		t.Fatalf("warnings %q", w)
	}

	// e2 stopped announcing a minute ago; e4 does not announce (an edge
	// of an earlier version) and is down: both are flagged, e4 asked.
	delete(regs, "e4")
	regs["e2"] = now - 60_000
	fe = newFE(announced(t, f, nil, regs), "e4")
	log.reset()
	ctx, warns = backend.WithWarnings(context.Background())
	if _, err := fe.LabelValues(ctx, "host", nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1 edge has not announced new series for more than 5s (e2; the oldest since " + time.UnixMilli(now-60_000).UTC().Format(time.RFC3339Nano) + "): series it created since may be missing",
		"1 edge unreachable (e4): series it created that the catalog has not registered are missing",
	}
	if w := warns.List(); !slices.Equal(w, want) {
		t.Fatalf("warnings %q\nwant %q", w, want)
	}
	if got := log.edges(); len(got) != 0 {
		t.Fatalf("edges asked %v: e4 is down, the others announce", got)
	}
	// Without a collector in the context the listing still answers.
	if _, err := fe.LabelNames(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}
