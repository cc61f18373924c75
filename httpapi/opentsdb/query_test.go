package opentsdb

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// seedPoint is a point the tests write and the naive engine reads.
type seedPoint struct {
	metric string
	tags   map[string]string
	t      int64 // ms
	v      float64
}

// seedData is what the query tests write: sys.cpu.user for hosts a, b, c
// and cpus 0, 1 every 10 s for two hours (plus one series with an extra
// tag); net.bytes, a counter per host that resets once; sys.sparse, with
// gaps.
func seedData() []seedPoint {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []seedPoint
	start := nowMs() - 2*3600_000
	for _, h := range []string{"a", "b", "c"} {
		for _, cpu := range []string{"0", "1"} {
			for t := start; t < nowMs(); t += 10_000 {
				out = append(out, seedPoint{"sys.cpu.user", map[string]string{"host": h, "cpu": cpu}, t, math.Round(rng.Float64()*1000) / 10})
			}
		}
		counter := 0.0
		for t := start; t < nowMs(); t += 10_000 {
			counter += float64(rng.IntN(500))
			if h == "a" && t == start+3600_000 {
				counter = 7 // a counter reset
			}
			out = append(out, seedPoint{"net.bytes", map[string]string{"host": h}, t, counter})
		}
		for t := start; t < nowMs(); t += 60_000 {
			if (t/60_000)%7 < 3 { // gaps of four minutes
				out = append(out, seedPoint{"sys.sparse", map[string]string{"host": h}, t, float64(rng.IntN(100))})
			}
		}
	}
	for t := start; t < nowMs(); t += 30_000 {
		out = append(out, seedPoint{"sys.cpu.user", map[string]string{"host": "a", "cpu": "0", "extra": "1"}, t, 1000})
	}
	return out
}

func seedBody(t testing.TB, pts []seedPoint) string {
	type dp struct {
		Metric    string            `json:"metric"`
		Timestamp int64             `json:"timestamp"`
		Value     float64           `json:"value"`
		Tags      map[string]string `json:"tags"`
	}
	out := make([]dp, len(pts))
	for i, p := range pts {
		out[i] = dp{p.metric, p.t, p.v, p.tags}
	}
	return mustJSON(t, out)
}

// seeded returns an env holding seedData.
func seeded(t testing.TB) (*env, []seedPoint) {
	e := newEnv(t)
	pts := seedData()
	e.put("", seedBody(t, pts), http.StatusNoContent)
	return e, pts
}

// naiveQuery is a query for the naive engine.
type naiveQuery struct {
	metric     string
	match      func(map[string]string) bool
	groupBy    []string
	start, end int64 // ms
	step       int64 // downsample interval; 0: none
	dsFn       string
	fill       string // "", "nan", "zero"
	agg        string // "none" keeps series apart
	rate       *rateSpec
}

// naive answers q from the points, as plainly as possible: filter,
// downsample per series, fill, rate per series, then aggregate the values
// series have at the same timestamp. Keys are group (or series) tags.
func naive(pts []seedPoint, q naiveQuery) map[string]map[int64]float64 {
	series := map[string][]seedPoint{}
	start := q.start
	if q.step > 0 {
		start -= start % q.step
	}
	for _, p := range pts {
		if p.metric == q.metric && (q.match == nil || q.match(p.tags)) && p.t >= start && p.t <= q.end {
			k := fmt.Sprint(p.tags)
			series[k] = append(series[k], p)
		}
	}
	apply := func(fn string, vs []float64) float64 {
		var kept []float64
		for _, v := range vs {
			if !math.IsNaN(v) {
				kept = append(kept, v)
			}
		}
		if len(kept) == 0 {
			return math.NaN()
		}
		switch fn {
		case "sum", "zimsum":
			s := 0.0
			for _, v := range kept {
				s += v
			}
			return s
		case "avg":
			s := 0.0
			for _, v := range kept {
				s += v
			}
			return s / float64(len(kept))
		case "min", "mimmin":
			return slices.Min(kept)
		case "max", "mimmax":
			return slices.Max(kept)
		case "count":
			return float64(len(kept))
		case "first":
			return kept[0]
		case "last":
			return kept[len(kept)-1]
		case "dev":
			mean := 0.0
			for _, v := range kept {
				mean += v / float64(len(kept))
			}
			sq := 0.0
			for _, v := range kept {
				sq += (v - mean) * (v - mean)
			}
			return math.Sqrt(sq / float64(len(kept)))
		case "p50", "p75", "p90", "p95", "p99", "p999":
			// Commons Math's legacy estimate, OpenTSDB's percentiles.
			p := map[string]float64{"p50": 50, "p75": 75, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}[fn]
			sorted := slices.Sorted(slices.Values(kept))
			pos := p * float64(len(sorted)+1) / 100
			if pos < 1 {
				return sorted[0]
			}
			if pos >= float64(len(sorted)) {
				return sorted[len(sorted)-1]
			}
			k := int(pos)
			return sorted[k-1] + (pos-float64(k))*(sorted[k]-sorted[k-1])
		}
		panic("naive: " + fn)
	}
	// Series in the node's order (label by label), so that first and last
	// across series agree.
	keys := make([]string, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return compareTags(series[keys[i]][0].tags, series[keys[j]][0].tags) < 0 })
	groups := map[string]map[int64][]float64{}
	for _, k := range keys {
		s := series[k]
		sort.Slice(s, func(i, j int) bool { return s[i].t < s[j].t })
		var ts []int64
		var vs []float64
		if q.step > 0 {
			buckets := map[int64][]float64{}
			for _, p := range s {
				buckets[p.t-p.t%q.step] = append(buckets[p.t-p.t%q.step], p.v)
			}
			if q.fill != "" {
				for b := start; b <= q.end-q.end%q.step; b += q.step {
					ts = append(ts, b)
					if len(buckets[b]) > 0 {
						vs = append(vs, apply(q.dsFn, buckets[b]))
					} else if q.fill == "zero" {
						vs = append(vs, 0)
					} else {
						vs = append(vs, math.NaN())
					}
				}
			} else {
				for b := range buckets {
					ts = append(ts, b)
				}
				slices.Sort(ts)
				for _, b := range ts {
					vs = append(vs, apply(q.dsFn, buckets[b]))
				}
			}
		} else {
			for _, p := range s {
				ts, vs = append(ts, p.t), append(vs, p.v)
			}
		}
		if r := q.rate; r != nil {
			var rts []int64
			var rvs []float64
			for i := 1; i < len(ts); i++ {
				d := vs[i] - vs[i-1]
				if r.counter && d < 0 {
					if r.dropResets {
						continue
					}
					d = r.counterMax - vs[i-1] + vs[i]
				}
				v := d / (float64(ts[i]-ts[i-1]) / 1000)
				if r.counter && vs[i] < vs[i-1] && r.resetValue > 0 && v > r.resetValue {
					v = 0
				}
				rts, rvs = append(rts, ts[i]), append(rvs, v)
			}
			ts, vs = rts, rvs
		}
		key := fmt.Sprint(s[0].tags)
		if q.agg != "none" {
			var parts []string
			for _, g := range q.groupBy {
				parts = append(parts, g+"="+s[0].tags[g])
			}
			key = strings.Join(parts, ",")
		}
		if groups[key] == nil {
			groups[key] = map[int64][]float64{}
		}
		for i, t := range ts {
			groups[key][t] = append(groups[key][t], vs[i])
		}
	}
	out := map[string]map[int64]float64{}
	for k, byT := range groups {
		out[k] = map[int64]float64{}
		for t, vs := range byT {
			if q.agg == "none" {
				out[k][t] = vs[0]
			} else {
				out[k][t] = apply(q.agg, vs)
			}
		}
	}
	return out
}

// compareTags orders tag sets as the node orders label sets.
func compareTags(a, b map[string]string) int {
	ka, kb := slices.Sorted(mapKeys(a)), slices.Sorted(mapKeys(b))
	for i := 0; i < len(ka) && i < len(kb); i++ {
		if c := strings.Compare(ka[i], kb[i]); c != 0 {
			return c
		}
		if c := strings.Compare(a[ka[i]], b[kb[i]]); c != 0 {
			return c
		}
	}
	return len(ka) - len(kb)
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// answer is an /api/query answer entry with null-aware values.
type answer struct {
	Metric        string              `json:"metric"`
	Tags          map[string]string   `json:"tags"`
	AggregateTags []string            `json:"aggregateTags"`
	Dps           map[string]*float64 `json:"dps"`
	Query         *subQuery           `json:"query"`
}

// keyed converts answers to the naive engine's shape: group key from the
// group-by tags (or all tags for "none") to ms timestamp to value (NaN for
// null).
func keyed(t testing.TB, ans []answer, groupBy []string, none, ms bool) map[string]map[int64]float64 {
	t.Helper()
	out := map[string]map[int64]float64{}
	for _, a := range ans {
		key := fmt.Sprint(a.Tags)
		if !none {
			var parts []string
			for _, g := range groupBy {
				parts = append(parts, g+"="+a.Tags[g])
			}
			key = strings.Join(parts, ",")
		}
		if out[key] != nil {
			t.Fatalf("two answers for group %q", key)
		}
		out[key] = map[int64]float64{}
		for k, v := range a.Dps {
			ts, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				t.Fatalf("dps key %q: %v", k, err)
			}
			if !ms {
				ts *= 1000
			}
			out[key][ts] = math.NaN()
			if v != nil {
				out[key][ts] = *v
			}
		}
	}
	return out
}

func sameResult(got, want map[string]map[int64]float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d groups, want %d (%v vs %v)", len(got), len(want), keysOf(got), keysOf(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			return fmt.Errorf("group %q missing (have %v)", k, keysOf(got))
		}
		if len(g) != len(w) {
			return fmt.Errorf("group %q: %d points, want %d", k, len(g), len(w))
		}
		for ts, wv := range w {
			gv, ok := g[ts]
			switch {
			case !ok:
				return fmt.Errorf("group %q: no point at %d", k, ts)
			case math.IsNaN(wv) != math.IsNaN(gv):
				return fmt.Errorf("group %q at %d: %g, want %g", k, ts, gv, wv)
			case !math.IsNaN(wv) && math.Abs(gv-wv) > 1e-9*math.Max(1, math.Abs(wv)):
				return fmt.Errorf("group %q at %d: %g, want %g", k, ts, gv, wv)
			}
		}
	}
	return nil
}

func keysOf(m map[string]map[int64]float64) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}

func (e *env) query(path string) []answer {
	e.t.Helper()
	var ans []answer
	e.getJSON(path, &ans)
	return ans
}

func tagIs(k string, vals ...string) func(map[string]string) bool {
	return func(tags map[string]string) bool { return slices.Contains(vals, tags[k]) }
}

// TestQueries runs the read API's tests against one node holding
// seedData (writing it takes most of the time).
func TestQueries(t *testing.T) {
	e, pts := seeded(t)
	for _, c := range []struct {
		name string
		f    func(*testing.T, *env, []seedPoint)
	}{
		{"MParameterMatchesNaiveEngine", queryMParameterAgainstNaive},
		{"RateMatchesNaiveEngine", queryRateAgainstNaive},
		{"FillPoliciesAndResolution", queryFillPoliciesAndResolution},
		{"GrafanaRequestsAreAnswered", queryGrafanaRequests},
		{"BadQueriesGetClearErrors", queryBadQueries},
		{"AbsoluteTimesInEverySpelling", queryAbsoluteTimes},
		{"BackendAndPackageAggregationAgree", queryBackendAndPackageAggregationAgree},
		{"UnescapedURLAsCurlSendsIt", queryUnescapedURL},
		{"LastPoint", queryLast},
		{"Suggest", querySuggest},
		{"Lookup", queryLookup},
		{"MetadataEndpoints", queryMetadataEndpoints},
	} {
		t.Run(c.name, func(t *testing.T) {
			ec := *e
			ec.t = t
			c.f(t, &ec, pts)
		})
	}
}

func queryMParameterAgainstNaive(t *testing.T, e *env, pts []seedPoint) {
	start, end := nowMs()-2*3600_000, nowMs()
	noExtra := func(tags map[string]string) bool { return tags["extra"] == "" }
	cases := []struct {
		m     string
		q     naiveQuery
		tags  map[string]string // of the first answer
		aggTg []string
	}{
		{"avg:1h-avg:sys.cpu.user{host=a}", naiveQuery{match: tagIs("host", "a"), groupBy: []string{"host"}, step: 3600_000, dsFn: "avg", agg: "avg"},
			map[string]string{"host": "a"}, []string{"cpu", "extra"}},
		{"sum:sys.cpu.user{host=*}", naiveQuery{match: func(map[string]string) bool { return true }, groupBy: []string{"host"}, agg: "sum"}, nil, nil},
		{"max:sys.cpu.user{host=a|b}", naiveQuery{match: tagIs("host", "a", "b"), groupBy: []string{"host"}, agg: "max"}, nil, nil},
		{"min:5m-max:sys.cpu.user{}{cpu=1}", naiveQuery{match: tagIs("cpu", "1"), agg: "min", step: 300_000, dsFn: "max"},
			map[string]string{"cpu": "1"}, []string{"host"}},
		{"count:10m-count:sys.cpu.user", naiveQuery{agg: "count", step: 600_000, dsFn: "count"}, map[string]string{}, []string{"cpu", "extra", "host"}},
		{"zimsum:15m-first:sys.cpu.user{host=wildcard(*)}{cpu=literal_or(0)}", naiveQuery{match: tagIs("cpu", "0"), groupBy: []string{"host"}, agg: "sum", step: 900_000, dsFn: "first"}, nil, nil},
		{"mimmax:1m-last:sys.cpu.user{host=regexp(^[ab]$),cpu=not_literal_or(1)}", naiveQuery{match: func(t map[string]string) bool { return (t["host"] == "a" || t["host"] == "b") && t["cpu"] == "0" }, groupBy: []string{"cpu", "host"}, agg: "max", step: 60_000, dsFn: "last"}, nil, nil},
		{"sum:explicit_tags:sys.cpu.user{host=a,cpu=0}", naiveQuery{match: func(t map[string]string) bool { return t["host"] == "a" && t["cpu"] == "0" && noExtra(t) }, groupBy: []string{"cpu", "host"}, agg: "sum"},
			map[string]string{"host": "a", "cpu": "0"}, []string{}},
		{"avg:30m-avg:sys.cpu.user{host=a}{extra=not_key()}", naiveQuery{match: func(t map[string]string) bool { return t["host"] == "a" && noExtra(t) }, groupBy: []string{"host"}, agg: "avg", step: 1800_000, dsFn: "avg"}, nil, nil},
		{"none:1h-sum:sys.cpu.user{host=c}", naiveQuery{match: tagIs("host", "c"), agg: "none", step: 3600_000, dsFn: "sum"}, nil, nil},
		{"sum:0all-max:sys.cpu.user{host=*}", naiveQuery{}, nil, nil}, // checked below
	}
	for _, c := range cases {
		t.Run(c.m, func(t *testing.T) {
			ans := e.query(fmt.Sprintf("/api/query?start=2h-ago&m=%s", url.QueryEscape(c.m)))
			if strings.Contains(c.m, "0all") {
				// One point per host at the start of the range: the sum of
				// the maximum of each series.
				if len(ans) != 3 {
					t.Fatalf("%d answers", len(ans))
				}
				for _, a := range ans {
					maxOf := map[string]float64{}
					for _, p := range pts {
						if p.metric == "sys.cpu.user" && p.tags["host"] == a.Tags["host"] {
							maxOf[fmt.Sprint(p.tags)] = max(maxOf[fmt.Sprint(p.tags)], p.v)
						}
					}
					want := 0.0
					for _, v := range maxOf {
						want += v
					}
					if len(a.Dps) != 1 || a.Dps[strconv.FormatInt(start/1000, 10)] == nil || *a.Dps[strconv.FormatInt(start/1000, 10)] != want {
						t.Fatalf("host %s: %v, want %g at the start", a.Tags["host"], a.Dps, want)
					}
				}
				return
			}
			q := c.q
			q.metric, q.start, q.end = "sys.cpu.user", start, end
			want := naive(pts, q)
			if err := sameResult(keyed(t, ans, q.groupBy, q.agg == "none", false), want); err != nil {
				t.Fatal(err)
			}
			for _, a := range ans {
				if a.Metric != "sys.cpu.user" {
					t.Fatalf("metric %q", a.Metric)
				}
			}
			if c.tags != nil && (fmt.Sprint(ans[0].Tags) != fmt.Sprint(c.tags) || fmt.Sprint(ans[0].AggregateTags) != fmt.Sprint(c.aggTg)) {
				t.Fatalf("tags %v aggregateTags %v, want %v and %v", ans[0].Tags, ans[0].AggregateTags, c.tags, c.aggTg)
			}
		})
	}
}

func queryRateAgainstNaive(t *testing.T, e *env, pts []seedPoint) {
	start, end := nowMs()-2*3600_000, nowMs()
	cases := []struct {
		m string
		r rateSpec
	}{
		{"sum:rate:net.bytes{host=*}", rateSpec{counterMax: math.MaxInt64}},
		{"sum:rate{counter}:net.bytes{host=*}", rateSpec{counter: true, counterMax: math.MaxInt64}},
		{"sum:rate{counter,100000,1000}:net.bytes{host=*}", rateSpec{counter: true, counterMax: 100000, resetValue: 1000}},
		{"sum:rate{counter,100000}:net.bytes{host=*}", rateSpec{counter: true, counterMax: 100000}},
		{"sum:rate{dropcounter}:net.bytes{host=*}", rateSpec{counter: true, counterMax: math.MaxInt64, dropResets: true}},
		{"avg:1m-max:rate{dropcounter}:net.bytes", rateSpec{counter: true, counterMax: math.MaxInt64, dropResets: true}},
	}
	for _, c := range cases {
		t.Run(c.m, func(t *testing.T) {
			ans := e.query(fmt.Sprintf("/api/query?start=%d&end=%d&m=%s", start/1000, end/1000, url.QueryEscape(c.m)))
			q := naiveQuery{metric: "net.bytes", start: start, end: end, agg: "sum", groupBy: []string{"host"}, rate: &c.r}
			if strings.HasPrefix(c.m, "avg:1m-max") {
				q.agg, q.groupBy, q.step, q.dsFn = "avg", nil, 60_000, "max"
			}
			want := naive(pts, q)
			if err := sameResult(keyed(t, ans, q.groupBy, false, false), want); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The reset of host a's counter shows as a drop without counter, and
	// is skipped with dropcounter.
	plain := e.query(fmt.Sprintf("/api/query?start=%d&m=sum:rate:net.bytes{host=a}", start/1000))
	drop := e.query(fmt.Sprintf("/api/query?start=%d&m=sum:rate{dropcounter}:net.bytes{host=a}", start/1000))
	reset := strconv.FormatInt((start+3600_000)/1000, 10)
	if v := plain[0].Dps[reset]; v == nil || *v >= 0 {
		t.Fatalf("plain rate at the reset: %v, want negative", v)
	}
	if _, ok := drop[0].Dps[reset]; ok || len(drop[0].Dps) != len(plain[0].Dps)-1 {
		t.Fatalf("dropcounter kept the reset")
	}
}

func queryFillPoliciesAndResolution(t *testing.T, e *env, pts []seedPoint) {
	start, end := nowMs()-2*3600_000, nowMs()
	for _, fill := range []string{"nan", "null", "zero"} {
		for _, agg := range []string{"sum", "none"} {
			m := fmt.Sprintf("%s:2m-avg-%s:sys.sparse{host=*}", agg, fill)
			ans := e.query("/api/query?start=2h-ago&m=" + url.QueryEscape(m))
			nf := fill
			if fill == "null" {
				nf = "nan"
			}
			want := naive(pts, naiveQuery{metric: "sys.sparse", start: start, end: end, step: 120_000, dsFn: "avg", fill: nf, agg: agg, groupBy: []string{"host"}})
			if err := sameResult(keyed(t, ans, []string{"host"}, agg == "none", false), want); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
		}
	}
	// Missing buckets are null in the JSON (not NaN, which is not JSON).
	st, b, _ := e.do("GET", "/api/query?start=2h-ago&m="+url.QueryEscape("sum:1m-avg-nan:sys.sparse{host=a}"), "")
	if st != 200 || !strings.Contains(string(b), ":null") || strings.Contains(string(b), "NaN") {
		t.Fatalf("status %d: %.300s", st, b)
	}
	// Millisecond resolution keys; seconds otherwise.
	ms := e.query("/api/query?start=2h-ago&ms=true&m=" + url.QueryEscape("sum:sys.cpu.user{host=a,cpu=1}"))
	sec := e.query("/api/query?start=2h-ago&m=" + url.QueryEscape("sum:sys.cpu.user{host=a,cpu=1}"))
	for k := range ms[0].Dps {
		if len(k) != 13 || sec[0].Dps[k[:10]] == nil || *sec[0].Dps[k[:10]] != *ms[0].Dps[k] {
			t.Fatalf("ms key %s has no matching seconds key", k)
		}
	}
	// Points within one second are combined in second resolution.
	e.put("", fmt.Sprintf(`[{"metric":"sub","timestamp":%d,"value":1,"tags":{"h":"a"}},{"metric":"sub","timestamp":%d,"value":5,"tags":{"h":"a"}}]`, nowMs()-1900, nowMs()-1100), http.StatusNoContent)
	sub := e.query("/api/query?start=1m-ago&m=sum:sub")
	if v := sub[0].Dps[strconv.FormatInt(nowSec()-2, 10)]; len(sub[0].Dps) != 1 || v == nil || *v != 6 {
		t.Fatalf("sub-second points: %v", sub[0].Dps)
	}
}

// queryGrafanaRequests replays request bodies as Grafana sends them
// and decodes the answers the way Grafana does.
func queryGrafanaRequests(t *testing.T, e *env, pts []seedPoint) {
	start, end := nowMs()-2*3600_000, nowMs()

	// Browser data source, OpenTSDB 2.3: maps answers to targets by
	// query.index and reads dps as an object of seconds.
	body, err := os.ReadFile("testdata/grafana_frontend_v2.3.json")
	if err != nil {
		t.Fatal(err)
	}
	st, b, _ := e.do("POST", "/api/query", string(body), "Content-Type", "application/json;charset=UTF-8")
	if st != 200 {
		t.Fatalf("status %d: %s", st, b)
	}
	var v23 []answer
	if err := json.Unmarshal(b, &v23); err != nil {
		t.Fatal(err)
	}
	var byIndex [2][]answer
	for _, a := range v23 {
		if a.Query == nil {
			t.Fatalf("answer without query (showQuery): %+v", a)
		}
		byIndex[a.Query.Index] = append(byIndex[a.Query.Index], a)
	}
	want := naive(pts, naiveQuery{metric: "sys.cpu.user", start: start, end: end, step: 300_000, dsFn: "avg", agg: "sum", groupBy: []string{"host"}, match: tagIs("cpu", "0", "1")})
	if err := sameResult(keyed(t, byIndex[0], []string{"host"}, false, false), want); err != nil {
		t.Fatalf("query 0: %v", err)
	}
	want = naive(pts, naiveQuery{metric: "net.bytes", start: start, end: end, step: 100, dsFn: "max", agg: "sum", groupBy: []string{"host"}, match: tagIs("host", "a"),
		rate: &rateSpec{counter: true, counterMax: math.MaxInt64, dropResets: true}})
	if err := sameResult(keyed(t, byIndex[1], []string{"host"}, false, false), want); err != nil {
		t.Fatalf("query 1: %v", err)
	}

	// Server-side data source, OpenTSDB 2.4: ?arrays=true, dps as
	// [[seconds, value], ...] decoded into float64 (null reads as 0).
	body, err = os.ReadFile("testdata/grafana_backend_v2.4.json")
	if err != nil {
		t.Fatal(err)
	}
	st, b, _ = e.do("POST", "/api/query?arrays=true", string(body), "Content-Type", "application/json")
	if st != 200 {
		t.Fatalf("status %d: %s", st, b)
	}
	var v24 []struct {
		Metric        string            `json:"metric"`
		Tags          map[string]string `json:"tags"`
		AggregateTags []string          `json:"aggregateTags"`
		DataPoints    [][]float64       `json:"dps"`
	}
	if err := json.Unmarshal(b, &v24); err != nil {
		t.Fatalf("Grafana cannot decode the answer: %v", err)
	}
	// avg:1m-avg-nan{host=a} (both cpus, and the extra series), max:10m-max
	// over host b's cpus, and the summed rate of every host's counter.
	if len(v24) != 3 || v24[0].Tags["host"] != "a" || v24[1].Tags["host"] != "b" || fmt.Sprint(v24[1].AggregateTags) != "[cpu]" || v24[2].Metric != "net.bytes" {
		t.Fatalf("answers: %.600s", b)
	}
	if n := len(v24[0].DataPoints); n != 121 { // 1-minute buckets over two hours, both ends included
		t.Fatalf("%d points with fill nan, want 121", n)
	}
	wantMax := naive(pts, naiveQuery{metric: "sys.cpu.user", start: start, end: end, step: 600_000, dsFn: "max", agg: "max", match: func(t map[string]string) bool { return t["host"] == "b" && t["extra"] == "" }})[""]
	if len(v24[1].DataPoints) != len(wantMax) {
		t.Fatalf("%d points, want %d", len(v24[1].DataPoints), len(wantMax))
	}
	for _, p := range v24[1].DataPoints {
		if w := wantMax[int64(p[0])*1000]; p[1] != w {
			t.Fatalf("max at %v: %v, want %v", p[0], p[1], w)
		}
	}
	for i := 1; i < len(v24[2].DataPoints); i++ {
		if v24[2].DataPoints[i][0] <= v24[2].DataPoints[i-1][0] {
			t.Fatal("arrays are not in time order")
		}
	}
}

func queryBadQueries(t *testing.T, e *env, _ []seedPoint) {
	e.a.maxQueryPoints = 1000
	defer func() { e.a.maxQueryPoints = DefaultMaxQueryPoints }()
	cases := []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"GET", "/api/query?start=1h-ago&m=p98:sys.cpu.user", "", 400, `aggregator "p98" is not supported`},
		{"GET", "/api/query?start=1h-ago&m=sum:1m-mode:sys.cpu.user", "", 400, `aggregator "mode" is not supported`},
		{"GET", "/api/query?start=1h-ago&m=sum:1m-avg-linear:sys.cpu.user", "", 400, `fill policy "linear" is not supported`},
		{"GET", "/api/query?start=1h-ago&m=sum:1x-avg:sys.cpu.user", "", 400, `invalid duration "1x"`},
		{"GET", "/api/query?start=1h-ago&m=sum:1w-avg:sys.cpu.user&use_calendar", "", 400, "calendar downsampling"},
		{"GET", "/api/query?m=sum:sys.cpu.user", "", 400, "missing start time"},
		{"GET", "/api/query?start=1h-ago", "", 400, "no queries"},
		{"GET", "/api/query?start=1h-ago&end=2h-ago&m=sum:x", "", 400, "is before start time"},
		{"GET", "/api/query?start=-5&m=sum:x", "", 400, "negative timestamps"},
		{"GET", "/api/query?start=yesterday&m=sum:x", "", 400, "want a Unix timestamp"},
		{"GET", "/api/query?start=1h-ago&m=sum:sys.cpu.user{host=a", "", 400, "unbalanced braces"},
		{"GET", "/api/query?start=1h-ago&m=sum:sys.cpu.user{host=regexp(()}", "", 400, "missing closing )"},
		{"GET", "/api/query?start=1h-ago&m=sum:sys.cpu.user{host=fuzzy(a)}", "", 400, `unknown filter type "fuzzy"`},
		{"GET", "/api/query?start=1h-ago&m=sum:sys.cpu.user{ho$t=a}", "", 400, "character '$'"},
		{"GET", "/api/query?start=1h-ago&tsuids=000001000001000001", "", 400, "tsuids are not supported"},
		{"GET", "/api/query?start=2h-ago&m=sum:sys.cpu.user{host=*}", "", 400, "more than 1000 data points"},
		{"GET", "/api/query?start=2h-ago&m=none:sys.cpu.user", "", 400, "more than 1000 data points"},
		{"GET", "/api/query?start=2h-ago&m=sum:1ms-avg-zero:sys.cpu.user", "", 400, "more than 1000 data points"},
		{"POST", "/api/query", `{"start":"1h-ago","queries":[{"metric":"x"}]}`, 400, "missing aggregator"},
		{"POST", "/api/query", `{"start":"1h-ago","queries":[{"aggregator":"sum"}]}`, 400, "missing metric name"},
		{"POST", "/api/query", `{"start":"1h-ago","queries":[{"aggregator":"sum","metric":"x","filters":[{"type":"wildcard","tagk":"h","filter":""}]}]}`, 400, "no pattern"},
		{"POST", "/api/query", `{"start":"1h-ago","queries":[{"aggregator":"sum","metric":"x","rate":true,"rateOptions":{"counterMax":-1}}]}`, 400, "must be positive"},
		{"POST", "/api/query", `{"start":"1h-ago","queries":{"aggregator":"sum"}}`, 400, "field queries must not be a JSON object"},
		{"POST", "/api/query", `{"start":true,"queries":[]}`, 400, "a time must be a number or a string"},
		{"POST", "/api/query", `{"start":`, 400, "malformed JSON"},
		{"POST", "/api/query", `{"start":"1h-ago","delete":true,"queries":[{"aggregator":"sum","metric":"x"}]}`, 400, "delete is not supported"},
		{"POST", "/api/query", `{"start":"1h-ago","timezone":"Mars/Olympus","queries":[{"aggregator":"sum","metric":"x"}]}`, 400, "timezone"},
		{"PUT", "/api/query", ``, 405, "not allowed"},
		{"GET", "/api/query/exp", ``, 501, "not implemented"},
	}
	for _, c := range cases {
		st, b, _ := e.do(c.method, c.path, c.body)
		var eb errorBody
		if st != c.status || json.Unmarshal(b, &eb) != nil || eb.Error.Code != c.status || !strings.Contains(eb.Error.Message, c.msg) {
			t.Errorf("%s %s %s: %d %.300s, want %d with %q", c.method, c.path, c.body, st, b, c.status, c.msg)
		}
	}
	// A metric never written: 400 as OpenTSDB answers; a known metric
	// with no data in the range: an empty answer.
	st, b, _ := e.do("GET", "/api/query?start=1h-ago&m=sum:no.such.metric", "")
	if st != 400 || !strings.Contains(string(b), `No such name for 'metrics': 'no.such.metric'`) {
		t.Fatalf("unknown metric: %d %s", st, b)
	}
	if ans := e.query("/api/query?start=1000&end=2000&m=sum:sys.cpu.user"); len(ans) != 0 {
		t.Fatalf("answer %+v for a range without data", ans)
	}
}

func queryAbsoluteTimes(t *testing.T, e *env, _ []seedPoint) {
	// The same hour in four spellings gives the same answer.
	var first []answer
	for _, s := range []string{
		fmt.Sprintf("start=%d&end=%d", nowSec()-3600, nowSec()),
		fmt.Sprintf("start=%d&end=%d", nowMs()-3600_000, nowMs()),
		"start=2024/03/01-11:00:00&end=2024/03/01-12:00:00",
		"start=2024/03/01-12:00:00&end=2024/03/01-13:00:00&tz=Europe/Paris",
	} {
		ans := e.query("/api/query?" + s + "&m=" + url.QueryEscape("sum:10m-avg:sys.cpu.user{host=*}"))
		if len(ans) != 3 || len(ans[0].Dps) != 6 {
			t.Fatalf("%s: %d answers", s, len(ans))
		}
		if first == nil {
			first = ans
		} else if mustJSON(t, ans) != mustJSON(t, first) {
			t.Fatalf("%s: answer differs", s)
		}
	}
}

// queryBackendAndPackageAggregationAgree runs random queries both
// through the backend's aggregation and through this package's, and
// checks both against the naive engine.
func queryBackendAndPackageAggregationAgree(t *testing.T, e *env, pts []seedPoint) {
	seed := uint64(7)
	rng := rand.New(rand.NewPCG(seed, seed))
	t.Logf("seed %d", seed)
	aggs := []string{"avg", "sum", "min", "max", "count", "first", "last", "zimsum", "mimmax", "mimmin", "p50", "p90", "p999", "dev"}
	dsFns := []string{"avg", "sum", "min", "max", "count", "first", "last", "p75", "p95", "p99", "dev"}
	steps := []string{"", "30s", "1m", "7m", "1h"}
	stepMs := map[string]int64{"30s": 30_000, "1m": 60_000, "7m": 420_000, "1h": 3600_000}
	filters := []struct {
		spec    string
		match   func(map[string]string) bool
		groupBy []string
	}{
		{"", nil, nil},
		{"{host=*}", nil, []string{"host"}},
		{"{host=a|c}", tagIs("host", "a", "c"), []string{"host"}},
		{"{cpu=*}{host=b}", tagIs("host", "b"), []string{"cpu"}},
		{"{host=*,cpu=*}", func(t map[string]string) bool { return t["cpu"] != "" }, []string{"cpu", "host"}},
	}
	for range 40 {
		agg := aggs[rng.IntN(len(aggs))]
		step := steps[rng.IntN(len(steps))]
		dsFn := dsFns[rng.IntN(len(dsFns))]
		f := filters[rng.IntN(len(filters))]
		startOff := int64(rng.IntN(7200)) * 1000
		endOff := int64(rng.IntN(int(7200 - startOff/1000)))
		start, end := nowMs()-7200_000+startOff, nowMs()-endOff*1000
		m := agg + ":"
		if step != "" {
			m += step + "-" + dsFn + ":"
		}
		m += "sys.cpu.user" + f.spec
		path := fmt.Sprintf("/api/query?start=%d&end=%d&ms=true&m=%s", start, end, url.QueryEscape(m))
		e.a.forceEngine = false
		viaBackend := e.query(path)
		e.a.forceEngine = true
		viaPackage := e.query(path)
		if mustJSON(t, viaBackend) != mustJSON(t, viaPackage) {
			t.Fatalf("%s: backend and package aggregation differ:\n%s\n%s", path, mustJSON(t, viaBackend), mustJSON(t, viaPackage))
		}
		want := naive(pts, naiveQuery{metric: "sys.cpu.user", start: start, end: end, step: stepMs[step], dsFn: dsFn, agg: agg, match: f.match, groupBy: f.groupBy})
		if err := sameResult(keyed(t, viaBackend, f.groupBy, false, true), want); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	e.a.forceEngine = false
}

// queryUnescapedURL sends the m= expression unescaped, as curl -g and
// many scripts do.
func queryUnescapedURL(t *testing.T, e *env, _ []seedPoint) {
	c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /api/query?start=2h-ago&m=sum:10m-avg:sys.cpu.user{host=a|b}{cpu=*} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans []answer
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || resp.StatusCode != 200 || len(ans) != 2 {
		t.Fatalf("status %d, %d answers (%v)", resp.StatusCode, len(ans), err)
	}
}
