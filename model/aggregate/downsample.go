package aggregate

import "github.com/tributarydb/tributary/node/rollup"

// Offset reduces a bucket offset to [0, step): only the offset modulo the
// step matters. It is 0 when step is not positive.
func Offset(off, step int64) int64 {
	if step <= 0 {
		return 0
	}
	off %= step
	if off < 0 {
		off += step
	}
	return off
}

// BucketStart returns the start of the bucket holding t, of the buckets
// [k*step+off, (k+1)*step+off) for every integer k (also for negative t).
// REQUIRES: step > 0.
func BucketStart(t, step, off int64) int64 {
	off = Offset(off, step)
	return rollup.BucketStart(t-off, step) + off
}

// Downsampler folds the samples of one series, added in time order, into
// buckets (BucketStart) with a rollup function, and keeps the buckets
// that hold a sample. The zero value is not usable; see NewDownsampler.
type Downsampler struct {
	step, off int64
	fn        rollup.Func
	cur       int64 // start of the open bucket, when agg holds a sample
	agg       rollup.Agg
	ts        []int64
	vs        []float64
	expect    int // buckets to allocate for at the first close
}

// NewDownsampler returns a Downsampler for buckets of width step shifted
// by off, folded with fn. REQUIRES: step > 0.
func NewDownsampler(step, off int64, fn rollup.Func) *Downsampler {
	return &Downsampler{step: step, off: Offset(off, step), fn: fn}
}

// Expect says the result will hold about n buckets, so that a caller who
// knows how many buckets its range spans allocates the result once, when
// the first bucket closes (a series without samples allocates nothing).
func (d *Downsampler) Expect(n int) { d.expect = n }

// Add folds one sample. REQUIRES: t is not before the previous sample's.
func (d *Downsampler) Add(t int64, v float64) {
	b := rollup.BucketStart(t-d.off, d.step) + d.off
	if d.agg.Count > 0 && b != d.cur {
		d.close()
	}
	d.cur = b
	d.agg.Add(t, v)
}

func (d *Downsampler) close() {
	if d.ts == nil && d.expect > 0 {
		d.ts, d.vs = make([]int64, 0, d.expect), make([]float64, 0, d.expect)
	}
	d.ts, d.vs = append(d.ts, d.cur), append(d.vs, d.agg.Value(d.fn))
	d.agg = rollup.Agg{}
}

// Result returns the start and the value of every bucket that holds a
// sample, in time order, and resets d for another series.
func (d *Downsampler) Result() ([]int64, []float64) {
	if d.agg.Count > 0 {
		d.close()
	}
	ts, vs := d.ts, d.vs
	d.ts, d.vs = nil, nil
	return ts, vs
}

// Downsample folds samples sorted by time into buckets of width step
// shifted by off with fn; see Downsampler. REQUIRES: step > 0.
func Downsample(ts []int64, vs []float64, step, off int64, fn rollup.Func) ([]int64, []float64) {
	d := NewDownsampler(step, off, fn)
	for i, t := range ts {
		d.Add(t, vs[i])
	}
	return d.Result()
}
