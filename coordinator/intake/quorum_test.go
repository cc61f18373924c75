package intake_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/intake"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/wire"
)

// threeReplicas is an env whose catalog has coord-1 (the raft member) and
// coord-2, coord-3 (raft learners that never answer, which is all the
// catalog needs to place replicas on them), replication factor 3.
func threeReplicas(t *testing.T, edit func(*intake.Options)) *env {
	t.Helper()
	e := startEnv(t, edit)
	ctx := context.Background()
	for id := uint64(2); id <= 3; id++ {
		if err := e.raft.AddLearner(ctx, id, "127.0.0.1:1"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.raft.Propose(ctx, catalog.EncodeCommand(catalog.RegisterNode{
			ID: coordName(id), Role: catalog.RoleCoordinator, RaftID: id, Addr: "127.0.0.1:1"})); err != nil {
			t.Fatal(err)
		}
	}
	e.reps.mu.Lock()
	e.reps.down, e.reps.gate = map[string]bool{}, map[string]chan struct{}{}
	e.reps.mu.Unlock()
	return e
}

func coordName(id uint64) string { return "coord-" + string(rune('0'+id)) }

func holdingOf(t *testing.T, fsm *catalog.FSM, edge, replica string) catalog.Holding {
	t.Helper()
	pl, ok := fsm.Placement(edge)
	if !ok {
		t.Fatalf("no placement of %s", edge)
	}
	h, _, ok := pl.HoldingOf(replica)
	if !ok {
		t.Fatalf("%s is not a replica of %s: %+v", replica, edge, pl)
	}
	return h
}

func TestIntake_QuorumAcksWithoutADownReplicaAndRecordsItLacking(t *testing.T) {
	e := threeReplicas(t, nil)
	e.reps.mu.Lock()
	e.reps.down["coord-3"] = true
	e.reps.mu.Unlock()
	c := open(t, dial(t, e.addr), "pi-q1")
	c.welcome()
	if pl, _ := e.fsm.Placement("pi-q1"); len(pl.Replicas) != 3 {
		t.Fatalf("placement %+v, want 3 replicas", pl)
	}
	segs := makeSegments(t, "pi-q1", 3, 1)
	for _, s := range segs {
		c.send(s.parts...)
		if a := c.recv().GetAck(); a == nil || a.Seq != s.info.Seq {
			t.Fatalf("segment %d: %v", s.info.Seq, a)
		}
	}
	if h := holdingOf(t, e.fsm, "pi-q1", "coord-3"); len(h.Lacks) != 1 || h.Lacks[0].FirstSeq != 1 || h.Lacks[0].LastSeq != 3 {
		t.Fatalf("coord-3 lacks %+v, want 1..3", h.Lacks)
	}
	for _, r := range []string{"coord-1", "coord-2"} {
		if h := holdingOf(t, e.fsm, "pi-q1", r); len(h.Lacks) != 0 {
			t.Fatalf("%s lacks %+v", r, h.Lacks)
		}
	}
	if st := e.in.Stats(); st.QuorumAcks != 3 {
		t.Fatalf("stats %+v", st)
	}
	// A resend of a held segment gives it to the replica that lacks it, once
	// it is back.
	e.reps.mu.Lock()
	e.reps.down["coord-3"] = false
	e.reps.mu.Unlock()
	c.send(segs[1].parts...)
	if a := c.recv().GetAck(); a == nil || a.Seq != segs[1].info.Seq {
		t.Fatalf("resend: %v", a)
	}
	if _, ok := e.reps.get("coord-3", "pi-q1", 2); !ok {
		t.Fatal("the resend was not stored on coord-3")
	}
	if h := holdingOf(t, e.fsm, "pi-q1", "coord-3"); len(h.Lacks) != 2 || h.Lacks[0].LastSeq != 1 || h.Lacks[1].FirstSeq != 3 {
		t.Fatalf("coord-3 lacks %+v, want 1 and 3", h.Lacks)
	}
}

func TestIntake_BelowQuorumIsRefusedRetryably(t *testing.T) {
	e := threeReplicas(t, nil)
	e.reps.mu.Lock()
	e.reps.down["coord-2"], e.reps.down["coord-3"] = true, true
	e.reps.mu.Unlock()
	c := open(t, dial(t, e.addr), "pi-q2")
	c.welcome()
	segs := makeSegments(t, "pi-q2", 1, 1)
	c.send(segs[0].parts...)
	r := c.recv().GetError()
	if r == nil || r.Code != pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE || !r.Retryable {
		t.Fatalf("answered %v, want a retryable UNAVAILABLE", r)
	}
	if p, _ := e.fsm.Progress("pi-q2"); len(p.Held) != 0 {
		t.Fatalf("recorded below quorum: %+v", p)
	}
	// Write quorum 1 (fleet configuration): the one replica is enough.
	cfg := e.fsm.Config()
	cfg.WriteQuorum = 1
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.SetConfig{Config: cfg})); err != nil {
		t.Fatal(err)
	}
	c.send(segs[0].parts...)
	if a := c.recv().GetAck(); a == nil || a.Seq != 1 {
		t.Fatalf("with quorum 1: %v", a)
	}
}

func TestIntake_StragglerIsRecordedOnceItStores(t *testing.T) {
	gate := make(chan struct{})
	e := threeReplicas(t, func(o *intake.Options) { o.QuorumGrace = 20 * time.Millisecond })
	e.reps.mu.Lock()
	e.reps.gate["coord-2"] = gate
	e.reps.mu.Unlock()
	c := open(t, dial(t, e.addr), "pi-q3")
	c.welcome()
	segs := makeSegments(t, "pi-q3", 1, 1)
	start := time.Now()
	c.send(segs[0].parts...)
	if a := c.recv().GetAck(); a == nil || a.Seq != 1 {
		t.Fatalf("ack %v", a)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("ack took %s with one slow replica", d)
	}
	if h := holdingOf(t, e.fsm, "pi-q3", "coord-2"); len(h.Lacks) != 1 {
		t.Fatalf("coord-2 lacks %+v, want segment 1", h.Lacks)
	}
	close(gate)
	eventually(t, "coord-2 recorded as holding segment 1", func() bool {
		return len(holdingOf(t, e.fsm, "pi-q3", "coord-2").Lacks) == 0
	})
	// The counter is bumped once the proposal returns, which can be just
	// after the catalog shows the record.
	eventually(t, "the late record counted", func() bool { return e.in.Stats().LateRecorded == 1 })
	if st := e.in.Stats(); st.Stragglers != 1 || st.LateRecorded != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestIntake_RevokedEdgeIsRefusedAndItsStreamEnds(t *testing.T) {
	e := startEnv(t, func(o *intake.Options) { o.ConfigPollInterval = 20 * time.Millisecond })
	c := open(t, dial(t, e.addr), "pi-rv")
	c.welcome()
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.SetRevoked{ID: "pi-rv", Revoked: true})); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		_, err := c.stream.Recv()
		if err != nil {
			if !isCode(err, "PermissionDenied") {
				t.Fatalf("stream ended with %v, want PermissionDenied", err)
			}
			break
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("revocation took %s", d)
	}
	c2 := open(t, dial(t, e.addr), "pi-rv")
	if _, err := c2.stream.Recv(); !isCode(err, "PermissionDenied") {
		t.Fatalf("a revoked edge's hello: %v, want PermissionDenied", err)
	}
	if st := e.in.Stats(); st.RevokedRefusals != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestIntake_AsksTheEdgeToShipAgainWhatNoLiveReplicaHolds(t *testing.T) {
	e := threeReplicas(t, func(o *intake.Options) {
		o.ConfigPollInterval = 20 * time.Millisecond
		o.ReshipInterval = time.Hour
	})
	// Stored on coord-2 alone (quorum 1), then coord-2 goes down.
	cfg := e.fsm.Config()
	cfg.WriteQuorum = 1
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.SetConfig{Config: cfg})); err != nil {
		t.Fatal(err)
	}
	e.reps.mu.Lock()
	e.reps.down["coord-1"], e.reps.down["coord-3"] = true, true
	e.reps.mu.Unlock()
	c := openWith(t, dial(t, e.addr), "pi-rs", []string{wire.FeatureReship})
	c.welcome()
	segs := makeSegments(t, "pi-rs", 2, 1)
	for _, s := range segs {
		c.send(s.parts...)
		if a := c.recv().GetAck(); a == nil {
			t.Fatal("no ack")
		}
	}
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.SetNodeState{ID: "coord-2", State: catalog.NodeDown})); err != nil {
		t.Fatal(err)
	}
	var rs *pb.ShipReship
	for rs == nil {
		rs = c.recv().GetReship()
	}
	if rs.FirstSeq != 1 || rs.LastSeq != 2 || rs.MinTimeMs > segs[0].info.MinT || rs.MaxTimeMs < segs[1].info.MaxT {
		t.Fatalf("reship %v, want 1..2 covering the segments' times", rs)
	}
	// The edge ships them again (here: the same files); the active
	// replicas that lack them take them, and nothing is asked any more.
	e.reps.mu.Lock()
	e.reps.down["coord-1"], e.reps.down["coord-3"] = false, false
	e.reps.mu.Unlock()
	// Both at once, as an edge's window sends them: a stream poll between
	// the two would find 2..2 unsourced, a run not asked for yet.
	for _, s := range segs {
		c.send(s.parts...)
	}
	for range segs {
		if r := c.recv(); r.GetAck() == nil {
			t.Fatalf("no ack for a segment shipped again: %v", r)
		}
	}
	if u := e.fsm.Unsourced("pi-rs"); len(u) != 0 {
		t.Fatalf("still unsourced: %+v", u)
	}
	pl, _ := e.fsm.Placement("pi-rs")
	for i, r := range pl.Replicas {
		if len(pl.Holdings[i].Lacks) != 0 {
			t.Fatalf("%s still lacks %+v", r, pl.Holdings[i].Lacks)
		}
	}
	if slices.ContainsFunc(pl.Leaving, func(l catalog.LeavingReplica) bool { return l.ID == "coord-2" }) {
		t.Fatalf("the down replica is still leaving although the active ones hold everything: %+v", pl)
	}
	if st := e.in.Stats(); st.Reships != 1 || st.Refilled != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// openWith opens a stream whose hello lists features.
func openWith(t *testing.T, c pb.ReplicationServiceClient, node string, features []string) *client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.Ship(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Hello{Hello: &pb.ShipHello{
		NodeId: node, ProtocolVersion: wire.ProtocolVersion, QueryAddr: node + ":7000", Features: features}}}); err != nil {
		t.Fatal(err)
	}
	return &client{t: t, stream: s}
}

func isCode(err error, code string) bool {
	st, ok := status.FromError(err)
	return ok && st.Code().String() == code
}
