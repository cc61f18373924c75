package prom

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"

	"github.com/tributarydb/tributary/httpapi"
)

// TestMeta_SeriesLabelsAndValues: the metadata endpoints over GET and
// POST, with match[] unions, limits and the time parameters Grafana sends.
func TestMeta_SeriesLabelsAndValues(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	e.writeChunked(genData(rand.New(rand.NewPCG(1, 2))), nil)
	span := url.Values{"start": {unixParam(ms(testNow.Add(-time.Hour)))}, "end": {testNow.Format(time.RFC3339)}}
	with := func(v url.Values) url.Values {
		out := url.Values{}
		for k, vs := range span {
			out[k] = vs
		}
		for k, vs := range v {
			out[k] = vs
		}
		return out
	}
	for _, tc := range []struct {
		name, path string
		params     url.Values
		want       string
		warnings   int
	}{
		{"label names", "/api/v1/labels", span, `["__name__","dc","host","kind"]`, 0},
		{"label names of a metric", "/api/v1/labels", with(url.Values{"match[]": {"sparse"}}), `["__name__","host"]`, 0},
		{"label names, union", "/api/v1/labels", with(url.Values{"match[]": {"sparse", "special"}}), `["__name__","host","kind"]`, 0},
		{"label names, limit", "/api/v1/labels", with(url.Values{"limit": {"2"}}), `["__name__","dc"]`, 1},
		{"metric names", "/api/v1/label/__name__/values", span, `["counter_total","gauge","sparse","special"]`, 0},
		{"values with match", "/api/v1/label/host/values", with(url.Values{"match[]": {`gauge{dc="a"}`}}), `["h0","h2"]`, 0},
		{"values, union", "/api/v1/label/host/values", with(url.Values{"match[]": {`gauge{dc="a"}`, `gauge{host="h3"}`}}), `["h0","h2","h3"]`, 0},
		{"values of an unknown label", "/api/v1/label/nope/values", span, `[]`, 0},
		{"escaped label name", "/api/v1/label/U__host/values", url.Values{"match[]": {`sparse{host="h1"}`}}, `["h1"]`, 0},
		{"series", "/api/v1/series", with(url.Values{"match[]": {`gauge{host=~"h[01]"}`}}),
			`[{"__name__":"gauge","dc":"a","host":"h0"},{"__name__":"gauge","dc":"b","host":"h1"}]`, 0},
		{"series, union without duplicates", "/api/v1/series", url.Values{"match[]": {`sparse{host="h0"}`, `{__name__="sparse",host=~"h0|h1"}`}},
			`[{"__name__":"sparse","host":"h0"},{"__name__":"sparse","host":"h1"}]`, 0},
		{"series, limit", "/api/v1/series", url.Values{"match[]": {`sparse`}, "limit": {"1"}}, `[{"__name__":"sparse","host":"h0"}]`, 1},
	} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			t.Run(tc.name+"/"+method, func(t *testing.T) {
				st, r, body := e.call(method, tc.path, tc.params)
				if st != 200 || r.Status != "success" || string(r.Data) != tc.want || len(r.Warnings) != tc.warnings {
					t.Fatalf("%d %s, want %s with %d warnings", st, body, tc.want, tc.warnings)
				}
			})
		}
	}
}

// TestMeta_Grafana replays what Grafana's Prometheus data source sends:
// the "Save & test" health check (instant 1+1 and buildinfo), the metrics
// browser and query editor requests (POST forms by default), exemplars,
// metadata, rules and alerts.
func TestMeta_Grafana(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	e.writeChunked(genData(rand.New(rand.NewPCG(3, 4))), nil)
	e.write(&prompb.WriteRequest{Metadata: []prompb.MetricMetadata{
		{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "gauge", Help: "A gauge."},
		{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "counter_total", Help: "A counter."},
	}})
	post := func(path string, v url.Values) apiResponse {
		t.Helper()
		st, r, body := e.call(http.MethodPost, path, v)
		if st != 200 || r.Status != "success" {
			t.Fatalf("POST %s %v: %d %s", path, v, st, body)
		}
		return r
	}
	get := func(path string, v url.Values) apiResponse {
		t.Helper()
		st, r, body := e.call(http.MethodGet, path, v)
		if st != 200 || r.Status != "success" {
			t.Fatalf("GET %s %v: %d %s", path, v, st, body)
		}
		return r
	}
	// Health check: an instant query of 1+1 at t=4s, then buildinfo.
	if r := post("/api/v1/query", url.Values{"query": {"1+1"}, "time": {"4"}}); string(r.Data) != `{"resultType":"scalar","result":[4,"2"]}` {
		t.Fatalf("health check: %s", r.Data)
	}
	var bi struct {
		Version, Revision, GoVersion string
		Features                     map[string]string
	}
	must(t, json.Unmarshal(get("/api/v1/status/buildinfo", nil).Data, &bi))
	if bi.Version != DefaultVersion || bi.GoVersion == "" || len(bi.Features) != 0 {
		t.Fatalf("buildinfo: %+v", bi)
	}
	// Query editor: range query with Grafana's float seconds and step.
	end := float64(ms(testNow.Truncate(time.Minute))) / 1000
	r := post("/api/v1/query_range", url.Values{
		"query": {`sum by (host) (rate(counter_total[1m]))`}, "start": {formatFloat(end - 3600)}, "end": {formatFloat(end)}, "step": {"15"},
	})
	var m struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	must(t, json.Unmarshal(r.Data, &m))
	if m.ResultType != "matrix" || len(m.Result) != 4 {
		t.Fatalf("query_range: %s", r.Data)
	}
	// Metrics browser.
	if r := get("/api/v1/label/__name__/values", url.Values{"start": {formatFloat(end - 3600)}, "end": {formatFloat(end)}}); !strings.Contains(string(r.Data), `"gauge"`) {
		t.Fatalf("metric names: %s", r.Data)
	}
	if r := post("/api/v1/series", url.Values{"match[]": {`{__name__="gauge"}`}, "start": {formatFloat(end - 3600)}, "end": {formatFloat(end)}}); strings.Count(string(r.Data), "__name__") != 4 {
		t.Fatalf("series: %s", r.Data)
	}
	if r := get("/api/v1/metadata", nil); string(r.Data) != `{"counter_total":[{"type":"counter","help":"A counter.","unit":""}],"gauge":[{"type":"gauge","help":"A gauge.","unit":""}]}` {
		t.Fatalf("metadata: %s", r.Data)
	}
	if r := get("/api/v1/metadata", url.Values{"limit": {"1"}, "limit_per_metric": {"0"}}); string(r.Data) != `{"counter_total":[]}` {
		t.Fatalf("metadata with limits: %s", r.Data)
	}
	if r := post("/api/v1/query_exemplars", url.Values{"query": {"gauge"}, "start": {"0"}, "end": {"1"}}); string(r.Data) != `[]` {
		t.Fatalf("exemplars: %s", r.Data)
	}
	if r := post("/api/v1/format_query", url.Values{"query": {"sum(rate(x[5m]))by(job)"}}); string(r.Data) != `"sum by (job) (rate(x[5m]))"` {
		t.Fatalf("format_query: %s", r.Data)
	}
	if r := get("/api/v1/rules", nil); string(r.Data) != `{"groups":[]}` {
		t.Fatalf("rules: %s", r.Data)
	}
	if r := get("/api/v1/alerts", nil); string(r.Data) != `{"alerts":[]}` {
		t.Fatalf("alerts: %s", r.Data)
	}
}

func formatFloat(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}
