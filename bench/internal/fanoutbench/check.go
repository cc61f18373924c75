package fanoutbench

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// dataSeries is one series as the load generator wrote it: labels and its
// points in time order.
type dataSeries struct {
	labels map[string]string
	ts     []int64
	vs     []float64
}

// querySpec is a query the benchmark sends and can also answer itself,
// naively, from the written points. Matchers are label equalities only.
type querySpec struct {
	name       string
	match      map[string]string // label → value, all must be equal
	startMs    int64             // inclusive
	endMs      int64             // inclusive
	mode       tributaryv1.QueryMode
	stepMs     int64
	downsample tributaryv1.Aggregate
	aggregate  tributaryv1.Aggregate // across series; unspecified: none
	groupBy    []string
}

// request is the gRPC form of q.
func (q querySpec) request() *tributaryv1.QueryRequest {
	req := &tributaryv1.QueryRequest{StartMs: q.startMs, EndMs: q.endMs, Mode: q.mode, StepMs: q.stepMs,
		Downsample: q.downsample, Aggregate: q.aggregate, GroupBy: q.groupBy}
	names := make([]string, 0, len(q.match))
	for n := range q.match {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		req.Matchers = append(req.Matchers, &tributaryv1.Matcher{Type: tributaryv1.Matcher_EQUAL, Name: n, Value: q.match[n]})
	}
	return req
}

// expSeries is one series (or group) of an expected answer.
type expSeries struct {
	key string // labelKey of its labels
	ts  []int64
	vs  []float64
}

// labelKey renders labels as a sorted, unambiguous string.
func labelKey(ls map[string]string) string {
	names := make([]string, 0, len(ls))
	for n := range ls {
		names = append(names, n)
	}
	slices.Sort(names)
	var sb strings.Builder
	sb.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%s=%q", n, ls[n])
	}
	sb.WriteByte('}')
	return sb.String()
}

func matches(ls, match map[string]string) bool {
	for n, v := range match {
		if ls[n] != v {
			return false
		}
	}
	return true
}

// expected answers q from the written data, the way one node holding all
// of it would: the series sorted by label key.
func expected(data []dataSeries, q querySpec) ([]expSeries, error) {
	var out []expSeries
	for _, s := range data {
		if !matches(s.labels, q.match) {
			continue
		}
		e := expSeries{key: labelKey(s.labels)}
		switch q.mode {
		case tributaryv1.QueryMode_QUERY_MODE_RAW:
			for i, t := range s.ts {
				if t >= q.startMs && t <= q.endMs {
					e.ts, e.vs = append(e.ts, t), append(e.vs, s.vs[i])
				}
			}
		case tributaryv1.QueryMode_QUERY_MODE_LAST_POINT:
			for i := len(s.ts) - 1; i >= 0; i-- {
				if s.ts[i] <= q.endMs && (q.startMs == 0 || s.ts[i] >= q.startMs) {
					e.ts, e.vs = []int64{s.ts[i]}, []float64{s.vs[i]}
					break
				}
			}
		case tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE:
			var err error
			if e.ts, e.vs, err = downsample(s.ts, s.vs, q); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("query %s: mode %v is not checked by the benchmark", q.name, q.mode)
		}
		if len(e.ts) > 0 {
			out = append(out, e)
		}
	}
	if q.aggregate != tributaryv1.Aggregate_AGGREGATE_UNSPECIFIED {
		var err error
		if out, err = aggregateGroups(data, out, q); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b expSeries) int { return strings.Compare(a.key, b.key) })
	return out, nil
}

// downsample buckets one series' points in [startMs, endMs] by stepMs
// (bucket start = a multiple of stepMs), leaving empty buckets out.
func downsample(ts []int64, vs []float64, q querySpec) ([]int64, []float64, error) {
	if q.stepMs <= 0 {
		return nil, nil, fmt.Errorf("query %s: downsample needs a positive step, got %d", q.name, q.stepMs)
	}
	var outT []int64
	var outV []float64
	var bucket []float64
	flush := func(b int64) error {
		if len(bucket) == 0 {
			return nil
		}
		v, err := reduce(q.downsample, bucket)
		if err != nil {
			return fmt.Errorf("query %s: %w", q.name, err)
		}
		outT, outV = append(outT, b), append(outV, v)
		bucket = bucket[:0]
		return nil
	}
	cur := int64(math.MinInt64)
	for i, t := range ts {
		if t < q.startMs || t > q.endMs {
			continue
		}
		b := t - t%q.stepMs
		if b != cur {
			if err := flush(cur); err != nil {
				return nil, nil, err
			}
			cur = b
		}
		bucket = append(bucket, vs[i])
	}
	if err := flush(cur); err != nil {
		return nil, nil, err
	}
	return outT, outV, nil
}

// reduce applies fn to the values of one bucket, in time order.
func reduce(fn tributaryv1.Aggregate, vs []float64) (float64, error) {
	switch fn {
	case tributaryv1.Aggregate_AGGREGATE_AVG:
		sum := 0.0
		for _, v := range vs {
			sum += v
		}
		return sum / float64(len(vs)), nil
	case tributaryv1.Aggregate_AGGREGATE_SUM:
		sum := 0.0
		for _, v := range vs {
			sum += v
		}
		return sum, nil
	case tributaryv1.Aggregate_AGGREGATE_MIN:
		return slices.Min(vs), nil
	case tributaryv1.Aggregate_AGGREGATE_MAX:
		return slices.Max(vs), nil
	case tributaryv1.Aggregate_AGGREGATE_COUNT:
		return float64(len(vs)), nil
	case tributaryv1.Aggregate_AGGREGATE_FIRST:
		return vs[0], nil
	case tributaryv1.Aggregate_AGGREGATE_LAST:
		return vs[len(vs)-1], nil
	}
	return 0, fmt.Errorf("aggregate %v is not checked by the benchmark", fn)
}

// aggregateGroups combines per-series answers across series: grouped by the
// values of q.groupBy (the group's labels are those alone), each bucket is
// reduced with q.aggregate. Only MAX, MIN and SUM are accepted, whose result
// does not depend on the order in which a server combines the series.
func aggregateGroups(data []dataSeries, per []expSeries, q querySpec) ([]expSeries, error) {
	switch q.aggregate {
	case tributaryv1.Aggregate_AGGREGATE_MAX, tributaryv1.Aggregate_AGGREGATE_MIN, tributaryv1.Aggregate_AGGREGATE_SUM:
	default:
		return nil, fmt.Errorf("query %s: cross-series %v is not checked by the benchmark", q.name, q.aggregate)
	}
	labelsOf := map[string]map[string]string{}
	for _, s := range data {
		labelsOf[labelKey(s.labels)] = s.labels
	}
	type group struct {
		key    string
		byTime map[int64][]float64
	}
	groups := map[string]*group{}
	for _, s := range per {
		gl := map[string]string{}
		for _, n := range q.groupBy {
			if v := labelsOf[s.key][n]; v != "" {
				gl[n] = v
			}
		}
		k := labelKey(gl)
		g := groups[k]
		if g == nil {
			g = &group{key: k, byTime: map[int64][]float64{}}
			groups[k] = g
		}
		for i, t := range s.ts {
			g.byTime[t] = append(g.byTime[t], s.vs[i])
		}
	}
	out := make([]expSeries, 0, len(groups))
	for _, g := range groups {
		e := expSeries{key: g.key}
		for t := range g.byTime {
			e.ts = append(e.ts, t)
		}
		slices.Sort(e.ts)
		for _, t := range e.ts {
			v, err := reduce(q.aggregate, g.byTime[t])
			if err != nil {
				return nil, err
			}
			e.vs = append(e.vs, v)
		}
		out = append(out, e)
	}
	return out, nil
}

// avgTolerance is the relative difference allowed for averages: a server
// may sum a bucket's values in another order (partial sums from a replica
// and an edge), which changes the last bit. Everything else must be exact.
const avgTolerance = 1e-9

// compare checks a server's answer against the expected one and returns an
// error naming the first difference.
func compare(q querySpec, got nodeclient.Answer, want []expSeries) error {
	gotByKey := make(map[string]nodeclient.Series, len(got.Series))
	for _, s := range got.Series {
		ls := make(map[string]string, len(s.Labels))
		for _, l := range s.Labels {
			ls[l.GetName()] = l.GetValue()
		}
		k := labelKey(ls)
		if _, dup := gotByKey[k]; dup {
			return fmt.Errorf("query %s: series %s answered twice", q.name, k)
		}
		gotByKey[k] = s
	}
	var errs []error
	for _, w := range want {
		g, ok := gotByKey[w.key]
		if !ok {
			errs = append(errs, fmt.Errorf("query %s: series %s missing from the answer", q.name, w.key))
			continue
		}
		delete(gotByKey, w.key)
		if err := compareSeries(q, w, g); err != nil {
			errs = append(errs, err)
		}
	}
	for k := range gotByKey {
		errs = append(errs, fmt.Errorf("query %s: unexpected series %s in the answer", q.name, k))
	}
	if len(errs) > 3 {
		errs = append(errs[:3], fmt.Errorf("and %d more differences", len(errs)-3))
	}
	return errors.Join(errs...)
}

func compareSeries(q querySpec, w expSeries, g nodeclient.Series) error {
	if len(g.TimestampsMs) != len(w.ts) {
		return fmt.Errorf("query %s: series %s has %d points, want %d", q.name, w.key, len(g.TimestampsMs), len(w.ts))
	}
	tol := 0.0
	if q.downsample == tributaryv1.Aggregate_AGGREGATE_AVG && q.mode == tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE {
		tol = avgTolerance
	}
	for i, t := range w.ts {
		if g.TimestampsMs[i] != t {
			return fmt.Errorf("query %s: series %s point %d at %d ms, want %d ms", q.name, w.key, i, g.TimestampsMs[i], t)
		}
		gv, wv := g.Values[i], w.vs[i]
		if gv == wv || tol > 0 && math.Abs(gv-wv) <= tol*math.Max(math.Abs(gv), math.Abs(wv)) {
			continue
		}
		return fmt.Errorf("query %s: series %s at %d ms is %v, want %v", q.name, w.key, t, gv, wv)
	}
	return nil
}
