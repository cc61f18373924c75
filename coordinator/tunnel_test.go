package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/internal/tunnel"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/replicator"
)

// TestCoordinator_QueriesAnEdgeThroughItsTunnel runs one coordinator and
// an edge that advertises no query address: without a tunnel a query
// warns that the edge is unreachable and misses its fresh points; with
// the edge's tunnel open it answers every point written, shipped or not,
// without that warning.
func TestCoordinator_QueriesAnEdgeThroughItsTunnel(t *testing.T) {
	addrs := freeAddrs(t, 1)
	peers := []Peer{{RaftID: 1, NodeID: "coord-1", Addr: addrs[0]}}
	m := startMember(t, 1, "coord-1", addrs[0], peers, nil)
	leader(t, []*member{m})
	eventually(t, "the coordinator is ready", func() bool { return m.c.Ready() && len(registeredCoordinators(m.c)) == 1 })

	e := startEdge(t, []string{m.c.IntakeAddr()})
	through := e.writeAndShip(t, 6)
	eventually(t, "the catalog holds the edge's segments", func() bool {
		p, ok := m.c.Catalog().Progress(edgeID)
		return ok && p.AckedThrough() >= through
	})
	// Fresh points, left in the edge's open WAL segment: only the edge
	// has them.
	fresh := model.Batch{Labels: []labels.Label{{Name: "__name__", Value: "temp"}, {Name: "sensor", Value: "s0"}}}
	for range 20 {
		fresh.Ts = append(fresh.Ts, e.next)
		fresh.Vs = append(fresh.Vs, 42)
		e.next++
	}
	if res, err := e.n.Write(context.Background(), []model.Batch{fresh}); err != nil || res.Accepted != 20 {
		t.Fatalf("write fresh points: %d accepted, %v", res.Accepted, err)
	}
	key := labels.FromStrings("__name__", "temp", "sensor", "s0").String()
	e.want[key].Ts = append(e.want[key].Ts, fresh.Ts...)
	e.want[key].Vs = append(e.want[key].Vs, fresh.Vs...)

	eq, err := labels.NewMatcher(labels.MatchEqual, "__name__", "temp")
	if err != nil {
		t.Fatal(err)
	}
	all := model.Query{Matchers: []*labels.Matcher{eq}, Start: 0, End: e.next + 1000, Mode: model.ModeRaw}
	query := func() (map[string]model.Series, []string) {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		got := map[string]model.Series{}
		info, err := m.c.Backend().Query(ctx, all, func(s model.Series) error {
			got[s.Labels.String()] = model.Series{Labels: s.Labels, Ts: slices.Clone(s.Ts), Vs: slices.Clone(s.Vs)}
			return nil
		})
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		return got, info.Warnings
	}
	unreachable := func(ws []string) bool {
		return slices.ContainsFunc(ws, func(w string) bool { return strings.Contains(w, "unreachable") })
	}

	// Without a tunnel the edge cannot be asked.
	if _, ws := query(); !unreachable(ws) {
		t.Fatalf("without a tunnel: warnings %q, want one saying the edge is unreachable", ws)
	}

	ro := replicator.Options{Targets: []string{m.c.IntakeAddr()}, Insecure: true, CursorPath: "unused",
		BackoffInitial: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))}
	if err := ro.Validate(); err != nil {
		t.Fatal(err)
	}
	tun, err := tunnel.NewEdge(ro.TunnelOptions(edgeID, grpcapi.New(e.n, grpcapi.Options{}).QueryServer))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := tun.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("tunnels: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() }) // before the edge's node closes
	eventually(t, "the coordinator holds the edge's tunnel", func() bool {
		_, ok := m.c.tunnels.Client(edgeID)
		return ok
	})

	got, ws := query()
	if unreachable(ws) {
		t.Fatalf("with a tunnel: warnings %q", ws)
	}
	e.compare(t, "query through the tunnel", got, 0, t.Errorf)
}
