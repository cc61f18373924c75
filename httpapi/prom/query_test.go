package prom

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// referenceExprs cover selectors, matchers, range functions (downsampled
// and not), aggregations, binary operators, offsets, @, subqueries and
// functions of time.
var referenceExprs = []string{
	`gauge`,
	`gauge{host="h1"}`,
	`gauge{host=~"h[12]"}`,
	`gauge{host!~"h[12]",dc="a"}`,
	`{__name__=~"gau.*"}`,
	`{__name__=~"gauge|sparse", host="h0"}`,
	`rate(counter_total[5m])`,
	`irate(counter_total[1m])`,
	`increase(counter_total[10m])`,
	`sum by (dc) (rate(counter_total[5m]))`,
	`max_over_time(gauge[1m])`,
	`min_over_time(gauge[5m])`,
	`avg_over_time(gauge[2m])`,
	`sum_over_time(gauge[1m])`,
	`count_over_time(special[1m])`,
	`last_over_time(special[1m])`,
	`max_over_time(special[1m])`,
	`min_over_time(special[30s])`,
	`present_over_time(sparse[1m])`,
	`absent_over_time(sparse{host="h0"}[1m])`,
	`absent(nonexistent)`,
	`quantile_over_time(0.9, gauge[5m])`,
	`stddev_over_time(gauge[5m])`,
	`topk(2, gauge)`,
	`count by (host) (gauge)`,
	`gauge offset 5m`,
	`max_over_time(gauge[1m] offset 90s)`,
	`max_over_time(gauge[1m] offset -30s)`,
	`max_over_time(gauge[1m] @ end())`,
	`max_over_time(gauge[5m:1m])`,
	`max_over_time(max_over_time(gauge[1m])[5m:1m])`,
	`rate(counter_total[5m:30s])`,
	`gauge > 50`,
	`gauge * on(host, dc) group_left counter_total`,
	`max_over_time(gauge[1m]) - min_over_time(gauge[1m])`,
	`vector(1)`,
	`scalar(sum(gauge))`,
	`time()`,
	`timestamp(gauge)`,
	`changes(special[10m])`,
	`resets(counter_total[30m])`,
	`deriv(gauge[5m])`,
	`predict_linear(gauge[10m], 60)`,
	`label_replace(gauge, "x", "$1", "host", "h(.*)")`,
	`sort_desc(sum by (host) (gauge))`,
	`special`,
	`1 + 1`,
}

// TestQuery_MatchesReferenceEngine evaluates PromQL over data written with
// remote_write to a real node, through the HTTP API, and requires byte for
// byte the answer of the same engine over an in-memory copy of the data,
// with downsampling on and off.
func TestQuery_MatchesReferenceEngine(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	data := genData(rng)
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	ref := &refStorage{}
	e.writeChunked(data, ref)
	plain := newTestEnvFor(t, e.node, e.b, httpapi.Config{}, Options{DisableDownsampling: true})
	ng := refEngine()
	end := ms(testNow.Add(-2 * time.Minute))
	ranges := []struct {
		start, end int64
		step       time.Duration
	}{
		{end - 3600_000, end, time.Minute},               // an hour by minute
		{end - 1800_000 + 7, end - 3, 15 * time.Second},  // unaligned
		{end - 2*3600_000, end, 5 * time.Minute},         // long
		{end - 600_000, end - 600_000, 30 * time.Second}, // one step
		{end - 7200_000 + 1, end - 5400_000, 90 * time.Second},
	}
	for _, qs := range referenceExprs {
		for _, r := range ranges {
			e.compareWithRef(ng, ref, qs, r.start, r.end, r.step)
			plain.compareWithRef(ng, ref, qs, r.start, r.end, r.step)
		}
		for _, at := range []int64{end, end - 12_345, end - 3600_000} {
			e.compareWithRef(ng, ref, qs, at, at, 0)
			plain.compareWithRef(ng, ref, qs, at, at, 0)
		}
	}
	if e.stats.Get(StatSelectsDownsampled) == 0 || plain.stats.Get(StatSelectsDownsampled) != 0 {
		t.Fatalf("downsampled selects: %d with, %d without", e.stats.Get(StatSelectsDownsampled), plain.stats.Get(StatSelectsDownsampled))
	}
}

// TestQuery_Errors: every bad request gets the Prometheus error envelope
// with the right errorType and status.
func TestQuery_Errors(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	e := newTestEnv(t, nil, httpapi.Config{Limits: httpapi.Limits{MaxSeriesPerQuery: 10}}, Options{MaxSamples: 1000, MaxLoadedSamples: 5000})
	e.writeChunked(genData(rng), nil)
	now := unixParam(ms(testNow))
	for _, tc := range []struct {
		name, path string
		params     url.Values
		status     int
		errType    string
		contains   string
	}{
		{"parse error", "/api/v1/query", url.Values{"query": {"sum(gauge"}}, 400, "bad_data", `invalid parameter "query"`},
		{"empty query", "/api/v1/query", url.Values{}, 400, "bad_data", "query"},
		{"bad time", "/api/v1/query", url.Values{"query": {"1"}, "time": {"yesterday"}}, 400, "bad_data", `invalid parameter "time"`},
		{"time out of range", "/api/v1/query", url.Values{"query": {"1"}, "time": {"1e300"}}, 400, "bad_data", "out of range"},
		{"bad limit", "/api/v1/query", url.Values{"query": {"1"}, "limit": {"-1"}}, 400, "bad_data", "limit"},
		{"bad timeout", "/api/v1/query", url.Values{"query": {"1"}, "timeout": {"soon"}}, 400, "bad_data", "timeout"},
		{"bad lookback", "/api/v1/query", url.Values{"query": {"1"}, "lookback_delta": {"x"}}, 400, "bad_data", "lookback_delta"},
		{"range needs vector", "/api/v1/query_range", url.Values{"query": {"gauge[5m]"}, "start": {now}, "end": {now}, "step": {"60"}}, 400, "bad_data", "range query"},
		{"end before start", "/api/v1/query_range", url.Values{"query": {"1"}, "start": {now}, "end": {"0"}, "step": {"60"}}, 400, "bad_data", "end timestamp must not be before start time"},
		{"zero step", "/api/v1/query_range", url.Values{"query": {"1"}, "start": {"0"}, "end": {now}, "step": {"0"}}, 400, "bad_data", "zero or negative"},
		{"too many points", "/api/v1/query_range", url.Values{"query": {"1"}, "start": {"0"}, "end": {now}, "step": {"1"}}, 400, "bad_data", "11,000 points"},
		{"sub-millisecond step", "/api/v1/query_range", url.Values{"query": {"1"}, "start": {now}, "end": {now}, "step": {"0.0001"}}, 400, "bad_data", "at least 1ms"},
		{"span overflowing a duration", "/api/v1/query_range", url.Values{"query": {"1"}, "start": {minTimeText}, "end": {maxTimeText}, "step": {"200y"}},
			400, "bad_data", "11,000 points"},
		{"bad step", "/api/v1/query_range", url.Values{"query": {"1"}, "start": {"0"}, "end": {now}, "step": {"often"}}, 400, "bad_data", "step"},
		{"too many samples in memory", "/api/v1/query", url.Values{"query": {"gauge[2h]"}, "time": {now}}, 422, "execution", "too many samples"},
		{"too many samples read", "/api/v1/query", url.Values{"query": {"count_over_time({__name__=~\"gauge|counter_total\"}[3h])"}, "time": {now}},
			422, "execution", "more than 5000 samples"},
		{"too many series", "/api/v1/query", url.Values{"query": {`{__name__=~".+"}`}, "time": {now}}, 422, "execution", "limit is 10"},
		{"expired timeout", "/api/v1/query", url.Values{"query": {"gauge"}, "timeout": {"0.000000001"}}, 503, "timeout", ""},
		{"many-to-many", "/api/v1/query", url.Values{"query": {"gauge + on(dc) gauge"}, "time": {now}}, 422, "execution", "many-to-many"},
		{"unknown endpoint", "/api/v1/no_such_endpoint", url.Values{}, 404, "not_found", "not served"},
		{"series without match", "/api/v1/series", url.Values{}, 400, "bad_data", "no match[]"},
		{"series matching everything", "/api/v1/series", url.Values{"match[]": {`{host=~".*"}`}}, 400, "bad_data", "non-empty matcher"},
		{"series over the limit", "/api/v1/series", url.Values{"match[]": {`{host=~".+"}`}}, 422, "execution", "more than 10 series"},
		{"bad label name", "/api/v1/label/%FF/values", url.Values{}, 400, "bad_data", "invalid label name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, r, body := e.call(http.MethodGet, tc.path, tc.params)
			if st != tc.status || r.Status != "error" || r.ErrorType != tc.errType || !strings.Contains(r.Error, tc.contains) {
				t.Fatalf("%d %s, want %d %s containing %q", st, body, tc.status, tc.errType, tc.contains)
			}
		})
	}
	if e.stats.Get(StatQueryErrors) == 0 || e.stats.Get(httpapi.ViolationBadRequest) == 0 {
		t.Fatalf("errors not counted: %v", e.stats.Snapshot())
	}
}

// TestQuery_LimitTruncatesWithWarning: limit cuts the series of an answer
// and says so.
func TestQuery_LimitTruncatesWithWarning(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	e.writeChunked(genData(rand.New(rand.NewPCG(1, 1))), nil)
	st, r, _ := e.call(http.MethodGet, "/api/v1/query", url.Values{"query": {"gauge"}, "time": {unixParam(ms(testNow))}, "limit": {"2"}})
	var vec struct {
		Result []json.RawMessage `json:"result"`
	}
	must(t, json.Unmarshal(r.Data, &vec))
	if st != 200 || len(vec.Result) != 2 || len(r.Warnings) != 1 || r.Warnings[0] != "results truncated due to limit" {
		t.Fatalf("%d %s %v", st, r.Data, r.Warnings)
	}
}

// blockingBackend holds every query until release is closed.
type blockingBackend struct {
	backend.Backend
	entered chan struct{}
	release chan struct{}
}

func (b *blockingBackend) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.Backend.Query(ctx, q, emit)
}

// TestQuery_ConcurrencyLimit: with every query slot busy, a query waits
// until its deadline and then gets 503 with Retry-After.
func TestQuery_ConcurrencyLimit(t *testing.T) {
	base := newTestEnv(t, nil, httpapi.Config{}, Options{})
	bb := &blockingBackend{Backend: base.b, entered: make(chan struct{}, 1), release: make(chan struct{})}
	e := newTestEnvFor(t, base.node, bb, httpapi.Config{}, Options{MaxConcurrentQueries: 1})
	done := make(chan int)
	go func() {
		code, _ := e.serve(http.MethodGet, "/api/v1/query", url.Values{"query": {"gauge"}})
		done <- code
	}()
	<-bb.entered
	code, body := e.serve(http.MethodGet, "/api/v1/query", url.Values{"query": {"gauge"}, "timeout": {"0.02"}})
	if code != 503 || !strings.Contains(string(body), "too many concurrent queries") {
		t.Fatalf("second query: %d %s", code, body)
	}
	close(bb.release)
	if code := <-done; code != 200 {
		t.Fatalf("first query: %d", code)
	}
}

// TestQuery_BackendErrors map onto the API's error types.
func TestQuery_BackendErrors(t *testing.T) {
	for _, tc := range []struct {
		err     error
		status  int
		errType string
	}{
		{model.ErrOverloaded, 503, "unavailable"},
		{model.ErrClosed, 503, "unavailable"},
		{context.DeadlineExceeded, 503, "timeout"},
	} {
		e := newTestEnvFor(t, nil, errBackend{tc.err}, httpapi.Config{}, Options{})
		st, r, _ := e.call(http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}})
		if st != tc.status || r.ErrorType != tc.errType {
			t.Fatalf("%v: %d %+v", tc.err, st, r)
		}
		st, r, _ = e.call(http.MethodGet, "/api/v1/labels", nil)
		if st != tc.status || r.ErrorType != tc.errType {
			t.Fatalf("labels %v: %d %+v", tc.err, st, r)
		}
	}
}

// errBackend fails everything with err.
type errBackend struct{ err error }

func (b errBackend) Write(context.Context, []model.Batch) (model.WriteResult, error) {
	return model.WriteResult{}, b.err
}
func (b errBackend) Query(context.Context, model.Query, func(model.Series) error) (model.QueryInfo, error) {
	return model.QueryInfo{}, b.err
}
func (b errBackend) Series(context.Context, []*nlabels.Matcher, int) ([]nlabels.Labels, error) {
	return nil, b.err
}
func (b errBackend) LabelNames(context.Context, []*nlabels.Matcher) ([]string, error) {
	return nil, b.err
}
func (b errBackend) LabelValues(context.Context, string, []*nlabels.Matcher) ([]string, error) {
	return nil, b.err
}

// TestQuery_FormBodyLimit: a form body over the body limit is refused
// before it is parsed.
func TestQuery_FormBodyLimit(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{Limits: httpapi.Limits{MaxBodyBytes: 1024}}, Options{})
	st, r, body := e.call(http.MethodPost, "/api/v1/query", url.Values{"query": {strings.Repeat("1+", 1000) + "1"}})
	if st != http.StatusRequestEntityTooLarge || r.ErrorType != "bad_data" || !strings.Contains(r.Error, "limit of 1024 bytes") {
		t.Fatalf("%d %s", st, body)
	}
	if st, r, body = e.call(http.MethodPost, "/api/v1/query", url.Values{"query": {strings.Repeat("1+", 100) + "1"}}); st != 200 || string(r.Data) != `{"resultType":"scalar","result":[1780315200,"101"]}` {
		t.Fatalf("%d %s", st, body)
	}
	if e.stats.Get(httpapi.ViolationBodyTooLarge) != 1 {
		t.Fatalf("counters: %v", e.stats.Snapshot())
	}
}

// TestQuery_LargeAnswersAreGzipped for clients that accept gzip, and only
// for them.
func TestQuery_LargeAnswersAreGzipped(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	e.writeChunked(genData(rand.New(rand.NewPCG(5, 5))), nil)
	params := url.Values{"query": {"gauge[1h]"}, "time": {unixParam(ms(testNow))}}
	_, plainBody := e.serve(http.MethodGet, "/api/v1/query", params)
	if len(plainBody) < gzipMinBytes {
		t.Fatalf("answer of %d bytes is too small for the test", len(plainBody))
	}
	for _, tc := range []struct {
		accept string
		gz     bool
	}{{"gzip", true}, {"deflate, gzip;q=0.5", true}, {"br", false}, {"gzip;q=0", false}} {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/query?"+params.Encode(), nil)
		req.Header.Set("Accept-Encoding", tc.accept)
		rec := httptest.NewRecorder()
		e.mux.ServeHTTP(rec, req)
		if gz := rec.Header().Get("Content-Encoding") == "gzip"; gz != tc.gz {
			t.Fatalf("Accept-Encoding %q: gzip %v, want %v", tc.accept, gz, tc.gz)
		}
		body := rec.Body.Bytes()
		if tc.gz {
			zr, err := gzip.NewReader(rec.Body)
			must(t, err)
			body, err = io.ReadAll(zr)
			must(t, err)
			if rec.Body.Len() >= len(plainBody)/2 {
				t.Fatalf("compressed %d bytes to %d", len(plainBody), rec.Body.Len())
			}
		}
		if string(body) != string(plainBody) {
			t.Fatalf("Accept-Encoding %q: body differs", tc.accept)
		}
	}
}
