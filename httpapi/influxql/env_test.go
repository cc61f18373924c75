package influxql

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node"
)

// testNow is the clock of the node and of now() in tests: data is
// written in the hours before it.
var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// testEnv is a real node behind the line protocol write API and the
// InfluxQL API.
type testEnv struct {
	t    testing.TB
	node *node.Node
	srv  *httptest.Server
	cfg  *httpapi.Config
}

func newTestEnv(t testing.TB, opts Options) *testEnv {
	t.Helper()
	n, err := node.Open(node.Options{
		DataDir:          t.TempDir(),
		Now:              func() time.Time { return testNow },
		OutOfOrderWindow: 24 * time.Hour,
		FlushInterval:    time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return newTestEnvFor(t, n, n, opts)
}

func newTestEnvFor(t testing.TB, n *node.Node, b backend.Backend, opts Options) *testEnv {
	t.Helper()
	if opts.Now == nil {
		opts.Now = func() time.Time { return testNow }
	}
	cfg := &httpapi.Config{}
	api, err := New(b, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	influx.Register(mux, b, cfg)
	api.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &testEnv{t: t, node: n, srv: srv, cfg: cfg}
}

// write stores line protocol (precision s) in db.
func (e *testEnv) write(db, body string) {
	e.t.Helper()
	resp, err := http.Post(e.srv.URL+"/write?precision=s&db="+url.QueryEscape(db), "text/plain", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("write: %d %s", resp.StatusCode, b)
	}
}

// get sends GET /query with params and returns the status and body.
func (e *testEnv) get(params url.Values) (int, string) {
	e.t.Helper()
	resp, err := http.Get(e.srv.URL + "/query?" + params.Encode())
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// query runs q on db with epoch (may be "") and returns the decoded
// answer, failing on a status other than 200.
func (e *testEnv) query(db, q, epoch string) answer {
	e.t.Helper()
	p := url.Values{"q": {q}, "db": {db}}
	if epoch != "" {
		p.Set("epoch", epoch)
	}
	status, body := e.get(p)
	if status != http.StatusOK {
		e.t.Fatalf("query %q: status %d: %s", q, status, body)
	}
	var a answer
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		e.t.Fatalf("query %q: decode %q: %v", q, body, err)
	}
	a.raw = body
	return a
}

// answer is a decoded /query answer.
type answer struct {
	Results []struct {
		StatementID int `json:"statement_id"`
		Series      []struct {
			Name    string            `json:"name"`
			Tags    map[string]string `json:"tags"`
			Columns []string          `json:"columns"`
			Values  [][]any           `json:"values"`
			Partial bool              `json:"partial"`
		} `json:"series"`
		Partial bool   `json:"partial"`
		Err     string `json:"error"`
	} `json:"results"`
	Err string `json:"error"`
	raw string
}
