package node_test

import (
	"context"
	"maps"
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

// sameFloats is slices.Equal by bits: NaN equals NaN, -0 differs from 0.
func sameFloats(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

// TestQuery_LeftOpenHoursMatchRaw holds the left-open hours read from the
// rollups (Query.LeftOpenHours) to the raw fold, on data made to reach
// every case where the rollups cannot tell: a sample on every hour, few
// distinct values so that the sample on the hour often holds the hour's
// max or min, hours of one value, zeros of both signs, NaNs, hours with a
// single sample, empty hours; first with everything flushed, then with
// out-of-order head samples on top. A second series of smooth values
// (distinct, no NaN, no zero) checks that, flushed, the rollups answer:
// far fewer values read than samples.
func TestQuery_LeftOpenHoursMatchRaw(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	n, err := node.Open(node.Options{
		DataDir:          t.TempDir(),
		Now:              func() time.Time { return base.Add(10 * 24 * time.Hour) },
		OutOfOrderWindow: 30 * 24 * time.Hour,
		RetentionRaw:     365 * 24 * time.Hour,
		FlushInterval:    time.Hour, // flushes happen when the test says so
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()

	start := base.UnixMilli()
	hours := int64(60)
	truths := map[string]map[int64]float64{"edges": {}, "smooth": {}}
	edgeValue := func(h int64) float64 {
		switch r := rng.IntN(40); {
		case r == 0:
			return math.NaN()
		case r == 1:
			return math.Copysign(0, -1)
		case r == 2:
			return 0
		case h%7 == 3: // an hour of one value, but for the rare others above
			return 5
		default:
			return float64(rng.IntN(4)) / 2
		}
	}
	smoothValue := func(int64) float64 { return 1 + rng.Float64() }
	fill := func(truth map[int64]float64, value func(int64) float64, gaps bool) {
		for h := range hours {
			hs := start + h*rollup.Hour
			switch rng.IntN(10) {
			case 0: // empty hour
				if gaps {
					continue
				}
			case 1: // one sample, on the hour or not
				if gaps {
					truth[hs+rng.Int64N(2)*rng.Int64N(rollup.Hour)] = value(h)
					continue
				}
			}
			for t := hs; t < hs+rollup.Hour; t += 1 + rng.Int64N(10*60_000) {
				truth[t] = value(h)
			}
			truth[hs] = value(h) // a sample on the hour
		}
	}
	fill(truths["edges"], edgeValue, true)
	fill(truths["smooth"], smoothValue, false)
	write := func(kind string, m map[int64]float64) {
		t.Helper()
		ts := slices.Sorted(maps.Keys(m))
		vs := make([]float64, len(ts))
		for i, x := range ts {
			vs[i] = m[x]
		}
		ls := []labels.Label{{Name: "kind", Value: kind}, {Name: labels.MetricName, Value: "m"}}
		for lo := 0; lo < len(ts); lo += 1000 {
			hi := min(lo+1000, len(ts))
			res, err := n.Write(context.Background(), []model.Batch{{Labels: ls, Ts: ts[lo:hi], Vs: vs[lo:hi]}})
			if err != nil || res.Rejected != 0 {
				t.Fatalf("write: %v %+v", err, res.Rejections)
			}
		}
	}
	write("edges", truths["edges"])
	write("smooth", truths["smooth"])
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	check := func(stage, kind string, wantFewReads bool) {
		t.Helper()
		truth := truths[kind]
		ms := []*labels.Matcher{mustMatcher(t, labels.MatchEqual, "kind", kind)}
		ts := slices.Sorted(maps.Keys(truth))
		vs := make([]float64, len(ts))
		for i, x := range ts {
			vs[i] = truth[x]
		}
		var read, samples int64
		for _, step := range []int64{rollup.Hour, 2 * rollup.Hour, 5 * rollup.Hour, rollup.Day} {
			for _, f := range []rollup.Func{rollup.FuncMax, rollup.FuncMin, rollup.FuncLast, rollup.FuncCount} {
				for k := range 4 {
					// Whole windows as PromQL asks them, and ranges cut anywhere.
					qs := start + rng.Int64N(hours/2)*rollup.Hour + 1
					qe := qs - 1 + (1+rng.Int64N(hours/2))*step
					if k == 3 {
						qs, qe = start+rng.Int64N(hours*rollup.Hour/2), start+rng.Int64N(hours*rollup.Hour)
						if qe < qs {
							qs, qe = qe, qs
						}
					}
					q := model.Query{Matchers: ms, Start: qs, End: qe, Mode: model.ModeDownsample, Step: step, Offset: 1, Downsample: f}
					if !q.LeftOpenHours() {
						t.Fatalf("%+v is not a left-open hours query", q)
					}
					var got model.Series
					info, err := n.Query(context.Background(), q, func(s model.Series) error { got = s; return nil })
					if err != nil {
						t.Fatal(err)
					}
					wantT, wantV := naiveOffsetDownsample(ts, vs, qs, qe, step, 1, f)
					if !slices.Equal(got.Ts, wantT) || !sameFloats(got.Vs, wantV) {
						t.Fatalf("%s, %s: step %d %s [%d,%d]:\n got %v %v\nwant %v %v", stage, kind, step, f, qs, qe, got.Ts, got.Vs, wantT, wantV)
					}
					if info.Source != "rollup_1h" {
						t.Fatalf("%s: source %q", stage, info.Source)
					}
					read += info.Points
					for _, x := range ts {
						if x >= qs && x <= qe {
							samples++
						}
					}
				}
			}
		}
		t.Logf("%s, %s: %d values read for %d samples in range", stage, kind, read, samples)
		if wantFewReads && read*5 > samples {
			t.Fatalf("%s, %s: %d values read for %d samples: the rollups did not answer", stage, kind, read, samples)
		}
	}
	check("flushed", "edges", false)
	check("flushed", "smooth", true)

	// Out-of-order samples into flushed hours stay in the head.
	for kind, value := range map[string]func(int64) float64{"edges": edgeValue, "smooth": smoothValue} {
		extra := map[int64]float64{}
		for range 40 {
			x := start + rng.Int64N(hours*rollup.Hour)
			if rng.IntN(2) == 0 {
				x = start + rng.Int64N(hours)*rollup.Hour // on the hour
			}
			extra[x] = value(x / rollup.Hour)
			truths[kind][x] = extra[x]
		}
		write(kind, extra)
		check("head on top", kind, false)
	}
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	check("flushed again", "edges", false)
	check("flushed again", "smooth", true)
}
