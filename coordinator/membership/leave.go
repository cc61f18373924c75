package membership

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// leaver removes from the raft group the members a StatefulSet no longer
// has, which is what `tributary cluster remove` does by hand after its
// replica count was lowered. It runs on every coordinator given a source
// of the expected member count N, and acts only while this coordinator
// leads; it reads N in each round it leads:
//
//   - members beyond N (raft id ordinal > N) that have not answered for
//     goneAfter are removed, learners first, then voters from the highest
//     raft id, one per round;
//   - a voter is removed only if the voters left would still hold a quorum
//     of members that answer, so a removal never costs the cluster its
//     majority;
//   - a leader that is itself beyond N hands leadership to the most
//     up-to-date voter within N and removes nothing;
//   - when N cannot be read (the Kubernetes API does not answer, the
//     service account may not read the StatefulSet), nothing is removed
//     and the round says why; the silences already seen are kept, so a
//     member silent past the grace is removed once N is read again (if
//     it still does not answer).
//
// Members within N are never touched: rolling restarts, node drains and
// crashes of those pods change nothing. A member beyond N that still
// answers is left alone too: its pod has not been deleted yet (the
// StatefulSet deletes the highest ordinals first), and removing a running
// member would make it exit while its pod may still be restarted.
//
// It is run by one goroutine; run returns when ctx ends.
type leaver struct {
	self      Peer         // this coordinator, Addr its cluster address
	expected  ExpectedFunc // members wanted: ordinals 1..N
	cluster   Cluster
	interval  time.Duration // between rounds
	goneAfter time.Duration // silence before a member beyond expected is removed
	callTime  time.Duration // limit of one call
	now       func() time.Time
	log       *slog.Logger

	// goneSince is when each member beyond expected first failed to
	// answer, while this coordinator leads. lastN is the count last read
	// (0: none yet), for the log. Only run's goroutine uses them.
	goneSince map[uint64]time.Time
	lastN     uint64
}

func newLeaver(o Options) *leaver {
	return &leaver{self: o.Self, expected: o.Expected, cluster: o.Cluster, interval: o.LeaveInterval,
		goneAfter: o.LeaveAfter, callTime: leaveCallTimeout, now: o.Now, log: o.Logger, goneSince: map[uint64]time.Time{}}
}

// run repeats rounds until ctx ends.
func (l *leaver) run(ctx context.Context) error {
	return repeatRounds(ctx, l.interval, func(ctx context.Context) bool {
		if err := l.round(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("auto-leave: retrying", "err", err)
		}
		return false
	})
}

// call runs f with the limit of one call.
func (l *leaver) call(ctx context.Context, f func(context.Context) error) error {
	return callWithin(ctx, l.callTime, f)
}

// answers reports whether member m answers a Members call.
func (l *leaver) answers(ctx context.Context, m *pb.Member) bool {
	if m.RaftId == l.self.RaftID {
		return true
	}
	return l.call(ctx, func(ctx context.Context) error {
		_, err := l.cluster.Members(ctx, m.Addr)
		return err
	}) == nil
}

// round takes at most one step: a leadership transfer or one removal.
func (l *leaver) round(ctx context.Context) error {
	var view *pb.MembersResponse
	if err := l.call(ctx, func(ctx context.Context) (err error) {
		view, err = l.cluster.Members(ctx, l.self.Addr)
		return err
	}); err != nil {
		return fmt.Errorf("members from this coordinator: %w", err)
	}
	if view.LeaderRaftId != l.self.RaftID {
		// Only the leader acts, and silences it saw are stale once it
		// leads again.
		clear(l.goneSince)
		return nil
	}
	n, err := l.readExpected(ctx)
	if err != nil {
		return err
	}
	var beyond, keep []*pb.Member // beyond: ordinal > n; keep: the voters within
	for _, m := range view.Members {
		switch {
		case Ordinal(m.RaftId) > n:
			beyond = append(beyond, m)
		case !m.Learner:
			keep = append(keep, m)
		}
	}
	for id := range l.goneSince {
		if !slices.ContainsFunc(beyond, func(m *pb.Member) bool { return m.RaftId == id }) {
			delete(l.goneSince, id)
		}
	}
	if len(beyond) == 0 {
		return nil
	}
	if len(keep) == 0 {
		return fmt.Errorf("no voter within the %d expected members (voters: %s): nothing removed", n, raftIDs(view.Members))
	}
	if Ordinal(l.self.RaftID) > n {
		return l.handOver(ctx, keep, n)
	}
	// Learners first (no effect on the quorum), then voters from the
	// highest raft id: the order the StatefulSet deletes the pods in.
	slices.SortFunc(beyond, func(a, b *pb.Member) int {
		if a.Learner != b.Learner {
			if a.Learner {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.RaftId, a.RaftId)
	})
	now := l.now()
	for _, m := range beyond {
		if done, err := l.consider(ctx, view.Members, m, n, now); done || err != nil {
			return err // one change per round: the next round sees the new configuration
		}
	}
	return nil
}

// consider removes member m, beyond the expected ones, once it has been
// silent past the grace period and its removal keeps a quorum. done: it
// was removed.
func (l *leaver) consider(ctx context.Context, members []*pb.Member, m *pb.Member, n uint64, now time.Time) (done bool, err error) {
	if l.answers(ctx, m) {
		delete(l.goneSince, m.RaftId)
		return false, nil
	}
	since, ok := l.goneSince[m.RaftId]
	if !ok {
		l.goneSince[m.RaftId] = now
		l.log.Info("auto-leave: a member beyond the expected ones does not answer", "raft_id", m.RaftId,
			"node", m.NodeId, "expected_members", n, "remove_after", l.goneAfter)
		return false, nil
	}
	if now.Sub(since) < l.goneAfter {
		return false, nil
	}
	if !m.Learner {
		if err := l.checkQuorum(ctx, members, m); err != nil {
			return false, err
		}
	}
	if err := l.call(ctx, func(ctx context.Context) error {
		// Force: the member is gone (silent past the grace); a segment
		// only it held is on no live replica either way, and the
		// intake asks its edge to ship it again. Draining members
		// before scaling down avoids that (charts/tributary README).
		return l.cluster.RemoveMember(ctx, l.self.Addr, &pb.RemoveMemberRequest{RaftId: m.RaftId, Force: true})
	}); err != nil {
		return false, fmt.Errorf("remove member %d: %w", m.RaftId, err)
	}
	delete(l.goneSince, m.RaftId)
	l.log.Info("auto-leave: removed a member beyond the expected ones", "raft_id", m.RaftId, "node", m.NodeId,
		"learner", m.Learner, "silent_for", now.Sub(since).Round(time.Second), "expected_members", n)
	return true, nil
}

// readExpected reads the expected member count, logging when it changes.
// An error ends the round: with no count, nothing is removed.
func (l *leaver) readExpected(ctx context.Context) (uint64, error) {
	var n uint64
	if err := callWithin(ctx, expectedTimeout, func(ctx context.Context) (err error) {
		n, err = l.expected(ctx)
		return err
	}); err != nil {
		return 0, fmt.Errorf("read the expected member count: %w: nothing removed", err)
	}
	if n != l.lastN {
		l.log.Info("auto-leave: expected member count", "expected_members", n, "was", l.lastN)
		l.lastN = n
	}
	return n, nil
}

// checkQuorum refuses the removal of voter gone unless the voters left
// hold a majority of members that answer.
func (l *leaver) checkQuorum(ctx context.Context, members []*pb.Member, gone *pb.Member) error {
	var left []*pb.Member
	for _, m := range members {
		if !m.Learner && m.RaftId != gone.RaftId {
			left = append(left, m)
		}
	}
	alive := 0
	for _, m := range left {
		if l.answers(ctx, m) {
			alive++
		}
	}
	if need := len(left)/2 + 1; alive < need {
		return fmt.Errorf("remove member %d: %d of the %d voters left answer, a quorum needs %d: not removed",
			gone.RaftId, alive, len(left), need)
	}
	return nil
}

// handOver transfers leadership from this coordinator, which is beyond the
// expected members, to the most up-to-date voter within them that answers.
func (l *leaver) handOver(ctx context.Context, keep []*pb.Member, n uint64) error {
	var to *pb.Member
	for _, m := range keep {
		if (to == nil || m.MatchIndex > to.MatchIndex) && l.answers(ctx, m) {
			to = m
		}
	}
	if to == nil {
		return errors.New("this leader is beyond the expected members and no voter within them answers: leadership kept")
	}
	var leader uint64
	if err := l.call(ctx, func(ctx context.Context) (err error) {
		leader, err = l.cluster.TransferLeadership(ctx, l.self.Addr, to.RaftId)
		return err
	}); err != nil {
		return fmt.Errorf("transfer leadership to %d: %w", to.RaftId, err)
	}
	l.log.Info("auto-leave: this leader is beyond the expected members: leadership transferred",
		"raft_id", l.self.RaftID, "expected_members", n, "to", to.RaftId, "leader", leader)
	return nil
}

// raftIDs lists the members' raft ids, for messages.
func raftIDs(ms []*pb.Member) string {
	ids := make([]uint64, len(ms))
	for i, m := range ms {
		ids[i] = m.RaftId
	}
	return fmt.Sprint(ids)
}
