package node_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// truth is the naive model: the last value written for each (series, t).
type truth map[string]map[int64]float64

func (tr truth) put(series string, t int64, v float64) {
	if tr[series] == nil {
		tr[series] = map[int64]float64{}
	}
	tr[series][t] = v
}

// naive aggregates the model's samples of one series in [start, end] into
// buckets of step, the slow obvious way.
func (tr truth) naive(series string, start, end, step int64, f rollup.Func) ([]int64, []float64) {
	byBucket := map[int64]*rollup.Agg{}
	ts := slices.Sorted(mapKeys(tr[series]))
	for _, t := range ts {
		if t < start || t > end {
			continue
		}
		b := rollup.BucketStart(t, step)
		if byBucket[b] == nil {
			byBucket[b] = &rollup.Agg{}
		}
		byBucket[b].Add(t, tr[series][t])
	}
	keys := slices.Sorted(mapKeys(byBucket))
	vs := make([]float64, len(keys))
	for i, k := range keys {
		vs[i] = byBucket[k].Value(f)
	}
	return keys, vs
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

var base = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func testOptions(t testing.TB, dir string) node.Options {
	return node.Options{
		DataDir:          dir,
		Now:              func() time.Time { return base.Add(40 * 24 * time.Hour) },
		OutOfOrderWindow: 30 * 24 * time.Hour,
		RetentionRaw:     365 * 24 * time.Hour,
		FlushInterval:    time.Hour, // flushes happen when the test says so
		HeadChunkSamples: 16,
	}
}

func mustOpen(t testing.TB, o node.Options) *node.Node {
	t.Helper()
	n, err := node.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func seriesName(i int) string { return fmt.Sprintf("s%d", i) }

func sel(t testing.TB, s string) []*labels.Matcher {
	ms, err := labels.ParseSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func query(t testing.TB, n *node.Node, q model.Query) map[string]model.Series {
	t.Helper()
	out := map[string]model.Series{}
	_, err := n.Query(context.Background(), q, func(s model.Series) error {
		out[s.Labels.Get("series")] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRollups_MatchNaiveAggregation writes random data with out-of-order and
// duplicate samples across hours and days, flushing and restarting in
// between, and compares every downsampled answer with the naive model.
func TestRollups_MatchNaiveAggregation(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	n := mustOpen(t, testOptions(t, dir))
	defer func() { n.Close() }()
	tr := truth{}
	const nSeries = 4
	span := int64(3 * 24 * 3600_000)
	start := base.UnixMilli()
	newest := make([]int64, nSeries)
	for round := 0; round < 60; round++ {
		var batches []model.Batch
		for s := 0; s < nSeries; s++ {
			b := model.Batch{Labels: []labels.Label{{Name: labels.MetricName, Value: "m"}, {Name: "series", Value: seriesName(s)}}}
			for k := 0; k < 1+rng.IntN(40); k++ {
				var ts int64
				switch r := rng.IntN(10); {
				case r < 6: // in order
					newest[s] += 1 + rng.Int64N(10*60_000)
					ts = newest[s]
				case r < 8: // out of order, anywhere so far
					ts = rng.Int64N(newest[s] + 1)
				default: // duplicate of a recent timestamp
					ts = max(0, newest[s]-rng.Int64N(3)*1000)
				}
				ts = min(ts, span)
				v := float64(rng.IntN(2000)-1000) / 8 // exact binary fractions
				b.Ts = append(b.Ts, start+ts)
				b.Vs = append(b.Vs, v)
				tr.put(seriesName(s), start+ts, v)
			}
			batches = append(batches, b)
		}
		res, err := n.Write(context.Background(), batches)
		if err != nil {
			t.Fatal(err)
		}
		if res.Rejected != 0 {
			t.Fatalf("round %d: rejected %d: %+v", round, res.Rejected, res.Rejections)
		}
		switch rng.IntN(10) {
		case 0, 1, 2:
			if err := n.Flush(); err != nil {
				t.Fatal(err)
			}
		case 3:
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
			n = mustOpen(t, testOptions(t, dir))
		}
	}
	check := func(stage string) {
		for _, step := range []int64{rollup.Hour, 3 * rollup.Hour, rollup.Day, 60_000, 7 * 60_000} {
			for _, f := range []rollup.Func{rollup.FuncAvg, rollup.FuncSum, rollup.FuncMin, rollup.FuncMax, rollup.FuncCount, rollup.FuncFirst, rollup.FuncLast} {
				qs, qe := start+rng.Int64N(span/2), start+span/2+rng.Int64N(span/2)
				if rng.IntN(3) == 0 {
					qs, qe = start, start+span
				}
				got := query(t, n, model.Query{Matchers: sel(t, `m`), Start: qs, End: qe, Mode: model.ModeDownsample, Step: step, Downsample: f})
				for s := 0; s < nSeries; s++ {
					wantT, wantV := tr.naive(seriesName(s), qs, qe, step, f)
					g := got[seriesName(s)]
					if !slices.Equal(g.Ts, wantT) {
						t.Fatalf("%s: series %d step %d %s [%d,%d]: buckets %v want %v", stage, s, step, f, qs, qe, g.Ts, wantT)
					}
					for i := range wantV {
						if !approxEqual(g.Vs[i], wantV[i], f) {
							t.Fatalf("%s: series %d step %d %s bucket %d: got %v want %v", stage, s, step, f, g.Ts[i], g.Vs[i], wantV[i])
						}
					}
				}
			}
		}
		// Raw answers are exactly the model.
		got := query(t, n, model.Query{Matchers: sel(t, `m`), Start: start, End: start + span, Mode: model.ModeRaw})
		for s := 0; s < nSeries; s++ {
			wantT := slices.Sorted(mapKeys(tr[seriesName(s)]))
			g := got[seriesName(s)]
			if !slices.Equal(g.Ts, wantT) {
				t.Fatalf("%s: raw series %d: %d samples want %d", stage, s, len(g.Ts), len(wantT))
			}
			for i, ts := range wantT {
				if g.Vs[i] != tr[seriesName(s)][ts] {
					t.Fatalf("%s: raw series %d at %d: %v want %v", stage, s, ts, g.Vs[i], tr[seriesName(s)][ts])
				}
			}
		}
	}
	lastPoints := func(stage string) {
		for i := 0; i < 40; i++ {
			maxt := start + rng.Int64N(span+1)
			mint := maxt - rng.Int64N(span/2)
			got := query(t, n, model.Query{Matchers: sel(t, `m`), Start: mint, End: maxt, Mode: model.ModeLastPoint})
			for s := 0; s < nSeries; s++ {
				var wantT int64
				found := false
				for ts := range tr[seriesName(s)] {
					if ts >= mint && ts <= maxt && (!found || ts > wantT) {
						wantT, found = ts, true
					}
				}
				g := got[seriesName(s)]
				if !found {
					if len(g.Ts) != 0 {
						t.Fatalf("%s: last point of series %d in [%d,%d]: got %v, want none", stage, s, mint, maxt, g.Ts)
					}
					continue
				}
				if len(g.Ts) != 1 || g.Ts[0] != wantT || g.Vs[0] != tr[seriesName(s)][wantT] {
					t.Fatalf("%s: last point of series %d in [%d,%d]: got %v %v, want %d %v", stage, s, mint, maxt, g.Ts, g.Vs, wantT, tr[seriesName(s)][wantT])
				}
			}
		}
	}
	check("with head")
	lastPoints("with head")
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	check("flushed")
	lastPoints("flushed")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = mustOpen(t, testOptions(t, dir))
	check("reopened")
	lastPoints("reopened")
}

// approxEqual compares exactly, except sums and averages, whose float rounding
// depends on the order of additions.
func approxEqual(a, b float64, f rollup.Func) bool {
	if f != rollup.FuncSum && f != rollup.FuncAvg {
		return a == b
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}
