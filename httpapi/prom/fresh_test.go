package prom

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// staleBackend answers like a coordinator given a staleness allowance: it
// records the MaxStaleness of every query and, when one is positive, says
// its answer is fresh through freshMs.
type staleBackend struct {
	backend.Backend
	freshMs int64
	mu      *sync.Mutex
	got     *[]int64
}

func (b staleBackend) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	b.mu.Lock()
	*b.got = append(*b.got, q.MaxStaleness)
	b.mu.Unlock()
	info, err := b.Backend.Query(ctx, q, emit)
	if q.MaxStaleness > 0 {
		info.FreshThroughMs = b.freshMs
	}
	return info, err
}

func TestQuery_MaxStaleness(t *testing.T) {
	n, err := node.Open(node.Options{DataDir: t.TempDir(), Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ts := testNow.Add(-time.Minute).UnixMilli()
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: nlabels.FromStrings("__name__", "cpu"), Ts: []int64{ts}, Vs: []float64{1}}}); err != nil {
		t.Fatal(err)
	}
	fresh := testNow.Add(-20 * time.Second)
	var mu sync.Mutex
	var got []int64
	e := newTestEnvFor(t, n, staleBackend{n, fresh.UnixMilli(), &mu, &got}, httpapi.Config{}, Options{})
	end := testNow.UTC().Format(time.RFC3339)
	instant := func(staleness string) url.Values {
		v := url.Values{"query": {"cpu"}, "time": {end}}
		if staleness != "" {
			v.Set("max_staleness", staleness)
		}
		return v
	}
	rangeQ := url.Values{"query": {"max_over_time(cpu[5m])"}, "start": {testNow.Add(-time.Hour).UTC().Format(time.RFC3339)}, "end": {end}, "step": {"60"}, "max_staleness": {"1m30s"}}
	for _, tc := range []struct {
		name, path string
		params     url.Values
		want       int64 // the backend queries' MaxStaleness
	}{
		{"not given", "/api/v1/query", instant(""), 0},
		{"a duration", "/api/v1/query", instant("30s"), 30_000},
		{"float seconds, rounded up to ms", "/api/v1/query", instant("0.0015"), 2},
		{"zero: always fresh", "/api/v1/query", instant("0"), model.AlwaysFresh},
		{"range query", "/api/v1/query_range", rangeQ, 90_000},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		st, r, body := e.call(http.MethodGet, tc.path, tc.params)
		if st != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.name, st, body)
		}
		mu.Lock()
		asked := slices.Clone(got)
		mu.Unlock()
		if len(asked) == 0 || slices.ContainsFunc(asked, func(s int64) bool { return s != tc.want }) {
			t.Fatalf("%s: the backend was asked with max staleness %v, want %d", tc.name, asked, tc.want)
		}
		info := freshInfo(fresh.UnixMilli())
		if tc.want > 0 != slices.Contains(r.Infos, info) {
			t.Fatalf("%s: infos %q (want the freshness line: %v)", tc.name, r.Infos, tc.want > 0)
		}
	}

	// The header says it too.
	resp, err := e.srv.Client().Get(e.srv.URL + "/api/v1/query?" + instant("30s").Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := resp.Header.Get(httpapi.FreshThroughHeader); h != fresh.UTC().Format(time.RFC3339Nano) {
		t.Fatalf("%s: %q, want %s", httpapi.FreshThroughHeader, h, fresh.UTC().Format(time.RFC3339Nano))
	}

	for _, bad := range []struct{ value, why string }{
		{"-5", "must not be negative"}, {"-5s", "cannot parse"},
		{"soon", "cannot parse \"soon\" to a valid duration"},
		{"NaN", "cannot parse"},
	} {
		for _, path := range []string{"/api/v1/query", "/api/v1/query_range"} {
			p := instant(bad.value)
			if path == "/api/v1/query_range" {
				p = url.Values{"query": {"cpu"}, "start": {"0"}, "end": {"60"}, "step": {"15"}, "max_staleness": {bad.value}}
			}
			st, r, body := e.call(http.MethodPost, path, p)
			if st != http.StatusBadRequest || r.ErrorType != "bad_data" || !strings.Contains(r.Error, `invalid parameter "max_staleness"`) || !strings.Contains(r.Error, bad.why) {
				t.Fatalf("%s max_staleness=%s: %d %s", path, bad.value, st, body)
			}
		}
	}
}
