package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// joiner makes this coordinator a voter by itself: it asks the leader to
// add it as a learner, waits until it has caught up, and asks for its
// promotion. A StatefulSet scaled up needs no operator. It is run by one
// goroutine; run returns when this coordinator is a voter or ctx ends.
//
// With a source of the expected member count N, every step that changes
// the membership first reads N, and a coordinator whose ordinal is beyond
// it waits instead (its StatefulSet is being scaled down, or a scale-up
// has not reached the count yet): it would be removed again. When N
// cannot be read the last count read decides; when none was ever read,
// it waits, and says why, until one is. A coordinator that is already a
// voter changes nothing either way.
type joiner struct {
	self     Peer // this coordinator, Addr its cluster address
	peers    []Peer
	cluster  Cluster
	interval time.Duration // between rounds
	maxLag   uint64        // promote once within this many entries of the leader
	callTime time.Duration // limit of one call
	// replaces is the raft id of the member this one replaces (it lost its
	// disk and rejoins under a new raft id): removed before this one is
	// added. 0: none.
	replaces uint64
	// expected reads N (nil: no limit); lastN is the count last read and
	// readN whether one was. Only run's goroutine uses them.
	expected ExpectedFunc
	lastN    uint64
	readN    bool
	log      *slog.Logger
}

func newJoiner(o Options) *joiner {
	return &joiner{self: o.Self, peers: o.Join, cluster: o.Cluster, interval: o.JoinInterval, maxLag: o.MaxLag,
		callTime: joinCallTimeout, replaces: o.Replaces, expected: o.Expected, log: o.Logger}
}

// errNotYet ends a round that must be retried.
var errNotYet = errors.New("not yet")

// errWaiting marks a round that waits for the expected member count: it is
// logged once each time its reason changes, not every round.
var errWaiting = errors.New("auto-join: waiting")

// run repeats rounds until this coordinator is a voter or ctx ends.
func (j *joiner) run(ctx context.Context) error {
	var waitingFor string
	return repeatRounds(ctx, j.interval, func(ctx context.Context) bool {
		err := j.round(ctx)
		switch {
		case err == nil:
			j.log.Info("auto-join: this coordinator is a voter", "raft_id", j.self.RaftID)
			return true
		case errors.Is(err, errWaiting):
			if err.Error() != waitingFor {
				waitingFor = err.Error()
				j.log.Warn("auto-join: not joining yet", "err", err)
			}
		case !errors.Is(err, errNotYet):
			j.log.Warn("auto-join: retrying", "err", err)
		}
		return false
	})
}

// call runs f with the limit of one call.
func (j *joiner) call(ctx context.Context, f func(context.Context) error) error {
	return callWithin(ctx, j.callTime, f)
}

// round takes one step: find the leader, remove the member this one
// replaces, add this coordinator as a learner, or promote it once caught
// up. nil: it is a voter.
func (j *joiner) round(ctx context.Context) error {
	view, err := j.view(ctx)
	if err != nil {
		return err
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
	if err := j.withinExpected(ctx); err != nil {
		return err
	}
	switch {
	case j.replaces != 0 && slices.ContainsFunc(view.Members, func(m *pb.Member) bool { return m.RaftId == j.replaces }):
		return j.removeReplaced(ctx, leader)
	case me == nil:
		return j.addLearner(ctx, leader)
	}
	return j.promote(ctx, leader)
}

// withinExpected reports (an errWaiting error) when this coordinator's
// ordinal is beyond the expected member count, or when no count was ever
// read; a count that cannot be read now leaves the last one in force.
func (j *joiner) withinExpected(ctx context.Context) error {
	if j.expected == nil {
		return nil
	}
	var n uint64
	err := callWithin(ctx, expectedTimeout, func(ctx context.Context) (err error) {
		n, err = j.expected(ctx)
		return err
	})
	switch {
	case err == nil:
		j.lastN, j.readN = n, true
	case !j.readN:
		return fmt.Errorf("%w: the expected member count was never read: %v", errWaiting, err)
	default:
		j.log.Debug("auto-join: the expected member count cannot be read: the last one read counts", "err", err, "expected_members", j.lastN)
	}
	if Ordinal(j.self.RaftID) > j.lastN {
		return fmt.Errorf("%w: raft id %d is beyond the %d expected members (its StatefulSet is being scaled down, or not yet up)", errWaiting, j.self.RaftID, j.lastN)
	}
	return nil
}

// view asks the peers for the membership until one names a leader: any
// member's view does.
func (j *joiner) view(ctx context.Context) (*pb.MembersResponse, error) {
	var errs []error
	for _, p := range j.peers {
		if p.RaftID == j.self.RaftID {
			continue
		}
		var view *pb.MembersResponse
		err := j.call(ctx, func(ctx context.Context) (err error) {
			view, err = j.cluster.Members(ctx, p.Addr)
			return err
		})
		if err == nil && view.LeaderRaftId != 0 {
			return view, nil
		}
		errs = append(errs, fmt.Errorf("members from %s: %v", p.NodeID, err))
	}
	return nil, fmt.Errorf("no member answered with a leader: %w", errors.Join(errs...))
}

// removeReplaced removes the member this one replaces, first: its log and
// votes are gone with its disk, so it can only stall the quorum.
func (j *joiner) removeReplaced(ctx context.Context, leader *pb.Member) error {
	err := j.call(ctx, func(ctx context.Context) error {
		// Its disk is gone: what only it held is gone with it, and the
		// edges are asked to ship that again.
		return j.cluster.RemoveMember(ctx, leader.Addr, &pb.RemoveMemberRequest{RaftId: j.replaces, Force: true})
	})
	if err != nil {
		return fmt.Errorf("remove member %d, which this one replaces, at the leader %s (%s): %w", j.replaces, leader.NodeId, leader.Addr, err)
	}
	j.log.Warn("rejoin: removed the member this coordinator replaces", "old_raft_id", j.replaces, "raft_id", j.self.RaftID, "leader", leader.NodeId)
	return errNotYet
}

// addLearner asks the leader to add this coordinator.
//
// NB: only ever as a learner, and only when absent: asking to add a voter
// as a learner would demote it.
func (j *joiner) addLearner(ctx context.Context, leader *pb.Member) error {
	err := j.call(ctx, func(ctx context.Context) error {
		return j.cluster.AddMember(ctx, leader.Addr, &pb.AddMemberRequest{RaftId: j.self.RaftID, NodeId: j.self.NodeID, Addr: j.self.Addr, Learner: true})
	})
	if err != nil {
		return fmt.Errorf("add member %d as a learner at the leader %s (%s): %w", j.self.RaftID, leader.NodeId, leader.Addr, err)
	}
	j.log.Info("auto-join: added as a learner", "raft_id", j.self.RaftID, "leader", leader.NodeId)
	return errNotYet
}

// promote asks for this learner's promotion once its log is within maxLag
// of the leader's, as the leader sees it (the leader's own view holds the
// match indexes).
func (j *joiner) promote(ctx context.Context, leader *pb.Member) error {
	var lview *pb.MembersResponse
	if err := j.call(ctx, func(ctx context.Context) (err error) {
		lview, err = j.cluster.Members(ctx, leader.Addr)
		return err
	}); err != nil {
		return fmt.Errorf("members from the leader %s (%s): %w", leader.NodeId, leader.Addr, err)
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
	err := j.call(ctx, func(ctx context.Context) error {
		return j.cluster.PromoteMember(ctx, leader.Addr, j.self.RaftID)
	})
	if err != nil {
		return fmt.Errorf("promote member %d at the leader %s (%s): %w", j.self.RaftID, leader.NodeId, leader.Addr, err)
	}
	j.log.Info("auto-join: promoted to voter", "raft_id", j.self.RaftID, "match", myMatch, "leader_match", leaderMatch)
	return errNotYet // the next round confirms it
}
