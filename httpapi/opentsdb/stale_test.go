package opentsdb

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// staleBackend answers like a coordinator given a staleness allowance: it
// records every query's MaxStaleness and, when one is positive, says its
// answer is fresh through freshMs.
type staleBackend struct {
	backend.Backend
	freshMs int64
	mu      sync.Mutex
	got     []int64
}

func (b *staleBackend) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	b.mu.Lock()
	b.got = append(b.got, q.MaxStaleness)
	b.mu.Unlock()
	info, err := b.Backend.Query(ctx, q, emit)
	if q.MaxStaleness > 0 {
		info.FreshThroughMs = b.freshMs
	}
	return info, err
}

func TestQuery_MaxStaleness(t *testing.T) {
	e := newEnv(t)
	if _, err := e.n.Write(context.Background(), []model.Batch{{Labels: labels.FromStrings("__name__", "cpu", "host", "a"), Ts: []int64{nowMs() - 60_000}, Vs: []float64{1}}}); err != nil {
		t.Fatal(err)
	}
	fresh := nowMs() - 20_000
	sb := &staleBackend{Backend: e.n, freshMs: fresh}
	a := newAPI(sb, e.cfg)
	a.now = func() time.Time { return now }
	mux := http.NewServeMux()
	a.register(mux)
	e.srv.Close() // the env's cleanup closes the server put in its place
	e.srv = httptest.NewServer(mux)

	wantHeader := time.UnixMilli(fresh).UTC().Format(time.RFC3339Nano)
	for _, tc := range []struct {
		name, method, path, body string
		want                     int64
	}{
		{"not given", http.MethodGet, "/api/query?start=1h-ago&m=sum:cpu", "", 0},
		{"GET", http.MethodGet, "/api/query?start=1h-ago&m=sum:cpu&max_staleness=30s", "", 30_000},
		{"GET without aggregation in the backend", http.MethodGet, "/api/query?start=1h-ago&m=none:cpu&max_staleness=2m", "", 120_000},
		{"zero: always fresh", http.MethodGet, "/api/query?start=1h-ago&m=sum:cpu&max_staleness=0", "", model.AlwaysFresh},
		{"POST", http.MethodPost, "/api/query", `{"start":"1h-ago","maxStaleness":"1m","queries":[{"aggregator":"max","metric":"cpu"}]}`, 60_000},
	} {
		sb.mu.Lock()
		sb.got = nil
		sb.mu.Unlock()
		st, body, hdr := e.do(tc.method, tc.path, tc.body)
		if st != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.name, st, body)
		}
		sb.mu.Lock()
		got := slices.Clone(sb.got)
		sb.mu.Unlock()
		if len(got) == 0 || slices.ContainsFunc(got, func(v int64) bool { return v != tc.want }) {
			t.Fatalf("%s: the backend was asked with max staleness %v, want %d", tc.name, got, tc.want)
		}
		if h := hdr.Get(httpapi.FreshThroughHeader); (tc.want > 0) != (h == wantHeader) {
			t.Fatalf("%s: %s %q (want %s: %v)", tc.name, httpapi.FreshThroughHeader, h, wantHeader, tc.want > 0)
		}
	}
	for _, bad := range []string{"-5s", "soon", "30", "1dc"} {
		st, body, _ := e.do(http.MethodGet, "/api/query?start=1h-ago&m=sum:cpu&max_staleness="+bad, "")
		if st != http.StatusBadRequest || !strings.Contains(string(body), "maxStaleness: ") {
			t.Fatalf("max_staleness=%s: %d %s", bad, st, body)
		}
	}
}
