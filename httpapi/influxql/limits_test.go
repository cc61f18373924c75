package influxql

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestQuery_OverThePointLimitIsAStatementError: a statement that would
// hold more than MaxPoints points stops reading and answers InfluxDB's
// max-select-point error in its result (HTTP 200), and the next
// statements are not executed.
func TestQuery_OverThePointLimitIsAStatementError(t *testing.T) {
	e := newTestEnv(t, Options{MaxPoints: 4})
	loadFixtureData(e)
	a := e.query("mydb", "SELECT * FROM cpu; SHOW DATABASES", "")
	if len(a.Results) != 2 || !strings.HasPrefix(a.Results[0].Err, "max-select-point limit exceeded: (") || a.Results[1].Err != "not executed" {
		t.Fatalf("got %s", a.raw)
	}
	// The same data pushed down per bucket holds fewer points and fits.
	a = e.query("mydb", "SELECT count(value) FROM cpu_load_short", "")
	if len(a.Results) != 1 || a.Results[0].Err != "" || len(a.Results[0].Series) != 1 {
		t.Fatalf("got %s", a.raw)
	}
	// Filled buckets count too.
	a = e.query("mydb", "SELECT count(value) FROM cpu_load_short WHERE time > now() - 1d GROUP BY time(1m)", "")
	if len(a.Results) != 1 || !strings.HasPrefix(a.Results[0].Err, "max-select-point limit exceeded") {
		t.Fatalf("got %s", a.raw)
	}
}

// TestQuery_BodyOverTheLimitIs413: a form body larger than the request
// body limit is refused before it is parsed.
func TestQuery_BodyOverTheLimitIs413(t *testing.T) {
	e := newTestEnv(t, Options{})
	e.cfg.Limits.MaxBodyBytes = 1 << 10
	body := "q=" + url.QueryEscape("SHOW DATABASES"+strings.Repeat(" ", 4<<10))
	resp, err := http.Post(e.srv.URL+"/query", "application/x-www-form-urlencoded", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
}

// TestQuery_TooManySeriesIsAStatementError: more series than the
// per-query limit is the statement's error, not a truncated answer.
func TestQuery_TooManySeriesIsAStatementError(t *testing.T) {
	e := newTestEnv(t, Options{})
	e.cfg.Limits.MaxSeriesPerQuery = 2
	loadFixtureData(e)
	for _, q := range []string{"SELECT value FROM cpu_load_short", "SHOW SERIES"} {
		a := e.query("mydb", q, "")
		if len(a.Results) != 1 || a.Results[0].Err == "" || len(a.Results[0].Series) != 0 {
			t.Errorf("%s: got %s", q, a.raw)
		}
	}
}

// TestQuery_UnknownMethodIsNot404: /query answers other methods with 405,
// never a bare 404.
func TestQuery_UnknownMethodIsNot404(t *testing.T) {
	e := newTestEnv(t, Options{})
	req, _ := http.NewRequest(http.MethodPut, e.srv.URL+"/query?q=SHOW+DATABASES", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("status %d, want 405", resp.StatusCode)
	}
}
