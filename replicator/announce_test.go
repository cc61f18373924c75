package replicator_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/replicator"
)

var _ replicator.SeriesSource = (*node.Node)(nil)

// enableAnnounce registers the three coordinators of startCatalogIntake
// again, reporting the catalog features of this version.
func enableAnnounce(t *testing.T, r *catalogRaft) {
	t.Helper()
	for id := uint64(1); id <= 3; id++ {
		r.propose(t, catalog.RegisterNode{ID: fmt.Sprint("coord-", id), Role: catalog.RoleCoordinator, RaftID: id, Addr: "127.0.0.1:1",
			Labels: labels.Labels{{Name: catalog.FeaturesLabel, Value: catalog.Features}}})
	}
}

// TestShipper_AnnouncesNewSeriesBeforeTheirSegmentShips: the node's
// segments never seal (a long segment age), yet a series it creates is in
// the catalog within a few announce intervals, and the registration
// watermark passes the time it was written.
func TestShipper_AnnouncesNewSeriesBeforeTheirSegmentShips(t *testing.T) {
	r, _, _, addr := startCatalogIntake(t)
	enableAnnounce(t, r)
	o := options(t, cursorPath(t), addr)
	o.AnnounceInterval = 20 * time.Millisecond
	s := newShipper(t, o)
	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: "pi-an", WALSegmentAge: time.Hour,
		WALRetention: s.RetainFrom, WriteGate: s.WriteGate})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	stop := start(t, s, n)
	defer stop()
	write := func(name string) {
		t.Helper()
		if _, err := n.Write(context.Background(), []model.Batch{{Labels: []labels.Label{{Name: "__name__", Value: name}},
			Ts: []int64{time.Now().UnixMilli()}, Vs: []float64{1}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		write(fmt.Sprint("early_", i))
	}
	eventually(t, "the first series in the catalog", func() bool { return len(r.fsm.EdgeSeries("pi-an")) == 3 })
	before := time.Now().UnixMilli()
	write("late")
	eventually(t, "the late series in the catalog, with the watermark past it", func() bool {
		id, ok := r.fsm.Lookup(labels.FromStrings("__name__", "late"))
		ms, reg := r.fsm.Registration("pi-an")
		return ok && slices.Contains(r.fsm.EdgeSeries("pi-an"), id) && reg && ms >= before
	})
	if p, _ := r.fsm.Progress("pi-an"); p.AckedThrough() != 0 {
		t.Fatalf("a segment was acknowledged (through %d): the series did not need announcing", p.AckedThrough())
	}
	// The Shipper's stats follow once it has read the answer.
	eventually(t, "the registration watermark in the Shipper's stats", func() bool {
		st := s.Stats()
		return st.AnnouncedSeries >= 4 && st.RegisteredThroughMs >= before
	})
}

// TestShipper_AnnouncesALongListInParts: more series than one message
// holds are announced in full parts, the watermark with the last.
func TestShipper_AnnouncesALongListInParts(t *testing.T) {
	r, _, in, addr := startCatalogIntake(t)
	enableAnnounce(t, r)
	dir := t.TempDir()
	n, err := node.Open(node.Options{DataDir: dir, NodeID: "pi-long", WALSegmentAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	const total = 2500
	var bs []model.Batch
	now := time.Now().UnixMilli()
	for i := range total {
		bs = append(bs, model.Batch{Labels: []labels.Label{{Name: "__name__", Value: "m"}, {Name: "i", Value: fmt.Sprint(i)}}, Ts: []int64{now}, Vs: []float64{1}})
	}
	if _, err := n.Write(context.Background(), bs); err != nil {
		t.Fatal(err)
	}
	o := options(t, cursorPath(t), addr)
	o.AnnounceInterval = 20 * time.Millisecond
	s := newShipper(t, o)
	stop := start(t, s, n)
	defer stop()
	eventually(t, "every series registered with a watermark", func() bool {
		_, reg := r.fsm.Registration("pi-long")
		return len(r.fsm.EdgeSeries("pi-long")) == total && reg
	})
	if got := in.Stats().Announcements; got < 3 {
		t.Fatalf("%d announcements for %d series; want at least 3 parts", got, total)
	}
}

// TestShipper_DoesNotAnnounceToACoordinatorWithoutTheFeature: the test
// cloud's welcome lists no features (a coordinator of an earlier
// version): nothing is announced, segments ship as before.
func TestShipper_DoesNotAnnounceToACoordinatorWithoutTheFeature(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	o := options(t, cursorPath(t), in.addr)
	o.AnnounceInterval = 10 * time.Millisecond
	s := newShipper(t, o)
	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: "pi-old", WALSegmentAge: 20 * time.Millisecond,
		WALRetention: s.RetainFrom, WriteGate: s.WriteGate})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	stop := start(t, s, n)
	defer stop()
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: []labels.Label{{Name: "__name__", Value: "x"}},
		Ts: []int64{time.Now().UnixMilli()}, Vs: []float64{1}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a segment acknowledged", func() bool { return s.Stats().AckedThrough > 0 })
	if st := s.Stats(); st.AnnouncedSeries != 0 || st.RegisteredThroughMs != 0 {
		t.Fatalf("announced to a coordinator without the feature: %+v", st)
	}
}
