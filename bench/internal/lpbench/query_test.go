package lpbench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// naiveExpected is the oracle for queryPlan.expected: the maximum over
// every row whose timestamp lies in (t-60s, t], by scanning all rows.
func naiveExpected(p *queryPlan, s querySpec) []float64 {
	var out []float64
	for j := 1; j <= queryPoints; j++ {
		tNs := (s.hourS + int64(j)*60) * 1e9
		best := int64(-1)
		for r := range p.gen.Rows() {
			ts := p.gen.TimestampNs(r)
			if ts > tNs-60e9 && ts <= tNs {
				best = max(best, p.values[s.host][r])
			}
		}
		out = append(out, float64(best))
	}
	return out
}

func TestQueryPlan_ExpectedMatchesANaiveScanAndHoursStayInsideTheData(t *testing.T) {
	g := testWorkload(t, 5, 2*time.Hour)
	p, err := newQueryPlan(g, 300, 7)
	if err != nil {
		t.Fatal(err)
	}
	firstS, lastS, _ := hourRange(g)
	hosts, hours := map[int]bool{}, map[int64]bool{}
	for _, s := range p.specs {
		if s.hourS%60 != 0 || s.hourS < g.StartNs()/1e9 || (s.hourS+3600)*1e9 > g.TimestampNs(g.Rows()-1) {
			t.Fatalf("hour %d is not a whole minute inside the data [%d, %d]", s.hourS, g.StartNs()/1e9, g.TimestampNs(g.Rows()-1)/1e9)
		}
		want, got := naiveExpected(p, s), p.expected(s)
		for j := range want {
			if want[j] < 0 || got[j] != want[j] {
				t.Fatalf("host %d hour %d point %d: expected %v, naive scan %v", s.host, s.hourS, j, got[j], want[j])
			}
		}
		hosts[s.host], hours[s.hourS] = true, true
	}
	if len(hosts) != 5 || !hours[firstS] || !hours[lastS] || len(hours) != int(lastS-firstS)/60+1 {
		t.Errorf("300 queries covered %d hosts and %d of %d hours (first %v, last %v)",
			len(hosts), len(hours), (lastS-firstS)/60+1, hours[firstS], hours[lastS])
	}
}

func TestQueryPlan_URLsAskForTheBlogQuery(t *testing.T) {
	g := testWorkload(t, 5, 2*time.Hour)
	p, err := newQueryPlan(g, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.setBaseURL("http://127.0.0.1:9")
	u, err := url.Parse(p.specs[0].url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	s := p.specs[0]
	want := `max_over_time(cpu_usage_user{hostname="` + g.HostName(s.host) + `"}[1m])`
	if u.Path != "/api/v1/query_range" || q.Get("query") != want || q.Get("step") != "60" ||
		q.Get("start") != strconv.FormatInt(s.hourS+60, 10) || q.Get("end") != strconv.FormatInt(s.hourS+3600, 10) {
		t.Errorf("url %s", p.specs[0].url)
	}
}

func TestNewQueryPlan_TooLittleData(t *testing.T) {
	g := testWorkload(t, 1, 3600*time.Second)
	if _, err := newQueryPlan(g, 1, 1); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("got %v", err)
	}
}

// servedPlan writes g into a fake store served over HTTP and returns a
// plan of n queries against it.
func servedPlan(t *testing.T, mode string, n int) (*queryPlan, *fakeStore, string) {
	t.Helper()
	g := testWorkload(t, 4, 2*time.Hour)
	store := newFakeStore()
	store.Mode = mode
	srv := httptest.NewServer(store.handler())
	t.Cleanup(srv.Close)
	if _, err := runWrites(context.Background(), writeConfig{URL: srv.URL + "/write", Batches: buildBatches(g, 2, 1000), CallTimeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	p, err := newQueryPlan(g, n, 3)
	if err != nil {
		t.Fatal(err)
	}
	p.setBaseURL(srv.URL)
	return p, store, srv.URL
}

func TestRunQueries_RightAnswersAreTimedAndChecked(t *testing.T) {
	p, store, _ := servedPlan(t, "", 60)
	st, err := runQueries(context.Background(), queryConfig{Plan: p, Warmup: 10, Clients: 2, CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if st.Queries != 50 || len(st.Latencies) != 50 || st.Checked != 60 || st.Wrong != 0 || st.Warmup != 10 {
		t.Errorf("timed %d (%d latencies), checked %d, wrong %d %v", st.Queries, len(st.Latencies), st.Checked, st.Wrong, st.Examples)
	}
	if store.Queries != 60 || len(store.BadQuery) != 0 {
		t.Errorf("server saw %d queries, %v unsupported", store.Queries, store.BadQuery)
	}
}

func TestRunQueries_WrongAnswersAreCounted(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		// One sample off at each window's edge: the check must see it.
		{"closed-left", "want ["},
		{"extra-point", "61 points, want 60"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			p, _, _ := servedPlan(t, tc.mode, 40)
			st, err := runQueries(context.Background(), queryConfig{Plan: p, Warmup: 0, Clients: 2, CallTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if st.Wrong < 30 || len(st.Examples) != maxExamples || !strings.Contains(st.Examples[0], tc.want) {
				t.Errorf("%d of %d wrong; examples %q", st.Wrong, st.Checked, st.Examples)
			}
		})
	}
}

func TestPlanCheck_RejectsMalformedAnswers(t *testing.T) {
	p, _, _ := servedPlan(t, "", 1)
	s := p.specs[0]
	for name, body := range map[string]string{
		"not json":     `<html>`,
		"error":        `{"status":"error","errorType":"bad_data","error":"parse error"}`,
		"vector":       `{"status":"success","data":{"resultType":"vector","result":[]}}`,
		"no series":    `{"status":"success","data":{"resultType":"matrix","result":[]}}`,
		"other host":   `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"hostname":"host_99"},"values":[]}]}}`,
		"number value": `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"hostname":"` + p.gen.HostName(s.host) + `"},"values":[[1,2]]}]}}`,
	} {
		if err := p.check(s, []byte(body)); err == nil {
			t.Errorf("%s: accepted %s", name, body)
		}
	}
}

func TestRunQueries_FailsOnHTTPErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 page not found", http.StatusNotFound)
	}))
	defer srv.Close()
	g := testWorkload(t, 2, 2*time.Hour)
	p, err := newQueryPlan(g, 20, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.setBaseURL(srv.URL)
	_, err = runQueries(context.Background(), queryConfig{Plan: p, Warmup: 5, Clients: 2, CallTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "warm-up") || !strings.Contains(err.Error(), "404 Not Found") {
		t.Fatalf("got %v", err)
	}
}

func TestRunPings_MeasuresTheFloorOrNothing(t *testing.T) {
	_, _, base := servedPlan(t, "", 1)
	if lats := runPings(context.Background(), base+"/ping", 2, 30, 10*time.Second); len(lats) != 30 {
		t.Errorf("%d ping latencies, want 30", len(lats))
	}
	if lats := runPings(context.Background(), base+"/no-such-path", 2, 30, 10*time.Second); lats != nil {
		t.Errorf("pings answered 404 but %d latencies were kept", len(lats))
	}
}

func TestQueryRound_SendsEachQueryOnceAndStopsAtTheFirstFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("i") == "7" {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		w.Write([]byte(r.URL.Query().Get("i")))
	}))
	defer srv.Close()
	clients := newHTTPClients(3, 10*time.Second)
	defer closeClients(clients)
	url := func(i int) string { return srv.URL + "/q?i=" + strconv.Itoa(i) }

	ctx, stop := watchNode(context.Background(), nil)
	var mu sync.Mutex
	seen := map[int]int{}
	lats, err := queryRound(ctx, stop, clients, "type-a", 2, 7, url, func(i int, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		if string(body) != strconv.Itoa(i) {
			t.Errorf("answer to query %d is %q", i, body)
		}
		seen[i]++
	})
	stop(nil)
	if err != nil || len(lats) != 5 || len(seen) != 5 {
		t.Fatalf("queries 2 to 6: err %v, %d latencies, answers %v", err, len(lats), seen)
	}
	for i := 2; i < 7; i++ {
		if seen[i] != 1 {
			t.Errorf("query %d answered %d times, want once", i, seen[i])
		}
	}

	ctx, stop = watchNode(context.Background(), nil)
	defer stop(nil)
	_, err = queryRound(ctx, stop, clients, "type-a", 0, 10, url, func(int, []byte) {})
	if err == nil || !strings.HasPrefix(err.Error(), "type-a, client ") || !strings.Contains(err.Error(), "query 8 (") {
		t.Fatalf("a failing query 7: got %v", err)
	}
	if ctx.Err() == nil {
		t.Error("the failure did not end the round's context")
	}
}
