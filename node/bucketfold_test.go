package node

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tributarydb/tributary/model/aggregate"
	"github.com/tributarydb/tributary/node/rollup"
)

// TestBucketFold_MatchesDownsampler folds random ascending samples (some
// before the epoch, some on bucket edges, with NaN, infinities and zeros
// of both signs) with random steps and offsets: the buckets and values
// must be bit for bit those of aggregate.Downsample, folded one sample at
// a time and in runs.
func TestBucketFold_MatchesDownsampler(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	funcs := []rollup.Func{rollup.FuncNone, rollup.FuncMin, rollup.FuncMax, rollup.FuncFirst, rollup.FuncLast,
		rollup.FuncSum, rollup.FuncAvg, rollup.FuncCount}
	for range 2000 {
		step := []int64{1, 7, 1000, 60_000, 3600_000}[rng.IntN(5)]
		off := rng.Int64N(2*step+1) - step // also negative and a whole step
		fn := funcs[rng.IntN(len(funcs))]
		var ts []int64
		var vs []float64
		tm := rng.Int64N(10*step+1) - 5*step
		for range rng.IntN(300) {
			switch rng.IntN(3) {
			case 0: // onto the next bucket edge
				tm += step - aggregate.Offset(tm-off, step)
			default:
				tm += 1 + rng.Int64N(step)
			}
			v := float64(rng.IntN(200)) / 4
			switch rng.IntN(30) {
			case 0:
				v = math.NaN()
			case 1:
				v = math.Inf(1 - 2*rng.IntN(2))
			case 2, 3, 4: // zeros of both signs: which one a fold keeps shows
				v = math.Copysign(0, float64(1-2*rng.IntN(2)))
			}
			ts, vs = append(ts, tm), append(vs, v)
		}
		wantT, wantV := aggregate.Downsample(ts, vs, step, off, fn)
		f := bucketFold{step: step, off: aggregate.Offset(off, step), fn: fn, expect: rng.IntN(3)}
		for i, tm := range ts {
			f.add(tm, vs[i])
		}
		gotT, gotV := f.result()
		if f.read != int64(len(ts)) || !slices.Equal(gotT, wantT) ||
			!slices.EqualFunc(gotV, wantV, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
			t.Fatalf("step %d off %d fn %v over %v %v:\ngot  %v %v (%d read)\nwant %v %v", step, off, fn, ts, vs, gotT, gotV, f.read, wantT, wantV)
		}
		// The same samples in runs of random lengths through addBatch.
		fb := bucketFold{step: step, off: aggregate.Offset(off, step), fn: fn, expect: rng.IntN(3)}
		for i := 0; i < len(ts); {
			j := min(len(ts), i+1+rng.IntN(70))
			fb.addBatch(ts[i:j], vs[i:j])
			i = j
		}
		gotT, gotV = fb.result()
		if fb.read != int64(len(ts)) || !slices.Equal(gotT, wantT) ||
			!slices.EqualFunc(gotV, wantV, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
			t.Fatalf("addBatch: step %d off %d fn %v over %v %v:\ngot  %v %v (%d read)\nwant %v %v", step, off, fn, ts, vs, gotT, gotV, fb.read, wantT, wantV)
		}
	}
}
