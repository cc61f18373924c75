package node_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	"github.com/tributarydb/tributary/node/segment"
)

// importSource writes three series over six days into a node named "pi",
// with out-of-order points and rewritten timestamps, and returns it with
// the model of what it holds. Values are multiples of 0.5, so sums are
// exact in any order.
func importSource(t *testing.T, seed uint64) (*node.Node, truth) {
	t.Helper()
	o := testOptions(t, t.TempDir())
	o.NodeID = "pi"
	src := mustOpen(t, o)
	t.Cleanup(func() { src.Close() })
	tr := truth{}
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, sensor := range []string{"a", "b", "c"} {
		ls := []labels.Label{{Name: "__name__", Value: "temp"}, {Name: "sensor", Value: sensor}}
		key := labels.Labels(ls).String()
		var b model.Batch
		b.Labels = ls
		for t0 := base.UnixMilli(); t0 < base.Add(6*24*3600e9).UnixMilli(); t0 += 60_000 + rng.Int64N(120_000) {
			v := float64(rng.IntN(2000)) * 0.5
			b.Ts, b.Vs = append(b.Ts, t0), append(b.Vs, v)
			tr.put(key, t0, v)
			if rng.IntN(50) == 0 { // a rewrite of an earlier timestamp: last write wins
				old := b.Ts[rng.IntN(len(b.Ts))]
				v := float64(rng.IntN(2000)) * 0.5
				b.Ts, b.Vs = append(b.Ts, old), append(b.Vs, v)
				tr.put(key, old, v)
			}
		}
		if res, err := src.Write(context.Background(), []model.Batch{b}); err != nil || res.Rejected != 0 {
			t.Fatalf("write %s: %+v, %v", key, res, err)
		}
	}
	if err := src.Flush(); err != nil {
		t.Fatal(err)
	}
	return src, tr
}

// exportFiles exports src's raw points in [minT, maxT] as segment files
// of at most 64 KiB, as a replica's export builds them.
func exportFiles(t *testing.T, src *node.Node, minT, maxT int64) [][]byte {
	t.Helper()
	b, err := segment.NewBuilder(src.NodeID(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	var files [][]byte
	finish := func() {
		data, _, err := b.Finish(9, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, data)
	}
	err = src.ExportRange(context.Background(), minT, maxT, func(ls labels.Labels, ts []int64, vs []float64) error {
		for len(ts) > 0 {
			k, err := b.Add(ls, ts, vs)
			if err != nil {
				return err
			}
			ts, vs = ts[k:], vs[k:]
			if len(ts) > 0 {
				finish()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Points() > 0 {
		finish()
	}
	return files
}

// answers runs q over every "temp" series of n, by series.
func answers(t *testing.T, n *node.Node, q model.Query) map[string]model.Series {
	t.Helper()
	m, _ := labels.NewMatcher(labels.MatchEqual, "__name__", "temp")
	q.Matchers = []*labels.Matcher{m}
	out := map[string]model.Series{}
	if _, err := n.Query(context.Background(), q, func(s model.Series) error {
		out[s.Labels.String()] = model.Series{Labels: s.Labels, Ts: slices.Clone(s.Ts), Vs: slices.Clone(s.Vs)}
		return nil
	}); err != nil {
		t.Fatalf("query %+v: %v", q, err)
	}
	return out
}

func sameAnswers(t *testing.T, what string, got, want map[string]model.Series) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d series, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		g := got[k]
		if !slices.Equal(g.Ts, w.Ts) || !slices.Equal(g.Vs, w.Vs) {
			t.Errorf("%s: series %s: %d points, want %d (first difference at %d)", what, k, len(g.Ts), len(w.Ts), firstDifference(g, w))
		}
	}
}

func firstDifference(a, b model.Series) int {
	for i := range min(len(a.Ts), len(b.Ts)) {
		if a.Ts[i] != b.Ts[i] || a.Vs[i] != b.Vs[i] {
			return i
		}
	}
	return min(len(a.Ts), len(b.Ts))
}

// oracle is the model's answer to a query of every series.
func (tr truth) oracle(start, end, step int64, f rollup.Func) map[string]model.Series {
	out := map[string]model.Series{}
	for key := range tr {
		var ts []int64
		var vs []float64
		if step == 0 {
			for _, t := range slices.Sorted(mapKeys(tr[key])) {
				if t >= start && t <= end {
					ts, vs = append(ts, t), append(vs, tr[key][t])
				}
			}
		} else {
			ts, vs = tr.naive(key, start, end, step, f)
		}
		if len(ts) > 0 {
			out[key] = model.Series{Ts: ts, Vs: vs}
		}
	}
	return out
}

var importFuncs = []rollup.Func{rollup.FuncAvg, rollup.FuncSum, rollup.FuncMin, rollup.FuncMax, rollup.FuncCount, rollup.FuncFirst, rollup.FuncLast}

// A node that imports another's export answers every raw and downsampled
// query as the source and the naive model do, after a restart too, and
// importing the same files again changes nothing.
func TestImportSegment_AnswersAsTheSource(t *testing.T) {
	src, tr := importSource(t, 1)
	start, end := base.UnixMilli(), base.Add(7*24*3600e9).UnixMilli()
	files := exportFiles(t, src, start, end)
	if len(files) < 3 {
		t.Fatalf("%d files: the test wants a series split over several", len(files))
	}
	o := testOptions(t, t.TempDir())
	o.NodeID = "pi"
	dst := mustOpen(t, o)
	var points int64
	for round := range 2 {
		for i, f := range files {
			got, err := dst.ImportSegment(f)
			if err != nil {
				t.Fatalf("round %d: import file %d: %v", round, i, err)
			}
			points += got.Points
		}
	}
	var distinct int64
	for _, byT := range tr {
		distinct += int64(len(byT))
	}
	if points != 2*distinct {
		t.Fatalf("imported %d points in two rounds, want twice the %d distinct points written", points, distinct)
	}
	if err := dst.SyncImports(); err != nil {
		t.Fatal(err)
	}
	if st := dst.Status(); st.WAL.Segments != 1 || st.Accepted != 0 {
		t.Fatalf("imports went through the write path: %+v", st)
	}
	check := func(when string, n *node.Node) {
		t.Helper()
		raw := model.Query{Start: start, End: end, Mode: model.ModeRaw}
		sameAnswers(t, when+": raw vs source", answers(t, n, raw), answers(t, src, raw))
		sameAnswers(t, when+": raw vs model", answers(t, n, raw), tr.oracle(start, end, 0, 0))
		for _, step := range []int64{rollup.Hour, rollup.Day, 5 * 60_000} {
			for _, f := range importFuncs {
				q := model.Query{Start: start, End: end, Mode: model.ModeDownsample, Step: step, Downsample: f}
				what := fmt.Sprintf("%s: %s per %dms", when, f, step)
				sameAnswers(t, what+" vs source", answers(t, n, q), answers(t, src, q))
				sameAnswers(t, what+" vs model", answers(t, n, q), tr.oracle(start, end, step, f))
			}
		}
	}
	check("imported", dst)
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	dst = mustOpen(t, o)
	defer dst.Close()
	check("after a restart", dst)
}

// A damaged file, or one of another node, imports nothing.
func TestImportSegment_RefusesADamagedOrForeignFile(t *testing.T) {
	src, _ := importSource(t, 2)
	files := exportFiles(t, src, base.UnixMilli(), base.Add(7*24*3600e9).UnixMilli())
	o := testOptions(t, t.TempDir())
	o.NodeID = "pi"
	dst := mustOpen(t, o)
	defer dst.Close()
	bad := slices.Clone(files[0])
	bad[len(bad)/2] ^= 0x40
	if _, err := dst.ImportSegment(bad); !errors.Is(err, node.ErrImport) {
		t.Fatalf("damaged file: %v, want ErrImport", err)
	}
	if _, err := dst.ImportSegment(bad[:len(bad)-10]); !errors.Is(err, node.ErrImport) {
		t.Fatalf("truncated file: %v, want ErrImport", err)
	}
	o2 := testOptions(t, t.TempDir())
	o2.NodeID = "other"
	other := mustOpen(t, o2)
	defer other.Close()
	if _, err := other.ImportSegment(files[0]); !errors.Is(err, node.ErrImport) {
		t.Fatalf("file of node pi imported into node other: %v, want ErrImport", err)
	}
	for _, n := range []*node.Node{dst, other} {
		if s := n.Status().Series; s != 0 {
			t.Fatalf("%s holds %d series after refused imports", n.NodeID(), s)
		}
	}
}

// Rollups of the older days and raw points of the newer ones: downsampled
// answers equal the source's (and the model's) over the whole span, raw
// answers over the raw part; cells the source's head holds are exported
// as its queries answer them.
func TestImportRollups_OlderDaysAnswerAsTheSource(t *testing.T) {
	src, tr := importSource(t, 3)
	// Unflushed points in the head of the source, in an hour and a day
	// the store holds rollups of: the export must include them.
	head := model.Batch{Labels: []labels.Label{{Name: "__name__", Value: "temp"}, {Name: "sensor", Value: "a"}}}
	for _, d := range []int64{30*60_000 + 7, 26*3600_000 + 11} {
		t0 := base.UnixMilli() + d
		head.Ts, head.Vs = append(head.Ts, t0), append(head.Vs, 4242.5)
		tr.put(labels.Labels(head.Labels).String(), t0, 4242.5)
	}
	if _, err := src.Write(context.Background(), []model.Batch{head}); err != nil {
		t.Fatal(err)
	}
	start, end := base.UnixMilli(), base.Add(7*24*3600e9).UnixMilli()
	split := base.Add(3 * 24 * 3600e9).UnixMilli() // rollups before, raw from here
	o := testOptions(t, t.TempDir())
	o.NodeID = "pi"
	dst := mustOpen(t, o)
	defer dst.Close()
	for _, f := range exportFiles(t, src, split, end) {
		if _, err := dst.ImportSegment(f); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := labels.NewMatcher(labels.MatchEqual, "__name__", "temp")
	var seriesSeen int
	err := src.ExportRollups(context.Background(), []*labels.Matcher{m}, start, split-1, func(r node.SeriesRollups) error {
		seriesSeen++
		for _, h := range r.Hourly {
			if h.Day >= split {
				return fmt.Errorf("hourly pack of %d exported, after the range", h.Day)
			}
		}
		return dst.ImportRollups(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	if seriesSeen != 3 {
		t.Fatalf("rollups of %d series exported, want 3", seriesSeen)
	}
	for _, step := range []int64{rollup.Hour, 3 * rollup.Hour, rollup.Day} {
		for _, f := range importFuncs {
			q := model.Query{Start: start, End: end, Mode: model.ModeDownsample, Step: step, Downsample: f}
			what := fmt.Sprintf("%s per %dms", f, step)
			sameAnswers(t, what+" vs source", answers(t, dst, q), answers(t, src, q))
			sameAnswers(t, what+" vs model", answers(t, dst, q), tr.oracle(start, end, step, f))
		}
	}
	raw := model.Query{Start: split, End: end, Mode: model.ModeRaw}
	sameAnswers(t, "raw after the split", answers(t, dst, raw), answers(t, src, raw))
	if got := answers(t, dst, model.Query{Start: start, End: split - 1, Mode: model.ModeRaw}); len(got) != 0 {
		t.Errorf("raw points before the split on the importing node: %d series", len(got))
	}
	// Importing again changes nothing.
	before := answers(t, dst, model.Query{Start: start, End: end, Mode: model.ModeDownsample, Step: rollup.Hour, Downsample: rollup.FuncSum})
	if err := src.ExportRollups(context.Background(), []*labels.Matcher{m}, start, split-1, dst.ImportRollups); err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, "after a second import", answers(t, dst, model.Query{Start: start, End: end, Mode: model.ModeDownsample, Step: rollup.Hour, Downsample: rollup.FuncSum}), before)
}

// Rollups that cannot be what a store holds are refused whole.
func TestImportRollups_RefusesMisalignedOrInvalidCells(t *testing.T) {
	o := testOptions(t, t.TempDir())
	dst := mustOpen(t, o)
	defer dst.Close()
	ls := labels.FromStrings("__name__", "temp")
	day := base.UnixMilli()
	var good rollup.Hourly
	good.Hours[1] = rollup.Agg{Count: 1, Sum: 1, Min: 1, Max: 1, First: 1, Last: 1, FirstT: day + rollup.Hour + 5, LastT: day + rollup.Hour + 5}
	outside := good
	outside.Hours[1].LastT = day + 3*rollup.Hour // past its hour
	var pack rollup.Daily
	pack.Days[0] = good.Hours[1]
	cases := []struct {
		name string
		r    node.SeriesRollups
	}{
		{"hourly pack not at a day", node.SeriesRollups{Labels: ls, Hourly: []node.HourlyRollups{{Day: day + rollup.Hour, Hours: good}}}},
		{"cell outside its hour", node.SeriesRollups{Labels: ls, Hourly: []node.HourlyRollups{{Day: day, Hours: outside}}}},
		{"daily pack not at a pack", node.SeriesRollups{Labels: ls, Daily: []node.DailyRollups{{Pack: rollup.PackStart(day) + rollup.Day, Days: pack}}}},
		{"no labels", node.SeriesRollups{Hourly: []node.HourlyRollups{{Day: day, Hours: good}}}},
	}
	for _, c := range cases {
		if err := dst.ImportRollups(c.r); !errors.Is(err, node.ErrImport) {
			t.Errorf("%s: %v, want ErrImport", c.name, err)
		}
	}
	if s := dst.Status().Series; s != 0 {
		t.Fatalf("%d series after refused imports", s)
	}
}
