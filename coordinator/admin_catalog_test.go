package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// wantCode fails unless err is a gRPC status with code and a message
// mentioning every one of mention.
func wantCode(t *testing.T, what string, err error, code codes.Code, mention ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
	for _, m := range mention {
		if !strings.Contains(status.Convert(err).Message(), m) {
			t.Errorf("%s: message %q does not mention %q", what, status.Convert(err).Message(), m)
		}
	}
}

func edgeOf(t *testing.T, r *pb.EdgesResponse, id string) *pb.EdgeInfo {
	t.Helper()
	for _, e := range r.GetEdges() {
		if e.GetNodeId() == id {
			return e
		}
	}
	t.Fatalf("edge %s not in the answer: %v", id, r)
	return nil
}

func replicaOf(e *pb.EdgeInfo, coord string) *pb.ReplicaInfo {
	for _, r := range e.GetReplicas() {
		if r.GetCoordinator() == coord {
			return r
		}
	}
	return nil
}

// TestAdmin_PlacementCommandsChangeTheCatalog runs three coordinators and
// drives every placement call of ClusterService through them: the fleet
// configuration's write quorum and dead-after, Edges (holdings, lacks,
// under-replicated segments), PlaceEdge, Rebalance, SetCoordinatorState,
// RevokeEdge and DecommissionEdge, with their errors.
func TestAdmin_PlacementCommandsChangeTheCatalog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three coordinators")
	}
	addrs := freeAddrs(t, 3)
	var peers []Peer
	for i := range 3 {
		peers = append(peers, Peer{RaftID: uint64(i + 1), NodeID: fmt.Sprintf("coord-%d", i+1), Addr: addrs[i]})
	}
	var ms []*member
	for i, p := range peers {
		ms = append(ms, startMember(t, p.RaftID, p.NodeID, addrs[i], peers, nil))
	}
	lead := leader(t, ms)
	for _, m := range ms {
		eventually(t, m.nodeID+" ready", m.c.Ready)
	}
	eventually(t, "three coordinators registered", func() bool { return len(registeredCoordinators(lead.c)) == 3 })
	follower := ms[0]
	if follower == lead {
		follower = ms[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	propose := func(c catalog.Command) any {
		t.Helper()
		res, err := lead.c.raft.Propose(ctx, catalog.EncodeCommand(c))
		if err != nil {
			t.Fatalf("propose %s: %v", c.Kind(), err)
		}
		return res
	}

	// The fleet configuration carries write quorum and dead-after both
	// ways: replication factor 2, so that a third coordinator is free.
	cfg, err := follower.cl.GetFleetConfig(ctx, &pb.GetFleetConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GetConfig().GetDeadAfterMs() != catalog.DefaultDeadAfterMs {
		t.Fatalf("default dead-after %d", cfg.GetConfig().GetDeadAfterMs())
	}
	c := cfg.GetConfig()
	c.ReplicationFactor, c.WriteQuorum, c.DeadAfterMs = 2, 2, 90_000
	set, err := follower.cl.SetFleetConfig(ctx, &pb.SetFleetConfigRequest{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	if got := lead.c.fsm.Config(); got.WriteQuorum != 2 || got.DeadAfterMs != 90_000 || got.ReplicationFactor != 2 {
		t.Fatalf("catalog config after set: %+v", got)
	}
	if set.GetConfig().GetWriteQuorum() != 2 || set.GetConfig().GetDeadAfterMs() != 90_000 {
		t.Fatalf("set answered %v", set.GetConfig())
	}
	c.WriteQuorum = 3 // more than the replication factor
	_, err = follower.cl.SetFleetConfig(ctx, &pb.SetFleetConfigRequest{Config: c})
	wantCode(t, "write quorum above the replication factor", err, codes.InvalidArgument, "write quorum 3")

	// Two edges; e1 holds segments 1-10 on one replica only, e2 nothing.
	now := time.Now().UnixMilli()
	for _, e := range []string{"e1", "e2"} {
		propose(catalog.RegisterNode{ID: e, Role: catalog.RoleEdge, TimeMs: now - 3000})
	}
	pl, ok := lead.c.fsm.Placement("e1")
	if !ok || len(pl.Replicas) != 2 {
		t.Fatalf("e1 placement %+v", pl)
	}
	holder, lacker := pl.Replicas[0], pl.Replicas[1]
	free := slices.DeleteFunc(registeredCoordinators(lead.c), func(id string) bool { return slices.Contains(pl.Replicas, id) })[0]
	propose(catalog.RecordHeld{Edge: "e1", Epoch: pl.Epoch, Holders: []string{holder},
		Ranges: []catalog.HeldRange{{FirstSeq: 1, LastSeq: 10, Points: 500, MinTimeMs: now - 60_000, MaxTimeMs: now - 30_000}}})

	edges, err := follower.cl.Edges(ctx, &pb.EdgesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if edges.GetAnsweredBy() != follower.nodeID || len(edges.GetEdges()) != 2 {
		t.Fatalf("edges: %v", edges)
	}
	e1 := edgeOf(t, edges, "e1")
	if e1.GetAckedThrough() != 10 || e1.GetHeldPoints() != 500 || e1.GetWatermarkTimeMs() != now-30_000 ||
		e1.GetUnderReplicatedSegments() != 10 || e1.GetUnsourcedSegments() != 0 || e1.GetPinned() || e1.GetRevoked() ||
		e1.GetSecondsSinceHeartbeat() < 2 || e1.GetSecondsSinceHeartbeat() > 60 {
		t.Fatalf("e1: %v", e1)
	}
	h, l := replicaOf(e1, holder), replicaOf(e1, lacker)
	if h == nil || len(h.GetLacks()) != 0 || h.GetLeaving() || h.GetState() != "active" {
		t.Fatalf("holder %s: %v", holder, h)
	}
	if l == nil || len(l.GetLacks()) != 1 || l.GetLacks()[0].GetFirstSeq() != 1 || l.GetLacks()[0].GetLastSeq() != 10 ||
		l.GetLacks()[0].GetMaxTimeMs() != now-30_000 {
		t.Fatalf("lacking replica %s: %v", lacker, l)
	}
	if e2 := edgeOf(t, edges, "e2"); e2.GetHeldPoints() != 0 || e2.GetWatermarkTimeMs() != 0 || len(e2.GetReplicas()) != 2 {
		t.Fatalf("e2: %v", e2)
	}
	// The fleet view (GET /api/v1/fleet) says the same.
	fl, err := follower.c.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range fl.Nodes {
		if n.ID == "e1" && (n.UnderReplicatedSegments != 10 || !slices.Equal(n.ReplicaLacks[lacker], []SeqRun{{1, 10}}) || len(n.ReplicaLacks) != 1) {
			t.Fatalf("fleet view of e1: %+v", n)
		}
		if n.ID == holder && n.State != "active" {
			t.Fatalf("fleet view of %s: %+v", holder, n)
		}
	}
	// The holder is the last live holder of e1's segments; the others
	// hold nothing alone.
	if sole := SoleHoldings(edges.GetEdges(), holder); len(sole) != 1 || sole[0].Edge != "e1" || sole[0].Segments != 10 {
		t.Fatalf("sole holdings of %s: %+v", holder, sole)
	}
	if sole := SoleHoldings(edges.GetEdges(), lacker); len(sole) != 0 {
		t.Fatalf("sole holdings of %s: %+v", lacker, sole)
	}

	// PlaceEdge: errors first, then a pin that replaces the holder, which
	// stays as a leaving replica (its history is not copied yet).
	for _, c := range []struct {
		what string
		req  *pb.PlaceEdgeRequest
		code codes.Code
		msg  string
	}{
		{"no edge", &pb.PlaceEdgeRequest{Coordinators: []string{free}}, codes.InvalidArgument, "node_id"},
		{"unknown edge", &pb.PlaceEdgeRequest{NodeId: "nope", Coordinators: []string{free}}, codes.NotFound, `"nope"`},
		{"a coordinator as the edge", &pb.PlaceEdgeRequest{NodeId: free, Coordinators: []string{free}}, codes.InvalidArgument, "is a coordinator"},
		{"unknown coordinator", &pb.PlaceEdgeRequest{NodeId: "e1", Coordinators: []string{"coord-9"}}, codes.NotFound, "coord-9"},
		{"an edge as a coordinator", &pb.PlaceEdgeRequest{NodeId: "e1", Coordinators: []string{"e2"}}, codes.InvalidArgument, "is an edge"},
		{"neither", &pb.PlaceEdgeRequest{NodeId: "e1"}, codes.InvalidArgument, "unpin"},
		{"both", &pb.PlaceEdgeRequest{NodeId: "e1", Coordinators: []string{free}, Unpin: true}, codes.InvalidArgument, "not both"},
		{"listed twice", &pb.PlaceEdgeRequest{NodeId: "e1", Coordinators: []string{free, free}}, codes.InvalidArgument, "twice"},
	} {
		_, err := follower.cl.PlaceEdge(ctx, c.req)
		wantCode(t, "place: "+c.what, err, c.code, c.msg)
	}
	placed, err := follower.cl.PlaceEdge(ctx, &pb.PlaceEdgeRequest{NodeId: "e1", Coordinators: []string{lacker, free}})
	if err != nil {
		t.Fatal(err)
	}
	if !placed.GetPinned() || len(placed.GetReplicas()) != 3 {
		t.Fatalf("place answered %v", placed)
	}
	p, _ := lead.c.fsm.Placement("e1")
	if !p.Pinned || !slices.Equal(p.Replicas, sortedNames(lacker, free)) || len(p.Leaving) != 1 || p.Leaving[0].ID != holder {
		t.Fatalf("e1 placement after the pin: %+v", p)
	}
	edges, _ = lead.cl.Edges(ctx, &pb.EdgesRequest{})
	e1 = edgeOf(t, edges, "e1")
	if r := replicaOf(e1, holder); r == nil || !r.GetLeaving() || !e1.GetPinned() || e1.GetUnderReplicatedSegments() != 20 {
		t.Fatalf("e1 after the pin: %v", e1)
	}
	if _, err := lead.cl.PlaceEdge(ctx, &pb.PlaceEdgeRequest{NodeId: "e1", Unpin: true}); err != nil {
		t.Fatal(err)
	}
	if p, _ := lead.c.fsm.Placement("e1"); p.Pinned {
		t.Fatalf("e1 still pinned: %+v", p)
	}

	// Rebalance answers how many placements changed.
	if _, err := follower.cl.Rebalance(ctx, &pb.RebalanceRequest{MaxMoves: 1}); err != nil {
		t.Fatal(err)
	}

	// SetCoordinatorState.
	_, err = follower.cl.SetCoordinatorState(ctx, &pb.SetCoordinatorStateRequest{NodeId: free})
	wantCode(t, "unspecified state", err, codes.InvalidArgument, "ACTIVE or DRAINING")
	_, err = follower.cl.SetCoordinatorState(ctx, &pb.SetCoordinatorStateRequest{NodeId: "e1", State: pb.CoordinatorState_COORDINATOR_STATE_DRAINING})
	wantCode(t, "drain an edge", err, codes.InvalidArgument, "is an edge")
	_, err = follower.cl.SetCoordinatorState(ctx, &pb.SetCoordinatorStateRequest{NodeId: "coord-9", State: pb.CoordinatorState_COORDINATOR_STATE_DRAINING})
	wantCode(t, "drain an unknown coordinator", err, codes.NotFound, "coord-9")
	ids := registeredCoordinators(lead.c)
	drained := []string{holder, lacker}
	for _, id := range drained {
		if _, err := follower.cl.SetCoordinatorState(ctx, &pb.SetCoordinatorStateRequest{NodeId: id, State: pb.CoordinatorState_COORDINATOR_STATE_DRAINING}); err != nil {
			t.Fatalf("drain %s: %v", id, err)
		}
		if n, _ := lead.c.fsm.Node(id); n.State != catalog.NodeDraining {
			t.Fatalf("%s: state %s after drain", id, n.State)
		}
	}
	_, err = follower.cl.SetCoordinatorState(ctx, &pb.SetCoordinatorStateRequest{NodeId: free, State: pb.CoordinatorState_COORDINATOR_STATE_DRAINING})
	wantCode(t, "drain the last active coordinator", err, codes.FailedPrecondition, "last active coordinator")
	for _, e := range []string{"e1", "e2"} {
		if p, _ := lead.c.fsm.Placement(e); !slices.Equal(p.Replicas, []string{free}) {
			t.Fatalf("%s: replicas %v with %v draining", e, p.Replicas, drained)
		}
	}
	edges, _ = follower.cl.Edges(ctx, &pb.EdgesRequest{})
	e1 = edgeOf(t, edges, "e1")
	if r := replicaOf(e1, holder); r == nil || !r.GetLeaving() || r.GetState() != "draining" {
		t.Fatalf("e1's holder while draining: %v (it holds history no active replica has: it stays, leaving)", e1)
	}
	if r := replicaOf(e1, lacker); r != nil {
		t.Fatalf("e1's replica that held nothing is still there while draining: %v", e1)
	}
	for _, id := range drained {
		if _, err := lead.cl.SetCoordinatorState(ctx, &pb.SetCoordinatorStateRequest{NodeId: id, State: pb.CoordinatorState_COORDINATOR_STATE_ACTIVE}); err != nil {
			t.Fatalf("undrain %s: %v", id, err)
		}
		if n, _ := lead.c.fsm.Node(id); n.State != catalog.NodeActive {
			t.Fatalf("%s: state %s after undrain", id, n.State)
		}
	}

	// RevokeEdge.
	_, err = follower.cl.RevokeEdge(ctx, &pb.RevokeEdgeRequest{NodeId: ids[0], Revoked: true})
	wantCode(t, "revoke a coordinator", err, codes.InvalidArgument, "is a coordinator")
	_, err = follower.cl.RevokeEdge(ctx, &pb.RevokeEdgeRequest{NodeId: "nope", Revoked: true})
	wantCode(t, "revoke an unknown edge", err, codes.NotFound, `"nope"`)
	if _, err := follower.cl.RevokeEdge(ctx, &pb.RevokeEdgeRequest{NodeId: "e2", Revoked: true}); err != nil {
		t.Fatal(err)
	}
	edges, _ = follower.cl.Edges(ctx, &pb.EdgesRequest{})
	if !edgeOf(t, edges, "e2").GetRevoked() || edgeOf(t, edges, "e1").GetRevoked() {
		t.Fatalf("after revoking e2: %v", edges)
	}
	if _, err := follower.cl.RevokeEdge(ctx, &pb.RevokeEdgeRequest{NodeId: "e2"}); err != nil {
		t.Fatal(err)
	}
	if n, _ := lead.c.fsm.Node("e2"); n.Revoked {
		t.Fatal("e2 still revoked")
	}

	// DecommissionEdge.
	_, err = follower.cl.DecommissionEdge(ctx, &pb.DecommissionEdgeRequest{NodeId: ids[1]})
	wantCode(t, "decommission a coordinator", err, codes.InvalidArgument, "cluster remove")
	_, err = follower.cl.DecommissionEdge(ctx, &pb.DecommissionEdgeRequest{NodeId: "nope"})
	wantCode(t, "decommission an unknown edge", err, codes.NotFound, `"nope"`)
	_, err = follower.cl.DecommissionEdge(ctx, &pb.DecommissionEdgeRequest{})
	wantCode(t, "decommission without an id", err, codes.InvalidArgument, "node_id")
	if _, err := follower.cl.DecommissionEdge(ctx, &pb.DecommissionEdgeRequest{NodeId: "e2"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := lead.c.fsm.Node("e2"); ok {
		t.Fatal("e2 still registered")
	}
	if n, ok := lead.c.fsm.Node(ids[1]); !ok || n.Role != catalog.RoleCoordinator {
		t.Fatalf("%s after refusing to decommission it: %+v", ids[1], n)
	}
	edges, _ = lead.cl.Edges(ctx, &pb.EdgesRequest{})
	if len(edges.GetEdges()) != 1 || edges.GetEdges()[0].GetNodeId() != "e1" {
		t.Fatalf("edges after decommissioning e2: %v", edges)
	}
}

func TestAdmin_CatalogErrorsMapToCodes(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name   string
		caller context.Context
		err    error
		code   codes.Code
		msg    string
	}{
		{"not found", live, &catalog.CommandError{Kind: catalog.KindSetPlacement, Err: catalog.ErrNotFound, Msg: `node "x" is not registered`}, codes.NotFound, `node "x"`},
		{"bad command", live, &catalog.CommandError{Kind: catalog.KindSetPlacement, Err: catalog.ErrBadCommand, Msg: "listed twice"}, codes.InvalidArgument, "listed twice"},
		{"conflict", live, &catalog.CommandError{Kind: catalog.KindSetPlacement, Err: catalog.ErrConflict, Msg: "c"}, codes.FailedPrecondition, ""},
		{"stale", live, &catalog.CommandError{Kind: catalog.KindSetPlacement, Err: catalog.ErrStale, Msg: "s"}, codes.Aborted, ""},
		{"our own timeout", live, fmt.Errorf("%w: %w", raftnode.ErrCanceled, context.DeadlineExceeded), codes.Unavailable, "may still be applied"},
		{"dropped", live, raftnode.ErrProposalDropped, codes.Unavailable, "dropped"},
		{"stopped", live, raftnode.ErrStopped, codes.Unavailable, "stopped"},
		{"too large", live, raftnode.ErrTooLarge, codes.InvalidArgument, "too large"},
		{"the caller gave up", gone, fmt.Errorf("%w: %w", raftnode.ErrCanceled, context.Canceled), codes.Canceled, "may still be applied"},
	} {
		err := catalogError(c.caller, "place edge", c.err)
		wantCode(t, c.name, err, c.code, "place edge", c.msg)
		if errors.Is(err, c.err) {
			t.Errorf("%s: the status wraps the raw error", c.name)
		}
	}
}

func TestHeldLacks_CutsLackRunsToHeldSegments(t *testing.T) {
	held := []catalog.HeldRange{
		{FirstSeq: 1, LastSeq: 5, MinTimeMs: 100, MaxTimeMs: 500},
		{FirstSeq: 9, LastSeq: 12, MinTimeMs: 900, MaxTimeMs: 1200},
	}
	for _, c := range []struct {
		name  string
		lacks []catalog.LackRange
		want  []catalog.LackRange
	}{
		{"nothing", nil, nil},
		{"inside", []catalog.LackRange{{FirstSeq: 2, LastSeq: 3, MinTimeMs: 200, MaxTimeMs: 300}},
			[]catalog.LackRange{{FirstSeq: 2, LastSeq: 3, MinTimeMs: 200, MaxTimeMs: 300}}},
		{"across a hole", []catalog.LackRange{{FirstSeq: 4, LastSeq: 20, MinTimeMs: 400, MaxTimeMs: 2000}},
			[]catalog.LackRange{{FirstSeq: 4, LastSeq: 5, MinTimeMs: 400, MaxTimeMs: 500}, {FirstSeq: 9, LastSeq: 12, MinTimeMs: 900, MaxTimeMs: 1200}}},
		{"only unheld numbers", []catalog.LackRange{{FirstSeq: 6, LastSeq: 8, MinTimeMs: 0, MaxTimeMs: 1}}, nil},
		{"time span unknown", []catalog.LackRange{{FirstSeq: 10, LastSeq: 10, MinTimeMs: -1 << 63, MaxTimeMs: 50}},
			[]catalog.LackRange{{FirstSeq: 10, LastSeq: 10, MinTimeMs: 900, MaxTimeMs: 1200}}},
	} {
		if got := heldLacks(c.lacks, held); !slices.Equal(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
