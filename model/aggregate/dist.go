package aggregate

import (
	"math"
	"slices"
)

// DistKind names a fold that needs every value it folds, not a
// rollup.Agg: no rollup can answer it, so a backend answers it from raw
// samples only.
type DistKind uint8

// The distribution folds.
const (
	// DistPercentile is the P-th percentile as OpenTSDB computes it (the
	// "legacy" estimate of Apache Commons Math's Percentile, which
	// OpenTSDB's p50 ... p999 use): over the n values sorted ascending,
	// pos = P*(n+1)/100; pos < 1 gives the smallest value, pos >= n the
	// largest, otherwise the values at 1-based ranks floor(pos) and
	// floor(pos)+1 are interpolated linearly by pos's fraction.
	DistPercentile DistKind = iota + 1
	// DistDev is the population standard deviation, sqrt(sum((x-mean)^2)
	// / n), OpenTSDB's dev (0 for one value).
	DistDev
)

// Dist is a distribution fold: a percentile or the standard deviation.
type Dist struct {
	Kind DistKind
	// P is the percentile, in (0, 100], with DistPercentile.
	P float64
}

// Value folds vs. It sorts vs in place (percentiles). NaN values are
// folded like any other (callers skip them where they must): a NaN makes
// dev NaN and sorts first. An empty vs is NaN.
func (d Dist) Value(vs []float64) float64 {
	n := len(vs)
	if n == 0 {
		return math.NaN()
	}
	switch d.Kind {
	case DistDev:
		// Welford's update, as OpenTSDB's dev folds, divided by n.
		mean, m2 := vs[0], 0.0
		for i := 1; i < n; i++ {
			x := vs[i]
			next := mean + (x-mean)/float64(i+1)
			m2 += (x - mean) * (x - next)
			mean = next
		}
		return math.Sqrt(m2 / float64(n))
	case DistPercentile:
		slices.SortFunc(vs, func(a, b float64) int {
			switch {
			case a < b || (math.IsNaN(a) && !math.IsNaN(b)):
				return -1
			case a > b || (math.IsNaN(b) && !math.IsNaN(a)):
				return 1
			}
			return 0
		})
		pos := d.P * float64(n+1) / 100
		if pos < 1 {
			return vs[0]
		}
		if pos >= float64(n) {
			return vs[n-1]
		}
		f := math.Floor(pos)
		lo, hi := vs[int(f)-1], vs[int(f)]
		return lo + (pos-f)*(hi-lo)
	}
	panic("BUG: aggregate.Dist of unknown kind")
}

// DownsampleDist folds samples sorted by time into buckets of width step
// shifted by off (BucketStart) with d, keeping the buckets that hold a
// sample. REQUIRES: step > 0.
func DownsampleDist(ts []int64, vs []float64, step, off int64, d Dist) ([]int64, []float64) {
	off = Offset(off, step)
	var ots []int64
	var ovs []float64
	buf := make([]float64, 0, 16)
	for i := 0; i < len(ts); {
		b := BucketStart(ts[i], step, off)
		buf = buf[:0]
		for ; i < len(ts) && BucketStart(ts[i], step, off) == b; i++ {
			buf = append(buf, vs[i])
		}
		ots, ovs = append(ots, b), append(ovs, d.Value(buf))
	}
	return ots, ovs
}
