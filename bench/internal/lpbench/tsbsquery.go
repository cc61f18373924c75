package lpbench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/workload"
)

// The TSBS cpu-only query types, through the Prometheus API in the forms
// TSBS sends to Prometheus-compatible stores. After the kdb+ blog query,
// each type runs on its own: WarmupQueries and then Queries requests from
// QueryClients clients, each with its own connection, as TSBS's query
// runner does (one query at a time per worker, back to back).
//
//   - single-groupby-1-1-1: the maximum of usage_user of 1 random host over
//     1 h, by minute:
//     max(max_over_time({__name__=~"cpu_(usage_user)",hostname=~"host_N"}[1m])) by (__name__)
//   - single-groupby-1-1-12: the same over 12 h (720 points; shorter when
//     the data is, the longest whole-minute span that fits);
//   - single-groupby-1-8-1: the same over 8 distinct random hosts chosen by
//     the regex "host_a|host_b|…", 1 h;
//   - cpu-max-all-1: the maximum of all 10 fields of 1 host over 8 h, by
//     hour: max(max_over_time({__name__=~"cpu_.*",hostname="host_N"}[1h])) by (__name__);
//   - lastpoint: the newest usage_user of every host, an instant query
//     last_over_time(cpu_usage_user[1h]) at the newest sample's time.
//
// Every warm-up answer is compared with the values computed from the
// generated data; the timed answers are kept (up to tsbsKeepBytes per
// type) and compared after the clock stops, so that checking takes no CPU
// from the node while it is measured.

// tsbsType is one query type and its queries.
type tsbsType struct {
	name    string // TSBS's name
	queries []tsbsQuery
}

// tsbsQuery is one request and the answer it must get.
type tsbsQuery struct {
	params url.Values
	path   string // "/api/v1/query_range" or "/api/v1/query"
	url    string // set by setBase
	// by is the label naming each answer series ("" when there is one
	// series, whatever its labels); want maps its value to the points.
	by   string
	want map[string][]float64
	// firstS and stepS place the points of want in time.
	firstS, stepS int64
}

// tsbsKeepBytes bounds the timed answers kept for checking, per type.
const tsbsKeepBytes = 64 << 20

// tsbsTypeNames are the types in run order.
var tsbsTypeNames = []string{"single-groupby-1-1-1", "single-groupby-1-1-12", "single-groupby-1-8-1", "cpu-max-all-1", "lastpoint"}

// newTSBSTypes draws n queries of every type from seed.
func newTSBSTypes(g *workload.TSBSCPU, n int, seed uint64) ([]tsbsType, error) {
	vals := make([][][]int64, g.Hosts()) // [host][field], filled on demand
	field := func(h, f int) []int64 {
		if vals[h] == nil {
			vals[h] = make([][]int64, workload.TSBSCPUFields)
		}
		if vals[h][f] == nil {
			vals[h][f] = g.FieldValues(h, f)
		}
		return vals[h][f]
	}
	out := make([]tsbsType, 0, len(tsbsTypeNames))
	for i, name := range tsbsTypeNames {
		rng := rand.New(rand.NewPCG(seed, 0x7473_6273_0000_0000+uint64(i)))
		t := tsbsType{name: name, queries: make([]tsbsQuery, n)}
		for j := range t.queries {
			q, err := newTSBSQuery(g, name, rng, field)
			if err != nil {
				return nil, err
			}
			t.queries[j] = q
		}
		out = append(out, t)
	}
	return out, nil
}

// newTSBSQuery draws one query of the named type.
func newTSBSQuery(g *workload.TSBSCPU, name string, rng *rand.Rand, field func(h, f int) []int64) (tsbsQuery, error) {
	switch name {
	case "single-groupby-1-1-1":
		return groupByQuery(g, rng, field, 1, 3600)
	case "single-groupby-1-1-12":
		return groupByQuery(g, rng, field, 1, 12*3600)
	case "single-groupby-1-8-1":
		return groupByQuery(g, rng, field, 8, 3600)
	case "cpu-max-all-1":
		return maxAllQuery(g, rng, field)
	case "lastpoint":
		return lastPointQuery(g, field), nil
	}
	return tsbsQuery{}, fmt.Errorf("BUG: unknown TSBS query type %q", name)
}

// windowStart draws the start H of a window of windowS seconds (a whole
// number of steps, shortened to the longest that fits) whose every range
// (t-rangeS, t], t = H+stepS … H+windowS, lies inside the written data.
func windowStart(g *workload.TSBSCPU, rng *rand.Rand, windowS, stepS int64) (hS, wS int64, err error) {
	const minuteNs = 60e9
	firstS := (g.StartNs() + minuteNs - 1) / minuteNs * 60
	lastSampleS := g.TimestampNs(g.Rows()-1) / 1e9
	wS = min(windowS, (lastSampleS-firstS)/stepS*stepS)
	if wS < stepS {
		return 0, 0, fmt.Errorf("the written data is too short for a %ds step", stepS)
	}
	lastS := (lastSampleS - wS) / 60 * 60
	return firstS + 60*rng.Int64N((lastS-firstS)/60+1), wS, nil
}

// windowMax is the maximum of vals over the rows in (tS-rangeS, tS].
func windowMax(g *workload.TSBSCPU, vals []int64, tS, rangeS int64) float64 {
	tNs := tS * 1e9
	lo := tNs - rangeS*1e9 - g.StartNs()
	first := int64(0)
	if lo >= 0 {
		first = lo/g.IntervalNs() + 1
	}
	last := min((tNs-g.StartNs())/g.IntervalNs(), int64(g.Rows()-1))
	if first > last {
		panic(fmt.Sprintf("BUG: empty window (%d-%d, %d]", tS, rangeS, tS))
	}
	return float64(slices.Max(vals[first : last+1]))
}

// rangeParams are a query_range request's parameters.
func rangeParams(q string, startS, endS, stepS int64) url.Values {
	return url.Values{
		"query": {q},
		"start": {strconv.FormatInt(startS, 10)},
		"end":   {strconv.FormatInt(endS, 10)},
		"step":  {strconv.FormatInt(stepS, 10)},
	}
}

// groupByQuery is single-groupby-1-nHosts-(windowS/3600): max of usage_user
// over nHosts distinct random hosts, by minute.
func groupByQuery(g *workload.TSBSCPU, rng *rand.Rand, field func(h, f int) []int64, nHosts int, windowS int64) (tsbsQuery, error) {
	hS, wS, err := windowStart(g, rng, windowS, 60)
	if err != nil {
		return tsbsQuery{}, err
	}
	nHosts = min(nHosts, g.Hosts())
	hosts := rng.Perm(g.Hosts())[:nHosts]
	names := make([]string, nHosts)
	for i, h := range hosts {
		names[i] = g.HostName(h)
	}
	expr := fmt.Sprintf(`max(max_over_time({__name__=~"%s_(%s)",hostname=~%q}[1m])) by (__name__)`,
		workload.TSBSCPUMeasurement, workload.TSBSCPUFieldNames[queryField], strings.Join(names, "|"))
	points := make([]float64, wS/60)
	for j := range points {
		tS := hS + int64(j+1)*60
		for i, h := range hosts {
			v := windowMax(g, field(h, queryField), tS, 60)
			if i == 0 || v > points[j] {
				points[j] = v
			}
		}
	}
	return tsbsQuery{
		params: rangeParams(expr, hS+60, hS+wS, 60), path: "/api/v1/query_range",
		want: map[string][]float64{"": points}, firstS: hS + 60, stepS: 60,
	}, nil
}

// maxAllQuery is cpu-max-all-1: the maximum of every field of one host
// over 8 h, by hour.
func maxAllQuery(g *workload.TSBSCPU, rng *rand.Rand, field func(h, f int) []int64) (tsbsQuery, error) {
	hS, wS, err := windowStart(g, rng, 8*3600, 3600)
	if err != nil {
		return tsbsQuery{}, err
	}
	h := rng.IntN(g.Hosts())
	expr := fmt.Sprintf(`max(max_over_time({__name__=~"%s_.*",hostname=%q}[1h])) by (__name__)`, workload.TSBSCPUMeasurement, g.HostName(h))
	want := make(map[string][]float64, workload.TSBSCPUFields)
	for f, fname := range workload.TSBSCPUFieldNames {
		points := make([]float64, wS/3600)
		for j := range points {
			points[j] = windowMax(g, field(h, f), hS+int64(j+1)*3600, 3600)
		}
		want[workload.TSBSCPUMeasurement+"_"+fname] = points
	}
	return tsbsQuery{
		params: rangeParams(expr, hS+3600, hS+wS, 3600), path: "/api/v1/query_range",
		by: "__name__", want: want, firstS: hS + 3600, stepS: 3600,
	}, nil
}

// lastPointQuery is lastpoint: the newest usage_user of every host, asked
// at the newest sample's time.
func lastPointQuery(g *workload.TSBSCPU, field func(h, f int) []int64) tsbsQuery {
	tS := g.TimestampNs(g.Rows()-1) / 1e9
	want := make(map[string][]float64, g.Hosts())
	for h := range g.Hosts() {
		vs := field(h, queryField)
		want[g.HostName(h)] = []float64{float64(vs[len(vs)-1])}
	}
	return tsbsQuery{
		params: url.Values{"query": {"last_over_time(" + queryMetric + "[1h])"}, "time": {strconv.FormatInt(tS, 10)}},
		path:   "/api/v1/query", by: "hostname", want: want, firstS: tS,
	}
}

// setBase builds every query's URL on base ("http://host:port").
func (t *tsbsType) setBase(base string) {
	for i := range t.queries {
		q := &t.queries[i]
		q.url = base + q.path + "?" + q.params.Encode()
	}
}

// check compares an answer with the expected points.
func (q *tsbsQuery) check(body []byte) error {
	var r promResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("answer is not JSON: %v", err)
	}
	if r.Status != "success" {
		return fmt.Errorf("status %q: %s", r.Status, r.Error)
	}
	if len(r.Data.Result) != len(q.want) {
		return fmt.Errorf("%d series, want %d", len(r.Data.Result), len(q.want))
	}
	for _, s := range r.Data.Result {
		key := ""
		if q.by != "" {
			key = s.Metric[q.by]
		}
		want, ok := q.want[key]
		if !ok {
			return fmt.Errorf("unexpected series %v", s.Metric)
		}
		values := s.Values
		if r.Data.ResultType == "vector" {
			values = [][2]any{s.Value}
		}
		if len(values) != len(want) {
			return fmt.Errorf("series %v has %d points, want %d", s.Metric, len(values), len(want))
		}
		for j, pair := range values {
			ts, ok1 := pair[0].(float64)
			vs, ok2 := pair[1].(string)
			v, err := strconv.ParseFloat(vs, 64)
			if !ok1 || !ok2 || err != nil || ts != float64(q.firstS+int64(j)*q.stepS) || v != want[j] {
				return fmt.Errorf("series %v point %d is %v, want [%d, %v]", s.Metric, j, pair, q.firstS+int64(j)*q.stepS, want[j])
			}
		}
	}
	return nil
}

// runTSBSType sends t's first warm queries, checking each answer, then the
// rest timed from clientCount clients; the timed answers are checked
// afterwards (as many as tsbsKeepBytes holds).
func runTSBSType(ctx context.Context, t tsbsType, warm, clientCount int, timeout time.Duration, nodeExited <-chan struct{}) (timedStats, error) {
	return runTimed(ctx, timedRun{
		what: t.name, n: len(t.queries), warm: warm, clients: clientCount, timeout: timeout, nodeExited: nodeExited,
		url:   func(i int) string { return t.queries[i].url },
		check: func(i int, body []byte) error { return t.queries[i].check(body) },
		label: func(i int) string { return t.name + " " + t.queries[i].url },
	})
}

// queryTSBS runs every TSBS query type against the node at base, one type
// after the other, and records their stats.
func (ph phases) queryTSBS(types []tsbsType, base string, nodeExited <-chan struct{}) error {
	o := ph.m.opts
	ph.m.tsbs = make(map[string]timedStats, len(types))
	for i := range types {
		t := &types[i]
		t.setBase(base)
		ph.logger.Info("querying", "type", t.name, "clients", o.QueryClients, "warmup", o.WarmupQueries, "queries", o.Queries)
		st, err := runTSBSType(ph.ctx, *t, o.WarmupQueries, o.QueryClients, o.CallTimeout, nodeExited)
		ph.m.tsbs[t.name] = st
		if err != nil {
			return err
		}
	}
	return nil
}
