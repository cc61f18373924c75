package influxql

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// FuzzQueryRequest sends arbitrary q, params, epoch and chunk sizes to
// /query over the fixture data: the handler never panics, answers 200 or
// 400 (or 413), and every answer is JSON of InfluxDB's shape. The limits
// are small so that no input can make a statement hold much.
func FuzzQueryRequest(f *testing.F) {
	raw, err := os.ReadFile("testdata/answers.txt")
	if err != nil {
		f.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "request: GET "); ok {
			if v, err := url.ParseQuery(rest); err == nil {
				f.Add(v.Get("q"), v.Get("params"), v.Get("epoch"), v.Get("chunk_size"))
			}
		}
	}
	f.Add("SELECT mean(x) FROM (SELECT max(y) FROM (SELECT * FROM cpu)) GROUP BY time(1ns)", "", "", "")
	f.Add("SELECT * FROM /.*/ WHERE time > now() - 100000d GROUP BY *", "", "h", "1")
	f.Add("SELECT percentile(usage_user, -5), stddev(usage_user) * 0 / 0 FROM cpu", `{"a":1.5}`, "ms", "0")
	e := newTestEnv(f, Options{MaxPoints: 5000})
	loadFixtureData(e)
	f.Fuzz(func(t *testing.T, q, params, epoch, chunk string) {
		v := url.Values{"db": {"mydb"}, "q": {q}, "epoch": {epoch}, "chunked": {"true"}, "chunk_size": {chunk}}
		if params != "" {
			v.Set("params", params)
		}
		req := httptest.NewRequest(http.MethodPost, "/query", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		mux := http.NewServeMux()
		api, err := New(e.node, e.cfg, Options{MaxPoints: 5000, Now: func() time.Time { return testNow }})
		if err != nil {
			t.Fatal(err)
		}
		api.Register(mux)
		mux.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("q %q: status %d: %s", q, w.Code, w.Body)
		}
		sc := bufio.NewScanner(w.Body)
		sc.Buffer(nil, 1<<26)
		for sc.Scan() {
			var r response
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("q %q: answer line is not JSON: %v: %s", q, err, sc.Bytes())
			}
			if (w.Code == http.StatusOK) == (r.Err != "") {
				t.Fatalf("q %q: status %d with body %s", q, w.Code, sc.Bytes())
			}
		}
	})
}
