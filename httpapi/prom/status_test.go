package prom

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/tributarydb/tributary/httpapi"
)

// TestStatus_TSDBCountsTheIndex: /api/v1/status/tsdb counts the series
// the index holds, in Prometheus's shape, largest first, cut by limit.
func TestStatus_TSDBCountsTheIndex(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	req := &prompb.WriteRequest{}
	add := func(nv ...string) {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: lbls(nv...), Samples: []prompb.Sample{{Timestamp: ms(testNow) - 60_000, Value: 1}}})
	}
	add("__name__", "cpu", "host", "h0", "dc", "a")
	add("__name__", "cpu", "host", "h1", "dc", "a")
	add("__name__", "cpu", "host", "h2", "dc", "b")
	add("__name__", "mem", "host", "h0")
	e.write(req)
	type nv struct {
		Name  string `json:"name"`
		Value int64  `json:"value"`
	}
	var got struct {
		HeadStats struct {
			NumSeries     int64 `json:"numSeries"`
			NumLabelPairs int64 `json:"numLabelPairs"`
		} `json:"headStats"`
		ByMetric []nv `json:"seriesCountByMetricName"`
		ByName   []nv `json:"labelValueCountByLabelName"`
		Mem      []nv `json:"memoryInBytesByLabelName"`
		ByPair   []nv `json:"seriesCountByLabelValuePair"`
	}
	st, r, body := e.call(http.MethodGet, "/api/v1/status/tsdb", nil)
	if st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	must(t, json.Unmarshal(r.Data, &got))
	// Pairs: __name__=cpu, __name__=mem, host=h0..h2, dc=a, dc=b.
	if got.HeadStats.NumSeries != 4 || got.HeadStats.NumLabelPairs != 7 {
		t.Fatalf("head stats %+v", got.HeadStats)
	}
	if len(got.ByMetric) != 2 || got.ByMetric[0] != (nv{"cpu", 3}) || got.ByMetric[1] != (nv{"mem", 1}) {
		t.Fatalf("by metric %+v", got.ByMetric)
	}
	if got.ByName[0] != (nv{"host", 3}) || got.ByPair[0] != (nv{"__name__=cpu", 3}) || len(got.ByPair) != 7 {
		t.Fatalf("by label %+v, by pair %+v", got.ByName, got.ByPair)
	}
	if got.Mem[0] != (nv{"__name__", 6}) && got.Mem[0] != (nv{"host", 6}) {
		t.Fatalf("memory by label %+v", got.Mem)
	}
	_, r, _ = e.call(http.MethodGet, "/api/v1/status/tsdb", url.Values{"limit": {"1"}})
	must(t, json.Unmarshal(r.Data, &got))
	if len(got.ByMetric) != 1 || len(got.ByPair) != 1 || len(got.ByName) != 1 {
		t.Fatalf("limit 1: %s", r.Data)
	}
	if st, _, _ := e.call(http.MethodGet, "/api/v1/status/tsdb", url.Values{"limit": {"0"}}); st != 400 {
		t.Fatalf("limit 0: %d", st)
	}
	// Over the series limit: the first series are counted, with a warning.
	small := newTestEnvFor(t, e.node, e.node, httpapi.Config{Limits: httpapi.Limits{MaxSeriesPerQuery: 2}}, Options{})
	_, r, _ = small.call(http.MethodGet, "/api/v1/status/tsdb", nil)
	must(t, json.Unmarshal(r.Data, &got))
	if got.HeadStats.NumSeries != 2 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "more than 2 series") {
		t.Fatalf("over the limit: %s %q", r.Data, r.Warnings)
	}
}

// TestStatus_HousekeepingEndpoints: flags, runtime information,
// configuration and targets answer what applies.
func TestStatus_HousekeepingEndpoints(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{LookbackDelta: 7 * 60e9, Flags: map[string]string{"retention-raw": "360h0m0s", "http-listen": "127.0.0.1:7071"}})
	for _, tc := range []struct {
		path     string
		contains []string
	}{
		{"/api/v1/status/flags", []string{`"data":{"http-listen":"127.0.0.1:7071","retention-raw":"360h0m0s"}`}},
		{"/api/v1/status/runtimeinfo", []string{`"startTime":"20`, `"goroutineCount":`, `"storageRetention":"360h0m0s (raw samples`, `"reloadConfigSuccess":true`}},
		{"/api/v1/status/config", []string{`scrape_configs: []`, `lookback delta 7m0s`, `delayed name removal true`}},
		{"/api/v1/targets", []string{`"data":{"activeTargets":[],"droppedTargets":[],"droppedTargetCounts":{}}`}},
	} {
		st, _, body := e.call(http.MethodGet, tc.path, nil)
		if st != 200 {
			t.Fatalf("%s: %d %s", tc.path, st, body)
		}
		for _, c := range tc.contains {
			if !strings.Contains(string(body), c) {
				t.Fatalf("%s: %s lacks %s", tc.path, body, c)
			}
		}
	}
}
