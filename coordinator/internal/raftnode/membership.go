package raftnode

import (
	"context"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/tributarydb/tributary/internal/enum"
)

// ChangeType is a kind of membership change.
type ChangeType uint8

// The membership changes. Each is a single raft configuration change (no
// joint consensus is needed for one change at a time).
const (
	// AddVoter adds a voting member (or promotes a learner).
	AddVoter ChangeType = iota + 1
	// AddLearner adds a non-voting member that receives the log; promote
	// it once it caught up, so that a slow new member never counts
	// towards the quorum.
	AddLearner
	// PromoteLearner makes a learner a voter.
	PromoteLearner
	// RemoveMember removes a voter or learner.
	RemoveMember
)

var changeTypeNames = []string{
	AddVoter:       "add-voter",
	AddLearner:     "add-learner",
	PromoteLearner: "promote-learner",
	RemoveMember:   "remove-member",
}

func (t ChangeType) String() string { return enum.Name(changeTypeNames, t, "change") }

type confRequest struct {
	typ  ChangeType
	id   uint64
	addr string
}

// ChangeMembershipAsync asks the leader for a membership change; addr (for
// additions) is the new member's raft address, recorded in the catalog's
// member list. The future completes once the change is applied here, or
// fails at once with a *NotLeaderError on a follower, ErrConfChangePending
// while another change is in progress, or ErrBadConfChange. A change that
// is already in effect completes at once without a raft entry.
func (n *Node) ChangeMembershipAsync(typ ChangeType, id uint64, addr string) *Future {
	f := newFuture(n, kindConf)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.usable(); err != nil {
		n.completeLocked(f, nil, err)
		return f
	}
	if id == 0 || typ < AddVoter || typ > RemoveMember {
		n.completeLocked(f, nil, fmt.Errorf("%w: %s of member %d", ErrBadConfChange, typ, id))
		return f
	}
	n.nextSeq++
	f.seq = n.nextSeq
	f.conf = &confRequest{typ: typ, id: id, addr: addr}
	n.inbox.confs = append(n.inbox.confs, f)
	n.notify()
	return f
}

// AddVoter adds a voting member and waits until the change is applied.
func (n *Node) AddVoter(ctx context.Context, id uint64, addr string) error {
	_, err := wait(ctx, n.ChangeMembershipAsync(AddVoter, id, addr))
	return err
}

// AddLearner adds a learner and waits until the change is applied.
func (n *Node) AddLearner(ctx context.Context, id uint64, addr string) error {
	_, err := wait(ctx, n.ChangeMembershipAsync(AddLearner, id, addr))
	return err
}

// PromoteLearner makes a learner a voter and waits until the change is
// applied.
func (n *Node) PromoteLearner(ctx context.Context, id uint64) error {
	_, err := wait(ctx, n.ChangeMembershipAsync(PromoteLearner, id, ""))
	return err
}

// RemoveMember removes a member and waits until the change is applied.
func (n *Node) RemoveMember(ctx context.Context, id uint64) error {
	_, err := wait(ctx, n.ChangeMembershipAsync(RemoveMember, id, ""))
	return err
}

// proposeConf proposes a queued membership change on the leader.
// REQUIRES: procMu held.
func (n *Node) proposeConf(f *Future) {
	req := f.conf
	if bs := n.rn.BasicStatus(); bs.RaftState != raft.StateLeader {
		n.complete(f, nil, &NotLeaderError{Leader: bs.Lead})
		return
	}
	n.mu.Lock()
	busy := f.completed() || (n.confInFlight != nil && !n.confInFlight.completed())
	n.mu.Unlock()
	if busy || n.applied < n.confBarrier || len(n.confState.VotersOutgoing) > 0 {
		n.complete(f, nil, ErrConfChangePending)
		return
	}
	cs := n.confState
	voter, learner := slices.Contains(cs.Voters, req.id), slices.Contains(cs.Learners, req.id)
	var typ raftpb.ConfChangeType
	switch req.typ {
	case AddVoter:
		if voter {
			n.complete(f, nil, nil)
			return
		}
		typ = raftpb.ConfChangeAddNode
	case AddLearner:
		if learner {
			n.complete(f, nil, nil)
			return
		}
		if voter {
			n.complete(f, nil, fmt.Errorf("%w: %d is a voter; remove it to demote it", ErrBadConfChange, req.id))
			return
		}
		typ = raftpb.ConfChangeAddLearnerNode
	case PromoteLearner:
		if !learner {
			n.complete(f, nil, fmt.Errorf("%w: %d is not a learner", ErrBadConfChange, req.id))
			return
		}
		typ = raftpb.ConfChangeAddNode
	case RemoveMember:
		if !voter && !learner {
			n.complete(f, nil, fmt.Errorf("%w: %d is not a member", ErrBadConfChange, req.id))
			return
		}
		typ = raftpb.ConfChangeRemoveNode
	}
	cc := raftpb.ConfChangeV2{
		Changes: []raftpb.ConfChangeSingle{{Type: typ, NodeID: req.id}},
		Context: encodeConfContext(confContext{id: proposalID{n.id, n.boot, f.seq}, addr: req.addr}),
	}
	if err := validateConfChange(cs, cc); err != nil {
		n.complete(f, nil, fmt.Errorf("%w: %w", ErrBadConfChange, err))
		return
	}
	n.mu.Lock()
	n.pending[f.seq] = f
	n.confInFlight = f
	n.mu.Unlock()
	if err := n.rn.ProposeConfChange(cc); err != nil {
		n.complete(f, nil, fmt.Errorf("%w: %w", ErrProposalDropped, err))
	}
}

// validateConfChange checks a change against the configuration cs the way
// raft does when applying it (raft panics on an invalid one).
func validateConfChange(cs raftpb.ConfState, cc raftpb.ConfChangeV2) error {
	_, err := confStateAfter(cs, cc)
	return err
}

// confStateAfter returns the configuration that cc makes of cs, computed
// from the two alone. (raft's own ApplyConfChange result is not used for
// the state machine: right after Bootstrap raft already holds every
// initial member, so it would report a different configuration at the
// first entries on a freshly bootstrapped member than on one replaying
// them after a restart.)
func confStateAfter(cs raftpb.ConfState, cc raftpb.ConfChangeV2) (raftpb.ConfState, error) {
	chg := confchange.Changer{Tracker: tracker.MakeProgressTracker(1, 0), LastIndex: 1}
	cfg, trk, err := confchange.Restore(chg, cs)
	if err != nil {
		return raftpb.ConfState{}, fmt.Errorf("restore configuration: %w", err)
	}
	chg.Tracker.Config, chg.Tracker.Progress = cfg, trk
	if cc.LeaveJoint() {
		cfg, trk, err = chg.LeaveJoint()
	} else if autoLeave, ok := cc.EnterJoint(); ok {
		cfg, trk, err = chg.EnterJoint(autoLeave, cc.Changes...)
	} else {
		cfg, trk, err = chg.Simple(cc.Changes...)
	}
	if err != nil {
		return raftpb.ConfState{}, err
	}
	pt := tracker.MakeProgressTracker(1, 0)
	pt.Config, pt.Progress = cfg, trk
	return pt.ConfState(), nil
}
