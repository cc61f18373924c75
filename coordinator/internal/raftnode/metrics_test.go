package raftnode_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	"github.com/tributarydb/tributary/internal/vfs"
)

// collect reads every data point of the member's metrics: sums and
// gauges by "name" or "name outcome=x", histograms as their count.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = float64(p.Value)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					o, _ := p.Attributes.Value("outcome")
					out[m.Name+" outcome="+o.AsString()] = float64(p.Count)
				}
			}
		}
	}
	return out
}

func TestNode_MetricsFollowTheMember(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	c := newMemCluster(t, 1, func(uint64) vfs.FS { return vfs.NewCrashFS() }, func(o *raftnode.Options) {
		o.MeterProvider, o.SnapshotEntries, o.KeepEntries, o.MaxEntryBytes = mp, 5, 2, 8<<10
	})
	registerEdge(t, c, "pi-1")
	for i := range 12 {
		f := c.nodes[1].ProposeAsync(seriesCmd("pi-1", i, 1))
		c.pump()
		if _, err := f.Result(); err != nil {
			t.Fatal(err)
		}
	}
	// A command the catalog refuses, and one too large for an entry.
	bad := c.nodes[1].ProposeAsync(catalog.EncodeCommand(catalog.RegisterNode{ID: "bad id!", Role: catalog.RoleEdge}))
	c.pump()
	if _, err := bad.Result(); err == nil {
		t.Fatal("an invalid node id was accepted")
	}
	if _, err := c.nodes[1].ProposeAsync(make([]byte, 9<<10)).Result(); err == nil {
		t.Fatal("an oversized command was accepted")
	}

	got := collect(t, reader)
	st := c.nodes[1].Status()
	want := map[string]float64{
		"tributary.raft.term":                                float64(st.Term),
		"tributary.raft.leader":                              1,
		"tributary.raft.is_leader":                           1,
		"tributary.raft.commit_index":                        float64(st.Commit),
		"tributary.raft.applied_index":                       float64(st.Applied),
		"tributary.raft.snapshot_index":                      float64(st.Snapshot),
		"tributary.raft.log.entries":                         float64(st.LastLog - st.FirstLog + 1),
		"tributary.raft.voters":                              1,
		"tributary.raft.learners":                            0,
		"tributary.raft.snapshots.restored":                  0,
		"tributary.raft.proposal.duration outcome=applied":   13,
		"tributary.raft.proposal.duration outcome=rejected":  1,
		"tributary.raft.proposal.duration outcome=too_large": 1,
		"tributary.raft.messages.dropped":                    0,
		"tributary.raft.proposals.reproposed":                0,
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s = %v (reported: %v), want %v", name, g, ok, w)
		}
	}
	if got["tributary.raft.snapshots.taken"] < 2 || st.Snapshot == 0 {
		t.Errorf("snapshots taken = %v (snapshot index %d) after %d entries with a snapshot every 5", got["tributary.raft.snapshots.taken"], st.Snapshot, st.Applied)
	}

	// A restarted member restores its snapshot; the closed one's
	// callback no longer reports.
	c.nodes[1].Close()
	c.start(1, nil)
	c.nodes[1].Campaign()
	c.pump()
	got = collect(t, reader)
	if got["tributary.raft.snapshots.restored"] != 1 {
		t.Errorf("snapshots restored after a restart = %v, want 1", got["tributary.raft.snapshots.restored"])
	}
	if got["tributary.raft.applied_index"] != float64(c.nodes[1].Status().Applied) {
		t.Errorf("applied index %v, the restarted member's is %d", got["tributary.raft.applied_index"], c.nodes[1].Status().Applied)
	}
	c.closeAll()
}
