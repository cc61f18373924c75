package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/transport"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// memberService answers Whois from the running coordinator's raft member
// and catalog.
type memberService struct {
	clusterv1.UnimplementedMemberServiceServer
	c *Coordinator
}

// Whois implements clusterv1.MemberServiceServer.
func (m memberService) Whois(_ context.Context, req *clusterv1.WhoisRequest) (*clusterv1.WhoisResponse, error) {
	c := m.c
	st := c.raft.Status()
	resp := &clusterv1.WhoisResponse{NodeId: c.opts.NodeID, RaftId: c.opts.RaftID, ClusterId: c.opts.ClusterID,
		AppliedIndex: st.Applied, LeaderRaftId: st.Lead}
	maxID := c.opts.RaftID
	for _, id := range append(slices.Clone(st.Voters), st.Learners...) {
		maxID = max(maxID, id)
		if id == req.GetRaftId() {
			resp.RaftIdIsMember = true
		}
	}
	for _, n := range c.fsm.Nodes() {
		if n.Role != catalog.RoleCoordinator {
			continue
		}
		maxID = max(maxID, n.RaftID)
		if n.ID == req.GetNodeId() {
			resp.RegisteredRaftId, resp.RegisteredStoreId = n.RaftID, n.StoreID
		}
	}
	resp.MaxRaftId = maxID
	return resp, nil
}

// freshMemberService answers Whois for a coordinator that has not started
// raft: it knows nothing.
type freshMemberService struct {
	clusterv1.UnimplementedMemberServiceServer
	o *Options
}

func (m freshMemberService) Whois(context.Context, *clusterv1.WhoisRequest) (*clusterv1.WhoisResponse, error) {
	return &clusterv1.WhoisResponse{NodeId: m.o.NodeID, RaftId: m.o.RaftID, ClusterId: m.o.ClusterID, MaxRaftId: m.o.RaftID}, nil
}

// FreshAction is what a coordinator with no raft log does.
type FreshAction int

// The actions.
const (
	// FreshWait: not enough peers answered to decide; ask again.
	FreshWait FreshAction = iota
	// FreshBootstrap: a new cluster; bootstrap from Peers.
	FreshBootstrap
	// FreshJoin: join a cluster as a new member (JoinPeers).
	FreshJoin
	// FreshRejoin: this member lost its disk; join as a new member
	// under FreshDecision.RaftID, replacing FreshDecision.Replaces.
	FreshRejoin
	// FreshRefuse: the cluster knows this member, whose disk is gone,
	// and rejoining was not asked for: do not start.
	FreshRefuse
)

// FreshDecision is the outcome of CheckFreshDataDir.
type FreshDecision struct {
	Action FreshAction
	// RaftID and Replaces: for FreshRejoin, the raft id to take and the
	// member it replaces.
	RaftID, Replaces uint64
	// Reason explains the decision (for logs and for a refusal).
	Reason string
}

// PeerAnswer is one peer's Whois answer, or why there is none.
type PeerAnswer struct {
	Peer Peer
	Resp *clusterv1.WhoisResponse
	Err  error
}

// DecideFresh decides what a coordinator (self, raft id self.RaftID) whose
// data directory holds no raft log does, from its peers' answers:
//
//   - a peer has applied entries (a cluster runs) and its catalog
//     registers this node id (the coordinator ran with a disk before): its
//     log and votes are gone, so it must not bootstrap nor reuse its raft
//     id. With rejoin it joins as a new member, raft id newID(max raft id
//     known, the registered raft id), replacing the old one; otherwise it
//     refuses, saying how to proceed;
//   - a cluster runs and has not registered this node id: a bootstrap
//     member whose raft id is in the configuration bootstraps (it started
//     late; the leader catches it up), another bootstrap request is
//     refused (join instead), and a joining member joins;
//   - no cluster is seen: bootstrap once a majority of the bootstrap
//     members (self included) answered that they have no log either,
//     else wait; a joining member joins.
func DecideFresh(self Peer, bootstrap, rejoin bool, answers []PeerAnswer, newID func(maxRaftID, old uint64) uint64) FreshDecision {
	var running []PeerAnswer
	fresh, maxID := 1, self.RaftID
	for _, a := range answers {
		if a.Err != nil || a.Resp == nil {
			continue
		}
		maxID = max(maxID, a.Resp.GetMaxRaftId())
		if a.Resp.GetAppliedIndex() > 0 {
			running = append(running, a)
		} else {
			fresh++
		}
	}
	if len(running) > 0 {
		// The most advanced peer's view decides.
		best := slices.MaxFunc(running, func(x, y PeerAnswer) int {
			return cmp.Compare(x.Resp.GetAppliedIndex(), y.Resp.GetAppliedIndex())
		})
		r := best.Resp
		// The catalog registering this node id is the evidence that it ran
		// with a disk before (a coordinator registers itself once raft
		// runs); being in the configuration is not (every bootstrap
		// member is, from the first entry on).
		if old := r.GetRegisteredRaftId(); old != 0 {
			what := fmt.Sprintf("this data directory holds no raft log, but coordinator %q (raft id %d) is a member of a running cluster (%s has applied index %d)",
				self.NodeID, old, best.Peer.NodeID, r.GetAppliedIndex())
			if !rejoin {
				return FreshDecision{Action: FreshRefuse, Reason: what + ": its disk was lost or replaced. It must not bootstrap again nor reuse raft id " +
					fmt.Sprint(old) + " (its votes and log are gone). Restart it with --rejoin to join as a new member under a new raft id (it gets its share back by re-replication), or restore the original data directory"}
			}
			id := newID(maxID, old)
			return FreshDecision{Action: FreshRejoin, RaftID: id, Replaces: old,
				Reason: fmt.Sprintf("%s; rejoining as raft id %d in its place", what, id)}
		}
		member := slices.ContainsFunc(running, func(a PeerAnswer) bool { return a.Resp.GetRaftIdIsMember() })
		switch {
		case bootstrap && member:
			// A bootstrap member starting after the others: it writes the
			// same first entries they did, and the leader catches it up.
			return FreshDecision{Action: FreshBootstrap, Reason: fmt.Sprintf("a bootstrap member starting late: %s runs the new cluster (applied index %d) and has not seen this member register",
				best.Peer.NodeID, r.GetAppliedIndex())}
		case bootstrap:
			return FreshDecision{Action: FreshRefuse, Reason: fmt.Sprintf("asked to bootstrap (--peers), but %s runs a cluster (applied index %d) that does not know raft id %d: join it instead (--join)",
				best.Peer.NodeID, r.GetAppliedIndex(), self.RaftID)}
		}
		return FreshDecision{Action: FreshJoin, Reason: "joining a running cluster as a new member"}
	}
	if !bootstrap {
		return FreshDecision{Action: FreshJoin, Reason: "joining: no running member answered yet"}
	}
	members := len(answers) + 1
	if fresh*2 > members {
		return FreshDecision{Action: FreshBootstrap, Reason: fmt.Sprintf("%d of %d bootstrap members have no raft log: a new cluster", fresh, members)}
	}
	return FreshDecision{Action: FreshWait, Reason: fmt.Sprintf("%d of %d bootstrap members answered without a raft log; a majority is needed before bootstrapping a new cluster", fresh, members)}
}

// CheckFreshDataDir decides what a coordinator whose data directory holds
// no raft log does (DecideFresh), asking its peers (o.Peers, else
// o.JoinPeers) over the cluster listener until it can decide or ctx ends.
// Meanwhile it serves the cluster listener itself, answering that it has
// no log, so that members bootstrapping together can decide. rejoin and
// newID are as for DecideFresh.
func CheckFreshDataDir(ctx context.Context, o Options, rejoin bool, newID func(maxRaftID, old uint64) uint64) (FreshDecision, error) {
	if err := o.Validate(); err != nil {
		return FreshDecision{}, err
	}
	self := Peer{RaftID: o.RaftID, NodeID: o.NodeID, Addr: o.ClusterAddr}
	bootstrap := len(o.Peers) > 0
	var peers []Peer
	for _, p := range append(slices.Clone(o.Peers), o.JoinPeers...) {
		if p.RaftID != o.RaftID && p.NodeID != o.NodeID {
			peers = append(peers, p)
		}
	}
	if len(peers) == 0 {
		if bootstrap {
			return FreshDecision{Action: FreshBootstrap, Reason: "the only bootstrap member"}, nil
		}
		return FreshDecision{Action: FreshJoin, Reason: "no peer to ask"}, nil
	}
	stop, err := serveFresh(o, peers)
	if err != nil {
		return FreshDecision{}, err
	}
	defer stop()
	log := o.Logger.With("component", "coordinator", "coordinator", o.NodeID)
	for {
		answers := askWhois(ctx, o, peers)
		d := DecideFresh(self, bootstrap, rejoin, answers, newID)
		if d.Action != FreshWait {
			return d, nil
		}
		var errs []error
		for _, a := range answers {
			if a.Err != nil {
				errs = append(errs, a.Err)
			}
		}
		log.Warn("no raft log here: waiting for peers before deciding", "reason", d.Reason, "err", errors.Join(errs...))
		select {
		case <-ctx.Done():
			return d, fmt.Errorf("decide what to do with an empty data directory: %w (%s)", ctx.Err(), d.Reason)
		case <-time.After(time.Second):
		}
	}
}

// serveFresh serves the cluster listener with only a MemberService that
// knows nothing, admitting the peers' certificates; stop closes it.
func serveFresh(o Options, peers []Peer) (stop func(), err error) {
	tr, err := transport.New(transport.Options{ID: o.RaftID, ClusterID: o.ClusterID, TLS: o.ClusterClientTLS, Insecure: o.Insecure, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("cluster transport: %w", err)
	}
	for _, p := range peers {
		if err := tr.AddPeer(p.RaftID, transport.Peer{Addr: p.Addr, Name: p.NodeID}); err != nil {
			tr.Close()
			return nil, fmt.Errorf("peer %d: %w", p.RaftID, err)
		}
	}
	srv, err := transport.NewServer(transport.ServerOptions{ID: o.RaftID, ClusterID: o.ClusterID, TLS: o.ClusterServerTLS,
		Insecure: o.Insecure, Peers: tr, Logger: o.Logger,
		Step: func(context.Context, raftpb.Message) error { return errors.New("raft has not started here") },
		Register: func(g *grpc.Server) {
			clusterv1.RegisterMemberServiceServer(g, freshMemberService{o: &o})
		}})
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("cluster server: %w", err)
	}
	lis, err := net.Listen("tcp", o.ClusterListen)
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("cluster listener: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	return func() {
		srv.Stop()
		<-done
		tr.Close()
	}, nil
}

// askWhois asks every peer at once, each for at most 2 s.
func askWhois(ctx context.Context, o Options, peers []Peer) []PeerAnswer {
	out := make([]PeerAnswer, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Go(func() {
			out[i] = PeerAnswer{Peer: p}
			creds := insecure.NewCredentials()
			if !o.Insecure {
				creds = credentials.NewTLS(transport.VerifyServerName(o.ClusterClientTLS, p.NodeID))
			}
			conn, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(creds))
			if err != nil {
				out[i].Err = fmt.Errorf("dial %s at %s: %w", p.NodeID, p.Addr, err)
				return
			}
			defer conn.Close()
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			resp, err := clusterv1.NewMemberServiceClient(conn).Whois(cctx, &clusterv1.WhoisRequest{NodeId: o.NodeID, RaftId: o.RaftID, ClusterId: o.ClusterID})
			if err != nil {
				out[i].Err = fmt.Errorf("ask %s at %s: %w", p.NodeID, p.Addr, err)
				return
			}
			if resp.GetClusterId() != o.ClusterID {
				out[i].Err = fmt.Errorf("%s at %s is in cluster %q, not %q", p.NodeID, p.Addr, resp.GetClusterId(), o.ClusterID)
				return
			}
			out[i].Resp = resp
		})
	}
	wg.Wait()
	return out
}
