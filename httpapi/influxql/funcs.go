package influxql

import (
	"math"
	"sort"
)

// The functions a SELECT may call, and how each is computed. Raw
// functions fold the points of a bucket, given in time order (points of
// one time in series order); pushdown functions also fold the partial
// aggregates the backend computes per series and bucket (count, sum,
// min, max), which is exact for them.
var (
	// aggregateFuncs are the supported functions.
	aggregateFuncs = map[string]bool{
		"count": true, "sum": true, "mean": true, "median": true, "min": true, "max": true,
		"first": true, "last": true, "spread": true, "stddev": true, "percentile": true,
	}
	// selectorFuncs return a point of the input: without GROUP BY
	// time() and alone in the statement, the answer carries its time.
	selectorFuncs = map[string]bool{"min": true, "max": true, "first": true, "last": true, "percentile": true}
	// pushdownNeeds lists the partial aggregates a function is computed
	// from when it is pushed down to the backend.
	pushdownNeeds = map[string][]string{
		"count": {"count"}, "sum": {"sum"}, "mean": {"sum", "count"},
		"min": {"min"}, "max": {"max"}, "spread": {"min", "max"},
	}
)

// tpoint is one input point of a function.
type tpoint struct {
	t int64
	v float64
}

// reduce computes function name (with percentile argument p) over pts,
// sorted by time. It returns the value, the time of the selected point
// (for selectors) and false when the function has no value (no points,
// or a percentile or stddev not defined for so few points).
func reduce(name string, p float64, pts []tpoint) (float64, int64, bool) {
	if len(pts) == 0 {
		return 0, 0, false
	}
	switch name {
	case "count":
		return float64(len(pts)), 0, true
	case "sum":
		return sum(pts), 0, true
	case "mean":
		return sum(pts) / float64(len(pts)), 0, true
	case "min", "max", "first", "last":
		sel := selectPoint(name, pts)
		return sel.v, sel.t, true
	case "spread":
		lo, hi := selectPoint("min", pts), selectPoint("max", pts)
		return hi.v - lo.v, 0, true
	case "median":
		vs := sortedValues(pts)
		n := len(vs)
		if n%2 == 1 {
			return vs[n/2], 0, true
		}
		lo, hi := vs[n/2-1], vs[n/2]
		return lo + (hi-lo)/2, 0, true
	case "stddev":
		return stddev(pts)
	case "percentile":
		return percentile(pts, p)
	}
	return 0, 0, false
}

func sum(pts []tpoint) float64 {
	var s float64
	for _, x := range pts {
		s += x.v
	}
	return s
}

// selectPoint returns the point min, max, first or last selects, with
// InfluxDB's ties: the earliest point among equal values, the larger
// value among equal times.
func selectPoint(name string, pts []tpoint) tpoint {
	best := pts[0]
	for _, x := range pts[1:] {
		var better bool
		switch name {
		case "min":
			better = x.v < best.v || (x.v == best.v && x.t < best.t)
		case "max":
			better = x.v > best.v || (x.v == best.v && x.t < best.t)
		case "first":
			better = x.t < best.t || (x.t == best.t && x.v > best.v)
		case "last":
			better = x.t > best.t || (x.t == best.t && x.v > best.v)
		}
		if better {
			best = x
		}
	}
	return best
}

func sortedValues(pts []tpoint) []float64 {
	vs := make([]float64, len(pts))
	for i, x := range pts {
		vs[i] = x.v
	}
	sort.Float64s(vs)
	return vs
}

// stddev is the sample standard deviation; it has no value for one
// point.
func stddev(pts []tpoint) (float64, int64, bool) {
	n := len(pts)
	if n < 2 {
		return 0, 0, false
	}
	mean := sum(pts) / float64(n)
	var ss float64
	for _, x := range pts {
		d := x.v - mean
		ss += d * d
	}
	return math.Sqrt(ss / float64(n-1)), 0, true
}

// percentile selects the point at rank floor(n*p/100 + 0.5) (1-based)
// of the points sorted by value, as InfluxDB does; it has no value when
// that rank is outside the points.
func percentile(pts []tpoint, p float64) (float64, int64, bool) {
	sorted := make([]tpoint, len(pts))
	copy(sorted, pts)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].v < sorted[j].v })
	i := int(math.Floor(float64(len(sorted))*p/100+0.5)) - 1
	if i < 0 || i >= len(sorted) {
		return 0, 0, false
	}
	return sorted[i].v, sorted[i].t, true
}

// partial is the aggregate of a bucket of one series the backend
// computed; partials of the series of a group merge exactly.
type partial struct {
	count    float64
	sum      float64
	min, max float64
	has      uint8 // which of count, sum, min, max are set (bits 0..3)
}

const (
	hasCount uint8 = 1 << iota
	hasSum
	hasMin
	hasMax
)

// set records the value of the partial aggregate fn.
func (p *partial) set(fn string, v float64) {
	switch fn {
	case "count":
		p.count, p.has = v, p.has|hasCount
	case "sum":
		p.sum, p.has = v, p.has|hasSum
	case "min":
		p.min, p.has = v, p.has|hasMin
	case "max":
		p.max, p.has = v, p.has|hasMax
	}
}

// merge folds q into p.
func (p *partial) merge(q *partial) {
	if q.has&hasCount != 0 {
		p.count += q.count
	}
	if q.has&hasSum != 0 {
		p.sum += q.sum
	}
	if q.has&hasMin != 0 && (p.has&hasMin == 0 || q.min < p.min) {
		p.min = q.min
	}
	if q.has&hasMax != 0 && (p.has&hasMax == 0 || q.max > p.max) {
		p.max = q.max
	}
	p.has |= q.has
}

// value computes a pushdown function from a merged partial.
func (p *partial) value(name string) (float64, bool) {
	switch name {
	case "count":
		return p.count, p.has&hasCount != 0
	case "sum":
		return p.sum, p.has&hasSum != 0
	case "mean":
		return p.sum / p.count, p.has&hasSum != 0 && p.has&hasCount != 0 && p.count > 0
	case "min":
		return p.min, p.has&hasMin != 0
	case "max":
		return p.max, p.has&hasMax != 0
	case "spread":
		return p.max - p.min, p.has&hasMin != 0 && p.has&hasMax != 0
	}
	return 0, false
}
