package node_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// offsetBucket is the start of the bucket [k*step+offset, (k+1)*step+offset)
// holding t, computed with floor division the slow obvious way.
func offsetBucket(t, step, offset int64) int64 {
	k := (t - offset) / step
	if (t-offset)%step != 0 && t-offset < 0 {
		k--
	}
	return k*step + offset
}

// naiveOffsetDownsample aggregates the samples of one series (sorted by
// time, no duplicates) in [start, end] into offset buckets.
func naiveOffsetDownsample(ts []int64, vs []float64, start, end, step, offset int64, f rollup.Func) ([]int64, []float64) {
	var outT []int64
	var outV []float64
	var agg rollup.Agg
	cur := int64(0)
	for i, t := range ts {
		if t < start || t > end {
			continue
		}
		b := offsetBucket(t, step, offset)
		if agg.Count > 0 && b != cur {
			outT, outV = append(outT, cur), append(outV, agg.Value(f))
			agg = rollup.Agg{}
		}
		cur = b
		agg.Add(t, vs[i])
	}
	if agg.Count > 0 {
		outT, outV = append(outT, cur), append(outV, agg.Value(f))
	}
	return outT, outV
}

// TestQuery_DownsampleOffsetMatchesNaive checks that Query.Offset shifts the
// downsampling buckets exactly, for data on and next to bucket edges, with
// samples in the head and in the store, for steps below and at multiples of
// an hour (where a non-zero offset must bypass the epoch-aligned rollups),
// and that the zero offset keeps today's answers and sources.
func TestQuery_DownsampleOffsetMatchesNaive(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	o := node.Options{
		DataDir:          t.TempDir(),
		Now:              func() time.Time { return base.Add(10 * 24 * time.Hour) },
		OutOfOrderWindow: 30 * 24 * time.Hour,
		RetentionRaw:     365 * 24 * time.Hour,
		FlushInterval:    time.Hour, // flushes happen when the test says so
		HeadChunkSamples: 16,
	}
	n, err := node.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()

	// Samples every few seconds to minutes over two days, plus samples
	// exactly on (and 1 ms either side of) the edges the queries use.
	start := base.UnixMilli()
	span := int64(2 * 24 * 3600_000)
	steps := []int64{1000, 7_000, 60_000, 5 * 60_000, rollup.Hour, 2 * rollup.Hour, rollup.Day}
	offsets := func(step int64) []int64 {
		return []int64{0, 1, step - 1, step / 2, -1, -step / 3, step + 17, 3 * step, rng.Int64N(step)}
	}
	truth := map[int64]float64{}
	for t := start; t < start+span; t += 1 + rng.Int64N(120_000) {
		truth[t] = float64(rng.IntN(4000)-2000) / 16 // exact binary fractions: sums are exact
	}
	for _, step := range steps {
		for _, off := range offsets(step) {
			edge := offsetBucket(start+rng.Int64N(span), step, off)
			for _, d := range []int64{-1, 0, 1} {
				if t := edge + d; t >= start && t < start+span {
					truth[t] = float64(rng.IntN(100)) / 4
				}
			}
		}
	}
	ts := slices.Sorted(func(yield func(int64) bool) {
		for t := range truth {
			if !yield(t) {
				return
			}
		}
	})
	vs := make([]float64, len(ts))
	for i, t := range ts {
		vs[i] = truth[t]
	}
	// Write in shuffled chunks (out of order inside the window), flushing
	// part of the data so answers merge store and head.
	ls := []labels.Label{{Name: labels.MetricName, Value: "m"}, {Name: "k", Value: "v"}}
	order := rng.Perm(len(ts)/500 + 1)
	for i, c := range order {
		lo, hi := c*500, min((c+1)*500, len(ts))
		if lo >= hi {
			continue
		}
		res, err := n.Write(context.Background(), []model.Batch{{Labels: ls, Ts: ts[lo:hi], Vs: vs[lo:hi]}})
		if err != nil || res.Rejected != 0 {
			t.Fatalf("write: %v %+v", err, res.Rejections)
		}
		if i == len(order)/2 {
			if err := n.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ms := []*labels.Matcher{mustMatcher(t, labels.MatchEqual, labels.MetricName, "m")}
	funcs := []rollup.Func{rollup.FuncAvg, rollup.FuncSum, rollup.FuncMin, rollup.FuncMax, rollup.FuncCount, rollup.FuncFirst, rollup.FuncLast}
	for _, step := range steps {
		for _, off := range offsets(step) {
			for range 3 {
				f := funcs[rng.IntN(len(funcs))]
				qs := start + rng.Int64N(span/2)
				qe := qs + rng.Int64N(span/2)
				if rng.IntN(3) == 0 { // whole buckets
					qs = offsetBucket(qs, step, off)
					qe = offsetBucket(qe, step, off) + step - 1
				}
				if rng.IntN(4) == 0 {
					qs, qe = start, start+span
				}
				q := model.Query{Matchers: ms, Start: qs, End: qe, Mode: model.ModeDownsample, Step: step, Downsample: f, Offset: off}
				var got model.Series
				info, err := n.Query(context.Background(), q, func(s model.Series) error { got = s; return nil })
				if err != nil {
					t.Fatal(err)
				}
				wantT, wantV := naiveOffsetDownsample(ts, vs, qs, qe, step, off, f)
				if !slices.Equal(got.Ts, wantT) {
					t.Fatalf("step %d offset %d %s [%d,%d]: buckets\n%v\nwant\n%v", step, off, f, qs, qe, got.Ts, wantT)
				}
				if !slices.Equal(got.Vs, wantV) {
					t.Fatalf("step %d offset %d %s [%d,%d]: values\n%v\nwant\n%v", step, off, f, qs, qe, got.Vs, wantV)
				}
				wantSource := "raw"
				if q.LeftOpenHours() {
					wantSource = "rollup_1h"
				} else if off%step == 0 && step%rollup.Day == 0 {
					wantSource = "rollup_1d"
				} else if off%step == 0 && step%rollup.Hour == 0 {
					wantSource = "rollup_1h"
				}
				if info.Source != wantSource || q.Source() != wantSource {
					t.Fatalf("step %d offset %d: source %q (Query.Source %q), want %q", step, off, info.Source, q.Source(), wantSource)
				}
			}
		}
	}
}

func mustMatcher(t *testing.T, mt labels.MatchType, name, value string) *labels.Matcher {
	t.Helper()
	m, err := labels.NewMatcher(mt, name, value)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestQuery_OffsetIgnoredOutsideDownsampling: raw and last-point answers do
// not depend on Offset, and a downsampling query without a step still fails
// validation instead of dividing by zero.
func TestQuery_OffsetIgnoredOutsideDownsampling(t *testing.T) {
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	n, err := node.Open(node.Options{DataDir: t.TempDir(), Now: func() time.Time { return base }})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ls := []labels.Label{{Name: labels.MetricName, Value: "m"}}
	tsIn := []int64{base.UnixMilli() - 3000, base.UnixMilli() - 2000, base.UnixMilli() - 1000}
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: ls, Ts: tsIn, Vs: []float64{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	ms := []*labels.Matcher{mustMatcher(t, labels.MatchEqual, labels.MetricName, "m")}
	for _, mode := range []model.QueryMode{model.ModeRaw, model.ModeLastPoint} {
		var plain, shifted model.Series
		q := model.Query{Matchers: ms, Start: tsIn[0], End: tsIn[2], Mode: mode}
		if _, err := n.Query(context.Background(), q, func(s model.Series) error { plain = s; return nil }); err != nil {
			t.Fatal(err)
		}
		q.Offset = 1234
		if _, err := n.Query(context.Background(), q, func(s model.Series) error { shifted = s; return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(plain.Ts, shifted.Ts) || !slices.Equal(plain.Vs, shifted.Vs) || len(plain.Ts) == 0 {
			t.Fatalf("mode %d: offset changed the answer: %v %v vs %v %v", mode, plain.Ts, plain.Vs, shifted.Ts, shifted.Vs)
		}
	}
	q := model.Query{Matchers: ms, Start: tsIn[0], End: tsIn[2], Mode: model.ModeDownsample, Downsample: rollup.FuncMax, Offset: 5}
	if _, err := n.Query(context.Background(), q, func(model.Series) error { return nil }); err == nil {
		t.Fatal("downsampling without a step was accepted")
	}
}
