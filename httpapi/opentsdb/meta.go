package opentsdb

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// Defaults and bounds of the lookup endpoints.
const (
	defaultSuggestMax = 25
	maxSuggestMax     = 100_000
	defaultLookupMax  = 25
	// lastLookahead is how far past now /api/query/last looks, so that
	// points stamped slightly in the future (within the node's future
	// window) are found.
	lastLookahead = 24 * time.Hour
)

// seriesID is a stable opaque identifier of a series, served where
// OpenTSDB gives a tsuid. It cannot be used to query (tsuids are not
// supported).
func seriesID(ls labels.Labels) string {
	h := fnv.New64a()
	_, _ = h.Write(ls.AppendKey(nil))
	return fmt.Sprintf("%016X", binary.BigEndian.Uint64(h.Sum(nil)))
}

// tagsOf returns the tags of a series: every label but the metric name.
func tagsOf(ls labels.Labels) map[string]string {
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		if l.Name != labels.MetricName {
			m[l.Name] = l.Value
		}
	}
	return m
}

// lastQuery is one entry of a POST /api/query/last body.
type lastQuery struct {
	Metric string            `json:"metric"`
	Tags   map[string]string `json:"tags"`
	Tsuids []string          `json:"tsuids"`
}

type lastRequest struct {
	Queries      []lastQuery `json:"queries"`
	ResolveNames bool        `json:"resolveNames"`
	BackScan     int         `json:"backScan"`
}

type lastPoint struct {
	Metric    string            `json:"metric"`
	Timestamp int64             `json:"timestamp"`
	Value     string            `json:"value"`
	Tags      map[string]string `json:"tags"`
	Tsuid     string            `json:"tsuid"`
}

// queryLast serves /api/query/last: the newest point of every series
// selected by each query (metric plus tag filters). back_scan, in hours,
// bounds how far back to look; 0 (the default) looks back as far as the
// node keeps data.
func (a *api) queryLast(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	req, specs, err := a.readLastRequest(r)
	if err != nil {
		a.fail(w, err)
		return
	}
	if len(specs) == 0 {
		a.badRequest(w, "no queries: give timeseries=<metric>{<tags>} or \"queries\"")
		return
	}
	if len(specs) > maxSubQueries {
		a.badRequest(w, "%d queries in one request, limit is %d", len(specs), maxSubQueries)
		return
	}
	if req.BackScan < 0 || req.BackScan > 1<<20 {
		a.badRequest(w, "back_scan %d is out of range (hours, 0 for no bound)", req.BackScan)
		return
	}
	now := a.now()
	end := now.Add(lastLookahead).UnixMilli()
	var start int64 // 0: as far back as the node keeps data
	if req.BackScan > 0 {
		start = max(1, now.Add(-time.Duration(req.BackScan)*time.Hour).UnixMilli())
	}
	out := []lastPoint{}
	for i, sq := range specs {
		sq.Aggregator = "none"
		p, err := compile(sq)
		if err != nil {
			a.badRequest(w, "query %d (%.64s): %v", i, sq.Metric, err)
			return
		}
		q := model.Query{Matchers: p.matchers, Start: start, End: end, Mode: model.ModeLastPoint, LimitSeries: a.cfg.Limits.MaxSeriesPerQuery}
		_, err = a.b.Query(model.WithQueryAPI(ctx, model.QueryAPIOpenTSDB), q, func(s model.Series) error {
			for j := range s.Ts {
				out = append(out, lastPoint{Metric: p.metric, Timestamp: s.Ts[j], Value: formatValue(s.Vs[j]), Tags: tagsOf(s.Labels), Tsuid: seriesID(s.Labels)})
			}
			return nil
		})
		if err != nil {
			a.fail(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// readLastRequest reads the request of /api/query/last, from a POST body
// or from the parameters of a GET (timeseries, back_scan), and the
// sub-queries it asks for.
func (a *api) readLastRequest(r *http.Request) (lastRequest, []subQuery, error) {
	var req lastRequest
	var specs []subQuery
	err := a.readRequest(r, "query/last", &req, func(q url.Values) error {
		if q.Has("tsuids") {
			return badRequestf("queries by tsuids are not supported: query by metric and tags (timeseries=)")
		}
		for _, ts := range q["timeseries"] {
			metric, filters, err := parseMetricSpec(ts)
			if err != nil {
				return badRequestf("timeseries=%.128q: %v", ts, err)
			}
			specs = append(specs, subQuery{Metric: metric, Filters: filters})
		}
		return intParam(q, "back_scan", "a number of hours", &req.BackScan)
	})
	if err != nil || r.Method != http.MethodPost {
		return req, specs, err
	}
	for _, q := range req.Queries {
		if len(q.Tsuids) > 0 {
			return req, nil, badRequestf("queries by tsuids are not supported: query by metric and tags")
		}
		specs = append(specs, subQuery{Metric: q.Metric, Tags: q.Tags})
	}
	return req, specs, nil
}

// formatValue renders a value as OpenTSDB's last-point answer does: a
// string.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	}
	return string(appendFloat(nil, v))
}

type suggestRequest struct {
	Type string `json:"type"`
	Q    string `json:"q"`
	Max  int    `json:"max"`
}

// suggest serves /api/suggest: metric names, tag keys or tag values
// starting with q, sorted, at most max (default 25).
func (a *api) suggest(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	var req suggestRequest
	if err := a.readRequest(r, "suggest", &req, func(q url.Values) error {
		req.Type, req.Q = q.Get("type"), q.Get("q")
		return intParam(q, "max", "a number", &req.Max)
	}); err != nil {
		a.fail(w, err)
		return
	}
	switch {
	case req.Max == 0:
		req.Max = defaultSuggestMax
	case req.Max < 0:
		a.badRequest(w, "max %d must be positive", req.Max)
		return
	case req.Max > maxSuggestMax:
		req.Max = maxSuggestMax
	}
	var all []string
	var err error
	switch req.Type {
	case "metrics":
		all, err = a.b.LabelValues(ctx, labels.MetricName, nil)
	case "tagk":
		all, err = a.b.LabelNames(ctx, nil)
		all = without(all, labels.MetricName)
	case "tagv":
		all, err = a.tagValues(ctx, req.Q)
	case "":
		a.badRequest(w, "missing type: metrics, tagk or tagv")
		return
	default:
		a.badRequest(w, "type %.32q is not supported: metrics, tagk or tagv", req.Type)
		return
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	out := []string{}
	for _, s := range all {
		if strings.HasPrefix(s, req.Q) {
			out = append(out, s)
			if len(out) == req.Max {
				break
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func without(list []string, drop string) []string {
	out := list[:0]
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

// tagValues lists the values, starting with prefix, of every tag key,
// sorted and unique.
func (a *api) tagValues(ctx context.Context, prefix string) ([]string, error) {
	names, err := a.b.LabelNames(ctx, nil)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, n := range names {
		if n == labels.MetricName {
			continue
		}
		vs, err := a.b.LabelValues(ctx, n, nil)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			if strings.HasPrefix(v, prefix) {
				seen[v] = true
			}
		}
	}
	return sortedKeys(seen), nil
}

type lookupTag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type lookupRequest struct {
	Metric string      `json:"metric"`
	Tags   []lookupTag `json:"tags"`
	Limit  int         `json:"limit"`
}

type lookupResult struct {
	Tsuid  string            `json:"tsuid"`
	Metric string            `json:"metric"`
	Tags   map[string]string `json:"tags"`
}

type lookupAnswer struct {
	Type         string         `json:"type"`
	Metric       string         `json:"metric"`
	Tags         []lookupTag    `json:"tags"`
	Limit        int            `json:"limit"`
	Time         int64          `json:"time"`
	TotalResults int            `json:"totalResults"`
	StartIndex   int            `json:"startIndex"`
	Results      []lookupResult `json:"results"`
}

// parseLookupM parses the m= of /api/search/lookup: "metric{k=v,...}"
// where the metric, a key or a value may be "*" (any).
func parseLookupM(s string) (lookupRequest, error) {
	var req lookupRequest
	metric, rest, braces := strings.Cut(s, "{")
	req.Metric = strings.TrimSpace(metric)
	if !braces {
		return req, nil
	}
	if !strings.HasSuffix(rest, "}") {
		return req, fmt.Errorf("m=%.128q: missing closing brace", s)
	}
	rest = rest[:len(rest)-1]
	if strings.TrimSpace(rest) == "" {
		return req, nil
	}
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return req, fmt.Errorf("m=%.128q: tag %.64q: want key=value", s, kv)
		}
		req.Tags = append(req.Tags, lookupTag{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v)})
	}
	return req, nil
}

// lookup serves /api/search/lookup: the series of a metric (or of any
// metric, "*") with the given tag pairs, where a key or a value may be
// "*". Grafana uses it for the tag_names() and tag_values() template
// variable queries.
func (a *api) lookup(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	var req lookupRequest
	if err := a.readRequest(r, "lookup", &req, func(q url.Values) error {
		m := q.Get("m")
		if m == "" {
			return badRequestf("missing m= (metric{tagk=tagv,...}, '*' for any)")
		}
		var err error
		if req, err = parseLookupM(m); err != nil {
			return badRequestf("%v", err)
		}
		return intParam(q, "limit", "a number", &req.Limit)
	}); err != nil {
		a.fail(w, err)
		return
	}
	if req.Limit <= 0 {
		req.Limit = defaultLookupMax
	}
	var ms []*labels.Matcher
	add := func(t labels.MatchType, name, value string) error {
		m, err := labels.NewMatcher(t, name, value)
		if err == nil {
			ms = append(ms, m)
		}
		return err
	}
	var anyKey []string // values wanted under any tag key
	var err error
	if req.Metric != "" && req.Metric != "*" {
		err = add(labels.MatchEqual, labels.MetricName, req.Metric)
	}
	for _, t := range req.Tags {
		if err != nil {
			break
		}
		switch {
		case t.Key == "*" || t.Key == "":
			if t.Value != "*" && t.Value != "" {
				anyKey = append(anyKey, t.Value)
			}
		default:
			var name string
			if name, err = queryLabelName(t.Key); err != nil {
				break
			}
			if t.Value == "*" || t.Value == "" {
				err = add(labels.MatchRegexp, name, ".+")
			} else {
				err = add(labels.MatchEqual, name, t.Value)
			}
		}
	}
	if err != nil {
		a.badRequest(w, "lookup: %v", err)
		return
	}
	if len(ms) == 0 {
		_ = add(labels.MatchRegexp, labels.MetricName, ".+")
	}
	series, err := a.b.Series(ctx, ms, a.cfg.Limits.MaxSeriesPerQuery)
	if err != nil {
		a.fail(w, err)
		return
	}
	ans := lookupAnswer{Type: "LOOKUP", Metric: req.Metric, Tags: req.Tags, Limit: req.Limit, Results: []lookupResult{}}
	if ans.Metric == "" {
		ans.Metric = "*"
	}
	if ans.Tags == nil {
		ans.Tags = []lookupTag{}
	}
outer:
	for _, ls := range series {
		for _, v := range anyKey {
			found := false
			for _, l := range ls {
				if l.Name != labels.MetricName && l.Value == v {
					found = true
					break
				}
			}
			if !found {
				continue outer
			}
		}
		ans.TotalResults++
		if len(ans.Results) < req.Limit {
			ans.Results = append(ans.Results, lookupResult{Tsuid: seriesID(ls), Metric: ls.Get(labels.MetricName), Tags: tagsOf(ls)})
		}
	}
	ans.Time = time.Since(began).Milliseconds()
	writeJSON(w, http.StatusOK, ans)
}

func (a *api) aggregators(w http.ResponseWriter, r *http.Request) {
	if a.readOrGet(w, r) {
		writeJSON(w, http.StatusOK, aggregatorNames())
	}
}

func (a *api) filterTypes(w http.ResponseWriter, r *http.Request) {
	if a.readOrGet(w, r) {
		writeJSON(w, http.StatusOK, filterTypes)
	}
}

func (a *api) version(w http.ResponseWriter, r *http.Request) {
	if a.readOrGet(w, r) {
		writeJSON(w, http.StatusOK, map[string]string{"version": Version, "implementation": "tributary"})
	}
}

type statPoint struct {
	Metric    string            `json:"metric"`
	Timestamp int64             `json:"timestamp"`
	Value     string            `json:"value"`
	Tags      map[string]string `json:"tags"`
}

// stats serves /api/stats: the HTTP API's counters as OpenTSDB-style
// points named tributary.<counter>.
func (a *api) stats(w http.ResponseWriter, r *http.Request) {
	if !a.readOrGet(w, r) {
		return
	}
	now := a.now().Unix()
	out := []statPoint{}
	for _, nc := range a.cfg.Stats.Snapshot() {
		out = append(out, statPoint{Metric: "tributary." + nc.Name, Timestamp: now, Value: strconv.FormatInt(nc.Count, 10), Tags: map[string]string{}})
	}
	writeJSON(w, http.StatusOK, out)
}
