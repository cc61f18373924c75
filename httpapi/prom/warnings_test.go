package prom

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// warningBackend answers like a coordinator whose answer is partial.
type warningBackend struct {
	backend.Backend
	warnings []string
}

func (b warningBackend) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	info, err := b.Backend.Query(ctx, q, emit)
	info.Warnings = b.warnings
	return info, err
}

func TestQuery_BackendWarningsReachTheResponse(t *testing.T) {
	n, err := node.Open(node.Options{DataDir: t.TempDir(), Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ts := testNow.Add(-time.Minute).UnixMilli()
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: nlabels.FromStrings("__name__", "cpu"), Ts: []int64{ts}, Vs: []float64{1}}}); err != nil {
		t.Fatal(err)
	}
	warn := "edge pi-7 unreachable: points after 2026-06-01T11:00:00Z missing"
	e := newTestEnvFor(t, n, warningBackend{n, []string{warn}}, httpapi.Config{}, Options{})
	st, r, body := e.call(http.MethodGet, "/api/v1/query", url.Values{"query": {"cpu"}, "time": {"1780315200"}})
	if st != http.StatusOK || !slices.Contains(r.Warnings, warn) {
		t.Fatalf("%d %s", st, body)
	}
}
