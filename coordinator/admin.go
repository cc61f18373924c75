package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	"github.com/tributarydb/tributary/coordinator/internal/transport"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// transferTimeout bounds a leadership transfer when the request carries
// no deadline: a transfer to a member that cannot win the election never
// completes, and the leader then keeps leadership.
const transferTimeout = 10 * time.Second

// RegisterAdmin registers tributary.v1.ClusterService (membership of the
// raft cluster, the fleet configuration, edges' placement, coordinators'
// placement state, edge revocation) on g, the coordinator's client gRPC
// server, so that its bearer tokens and TLS apply.
func (c *Coordinator) RegisterAdmin(g grpc.ServiceRegistrar) {
	pb.RegisterClusterServiceServer(g, &adminServer{c: c})
}

// adminServer implements ClusterService. Membership changes are made on
// the leader only; a follower answers FAILED_PRECONDITION naming the
// leader. Catalog changes (the fleet configuration, placement, coordinator
// states, revocation, decommissioning an edge) may be asked of any member:
// raft forwards the proposal (admin_catalog.go).
type adminServer struct {
	pb.UnimplementedClusterServiceServer
	c *Coordinator
}

func (s *adminServer) AddMember(ctx context.Context, req *pb.AddMemberRequest) (*pb.AddMemberResponse, error) {
	c := s.c
	if req.RaftId == 0 || req.NodeId == "" || req.Addr == "" {
		return nil, status.Error(codes.InvalidArgument, "add member: raft_id (non-zero), node_id and addr are all required")
	}
	if _, _, err := net.SplitHostPort(req.Addr); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "add member %d: addr %q: %v", req.RaftId, req.Addr, err)
	}
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	// A coordinator whose registered raft member was removed may come back
	// under a new raft id (it lost its disk and rejoins, --rejoin): the
	// catalog's RegisterNode takes it then, so the change is allowed too.
	if n, ok := c.fsm.Node(req.NodeId); ok && (n.Role != catalog.RoleCoordinator || (n.RaftID != req.RaftId && raftMember(c.fsm.Members(), n.RaftID))) {
		return nil, status.Errorf(codes.FailedPrecondition, "add member %d: node id %q is registered in the catalog as %s with raft id %d", req.RaftId, req.NodeId, n.Role, n.RaftID)
	}
	for _, n := range c.fsm.Nodes() {
		if n.Role == catalog.RoleCoordinator && n.RaftID == req.RaftId && n.ID != req.NodeId {
			return nil, status.Errorf(codes.FailedPrecondition, "add member: raft id %d belongs to coordinator %q (raft ids are never reused)", req.RaftId, n.ID)
		}
	}
	// The catalog learns the new member's name only when it registers,
	// which needs the log, which needs the leader to reach it: put it in
	// the address book now.
	added := false
	if _, ok := c.tr.Peer(req.RaftId); !ok && req.RaftId != c.opts.RaftID {
		if err := c.tr.AddPeer(req.RaftId, transport.Peer{Addr: req.Addr, Name: req.NodeId}); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "add member %d to the address book: %v", req.RaftId, err)
		}
		added = true
	}
	var err error
	if req.Learner {
		err = c.raft.AddLearner(ctx, req.RaftId, req.Addr)
	} else {
		err = c.raft.AddVoter(ctx, req.RaftId, req.Addr)
	}
	if err != nil {
		if added && !slices.Contains(c.raft.Status().Voters, req.RaftId) && !slices.Contains(c.raft.Status().Learners, req.RaftId) {
			c.tr.RemovePeer(req.RaftId)
		}
		return nil, s.changeError(fmt.Sprintf("add member %d (%s at %s)", req.RaftId, req.NodeId, req.Addr), err)
	}
	kind := "voter"
	if req.Learner {
		kind = "learner"
	}
	c.log.Info("member added", "raft_id", req.RaftId, "node_id", req.NodeId, "addr", req.Addr, "as", kind)
	return &pb.AddMemberResponse{Members: s.members()}, nil
}

func (s *adminServer) PromoteMember(ctx context.Context, req *pb.PromoteMemberRequest) (*pb.PromoteMemberResponse, error) {
	if err := s.checkMemberChange("promote member", req.RaftId); err != nil {
		return nil, err
	}
	if err := s.c.raft.PromoteLearner(ctx, req.RaftId); err != nil {
		return nil, s.changeError(fmt.Sprintf("promote member %d", req.RaftId), err)
	}
	s.c.log.Info("member promoted to voter", "raft_id", req.RaftId)
	return &pb.PromoteMemberResponse{Members: s.members()}, nil
}

func (s *adminServer) RemoveMember(ctx context.Context, req *pb.RemoveMemberRequest) (*pb.RemoveMemberResponse, error) {
	if err := s.checkMemberChange("remove member", req.RaftId); err != nil {
		return nil, err
	}
	if req.RaftId == s.c.opts.RaftID {
		// A leader removing itself stops leading before anyone else
		// campaigns: the cluster has no leader for an election timeout.
		return nil, status.Errorf(codes.FailedPrecondition, "remove member %d: it is the leader; transfer leadership first", req.RaftId)
	}
	if !req.Force {
		if err := s.lastHolderCheck(req.RaftId); err != nil {
			return nil, err
		}
	}
	if err := s.c.raft.RemoveMember(ctx, req.RaftId); err != nil {
		return nil, s.changeError(fmt.Sprintf("remove member %d", req.RaftId), err)
	}
	s.c.log.Info("member removed", "raft_id", req.RaftId)
	return &pb.RemoveMemberResponse{Members: s.members()}, nil
}

// lastHolderCheck refuses to remove a member whose replicas are the only
// live holders of some edges' segments (make before break: drain it
// first, so that they are copied).
func (s *adminServer) lastHolderCheck(raftID uint64) error {
	var id string
	for _, n := range s.c.fsm.Nodes() {
		if n.Role == catalog.RoleCoordinator && n.RaftID == raftID {
			id = n.ID
		}
	}
	if id == "" {
		return nil // not registered: it holds nothing
	}
	sole := SoleHoldings(s.c.edges(time.Now().UnixMilli()).GetEdges(), id)
	if len(sole) == 0 {
		return nil
	}
	var names []string
	for _, h := range sole {
		names = append(names, h.Edge)
	}
	if len(names) > 8 {
		names = append(names[:8], fmt.Sprintf("and %d more", len(sole)-8))
	}
	return status.Errorf(codes.FailedPrecondition, "remove member %d (%s): it is the last live holder of segments of edges %s; "+
		"drain it first (tributary cluster drain %s) and remove it once `tributary cluster edges` shows no replica on it, or force the removal",
		raftID, id, strings.Join(names, ", "), id)
}

func (s *adminServer) TransferLeadership(ctx context.Context, req *pb.TransferLeadershipRequest) (*pb.TransferLeadershipResponse, error) {
	c := s.c
	if err := s.requireLeader(); err != nil {
		return nil, err
	}
	st := c.raft.Status()
	to := req.ToRaftId
	if to == 0 {
		// The most up-to-date other voter wins the election soonest.
		for _, v := range st.Voters {
			if v != c.opts.RaftID && (to == 0 || st.Match[v] > st.Match[to]) {
				to = v
			}
		}
		if to == 0 {
			return nil, status.Error(codes.FailedPrecondition, "transfer leadership: there is no other voter")
		}
	}
	if to == c.opts.RaftID {
		return &pb.TransferLeadershipResponse{LeaderRaftId: to}, nil
	}
	if !slices.Contains(st.Voters, to) {
		return nil, status.Errorf(codes.FailedPrecondition, "transfer leadership to %d: it is not a voter (voters: %v)", to, st.Voters)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, transferTimeout)
		defer cancel()
	}
	if err := c.raft.TransferLeadership(ctx, to); err != nil {
		return nil, s.changeError(fmt.Sprintf("transfer leadership to %d", to), err)
	}
	lead := c.raft.Status().Lead
	c.log.Info("leadership transferred", "to", to, "leader", lead)
	return &pb.TransferLeadershipResponse{LeaderRaftId: lead}, nil
}

func (s *adminServer) Members(ctx context.Context, _ *pb.MembersRequest) (*pb.MembersResponse, error) {
	st := s.c.raft.Status()
	return &pb.MembersResponse{AnsweredBy: s.c.opts.NodeID, LeaderRaftId: st.Lead, Term: st.Term, Members: s.members()}, nil
}

// members is this coordinator's view of the membership, sorted by raft id.
func (s *adminServer) members() []*pb.Member {
	c := s.c
	st := c.raft.Status()
	byRaft := map[uint64]catalog.Node{}
	for _, n := range c.fsm.Nodes() {
		if n.Role == catalog.RoleCoordinator && n.RaftID != 0 {
			byRaft[n.RaftID] = n
		}
	}
	addrs := map[uint64]string{}
	for _, m := range c.fsm.Members() {
		addrs[m.RaftID] = m.Addr
	}
	var out []*pb.Member
	add := func(id uint64, learner bool) {
		m := &pb.Member{RaftId: id, Learner: learner, Leader: id == st.Lead, MatchIndex: st.Match[id], Addr: addrs[id]}
		if n, ok := byRaft[id]; ok {
			m.NodeId, m.StoreId, m.State = n.ID, n.StoreID, n.State.String()
			if m.Addr == "" {
				m.Addr = n.Addr
			}
		}
		if p, ok := c.tr.Peer(id); ok {
			if m.NodeId == "" {
				m.NodeId = p.Name // added here, not registered yet
			}
			if m.Addr == "" {
				m.Addr = p.Addr
			}
		}
		if id == c.opts.RaftID {
			m.NodeId, m.Addr = c.opts.NodeID, c.opts.ClusterAddr
		}
		out = append(out, m)
	}
	// The catalog's configuration is applied with the change itself (a
	// change's caller sees it at once); raft's status only after the next
	// round, and it is the fallback before the first configuration.
	if cms := c.fsm.Members(); len(cms) > 0 {
		for _, m := range cms {
			add(m.RaftID, m.Learner)
		}
	} else {
		for _, id := range st.Voters {
			add(id, false)
		}
		for _, id := range st.Learners {
			add(id, true)
		}
	}
	slices.SortFunc(out, func(a, b *pb.Member) int { return cmp.Compare(a.RaftId, b.RaftId) })
	return out
}

// checkMemberChange refuses a change (what names it) of raft id 0 or
// asked of a coordinator that does not lead.
func (s *adminServer) checkMemberChange(what string, raftID uint64) error {
	if raftID == 0 {
		return status.Errorf(codes.InvalidArgument, "%s: raft_id is required", what)
	}
	return s.requireLeader()
}

// requireLeader answers FAILED_PRECONDITION naming the leader unless this
// coordinator leads.
func (s *adminServer) requireLeader() error {
	st := s.c.raft.Status()
	if st.Removed {
		return status.Errorf(codes.FailedPrecondition, "coordinator %s (raft id %d) was removed from the cluster", s.c.opts.NodeID, s.c.opts.RaftID)
	}
	if st.IsLeader {
		return nil
	}
	return s.notLeader(st.Lead)
}

func (s *adminServer) notLeader(lead uint64) error {
	c := s.c
	if lead == 0 {
		return status.Errorf(codes.FailedPrecondition, "coordinator %s (raft id %d) is not the leader and knows of none (election in progress?); retry shortly", c.opts.NodeID, c.opts.RaftID)
	}
	name, addr := "", ""
	for _, n := range c.fsm.Nodes() {
		if n.Role == catalog.RoleCoordinator && n.RaftID == lead {
			name, addr = n.ID, n.Addr
		}
	}
	if name == "" {
		if p, ok := c.tr.Peer(lead); ok {
			name, addr = p.Name, p.Addr
		}
	}
	return status.Errorf(codes.FailedPrecondition, "coordinator %s (raft id %d) is not the leader; the leader is raft id %d (node %q, cluster address %s): send the request to its client listener",
		c.opts.NodeID, c.opts.RaftID, lead, name, addr)
}

// changeError maps a raft membership error to a gRPC status.
func (s *adminServer) changeError(what string, err error) error {
	var nl *raftnode.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return s.notLeader(nl.Leader)
	case errors.Is(err, raftnode.ErrConfChangePending):
		return status.Errorf(codes.Aborted, "%s: another membership change is in progress; retry once it is applied: %v", what, err)
	case errors.Is(err, raftnode.ErrBadConfChange):
		return status.Errorf(codes.FailedPrecondition, "%s: %v", what, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return status.Errorf(status.FromContextError(err).Code(), "%s: %v (the change may still be applied; check the members)", what, err)
	case errors.Is(err, raftnode.ErrStopped):
		return status.Errorf(codes.Unavailable, "%s: %v", what, err)
	}
	return status.Errorf(codes.Internal, "%s: %v", what, err)
}

func (s *adminServer) GetFleetConfig(ctx context.Context, _ *pb.GetFleetConfigRequest) (*pb.GetFleetConfigResponse, error) {
	return &pb.GetFleetConfigResponse{Config: fleetConfigProto(s.c.fsm.Config())}, nil
}

// SetFleetConfig proposes catalog.SetConfig. Any member may propose: raft
// forwards the proposal to the leader, so no leader check is needed.
func (s *adminServer) SetFleetConfig(ctx context.Context, req *pb.SetFleetConfigRequest) (*pb.SetFleetConfigResponse, error) {
	if req.GetConfig() == nil {
		return nil, status.Error(codes.InvalidArgument, "set fleet config: config is required")
	}
	cfg := fleetConfigFromProto(req.GetConfig())
	if (cfg.LagBudgetMs != 0 || cfg.MinSegmentPoints != 0) && !s.c.fsm.FeatureReady(catalog.FeatureSealPolicy) {
		// NB: a member of an earlier version could not decode the entry
		// and its catalog would differ from the others'.
		return nil, status.Errorf(codes.FailedPrecondition, "set fleet config: a lag budget or a minimum of points per segment needs every coordinator to apply it (catalog feature %q); upgrade them all first", catalog.FeatureSealPolicy)
	}
	res, err := s.c.raft.Propose(ctx, catalog.EncodeCommand(catalog.SetConfig{Config: cfg}))
	if err != nil {
		var ce *catalog.CommandError
		switch {
		case errors.As(err, &ce):
			return nil, status.Errorf(codes.InvalidArgument, "set fleet config: %v", err)
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			return nil, status.Errorf(status.FromContextError(err).Code(), "set fleet config: %v (the change may still be applied; read the config)", err)
		case errors.Is(err, raftnode.ErrStopped):
			return nil, status.Errorf(codes.Unavailable, "set fleet config: %v", err)
		}
		return nil, status.Errorf(codes.Unavailable, "set fleet config: %v", err)
	}
	applied, ok := res.(catalog.FleetConfig)
	if !ok {
		applied = s.c.fsm.Config()
	}
	s.c.log.Info("fleet config set", "version", applied.Version, "retention_raw_ms", applied.RetentionRawMs,
		"rate_limit_points_per_sec", applied.RateLimitPointsPerSec, "rate_limit_burst_points", applied.RateLimitBurstPoints,
		"replication_factor", applied.ReplicationFactor, "write_quorum", applied.WriteQuorum, "dead_after_ms", applied.DeadAfterMs,
		"max_series", applied.MaxSeries, "lag_budget_ms", applied.LagBudgetMs, "min_segment_points", applied.MinSegmentPoints)
	return &pb.SetFleetConfigResponse{Config: fleetConfigProto(applied)}, nil
}

func fleetConfigProto(c catalog.FleetConfig) *pb.FleetConfig {
	return &pb.FleetConfig{
		RetentionRawMs: c.RetentionRawMs, Retention_1HMs: c.Retention1hMs, Retention_1DMs: c.Retention1dMs,
		RollupHourly: c.RollupHourly, RollupDaily: c.RollupDaily,
		RateLimitPointsPerSec: c.RateLimitPointsPerSec, RateLimitBurstPoints: c.RateLimitBurstPoints,
		ReplicationFactor: c.ReplicationFactor, MaxSeries: c.MaxSeries, Version: c.Version,
		WriteQuorum: c.WriteQuorum, DeadAfterMs: c.DeadAfterMs,
		LagBudgetMs: c.LagBudgetMs, MinSegmentPoints: c.MinSegmentPoints,
	}
}

// fleetConfigFromProto is the inverse of fleetConfigProto. Every field
// counts: a client that read the configuration, changed one field and
// sent it back keeps the others, write quorum, dead-after and the seal
// policy included (0 lag budget: the default, as stored).
func fleetConfigFromProto(p *pb.FleetConfig) catalog.FleetConfig {
	return catalog.FleetConfig{
		RetentionRawMs: p.GetRetentionRawMs(), Retention1hMs: p.GetRetention_1HMs(), Retention1dMs: p.GetRetention_1DMs(),
		RollupHourly: p.GetRollupHourly(), RollupDaily: p.GetRollupDaily(),
		RateLimitPointsPerSec: p.GetRateLimitPointsPerSec(), RateLimitBurstPoints: p.GetRateLimitBurstPoints(),
		ReplicationFactor: p.GetReplicationFactor(), MaxSeries: p.GetMaxSeries(),
		WriteQuorum: p.GetWriteQuorum(), DeadAfterMs: p.GetDeadAfterMs(),
		LagBudgetMs: p.GetLagBudgetMs(), MinSegmentPoints: p.GetMinSegmentPoints(),
	}
}

// raftMember reports whether raft id id is among the catalog's members.
func raftMember(ms []catalog.Member, id uint64) bool {
	return slices.ContainsFunc(ms, func(m catalog.Member) bool { return m.RaftID == id })
}
