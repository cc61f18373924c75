package influx

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	influxdb2 "github.com/influxdata/influxdb-client-go/v2"
	"go.uber.org/goleak"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testServer is a real node behind the handlers of this package.
type testServer struct {
	*httptest.Server
	node *node.Node
	cfg  *httpapi.Config
}

func newTestServer(t *testing.T, lim httpapi.Limits) *testServer {
	t.Helper()
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, n, n, lim)
}

func serve(t *testing.T, n *node.Node, b backend.Backend, lim httpapi.Limits) *testServer {
	t.Helper()
	cfg := &httpapi.Config{Limits: lim}
	mux := http.NewServeMux()
	Register(mux, b, cfg)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		if err := n.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	return &testServer{srv, n, cfg}
}

// post sends body to path and returns the status, the decoded JSON answer
// (nil for an empty body) and the headers.
func (s *testServer) post(t *testing.T, path string, body []byte, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var ans map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &ans); err != nil {
			t.Fatalf("answer is not JSON: %v: %q", err, raw)
		}
	}
	return resp.StatusCode, ans, resp.Header
}

// stillServing checks that the server answers a ping and stores a write.
func (s *testServer) stillServing(t *testing.T) {
	t.Helper()
	resp, err := s.Client().Get(s.URL + "/ping")
	if err != nil {
		t.Fatalf("server stopped serving: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("ping: %d", resp.StatusCode)
	}
}

// dump returns every series whose metric name matches re, with its points,
// one series a line in label order: `name{labels} ts:value ...`.
func dump(t *testing.T, n *node.Node, re string) string {
	t.Helper()
	m, err := labels.NewMatcher(labels.MatchRegexp, labels.MetricName, re)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	_, err = n.Query(context.Background(), model.Query{
		Matchers: []*labels.Matcher{m}, Start: math.MinInt64, End: math.MaxInt64, Mode: model.ModeRaw,
	}, func(s model.Series) error {
		b.WriteString(s.Labels.String())
		for i := range s.Ts {
			fmt.Fprintf(&b, " %d:%s", s.Ts[i], strconv.FormatFloat(s.Vs[i], 'g', -1, 64))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	return b.String()
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestConformance_InfluxClientV2 drives the handlers with the official
// InfluxDB v2 Go client: Ping, Health and WriteAPIBlocking, then reads the
// node back and compares exactly.
func TestConformance_InfluxClientV2(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	ctx := context.Background()
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)

	for _, gzipped := range []bool{false, true} {
		opts := influxdb2.DefaultOptions().SetUseGZip(gzipped).SetMaxRetries(0)
		c := influxdb2.NewClientWithOptions(s.URL, "any-token", opts)
		ok, err := c.Ping(ctx)
		if err != nil || !ok {
			t.Fatalf("Ping: %v %v", ok, err)
		}
		h, err := c.Health(ctx)
		if err != nil || h.Status != "pass" || h.Name != "tributary" {
			t.Fatalf("Health: %+v %v", h, err)
		}
		w := c.WriteAPIBlocking("my-org", "bucket-"+strconv.FormatBool(gzipped))
		err = w.WritePoint(ctx,
			influxdb2.NewPoint("env",
				map[string]string{"room": "lab 1", "sensor": "t,1"},
				map[string]any{"temp": 21.5, "count": int64(-3), "big": uint64(1 << 40), "on": true},
				base.Add(123456*time.Nanosecond)), // sub-millisecond part is truncated
			influxdb2.NewPoint("env",
				map[string]string{"room": "lab 1", "sensor": "t,1"},
				map[string]any{"temp": 22.25, "on": false},
				base.Add(time.Second)),
		)
		if err != nil {
			t.Fatalf("WritePoint: %v", err)
		}
		if err := w.WriteRecord(ctx, fmt.Sprintf("rec,k=v value=7 %d", base.Add(2*time.Second).UnixNano())); err != nil {
			t.Fatalf("WriteRecord: %v", err)
		}
		// A string field is skipped; the client sees a success.
		if err := w.WriteRecord(ctx, fmt.Sprintf("str,k=v s=\"x\" %d", base.Add(3*time.Second).UnixNano())); err != nil {
			t.Fatalf("string field: err = %v, want it skipped", err)
		}
		c.Close()
	}

	ms := base.UnixMilli()
	for _, bucket := range []string{"bucket-false", "bucket-true"} {
		want := fmt.Sprintf(`env_big{db=%[1]q,room="lab 1",sensor="t,1"} %[2]d:1.099511627776e+12
env_count{db=%[1]q,room="lab 1",sensor="t,1"} %[2]d:-3
env_on{db=%[1]q,room="lab 1",sensor="t,1"} %[2]d:1 %[3]d:0
env_temp{db=%[1]q,room="lab 1",sensor="t,1"} %[2]d:21.5 %[3]d:22.25
rec_value{db=%[1]q,k="v"} %[4]d:7
`, bucket, ms, ms+1000, ms+2000)
		m, _ := labels.NewMatcher(labels.MatchEqual, "db", bucket)
		got := dumpMatching(t, s.node, m)
		if got != want {
			t.Errorf("bucket %s: stored\n%s\nwant\n%s", bucket, got, want)
		}
	}
}

func dumpMatching(t *testing.T, n *node.Node, m *labels.Matcher) string {
	t.Helper()
	var b strings.Builder
	_, err := n.Query(context.Background(), model.Query{
		Matchers: []*labels.Matcher{m}, Start: math.MinInt64, End: math.MaxInt64, Mode: model.ModeRaw,
	}, func(s model.Series) error {
		b.WriteString(s.Labels.String())
		for i := range s.Ts {
			fmt.Fprintf(&b, " %d:%s", s.Ts[i], strconv.FormatFloat(s.Vs[i], 'g', -1, 64))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	return b.String()
}

// TestConformance_V1WritePrecisionsAndGzip writes the same instant in
// several precisions through /write, plain and gzipped.
func TestConformance_V1WritePrecisionsAndGzip(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	now := time.Now().Add(-time.Minute).Truncate(time.Second)
	ms := now.UnixMilli()
	var want strings.Builder
	for _, tc := range []struct {
		prec string
		ts   int64
	}{
		{"s", now.Unix()},
		{"ms", now.UnixMilli() + 7},
		{"u", now.UnixMicro() + 8_999},
		{"us", now.UnixMicro() + 9_000},
		{"ns", now.UnixNano() + 10_999_999},
		{"", now.UnixNano() + 11_000_000},
		{"n", now.UnixNano() + 12_000_001},
		{"m", now.Unix() / 60},
		{"h", now.Unix() / 3600},
	} {
		for _, gzipped := range []bool{false, true} {
			name := "p" + tc.prec + map[bool]string{false: "_plain", true: "_gzip"}[gzipped]
			body := []byte(fmt.Sprintf("%s v=1.25,n=%di %d\n", name, len(tc.prec), tc.ts))
			hdr := []string{}
			if gzipped {
				body, hdr = gz(t, body), []string{"Content-Encoding", "gzip"}
			}
			status, ans, h := s.post(t, "/write?db=v1db&rp=ignored&u=user&p=pass&precision="+tc.prec, body, hdr...)
			if status != http.StatusNoContent {
				t.Fatalf("precision %q gzip=%v: %d %v", tc.prec, gzipped, status, ans)
			}
			if h.Get("X-Influxdb-Version") == "" {
				t.Errorf("no X-Influxdb-Version header on a write answer")
			}
			wantMs := map[string]int64{"s": ms, "ms": ms + 7, "u": ms + 8, "us": ms + 9, "ns": ms + 10, "": ms + 11, "n": ms + 12,
				"m": now.Unix() / 60 * 60_000, "h": now.Unix() / 3600 * 3_600_000}[tc.prec]
			fmt.Fprintf(&want, "%s_n{db=\"v1db\"} %d:%d\n%s_v{db=\"v1db\"} %d:1.25\n", name, wantMs, len(tc.prec), name, wantMs)
		}
	}
	gotLines := strings.Split(strings.TrimSpace(dump(t, s.node, "p.*")), "\n")
	slices.Sort(gotLines)
	got := strings.Join(gotLines, "\n") + "\n"
	wantLines := strings.Split(strings.TrimSpace(want.String()), "\n")
	slices.Sort(wantLines)
	if w := strings.Join(wantLines, "\n") + "\n"; got != w {
		t.Fatalf("stored\n%s\nwant\n%s", got, w)
	}
}

func TestPingAndHealth(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequest(method, s.URL+"/ping", nil)
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Influxdb-Version") != CompatVersion ||
			resp.Header.Get("X-Influxdb-Build") != BuildHeader {
			t.Errorf("%s /ping: %d %v", method, resp.StatusCode, resp.Header)
		}
	}
	resp, err := s.Client().Get(s.URL + "/ping?verbose=true")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]string
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || v["version"] != CompatVersion {
		t.Errorf("verbose ping: %d %v %v", resp.StatusCode, v, err)
	}
	resp, err = s.Client().Get(s.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || h["name"] != "tributary" || h["status"] != "pass" {
		t.Errorf("health: %d %v %v", resp.StatusCode, h, err)
	}
}

// TestBadInputs sends one bad thing per request, next to a good line
// where the body allows one, and checks the documented status, the error
// (with its line number), that the good line is stored or, for requests
// refused whole, that nothing is, and that the server keeps serving.
func TestBadInputs(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	small := newTestServer(t, httpapi.Limits{MaxBodyBytes: 64 << 10, MaxPointsPerRequest: 100})
	strict := newTestServer(t, httpapi.Limits{RefuseStringFields: true})
	now := time.Now()
	nowNs := now.UnixNano()
	tag64KiB := strings.Repeat("v", 64<<10) // over the value limit, under the line limit
	var tags10k strings.Builder
	for i := range 10_000 {
		fmt.Fprintf(&tags10k, ",t%d=x", i)
	}

	type tc struct {
		name   string
		srv    *testServer
		path   string // default /api/v2/write?bucket=b&precision=ns
		body   string // %d is replaced by a timestamp in ns close to now
		header []string
		raw    []byte // body used as is when set

		status  int
		errLine int    // line of the first listed error, for 400 partial writes
		errMsg  string // substring of the message
		stored  int    // points that must be stored: ok_<case> lines
	}
	cases := []tc{
		{name: "NaN", body: "ok v=1 %d\nbad v=NaN %d", status: 400, errLine: 2, errMsg: "NaN or Inf", stored: 1},
		{name: "plus_Inf", body: "bad v=+Inf %d\nok v=1 %d", status: 400, errLine: 1, errMsg: "NaN or Inf", stored: 1},
		{name: "minus_Inf", body: "ok v=1 %d\nbad v=-Inf %d", status: 400, errLine: 2, errMsg: "NaN or Inf", stored: 1},
		{name: "timestamp_zero", body: "ok v=1 %d\nbad v=1 0", status: 400, errLine: 2, errMsg: "older than the raw retention", stored: 1},
		{name: "timestamp_negative", body: "ok v=1 %d\nbad v=1 -1000000000000", status: 400, errLine: 2, errMsg: "older than", stored: 1},
		{name: "timestamp_int64_max_ns", body: "ok v=1 %d\nbad v=1 9223372036854775807", status: 400, errLine: 2, errMsg: "ahead of the node clock", stored: 1},
		{name: "timestamp_int64_min_ns", body: "ok v=1 %d\nbad v=1 -9223372036854775808", status: 400, errLine: 2, errMsg: "older than", stored: 1},
		{name: "timestamp_int64_max_s", path: "/write?db=b&precision=s", body: fmt.Sprintf("ok v=1 %d\nbad v=1 9223372036854775807", now.Unix()),
			status: 400, errLine: 2, errMsg: "out of range once converted", stored: 1},
		{name: "timestamp_past_int64", body: "ok v=1 %d\nbad v=1 9223372036854775808", status: 400, errLine: 2, errMsg: "out of the int64 range", stored: 1},
		{name: "timestamp_far_future", body: fmt.Sprintf("ok v=1 %%d\nbad v=1 %d", now.AddDate(1, 0, 0).UnixNano()), status: 400, errLine: 2, errMsg: "ahead of the node clock", stored: 1},
		{name: "ten_thousand_tags", body: "ok v=1 %d\nbad" + tags10k.String() + " v=1 %d", status: 400, errLine: 2, errMsg: "too many tags", stored: 1},
		{name: "tag_value_64KiB", body: "ok v=1 %d\nbad,t=" + tag64KiB + " v=1 %d", status: 400, errLine: 2, errMsg: "is 65536 bytes, limit is 1024", stored: 1},
		{name: "invalid_utf8", body: "ok v=1 %d\nbad,t=\xc3\x28 v=1 %d", status: 400, errLine: 2, errMsg: "not valid UTF-8", stored: 1},
		{name: "nul_in_tag", body: "ok v=1 %d\nbad,t=a\x00b v=1 %d", status: 400, errLine: 2, errMsg: "control character U+0000", stored: 1},
		{name: "newline_in_tag", body: "ok v=1 %d\nbad,t=a\\\nok w=2 %d", status: 400, errLine: 2, errMsg: "no field set", stored: 2},
		{name: "string_field_strict", srv: strict, body: "ok v=1 %d\nbad v=1,s=\"str\" %d", status: 400, errLine: 2, errMsg: "string value", stored: 1},
		{name: "string_field_skipped", body: "ok v=1 %d\nok w=2,s=\"str\",b=true %d", status: 204, stored: 3},
		{name: "crlf", body: "ok v=1 %d\r\nok w=2 %d\r\n", status: 204, stored: 2},
		{name: "empty_body", body: "", status: 204},
		{name: "comments_only", body: "# nothing\n\n", status: 204},
		{name: "missing_bucket", path: "/api/v2/write?org=o&precision=ns", body: "ok v=1 %d", status: 400, errMsg: "bucket is required"},
		{name: "missing_db", path: "/write?precision=ns", body: "ok v=1 %d", status: 400, errMsg: "database is required"},
		{name: "bad_precision_v2", path: "/api/v2/write?bucket=b&precision=h", body: "ok v=1 %d", status: 400, errMsg: "invalid precision"},
		{name: "bad_precision_v1", path: "/write?db=b&precision=xs", body: "ok v=1 %d", status: 400, errMsg: "invalid precision"},
		{name: "control_char_in_bucket", path: "/api/v2/write?bucket=a%00b", body: "ok v=1 %d", status: 400, errMsg: "invalid database name"},
		{name: "unknown_encoding", body: "ok v=1 %d", header: []string{"Content-Encoding", "br"}, status: 415, errMsg: "not supported"},
		{name: "bad_gzip", raw: []byte("not gzip at all"), header: []string{"Content-Encoding", "gzip"}, status: 400, errMsg: "gzip"},
		{name: "body_over_limit", srv: small, raw: bytes.Repeat([]byte("ok v=1\n"), 10_000), status: 413, errMsg: "limit"},
		{name: "too_many_points", srv: small, body: strings.Repeat("ok a=1,b=2 %d\n", 51), status: 413, errMsg: "more than 100 points"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := c.srv
			if srv == nil {
				srv = s
			}
			path := c.path
			if path == "" {
				path = "/api/v2/write?bucket=b&precision=ns"
			}
			body := c.raw
			if body == nil {
				// Each line gets its own measurement prefix and timestamp.
				text := strings.ReplaceAll(c.body, "ok ", "ok_"+c.name+" ")
				text = strings.ReplaceAll(text, "bad", "bad_"+c.name)
				text = strings.ReplaceAll(text, "%d", strconv.FormatInt(nowNs, 10))
				body = []byte(text)
			}
			status, ans, hdr := srv.post(t, path, body, c.header...)
			if status != c.status {
				t.Fatalf("status %d, want %d: %v", status, c.status, ans)
			}
			if status != http.StatusNoContent {
				msg, _ := ans["message"].(string)
				if v1, _ := ans["error"].(string); v1 != msg {
					t.Errorf("error %q differs from message %q", v1, msg)
				}
				if c.errLine > 0 {
					errs, _ := ans["errors"].([]any)
					if len(errs) == 0 {
						t.Fatalf("no errors listed: %v", ans)
					}
					first := errs[0].(map[string]any)
					if int(first["line"].(float64)) != c.errLine || !strings.Contains(first["message"].(string), c.errMsg) {
						t.Errorf("first error %v, want line %d with %q", first, c.errLine, c.errMsg)
					}
					if !strings.HasPrefix(msg, "partial write") || ans["code"] != "invalid" ||
						int(ans["accepted"].(float64)) != c.stored || int(ans["rejected"].(float64)) < 1 {
						t.Errorf("answer %v", ans)
					}
				} else if !strings.Contains(msg, c.errMsg) {
					t.Errorf("message %q, want it to contain %q", msg, c.errMsg)
				}
				if hdr.Get("Content-Type") != "application/json; charset=utf-8" {
					t.Errorf("Content-Type %q", hdr.Get("Content-Type"))
				}
			}
			got := dump(t, srv.node, "(ok|bad)_"+c.name+"_.*")
			if n := strings.Count(got, ":"); n != c.stored {
				t.Errorf("%d points stored, want %d:\n%s", n, c.stored, got)
			}
			if strings.Contains(got, "bad_") {
				t.Errorf("a refused point was stored:\n%s", got)
			}
			srv.stillServing(t)
		})
	}
}

// TestBadInputs_GzipBomb sends 1 GiB of zeros compressed to about 1 MiB:
// the answer is 413, and memory stays bounded by the body limit.
func TestBadInputs_GzipBomb(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	// A gzip stream may hold several members; readers concatenate them.
	// One member of 1 MiB of zeros, 1024 times, is 1 GiB.
	member := gz(t, make([]byte, 1<<20))
	bomb := bytes.Repeat(member, 1024)
	if len(bomb) > 2<<20 {
		t.Fatalf("bomb is %d bytes compressed", len(bomb))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	status, ans, _ := s.post(t, "/api/v2/write?bucket=b", bomb, "Content-Encoding", "gzip")
	runtime.ReadMemStats(&after)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(ans["message"].(string), "after decompression") {
		t.Fatalf("gzip bomb: %d %v", status, ans)
	}
	// Reading stops at the 32 MiB limit; allow for buffer growth, far
	// below the 1 GiB the body inflates to.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("the request allocated %d MiB", alloc>>20)
	}
	if got := s.cfg.Stats.Get(httpapi.ViolationBodyTooLarge); got != 1 {
		t.Errorf("body_too_large violations %d, want 1", got)
	}
	s.stillServing(t)
}

// TestDuplicateAndOutOfOrderPoints: duplicates are last-write-wins,
// out-of-order points inside the node's window are stored, and one older
// than the window is refused with its line number.
func TestDuplicateAndOutOfOrderPoints(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Millisecond)
	ns := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	body := fmt.Sprintf("dup v=1 %d\ndup v=2 %d\nooo v=3 %d\nooo v=4 %d\nooo v=5 %d\n",
		ns(0), ns(0), ns(0), ns(-30*time.Minute), ns(-3*time.Hour))
	status, ans, _ := s.post(t, "/api/v2/write?bucket=b", []byte(body))
	if status != http.StatusBadRequest {
		t.Fatalf("status %d: %v", status, ans)
	}
	errs := ans["errors"].([]any)
	if len(errs) != 1 || int(errs[0].(map[string]any)["line"].(float64)) != 5 ||
		!strings.Contains(errs[0].(map[string]any)["message"].(string), "out-of-order window") {
		t.Fatalf("errors %v", errs)
	}
	if ans["accepted"].(float64) != 4 || ans["rejected"].(float64) != 1 {
		t.Fatalf("answer %v", ans)
	}
	ms := t0.UnixMilli()
	want := fmt.Sprintf("dup_v{db=\"b\"} %d:2\nooo_v{db=\"b\"} %d:4 %d:3\n", ms, ms-30*60_000, ms)
	if got := dump(t, s.node, "dup_v|ooo_v"); got != want {
		t.Fatalf("stored\n%s\nwant\n%s", got, want)
	}
}

// failingBackend fails every write with err.
type failingBackend struct {
	backend.Backend
	err error
}

func (f failingBackend) Write(context.Context, []model.Batch) (model.WriteResult, error) {
	return model.WriteResult{}, f.err
}

func TestBackendErrors_NothingAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
	}{
		{"overloaded", fmt.Errorf("append: %w", model.ErrOverloaded), http.StatusTooManyRequests},
		{"closed", model.ErrClosed, http.StatusServiceUnavailable},
		{"timeout", context.DeadlineExceeded, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := node.Open(node.Options{DataDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			s := serve(t, n, failingBackend{n, tc.err}, httpapi.Limits{})
			status, ans, hdr := s.post(t, "/api/v2/write?bucket=b", []byte("m v=1\n"))
			if status != tc.status || hdr.Get("Retry-After") != "1" || !strings.Contains(ans["message"].(string), "nothing was stored") {
				t.Fatalf("status %d Retry-After %q answer %v", status, hdr.Get("Retry-After"), ans)
			}
			if got := s.cfg.Stats.Get(StatPointsAccepted); got != 0 {
				t.Fatalf("%d points counted as accepted", got)
			}
		})
	}
	// A closed node, for real.
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, n, n, httpapi.Limits{})
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	status, _, hdr := s.post(t, "/write?db=x", []byte("m v=1\n"))
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Fatalf("closed node: %d %v", status, hdr)
	}
}

func TestStatsCountPointsAndViolations(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	ts := time.Now().UnixNano()
	body := fmt.Sprintf("m a=1,b=2 %d\nm v=NaN %d\nm,t=x c=3 0\n", ts, ts)
	if status, ans, _ := s.post(t, "/api/v2/write?bucket=b", []byte(body)); status != 400 {
		t.Fatalf("status %d %v", status, ans)
	}
	st := s.cfg.Stats
	for name, want := range map[string]int64{
		StatWriteRequests:               1,
		StatPointsAccepted:              2,
		StatPointsRejected:              2, // the NaN line, and the point at 0
		StatLinesRejected:               1,
		httpapi.ViolationRejectedPoints: 1,
	} {
		if got := st.Get(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if status, _, _ := s.post(t, "/api/v2/write", []byte("m v=1")); status != 400 {
		t.Fatalf("missing bucket: %d", status)
	}
	if got := st.Get(httpapi.ViolationBadRequest); got != 1 {
		t.Errorf("bad_request = %d, want 1", got)
	}
}

// TestConcurrentWrites runs writers in parallel (the parser pool, under
// the race detector) and checks every point arrived in its own series.
func TestConcurrentWrites(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	base := time.Now().Add(-time.Minute).UnixMilli()
	const writers, requests, lines = 6, 10, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range requests {
				var b strings.Builder
				for l := range lines {
					fmt.Fprintf(&b, "conc,w=%d,l=%d v=%d %d\n", w, l, r, base+int64(r))
				}
				req, _ := http.NewRequest(http.MethodPost, s.URL+"/write?precision=ms&db=c", strings.NewReader(b.String()))
				resp, err := s.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	got := dump(t, s.node, "conc_v")
	if n := strings.Count(got, "\n"); n != writers*lines {
		t.Fatalf("%d series, want %d", n, writers*lines)
	}
	if n := strings.Count(got, ":"); n != writers*lines*requests {
		t.Fatalf("%d points, want %d", n, writers*lines*requests)
	}
}

// TestWrite_ClientDeadlineOnAStalledDiskReturnsAndLeavesNothingRunning: the
// node's WAL fsync hangs (a stalled disk); an HTTP write whose client gives
// up after 300 ms makes the handler return promptly (its goroutine does
// not wait on), and once the disk comes back the node takes writes again.
func TestWrite_ClientDeadlineOnAStalledDiskReturnsAndLeavesNothingRunning(t *testing.T) {
	fsys := vfs.NewCrashFS()
	release := make(chan struct{})
	var stalled atomic.Bool
	fsys.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && stalled.Load() {
			<-release
		}
		return nil
	})
	n, err := node.Open(node.Options{DataDir: t.TempDir(), WALFS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	b := &inflightBackend{Backend: n}
	s := serve(t, n, b, httpapi.Limits{})
	var once sync.Once
	unstall := func() { once.Do(func() { stalled.Store(false); close(release) }) }
	t.Cleanup(unstall) // before the server closes (cleanups run last first)
	line := func(v int) []byte { return fmt.Appendf(nil, "m v=%d %d", v, time.Now().UnixNano()) }
	if code, _, _ := s.post(t, "/write?db=d", line(1)); code != http.StatusNoContent {
		t.Fatalf("first write: %d", code)
	}
	stalled.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/write?db=d", bytes.NewReader(line(2)))
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a write on a stalled disk answered %s", resp.Status)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the client waited %s", d)
	}
	// The handler's call into the node returned (it does not wait on the
	// stalled disk after its client left).
	deadline := time.Now().Add(3 * time.Second)
	for b.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := b.inflight.Load(); n > 0 {
		t.Fatalf("%d writes still running in the node after the client gave up", n)
	}
	unstall()
	if code, _, _ := s.post(t, "/write?db=d", line(3)); code != http.StatusNoContent {
		t.Fatalf("write after the disk came back: %d", code)
	}
}

// inflightBackend counts the writes running in the backend.
type inflightBackend struct {
	backend.Backend
	inflight atomic.Int64
}

func (b *inflightBackend) Write(ctx context.Context, batches []model.Batch) (model.WriteResult, error) {
	b.inflight.Add(1)
	defer b.inflight.Add(-1)
	return b.Backend.Write(ctx, batches)
}

func TestWrite_StringFieldsSkippedAreNotedAndCounted(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	ns := time.Now().UnixNano()
	body := fmt.Sprintf("m,h=a v=1,s=\"up\",ok=t %d\nm,h=a v=2 %d\nm,h=b s=\"x\",t=\"y\" %d\n", ns, ns+1e6, ns)
	status, _, hdr := s.post(t, "/write?db=d&precision=ns", []byte(body))
	if status != http.StatusNoContent {
		t.Fatalf("status %d, want 204", status)
	}
	if hdr.Get(SkippedStringFieldsHeader) != "3" || !strings.HasPrefix(hdr.Get("Warning"), `199 tributary "3 string fields on 2 lines`) {
		t.Fatalf("headers %v", hdr)
	}
	if got := s.cfg.Stats.Get(StatStringFieldsSkipped); got != 3 {
		t.Fatalf("%s = %d, want 3", StatStringFieldsSkipped, got)
	}
	if got := strings.Count(dump(t, s.node, "m_.*"), ":"); got != 3 {
		t.Fatalf("%d points stored, want 3 (v twice, ok once)", got)
	}
	// Nothing to note: no header.
	status, _, hdr = s.post(t, "/write?db=d&precision=ns", []byte(fmt.Sprintf("m v=3 %d", ns)))
	if status != http.StatusNoContent || hdr.Get(SkippedStringFieldsHeader) != "" || hdr.Get("Warning") != "" {
		t.Fatalf("plain write: %d %v", status, hdr)
	}
}
