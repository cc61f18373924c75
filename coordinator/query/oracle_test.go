package query_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/opentsdb"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// The semantics oracle: one deliberately naive model of what a query
// means (buckets from floor division, a map of buckets, a map of groups,
// folds written out), computed from the raw samples, against which the
// three callers of model/aggregate are held on the same random data: a
// storage node holding everything, the coordinator's front end over three
// edges and their replicas, and the OpenTSDB API over both.

// oracleSeed is the seed of the oracle's data and queries; the
// environment variable TRIBUTARY_ORACLE_SEED replaces it to explore.
const oracleSeed = 20261124

// oSeries is one series' raw samples, sorted by time, unique times.
type oSeries struct {
	ls labels.Labels
	ts []int64
	vs []float64
}

// oracleData is what the oracle's fleet holds: per edge (sorted by id)
// its series, and the data span.
type oracleData struct {
	edges  []string
	byEdge map[string][]oSeries
	first  int64 // first sample time (about now-30h)
}

// union is the data as one node holding everything has it.
func (d *oracleData) union() []oSeries {
	merged := map[string]*oSeries{}
	for _, e := range d.edges {
		for _, s := range d.byEdge[e] {
			k := s.ls.String()
			if merged[k] == nil {
				merged[k] = &oSeries{ls: s.ls}
			}
			m := merged[k]
			m.ts, m.vs = append(m.ts, s.ts...), append(m.vs, s.vs...)
		}
	}
	var out []oSeries
	for _, s := range merged {
		idx := make([]int, len(s.ts))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(s.ts[a], s.ts[b]) })
		o := oSeries{ls: s.ls}
		for _, i := range idx {
			o.ts, o.vs = append(o.ts, s.ts[i]), append(o.vs, s.vs[i])
		}
		out = append(out, o)
	}
	return out
}

// genOracleData draws the data: per edge four series (labels host, dc,
// and rack or not), one series shared by o1 and o2 (every sample on one
// of them), a series o2 created after its watermark; samples every 1 ms
// to 20 min with now and then a gap of hours (empty buckets), values in
// quarters (sums exact in any order), and NaN now and then, but never as
// the first sample of an hour on an edge (see model/aggregate: the
// rollups pass over such a NaN).
func genOracleData(rng *rand.Rand, now int64, wm map[string]int64) *oracleData {
	d := &oracleData{edges: []string{"o1", "o2", "o3"}, byEdge: map[string][]oSeries{}, first: now - 30*hour}
	times := func(from int64) []int64 {
		var ts []int64
		for t := from + rng.Int64N(10*minute); t <= now; t += 1 + rng.Int64N(20*minute) {
			ts = append(ts, t)
			if rng.IntN(60) == 0 {
				t += 2*hour + rng.Int64N(3*hour)
			}
		}
		return ts
	}
	values := func(ts []int64) []float64 {
		vs := make([]float64, len(ts))
		for i, t := range ts {
			vs[i] = float64(rng.IntN(8000)-4000) / 4
			if i > 0 && rollup.BucketStart(ts[i-1], rollup.Hour) == rollup.BucketStart(t, rollup.Hour) && rng.IntN(25) == 0 {
				vs[i] = math.NaN()
			}
		}
		return vs
	}
	for i, e := range d.edges {
		for k := range 4 {
			kv := []string{"__name__", "temp", "host", fmt.Sprintf("%s-%d", e, k), "dc", []string{"a", "b"}[(i+k)%2]}
			if k != 3 {
				kv = append(kv, "rack", []string{"r1", "r2"}[(i*k)%2])
			}
			ts := times(d.first)
			d.byEdge[e] = append(d.byEdge[e], oSeries{ls: labels.FromStrings(kv...), ts: ts, vs: values(ts)})
		}
	}
	shared := labels.FromStrings("__name__", "temp", "host", "shared", "dc", "a", "rack", "r1")
	var ts1, ts2 []int64
	for _, t := range times(d.first) {
		if rng.IntN(2) == 0 {
			ts1 = append(ts1, t)
		} else {
			ts2 = append(ts2, t)
		}
	}
	d.byEdge["o1"] = append(d.byEdge["o1"], oSeries{ls: shared, ts: ts1, vs: values(ts1)})
	d.byEdge["o2"] = append(d.byEdge["o2"], oSeries{ls: shared, ts: ts2, vs: values(ts2)})
	fresh := times(wm["o2"] + 1)
	d.byEdge["o2"] = append(d.byEdge["o2"], oSeries{ls: labels.FromStrings("__name__", "temp", "host", "o2-new", "dc", "b"), ts: fresh, vs: values(fresh)})
	return d
}

// newOracleFleet builds a catalog and nodes for d: each edge a node with
// all its data, its two replicas one node with the data up to its
// watermark (the fresh series is not registered), and one node holding
// everything. Some nodes are flushed, some keep data in the head.
func newOracleFleet(t *testing.T, d *oracleData, wm map[string]int64) (*fleet, *node.Node) {
	t.Helper()
	f := &fleet{cat: catalog.New(), edge: map[string]*node.Node{}, replica: map[string]*node.Node{}, placed: map[string][]string{}}
	idx := uint64(1)
	if err := f.cat.ApplyMembership(idx, catalog.Membership{Voters: []uint64{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	apply := func(c catalog.Command) {
		t.Helper()
		idx++
		if _, err := f.cat.ApplyCommand(idx, c); err != nil {
			t.Fatalf("apply %T: %v", c, err)
		}
	}
	coords := []string{"c1", "c2", "c3"}
	for i, c := range coords {
		apply(catalog.RegisterNode{ID: c, Role: catalog.RoleCoordinator, RaftID: uint64(i + 1), Addr: c + ":7000", TimeMs: 1})
	}
	writeAll := func(n *node.Node, ss []oSeries, keep func(int64) bool) (points uint64, minT, maxT int64) {
		minT, maxT = math.MaxInt64, math.MinInt64
		for _, s := range ss {
			var kept []sample
			for i, ts := range s.ts {
				if keep(ts) {
					kept = append(kept, sample{ts, s.vs[i]})
					minT, maxT = min(minT, ts), max(maxT, ts)
				}
			}
			write(t, n, s.ls, kept)
			points += uint64(len(kept))
		}
		return points, minT, maxT
	}
	for i, e := range d.edges {
		apply(catalog.RegisterNode{ID: e, Role: catalog.RoleEdge, Addr: e + ":7070", TimeMs: 1})
		f.edge[e], f.replica[e] = openNode(t), openNode(t)
		writeAll(f.edge[e], d.byEdge[e], func(int64) bool { return true })
		var registered []labels.Labels
		for _, s := range d.byEdge[e] {
			if s.ls.Get("host") != e+"-new" {
				registered = append(registered, s.ls)
			}
		}
		points, minT, maxT := writeAll(f.replica[e], d.byEdge[e][:len(registered)], func(ts int64) bool { return ts <= wm[e] })
		replicas := []string{coords[i], coords[(i+1)%3]}
		apply(catalog.RegisterSeries{Edge: e, Series: registered})
		apply(catalog.SetPlacement{Edge: e, Replicas: replicas})
		pl, _ := f.cat.Placement(e)
		apply(catalog.RecordHeld{Edge: e, Epoch: pl.Epoch, WatermarkSeq: 1, WatermarkTimeMs: wm[e],
			Ranges: []catalog.HeldRange{{FirstSeq: 1, LastSeq: 1, Points: points, MinTimeMs: minT, MaxTimeMs: maxT}}})
		for _, c := range replicas {
			f.placed[c] = append(f.placed[c], e)
		}
	}
	all := openNode(t)
	now := t0.UnixMilli()
	// Older data through the store and its rollups, the newer in the head.
	writeAll(all, d.union(), func(ts int64) bool { return ts <= now-6*hour })
	for _, n := range []*node.Node{all, f.edge["o1"], f.replica["o2"], f.replica["o3"]} {
		if err := n.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	writeAll(all, d.union(), func(ts int64) bool { return ts > now-6*hour })
	return f, all
}

// naiveBucket is the start of the bucket [k*step+off, (k+1)*step+off)
// holding t, by floor division written out (off is not reduced).
func naiveBucket(t, step, off int64) int64 {
	k := (t - off) / step
	if (t-off)%step != 0 && t-off < 0 {
		k--
	}
	return k*step + off
}

// naiveFold folds values, in order, with fn.
func naiveFold(vs []float64, fn rollup.Func) float64 {
	switch fn {
	case rollup.FuncCount:
		return float64(len(vs))
	case rollup.FuncSum, rollup.FuncAvg:
		s := 0.0
		for _, v := range vs {
			s += v
		}
		if fn == rollup.FuncAvg {
			return s / float64(len(vs))
		}
		return s
	case rollup.FuncMin:
		m := vs[0]
		for _, v := range vs[1:] {
			if v < m { // a NaN first stays; a later one is passed over
				m = v
			}
		}
		return m
	case rollup.FuncMax:
		m := vs[0]
		for _, v := range vs[1:] {
			if v > m {
				m = v
			}
		}
		return m
	case rollup.FuncFirst:
		return vs[0]
	case rollup.FuncLast:
		return vs[len(vs)-1]
	}
	panic(fmt.Sprintf("naiveFold: function %v", fn))
}

// naiveSeries answers q, without cross-series aggregation, for one
// series' samples, as a node holding them does.
func naiveSeries(q model.Query, s oSeries) ([]int64, []float64) {
	var ts []int64
	var vs []float64
	for i, t := range s.ts {
		if t >= q.Start && t <= q.End {
			ts, vs = append(ts, t), append(vs, s.vs[i])
		}
	}
	switch q.Mode {
	case model.ModeLastPoint:
		if len(ts) == 0 {
			return nil, nil
		}
		return ts[len(ts)-1:], vs[len(vs)-1:]
	case model.ModeDownsample:
		buckets := map[int64][]float64{}
		for i, t := range ts {
			b := naiveBucket(t, q.Step, q.Offset)
			buckets[b] = append(buckets[b], vs[i])
		}
		var bts []int64
		var bvs []float64
		for _, b := range slices.Sorted(mapKeysOf(buckets)) {
			bts, bvs = append(bts, b), append(bvs, naiveFold(buckets[b], q.Downsample))
		}
		return bts, bvs
	}
	return ts, vs
}

func mapKeysOf[V any](m map[int64]V) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// naiveAnswer answers q without cross-series aggregation over sources,
// each the data of one edge in id order (one source: a node holding it
// all), merging a series present on several edges as the front end
// documents it: raw samples and last points are a union (of equal
// timestamps the later edge's), per bucket sum and count add, min and max
// combine with math.Min and math.Max, and avg, first and last are the
// later edge's. The answer is sorted by labels and has no empty series.
func naiveAnswer(q model.Query, sources [][]oSeries) []model.Series {
	type merged struct {
		ls labels.Labels
		at map[int64]float64
	}
	all := map[string]*merged{}
	for _, src := range sources {
		for _, s := range src {
			if !matches(q.Matchers, s.ls) {
				continue
			}
			ts, vs := naiveSeries(q, s)
			if len(ts) == 0 {
				continue
			}
			m := all[s.ls.String()]
			if m == nil {
				m = &merged{ls: s.ls, at: map[int64]float64{}}
				all[s.ls.String()] = m
			}
			for i, t := range ts {
				old, ok := m.at[t]
				switch {
				case !ok || q.Mode != model.ModeDownsample:
					m.at[t] = vs[i]
				case q.Downsample == rollup.FuncSum || q.Downsample == rollup.FuncCount:
					m.at[t] = old + vs[i]
				case q.Downsample == rollup.FuncMin:
					m.at[t] = math.Min(old, vs[i])
				case q.Downsample == rollup.FuncMax:
					m.at[t] = math.Max(old, vs[i])
				default:
					m.at[t] = vs[i]
				}
			}
			if q.Mode == model.ModeLastPoint && len(m.at) > 1 { // keep the newest
				newest := slices.Max(slices.Collect(mapKeysOf(m.at)))
				m.at = map[int64]float64{newest: m.at[newest]}
			}
		}
	}
	var out []model.Series
	for _, m := range all {
		s := model.Series{Labels: m.ls}
		for _, t := range slices.Sorted(mapKeysOf(m.at)) {
			s.Ts, s.Vs = append(s.Ts, t), append(s.Vs, m.at[t])
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b model.Series) int { return labels.Compare(a.Labels, b.Labels) })
	return out
}

func matches(ms []*labels.Matcher, ls labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

// naiveGroups aggregates series (in label order) across: grouped by
// their values of the by labels (groups ordered by those values), each
// timestamp's values folded with fn in series order; with skipNaN NaN
// values are left out, and a timestamp left with none is NaN.
func naiveGroups(series []model.Series, by []string, fn rollup.Func, skipNaN bool) []model.Series {
	by = slices.Compact(slices.Sorted(slices.Values(by)))
	type group struct {
		values []string
		cells  map[int64][]float64
	}
	var groups []*group
	for _, s := range series {
		values := make([]string, len(by))
		for i, name := range by {
			values[i] = s.Labels.Get(name)
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return slices.Equal(g.values, values) })
		if i < 0 {
			groups = append(groups, &group{values: values, cells: map[int64][]float64{}})
			i = len(groups) - 1
		}
		for j, t := range s.Ts {
			cell := groups[i].cells[t]
			if cell == nil {
				cell = []float64{}
			}
			if !skipNaN || !math.IsNaN(s.Vs[j]) {
				cell = append(cell, s.Vs[j])
			}
			groups[i].cells[t] = cell
		}
	}
	slices.SortFunc(groups, func(a, b *group) int { return slices.Compare(a.values, b.values) })
	var out []model.Series
	for _, g := range groups {
		var s model.Series
		for i, name := range by {
			if g.values[i] != "" {
				s.Labels = append(s.Labels, labels.Label{Name: name, Value: g.values[i]})
			}
		}
		for _, t := range slices.Sorted(mapKeysOf(g.cells)) {
			v := math.NaN()
			if len(g.cells[t]) > 0 {
				v = naiveFold(g.cells[t], fn)
			}
			s.Ts, s.Vs = append(s.Ts, t), append(s.Vs, v)
		}
		out = append(out, s)
	}
	return out
}

// naiveQuery is the whole answer to q over sources.
func naiveQuery(q model.Query, sources [][]oSeries) []model.Series {
	list := naiveAnswer(q, sources)
	if q.Aggregate == rollup.FuncNone {
		return list
	}
	return naiveGroups(list, q.GroupBy, q.Aggregate, false)
}

// sameSeries requires got to equal want exactly, NaN equal to NaN.
func sameSeries(got, want []model.Series) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d series, want %d:\n got %v\nwant %v", len(got), len(want), names(got), names(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !labels.Equal(g.Labels, w.Labels) {
			return fmt.Errorf("series %d is %s, want %s", i, g.Labels, w.Labels)
		}
		if !slices.Equal(g.Ts, w.Ts) {
			return fmt.Errorf("%s: timestamps %v, want %v", g.Labels, clip(g.Ts), clip(w.Ts))
		}
		for j := range g.Vs {
			if g.Vs[j] != w.Vs[j] && !(math.IsNaN(g.Vs[j]) && math.IsNaN(w.Vs[j])) {
				return fmt.Errorf("%s at %d: %v, want %v", g.Labels, g.Ts[j], g.Vs[j], w.Vs[j])
			}
		}
	}
	return nil
}

// randomQuery draws a query over the oracle's data: every mode, every
// downsampling function, steps from a minute to a day (rollup-sized ones
// included), offsets (negative, beyond the step), ranges that cut buckets
// and reach past the data, and aggregation across series grouped by
// several labels (one that no series has).
func randomQuery(t *testing.T, rng *rand.Rand, d *oracleData) model.Query {
	now := t0.UnixMilli()
	ms := []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "temp")}
	switch rng.IntN(5) {
	case 0:
		ms = append(ms, must(t, labels.MatchEqual, "dc", "a"))
	case 1:
		ms = append(ms, must(t, labels.MatchNotRegexp, "host", "o3-.*"))
	}
	q := model.Query{Matchers: ms, Start: d.first - 2*hour + rng.Int64N(24*hour)}
	q.End = min(q.Start+hour+rng.Int64N(34*hour), now+hour)
	fns := []rollup.Func{rollup.FuncAvg, rollup.FuncSum, rollup.FuncMin, rollup.FuncMax, rollup.FuncCount, rollup.FuncFirst, rollup.FuncLast}
	switch r := rng.IntN(20); {
	case r < 3:
		q.Mode = model.ModeRaw
	case r < 5:
		q.Mode = model.ModeLastPoint
		if r == 4 {
			q.Start = 0
		}
	default:
		q.Mode = model.ModeDownsample
		q.Step = []int64{minute, 7 * minute, 10 * minute, hour, 3 * hour, 24 * hour}[rng.IntN(6)]
		if rng.IntN(2) == 0 {
			q.Offset = rng.Int64N(4*q.Step) - 2*q.Step
		}
		q.Downsample = fns[rng.IntN(len(fns))]
	}
	if q.Mode != model.ModeLastPoint && rng.IntN(2) == 0 {
		q.Aggregate = fns[rng.IntN(len(fns))]
		for _, name := range []string{"dc", "rack", "host", "nope"} {
			if rng.IntN(3) == 0 {
				q.GroupBy = append(q.GroupBy, name)
			}
		}
	}
	return q
}

// TestOracle_NodeFrontendAndOpenTSDBAnswerAsTheNaiveModel is the oracle
// test of model/aggregate's callers: random queries, each answered by a
// node holding all the data, by the front end over three edges (one
// replicated past every query, one series on two edges, one series the
// catalog does not know yet) and by the OpenTSDB API over both, compared
// with the naive model computed from the raw samples.
func TestOracle_NodeFrontendAndOpenTSDBAnswerAsTheNaiveModel(t *testing.T) {
	seed := uint64(oracleSeed)
	if s := os.Getenv("TRIBUTARY_ORACLE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("TRIBUTARY_ORACLE_SEED: %v", err)
		}
	}
	t.Logf("oracle seed %d (TRIBUTARY_ORACLE_SEED replays another)", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	now := t0.UnixMilli()
	wm := map[string]int64{"o1": now - 20*hour - 17*minute, "o2": now - 3*hour + 5, "o3": now + 2*hour}
	d := genOracleData(rng, now, wm)
	f, all := newOracleFleet(t, d, wm)
	fe := f.frontend(t, faults{}, nil)
	union := [][]oSeries{d.union()}
	var fleet [][]oSeries
	for _, e := range d.edges {
		fleet = append(fleet, d.byEdge[e])
	}
	ctx := context.Background()
	answered := 0
	var modes [4]int
	offsets, aggregated, withNaN := 0, 0, 0
	const queries = 300
	for i := range queries {
		q := randomQuery(t, rng, d)
		modes[q.Mode]++
		if q.Offset != 0 {
			offsets++
		}
		if q.Aggregate != rollup.FuncNone {
			aggregated++
		}
		name := fmt.Sprintf("query %d %+v", i, q)
		got, _ := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return all.Query(ctx, q, emit) })
		want := naiveQuery(q, union)
		if err := sameSeries(got, want); err != nil {
			t.Fatalf("%s: the node: %v", name, err)
		}
		got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return fe.Query(ctx, q, emit) })
		want = naiveQuery(q, fleet)
		if err := sameSeries(got, want); err != nil {
			t.Fatalf("%s: the front end: %v", name, err)
		}
		if len(info.Warnings) != 0 {
			t.Fatalf("%s: the front end warns %q", name, info.Warnings)
		}
		if len(want) > 0 {
			answered++
		}
		if slices.ContainsFunc(want, func(s model.Series) bool { return slices.ContainsFunc(s.Vs, math.IsNaN) }) {
			withNaN++
		}
	}
	t.Logf("%d queries: %d raw, %d downsampling (%d with an offset), %d last point; %d aggregated across series; %d answers hold NaN, %d are empty",
		queries, modes[model.ModeRaw], modes[model.ModeDownsample], offsets, modes[model.ModeLastPoint], aggregated, withNaN, queries-answered)
	if answered < queries*3/4 {
		t.Fatalf("only %d of %d queries had an answer; the oracle tests too little", answered, queries)
	}
	for name, b := range map[string]backend.Backend{"the node": all, "the front end": fe} {
		sources := union
		if name == "the front end" {
			sources = fleet
		}
		checkOpenTSDB(t, rand.New(rand.NewPCG(seed, 2)), d, b, sources, name)
	}
}

// tsdbQuery is an OpenTSDB sub-query of the oracle.
type tsdbQuery struct {
	agg     string // OpenTSDB aggregator
	fn      rollup.Func
	step    int64 // 0: no downsampling
	dsName  string
	dsFn    rollup.Func
	fill    string // "", "nan", "null" or "zero"
	tags    []string
	startMs int64
	endMs   int64
}

func (tq tsdbQuery) m() string {
	m := tq.agg + ":"
	if tq.step > 0 {
		m += tq.dsName
		if tq.fill != "" {
			m += "-" + tq.fill
		}
		m += ":"
	}
	m += "temp"
	if len(tq.tags) > 0 {
		var fs []string
		for _, k := range tq.tags {
			fs = append(fs, k+"=*")
		}
		m += "{" + strings.Join(fs, ",") + "}"
	}
	return m
}

// naive is what OpenTSDB answers, from the naive model: downsampling from
// the start of the bucket holding the start, fill onto every bucket of
// the range, then aggregation across series grouped by the filtered tags,
// in the backend (NaN folded) or, with a fill policy or none, in the API
// (NaN left out).
func (tq tsdbQuery) naive(t *testing.T, sources [][]oSeries) []model.Series {
	ms := []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "temp")}
	for _, k := range tq.tags {
		ms = append(ms, must(t, labels.MatchRegexp, k, ".+"))
	}
	q := model.Query{Matchers: ms, Start: tq.startMs, End: tq.endMs, Mode: model.ModeRaw}
	if tq.step > 0 {
		q.Mode, q.Step, q.Downsample, q.Start = model.ModeDownsample, tq.step, tq.dsFn, naiveBucket(tq.startMs, tq.step, 0)
	}
	list := naiveAnswer(q, sources)
	if tq.fill != "" {
		fillV := math.NaN()
		if tq.fill == "zero" {
			fillV = 0
		}
		for i, s := range list {
			at := map[int64]float64{}
			for j, ts := range s.Ts {
				at[ts] = s.Vs[j]
			}
			filled := model.Series{Labels: s.Labels}
			for b := q.Start; b <= naiveBucket(tq.endMs, tq.step, 0); b += tq.step {
				v, ok := at[b]
				if !ok {
					v = fillV
				}
				filled.Ts, filled.Vs = append(filled.Ts, b), append(filled.Vs, v)
			}
			list[i] = filled
		}
	}
	if tq.fn == rollup.FuncNone {
		return list
	}
	return naiveGroups(list, tq.tags, tq.fn, tq.fill != "")
}

// checkOpenTSDB runs random OpenTSDB queries against the API served from
// b and compares each group's tags and points with the naive model.
func checkOpenTSDB(t *testing.T, rng *rand.Rand, d *oracleData, b backend.Backend, sources [][]oSeries, name string) {
	mux := http.NewServeMux()
	opentsdb.Register(mux, b, &httpapi.Config{})
	aggs := []string{"avg", "sum", "min", "max", "count", "first", "last", "zimsum", "mimmax", "none"}
	dsFns := []string{"avg", "sum", "min", "max", "count", "first", "last"}
	fills := []string{"", "", "nan", "null", "zero"}
	answered := 0
	const queries = 80
	for i := range queries {
		tq := tsdbQuery{agg: aggs[rng.IntN(len(aggs))], startMs: d.first - hour + rng.Int64N(24*hour)}
		tq.endMs = tq.startMs + hour + rng.Int64N(12*hour)
		tq.fn = map[string]rollup.Func{"zimsum": rollup.FuncSum, "mimmax": rollup.FuncMax, "none": rollup.FuncNone}[tq.agg]
		if f, err := rollup.ParseFunc(tq.agg); err == nil {
			tq.fn = f
		}
		if rng.IntN(4) != 0 {
			steps := map[string]int64{"1m": minute, "10m": 10 * minute, "1h": hour, "3h": 3 * hour}
			unit := []string{"1m", "10m", "1h", "3h"}[rng.IntN(4)]
			fn := dsFns[rng.IntN(len(dsFns))]
			tq.step, tq.dsName, tq.fill = steps[unit], unit+"-"+fn, fills[rng.IntN(len(fills))]
			tq.dsFn, _ = rollup.ParseFunc(fn)
		}
		for _, k := range []string{"dc", "rack", "host"} {
			if rng.IntN(3) == 0 {
				tq.tags = append(tq.tags, k)
			}
		}
		slices.Sort(tq.tags)
		what := fmt.Sprintf("%s: OpenTSDB query %d m=%s [%d, %d]", name, i, tq.m(), tq.startMs, tq.endMs)
		got := openTSDBAnswer(t, mux, tq, what)
		want := tq.naive(t, sources)
		if err := sameTSDB(got, want, tq); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(want) > 0 {
			answered++
		}
	}
	if answered < queries*3/4 {
		t.Fatalf("%s: only %d of %d OpenTSDB queries had an answer", name, answered, queries)
	}
}

// tsdbSeries is one entry of an /api/query answer (ms, arrays).
type tsdbSeries struct {
	Tags map[string]string `json:"tags"`
	Dps  [][2]*float64     `json:"dps"`
}

func openTSDBAnswer(t *testing.T, mux *http.ServeMux, tq tsdbQuery, what string) []tsdbSeries {
	t.Helper()
	v := url.Values{"start": {strconv.FormatInt(tq.startMs, 10)}, "end": {strconv.FormatInt(tq.endMs, 10)},
		"m": {tq.m()}, "ms": {"true"}, "arrays": {"true"}}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/query?"+v.Encode(), nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("%s: status %d: %s", what, rec.Code, rec.Body.Bytes())
	}
	var out []tsdbSeries
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s: %v: %s", what, err, rec.Body.Bytes())
	}
	return out
}

// sameTSDB compares an OpenTSDB answer with the naive one: per entry the
// group's tag values (for none, every tag) and the points, null for NaN.
func sameTSDB(got []tsdbSeries, want []model.Series, tq tsdbQuery) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d entries, want %d (%v)", len(got), len(want), names(want))
	}
	for i, w := range want {
		g := got[i]
		for _, l := range w.Labels {
			if l.Name != labels.MetricName && g.Tags[l.Name] != l.Value {
				return fmt.Errorf("entry %d has tags %v, want %s", i, g.Tags, w.Labels)
			}
		}
		if len(g.Dps) != len(w.Ts) {
			return fmt.Errorf("entry %d (%s): %d points, want %d", i, w.Labels, len(g.Dps), len(w.Ts))
		}
		for j, p := range g.Dps {
			if p[0] == nil || int64(*p[0]) != w.Ts[j] {
				return fmt.Errorf("entry %d (%s): point %d at %v, want %d", i, w.Labels, j, p[0], w.Ts[j])
			}
			switch v := w.Vs[j]; {
			case math.IsNaN(v) && p[1] != nil:
				return fmt.Errorf("entry %d (%s) at %d: %v, want null", i, w.Labels, w.Ts[j], *p[1])
			case !math.IsNaN(v) && (p[1] == nil || *p[1] != v):
				return fmt.Errorf("entry %d (%s) at %d: %v, want %v", i, w.Labels, w.Ts[j], p[1], v)
			}
		}
	}
	return nil
}
