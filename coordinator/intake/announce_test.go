package intake_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/intake"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/wire"
)

func (c *client) announce(id uint64, throughMs int64, more bool, series ...labels.Labels) *pb.ShipAnnounced {
	c.t.Helper()
	m := &pb.ShipAnnounce{Id: id, ThroughMs: throughMs, More: more}
	for _, ls := range series {
		s := &pb.AnnouncedSeries{}
		for _, l := range ls {
			s.Labels = append(s.Labels, &pb.Label{Name: l.Name, Value: l.Value})
		}
		m.Series = append(m.Series, s)
	}
	if err := c.stream.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Announce{Announce: m}}); err != nil {
		c.t.Fatal(err)
	}
	a := c.recv().GetAnnounced()
	if a == nil || a.GetId() != id {
		c.t.Fatalf("answer to announcement %d: %v", id, a)
	}
	return a
}

func TestIntake_AnnouncementsAreRecordedWithTheWatermarkOnceEveryMemberCan(t *testing.T) {
	e := startEnv(t, func(o *intake.Options) { o.AnnounceInterval = 10 * time.Millisecond })
	cl := dial(t, e.addr)
	c := open(t, cl, "pi-1")
	if w := c.welcome(); !slices.Contains(w.GetFeatures(), wire.FeatureAnnounce) {
		t.Fatalf("welcome features %v", w.GetFeatures())
	}
	cpu := labels.FromStrings("__name__", "cpu", "host", "pi-1")
	// coord-1 registered without the features label (as a coordinator of
	// the version before would): the series are registered, no watermark.
	a := c.announce(1, 5000, false, cpu)
	if a.GetRegistered() || a.GetError() != "" {
		t.Fatalf("announcement before the gate opens: %v", a)
	}
	id, ok := e.fsm.Lookup(cpu)
	if !ok || !slices.Contains(e.fsm.EdgeSeries("pi-1"), id) {
		t.Fatal("the announced series is not registered for pi-1")
	}
	if _, ok := e.fsm.Registration("pi-1"); ok {
		t.Fatal("a registration watermark recorded while a member cannot apply AnnounceSeries")
	}
	// The member reports the feature (an upgraded coordinator registers
	// with it): announcements now carry the watermark.
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.RegisterNode{
		ID: coordID, Role: catalog.RoleCoordinator, RaftID: 1, Addr: "127.0.0.1:1",
		Labels: labels.Labels{{Name: catalog.FeaturesLabel, Value: catalog.Features}}})); err != nil {
		t.Fatal(err)
	}
	mem := labels.FromStrings("__name__", "mem", "host", "pi-1")
	// A part with more to come registers its series and no watermark.
	if a := c.announce(2, 6000, true, mem); a.GetError() != "" || a.GetRegistered() {
		t.Fatalf("first part: %v", a)
	}
	if _, ok := e.fsm.Lookup(mem); !ok {
		t.Fatal("the first part's series is not registered")
	}
	if a := c.announce(3, 6000, false); !a.GetRegistered() || a.GetThroughMs() != 6000 {
		t.Fatalf("last part: %v", a)
	}
	if ms, ok := e.fsm.Registration("pi-1"); !ok || ms != 6000 {
		t.Fatalf("registration %d %v", ms, ok)
	}
	// A repeat (the edge announces everything again on a new stream) and
	// an older watermark change nothing.
	before := e.fsm.SeriesCount()
	if a := c.announce(4, 100, false, cpu, mem); !a.GetRegistered() || a.GetThroughMs() != 6000 {
		t.Fatalf("repeat: %v", a)
	}
	if e.fsm.SeriesCount() != before {
		t.Fatal("a repeated announcement created series")
	}
	if st := e.in.Stats(); st.Announcements != 4 || st.AnnounceCommands < 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestIntake_AnnouncementsOfManyStreamsShareCommands(t *testing.T) {
	e := startEnv(t, func(o *intake.Options) { o.AnnounceInterval = 200 * time.Millisecond })
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.RegisterNode{
		ID: coordID, Role: catalog.RoleCoordinator, RaftID: 1, Addr: "127.0.0.1:1",
		Labels: labels.Labels{{Name: catalog.FeaturesLabel, Value: catalog.Features}}})); err != nil {
		t.Fatal(err)
	}
	cl := dial(t, e.addr)
	const edges = 6
	var cs []*client
	for i := range edges {
		c := open(t, cl, "pi-"+string(rune('a'+i)))
		c.welcome()
		cs = append(cs, c)
	}
	done := make(chan *pb.ShipAnnounced, edges)
	for i, c := range cs {
		go func() {
			m := &pb.ShipAnnounce{Id: 1, ThroughMs: int64(1000 + i), Series: []*pb.AnnouncedSeries{{Labels: []*pb.Label{{Name: "__name__", Value: "x"}, {Name: "i", Value: string(rune('a' + i))}}}}}
			if err := c.stream.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Announce{Announce: m}}); err != nil {
				done <- nil
				return
			}
			r, err := c.stream.Recv()
			if err != nil {
				done <- nil
				return
			}
			done <- r.GetAnnounced()
		}()
	}
	for range edges {
		if a := <-done; a == nil || !a.GetRegistered() {
			t.Fatalf("answer %v", a)
		}
	}
	// One turn of the batcher took most of them: far fewer commands than
	// announcements.
	if st := e.in.Stats(); st.AnnounceCommands >= edges {
		t.Fatalf("%d commands for %d announcements", st.AnnounceCommands, edges)
	}
}

func TestIntake_AnnouncementOverTheLimitEndsTheStream(t *testing.T) {
	e := startEnv(t, nil)
	c := open(t, dial(t, e.addr), "pi-1")
	c.welcome()
	m := &pb.ShipAnnounce{Id: 1, ThroughMs: 1}
	for range wire.MaxAnnounceSeries + 1 {
		m.Series = append(m.Series, &pb.AnnouncedSeries{Labels: []*pb.Label{{Name: "__name__", Value: "x"}}})
	}
	if err := c.stream.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Announce{Announce: m}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.stream.Recv(); err == nil {
		t.Fatal("an announcement over the limit was answered")
	}
}

// TestIntake_RejectedAnnouncedSeriesAreAnnouncedAgain: a series the
// catalog rejects (the fleet's series limit) is answered with an error,
// so that the edge announces it again and its watermark stays below it.
func TestIntake_RejectedAnnouncedSeriesAreAnnouncedAgain(t *testing.T) {
	e := startEnv(t, func(o *intake.Options) { o.AnnounceInterval = 10 * time.Millisecond })
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.RegisterNode{
		ID: coordID, Role: catalog.RoleCoordinator, RaftID: 1, Addr: "127.0.0.1:1",
		Labels: labels.Labels{{Name: catalog.FeaturesLabel, Value: catalog.Features}}})); err != nil {
		t.Fatal(err)
	}
	cfg := e.fsm.Config()
	cfg.MaxSeries = 1
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.SetConfig{Config: cfg})); err != nil {
		t.Fatal(err)
	}
	c := open(t, dial(t, e.addr), "pi-1")
	c.welcome()
	if a := c.announce(1, 1000, false, labels.FromStrings("__name__", "a")); a.GetError() != "" || a.GetThroughMs() != 1000 {
		t.Fatalf("first: %v", a)
	}
	a := c.announce(2, 2000, false, labels.FromStrings("__name__", "b"))
	if a.GetError() == "" || a.GetThroughMs() != 1000 {
		t.Fatalf("over the limit: %v; want an error and the watermark at 1000", a)
	}
	if ms, _ := e.fsm.Registration("pi-1"); ms != 1000 {
		t.Fatalf("registration %d, want 1000", ms)
	}
}

// TestIntake_LongAnnouncementsAreSplitAcrossCommands: series whose labels
// add up to more than a raft entry holds are recorded in several
// commands, the watermark with the last.
func TestIntake_LongAnnouncementsAreSplitAcrossCommands(t *testing.T) {
	e := startEnv(t, func(o *intake.Options) { o.AnnounceInterval = 10 * time.Millisecond })
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.RegisterNode{
		ID: coordID, Role: catalog.RoleCoordinator, RaftID: 1, Addr: "127.0.0.1:1",
		Labels: labels.Labels{{Name: catalog.FeaturesLabel, Value: catalog.Features}}})); err != nil {
		t.Fatal(err)
	}
	c := open(t, dial(t, e.addr), "pi-1")
	c.welcome()
	long := strings.Repeat("x", 1000)
	var ss []labels.Labels
	for i := range wire.MaxAnnounceSeries {
		ss = append(ss, labels.FromStrings("__name__", "m", "i", fmt.Sprint(i), "a", long, "b", long))
	}
	// 1,000 series of 2 KB: 2 MB, twice what one raft entry holds.
	before := e.in.Stats().AnnounceCommands
	if a := c.announce(1, 7000, false, ss...); a.GetError() != "" || !a.GetRegistered() || a.GetThroughMs() != 7000 {
		t.Fatalf("answer %v", a)
	}
	if n := len(e.fsm.EdgeSeries("pi-1")); n != len(ss) {
		t.Fatalf("%d series registered, want %d", n, len(ss))
	}
	if cmds := e.in.Stats().AnnounceCommands - before; cmds < 8 {
		t.Fatalf("%d commands for 2 MB of series; want them split at 256 KiB", cmds)
	}
}
