package opentsdb

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func queryLast(t *testing.T, e *env, pts []seedPoint) {
	lastOf := func(metric string, match func(map[string]string) bool) map[string]seedPoint {
		out := map[string]seedPoint{}
		for _, p := range pts {
			if k := metric + fmt.Sprint(p.tags); p.metric == metric && match(p.tags) && p.t >= out[k].t {
				out[k] = p
			}
		}
		return out
	}
	check := func(got []lastPoint, want map[string]seedPoint) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%d last points, want %d: %+v", len(got), len(want), got)
		}
		for _, g := range got {
			w, ok := want[g.Metric+fmt.Sprint(g.Tags)]
			if !ok || g.Metric != w.metric || g.Timestamp != w.t || g.Value != strconv.FormatFloat(w.v, 'f', -1, 64) || len(g.Tsuid) != 16 {
				t.Fatalf("last point %+v, want %+v", g, w)
			}
		}
	}
	var got []lastPoint
	e.getJSON("/api/query/last?timeseries="+url.QueryEscape("sys.cpu.user{host=a,cpu=0}")+"&back_scan=24&resolve=true", &got)
	check(got, lastOf("sys.cpu.user", func(t map[string]string) bool { return t["host"] == "a" && t["cpu"] == "0" }))

	st, b, _ := e.do("POST", "/api/query/last", `{"queries":[{"metric":"net.bytes","tags":{"host":"b"}},{"metric":"sys.sparse","tags":{"host":"*"}}],"resolveNames":true,"backScan":0}`)
	if st != 200 {
		t.Fatalf("status %d: %s", st, b)
	}
	got = nil
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := lastOf("net.bytes", func(t map[string]string) bool { return t["host"] == "b" })
	for k, v := range lastOf("sys.sparse", func(map[string]string) bool { return true }) {
		want[k] = v
	}
	check(got, want)
	// A back scan shorter than the data's age finds nothing.
	e.put("", fmt.Sprintf(`{"metric":"old","timestamp":%d,"value":1,"tags":{"h":"a"}}`, nowSec()-2*3600), 204)
	got = nil
	e.getJSON("/api/query/last?timeseries=old&back_scan=1", &got)
	if len(got) != 0 {
		t.Fatalf("back_scan=1 found %+v", got)
	}
	got = nil
	e.getJSON("/api/query/last?timeseries=old&back_scan=3", &got)
	if len(got) != 1 {
		t.Fatalf("back_scan=3 found %+v", got)
	}
	for _, c := range []struct{ method, path, body, msg string }{
		{"GET", "/api/query/last", "", "no queries"},
		{"GET", "/api/query/last?timeseries=x&back_scan=soon", "", "back_scan"},
		{"GET", "/api/query/last?tsuids=000001", "", "tsuids are not supported"},
		{"POST", "/api/query/last", `{"queries":[{"tsuids":["0001"]}]}`, "tsuids are not supported"},
		{"POST", "/api/query/last", `{"queries":[{"metric":""}]}`, "missing metric name"},
		{"GET", "/api/query/last?timeseries=" + url.QueryEscape("x{h=a"), "", "unbalanced braces"},
	} {
		st, b, _ := e.do(c.method, c.path, c.body)
		if st != 400 || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s %s %s: %d %s, want 400 with %q", c.method, c.path, c.body, st, b, c.msg)
		}
	}
}

func querySuggest(t *testing.T, e *env, _ []seedPoint) {
	cases := []struct {
		path string
		want []string
	}{
		{"/api/suggest?type=metrics&q=sys", []string{"sys.cpu.user", "sys.sparse"}},
		{"/api/suggest?type=metrics&q=sys&max=1", []string{"sys.cpu.user"}},
		{"/api/suggest?type=metrics&q=nothing", []string{}},
		{"/api/suggest?type=tagk&q=c", []string{"cpu"}},
		{"/api/suggest?type=tagk&q=ho", []string{"host"}},
		{"/api/suggest?type=tagv&q=a", []string{"a"}},
		{"/api/suggest?type=tagv&q=1", []string{"1"}},
	}
	for _, c := range cases {
		var got []string
		e.getJSON(c.path, &got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.path, got, c.want)
		}
	}
	// The metric list Grafana asks for when testing the data source.
	var all []string
	e.getJSON("/api/suggest?type=metrics&q=&max=1000", &all)
	if !slices.Contains(all, "net.bytes") || !slices.IsSorted(all) || slices.Contains(all, "__name__") {
		t.Errorf("all metrics: %q", all)
	}
	st, b, _ := e.do("POST", "/api/suggest", `{"type":"tagk","q":"ex","max":5}`)
	if st != 200 || compact(t, string(b)) != `["extra"]` {
		t.Errorf("POST suggest: %d %s", st, b)
	}
	for _, p := range []string{"/api/suggest?q=a", "/api/suggest?type=bogus", "/api/suggest?type=metrics&max=-1", "/api/suggest?type=metrics&max=lots"} {
		if st, b, _ := e.do("GET", p, ""); st != 400 {
			t.Errorf("%s: %d %s, want 400", p, st, b)
		}
	}
}

func queryLookup(t *testing.T, e *env, _ []seedPoint) {
	var ans lookupAnswer
	// Grafana's tag_values(sys.cpu.user, host) asks for m=sys.cpu.user{host=*}.
	e.getJSON("/api/search/lookup?limit=3000&m="+url.QueryEscape("sys.cpu.user{host=*}"), &ans)
	hosts := map[string]bool{}
	for _, r := range ans.Results {
		hosts[r.Tags["host"]] = true
		if r.Metric != "sys.cpu.user" || len(r.Tsuid) != 16 {
			t.Fatalf("result %+v", r)
		}
	}
	if ans.Type != "LOOKUP" || ans.TotalResults != 7 || len(ans.Results) != 7 || len(hosts) != 3 {
		t.Fatalf("lookup answer %+v", ans)
	}
	// tag_names(sys.cpu.user) asks for m=sys.cpu.user.
	ans = lookupAnswer{}
	e.getJSON("/api/search/lookup?limit=1000&m=sys.cpu.user", &ans)
	keys := map[string]bool{}
	for _, r := range ans.Results {
		for k := range r.Tags {
			keys[k] = true
		}
	}
	if fmt.Sprint(keys) != "map[cpu:true extra:true host:true]" {
		t.Fatalf("tag keys %v", keys)
	}
	ans = lookupAnswer{}
	e.getJSON("/api/search/lookup?m="+url.QueryEscape("*{*=c}")+"&limit=2", &ans)
	if ans.TotalResults != 4 || len(ans.Results) != 2 || ans.Metric != "*" {
		t.Fatalf("any metric with a tag value c: %+v", ans)
	}
	st, b, _ := e.do("POST", "/api/search/lookup", `{"metric":"net.bytes","tags":[{"key":"host","value":"a"}]}`)
	ans = lookupAnswer{}
	if err := json.Unmarshal(b, &ans); st != 200 || err != nil || ans.TotalResults != 1 || ans.Results[0].Tags["host"] != "a" {
		t.Fatalf("POST lookup: %d %s", st, b)
	}
	for _, p := range []string{"/api/search/lookup", "/api/search/lookup?m=" + url.QueryEscape("x{h=a"), "/api/search/lookup?m=x&limit=ten", "/api/search/lookup?m=" + url.QueryEscape("x{h$=a}")} {
		if st, b, _ := e.do("GET", p, ""); st != 400 {
			t.Errorf("%s: %d %s, want 400", p, st, b)
		}
	}
	if st, _, _ := e.do("GET", "/api/search/tsmeta?query=x", ""); st != 501 {
		t.Errorf("tsmeta search: %d, want 501", st)
	}
}

func queryMetadataEndpoints(t *testing.T, e *env, _ []seedPoint) {
	var aggs []string
	e.getJSON("/api/aggregators", &aggs)
	if !slices.IsSorted(aggs) || !slices.Contains(aggs, "avg") || !slices.Contains(aggs, "zimsum") || !slices.Contains(aggs, "none") || !slices.Contains(aggs, "p999") || !slices.Contains(aggs, "dev") || slices.Contains(aggs, "p98") {
		t.Errorf("aggregators %q", aggs)
	}
	var filters map[string]struct{ Examples, Description string }
	e.getJSON("/api/config/filters", &filters)
	for _, f := range []string{"literal_or", "iliteral_or", "not_literal_or", "not_iliteral_or", "wildcard", "iwildcard", "regexp", "not_key"} {
		if filters[f].Description == "" {
			t.Errorf("filter %s missing from %v", f, filters)
		}
	}
	var v map[string]string
	e.getJSON("/api/version", &v)
	if v["version"] != "2.4.0" {
		t.Errorf("version %v", v)
	}
	var stats []statPoint
	e.getJSON("/api/stats", &stats)
	found := false
	for _, s := range stats {
		found = found || s.Metric == "tributary.opentsdb_points_accepted"
	}
	if !found {
		t.Errorf("stats %+v", stats)
	}
	if st, b, _ := e.do("DELETE", "/api/version", ""); st != 405 || !strings.Contains(string(b), `"code":405`) {
		t.Errorf("DELETE /api/version: %d %s", st, b)
	}
	if st, _, _ := e.do("POST", "/api/annotation/bulk", "[]"); st != 501 {
		t.Errorf("/api/annotation/bulk: %d", st)
	}
}
