package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestLocal_InfluxQLQueriesGoThroughTheCoordinator: on tributary local,
// points written to the edge with /write are answered by /query, which
// runs through the coordinator's query front end: listings, a Grafana
// request (epoch=ms, GROUP BY time and tag), TSBS's last point.
func TestLocal_InfluxQLQueriesGoThroughTheCoordinator(t *testing.T) {
	s := startLocalStack(t)
	now := time.Now().Truncate(10 * time.Minute) // buckets of 2m start at t0
	t0 := now.Add(-10 * time.Minute)
	var body strings.Builder
	for i := 0; i < 6; i++ {
		ts := t0.Add(time.Duration(i) * time.Minute).Unix()
		fmt.Fprintf(&body, "cpu,hostname=host_0 usage_user=%d,usage_system=%d %d\n", 10+i, i, ts)
		fmt.Fprintf(&body, "cpu,hostname=host_1 usage_user=%d %d\n", 20+i, ts)
	}
	resp, err := http.Post("http://"+s.http+"/write?db=benchmark&precision=s", "text/plain", strings.NewReader(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("write: %d", resp.StatusCode)
	}
	query := func(q string, extra string) string {
		t.Helper()
		code, body := s.get(t, "/query?db=benchmark&q="+url.QueryEscape(q)+extra)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", q, code, body)
		}
		return strings.TrimSpace(body)
	}
	// The databases TSBS's loader checks first.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(query("SHOW DATABASES", ""), `"benchmark"`) {
		if time.Now().After(deadline) {
			t.Fatalf("SHOW DATABASES never listed benchmark: %s", query("SHOW DATABASES", ""))
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := `{"results":[{"statement_id":0,"series":[{"name":"measurements","columns":["name"],"values":[["cpu"]]}]}]}`
	if got := query("SHOW MEASUREMENTS", ""); got != want {
		t.Errorf("SHOW MEASUREMENTS:\ngot  %s\nwant %s", got, want)
	}
	// Grafana: GET with epoch=ms, the builder's time filter, tag grouping.
	from, to := t0.UnixMilli(), t0.Add(6*time.Minute-time.Millisecond).UnixMilli()
	q := fmt.Sprintf(`SELECT max("usage_user") FROM "cpu" WHERE time >= %dms and time <= %dms GROUP BY time(2m), "hostname"::tag fill(null)`, from, to)
	var a struct {
		Results []struct {
			Series []struct {
				Tags   map[string]string `json:"tags"`
				Values [][]json.Number   `json:"values"`
			} `json:"series"`
			Err string `json:"error"`
		} `json:"results"`
	}
	raw := query(q, "&epoch=ms")
	if err := json.Unmarshal([]byte(raw), &a); err != nil || len(a.Results) != 1 || len(a.Results[0].Series) != 2 {
		t.Fatalf("%s: %v %s", q, err, raw)
	}
	for k, host := range []string{"host_0", "host_1"} {
		sr := a.Results[0].Series[k]
		if sr.Tags["hostname"] != host || len(sr.Values) != 3 {
			t.Fatalf("%s: series %d: %s", q, k, raw)
		}
		for i, v := range sr.Values {
			wantT, wantV := from+int64(i)*120_000, 10*(k+1)+2*i+1
			if v[0].String() != fmt.Sprint(wantT) || v[1].String() != fmt.Sprint(wantV) {
				t.Errorf("%s: host %s row %d: got %v, want [%d %d]", q, host, i, v, wantT, wantV)
			}
		}
	}
	// TSBS lastpoint.
	got := query(`SELECT * from cpu group by "hostname" order by time desc limit 1`, "&epoch=s")
	last := t0.Add(5 * time.Minute).Unix()
	want = fmt.Sprintf(`{"results":[{"statement_id":0,"series":[{"name":"cpu","tags":{"hostname":"host_0"},"columns":["time","usage_system","usage_user"],"values":[[%d,5,15]]},{"name":"cpu","tags":{"hostname":"host_1"},"columns":["time","usage_system","usage_user"],"values":[[%d,null,25]]}]}]}`, last, last)
	if got != want {
		t.Errorf("lastpoint:\ngot  %s\nwant %s", got, want)
	}
}
