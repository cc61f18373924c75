package prom

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/tributarydb/tributary/httpapi"
)

// TestQuery_DelayedNameRemoval: TSBS's cpu-max-all query, which groups a
// function's result by __name__, answers with one series per metric when
// the name is removed late, and fails as in Prometheus 2 when the option
// turns it off.
func TestQuery_DelayedNameRemoval(t *testing.T) {
	const qs = `max(max_over_time({__name__=~"cpu_(usage_user|usage_system)",hostname="host_35"}[1h])) by (__name__)`
	req := &prompb.WriteRequest{}
	end := ms(testNow)
	for i, name := range []string{"cpu_usage_user", "cpu_usage_system", "cpu_usage_idle"} {
		for _, host := range []string{"host_35", "host_36"} {
			ts := prompb.TimeSeries{Labels: lbls("__name__", name, "hostname", host)}
			for k := int64(0); k < 30; k++ {
				v := float64(i*100) + float64(k)
				if host != "host_35" {
					v += 1000 // must not win the max
				}
				ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: end - 3600_000 + k*60_000, Value: v})
			}
			req.Timeseries = append(req.Timeseries, ts)
		}
	}
	params := url.Values{"query": {qs}, "time": {unixParam(end)}}

	on := newTestEnv(t, nil, httpapi.Config{}, Options{})
	on.write(req)
	selects := func() int64 { return on.stats.Get(StatSelectsDownsampled) + on.stats.Get(StatSelectsRaw) }
	before := selects()
	st, r, body := on.call(http.MethodGet, "/api/v1/query", params)
	if st != http.StatusOK {
		t.Fatalf("delayed name removal on: %d %s", st, body)
	}
	// Evaluated twice (see keepname.go), the one selector is read once:
	// the second evaluation reuses the first's read (selectmemo.go).
	if n := selects() - before; n != 1 {
		t.Fatalf("the query read the store %d times, want once", n)
	}
	var got struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &got); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, s := range got.Result {
		if len(s.Metric) != 1 {
			t.Fatalf("labels %v, want only __name__", s.Metric)
		}
		lines = append(lines, s.Metric["__name__"]+"="+s.Value[1].(string))
	}
	slices.Sort(lines)
	if want := []string{"cpu_usage_system=129", "cpu_usage_user=29"}; !slices.Equal(lines, want) {
		t.Fatalf("got %v, want %v", lines, want)
	}
	if len(r.Infos) != 1 || !strings.Contains(r.Infos[0], "__name__ kept") {
		t.Fatalf("infos %q, want the note that __name__ was kept", r.Infos)
	}
	// As a range query too.
	rp := url.Values{"query": {qs}, "start": {unixParam(end - 600_000)}, "end": {unixParam(end)}, "step": {"60"}}
	if st, _, body := on.call(http.MethodGet, "/api/v1/query_range", rp); st != http.StatusOK || !strings.Contains(string(body), "cpu_usage_system") {
		t.Fatalf("range query: %d %s", st, body)
	}
	// A query Prometheus answers keeps Prometheus's answer: one metric,
	// the name removed at the end, no note.
	one := url.Values{"query": {`max by (__name__) (max_over_time(cpu_usage_user{hostname="host_35"}[1h]))`}, "time": {unixParam(end)}}
	st, r, body = on.call(http.MethodGet, "/api/v1/query", one)
	if st != http.StatusOK || !strings.Contains(string(r.Data), `{"metric":{},"value":[`) || len(r.Infos) != 0 {
		t.Fatalf("single metric: %d %s, want one series without labels", st, body)
	}

	// label_replace onto __name__ keeps the names (Prometheus 3); a bare
	// selection of two metrics through a function still collides.
	lr := url.Values{"query": {`label_replace(max_over_time({__name__=~"cpu_usage_(user|system)",hostname="host_35"}[1h]), "__name__", "$1", "__name__", "(.+)")`}, "time": {unixParam(end)}}
	if st, _, body := on.call(http.MethodGet, "/api/v1/query", lr); st != http.StatusOK || !strings.Contains(string(body), `"__name__":"cpu_usage_user"`) {
		t.Fatalf("label_replace: %d %s", st, body)
	}
	bare := url.Values{"query": {`max_over_time({__name__=~"cpu_usage_(user|system)",hostname="host_35"}[1h])`}, "time": {unixParam(end)}}
	if st, _, body := on.call(http.MethodGet, "/api/v1/query", bare); st != http.StatusUnprocessableEntity {
		t.Fatalf("bare: %d %s, want 422", st, body)
	}

	off := newTestEnv(t, nil, httpapi.Config{}, Options{DisableDelayedNameRemoval: true})
	off.write(req)
	st, r, body = off.call(http.MethodGet, "/api/v1/query", params)
	if st != http.StatusUnprocessableEntity || r.ErrorType != "execution" || !strings.Contains(r.Error, "same labelset") {
		t.Fatalf("delayed name removal off: %d %s, want 422 about the same labelset", st, body)
	}
	if st, _, body := off.call(http.MethodGet, "/api/v1/query", lr); st != http.StatusUnprocessableEntity {
		t.Fatalf("label_replace, delayed name removal off: %d %s, want 422", st, body)
	}
}

// TestKeptNameCache answers as keepGroupedNames, from the cache the second
// time, and stays bounded.
func TestKeptNameCache(t *testing.T) {
	var c keptNameCache
	for i := range maxCachedQueries + 10 {
		for _, qs := range []string{
			fmt.Sprintf(`max by (__name__) (max_over_time({__name__=~"a|b", h="%d"}[1m]))`, i),
			fmt.Sprintf(`max by (h) (x{h="%d"})`, i),
			fmt.Sprintf(`max by (__name__) (x{h="%d"`, i), // does not parse
		} {
			wantQs, wantOK := keepGroupedNames(qs)
			for range 2 {
				if got, ok := c.keepGroupedNames(qs); got != wantQs || ok != wantOK {
					t.Fatalf("%s: got %q %v, want %q %v", qs, got, ok, wantQs, wantOK)
				}
			}
			if c.kept.len() > maxCachedQueries {
				t.Fatalf("%d queries cached, bound %d", c.kept.len(), maxCachedQueries)
			}
		}
	}
}
