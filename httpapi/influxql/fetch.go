package influxql

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// column is the data of one field of one series: raw points, or (when
// the aggregation is pushed down) one partial aggregate per bucket, ts
// being the bucket starts. Times are in nanoseconds.
type column struct {
	ts    []int64
	vs    []float64
	parts []partial
}

// inSeries is one InfluxDB series of a source: a measurement and tag set
// with its fields.
type inSeries struct {
	measurement string
	tags        labels.Labels
	key         string
	cols        map[string]*column
}

// source collects the series of one measurement as the backend emits
// them, one Tributary series (one field) at a time.
type source struct {
	ex          *executor
	measurement string
	byKey       map[string]*inSeries
}

func newSource(ex *executor, m string) *source {
	return &source{ex: ex, measurement: m, byKey: map[string]*inSeries{}}
}

// series returns the series of tags, adding it.
func (s *source) series(tags labels.Labels) *inSeries {
	k := tagKey(tags)
	in := s.byKey[k]
	if in == nil {
		in = &inSeries{measurement: s.measurement, tags: tags, key: k, cols: map[string]*column{}}
		s.byKey[k] = in
	}
	return in
}

// list returns the series sorted by their tags.
func (s *source) list() []*inSeries {
	out := make([]*inSeries, 0, len(s.byKey))
	for _, in := range s.byKey {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// account adds n points to the statement's count and fails past
// MaxPoints, with InfluxDB's words.
func (ex *executor) account(n int) error {
	ex.points += int64(n)
	if max := ex.api.opts.MaxPoints; ex.points > max {
		return fmt.Errorf("max-select-point limit exceeded: (%d/%d); narrow the time range, add a GROUP BY time() or use fewer series", ex.points, max)
	}
	return nil
}

// msRange converts the plan's inclusive ns range to inclusive ms.
func (p *plan) msRange() (int64, int64) {
	const ms = int64(time.Millisecond)
	start := p.start / ms
	if p.start%ms > 0 {
		start++ // ceil
	}
	end := p.end / ms
	if p.end%ms < 0 {
		end-- // floor
	}
	return start, end
}

// baseQuery is the backend query of the plan's fields of measurement m.
func (p *plan) baseQuery(ex *executor, m string) model.Query {
	start, end := p.msRange()
	ms := append([]*labels.Matcher{namesMatcher(m, p.fields), dbMatcher(p.db)}, p.matchers...)
	return model.Query{Matchers: ms, Start: start, End: end, LimitSeries: ex.api.cfg.Limits.MaxSeriesPerQuery}
}

// lastPointNear is where a last-row read with no upper time bound ends
// when no point of its series lies later (boundLastPoint).
const lastPointNear = time.Hour

// errLater stops the count of boundLastPoint at the first later point.
var errLater = errors.New("a point after the near end")

// boundLastPoint returns the last-point read q (open-ended: it ends at
// InfluxQL's open end, in 2262) ending lastPointNear past the clock when
// none of its series has a point after that, else unchanged. The node
// looks for the newest sample from the range's end backwards, one stored
// rollup pack of 32 days after the other: from 2262 that is thousands of
// reads a series, whereas counting the points after the near end is one
// range read a series, and exact.
func (ex *executor) boundLastPoint(q model.Query) (model.Query, error) {
	near := ex.now.Add(lastPointNear).UnixMilli()
	if near >= q.End || near < q.Start {
		return q, nil
	}
	cq := q
	cq.Mode, cq.Downsample = model.ModeDownsample, rollup.FuncCount
	cq.Start = near + 1
	cq.Step, cq.Offset = cq.End-cq.Start+1, cq.Start // one bucket
	info, err := ex.api.b.Query(ex.ctx, cq, func(s model.Series) error {
		for _, v := range s.Vs {
			if v > 0 {
				return errLater
			}
		}
		return nil
	})
	ex.warn(info)
	switch {
	case errors.Is(err, errLater):
		return q, nil
	case err != nil:
		return q, backendError(err)
	}
	q.End = near
	return q, nil
}

// fetch reads the series of measurement m the plan needs: raw points,
// last points, or per-bucket partial aggregates.
func (ex *executor) fetch(p *plan, m string) ([]*inSeries, error) {
	src := newSource(ex, m)
	q := p.baseQuery(ex, m)
	if q.End < q.Start {
		return nil, nil
	}
	var err error
	switch {
	case p.pushdown():
		err = ex.fetchPartials(p, src, q)
	case p.lastPoint():
		q.Mode = model.ModeLastPoint
		if p.openEnd {
			if q, err = ex.boundLastPoint(q); err != nil {
				return nil, err
			}
		}
		err = ex.fetchRaw(src, q)
	default:
		q.Mode = model.ModeRaw
		err = ex.fetchRaw(src, q)
	}
	if err != nil {
		return nil, err
	}
	list := src.list()
	out := list[:0]
	for _, in := range list {
		if p.cond.matchSeries(in.tags) {
			out = append(out, in)
		}
	}
	return out, nil
}

// fetchRaw reads raw (or last) points.
func (ex *executor) fetchRaw(src *source, q model.Query) error {
	info, err := ex.api.b.Query(ex.ctx, q, func(s model.Series) error {
		if err := ex.account(len(s.Ts)); err != nil {
			return err
		}
		field, ok := fieldOf(s.Labels.Get(labels.MetricName), src.measurement)
		if !ok {
			return nil
		}
		c := &column{ts: make([]int64, len(s.Ts)), vs: append([]float64(nil), s.Vs...)}
		for i, t := range s.Ts {
			c.ts[i] = t * int64(time.Millisecond)
		}
		src.series(tagsOf(s.Labels)).cols[field] = c
		return nil
	})
	ex.warn(info)
	return backendError(err)
}

// rollupFuncs maps partial aggregate names to backend functions.
var rollupFuncs = map[string]rollup.Func{"count": rollup.FuncCount, "sum": rollup.FuncSum, "min": rollup.FuncMin, "max": rollup.FuncMax}

// fetchPartials asks the backend for every partial aggregate the plan's
// functions need, per series and bucket.
func (ex *executor) fetchPartials(p *plan, src *source, q model.Query) error {
	q.Mode = model.ModeDownsample
	if p.interval > 0 {
		q.Step = p.interval / int64(time.Millisecond)
		q.Offset = p.offset / int64(time.Millisecond)
	} else {
		// One bucket holding the whole range.
		q.Step = q.End - q.Start + 1
		q.Offset = q.Start
	}
	needs := map[string]bool{}
	for _, c := range p.calls {
		for _, n := range pushdownNeeds[c.Name] {
			needs[n] = true
		}
	}
	for _, fn := range []string{"count", "sum", "min", "max"} {
		if !needs[fn] {
			continue
		}
		q.Downsample = rollupFuncs[fn]
		info, err := ex.api.b.Query(ex.ctx, q, func(s model.Series) error {
			return ex.addPartials(src, s, fn)
		})
		ex.warn(info)
		if err != nil {
			return backendError(err)
		}
	}
	return nil
}

// addPartials records the buckets of one series for partial fn.
func (ex *executor) addPartials(src *source, s model.Series, fn string) error {
	field, ok := fieldOf(s.Labels.Get(labels.MetricName), src.measurement)
	if !ok {
		return nil
	}
	in := src.series(tagsOf(s.Labels))
	c := in.cols[field]
	if c == nil {
		if err := ex.account(len(s.Ts)); err != nil {
			return err
		}
		c = &column{}
		in.cols[field] = c
	}
	// The buckets of every function are those holding a sample, so the
	// same for all; merge by time all the same.
	j := 0
	for i, t := range s.Ts {
		tn := t * int64(time.Millisecond)
		for j < len(c.ts) && c.ts[j] < tn {
			j++
		}
		if j == len(c.ts) || c.ts[j] != tn {
			c.ts = append(c.ts, 0)
			c.parts = append(c.parts, partial{})
			copy(c.ts[j+1:], c.ts[j:])
			copy(c.parts[j+1:], c.parts[j:])
			c.ts[j], c.parts[j] = tn, partial{}
		}
		c.parts[j].set(fn, s.Vs[i])
	}
	return nil
}
