package prom

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// queryable serves the reads of one query from the backend: the engine
// asks it for a Querier, whose Select calls read the series a selector
// needs. It is built per query because what it may do depends on the
// query (see plan), and it counts the samples the query reads.
type queryable struct {
	api *API
	// downsample: the statement's shape lets Select answer range functions
	// with one sample per window (no subqueries, no @, no extended range
	// selectors); set by the handler after parsing, before Exec.
	downsample bool
	// folds are the selectors whose series Select may fold by group (see
	// groupFolds), set with downsample.
	folds map[*labels.Matcher]*groupFold
	// loaded counts samples read by all Selects of the query.
	loaded atomic.Int64
	// memo, when not nil, shares Select answers between the evaluations
	// of one request (see selectmemo.go).
	memo *selectMemo
	// staleness is every backend query's MaxStaleness (the request's
	// max_staleness); fresh, when not nil, collects the answers'
	// FreshThroughMs.
	staleness int64
	fresh     *freshness
	// rawWindows is set when a downsampled Select answered some window
	// with raw samples (see selectDownsampled).
	rawWindows atomic.Bool
}

// Querier implements storage.Queryable.
func (q *queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{q: q, mint: mint, maxt: maxt}, nil
}

// querier implements storage.Querier over backend.Backend. The engine calls
// it from one goroutine; it holds no locks.
type querier struct {
	q          *queryable
	mint, maxt int64
	// warnings are the backend's (a coordinator's partial answers) since
	// the last Select returned them.
	warnings []string
}

// errTooManySamples is returned when a query reads more samples from
// storage than Options.MaxLoadedSamples.
type errTooManySamples struct{ limit int64 }

func (e errTooManySamples) Error() string {
	return fmt.Sprintf("query would read more than %d samples from storage; narrow the time range or the selectors", e.limit)
}

// storageError marks an error of the backend, so the handlers classify it
// with backend.Classify.
type storageError struct{ err error }

func (e storageError) Error() string { return e.err.Error() }
func (e storageError) Unwrap() error { return e.err }

func (q *queryable) charge(n int) error {
	if q.loaded.Add(int64(n)) > q.api.opts.MaxLoadedSamples {
		return errTooManySamples{q.api.opts.MaxLoadedSamples}
	}
	return nil
}

// Select implements storage.Querier.
func (qr *querier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	start, end := qr.mint, qr.maxt
	if hints != nil {
		start, end = hints.Start, hints.End
	}
	if start > end {
		return storage.EmptySeriesSet()
	}
	key := ""
	var fold *groupFold
	if len(ms) > 0 {
		fold = qr.q.folds[ms[0]]
	}
	if qr.q.memo != nil {
		key = selectKey(qr.q.downsample, fold, start, end, hints, ms)
		if m, ok := qr.q.memo.get(key); ok {
			if err := qr.q.charge(m.samples); err != nil {
				return storage.ErrSeriesSet(err)
			}
			if sortSeries && !slices.IsSortedFunc(m.list, compareSeries) {
				slices.SortFunc(m.list, compareSeries)
			}
			return &seriesSet{list: m.list, warnings: m.warnings}
		}
	}
	nms, err := qr.q.api.nodeMatchers(ms)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	loaded := qr.q.loaded.Load()
	var list []series
	if p, ok := qr.q.plan(hints); ok {
		p.fold = fold
		qr.q.api.stats.Inc(StatSelectsDownsampled)
		list, err = qr.selectDownsampled(ctx, nms, p)
	} else {
		qr.q.api.stats.Inc(StatSelectsRaw)
		list, err = qr.selectRaw(ctx, nms, start, end)
	}
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	// INVARIANT: the backend emits series in label order, which is the
	// order of labels.Compare; sort only if that ever stops being true.
	if sortSeries && !slices.IsSortedFunc(list, compareSeries) {
		slices.SortFunc(list, compareSeries)
	}
	set := &seriesSet{list: list, warnings: qr.warnings}
	qr.warnings = nil
	if key != "" {
		qr.q.memo.put(key, memoSet{list: list, samples: int(qr.q.loaded.Load() - loaded), warnings: set.warnings})
	}
	return set
}

func compareSeries(a, b series) int { return labels.Compare(a.lset, b.lset) }

// query runs nq on the backend, converting each series and charging its
// samples to the query.
func (qr *querier) query(ctx context.Context, nq model.Query, each func(lset labels.Labels, s model.Series) error) error {
	nq.LimitSeries = qr.q.api.cfg.Limits.MaxSeriesPerQuery
	nq.MaxStaleness = qr.q.staleness
	sb := labels.NewScratchBuilder(8)
	info, err := qr.q.api.b.Query(model.WithQueryAPI(ctx, model.QueryAPIPromQL), nq, func(s model.Series) error {
		if err := qr.q.charge(len(s.Ts)); err != nil {
			return err
		}
		sb.Reset()
		for _, l := range s.Labels {
			sb.Add(l.Name, l.Value)
		}
		return each(sb.Labels(), s)
	})
	qr.warnings = append(qr.warnings, info.Warnings...)
	if qr.q.fresh != nil {
		qr.q.fresh.add(info.FreshThroughMs)
	}
	var tooMany errTooManySamples
	switch {
	case err == nil:
	case errors.As(err, &tooMany):
		return err
	default:
		return storageError{err}
	}
	return nil
}

func (qr *querier) selectRaw(ctx context.Context, ms []*nlabels.Matcher, start, end int64) ([]series, error) {
	var out []series
	n := int64(0)
	err := qr.query(ctx, model.Query{Matchers: ms, Start: start, End: end, Mode: model.ModeRaw}, func(lset labels.Labels, s model.Series) error {
		n += int64(len(s.Ts))
		out = append(out, series{lset: lset, ts: s.Ts, vs: s.Vs})
		return nil
	})
	qr.q.api.stats.Add(StatSamplesRead, n)
	return out, err
}

// LabelValues implements storage.LabelQuerier.
func (qr *querier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	nms, err := qr.q.api.nodeMatchers(ms)
	if err != nil {
		return nil, nil, err
	}
	vals, err := qr.q.api.b.LabelValues(ctx, name, nms)
	if err != nil {
		return nil, nil, storageError{err}
	}
	if hints != nil && hints.Limit > 0 && len(vals) > hints.Limit {
		vals = vals[:hints.Limit]
	}
	return vals, nil, nil
}

// LabelNames implements storage.LabelQuerier.
func (qr *querier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	nms, err := qr.q.api.nodeMatchers(ms)
	if err != nil {
		return nil, nil, err
	}
	names, err := qr.q.api.b.LabelNames(ctx, nms)
	if err != nil {
		return nil, nil, storageError{err}
	}
	if hints != nil && hints.Limit > 0 && len(names) > hints.Limit {
		names = names[:hints.Limit]
	}
	return names, nil, nil
}

// Close implements storage.LabelQuerier.
func (*querier) Close() error { return nil }

// nodeMatchers converts PromQL matchers. Regular expressions keep PromQL's
// meaning: fully anchored, with '.' matching a newline too. Compiled
// regular expressions are cached, since dashboards repeat the same ones.
func (a *API) nodeMatchers(ms []*labels.Matcher) ([]*nlabels.Matcher, error) {
	out := make([]*nlabels.Matcher, len(ms))
	for i, m := range ms {
		var t nlabels.MatchType
		v := m.Value
		switch m.Type {
		case labels.MatchEqual:
			t = nlabels.MatchEqual
		case labels.MatchNotEqual:
			t = nlabels.MatchNotEqual
		case labels.MatchRegexp:
			t, v = nlabels.MatchRegexp, "(?s:"+v+")"
		case labels.MatchNotRegexp:
			t, v = nlabels.MatchNotRegexp, "(?s:"+v+")"
		default:
			return nil, fmt.Errorf("unknown matcher type %v", m.Type)
		}
		if t == nlabels.MatchEqual || t == nlabels.MatchNotEqual {
			nm, err := nlabels.NewMatcher(t, m.Name, v)
			if err != nil {
				return nil, err
			}
			out[i] = nm
			continue
		}
		nm, err := a.regexps.get(t, m.Name, v)
		if err != nil {
			return nil, err
		}
		out[i] = nm
	}
	return out, nil
}

// regexpCache holds compiled regular-expression matchers; it is safe for
// concurrent use and bounded (cleared when full).
type regexpCache struct {
	mu sync.Mutex
	m  map[regexpKey]*nlabels.Matcher
}

type regexpKey struct {
	t           nlabels.MatchType
	name, value string
}

const maxCachedRegexps = 512

func (c *regexpCache) get(t nlabels.MatchType, name, value string) (*nlabels.Matcher, error) {
	k := regexpKey{t, name, value}
	c.mu.Lock()
	m := c.m[k]
	c.mu.Unlock()
	if m != nil {
		return m, nil
	}
	m, err := nlabels.NewMatcher(t, name, value)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedRegexps {
		c.m = map[regexpKey]*nlabels.Matcher{}
	}
	c.m[k] = m
	c.mu.Unlock()
	return m, nil
}

// series is one series of a Select answer.
type series struct {
	lset labels.Labels
	ts   []int64
	vs   []float64
}

func (s *series) Labels() labels.Labels { return s.lset }

// Iterator implements storage.Series, reusing it when it is ours.
func (s *series) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	if si, ok := it.(*sampleIterator); ok {
		*si = sampleIterator{ts: s.ts, vs: s.vs, i: -1}
		return si
	}
	return &sampleIterator{ts: s.ts, vs: s.vs, i: -1}
}

// seriesSet implements storage.SeriesSet over a slice.
type seriesSet struct {
	list     []series
	i        int
	warnings []string
}

func (s *seriesSet) Next() bool {
	if s.i >= len(s.list) {
		return false
	}
	s.i++
	return true
}

func (s *seriesSet) At() storage.Series { return &s.list[s.i-1] }
func (*seriesSet) Err() error           { return nil }

// Warnings implements storage.SeriesSet: what the backend said is missing.
func (s *seriesSet) Warnings() annotations.Annotations {
	var a annotations.Annotations
	for _, w := range s.warnings {
		a.Add(errors.New(w))
	}
	return a
}

// sampleIterator implements chunkenc.Iterator over sorted float samples.
type sampleIterator struct {
	ts []int64
	vs []float64
	i  int // -1 before the first Next
}

func (s *sampleIterator) At() (int64, float64) { return s.ts[s.i], s.vs[s.i] }
func (s *sampleIterator) AtT() int64           { return s.ts[s.i] }
func (*sampleIterator) AtST() int64            { return 0 }
func (*sampleIterator) Err() error             { return nil }

// AtHistogram is never called: Next and Seek report floats only.
func (s *sampleIterator) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return s.ts[s.i], nil
}

// AtFloatHistogram is never called: Next and Seek report floats only.
func (s *sampleIterator) AtFloatHistogram(*histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return s.ts[s.i], nil
}

func (s *sampleIterator) Next() chunkenc.ValueType {
	if s.i+1 >= len(s.ts) {
		s.i = len(s.ts)
		return chunkenc.ValNone
	}
	s.i++
	return chunkenc.ValFloat
}

// millis is an int64 timestamp in milliseconds. NB: Seek spells its
// parameter type with it because go vet's stdmethods check takes any
// Seek(int64, ...) method for a broken io.Seeker.
type millis = int64

func (s *sampleIterator) Seek(t millis) chunkenc.ValueType {
	if s.i >= len(s.ts) {
		return chunkenc.ValNone
	}
	if s.i < 0 {
		s.i = 0
	}
	if s.ts[s.i] < t {
		s.i += sort.Search(len(s.ts)-s.i, func(k int) bool { return s.ts[s.i+k] >= t })
	}
	if s.i >= len(s.ts) {
		return chunkenc.ValNone
	}
	return chunkenc.ValFloat
}

// classifyStorage maps a backend error to the API's error types.
func classifyStorage(err error) *apiError {
	e := &apiError{msg: err.Error()}
	switch backend.Classify(err) {
	case backend.KindBadRequest:
		// The node refuses queries that would touch too many series.
		e.typ, e.status = errExec, 422
	case backend.KindOverloaded:
		e.typ, e.status, e.retryAfter = errUnavailable, 503, true
	case backend.KindTimeout:
		e.typ, e.status = errTimeout, 503
	default:
		e.typ, e.status, e.retryAfter = errUnavailable, 503, true
	}
	return e
}
