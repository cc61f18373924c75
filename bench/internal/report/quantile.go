package report

import (
	"cmp"
	"math"
)

// NearestRank returns the nearest-rank q-quantile (0 < q ≤ 1) of sorted,
// which must be in ascending order: the smallest element with at least a
// fraction q of the elements at or below it (q = 0.5 of four elements is
// the second, q = 1 the largest). ok is false when sorted is empty. The
// benchmarks' latency percentiles are all this one definition.
func NearestRank[T cmp.Ordered](sorted []T, q float64) (x T, ok bool) {
	if len(sorted) == 0 {
		return x, false
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)], true
}
