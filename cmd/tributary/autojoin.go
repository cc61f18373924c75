package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/coordinator"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// autoJoiner makes a coordinator started with --join (or beyond the
// bootstrap list of --identity-from-hostname) a member by itself, which is
// what `tributary cluster add` then `promote` do by hand: it asks the
// leader to add it as a learner, waits until it has caught up, and asks
// for its promotion to voter. A StatefulSet scaled up needs no operator.
//
// Members are reached on their client listener: the host of their cluster
// address with clientPort (every member listens on the same ports, as in
// the Helm chart). It is run by one goroutine; run returns when this
// coordinator is a voter or ctx ends.
type autoJoiner struct {
	self       coordinator.Peer // this coordinator, Addr its cluster address
	peers      []coordinator.Peer
	clientPort string
	dialOpts   []grpc.DialOption
	interval   time.Duration // between rounds
	maxLag     uint64        // promote once within this many entries of the leader
	callTime   time.Duration // limit of one call
	// replaces is the raft id of the member this one replaces (it lost its
	// disk and rejoins under a new raft id): removed before this one is
	// added. 0: none.
	replaces uint64
	log      *slog.Logger
}

// errNotYet ends a round that must be retried.
var errNotYet = errors.New("not yet")

// run repeats rounds until this coordinator is a voter or ctx ends.
func (j *autoJoiner) run(ctx context.Context) error {
	for {
		err := j.round(ctx)
		if err == nil {
			j.log.Info("auto-join: this coordinator is a voter", "raft_id", j.self.RaftID)
			return nil
		}
		if !errors.Is(err, errNotYet) {
			j.log.Warn("auto-join: retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(j.interval):
		}
	}
}

// clientAddr is the client listener of a member with cluster address addr.
func (j *autoJoiner) clientAddr(clusterAddr string) (string, error) {
	host, _, err := net.SplitHostPort(clusterAddr)
	if err != nil {
		return "", fmt.Errorf("cluster address %q: %w", clusterAddr, err)
	}
	return net.JoinHostPort(host, j.clientPort), nil
}

// call runs f against the ClusterService at addr.
func (j *autoJoiner) call(ctx context.Context, addr string, f func(context.Context, pb.ClusterServiceClient) error) error {
	conn, err := grpc.NewClient(addr, j.dialOpts...)
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, j.callTime)
	defer cancel()
	return f(cctx, pb.NewClusterServiceClient(conn))
}

// round takes one step: find the leader, add this coordinator as a
// learner, or promote it once caught up. nil: it is a voter.
func (j *autoJoiner) round(ctx context.Context) error {
	// Any member's view names the leader; the leader's own view holds the
	// match indexes.
	var view *pb.MembersResponse
	var errs []error
	for _, p := range j.peers {
		if p.RaftID == j.self.RaftID {
			continue
		}
		addr, err := j.clientAddr(p.Addr)
		if err == nil {
			err = j.call(ctx, addr, func(ctx context.Context, c pb.ClusterServiceClient) (err error) {
				view, err = c.Members(ctx, &pb.MembersRequest{})
				return err
			})
		}
		if err == nil && view.LeaderRaftId != 0 {
			break
		}
		errs = append(errs, fmt.Errorf("members from %s: %v", p.NodeID, err))
		view = nil
	}
	if view == nil {
		return fmt.Errorf("no member answered with a leader: %w", errors.Join(errs...))
	}
	var leader, me *pb.Member
	for _, m := range view.Members {
		if m.RaftId == view.LeaderRaftId {
			leader = m
		}
		if m.RaftId == j.self.RaftID {
			me = m
		}
	}
	if me != nil && !me.Learner {
		return nil
	}
	if leader == nil || leader.Addr == "" {
		return fmt.Errorf("leader %d is not in %s's member list", view.LeaderRaftId, view.AnsweredBy)
	}
	leaderAddr, err := j.clientAddr(leader.Addr)
	if err != nil {
		return err
	}
	if j.replaces != 0 && slices.ContainsFunc(view.Members, func(m *pb.Member) bool { return m.RaftId == j.replaces }) {
		// The member this one replaces first: its log and votes are gone
		// with its disk, so it can only stall the quorum.
		err := j.call(ctx, leaderAddr, func(ctx context.Context, c pb.ClusterServiceClient) error {
			// Its disk is gone: what only it held is gone with it, and the
			// edges are asked to ship that again.
			_, err := c.RemoveMember(ctx, &pb.RemoveMemberRequest{RaftId: j.replaces, Force: true})
			return err
		})
		if err != nil {
			return fmt.Errorf("remove member %d, which this one replaces, at the leader %s: %w", j.replaces, leaderAddr, err)
		}
		j.log.Warn("rejoin: removed the member this coordinator replaces", "old_raft_id", j.replaces, "raft_id", j.self.RaftID, "leader", leader.NodeId)
		return errNotYet
	}
	if me == nil {
		// NB: only ever as a learner, and only when absent: asking to add
		// a voter as a learner would demote it.
		err := j.call(ctx, leaderAddr, func(ctx context.Context, c pb.ClusterServiceClient) error {
			_, err := c.AddMember(ctx, &pb.AddMemberRequest{RaftId: j.self.RaftID, NodeId: j.self.NodeID, Addr: j.self.Addr, Learner: true})
			return err
		})
		if err != nil {
			return fmt.Errorf("add member %d as a learner at the leader %s: %w", j.self.RaftID, leaderAddr, err)
		}
		j.log.Info("auto-join: added as a learner", "raft_id", j.self.RaftID, "leader", leader.NodeId)
		return errNotYet
	}
	// A learner: promote once its log is within maxLag of the leader's,
	// as the leader sees it.
	var lview *pb.MembersResponse
	if err := j.call(ctx, leaderAddr, func(ctx context.Context, c pb.ClusterServiceClient) (err error) {
		lview, err = c.Members(ctx, &pb.MembersRequest{})
		return err
	}); err != nil {
		return fmt.Errorf("members from the leader %s: %w", leaderAddr, err)
	}
	var leaderMatch, myMatch uint64
	for _, m := range lview.Members {
		switch m.RaftId {
		case lview.LeaderRaftId:
			leaderMatch = m.MatchIndex
		case j.self.RaftID:
			myMatch = m.MatchIndex
		}
	}
	if myMatch == 0 || myMatch+j.maxLag < leaderMatch {
		j.log.Debug("auto-join: catching up", "match", myMatch, "leader_match", leaderMatch)
		return errNotYet
	}
	err = j.call(ctx, leaderAddr, func(ctx context.Context, c pb.ClusterServiceClient) error {
		_, err := c.PromoteMember(ctx, &pb.PromoteMemberRequest{RaftId: j.self.RaftID})
		return err
	})
	if err != nil {
		return fmt.Errorf("promote member %d at the leader %s: %w", j.self.RaftID, leaderAddr, err)
	}
	j.log.Info("auto-join: promoted to voter", "raft_id", j.self.RaftID, "match", myMatch, "leader_match", leaderMatch)
	return errNotYet // the next round confirms it
}
