package prom

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// stored returns the raw samples the node holds for a metric name.
func (e *testEnv) stored(name string) model.Series {
	e.t.Helper()
	m, err := nlabels.NewMatcher(nlabels.MatchEqual, nlabels.MetricName, name)
	must(e.t, err)
	var out model.Series
	_, err = e.b.Query(context.Background(), model.Query{Matchers: []*nlabels.Matcher{m}, Start: -1 << 62, End: 1 << 62, Mode: model.ModeRaw}, func(s model.Series) error {
		out.Labels = s.Labels
		out.Ts = append(out.Ts, s.Ts...)
		out.Vs = append(out.Vs, s.Vs...)
		return nil
	})
	must(e.t, err)
	return out
}

// TestWrite_StoresAndQueriesBack writes a TSBS-like host metric and a
// counter with remote_write and reads them back through query_range and
// query, against values computed here.
func TestWrite_StoresAndQueriesBack(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	end := testNow.Truncate(time.Minute).Add(-10 * time.Minute)
	start := end.Add(-time.Hour)
	cpu := prompb.TimeSeries{Labels: lbls("__name__", "cpu_usage_user", "hostname", "host_0")}
	reqs := prompb.TimeSeries{Labels: lbls("__name__", "http_requests_total", "job", "api", "instance", "a:9090")}
	value := func(i int) float64 { return float64((i*37)%101) / 4 }
	for i := 0; start.Add(time.Duration(i) * 10 * time.Second).Before(end.Add(time.Second)); i++ {
		ts := ms(start.Add(time.Duration(i) * 10 * time.Second))
		cpu.Samples = append(cpu.Samples, prompb.Sample{Timestamp: ts, Value: value(i)})
		reqs.Samples = append(reqs.Samples, prompb.Sample{Timestamp: ts, Value: float64(i * 3)})
	}
	e.write(&prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{cpu, reqs},
		Metadata: []prompb.MetricMetadata{
			{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "cpu_usage_user", Help: "CPU time in user mode.", Unit: "percent"},
			{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "http_requests_total", Help: "Requests served."},
		},
	})

	// max_over_time by minute: window (e-1m, e].
	st, r, _ := e.call(http.MethodGet, "/api/v1/query_range", url.Values{
		"query": {`max_over_time(cpu_usage_user{hostname="host_0"}[1m])`},
		"start": {start.Add(time.Minute).Format(time.RFC3339)},
		"end":   {unixParam(ms(end))},
		"step":  {"1m"},
	})
	if st != http.StatusOK || r.Status != "success" {
		t.Fatalf("query_range: %d %+v", st, r)
	}
	var matrix struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	must(t, json.Unmarshal(r.Data, &matrix))
	if matrix.ResultType != "matrix" || len(matrix.Result) != 1 {
		t.Fatalf("result: %s", r.Data)
	}
	if got := matrix.Result[0].Metric; len(got) != 1 || got["hostname"] != "host_0" {
		t.Fatalf("metric %v, want only hostname (max_over_time drops the name)", got)
	}
	if len(matrix.Result[0].Values) != 60 {
		t.Fatalf("%d points, want 60", len(matrix.Result[0].Values))
	}
	for k, p := range matrix.Result[0].Values {
		evalT := start.Add(time.Duration(k+1) * time.Minute)
		want := math.Inf(-1)
		for i, s := range cpu.Samples {
			if s.Timestamp > ms(evalT.Add(-time.Minute)) && s.Timestamp <= ms(evalT) {
				want = math.Max(want, value(i))
			}
		}
		if p[0].(float64) != float64(evalT.Unix()) || p[1].(string) != string(appendValue(nil, want)[1:len(appendValue(nil, want))-1]) {
			t.Fatalf("point %d: %v, want [%d %v]", k, p, evalT.Unix(), want)
		}
	}
	if e.stats.Get(StatSelectsDownsampled) != 1 {
		t.Fatalf("the max_over_time select was not downsampled: %v", e.stats.Snapshot())
	}

	// An instant query sees the newest sample within the lookback.
	st, r, _ = e.call(http.MethodPost, "/api/v1/query", url.Values{
		"query": {`rate(http_requests_total[5m])`}, "time": {unixParam(ms(end))},
	})
	var vec struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	must(t, json.Unmarshal(r.Data, &vec))
	if st != http.StatusOK || len(vec.Result) != 1 || vec.Result[0].Metric["instance"] != "a:9090" {
		t.Fatalf("rate: %d %s", st, r.Data)
	}
	if v, err := parseFloatValue(vec.Result[0].Value[1].(string)); err != nil || math.Abs(v-0.3) > 1e-12 {
		t.Fatalf("rate %v, want 0.3 (3 per 10 s)", vec.Result[0].Value[1])
	}

	// Metadata arrived with the samples.
	st, r, _ = e.call(http.MethodGet, "/api/v1/metadata", url.Values{"metric": {"cpu_usage_user"}})
	if st != http.StatusOK || string(r.Data) != `{"cpu_usage_user":[{"type":"gauge","help":"CPU time in user mode.","unit":"percent"}]}` {
		t.Fatalf("metadata: %d %s", st, r.Data)
	}
}

// TestWrite_SpecialValuesKeepTheirBits: NaN, staleness markers and ±Inf
// are stored bit for bit, in the head and after a flush.
func TestWrite_SpecialValuesKeepTheirBits(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	vals := []float64{math.NaN(), math.Float64frombits(staleNaNBits), math.Inf(1), math.Inf(-1), 1.5}
	ts := prompb.TimeSeries{Labels: lbls("__name__", "special")}
	for i, v := range vals {
		ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: ms(testNow) - int64(len(vals)-i)*1000, Value: v})
	}
	e.write(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}})
	check := func(stage string) {
		got := e.stored("special")
		if len(got.Vs) != len(vals) {
			t.Fatalf("%s: %d samples stored, want %d", stage, len(got.Vs), len(vals))
		}
		for i, v := range vals {
			if !floatsEqual(got.Vs[i], v) {
				t.Fatalf("%s: sample %d is %x, want %x", stage, i, math.Float64bits(got.Vs[i]), math.Float64bits(v))
			}
		}
	}
	check("head")
	must(t, e.node.Flush())
	check("flushed")
	// The engine drops staleness markers from range vectors but keeps NaN.
	_, r, _ := e.call(http.MethodGet, "/api/v1/query", url.Values{"query": {"special[1m]"}, "time": {unixParam(ms(testNow))}})
	if !strings.Contains(string(r.Data), `"NaN"`) || !strings.Contains(string(r.Data), `"+Inf"`) || !strings.Contains(string(r.Data), `"-Inf"`) ||
		strings.Count(string(r.Data), `"NaN"`) != 1 {
		t.Fatalf("range vector: %s", r.Data)
	}
}

// TestWrite_BadInputs sends hostile and broken requests: each gets its
// documented status and a message saying what and where, valid samples
// beside bad ones are stored, and nothing crashes.
func TestWrite_BadInputs(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	now := ms(testNow)
	ok := func(name string) prompb.TimeSeries {
		return prompb.TimeSeries{Labels: lbls("__name__", name, "ok", "yes"), Samples: []prompb.Sample{{Timestamp: now - 1000, Value: 1}}}
	}
	valid := encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ok("valid")}})
	snappyOf := func(b []byte) []byte { return snappy.Encode(nil, b) }
	manyLabels := lbls("__name__", "many_labels")
	for i := range 10_000 {
		manyLabels = append(manyLabels, prompb.Label{Name: fmt.Sprintf("l%05d", i), Value: "v"})
	}
	huge := binary.AppendUvarint(nil, 1<<31)
	huge = append(huge, 0x00, 0x01, 0x02)
	hugest := binary.AppendUvarint(nil, 1<<40)
	for _, tc := range []struct {
		name     string
		body     []byte
		hdr      map[string]string
		status   int
		contains []string
		stored   map[string]int // metric → samples the node must hold
	}{
		{name: "valid", body: valid, status: 204, stored: map[string]int{"valid": 1}},
		{name: "truncated snappy", body: valid[:len(valid)/2], status: 400, contains: []string{"snappy"}},
		{name: "snappy declaring 2 GiB", body: huge, status: 413, contains: []string{"declares 2147483648 decoded bytes"}},
		{name: "snappy declaring 1 TiB", body: hugest, status: 400, contains: []string{"not a snappy block"}},
		{name: "empty body", body: nil, status: 400, contains: []string{"snappy"}},
		{name: "bad protobuf", body: snappyOf([]byte{0xff, 0xff, 0xff}), status: 400, contains: []string{"invalid protobuf WriteRequest", "byte 0"}},
		{name: "timeseries with wrong wire type", body: snappyOf([]byte{0x08, 0x01}), status: 400, contains: []string{"field 1 has wire type 0"}},
		{name: "truncated timeseries", body: snappyOf([]byte{0x0a, 0x10, 0x0a}), status: 400, contains: []string{"WriteRequest at byte 1"}},
		{name: "gzip encoding", body: valid, hdr: map[string]string{"Content-Encoding": "gzip"}, status: 415, contains: []string{"snappy"}},
		{name: "remote write 2.0", body: valid, hdr: map[string]string{"Content-Type": "application/x-protobuf;proto=io.prometheus.write.v2.Request"},
			status: 415, contains: []string{"protobuf_message: prometheus.WriteRequest"}},
		{name: "json", body: valid, hdr: map[string]string{"Content-Type": "application/json"}, status: 415},
		{name: "no headers", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ok("no_headers")}}),
			hdr: map[string]string{"Content-Type": "", "Content-Encoding": ""}, status: 204, stored: map[string]int{"no_headers": 1}},
		{name: "NaN and infinities", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
			Labels: lbls("__name__", "nan_inf"), Samples: []prompb.Sample{
				{Timestamp: now - 4000, Value: math.NaN()}, {Timestamp: now - 3000, Value: math.Inf(1)},
				{Timestamp: now - 2000, Value: math.Inf(-1)}, {Timestamp: now - 1000, Value: math.Float64frombits(staleNaNBits)}}}}}),
			status: 204, stored: map[string]int{"nan_inf": 4}},
		{name: "timestamps at the extremes", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			{Labels: lbls("__name__", "extreme_ts"), Samples: []prompb.Sample{
				{Timestamp: now - 1000, Value: 1}, {Timestamp: 0, Value: 2}, {Timestamp: -1, Value: 3}, {Timestamp: math.MinInt64, Value: 4},
				{Timestamp: math.MaxInt64, Value: 5}, {Timestamp: now + 24*3600_000, Value: 6}}}}}),
			status: 400, contains: []string{"stored 1 of 6 samples", "too_old: 3", "too_far_in_future: 2", "timeseries 0 point 1:"},
			stored: map[string]int{"extreme_ts": 1}},
		{name: "duplicates", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
			Labels: lbls("__name__", "dups"), Samples: []prompb.Sample{{Timestamp: now - 2000, Value: 1}, {Timestamp: now - 2000, Value: 2}, {Timestamp: now - 1000, Value: 3}}}}}),
			status: 204, stored: map[string]int{"dups": 2}},
		{name: "out of order beyond the window", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
			Labels: lbls("__name__", "ooo"), Samples: []prompb.Sample{{Timestamp: now - 1000, Value: 1}, {Timestamp: now - 30*60_000, Value: 2}, {Timestamp: now - 3*3600_000, Value: 3}}}}}),
			status: 400, contains: []string{"stored 2 of 3 samples", "too_old: 1"}, stored: map[string]int{"ooo": 2}},
		{name: "10,000 labels", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			{Labels: manyLabels, Samples: []prompb.Sample{{Timestamp: now - 1000, Value: 1}}}, ok("beside_many_labels")}}),
			status: 400, contains: []string{"invalid_series: 1", "timeseries 0: invalid series: 10001 labels, limit is 32"},
			stored: map[string]int{"many_labels": 0, "beside_many_labels": 1}},
		{name: "1 MiB label value", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			ok("beside_big_value"), {Labels: lbls("__name__", "big_value", "v", strings.Repeat("x", 1<<20)), Samples: []prompb.Sample{{Timestamp: now - 1000, Value: 1}}}}}),
			status: 400, contains: []string{"timeseries 1: invalid series", "1048576 bytes, limit is 1024"},
			stored: map[string]int{"big_value": 0, "beside_big_value": 1}},
		{name: "invalid UTF-8 value", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			{Labels: lbls("__name__", "bad_utf8", "v", "a\xffb"), Samples: []prompb.Sample{{Timestamp: now - 1000, Value: 1}}}, ok("beside_bad_utf8")}}),
			status: 400, contains: []string{"not valid UTF-8"}, stored: map[string]int{"bad_utf8": 0, "beside_bad_utf8": 1}},
		{name: "NUL and newline in values", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			{Labels: lbls("__name__", "odd_values", "nul", "a\x00b", "nl", "line1\nline2"), Samples: []prompb.Sample{{Timestamp: now - 1000, Value: 1}}}}}),
			status: 204, stored: map[string]int{"odd_values": 1}},
		{name: "empty metric name", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			ok("beside_empty_name"), {Labels: lbls("__name__", "", "job", "x"), Samples: []prompb.Sample{{Timestamp: now - 1000, Value: 1}}}}}),
			status: 400, contains: []string{"timeseries 1: invalid series: missing metric name"}, stored: map[string]int{"beside_empty_name": 1}},
		{name: "no labels", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Samples: []prompb.Sample{{Timestamp: now - 1000, Value: 1}}}}}),
			status: 400, contains: []string{"missing metric name"}},
		{name: "bad label name", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			{Labels: lbls("__name__", "bad_label_name", "9lives", "x"), Samples: []prompb.Sample{{Timestamp: now - 1000, Value: 1}}}}}),
			status: 400, contains: []string{`label name "9lives"`}, stored: map[string]int{"bad_label_name": 0}},
		{name: "histograms only", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			{Labels: lbls("__name__", "hist_only"), Histograms: []prompb.Histogram{intHistogram(now - 2000), intHistogram(now - 1000)}}}}),
			status: 400, contains: []string{"stored 0 of 0 samples", "dropped 2 native histogram samples in 1 series"}, stored: map[string]int{"hist_only": 0}},
		{name: "histograms beside floats", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			{Labels: lbls("__name__", "hist_mixed"), Histograms: []prompb.Histogram{intHistogram(now - 1000)}}, ok("beside_hist")}}),
			status: 400, contains: []string{"stored 1 of 1 samples", "native histograms are not supported"}, stored: map[string]int{"beside_hist": 1}},
		{name: "exemplars", body: encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
			Labels: lbls("__name__", "with_exemplar"), Samples: []prompb.Sample{{Timestamp: now - 1000, Value: 1}},
			Exemplars: []prompb.Exemplar{{Labels: lbls("trace_id", "abc"), Value: 1, Timestamp: now - 1000}}}}}),
			status: 400, contains: []string{"stored 1 of 1 samples", "dropped 1 exemplars in 1 series"}, stored: map[string]int{"with_exemplar": 1}},
		{name: "metadata only", body: encodeWrite(t, &prompb.WriteRequest{Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "meta_only"}}}),
			status: 204},
		{name: "empty request", body: snappyOf(nil), status: 204},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body, _ := e.post(tc.body, tc.hdr)
			if st != tc.status {
				t.Fatalf("status %d, want %d: %s", st, tc.status, body)
			}
			for _, s := range tc.contains {
				if !strings.Contains(body, s) {
					t.Errorf("body does not say %q:\n%s", s, body)
				}
			}
			for name, n := range tc.stored {
				if got := len(e.stored(name).Ts); got != n {
					t.Errorf("%s: %d samples stored, want %d", name, got, n)
				}
			}
		})
	}
	// The odd label values come back exactly.
	st, r, _ := e.call(http.MethodGet, "/api/v1/series", url.Values{"match[]": {"odd_values"}})
	var series []map[string]string
	must(t, json.Unmarshal(r.Data, &series))
	if st != 200 || len(series) != 1 || series[0]["nul"] != "a\x00b" || series[0]["nl"] != "line1\nline2" {
		t.Fatalf("series: %d %s", st, r.Data)
	}
	// Duplicates: the last value wins.
	if got := e.stored("dups"); got.Vs[0] != 2 {
		t.Fatalf("duplicate kept %v, want the last written (2)", got.Vs[0])
	}
	for _, name := range []string{StatHistogramsDropped, StatExemplarsDropped, StatSamplesRejected, httpapi.ViolationBodyTooLarge, httpapi.ViolationBadEncoding, httpapi.ViolationBadRequest} {
		if e.stats.Get(name) == 0 {
			t.Errorf("counter %s not counted", name)
		}
	}
}

// TestWrite_Limits: bodies, decoded sizes and sample counts over the
// limits are refused with 413 before they are decoded.
func TestWrite_Limits(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{Limits: httpapi.Limits{MaxBodyBytes: 64 << 10, MaxPointsPerRequest: 1000}}, Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	series := func(n int, value func(int) float64) *prompb.WriteRequest {
		ts := prompb.TimeSeries{Labels: lbls("__name__", "limits")}
		for i := range n {
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: ms(testNow) - int64(n-i)*10, Value: value(i)})
		}
		return &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}
	}
	same := func(n int) *prompb.WriteRequest {
		ts := prompb.TimeSeries{Labels: lbls("__name__", "limits")}
		for range n {
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: ms(testNow)})
		}
		return &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}
	}
	// 8,000 random samples: about 100 KiB even compressed.
	noisy := encodeWrite(t, series(8000, func(int) float64 { return rng.Float64() }))
	if st, body, _ := e.post(noisy, nil); st != 413 || !strings.Contains(body, "limit is 65536") {
		t.Fatalf("big body: %d %s", st, body)
	}
	// 20,000 identical samples compress well but decode past the limit.
	zeros := encodeWrite(t, same(20000))
	if len(zeros) > 64<<10 {
		t.Fatalf("test body is %d bytes compressed", len(zeros))
	}
	if st, body, _ := e.post(zeros, nil); st != 413 || !strings.Contains(body, "decoded bytes") {
		t.Fatalf("decoded size: %d %s", st, body)
	}
	if st, body, _ := e.post(encodeWrite(t, series(1001, func(i int) float64 { return float64(i) })), nil); st != 413 || !strings.Contains(body, "more than 1000 samples") {
		t.Fatalf("sample count: %d %s", st, body)
	}
	if got := len(e.stored("limits").Ts); got != 0 {
		t.Fatalf("%d samples stored from refused requests", got)
	}
	if e.stats.Get(httpapi.ViolationTooManyPoints) != 1 || e.stats.Get(httpapi.ViolationBodyTooLarge) != 2 {
		t.Fatalf("counters: %v", e.stats.Snapshot())
	}
}

// failingBackend fails every write with err and may block queries.
type failingBackend struct {
	backend.Backend
	err   error
	block chan struct{} // Write waits on it when not nil
}

func (f *failingBackend) Write(ctx context.Context, b []model.Batch) (model.WriteResult, error) {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return model.WriteResult{}, ctx.Err()
		}
	}
	if f.err != nil {
		return model.WriteResult{}, f.err
	}
	return f.Backend.Write(ctx, b)
}

// TestWrite_OverloadIsRetryable: a backend shedding load gets 503 (or the
// configured 429) with Retry-After, so Prometheus retries the batch.
func TestWrite_OverloadIsRetryable(t *testing.T) {
	body := encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: lbls("__name__", "x"), Samples: []prompb.Sample{{Timestamp: ms(testNow), Value: 1}}}}})
	for _, tc := range []struct {
		opt, want int
		err       error
	}{{0, 503, model.ErrOverloaded}, {429, 429, model.ErrOverloaded}, {429, 503, model.ErrClosed}} {
		fb := &failingBackend{err: tc.err}
		e := newTestEnvFor(t, nil, fb, httpapi.Config{}, Options{WriteOverloadStatus: tc.opt})
		st, msg, hdr := e.post(body, nil)
		if st != tc.want || hdr.Get("Retry-After") == "" || !strings.Contains(msg, "nothing of this request was stored") {
			t.Fatalf("option %d, %v: %d %q Retry-After %q", tc.opt, tc.err, st, msg, hdr.Get("Retry-After"))
		}
	}
	if err := (&Options{WriteOverloadStatus: 500}).Validate(); err == nil {
		t.Fatal("WriteOverloadStatus 500 accepted")
	}
}

// TestWrite_WaitsForASlot: with every write slot busy, a request waits
// until its deadline and then gets a retryable 503.
func TestWrite_WaitsForASlot(t *testing.T) {
	fb := &failingBackend{block: make(chan struct{})}
	e := newTestEnvFor(t, nil, fb, httpapi.Config{}, Options{MaxConcurrentWrites: 1})
	body := encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: lbls("__name__", "x"), Samples: []prompb.Sample{{Timestamp: ms(testNow), Value: 1}}}}})
	first := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/api/v1/write", strings.NewReader(string(body)))
		e.mux.ServeHTTP(rec, req)
		first <- rec.Code
	}()
	// Wait until the first request holds the slot.
	for len(e.api.writes) == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	rec := httptest.NewRecorder()
	e.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/write", strings.NewReader(string(body))).WithContext(ctx))
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "too many concurrent remote_write requests") {
		t.Fatalf("second request: %d %s", rec.Code, rec.Body)
	}
	fb.err = model.ErrOverloaded
	close(fb.block)
	if code := <-first; code != 503 {
		t.Fatalf("first request: %d", code)
	}
}
