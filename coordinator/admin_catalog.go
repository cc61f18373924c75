package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The ClusterService calls that change or read the catalog's placement
// side: edges (placement, holdings, health), decommissioning and revoking
// an edge, pinning its replicas, rebalancing, draining a coordinator.
//
// Each change is one catalog command proposed through raft, so any member
// accepts it; it answers once the command is applied on this member. The
// checks made here first (is the node registered, is it an edge) read this
// member's catalog after a linearizable barrier, so that they see every
// change acknowledged before the call; the catalog checks again when it
// applies the command. Errors: NOT_FOUND for a node that is not
// registered, INVALID_ARGUMENT for a request that cannot be right (an
// empty id, a coordinator where an edge is wanted), FAILED_PRECONDITION
// for one the cluster's state refuses (draining the last active
// coordinator, pinning to a draining one), UNAVAILABLE when raft could not
// commit the change in time (it may still apply: read the state again).

// adminTimeout bounds a catalog change or barrier when the request
// carries no deadline.
const adminTimeout = 10 * time.Second

// maxLackRunsShown bounds the lack runs an answer lists per replica; more
// are merged into the last one shown (which then covers numbers between
// them, so its count is an upper bound).
const maxLackRunsShown = catalog.MaxLackRuns

// withAdminTimeout gives ctx adminTimeout when it has no deadline.
func withAdminTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, adminTimeout)
}

// catalogError maps the error of a proposal or a barrier made for what
// (a lower-case description of the request) to a gRPC status. caller is
// the request's own context: its deadline or cancellation is reported as
// such; our own timeout means raft did not answer in time.
func catalogError(caller context.Context, what string, err error) error {
	var ce *catalog.CommandError
	if errors.As(err, &ce) {
		code := codes.FailedPrecondition
		switch {
		case errors.Is(err, catalog.ErrNotFound):
			code = codes.NotFound
		case errors.Is(err, catalog.ErrBadCommand):
			code = codes.InvalidArgument
		case errors.Is(err, catalog.ErrStale):
			code = codes.Aborted
		}
		return status.Errorf(code, "%s: %s", what, ce.Msg)
	}
	switch {
	case caller.Err() != nil:
		return status.Errorf(status.FromContextError(caller.Err()).Code(), "%s: %v (the change may still be applied; read the state again)", what, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, raftnode.ErrCanceled):
		return status.Errorf(codes.Unavailable, "%s: raft did not answer within %s (no leader, or it cannot reach a quorum); the change may still be applied: %v", what, adminTimeout, err)
	case errors.Is(err, raftnode.ErrTooLarge):
		return status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
	}
	return status.Errorf(codes.Unavailable, "%s: %v", what, err)
}

// barrier makes this member's catalog at least as new as every change
// acknowledged before the call.
func (s *adminServer) barrier(ctx context.Context, what string) error {
	bctx, cancel := withAdminTimeout(ctx)
	defer cancel()
	if err := s.c.raft.LinearizableRead(bctx); err != nil {
		return catalogError(ctx, what, err)
	}
	return nil
}

// propose proposes c and returns its result once applied here.
func (s *adminServer) propose(ctx context.Context, what string, c catalog.Command) (any, error) {
	pctx, cancel := withAdminTimeout(ctx)
	defer cancel()
	res, err := s.c.raft.Propose(pctx, catalog.EncodeCommand(c))
	if err != nil {
		return nil, catalogError(ctx, what, err)
	}
	return res, nil
}

// node returns a registered node of the wanted role after a barrier:
// NOT_FOUND when it is not registered, INVALID_ARGUMENT when it has
// another role.
func (s *adminServer) node(ctx context.Context, what, id string, role catalog.Role) (catalog.Node, error) {
	if id == "" {
		return catalog.Node{}, status.Errorf(codes.InvalidArgument, "%s: node_id is required", what)
	}
	if err := s.barrier(ctx, what); err != nil {
		return catalog.Node{}, err
	}
	n, ok := s.c.fsm.Node(id)
	if !ok {
		return n, status.Errorf(codes.NotFound, "%s: no %s %q is registered in the catalog", what, role, id)
	}
	if n.Role != role {
		return n, status.Errorf(codes.InvalidArgument, "%s: %q is %s, not %s", what, id, roleNoun(n.Role), roleNoun(role))
	}
	return n, nil
}

// roleNoun is "an edge" or "a coordinator".
func roleNoun(r catalog.Role) string {
	if r == catalog.RoleEdge {
		return "an edge"
	}
	return "a " + r.String()
}

func (s *adminServer) Edges(ctx context.Context, _ *pb.EdgesRequest) (*pb.EdgesResponse, error) {
	if err := s.barrier(ctx, "list edges"); err != nil {
		return nil, err
	}
	return s.c.edges(time.Now().UnixMilli()), nil
}

// edges is the catalog's view of every edge, judged at nowMs.
func (c *Coordinator) edges(nowMs int64) *pb.EdgesResponse {
	nodes := c.fsm.Nodes()
	states := coordinatorStates(nodes)
	resp := &pb.EdgesResponse{AnsweredBy: c.opts.NodeID}
	for _, n := range nodes {
		if n.Role != catalog.RoleEdge {
			continue
		}
		e := &pb.EdgeInfo{NodeId: n.ID, Revoked: n.Revoked, SecondsSinceHeartbeat: -1, Labels: labelMap(n.Labels)}
		if n.LastHeartbeatMs > 0 {
			e.SecondsSinceHeartbeat = float64(nowMs-n.LastHeartbeatMs) / 1000
		}
		pr, _ := c.fsm.Progress(n.ID)
		e.AckedThrough, e.WatermarkTimeMs = pr.AckedThrough(), pr.WatermarkTimeMs
		for _, h := range pr.Held {
			e.HeldPoints += h.Points
		}
		if p, ok := c.fsm.Placement(n.ID); ok {
			e.Pinned = p.Pinned
			e.Replicas = replicaInfos(p, pr.Held, states)
		}
		for _, t := range c.fsm.Repairs(n.ID) {
			segs := t.Run.LastSeq - t.Run.FirstSeq + 1
			e.UnderReplicatedSegments += segs
			if len(t.Sources) == 0 {
				e.UnsourcedSegments += segs
			}
		}
		resp.Edges = append(resp.Edges, e)
	}
	return resp
}

// coordinatorStates maps each registered coordinator to its state.
func coordinatorStates(nodes []catalog.Node) map[string]catalog.NodeState {
	out := map[string]catalog.NodeState{}
	for _, n := range nodes {
		if n.Role == catalog.RoleCoordinator {
			out[n.ID] = n.State
		}
	}
	return out
}

// replicaInfos lists the replicas of p, active then leaving, each with
// the held segments it lacks and its coordinator's state ("unknown" for a
// coordinator no longer registered).
func replicaInfos(p catalog.Placement, held []catalog.HeldRange, states map[string]catalog.NodeState) []*pb.ReplicaInfo {
	var out []*pb.ReplicaInfo
	for _, id := range p.All() {
		h, leaving, _ := p.HoldingOf(id)
		st := "unknown"
		if s, ok := states[id]; ok {
			st = s.String()
		}
		r := &pb.ReplicaInfo{Coordinator: id, Leaving: leaving, State: st}
		for _, l := range heldLacks(h.Lacks, held) {
			r.Lacks = append(r.Lacks, &pb.LackRun{FirstSeq: l.FirstSeq, LastSeq: l.LastSeq, MinTimeMs: l.MinTimeMs, MaxTimeMs: l.MaxTimeMs})
		}
		out = append(out, r)
	}
	return out
}

// heldLacks returns what a replica with lacks really lacks: its lack runs
// cut to the held runs (numbers in a lack run that are not held mean
// nothing), each with the time span both runs allow. At most
// maxLackRunsShown runs; the rest are merged into the last.
func heldLacks(lacks []catalog.LackRange, held []catalog.HeldRange) []catalog.LackRange {
	var out []catalog.LackRange
	for _, l := range lacks {
		i, _ := slices.BinarySearchFunc(held, l.FirstSeq, func(h catalog.HeldRange, seq uint64) int { return cmp.Compare(h.LastSeq, seq) })
		for ; i < len(held) && held[i].FirstSeq <= l.LastSeq; i++ {
			h := held[i]
			c := catalog.LackRange{FirstSeq: max(l.FirstSeq, h.FirstSeq), LastSeq: min(l.LastSeq, h.LastSeq),
				MinTimeMs: max(l.MinTimeMs, h.MinTimeMs), MaxTimeMs: min(l.MaxTimeMs, h.MaxTimeMs)}
			if c.MinTimeMs > c.MaxTimeMs {
				c.MinTimeMs, c.MaxTimeMs = h.MinTimeMs, h.MaxTimeMs
			}
			if n := len(out); n == maxLackRunsShown {
				last := &out[n-1]
				last.LastSeq = c.LastSeq
				last.MinTimeMs, last.MaxTimeMs = min(last.MinTimeMs, c.MinTimeMs), max(last.MaxTimeMs, c.MaxTimeMs)
				continue
			}
			out = append(out, c)
		}
	}
	return out
}

func (s *adminServer) DecommissionEdge(ctx context.Context, req *pb.DecommissionEdgeRequest) (*pb.DecommissionEdgeResponse, error) {
	what := fmt.Sprintf("decommission edge %q", req.GetNodeId())
	n, err := s.node(ctx, what, req.GetNodeId(), catalog.RoleEdge)
	if err != nil {
		if n.Role == catalog.RoleCoordinator {
			return nil, status.Errorf(codes.InvalidArgument, "%s: it is a coordinator; coordinators leave with a membership change (tributary cluster remove RAFTID)", what)
		}
		return nil, err
	}
	if _, err := s.propose(ctx, what, catalog.RemoveNode{ID: n.ID}); err != nil {
		return nil, err
	}
	s.c.log.Info("edge decommissioned", "edge", n.ID)
	return &pb.DecommissionEdgeResponse{}, nil
}

func (s *adminServer) PlaceEdge(ctx context.Context, req *pb.PlaceEdgeRequest) (*pb.PlaceEdgeResponse, error) {
	what := fmt.Sprintf("place edge %q", req.GetNodeId())
	switch {
	case req.GetUnpin() && len(req.GetCoordinators()) > 0:
		return nil, status.Errorf(codes.InvalidArgument, "%s: give coordinators or unpin, not both", what)
	case !req.GetUnpin() && len(req.GetCoordinators()) == 0:
		return nil, status.Errorf(codes.InvalidArgument, "%s: give the coordinators to pin it to, or unpin", what)
	case len(req.GetCoordinators()) > catalog.MaxReplicationFactor:
		return nil, status.Errorf(codes.InvalidArgument, "%s: %d coordinators, limit is %d", what, len(req.GetCoordinators()), catalog.MaxReplicationFactor)
	}
	n, err := s.node(ctx, what, req.GetNodeId(), catalog.RoleEdge)
	if err != nil {
		return nil, err
	}
	members := map[uint64]bool{}
	for _, m := range s.c.fsm.Members() {
		members[m.RaftID] = true
	}
	for _, id := range req.GetCoordinators() {
		cn, ok := s.c.fsm.Node(id)
		switch {
		case !ok:
			return nil, status.Errorf(codes.NotFound, "%s: no coordinator %q is registered in the catalog", what, id)
		case cn.Role != catalog.RoleCoordinator:
			return nil, status.Errorf(codes.InvalidArgument, "%s: %q is %s, not a coordinator", what, id, roleNoun(cn.Role))
		case !members[cn.RaftID]:
			return nil, status.Errorf(codes.FailedPrecondition, "%s: coordinator %q (raft id %d) is not a raft member", what, id, cn.RaftID)
		case cn.State != catalog.NodeActive:
			return nil, status.Errorf(codes.FailedPrecondition, "%s: coordinator %q is %s; only active coordinators take replicas", what, id, cn.State)
		}
	}
	res, err := s.propose(ctx, what, catalog.SetPlacement{Edge: n.ID, Replicas: req.GetCoordinators()})
	if err != nil {
		return nil, err
	}
	p, ok := res.(catalog.Placement)
	if !ok {
		if p, ok = s.c.fsm.Placement(n.ID); !ok {
			return nil, status.Errorf(codes.Internal, "%s: applied, but the edge has no placement", what)
		}
	}
	pr, _ := s.c.fsm.Progress(n.ID)
	s.c.log.Info("edge placed", "edge", n.ID, "replicas", p.Replicas, "pinned", p.Pinned)
	return &pb.PlaceEdgeResponse{Replicas: replicaInfos(p, pr.Held, coordinatorStates(s.c.fsm.Nodes())), Pinned: p.Pinned}, nil
}

func (s *adminServer) Rebalance(ctx context.Context, req *pb.RebalanceRequest) (*pb.RebalanceResponse, error) {
	res, err := s.propose(ctx, "rebalance", catalog.Rebalance{MaxMoves: req.GetMaxMoves()})
	if err != nil {
		return nil, err
	}
	r, _ := res.(catalog.RebalanceResult)
	s.c.log.Info("placements rebalanced", "max_moves", req.GetMaxMoves(), "changed", r.Changed)
	return &pb.RebalanceResponse{Changed: uint32(min(int64(r.Changed), math.MaxUint32))}, nil
}

func (s *adminServer) SetCoordinatorState(ctx context.Context, req *pb.SetCoordinatorStateRequest) (*pb.SetCoordinatorStateResponse, error) {
	var st catalog.NodeState
	switch req.GetState() {
	case pb.CoordinatorState_COORDINATOR_STATE_ACTIVE:
		st = catalog.NodeActive
	case pb.CoordinatorState_COORDINATOR_STATE_DRAINING:
		st = catalog.NodeDraining
	default:
		return nil, status.Errorf(codes.InvalidArgument, "set coordinator %q state: state %v: want ACTIVE or DRAINING", req.GetNodeId(), req.GetState())
	}
	what := fmt.Sprintf("set coordinator %q %s", req.GetNodeId(), st)
	n, err := s.node(ctx, what, req.GetNodeId(), catalog.RoleCoordinator)
	if err != nil {
		return nil, err
	}
	if st == catalog.NodeDraining && n.State == catalog.NodeActive {
		// With no active coordinator left, no edge would have a replica
		// to ship to: every edge's shipping would stop.
		members := map[uint64]bool{}
		for _, m := range s.c.fsm.Members() {
			members[m.RaftID] = true
		}
		others := 0
		for _, o := range s.c.fsm.Nodes() {
			if o.Role == catalog.RoleCoordinator && o.ID != n.ID && o.State == catalog.NodeActive && members[o.RaftID] {
				others++
			}
		}
		if others == 0 {
			return nil, status.Errorf(codes.FailedPrecondition, "%s: it is the last active coordinator; edges would have no replica to ship to (add a coordinator first)", what)
		}
	}
	res, err := s.propose(ctx, what, catalog.SetNodeState{ID: n.ID, State: st})
	if err != nil {
		return nil, err
	}
	r, _ := res.(catalog.SetNodeStateResult)
	s.c.log.Info("coordinator state set", "coordinator", n.ID, "state", st.String(), "changed", r.Changed, "placements_moved", r.Moved)
	return &pb.SetCoordinatorStateResponse{Moved: uint32(min(int64(r.Moved), math.MaxUint32))}, nil
}

func (s *adminServer) RevokeEdge(ctx context.Context, req *pb.RevokeEdgeRequest) (*pb.RevokeEdgeResponse, error) {
	verb := "revoke"
	if !req.GetRevoked() {
		verb = "lift the revocation of"
	}
	what := fmt.Sprintf("%s edge %q", verb, req.GetNodeId())
	n, err := s.node(ctx, what, req.GetNodeId(), catalog.RoleEdge)
	if err != nil {
		return nil, err
	}
	if _, err := s.propose(ctx, what, catalog.SetRevoked{ID: n.ID, Revoked: req.GetRevoked()}); err != nil {
		return nil, err
	}
	s.c.log.Info("edge revocation set", "edge", n.ID, "revoked", req.GetRevoked())
	return &pb.RevokeEdgeResponse{}, nil
}
