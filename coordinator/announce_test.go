package coordinator

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/replicator"
)

// TestCluster_NewSeriesAreListedBeforeTheirSegmentShips: three
// coordinators register with the catalog features of this version, so
// the intakes record announcements with registration watermarks; a
// series an edge creates is listed by every coordinator from its catalog
// (no edge asked, no warning) before any segment holding it ships, and a
// query ending before the edge's registration watermark does not ask the
// edge for series it does not hold.
func TestCluster_NewSeriesAreListedBeforeTheirSegmentShips(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three coordinators and an edge")
	}
	addrs := freeAddrs(t, 3)
	ms := startBootstrapped(t, addrs[:3])
	leader(t, ms)
	for _, m := range ms {
		eventually(t, m.nodeID+" sees every member able to apply announcements and record batches", func() bool {
			return m.c.Ready() && len(registeredCoordinators(m.c)) == 3 && m.c.Catalog().AnnounceReady() && m.c.Catalog().RecordBatchReady()
		})
	}
	var targets []string
	for _, m := range ms {
		targets = append(targets, m.c.IntakeAddr())
	}
	// An edge whose segments do not seal within the test: its series can
	// only reach the catalog by announcement.
	s, err := replicator.New(replicator.Options{Targets: targets, Insecure: true, CursorPath: filepath.Join(t.TempDir(), "replication.cursor"),
		SoftwareVersion: "test", BackoffInitial: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: edgeID, WALSegmentAge: time.Hour, WALRetention: s.RetainFrom, WriteGate: s.WriteGate})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Run(ctx, n); err != nil {
			t.Errorf("shipper: %v", err)
		}
	})
	defer func() {
		cancel()
		wg.Wait()
		if err := n.Close(); err != nil {
			t.Errorf("close edge: %v", err)
		}
	}()
	eventually(t, "the edge's registration watermark", func() bool {
		_, ok := ms[0].c.Catalog().Registration(edgeID)
		return ok
	})
	// A new series: its segment stays open; the announcement carries it.
	ls := labels.FromStrings("__name__", "fresh_gauge", "room", "kitchen")
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: ls, Ts: []int64{time.Now().UnixMilli()}, Vs: []float64{21.5}}}); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	eq, err := labels.NewMatcher(labels.MatchEqual, "__name__", "fresh_gauge")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		eventually(t, m.nodeID+" lists the new series", func() bool {
			ctx, warns := backend.WithWarnings(context.Background())
			got, err := m.c.Backend().Series(ctx, []*labels.Matcher{eq}, 0)
			return err == nil && len(got) == 1 && labels.Equal(got[0], ls) && len(warns.List()) == 0
		})
	}
	t.Logf("new series listed by every coordinator %v after its write", time.Since(created))
	if p, _ := ms[0].c.Catalog().Progress(edgeID); p.AckedThrough() != 0 {
		t.Fatalf("a segment shipped (acked through %d): the series did not need its announcement", p.AckedThrough())
	}
	reg, _ := ms[0].c.Catalog().Registration(edgeID)
	// A series the edge does not hold, over a range ending before the
	// registration watermark: nothing matches, nobody is asked, no
	// warning.
	none, err := labels.NewMatcher(labels.MatchEqual, "__name__", "no_such_metric")
	if err != nil {
		t.Fatal(err)
	}
	_, cov, err := ms[1].c.Frontend().QueryWithCoverage(context.Background(),
		model.Query{Matchers: []*labels.Matcher{none}, Start: reg - time.Hour.Milliseconds(), End: reg, Mode: model.ModeRaw},
		func(model.Series) error { return nil })
	if err != nil || len(cov.Edges) != 0 {
		t.Fatalf("query ending at the registration watermark: coverage %+v, %v; want no edge asked", cov, err)
	}
}
