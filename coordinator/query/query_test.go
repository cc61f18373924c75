package query_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// t0 is the test clock: every node's "now".
var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

const (
	hour   = int64(time.Hour / time.Millisecond)
	minute = int64(time.Minute / time.Millisecond)
)

// tb is what fleet construction needs of a test (TestMain builds the
// shared fleet without one).
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// mainTB panics on failure: it is used before any test runs.
type mainTB struct{}

func (mainTB) Helper()                           {}
func (mainTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (mainTB) Logf(format string, args ...any)   { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func openNodeIn(t tb, dir string) *node.Node {
	t.Helper()
	n, err := node.Open(node.Options{DataDir: dir, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatalf("open node: %v", err)
	}
	return n
}

func openNode(t *testing.T) *node.Node {
	t.Helper()
	n := openNodeIn(t, t.TempDir())
	t.Cleanup(func() { n.Close() })
	return n
}

// theFleet is built once (TestMain) and only read by the tests; faults
// are per front end.
var theFleet *fleet

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "query-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	theFleet = newFleet(mainTB{}, dir, uint64(time.Now().UnixNano()))
	code := m.Run()
	theFleet.close()
	os.RemoveAll(dir)
	os.Exit(code)
}

type sample struct {
	t int64
	v float64
}

// edgeData is one edge's series.
type edgeData struct {
	id       string
	wm       int64
	replicas []string
	series   map[string][]sample // key: labels string
	lsets    map[string]labels.Labels
}

// fleet is a catalog, edges as real nodes, replica nodes holding each
// edge's data up to its watermark, and one oracle node holding everything.
type fleet struct {
	cat     *catalog.FSM
	edges   []*edgeData
	edge    map[string]*node.Node // full data, as the edge holds it
	replica map[string]*node.Node // per edge: data up to the watermark
	oracle  *node.Node
	// held, when set, overrides replica: coordinator -> edge -> the node
	// holding what that coordinator holds of the edge.
	held   map[string]map[string]*node.Node
	placed map[string][]string // coordinator -> edges it holds
	// downLeaving lists the coordinators a test marked down.
	downLeaving []string
	start       int64 // first sample time
	seed        uint64
	all         []*node.Node
}

func (f *fleet) close() {
	for _, n := range f.all {
		n.Close()
	}
}

func write(t tb, n *node.Node, ls labels.Labels, ss []sample) {
	t.Helper()
	b := model.Batch{Labels: ls}
	for _, s := range ss {
		b.Ts = append(b.Ts, s.t)
		b.Vs = append(b.Vs, s.v)
	}
	if len(b.Ts) == 0 {
		return
	}
	res, err := n.Write(context.Background(), []model.Batch{b})
	if err != nil || res.Rejected != 0 {
		t.Fatalf("write %s: %+v %v", ls, res, err)
	}
}

func newFleet(t tb, dir string, seed uint64) *fleet {
	t.Helper()
	t.Logf("query test fleet: seed %d", seed)
	var f *fleet
	nodes := 0
	open := func() *node.Node {
		nodes++
		n := openNodeIn(t, filepath.Join(dir, fmt.Sprint(nodes)))
		f.all = append(f.all, n)
		return n
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b9))
	f = &fleet{
		cat: catalog.New(), edge: map[string]*node.Node{}, replica: map[string]*node.Node{},
		placed: map[string][]string{}, start: t0.UnixMilli() - 50*hour, seed: seed,
	}
	f.oracle = open()
	idx := uint64(0)
	apply := func(c catalog.Command) {
		t.Helper()
		idx++
		if _, err := f.cat.ApplyCommand(idx, c); err != nil {
			t.Fatalf("apply %T: %v", c, err)
		}
	}
	idx++
	if err := f.cat.ApplyMembership(idx, catalog.Membership{Voters: []uint64{1, 2, 3}}); err != nil {
		t.Fatalf("membership: %v", err)
	}
	coords := []string{"c1", "c2", "c3"}
	for i, c := range coords {
		apply(catalog.RegisterNode{ID: c, Role: catalog.RoleCoordinator, RaftID: uint64(i + 1), Addr: c + ":7000", TimeMs: 1})
	}
	oracle, oracleLabels := map[string][]sample{}, map[string]labels.Labels{}
	now := t0.UnixMilli()
	wms := []int64{now - 20*hour - 17*minute, now - 3*hour + 5, now + hour} // the last edge is fully replicated
	for i, e := range []string{"e1", "e2", "e3"} {
		d := &edgeData{id: e, wm: wms[i], replicas: []string{coords[i], coords[(i+1)%3]}, series: map[string][]sample{}, lsets: map[string]labels.Labels{}}
		apply(catalog.RegisterNode{ID: e, Role: catalog.RoleEdge, Addr: e + ":7070", TimeMs: 1})
		en, rn := open(), open()
		f.edge[e], f.replica[e] = en, rn
		var lsets []labels.Labels
		for k := range 3 {
			ls := labels.FromStrings("__name__", "cpu", "host", fmt.Sprintf("%s-%d", e, k), "dc", []string{"a", "b"}[(i+k)%2])
			lsets = append(lsets, ls)
		}
		lsets = append(lsets, labels.FromStrings("__name__", "mem", "host", e+"-0"))
		// A series that moved between edges: every edge holds some of it.
		lsets = append(lsets, labels.FromStrings("__name__", "cpu", "host", "moved", "dc", "a"))
		var min, max int64 = math.MaxInt64, math.MinInt64
		var points uint64
		for _, ls := range lsets {
			var ss []sample
			for ts := f.start + rng.Int64N(10*minute); ts <= now; ts += 1 + rng.Int64N(20*minute) {
				if ls.Get("host") == "moved" {
					ts += int64(i) // edges hold different samples of the moved series
				}
				ss = append(ss, sample{ts, float64(rng.IntN(2000)-1000) / 4})
			}
			d.series[ls.String()], d.lsets[ls.String()] = ss, ls
			write(t, en, ls, ss)
			oracle[ls.String()], oracleLabels[ls.String()] = append(oracle[ls.String()], ss...), ls
			var upTo []sample
			for _, s := range ss {
				if s.t <= d.wm {
					upTo = append(upTo, s)
					min, max = slicesMin(min, s.t), slicesMax(max, s.t)
				}
			}
			points += uint64(len(upTo))
			write(t, rn, ls, upTo)
		}
		// Series created after the watermark: on the edge only, not in
		// the catalog (their segment has not been replicated).
		fresh := []labels.Labels{labels.FromStrings("__name__", "cpu", "host", e+"-new", "dc", "a")}
		if e == "e2" {
			fresh = append(fresh, labels.FromStrings("__name__", "disk", "host", e+"-new"))
		}
		if d.wm < now {
			for _, ls := range fresh {
				var ss []sample
				for ts := d.wm + 1 + rng.Int64N(5*minute); ts <= now; ts += 1 + rng.Int64N(20*minute) {
					ss = append(ss, sample{ts, float64(rng.IntN(2000)-1000) / 4})
				}
				d.series[ls.String()], d.lsets[ls.String()] = ss, ls
				write(t, en, ls, ss)
				oracle[ls.String()], oracleLabels[ls.String()] = append(oracle[ls.String()], ss...), ls
			}
		}
		apply(catalog.RegisterSeries{Edge: e, Series: lsets})
		apply(catalog.SetPlacement{Edge: e, Replicas: d.replicas})
		// Stored on the current placement, as the intake says.
		pl, _ := f.cat.Placement(e)
		apply(catalog.RecordHeld{Edge: e, Epoch: pl.Epoch, Ranges: []catalog.HeldRange{{FirstSeq: 1, LastSeq: 1, Points: points, MinTimeMs: min, MaxTimeMs: max}},
			WatermarkSeq: 1, WatermarkTimeMs: d.wm})
		f.edges = append(f.edges, d)
		for _, c := range d.replicas {
			f.placed[c] = append(f.placed[c], e)
		}
	}
	// e4 has replicated nothing yet: none of its series is in the
	// catalog, and it has no watermark.
	{
		apply(catalog.RegisterNode{ID: "e4", Role: catalog.RoleEdge, Addr: "e4:7070", TimeMs: 1})
		d := &edgeData{id: "e4", wm: math.MinInt64, series: map[string][]sample{}, lsets: map[string]labels.Labels{}}
		en := open()
		f.edge["e4"] = en
		for _, ls := range []labels.Labels{
			labels.FromStrings("__name__", "cpu", "host", "e4-0", "dc", "b"),
			labels.FromStrings("__name__", "disk", "host", "e4-0"),
		} {
			var ss []sample
			for ts := f.start + rng.Int64N(10*minute); ts <= now; ts += 1 + rng.Int64N(20*minute) {
				ss = append(ss, sample{ts, float64(rng.IntN(2000)-1000) / 4})
			}
			d.series[ls.String()], d.lsets[ls.String()] = ss, ls
			write(t, en, ls, ss)
			oracle[ls.String()], oracleLabels[ls.String()] = append(oracle[ls.String()], ss...), ls
		}
		f.edges = append(f.edges, d)
	}
	for k, ss := range oracle {
		slices.SortFunc(ss, func(a, b sample) int { return cmp.Compare(a.t, b.t) })
		write(t, f.oracle, oracleLabels[k], ss)
	}
	// Some data through the rollups and stored chunks, some in the head.
	for _, n := range []*node.Node{f.edge["e1"], f.replica["e2"], f.oracle} {
		if err := n.Flush(); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
	return f
}

func slicesMin(a, b int64) int64 { return min(a, b) }
func slicesMax(a, b int64) int64 { return max(a, b) }

// fakeReplica serves the replica nodes of the edges placed on it. down
// makes it fail; block makes it wait until its context ends.
type fakeReplica struct {
	id    string
	f     *fleet
	edges []string
	down  bool
	block bool
	ended chan error // receives ctx.Err() of a blocked call
}

func (r *fakeReplica) Query(ctx context.Context, edges []string, q model.Query, emit func(string, model.Series) error) (model.QueryInfo, error) {
	down, block, ended := r.down, r.block, r.ended
	if down {
		return model.QueryInfo{}, fmt.Errorf("coordinator %s is down", r.id)
	}
	if block {
		<-ctx.Done()
		if ended != nil {
			ended <- ctx.Err()
		}
		return model.QueryInfo{}, ctx.Err()
	}
	var info model.QueryInfo
	for _, e := range edges {
		if !slices.Contains(r.edges, e) {
			continue
		}
		n := r.f.replica[e]
		if h := r.f.held[r.id][e]; h != nil {
			n = h
		}
		in, err := n.Query(ctx, q, func(s model.Series) error { return emit(e, s) })
		if err != nil {
			return info, err
		}
		info.Points += in.Points
		info.Series += in.Series
	}
	return info, nil
}

// faults are what a front end finds broken.
type faults struct {
	deadEdges []string   // Edge fails with "connection refused"
	down      []string   // coordinators whose replica legs fail
	block     string     // a coordinator whose legs wait until cancelled
	ended     chan error // receives how the blocked legs ended
}

func (f *fleet) frontend(t *testing.T, fs faults, mod func(*query.Options)) *query.Frontend {
	t.Helper()
	o := query.Options{
		Catalog: f.cat,
		Replica: func(id string) (query.ReplicaSource, error) {
			if f.placed[id] == nil {
				return nil, fmt.Errorf("unknown coordinator %s", id)
			}
			return &fakeReplica{id: id, f: f, edges: f.placed[id], down: slices.Contains(fs.down, id), block: fs.block == id, ended: fs.ended}, nil
		},
		Edge: func(id, addr string) (query.Source, error) {
			if slices.Contains(fs.deadEdges, id) || f.edge[id] == nil {
				return nil, fmt.Errorf("connection refused")
			}
			return f.edge[id], nil
		},
		HedgeAfter: time.Hour, // hedging is tested on its own
	}
	if mod != nil {
		mod(&o)
	}
	fe, err := query.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return fe
}

func collect(t *testing.T, run func(emit func(model.Series) error) (model.QueryInfo, error)) ([]model.Series, model.QueryInfo) {
	t.Helper()
	var out []model.Series
	info, err := run(func(s model.Series) error {
		out = append(out, model.Series{Labels: s.Labels, Ts: slices.Clone(s.Ts), Vs: slices.Clone(s.Vs)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, info
}

func sameAnswer(t *testing.T, what string, got, want []model.Series) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d series, want %d\n got %v\nwant %v", what, len(got), len(want), names(got), names(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !labels.Equal(g.Labels, w.Labels) {
			t.Fatalf("%s: series %d is %s, want %s", what, i, g.Labels, w.Labels)
		}
		if !slices.Equal(g.Ts, w.Ts) {
			t.Fatalf("%s: %s: timestamps differ (%d vs %d points)\n got %v\nwant %v", what, g.Labels, len(g.Ts), len(w.Ts), clip(g.Ts), clip(w.Ts))
		}
		for j := range g.Vs {
			if d := math.Abs(g.Vs[j] - w.Vs[j]); d > 1e-9*math.Max(1, math.Abs(w.Vs[j])) {
				t.Fatalf("%s: %s at %d: %v, want %v", what, g.Labels, g.Ts[j], g.Vs[j], w.Vs[j])
			}
		}
	}
}

func clip(ts []int64) []int64 { return ts[:min(len(ts), 20)] }

func names(ss []model.Series) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Labels.String())
	}
	return out
}

func must(t testing.TB, typ labels.MatchType, name, value string) *labels.Matcher {
	t.Helper()
	m, err := labels.NewMatcher(typ, name, value)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// queries are the oracle cases: every mode, every downsampling function,
// with and without offset, rollup-sized and raw-sized steps, aggregation.
func queries(t *testing.T, start int64) map[string]model.Query {
	t.Helper()
	now := t0.UnixMilli()
	// The moved series is left out: its avg, first and last per bucket
	// are not combined exactly (see SharedSeriesMergesAcrossEdges).
	notMoved := must(t, labels.MatchNotEqual, "host", "moved")
	all := []*labels.Matcher{must(t, labels.MatchRegexp, "__name__", "cpu|mem"), notMoved}
	cpu := []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "cpu"), notMoved}
	qs := map[string]model.Query{
		"raw":             {Matchers: all, Start: start + 12345, End: now - 1000, Mode: model.ModeRaw},
		"raw dc=a":        {Matchers: append(slices.Clone(cpu), must(t, labels.MatchEqual, "dc", "a")), Start: start, End: now, Mode: model.ModeRaw},
		"last":            {Matchers: all, Start: 0, End: now, Mode: model.ModeLastPoint},
		"last before":     {Matchers: all, Start: start + 10*hour, End: now - 21*hour, Mode: model.ModeLastPoint},
		"sum by dc raw":   {Matchers: cpu, Start: start, End: now, Mode: model.ModeRaw, Aggregate: rollup.FuncSum, GroupBy: []string{"dc"}},
		"max 1h all":      {Matchers: cpu, Start: start, End: now, Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncAvg, Aggregate: rollup.FuncMax},
		"avg by dc 10m":   {Matchers: cpu, Start: start + 7, End: now - 7, Mode: model.ModeDownsample, Step: 10 * minute, Downsample: rollup.FuncSum, Aggregate: rollup.FuncAvg, GroupBy: []string{"dc", "nope"}},
		"last by host 1h": {Matchers: all, Start: start, End: now, Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncLast, Aggregate: rollup.FuncLast, GroupBy: []string{"host"}},
	}
	for fn := rollup.FuncAvg; fn <= rollup.FuncLast; fn++ {
		for _, step := range []int64{10 * minute, hour, 3 * hour} {
			for _, off := range []int64{0, 7 * minute} {
				name := fmt.Sprintf("%s step %dm offset %dm", fn, step/minute, off/minute)
				qs[name] = model.Query{Matchers: all, Start: start + 3*minute + 1, End: now - 2*minute, Mode: model.ModeDownsample, Step: step, Downsample: fn, Offset: off}
			}
		}
	}
	return qs
}

// freshQueries select only series that the catalog does not know: created
// on e2 after its watermark, and on e4, which has replicated nothing.
func freshQueries(t *testing.T, start int64) map[string]model.Query {
	t.Helper()
	now := t0.UnixMilli()
	disk := []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "disk")}
	return map[string]model.Query{
		"fresh raw":              {Matchers: disk, Start: start, End: now, Mode: model.ModeRaw},
		"fresh last":             {Matchers: disk, Start: 0, End: now, Mode: model.ModeLastPoint},
		"fresh sum 1h offset 7m": {Matchers: disk, Start: start, End: now, Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncSum, Offset: 7 * minute},
		"fresh max of avg 10m":   {Matchers: disk, Start: start, End: now, Mode: model.ModeDownsample, Step: 10 * minute, Downsample: rollup.FuncAvg, Aggregate: rollup.FuncMax},
		"fresh host only":        {Matchers: []*labels.Matcher{must(t, labels.MatchEqual, "host", "e2-new")}, Start: start, End: now, Mode: model.ModeRaw},
	}
}

func TestFrontend_MatchesASingleNodeHoldingEverything(t *testing.T) {
	f := theFleet
	fe := f.frontend(t, faults{}, nil)
	ctx := context.Background()
	qs := queries(t, f.start)
	maps.Copy(qs, freshQueries(t, f.start))
	for name, q := range qs {
		want, _ := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return f.oracle.Query(ctx, q, emit) })
		var cov query.Coverage
		got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
			var info model.QueryInfo
			var err error
			info, cov, err = fe.QueryWithCoverage(ctx, q, emit)
			return info, err
		})
		sameAnswer(t, name, got, want)
		// e3 is replicated past every query's end: when none of its series
		// match, it has nothing to be asked.
		if e4 := coverageOf(t, cov, "e4"); !e4.EdgeAnswered || e4.ReplicaAnswered != "" || e4.Reason != "" {
			t.Fatalf("%s: e4 coverage %+v", name, e4)
		}
		if len(info.Warnings) != 0 || !cov.Complete() || len(cov.Edges) < 3 {
			t.Fatalf("%s: warnings %q, coverage %+v", name, info.Warnings, cov)
		}
		if len(want) == 0 {
			t.Fatalf("%s: the oracle answered nothing; the case tests nothing", name)
		}
	}
}

func TestFrontend_SharedSeriesMergesAcrossEdges(t *testing.T) {
	f := theFleet
	fe := f.frontend(t, faults{}, nil)
	ctx := context.Background()
	moved := []*labels.Matcher{must(t, labels.MatchEqual, "host", "moved")}
	now := t0.UnixMilli()
	// The edges hold disjoint samples of the moved series: raw is a union,
	// and sum/count/min/max combine exactly per bucket.
	cases := map[string]model.Query{
		"raw":  {Matchers: moved, Start: f.start, End: now, Mode: model.ModeRaw},
		"last": {Matchers: moved, Start: 0, End: now, Mode: model.ModeLastPoint},
	}
	for _, fn := range []rollup.Func{rollup.FuncSum, rollup.FuncCount, rollup.FuncMin, rollup.FuncMax} {
		cases[fn.String()] = model.Query{Matchers: moved, Start: f.start, End: now, Mode: model.ModeDownsample, Step: hour, Downsample: fn}
	}
	for name, q := range cases {
		want, _ := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return f.oracle.Query(ctx, q, emit) })
		got, _ := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return fe.Query(ctx, q, emit) })
		sameAnswer(t, name, got, want)
	}
}

// truncatedOracle is a node holding the fleet's data with one edge's data
// cut to its watermark: what the front end can answer with that edge
// unreachable.
func (f *fleet) truncatedOracle(t *testing.T, edge string) *node.Node {
	t.Helper()
	n := openNode(t)
	merged, lsets := map[string][]sample{}, map[string]labels.Labels{}
	for _, d := range f.edges {
		for k, ss := range d.series {
			lsets[k] = d.lsets[k]
			for _, s := range ss {
				if d.id != edge || s.t <= d.wm {
					merged[k] = append(merged[k], s)
				}
			}
		}
	}
	for k, ss := range merged {
		slices.SortFunc(ss, func(a, b sample) int { return cmp.Compare(a.t, b.t) })
		write(t, n, lsets[k], ss)
	}
	return n
}

func answerOf(t *testing.T, n *node.Node, q model.Query) []model.Series {
	t.Helper()
	out, _ := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
		return n.Query(context.Background(), q, emit)
	})
	return out
}

func coverageOf(t *testing.T, cov query.Coverage, edge string) query.EdgeCoverage {
	t.Helper()
	for _, e := range cov.Edges {
		if e.Edge == edge {
			return e
		}
	}
	t.Fatalf("no coverage for %s in %+v", edge, cov)
	return query.EdgeCoverage{}
}

func TestFrontend_UnreachableEdgeIsAnsweredByReplicasAndFlagged(t *testing.T) {
	f := theFleet
	fe := f.frontend(t, faults{deadEdges: []string{"e1"}}, nil)
	ctx := context.Background()
	now := t0.UnixMilli()
	all := []*labels.Matcher{must(t, labels.MatchRegexp, "__name__", ".+"), must(t, labels.MatchNotEqual, "host", "moved")}
	oracle := f.truncatedOracle(t, "e1")
	for name, q := range map[string]model.Query{
		"raw":       {Matchers: all, Start: f.start, End: now, Mode: model.ModeRaw},
		"sum 1h":    {Matchers: all, Start: f.start, End: now, Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncSum},
		"avg 10m+3": {Matchers: all, Start: f.start, End: now, Mode: model.ModeDownsample, Step: 10 * minute, Downsample: rollup.FuncAvg, Offset: 3 * minute},
		"last":      {Matchers: all, Start: 0, End: now, Mode: model.ModeLastPoint},
	} {
		want := answerOf(t, oracle, q)
		var cov query.Coverage
		got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
			var info model.QueryInfo
			var err error
			info, cov, err = fe.QueryWithCoverage(ctx, q, emit)
			return info, err
		})
		sameAnswer(t, name, got, want)
		e1 := coverageOf(t, cov, "e1")
		wm := f.edges[0].wm
		if e1.EdgeAnswered || e1.ReplicaAnswered != "c1" || !slices.Equal(e1.Missing, []query.TimeRange{{StartMs: wm + 1, EndMs: now}}) ||
			!strings.Contains(e1.Reason, "connection refused") {
			t.Fatalf("%s: e1 coverage %+v", name, e1)
		}
		wantWarn := "edge e1 unreachable: points after " + time.UnixMilli(wm).UTC().Format(time.RFC3339Nano) + " missing"
		if !slices.Equal(info.Warnings, []string{wantWarn}) {
			t.Fatalf("%s: warnings %q, want %q", name, info.Warnings, wantWarn)
		}
		if e2 := coverageOf(t, cov, "e2"); !e2.EdgeAnswered || e2.ReplicaAnswered != "c2" || len(e2.Missing) != 0 {
			t.Fatalf("%s: e2 coverage %+v", name, e2)
		}
	}
}

func TestFrontend_ReplicasDownTheEdgeAnswersEverything(t *testing.T) {
	f := theFleet
	fe := f.frontend(t, faults{down: []string{"c1", "c2"}}, nil) // e1's replicas
	ctx := context.Background()
	for name, q := range queries(t, f.start) {
		want, _ := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return f.oracle.Query(ctx, q, emit) })
		var cov query.Coverage
		got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
			var info model.QueryInfo
			var err error
			info, cov, err = fe.QueryWithCoverage(ctx, q, emit)
			return info, err
		})
		sameAnswer(t, name, got, want)
		e1 := coverageOf(t, cov, "e1")
		if !e1.EdgeAnswered || e1.ReplicaAnswered != "" || len(e1.Missing) != 0 || !strings.Contains(e1.Reason, "coordinator c2 is down") {
			t.Fatalf("%s: e1 coverage %+v", name, e1)
		}
		if len(info.Warnings) != 0 {
			t.Fatalf("%s: warnings %q", name, info.Warnings)
		}
	}
}

func TestFrontend_EdgeAndReplicasDownTheEdgeIsMissing(t *testing.T) {
	f := theFleet
	fe := f.frontend(t, faults{down: []string{"c2", "c3"}, deadEdges: []string{"e2"}}, nil) // c2, c3: e2's replicas
	ctx := context.Background()
	q := model.Query{Matchers: []*labels.Matcher{must(t, labels.MatchRegexp, "host", ".+")}, Start: f.start, End: t0.UnixMilli(), Mode: model.ModeRaw}
	var cov query.Coverage
	got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
		var info model.QueryInfo
		var err error
		info, cov, err = fe.QueryWithCoverage(ctx, q, emit)
		return info, err
	})
	for _, s := range got {
		if strings.HasPrefix(s.Labels.Get("host"), "e2-") {
			t.Fatalf("answer has %s", s.Labels)
		}
	}
	if len(got) != 12 {
		t.Fatalf("%d series, want the 10 of e1 and e3 (with the moved one and e1's fresh one) and e4's 2", len(got))
	}
	e2 := coverageOf(t, cov, "e2")
	if e2.EdgeAnswered || e2.ReplicaAnswered != "" || !slices.Equal(e2.Missing, []query.TimeRange{{StartMs: q.Start, EndMs: q.End}}) {
		t.Fatalf("e2 coverage %+v", e2)
	}
	if len(info.Warnings) != 1 || !strings.Contains(info.Warnings[0], "edge e2: neither the edge nor a replica (c2, c3) answered") {
		t.Fatalf("warnings %q", info.Warnings)
	}
	if cov.Complete() {
		t.Fatal("coverage says complete")
	}
}

func TestFrontend_SlowReplicaIsHedged(t *testing.T) {
	f := theFleet
	ended := make(chan error, 4)
	fe := f.frontend(t, faults{block: "c1", ended: ended}, func(o *query.Options) { // c1: e1's first replica
		o.HedgeAfter = time.Millisecond
		// Without hedging the leg would wait for this and then fail over
		// with DeadlineExceeded; the test checks that the loser was
		// cancelled instead.
		o.ReplicaTimeout = time.Minute
	})
	ctx := context.Background()
	q := model.Query{Matchers: []*labels.Matcher{must(t, labels.MatchEqual, "host", "e1-0")}, Start: f.start, End: t0.UnixMilli(), Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncSum}
	want, _ := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return f.oracle.Query(ctx, q, emit) })
	var cov query.Coverage
	got, _ := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
		var info model.QueryInfo
		var err error
		info, cov, err = fe.QueryWithCoverage(ctx, q, emit)
		return info, err
	})
	sameAnswer(t, "hedged", got, want)
	if e1 := coverageOf(t, cov, "e1"); e1.ReplicaAnswered != "c2" || !e1.EdgeAnswered || len(e1.Missing) != 0 {
		t.Fatalf("e1 coverage %+v", e1)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the slow replica's leg ended with %v, want it cancelled by the winner", err)
	}
}

// sameMetadata requires the front end's series, label names and label
// values to equal those of a node holding everything.
func sameMetadata(t *testing.T, fe backend.Backend, oracle *node.Node) {
	t.Helper()
	ctx := context.Background()
	for name, ms := range map[string][]*labels.Matcher{
		"all":        nil,
		"mem":        {must(t, labels.MatchEqual, "__name__", "mem")},
		"cpu":        {must(t, labels.MatchEqual, "__name__", "cpu")},
		"fresh only": {must(t, labels.MatchEqual, "__name__", "disk")},
		"dc=a":       {must(t, labels.MatchEqual, "dc", "a"), must(t, labels.MatchRegexp, "host", "e.*")},
	} {
		names, err := fe.LabelNames(ctx, ms)
		want, _ := oracle.LabelNames(context.Background(), ms)
		if err != nil || !slices.Equal(names, want) {
			t.Fatalf("%s: label names %q %v, want %q", name, names, err, want)
		}
		for _, label := range []string{"__name__", "host", "dc"} {
			vals, err := fe.LabelValues(ctx, label, ms)
			want, _ := oracle.LabelValues(context.Background(), label, ms)
			if err != nil || !slices.Equal(vals, want) {
				t.Fatalf("%s: values of %s %q %v, want %q", name, label, vals, err, want)
			}
		}
		if ms == nil {
			continue
		}
		for _, limit := range []int{0, 1, 3, 1000} {
			sets, err := fe.Series(ctx, ms, limit)
			want, _ := oracle.Series(context.Background(), ms, limit)
			if err != nil || !slices.EqualFunc(sets, want, labels.Equal) {
				t.Fatalf("%s: series (limit %d) %v %v, want %v", name, limit, sets, err, want)
			}
		}
	}
}

func TestFrontend_MetadataIsTheCatalogsAndTheEdges(t *testing.T) {
	f := theFleet
	fe := f.frontend(t, faults{}, nil)
	sameMetadata(t, fe, f.oracle)
	ctx := context.Background()
	// e1-new is not in the catalog and sorts between e1-2 and e2-1.
	cpu := []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "cpu"), must(t, labels.MatchEqual, "dc", "a")}
	sets, err := fe.Series(ctx, cpu, 3)
	if err != nil || len(sets) != 3 || sets[2].Get("host") != "e1-new" {
		t.Fatalf("series %v %v", sets, err)
	}
	if _, err := fe.Series(ctx, []*labels.Matcher{must(t, labels.MatchRegexp, "host", ".*")}, 0); err == nil {
		t.Fatal("a selector matching everything was accepted")
	}
	if _, err := fe.Write(ctx, nil); err == nil || !strings.Contains(err.Error(), "write to an edge node") {
		t.Fatalf("write: %v", err)
	}

	// Unreachable edges are not asked: what only they know is left out.
	fe = f.frontend(t, faults{deadEdges: []string{"e2", "e4"}}, nil)
	disk := []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "disk")}
	if vals, err := fe.LabelValues(ctx, "host", disk); err != nil || len(vals) != 0 {
		t.Fatalf("disk hosts with e2 and e4 down: %q %v", vals, err)
	}
	if vals, err := fe.LabelValues(ctx, "__name__", nil); err != nil || !slices.Equal(vals, []string{"cpu", "mem"}) {
		t.Fatalf("names with e2 and e4 down: %q %v", vals, err)
	}
	if sets, err := fe.Series(ctx, cpu, 0); err != nil || len(sets) != 7 {
		t.Fatalf("cpu dc=a with e2 and e4 down: %v %v; want the 6 in the catalog and e1-new", sets, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fe.LabelNames(cancelled, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled listing: %v", err)
	}
}

func TestFrontend_BadQueriesAndLimits(t *testing.T) {
	f := theFleet
	fe := f.frontend(t, faults{}, nil)
	ctx := context.Background()
	all := []*labels.Matcher{must(t, labels.MatchRegexp, "__name__", ".+")}
	for name, q := range map[string]model.Query{
		"no matchers":  {Start: 0, End: 1, Mode: model.ModeRaw},
		"end < start":  {Matchers: all, Start: 2, End: 1, Mode: model.ModeRaw},
		"no step":      {Matchers: all, Start: 0, End: 1, Mode: model.ModeDownsample, Downsample: rollup.FuncAvg},
		"series limit": {Matchers: all, Start: 0, End: 1, Mode: model.ModeRaw, LimitSeries: 3},
	} {
		_, err := fe.Query(ctx, q, func(model.Series) error { return nil })
		if !errors.Is(err, model.ErrBadQuery) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	q := model.Query{Matchers: all, Start: f.start, End: t0.UnixMilli(), Mode: model.ModeRaw}
	stop := errors.New("stop")
	calls := 0
	if _, err := fe.Query(ctx, q, func(model.Series) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("emit error: %v after %d calls", err, calls)
	}
	barred := f.frontend(t, faults{}, func(o *query.Options) {
		o.Barrier = func(context.Context) error { return errors.New("no leader") }
	})
	if _, err := barred.Query(ctx, q, func(model.Series) error { return nil }); err == nil || !strings.Contains(err.Error(), "no leader") {
		t.Fatalf("barrier error: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fe.Query(cancelled, q, func(model.Series) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled query: %v", err)
	}
	if _, err := query.New(query.Options{}); err == nil {
		t.Fatal("options without a catalog were accepted")
	}
}

// withEdges returns a copy of the fleet's catalog with more edges
// registered that hold nothing the catalog knows of.
func withEdges(t *testing.T, f *fleet, ids ...string) *catalog.FSM {
	t.Helper()
	cat := catalog.New()
	if err := cat.Restore(f.cat.Snapshot()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := cat.ApplyCommand(cat.AppliedIndex()+1, catalog.RegisterNode{ID: id, Role: catalog.RoleEdge, Addr: id + ":7070", TimeMs: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return cat
}

func TestFrontend_UnreachableEdgesWithoutCatalogSeriesAreSummarized(t *testing.T) {
	f := theFleet
	ctx := context.Background()
	now := t0.UnixMilli()
	extra := []string{"e5", "e6", "e7", "e8", "e9", "e10"} // not in f.edge: unreachable
	cat := withEdges(t, f, extra...)
	// e1 has catalog-matching series and keeps its precise warning; e4
	// and the extra edges have none and share one line.
	fe := f.frontend(t, faults{deadEdges: []string{"e1", "e4"}}, func(o *query.Options) { o.Catalog = cat })
	mem := []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "mem")}
	q := model.Query{Matchers: mem, Start: f.start, End: now, Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncMax}
	var cov query.Coverage
	got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
		var info model.QueryInfo
		var err error
		info, cov, err = fe.QueryWithCoverage(ctx, q, emit)
		return info, err
	})
	sameAnswer(t, "mem", got, answerOf(t, f.truncatedOracle(t, "e1"), q))
	wantWarn := []string{
		"edge e1 unreachable: points after " + time.UnixMilli(f.edges[0].wm).UTC().Format(time.RFC3339Nano) + " missing",
		"7 other edges unreachable (e10, e4, e5, e6, e7, and 2 more): series they created after their watermark would be missing",
	}
	if !slices.Equal(info.Warnings, wantWarn) {
		t.Fatalf("warnings %q\nwant %q", info.Warnings, wantWarn)
	}
	for _, id := range append(extra, "e4") {
		c := coverageOf(t, cov, id)
		if c.EdgeAnswered || c.ReplicaAnswered != "" || !strings.HasPrefix(c.Reason, "unreachable; no replicated series match: ") ||
			!slices.Equal(c.Missing, []query.TimeRange{{StartMs: q.Start, EndMs: q.End}}) {
			t.Fatalf("%s coverage %+v", id, c)
		}
	}
	if e2 := coverageOf(t, cov, "e2"); !e2.EdgeAnswered || e2.ReplicaAnswered != "c2" || len(e2.Missing) != 0 {
		t.Fatalf("e2 coverage %+v", e2)
	}
	if cov.Complete() {
		t.Fatal("coverage says complete")
	}

	// Only series the catalog does not know: one edge down, one answering.
	fe = f.frontend(t, faults{deadEdges: []string{"e2"}}, nil)
	disk := model.Query{Matchers: []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "disk")}, Start: f.start, End: now, Mode: model.ModeRaw}
	got, info = collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
		var info model.QueryInfo
		var err error
		info, cov, err = fe.QueryWithCoverage(ctx, disk, emit)
		return info, err
	})
	if len(got) != 1 || got[0].Labels.Get("host") != "e4-0" {
		t.Fatalf("disk with e2 down: %v", names(got))
	}
	want := "1 edge unreachable (e2): series it created after its watermark would be missing"
	if !slices.Equal(info.Warnings, []string{want}) {
		t.Fatalf("warnings %q, want %q", info.Warnings, want)
	}
	// e2 is asked only after its watermark; e3, replicated past the end,
	// is not asked at all.
	if e2 := coverageOf(t, cov, "e2"); !slices.Equal(e2.Missing, []query.TimeRange{{StartMs: f.edges[1].wm + 1, EndMs: now}}) {
		t.Fatalf("e2 coverage %+v", e2)
	}
	for _, c := range cov.Edges {
		if c.Edge == "e3" {
			t.Fatalf("e3 has coverage %+v", c)
		}
	}
}

// countingSource counts the legs in flight across all edges.
type countingSource struct {
	query.Source
	inflight, peak *atomic.Int64
}

func (c countingSource) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	n := c.inflight.Add(1)
	defer c.inflight.Add(-1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	// Long enough that unbounded legs would overlap.
	time.Sleep(5 * time.Millisecond)
	return c.Source.Query(ctx, q, emit)
}

func TestFrontend_EdgeLegsAreBounded(t *testing.T) {
	f := theFleet
	var inflight, peak atomic.Int64
	fe := f.frontend(t, faults{}, func(o *query.Options) {
		o.MaxParallelEdges = 1
		o.Edge = func(id, _ string) (query.Source, error) {
			if f.edge[id] == nil {
				return nil, fmt.Errorf("no edge %s", id)
			}
			return countingSource{f.edge[id], &inflight, &peak}, nil
		}
	})
	ctx := context.Background()
	for _, q := range []model.Query{
		{Matchers: []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "cpu")}, Start: f.start, End: t0.UnixMilli(), Mode: model.ModeRaw},
		{Matchers: []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "disk")}, Start: f.start, End: t0.UnixMilli(), Mode: model.ModeRaw},
	} {
		got, _ := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return fe.Query(ctx, q, emit) })
		sameAnswer(t, q.Matchers[0].Value, got, answerOf(t, f.oracle, q))
	}
	if p := peak.Load(); p != 1 {
		t.Fatalf("%d edge legs ran at once, the bound is 1", p)
	}
}

// recordingReplica records the edges of each call to a coordinator.
type recordingReplica struct {
	query.ReplicaSource
	id    string
	mu    *sync.Mutex
	calls *[]string
}

func (r recordingReplica) Query(ctx context.Context, edges []string, q model.Query, emit func(string, model.Series) error) (model.QueryInfo, error) {
	r.mu.Lock()
	*r.calls = append(*r.calls, r.id+":"+strings.Join(edges, ","))
	r.mu.Unlock()
	return r.ReplicaSource.Query(ctx, edges, q, emit)
}

func TestFrontend_ReplicaLegsAreSharedPerCoordinatorAndSplitPoint(t *testing.T) {
	f := theFleet
	// Placements are sorted: e1 on c1 and c2, e2 on c2 and c3, e3 on c1
	// and c3.
	ctx := context.Background()
	now := t0.UnixMilli()
	all := []*labels.Matcher{must(t, labels.MatchRegexp, "__name__", "cpu|mem"), must(t, labels.MatchNotEqual, "host", "moved")}
	for _, tc := range []struct {
		name  string
		q     model.Query
		down  []string
		calls []string // sorted
	}{
		// Last-point queries send the whole range to the replicas: e1 and
		// e3 share c1's leg.
		{"last", model.Query{Matchers: all, Start: 0, End: now, Mode: model.ModeLastPoint}, nil, []string{"c1:e1,e3", "c2:e2"}},
		// Raw queries split at each edge's own watermark.
		{"raw", model.Query{Matchers: all, Start: f.start, End: now, Mode: model.ModeRaw}, nil, []string{"c1:e1", "c1:e3", "c2:e2"}},
		// The shared leg fails: each edge goes on to its next replica.
		{"last, c1 down", model.Query{Matchers: all, Start: 0, End: now, Mode: model.ModeLastPoint}, []string{"c1"}, []string{"c1:e1,e3", "c2:e1", "c2:e2", "c3:e3"}},
	} {
		var mu sync.Mutex
		var calls []string
		fe := f.frontend(t, faults{}, func(o *query.Options) {
			o.Replica = func(id string) (query.ReplicaSource, error) {
				// Every coordinator serves every edge here.
				r := &fakeReplica{id: id, f: f, edges: []string{"e1", "e2", "e3"}, down: slices.Contains(tc.down, id)}
				return recordingReplica{r, id, &mu, &calls}, nil
			}
		})
		var cov query.Coverage
		got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
			var info model.QueryInfo
			var err error
			info, cov, err = fe.QueryWithCoverage(ctx, tc.q, emit)
			return info, err
		})
		sameAnswer(t, tc.name, got, answerOf(t, f.oracle, tc.q))
		slices.Sort(calls)
		if !slices.Equal(calls, tc.calls) || len(info.Warnings) != 0 || !cov.Complete() {
			t.Fatalf("%s: calls %q, want %q; warnings %q", tc.name, calls, tc.calls, info.Warnings)
		}
	}
}
