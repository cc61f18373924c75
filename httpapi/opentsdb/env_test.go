package opentsdb

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// now is the clock of every test node and API: data is written in the two
// hours before it.
var now = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func nowMs() int64  { return now.UnixMilli() }
func nowSec() int64 { return now.Unix() }

// env is a real node served over HTTP by this package.
type env struct {
	t   testing.TB
	n   *node.Node
	b   backend.Backend
	a   *api
	cfg *httpapi.Config
	srv *httptest.Server
}

func newEnv(t testing.TB, limits ...httpapi.Limits) *env {
	t.Helper()
	n, err := node.Open(node.Options{DataDir: t.TempDir(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &httpapi.Config{}
	if len(limits) > 0 {
		cfg.Limits = limits[0]
	}
	e := &env{t: t, n: n, b: n, cfg: cfg}
	e.a = newAPI(e.b, cfg)
	e.a.now = func() time.Time { return now }
	mux := http.NewServeMux()
	e.a.register(mux)
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		e.srv.Close()
		if err := n.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	return e
}

// do sends a request and returns the status and body.
func (e *env) do(method, path string, body string, hdr ...string) (int, []byte, http.Header) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
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
	return resp.StatusCode, b, resp.Header
}

// put posts a body to /api/put<query> and checks the status.
func (e *env) put(query, body string, wantStatus int) []byte {
	e.t.Helper()
	st, b, _ := e.do("POST", "/api/put"+query, body)
	if st != wantStatus {
		e.t.Fatalf("put%s: status %d, want %d: %s", query, st, wantStatus, b)
	}
	return b
}

// getJSON GETs path, requires 200 and decodes the answer into v.
func (e *env) getJSON(path string, v any) {
	e.t.Helper()
	st, b, _ := e.do("GET", path, "")
	if st != http.StatusOK {
		e.t.Fatalf("GET %s: status %d: %s", path, st, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		e.t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// raw reads every stored sample of the series matching sel from the node.
func (e *env) raw(sel string) map[string][][2]float64 {
	e.t.Helper()
	ms, err := labels.ParseSelector(sel)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][][2]float64{}
	_, err = e.n.Query(context.Background(), model.Query{Matchers: ms, Start: 0, End: nowMs() + 3600_000, Mode: model.ModeRaw}, func(s model.Series) error {
		for i := range s.Ts {
			out[s.Labels.String()] = append(out[s.Labels.String()], [2]float64{float64(s.Ts[i]), s.Vs[i]})
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// count returns the number of samples stored under sel.
func (e *env) count(sel string) int {
	n := 0
	for _, s := range e.raw(sel) {
		n += len(s)
	}
	return n
}

// queryAnswer is one entry of an /api/query answer as clients read it.
type queryAnswer struct {
	Metric        string             `json:"metric"`
	Tags          map[string]string  `json:"tags"`
	AggregateTags []string           `json:"aggregateTags"`
	Dps           map[string]float64 `json:"dps"`
	Query         *struct {
		Index int `json:"index"`
	} `json:"query"`
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func compact(t testing.TB, s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
