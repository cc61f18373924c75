package opentsdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/model/aggregate"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// maxSubQueries bounds the sub-queries of one /api/query request.
const maxSubQueries = 64

// flexText is a JSON string or number kept as text (query times).
type flexText struct {
	set  bool
	text string
}

func (f *flexText) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		return nil
	case b[0] == '"':
		f.set = true
		return json.Unmarshal(b, &f.text)
	case b[0] == '-' || b[0] >= '0' && b[0] <= '9':
		f.set, f.text = true, string(b)
		if bytes.ContainsAny(b, "eE") {
			v, err := strconv.ParseFloat(f.text, 64)
			if err != nil || v < 0 || v > maxMsTimestamp {
				return fmt.Errorf("time %.32s is out of range", f.text)
			}
			f.text = strconv.FormatInt(int64(v), 10)
		}
		return nil
	}
	return fmt.Errorf("a time must be a number or a string, not %.32s", string(b))
}

// queryRequest is the body of POST /api/query.
type queryRequest struct {
	Start        flexText   `json:"start"`
	End          flexText   `json:"end"`
	Queries      []subQuery `json:"queries"`
	MsResolution bool       `json:"msResolution"`
	ShowQuery    bool       `json:"showQuery"`
	Timezone     string     `json:"timezone"`
	UseCalendar  bool       `json:"useCalendar"`
	Delete       bool       `json:"delete"`
	// GlobalAnnotations adds the global annotations of the range to every
	// series of the answer.
	GlobalAnnotations bool `json:"globalAnnotations"`
	// MaxStaleness is the staleness allowance of a coordinator's answer
	// (model.Query.MaxStaleness): a duration such as "30s"; "0": always
	// fresh; absent: the coordinator's default.
	MaxStaleness flexText `json:"maxStaleness"`
}

// flag reads a boolean query parameter the way OpenTSDB does: present
// means true unless its value is "false" or "0".
func flag(q url.Values, names ...string) bool {
	for _, n := range names {
		if q.Has(n) {
			v := strings.ToLower(q.Get(n))
			return v != "false" && v != "0"
		}
	}
	return false
}

// outSeries is one series (or group) of an answer.
type outSeries struct {
	metric  string
	tags    map[string]string
	aggTags []string
	ts      []int64
	vs      []float64
	collate rollup.Func // combines points of one second in second resolution
	query   *subQuery
	// globals, when not nil, are the global annotations of the range
	// (globalAnnotations asked for).
	globals []annotation
}

// query serves /api/query: it reads the request (readQueryRequest), its
// time range (queryRange) and compiles its sub-queries (compilePlans)
// before anything is asked of the backend, then executes them in order
// within one points budget.
func (a *api) query(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	a.cfg.Stats.Inc("opentsdb_query_requests")
	q := r.URL.Query()
	req, err := a.readQueryRequest(r, q)
	if err != nil {
		a.fail(w, err)
		return
	}
	ms := req.MsResolution || flag(q, "ms", "msResolution")
	arrays := flag(q, "arrays")
	showQuery := req.ShowQuery || flag(q, "show_query", "showQuery")
	if req.Delete {
		a.badRequest(w, "delete is not supported")
		return
	}
	loc, start, end, err := a.queryRange(&req)
	if err != nil {
		a.fail(w, err)
		return
	}
	plans, err := compilePlans(&req, loc)
	if err != nil {
		a.fail(w, err)
		return
	}
	st := stale{fresh: math.MaxInt64}
	if req.MaxStaleness.set {
		if st.ms, err = parseStaleness(req.MaxStaleness.text); err != nil {
			a.fail(w, badRequestf("maxStaleness: %v", err))
			return
		}
	}
	budget := a.maxQueryPoints
	var out []outSeries
	for _, p := range plans {
		res, err := a.execute(ctx, p, start, end, &budget, &st)
		if err != nil {
			a.fail(w, err)
			return
		}
		if showQuery {
			echo := p.sq
			for i := range res {
				res[i].query = &echo
			}
		}
		out = append(out, res...)
	}
	if req.GlobalAnnotations {
		globals, err := a.annotationsIn(ctx, "", start, end)
		if err != nil {
			a.fail(w, err)
			return
		}
		for i := range out {
			out[i].globals = append([]annotation{}, globals...)
		}
	}
	if st.fresh != math.MaxInt64 {
		httpapi.SetFreshThrough(w, st.fresh)
	}
	writeRaw(w, http.StatusOK, appendAnswer(nil, out, ms, arrays))
}

// stale is a request's staleness allowance (ms, as
// model.Query.MaxStaleness) and the freshness of its answers so far (the
// oldest QueryInfo.FreshThroughMs; math.MaxInt64: none said).
type stale struct{ ms, fresh int64 }

func (st *stale) add(info model.QueryInfo) {
	if info.FreshThroughMs != 0 {
		st.fresh = min(st.fresh, info.FreshThroughMs)
	}
}

// parseStaleness reads maxStaleness (max_staleness in a GET): 0 (with or
// without a unit) is model.AlwaysFresh, anything else an OpenTSDB
// duration ("30s", "5m").
func parseStaleness(s string) (int64, error) {
	num := strings.TrimRight(s, "abcdefghijklmnopqrstuvwxyz")
	if v, err := strconv.ParseFloat(num, 64); err == nil && v == 0 && (num == s || unitMs[s[len(num):]] != 0) {
		return model.AlwaysFresh, nil
	}
	ms, calendar, err := parseDuration(s)
	if err == nil && calendar {
		err = fmt.Errorf("duration %.32q: a staleness has no calendar alignment", s)
	}
	return ms, err
}

// badRequestf is the error of a request found wrong before it is run.
func badRequestf(format string, args ...any) error {
	return httpapi.Errorf(http.StatusBadRequest, format, args...)
}

// readQueryRequest reads a query from a POST body, or from the parameters
// of a GET (q).
func (a *api) readQueryRequest(r *http.Request, q url.Values) (queryRequest, error) {
	var req queryRequest
	if r.Method == http.MethodPost {
		return req, a.readRequest(r, "query", &req, nil)
	}
	if q.Has("tsuids") {
		return req, badRequestf("queries by tsuids are not supported: query by metric and tags (m=)")
	}
	if q.Has("exp") {
		return req, badRequestf("expressions are not supported")
	}
	req.Start = flexText{q.Has("start"), q.Get("start")}
	req.End = flexText{q.Has("end") && q.Get("end") != "", q.Get("end")}
	req.Timezone = q.Get("tz")
	if req.Timezone == "" {
		req.Timezone = q.Get("timezone")
	}
	req.UseCalendar = flag(q, "use_calendar")
	req.Delete = flag(q, "delete")
	req.GlobalAnnotations = globalAnnotationsParam(q)
	req.MaxStaleness = flexText{q.Has("max_staleness"), q.Get("max_staleness")}
	for i, m := range q["m"] {
		sq, err := parseM(m)
		if err != nil {
			return req, badRequestf("%v", err)
		}
		sq.Index = i
		req.Queries = append(req.Queries, sq)
	}
	return req, nil
}

// queryRange resolves the request's time zone and its [start, end] in
// ms (end defaults to now).
func (a *api) queryRange(req *queryRequest) (loc *time.Location, start, end int64, err error) {
	loc = time.UTC
	if req.Timezone != "" {
		if loc, err = time.LoadLocation(req.Timezone); err != nil {
			return nil, 0, 0, badRequestf("timezone %.64q: %v", req.Timezone, err)
		}
	}
	now := a.now()
	if !req.Start.set || req.Start.text == "" {
		return nil, 0, 0, badRequestf("missing start time")
	}
	if start, err = parseTime(req.Start.text, now, loc); err != nil {
		return nil, 0, 0, badRequestf("start: %v", err)
	}
	end = now.UnixMilli()
	if req.End.set && req.End.text != "" {
		if end, err = parseTime(req.End.text, now, loc); err != nil {
			return nil, 0, 0, badRequestf("end: %v", err)
		}
	}
	if end < start {
		return nil, 0, 0, badRequestf("end time %s is before start time %s", fmtMs(end), fmtMs(start))
	}
	return loc, start, end, nil
}

// compilePlans compiles the request's sub-queries (at least one, at most
// maxSubQueries), in the time zone loc.
func compilePlans(req *queryRequest, loc *time.Location) ([]*plan, error) {
	switch {
	case len(req.Queries) == 0:
		return nil, badRequestf("no queries: give at least one m= parameter or an entry in \"queries\"")
	case len(req.Queries) > maxSubQueries:
		return nil, badRequestf("%d queries in one request, limit is %d", len(req.Queries), maxSubQueries)
	}
	plans := make([]*plan, len(req.Queries))
	for i, sq := range req.Queries {
		sq.Index = i
		p, err := compile(sq)
		if err == nil && p.ds != nil && (p.ds.calendar || req.UseCalendar) && !p.ds.all {
			switch {
			case p.ds.stepMs > unitMs["d"]:
				err = fmt.Errorf("calendar downsampling by %s is not supported (up to a day only)", p.sq.Downsample)
			case loc != time.UTC:
				err = fmt.Errorf("calendar downsampling is supported in UTC only, not in %s", loc)
			}
		}
		if err != nil {
			return nil, badRequestf("query %d (%.64s): %v", i, sq.Metric, err)
		}
		plans[i] = p
	}
	return plans, nil
}

// readRequest reads the request of a read endpoint: a POST's JSON body
// into req (what names the endpoint in the error), or for another method
// the URL parameters through fromQuery.
func (a *api) readRequest(r *http.Request, what string, req any, fromQuery func(url.Values) error) error {
	if r.Method != http.MethodPost {
		return fromQuery(r.URL.Query())
	}
	body, err := httpapi.ReadBody(r, a.cfg.Limits.MaxBodyBytes, a.cfg.Stats)
	if err != nil {
		return err
	}
	if err := decodeJSON(body, req); err != nil {
		return badRequestf("%s body: %v", what, err)
	}
	return nil
}

// intParam sets *dst to the integer URL parameter name when it is given;
// one that is not an integer is a bad request saying it wants what ("a
// number").
func intParam(q url.Values, name, what string, dst *int) error {
	s := q.Get(name)
	if s == "" {
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return badRequestf("%s %.32q is not %s", name, s, what)
	}
	*dst = n
	return nil
}

// decodeJSON decodes a request body into v with errors that say where.
func decodeJSON(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return fmt.Errorf("malformed JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		return fmt.Errorf("field %s must not be a JSON %s", te.Field, te.Value)
	}
	return err
}

func fmtMs(t int64) string { return time.UnixMilli(t).UTC().Format("2006-01-02T15:04:05.000Z") }

// tooManyPoints is the error of an answer over the points budget.
func (a *api) tooManyPoints() error {
	return httpapi.Errorf(http.StatusBadRequest,
		"the answer would hold more than %d data points; use a coarser downsampling interval, a shorter range or narrower filters", a.maxQueryPoints)
}

// execute runs one sub-query. budget is the number of data points the
// answer may still hold; execute lowers it.
//
// Downsampling always runs in the backend. Aggregation across series runs
// in the backend too (model.Query GroupBy and Aggregate) unless the plan
// needs something to happen per series before it: a rate, a fill policy,
// or the "none" aggregator; then series are read one by one and combined
// here. Both ways aggregate the values that series have at the same
// timestamp (bucket start when downsampling); neither interpolates.
func (a *api) execute(ctx context.Context, p *plan, start, end int64, budget *int, st *stale) ([]outSeries, error) {
	ms := p.matchers
	if err := a.checkMetricKnown(ctx, ms, p.metric); err != nil {
		return nil, err
	}
	if p.explicit != nil || p.sq.ExplicitTags {
		names, err := a.b.LabelNames(ctx, ms)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if n == labels.MetricName || slices.Contains(p.explicit, n) {
				continue
			}
			m, err := labels.NewMatcher(labels.MatchEqual, n, "")
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
	}
	nq := model.Query{Matchers: ms, Start: start, End: end, Mode: model.ModeRaw, LimitSeries: a.cfg.Limits.MaxSeriesPerQuery, MaxStaleness: st.ms}
	collate := p.agg.fn
	if ds := p.ds; ds != nil && ds.agg.dist != nil {
		// A distribution downsamples here, from raw samples.
		if !ds.all {
			nq.Start = aggregate.BucketStart(start, ds.stepMs, 0)
		}
	} else if ds != nil {
		nq.Mode, nq.Downsample = model.ModeDownsample, ds.agg.fn
		if ds.all {
			// One bucket: a step larger than end puts every sample in the
			// bucket starting at 0; whole days of it come from the rollups.
			nq.Step = (end/rollup.Day + 1) * rollup.Day
		} else {
			nq.Step = ds.stepMs
			nq.Start = aggregate.BucketStart(start, ds.stepMs, 0)
		}
		collate = ds.agg.fn
	}
	if collate == rollup.FuncNone {
		collate = rollup.FuncLast
	}
	fixAll := func(ts []int64) {
		if p.ds != nil && p.ds.all {
			for i := range ts {
				ts[i] = start
			}
		}
	}
	distDS := p.ds != nil && p.ds.agg.dist != nil
	inPackage := a.forceEngine || p.agg.fn == rollup.FuncNone || p.rate != nil || (p.ds != nil && p.ds.fill != fillNone) || distDS
	if !inPackage {
		return a.executeInBackend(ctx, p, nq, collate, fixAll, budget, st)
	}
	var grid []int64 // bucket starts, with a fill policy
	if ds := p.ds; ds != nil && !ds.all && ds.fill != fillNone {
		n := (aggregate.BucketStart(end, ds.stepMs, 0)-nq.Start)/ds.stepMs + 1
		if n > int64(a.maxQueryPoints) {
			return nil, a.tooManyPoints()
		}
		grid = make([]int64, n)
		for i := range grid {
			grid[i] = nq.Start + int64(i)*ds.stepMs
		}
	}
	var out []outSeries
	// NaN values (a nan or null fill) are skipped; a timestamp with nothing
	// but NaN stays in the answer as NaN.
	groups := aggregate.NewGroups(aggregate.GroupOptions{By: p.groupBy, Func: p.agg.fn, Dist: p.agg.dist, SkipNaN: true})
	trackers := map[string]*tagTracker{}
	info, err := a.b.Query(model.WithQueryAPI(ctx, model.QueryAPIOpenTSDB), nq, func(s model.Series) error {
		ts, vs := s.Ts, s.Vs
		if distDS {
			step := p.ds.stepMs
			if p.ds.all {
				step = (end/rollup.Day + 1) * rollup.Day
			}
			ts, vs = aggregate.DownsampleDist(ts, vs, step, 0, *p.ds.agg.dist)
		}
		fixAll(ts)
		if grid != nil {
			ts, vs = fill(grid, ts, vs, p.ds.fill)
		}
		if p.rate != nil {
			ts, vs = rate(ts, vs, p.rate)
		}
		if p.agg.fn == rollup.FuncNone && p.agg.dist == nil {
			if *budget -= len(ts); *budget < 0 {
				return a.tooManyPoints()
			}
			var tr tagTracker
			tr.add(s.Labels)
			tags, aggTags := tr.result()
			out = append(out, outSeries{metric: p.metric, tags: tags, aggTags: aggTags, ts: ts, vs: vs, collate: collate})
			return nil
		}
		key := groups.Key(s.Labels)
		if trackers[key] == nil {
			trackers[key] = &tagTracker{}
		}
		trackers[key].add(s.Labels)
		if groups.Add(s.Labels, ts, vs); groups.Cells() > *budget {
			return a.tooManyPoints()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	st.add(info)
	for _, g := range groups.Result() {
		tags, aggTags := trackers[g.Key].result()
		out = append(out, outSeries{metric: p.metric, tags: tags, aggTags: aggTags, ts: g.Ts, vs: g.Vs, collate: collate})
	}
	*budget -= groups.Cells()
	return out, nil
}

// executeInBackend has the backend aggregate; the tags of each group
// (tags its series share, and aggregateTags, the keys they differ in) are
// then computed from the series the query's matchers select.
func (a *api) executeInBackend(ctx context.Context, p *plan, nq model.Query, collate rollup.Func, fixAll func([]int64), budget *int, st *stale) ([]outSeries, error) {
	nq.Aggregate, nq.GroupBy = p.agg.fn, p.groupBy
	var out []outSeries
	var keys []string
	info, err := a.b.Query(model.WithQueryAPI(ctx, model.QueryAPIOpenTSDB), nq, func(s model.Series) error {
		if *budget -= len(s.Ts); *budget < 0 {
			return a.tooManyPoints()
		}
		fixAll(s.Ts)
		out = append(out, outSeries{metric: p.metric, ts: s.Ts, vs: s.Vs, collate: collate})
		keys = append(keys, aggregate.GroupKey(s.Labels, p.groupBy))
		return nil
	})
	if err != nil || len(out) == 0 {
		return out, err
	}
	st.add(info)
	members, err := a.b.Series(ctx, nq.Matchers, a.cfg.Limits.MaxSeriesPerQuery)
	if err != nil {
		return nil, err
	}
	trackers := map[string]*tagTracker{}
	for _, k := range keys {
		trackers[k] = &tagTracker{}
	}
	for _, ls := range members {
		if tr := trackers[aggregate.GroupKey(ls, p.groupBy)]; tr != nil {
			tr.add(ls)
		}
	}
	for i, k := range keys {
		out[i].tags, out[i].aggTags = trackers[k].result()
	}
	return out, nil
}

// tagTracker computes a group's tags (the tags all its series share) and
// aggregateTags (the tag keys whose values differ or are missing in some).
type tagTracker struct {
	n      int
	common map[string]string
	agg    map[string]bool
}

func (t *tagTracker) add(ls labels.Labels) {
	t.n++
	if t.n == 1 {
		t.common, t.agg = map[string]string{}, map[string]bool{}
		for _, l := range ls {
			if l.Name != labels.MetricName {
				t.common[l.Name] = l.Value
			}
		}
		return
	}
	matched := 0
	for _, l := range ls {
		if l.Name == labels.MetricName {
			continue
		}
		v, ok := t.common[l.Name]
		switch {
		case ok && v == l.Value:
			matched++
		case ok:
			delete(t.common, l.Name)
			t.agg[l.Name] = true
		default:
			t.agg[l.Name] = true
		}
	}
	if matched < len(t.common) {
		for k := range t.common {
			if ls.Get(k) == "" {
				delete(t.common, k)
				t.agg[k] = true
			}
		}
	}
}

func (t *tagTracker) result() (map[string]string, []string) {
	if t.common == nil {
		return map[string]string{}, []string{}
	}
	agg := sortedKeys(t.agg)
	return t.common, agg
}

// fill expands a downsampled series onto grid (every bucket start of the
// range), filling empty buckets per policy.
func fill(grid, ts []int64, vs []float64, policy fillPolicy) ([]int64, []float64) {
	v := math.NaN()
	if policy == fillZero {
		v = 0
	}
	out := make([]float64, len(grid))
	j := 0
	for i, t := range grid {
		for j < len(ts) && ts[j] < t {
			j++
		}
		if j < len(ts) && ts[j] == t {
			out[i] = vs[j]
		} else {
			out[i] = v
		}
	}
	return slices.Clone(grid), out
}

// rate turns a series into its per-second rate of change, as OpenTSDB
// does: the first point has no rate; with counter, a decrease is a
// counter reset: the point is dropped with dropResets, else the rate is
// computed across the wrap at counterMax and set to 0 when it exceeds a
// positive resetValue.
func rate(ts []int64, vs []float64, r *rateSpec) ([]int64, []float64) {
	if len(ts) < 2 {
		return nil, nil
	}
	ots := make([]int64, 0, len(ts)-1)
	ovs := make([]float64, 0, len(ts)-1)
	for i := 1; i < len(ts); i++ {
		dt := float64(ts[i]-ts[i-1]) / 1000
		if dt <= 0 {
			continue
		}
		prev, cur := vs[i-1], vs[i]
		var v float64
		if r.counter && cur < prev {
			if r.dropResets {
				continue
			}
			v = (r.counterMax - prev + cur) / dt
			if r.resetValue > 0 && v > r.resetValue {
				v = 0
			}
		} else {
			v = (cur - prev) / dt
		}
		ots, ovs = append(ots, ts[i]), append(ovs, v)
	}
	return ots, ovs
}

// appendAnswer writes the /api/query answer: an array of
// {"metric","tags","aggregateTags"[,"query"],"dps"}. Timestamps are in
// seconds unless ms; points of the same second are then combined with the
// series' collate function. dps is an object keyed by timestamp, or with
// arrays an array of [timestamp, value] pairs. NaN and infinities are
// written as null (JSON has no NaN).
func appendAnswer(b []byte, out []outSeries, ms, arrays bool) []byte {
	b = append(b, '[')
	for i, s := range out {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"metric":`...)
		b = appendJSONString(b, s.metric)
		b = append(b, `,"tags":{`...)
		for j, k := range sortedKeys(s.tags) {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, s.tags[k])
		}
		b = append(b, `},"aggregateTags":[`...)
		for j, k := range s.aggTags {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
		}
		b = append(b, ']')
		if s.query != nil {
			q, err := json.Marshal(s.query)
			if err != nil {
				panic("BUG: opentsdb: encode query echo: " + err.Error())
			}
			b = append(b, `,"query":`...)
			b = append(b, q...)
		}
		if s.globals != nil {
			g, err := json.Marshal(s.globals)
			if err != nil {
				panic("BUG: opentsdb: encode annotations: " + err.Error())
			}
			b = append(b, `,"globalAnnotations":`...)
			b = append(b, g...)
		}
		b = append(b, `,"dps":`...)
		ts, vs := s.ts, s.vs
		if !ms {
			ts, vs = toSeconds(ts, vs, s.collate)
		}
		if arrays {
			b = append(b, '[')
		} else {
			b = append(b, '{')
		}
		for j, t := range ts {
			if j > 0 {
				b = append(b, ',')
			}
			if arrays {
				b = append(b, '[')
				b = strconv.AppendInt(b, t, 10)
				b = append(b, ',')
				b = appendFloat(b, vs[j])
				b = append(b, ']')
			} else {
				b = append(b, '"')
				b = strconv.AppendInt(b, t, 10)
				b = append(b, `":`...)
				b = appendFloat(b, vs[j])
			}
		}
		if arrays {
			b = append(b, ']')
		} else {
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, ']', '\n')
}

// toSeconds converts ms timestamps to seconds, combining points that fall
// in the same second with fn.
func toSeconds(ts []int64, vs []float64, fn rollup.Func) ([]int64, []float64) {
	exact := true
	for i := 1; i < len(ts); i++ {
		if floorDiv(ts[i], 1000) == floorDiv(ts[i-1], 1000) {
			exact = false
			break
		}
	}
	ots := make([]int64, 0, len(ts))
	if exact {
		for _, t := range ts {
			ots = append(ots, floorDiv(t, 1000))
		}
		return ots, vs
	}
	// Seconds are buckets of 1000 ms: their starts divide exactly.
	bts, ovs := aggregate.Downsample(ts, vs, 1000, 0, fn)
	for _, t := range bts {
		ots = append(ots, t/1000)
	}
	return ots, ovs
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// appendFloat writes v as a JSON number, or null for NaN and infinities.
func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(b, v, format, -1, 64)
}

// appendJSONString writes s as a JSON string; invalid UTF-8 becomes
// U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// checkMetricKnown answers 400 for a metric no series has ever had (at
// any time, not only in the query's range), as OpenTSDB does for a metric
// without a UID: "No such name for 'metrics': '<metric>'".
func (a *api) checkMetricKnown(ctx context.Context, ms []*labels.Matcher, metric string) error {
	for _, m := range ms {
		if m.Name != labels.MetricName || m.Type != labels.MatchEqual {
			continue
		}
		found, err := a.b.Series(ctx, []*labels.Matcher{m}, 1)
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return httpapi.Errorf(http.StatusBadRequest, "No such name for 'metrics': '%s'", metric)
		}
	}
	return nil
}
