package prom

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/node"
)

// testNow is the node's clock in tests: data is written in the hours
// before it.
var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// testEnv is a real node served over HTTP.
type testEnv struct {
	t     testing.TB
	node  *node.Node
	b     backend.Backend
	api   *API
	cfg   *httpapi.Config
	mux   *http.ServeMux
	srv   *httptest.Server
	stats *httpapi.Stats
}

// newTestEnv opens a node on a temporary directory and serves it; nodeOpts
// and opts may adjust the options.
func newTestEnv(t testing.TB, nodeOpts func(*node.Options), cfg httpapi.Config, opts Options) *testEnv {
	t.Helper()
	no := node.Options{
		DataDir:          t.TempDir(),
		Now:              func() time.Time { return testNow },
		OutOfOrderWindow: time.Hour,
		FlushInterval:    time.Hour, // flushes happen when a test says so
	}
	if nodeOpts != nil {
		nodeOpts(&no)
	}
	n, err := node.Open(no)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return newTestEnvFor(t, n, n, cfg, opts)
}

func newTestEnvFor(t testing.TB, n *node.Node, b backend.Backend, cfg httpapi.Config, opts Options) *testEnv {
	t.Helper()
	if opts.Now == nil {
		opts.Now = func() time.Time { return testNow }
	}
	api, err := New(b, &cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &testEnv{t: t, node: n, b: b, api: api, cfg: &cfg, mux: mux, srv: srv, stats: cfg.Stats}
}

// encodeWrite marshals and snappy-compresses a remote_write request.
func encodeWrite(t testing.TB, req *prompb.WriteRequest) []byte {
	t.Helper()
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, raw)
}

// post sends a remote_write body with Prometheus's headers (hdr overrides
// them; an empty value deletes one) and returns status and body.
func (e *testEnv) post(body []byte, hdr map[string]string) (int, string, http.Header) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/api/v1/write", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// write sends req and requires a 204.
func (e *testEnv) write(req *prompb.WriteRequest) {
	e.t.Helper()
	if st, body, _ := e.post(encodeWrite(e.t, req), nil); st != http.StatusNoContent {
		e.t.Fatalf("remote_write: %d %s", st, body)
	}
}

// apiResponse is the Prometheus API envelope.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
	Infos     []string        `json:"infos"`
}

// call sends a GET (or a form POST when post is set) to the API path.
func (e *testEnv) call(method, path string, params url.Values) (int, apiResponse, []byte) {
	e.t.Helper()
	var req *http.Request
	var err error
	if method == http.MethodPost {
		req, err = http.NewRequest(method, e.srv.URL+path, strings.NewReader(params.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		req, err = http.NewRequest(method, e.srv.URL+path+"?"+params.Encode(), nil)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		e.t.Fatalf("%s %s: response is not JSON: %v\n%s", method, path, err, body)
	}
	return resp.StatusCode, r, body
}

// serve runs a request through the mux in process (no socket).
func (e *testEnv) serve(method, path string, params url.Values) (int, []byte) {
	e.t.Helper()
	var req *http.Request
	if method == http.MethodPost {
		req = httptest.NewRequest(method, path, strings.NewReader(params.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, path+"?"+params.Encode(), nil)
	}
	rec := httptest.NewRecorder()
	e.mux.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// unixParam formats a ms timestamp as Unix seconds for a query parameter.
func unixParam(t int64) string {
	return string(appendTimestamp(nil, t))
}

func lbls(nv ...string) []prompb.Label {
	out := make([]prompb.Label, 0, len(nv)/2)
	for i := 0; i < len(nv); i += 2 {
		out = append(out, prompb.Label{Name: nv[i], Value: nv[i+1]})
	}
	return out
}

// intHistogram is a small native histogram for remote_write tests.
func intHistogram(t int64) prompb.Histogram {
	return prompb.FromIntHistogram(t, &histogram.Histogram{
		Count: 3, Sum: 4.5, Schema: 0, ZeroThreshold: 0.001, ZeroCount: 1,
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 1}},
		PositiveBuckets: []int64{2},
	})
}

// refStorage is an in-memory storage.Queryable holding the same samples as
// the node under test: the reference the engine's answers are compared
// with. It uses the upstream list series and iterators, not this package's.
type refStorage struct {
	series []refSeries
}

type refSeries struct {
	lset labels.Labels
	ts   []int64
	vs   []float64
}

// add merges samples into a series, last write wins, kept sorted.
func (r *refStorage) add(lset labels.Labels, ts []int64, vs []float64) {
	idx := slices.IndexFunc(r.series, func(s refSeries) bool { return labels.Equal(s.lset, lset) })
	if idx < 0 {
		r.series = append(r.series, refSeries{lset: lset})
		idx = len(r.series) - 1
	}
	s := &r.series[idx]
	m := map[int64]float64{}
	for i, t := range s.ts {
		m[t] = s.vs[i]
	}
	for i, t := range ts {
		m[t] = vs[i]
	}
	s.ts = slices.Sorted(func(yield func(int64) bool) {
		for t := range m {
			if !yield(t) {
				return
			}
		}
	})
	s.vs = s.vs[:0]
	for _, t := range s.ts {
		s.vs = append(s.vs, m[t])
	}
	slices.SortFunc(r.series, func(a, b refSeries) int { return labels.Compare(a.lset, b.lset) })
}

// addWrite adds the float samples of a remote_write request.
func (r *refStorage) addWrite(req *prompb.WriteRequest) {
	for _, ts := range req.Timeseries {
		if len(ts.Samples) == 0 {
			continue
		}
		b := labels.NewScratchBuilder(len(ts.Labels))
		for _, l := range ts.Labels {
			b.Add(l.Name, l.Value)
		}
		b.Sort()
		var tt []int64
		var vv []float64
		for _, s := range ts.Samples {
			tt, vv = append(tt, s.Timestamp), append(vv, s.Value)
		}
		r.add(b.Labels(), tt, vv)
	}
}

func (r *refStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	return &refQuerier{r: r, mint: mint, maxt: maxt}, nil
}

type refQuerier struct {
	r          *refStorage
	mint, maxt int64
}

type refSample struct {
	t int64
	f float64
}

func (s refSample) T() int64                    { return s.t }
func (refSample) ST() int64                     { return 0 }
func (s refSample) F() float64                  { return s.f }
func (refSample) H() *histogram.Histogram       { return nil }
func (refSample) FH() *histogram.FloatHistogram { return nil }
func (refSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s refSample) Copy() chunks.Sample         { return s }
func (q *refQuerier) Close() error              { return nil }
func (q *refQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *refQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *refQuerier) Select(_ context.Context, _ bool, h *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if h != nil {
		mint, maxt = h.Start, h.End
	}
	var out []storage.Series
	for _, s := range q.r.series {
		ok := true
		for _, m := range ms {
			if !m.Matches(s.lset.Get(m.Name)) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		var samples []chunks.Sample
		for i, t := range s.ts {
			if t >= mint && t <= maxt {
				samples = append(samples, refSample{t, s.vs[i]})
			}
		}
		if len(samples) > 0 {
			out = append(out, storage.NewListSeries(s.lset, samples))
		}
	}
	return &refSet{list: out}
}

type refSet struct {
	list []storage.Series
	i    int
}

func (s *refSet) Next() bool                      { s.i++; return s.i <= len(s.list) }
func (s *refSet) At() storage.Series              { return s.list[s.i-1] }
func (*refSet) Err() error                        { return nil }
func (*refSet) Warnings() annotations.Annotations { return nil }
func floatsEqual(a, b float64) bool               { return math.Float64bits(a) == math.Float64bits(b) }

// staleNaNBits is Prometheus's staleness marker.
const staleNaNBits = 0x7ff0000000000002

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func parseFloatValue(s string) (float64, error) { return strconv.ParseFloat(s, 64) }
