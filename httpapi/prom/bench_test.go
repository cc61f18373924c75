package prom

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// reportCPU reports the process's CPU time per iteration since cpu0
// (every goroutine: the handler's, the node's readers', the GC's) as
// cpu-ns/op, which a loaded machine moves less than the wall time.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if d := processCPU() - cpu0; d > 0 && b.N > 0 {
		b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// benchNode holds a TSBS cpu-only data set: 10 hosts × 10 cpu metrics,
// one sample every 10 s for 6 hours, flushed to RocksDB except for the
// last hour, which stays in the head.
func benchNode(b *testing.B) (*node.Node, time.Time) {
	b.Helper()
	end := time.Date(2026, 6, 1, 6, 0, 0, 0, time.UTC)
	n, err := node.Open(node.Options{DataDir: b.TempDir(), Now: func() time.Time { return end }, FlushInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	fields := []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}
	const interval = 10_000
	start := end.Add(-6 * time.Hour).UnixMilli()
	for lo := start; lo < end.UnixMilli(); lo += 1800_000 {
		var batches []model.Batch
		for h := range 10 {
			for _, f := range fields {
				bt := model.Batch{Labels: []nlabels.Label{{Name: "__name__", Value: "cpu_" + f}, {Name: "hostname", Value: fmt.Sprintf("host_%d", h)},
					{Name: "region", Value: "eu-west-1"}, {Name: "datacenter", Value: "eu-west-1a"}}}
				for t := lo; t < lo+1800_000; t += interval {
					bt.Ts = append(bt.Ts, t)
					bt.Vs = append(bt.Vs, float64(rng.IntN(10000))/100)
				}
				batches = append(batches, bt)
			}
		}
		res, err := n.Write(context.Background(), batches)
		if err != nil || res.Rejected != 0 {
			b.Fatalf("write: %v %+v", err, res.Rejections)
		}
		if lo == end.UnixMilli()-3600_000-1800_000 {
			if err := n.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	return n, end
}

// BenchmarkQueryRange1hMaxByMinute is TSBS's single-groupby-1-1-1 in
// PromQL: the per-minute maximum of one host's cpu_usage_user over an
// hour, as Grafana sends it (form POST, aligned start, step 60). The
// "handler" case serves in process; "loopback" is the full HTTP round trip
// on 127.0.0.1 with a keep-alive client. Both report the mean and median
// (p50) milliseconds per query.
func BenchmarkQueryRange1hMaxByMinute(b *testing.B) {
	n, end := benchNode(b)
	cfg := httpapi.Config{}
	api, err := New(n, &cfg, Options{Now: func() time.Time { return end }})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	// 16 hour-long windows at random minutes of the data set.
	rng := rand.New(rand.NewPCG(3, 4))
	var bodies []string
	for range 16 {
		s := end.Add(-time.Duration(60+rng.IntN(5*60)) * time.Minute)
		bodies = append(bodies, url.Values{
			"query": {`max_over_time(cpu_usage_user{hostname="host_0"}[1m])`},
			"start": {fmt.Sprint(s.Unix())}, "end": {fmt.Sprint(s.Add(time.Hour).Unix())}, "step": {"60"},
		}.Encode())
	}
	check := func(code int, body []byte) {
		if code != http.StatusOK || strings.Count(string(body), "],[") != 60 {
			b.Fatalf("%d %s", code, body)
		}
	}
	report := func(b *testing.B, lat []time.Duration) {
		slices.Sort(lat)
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/query")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	}
	b.Run("handler", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		i := 0
		cpu0 := processCPU()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, "/api/v1/query_range", strings.NewReader(bodies[i%len(bodies)]))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			rec := httptest.NewRecorder()
			t0 := time.Now()
			mux.ServeHTTP(rec, req)
			lat = append(lat, time.Since(t0))
			if i == 0 {
				check(rec.Code, rec.Body.Bytes())
			}
			i++
		}
		reportCPU(b, cpu0)
		report(b, lat)
	})
	b.Run("loopback", func(b *testing.B) {
		srv := httptest.NewServer(mux)
		defer srv.Close()
		client := srv.Client()
		u := srv.URL + "/api/v1/query_range"
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		i := 0
		cpu0 := processCPU()
		for b.Loop() {
			t0 := time.Now()
			resp, err := client.Post(u, "application/x-www-form-urlencoded", strings.NewReader(bodies[i%len(bodies)]))
			if err != nil {
				b.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			lat = append(lat, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				check(resp.StatusCode, body)
			}
			i++
		}
		reportCPU(b, cpu0)
		report(b, lat)
	})
}

// BenchmarkQueryTSBS is TSBS's cpu-only query types in the forms TSBS
// sends to Prometheus-compatible stores, served in process by the handler
// over benchNode's data (10 hosts: 1-8-1 picks 8 of them by regex).
func BenchmarkQueryTSBS(b *testing.B) {
	n, end := benchNode(b)
	cfg := httpapi.Config{}
	api, err := New(n, &cfg, Options{Now: func() time.Time { return end }})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	hourAgo := fmt.Sprint(end.Add(-2 * time.Hour).Unix())
	cases := []struct {
		name, path string
		form       url.Values
		series     int
	}{
		{"1-1-1", "/api/v1/query_range", url.Values{"query": {`max(max_over_time({__name__=~"cpu_(usage_user)",hostname=~"host_3"}[1m])) by (__name__)`},
			"start": {hourAgo}, "end": {fmt.Sprint(end.Add(-time.Hour).Unix())}, "step": {"60"}}, 1},
		{"1-8-1", "/api/v1/query_range", url.Values{"query": {`max(max_over_time({__name__=~"cpu_(usage_user)",hostname=~"host_1|host_2|host_3|host_5|host_6|host_7|host_8|host_9"}[1m])) by (__name__)`},
			"start": {hourAgo}, "end": {fmt.Sprint(end.Add(-time.Hour).Unix())}, "step": {"60"}}, 1},
		{"cpu-max-all-4h", "/api/v1/query_range", url.Values{"query": {`max(max_over_time({__name__=~"cpu_.*",hostname="host_4"}[1h])) by (__name__)`},
			"start": {fmt.Sprint(end.Add(-4 * time.Hour).Unix())}, "end": {fmt.Sprint(end.Unix())}, "step": {"3600"}}, 10},
		{"lastpoint", "/api/v1/query", url.Values{"query": {`last_over_time(cpu_usage_user[1h])`}, "time": {fmt.Sprint(end.Unix())}}, 10},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			body := c.form.Encode()
			serve := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, req)
				return rec
			}
			if rec := serve(); rec.Code != http.StatusOK || strings.Count(rec.Body.String(), `"metric"`) != c.series {
				b.Fatalf("%d, want %d series: %s", rec.Code, c.series, rec.Body.String())
			}
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				serve()
			}
			reportCPU(b, cpu0)
		})
	}
}

// benchNodeTSBS holds TSBS cpu-only data as `make bench-lp` writes it:
// hosts × 10 cpu metrics, one sample every 10 s over span, all of it
// flushed to RocksDB and compacted (bench-lp restarts and compacts the
// node before it queries, so the head is empty).
func benchNodeTSBS(b *testing.B, hosts int, span time.Duration) (*node.Node, time.Time) {
	b.Helper()
	end := time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)
	n, err := node.Open(node.Options{DataDir: b.TempDir(), Now: func() time.Time { return end }, FlushInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	fields := []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}
	const interval = 10_000
	start := end.Add(-span).UnixMilli()
	for lo := start; lo < end.UnixMilli(); lo += 3600_000 {
		var batches []model.Batch
		for h := range hosts {
			for _, f := range fields {
				bt := model.Batch{Labels: []nlabels.Label{{Name: "__name__", Value: "cpu_" + f}, {Name: "hostname", Value: fmt.Sprintf("host_%d", h)},
					{Name: "region", Value: "eu-west-1"}, {Name: "datacenter", Value: "eu-west-1a"}}}
				for t := lo; t < lo+3600_000; t += interval {
					bt.Ts = append(bt.Ts, t)
					bt.Vs = append(bt.Vs, float64(rng.IntN(10000))/100)
				}
				batches = append(batches, bt)
			}
		}
		res, err := n.Write(context.Background(), batches)
		if err != nil || res.Rejected != 0 {
			b.Fatalf("write: %v %+v", err, res.Rejections)
		}
	}
	if err := n.Flush(); err != nil {
		b.Fatal(err)
	}
	// As `tributary compact` does before bench-lp queries: no background
	// compaction runs while queries are timed.
	if _, err := n.CompactStore(); err != nil {
		b.Fatal(err)
	}
	return n, end
}

// BenchmarkQueryTSBSScale runs the query types of `make bench-lp` over its
// data set (100 hosts × 1 day), served in process by the handler; each
// query draws a random host and a random whole-minute window.
func BenchmarkQueryTSBSScale(b *testing.B) {
	const hosts = 100
	n, end := benchNodeTSBS(b, hosts, 24*time.Hour)
	cfg := httpapi.Config{}
	api, err := New(n, &cfg, Options{Now: func() time.Time { return end }})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	rng := rand.New(rand.NewPCG(5, 6))
	rangeForm := func(q string, window, step time.Duration) url.Values {
		s := end.Add(-window - time.Duration(1+rng.IntN(int((24*time.Hour-window)/time.Minute-2)))*time.Minute)
		return url.Values{"query": {q}, "start": {fmt.Sprint(s.Add(step).Unix())}, "end": {fmt.Sprint(s.Add(window).Unix())}, "step": {fmt.Sprint(int(step.Seconds()))}}
	}
	host := func() string { return fmt.Sprintf("host_%d", rng.IntN(hosts)) }
	cases := []struct {
		name, path string
		form       func() url.Values
		series     int
	}{
		{"1-1-1", "/api/v1/query_range", func() url.Values {
			return rangeForm(`max(max_over_time({__name__=~"cpu_(usage_user)",hostname=~"`+host()+`"}[1m])) by (__name__)`, time.Hour, time.Minute)
		}, 1},
		{"1-1-12", "/api/v1/query_range", func() url.Values {
			return rangeForm(`max(max_over_time({__name__=~"cpu_(usage_user)",hostname=~"`+host()+`"}[1m])) by (__name__)`, 12*time.Hour, time.Minute)
		}, 1},
		{"1-8-1", "/api/v1/query_range", func() url.Values {
			var hs []string
			for _, h := range rng.Perm(hosts)[:8] {
				hs = append(hs, fmt.Sprintf("host_%d", h))
			}
			return rangeForm(`max(max_over_time({__name__=~"cpu_(usage_user)",hostname=~"`+strings.Join(hs, "|")+`"}[1m])) by (__name__)`, time.Hour, time.Minute)
		}, 1},
		{"cpu-max-all-1", "/api/v1/query_range", func() url.Values {
			return rangeForm(`max(max_over_time({__name__=~"cpu_.*",hostname="`+host()+`"}[1h])) by (__name__)`, 8*time.Hour, time.Hour)
		}, 10},
		{"lastpoint", "/api/v1/query", func() url.Values {
			return url.Values{"query": {`last_over_time(cpu_usage_user[1h])`}, "time": {fmt.Sprint(end.Unix())}}
		}, hosts},
		{"kdb-1h-max-by-min", "/api/v1/query_range", func() url.Values {
			return rangeForm(`max_over_time(cpu_usage_user{hostname="`+host()+`"}[1m])`, time.Hour, time.Minute)
		}, 1},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			bodies := make([]string, 64)
			for i := range bodies {
				bodies[i] = c.form().Encode()
			}
			serve := func(body string) *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, req)
				return rec
			}
			for _, body := range bodies {
				if rec := serve(body); rec.Code != http.StatusOK || strings.Count(rec.Body.String(), `"metric"`) != c.series {
					b.Fatalf("%d, want %d series: %s", rec.Code, c.series, rec.Body.String())
				}
			}
			b.ReportAllocs()
			i := 0
			cpu0 := processCPU()
			for b.Loop() {
				serve(bodies[i%len(bodies)])
				i++
			}
			reportCPU(b, cpu0)
		})
	}
}
