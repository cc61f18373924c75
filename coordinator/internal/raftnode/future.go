package raftnode

import (
	"errors"
	"fmt"
	"time"
)

// Errors of proposals, reads and membership changes.
var (
	// ErrStopped: the node stopped (or failed) before the request
	// completed. The request may or may not have taken effect.
	ErrStopped = errors.New("raftnode: stopped")
	// ErrCanceled: the caller gave up (Future.Cancel, a done context).
	// The request may or may not take effect.
	ErrCanceled = errors.New("raftnode: canceled")
	// ErrProposalDropped: raft refused the proposal (no known leader, a
	// leadership transfer in progress, too many uncommitted entries). It
	// was not applied and can be retried.
	ErrProposalDropped = errors.New("raftnode: proposal dropped")
	// ErrOverloaded: too many proposal bytes wait to be proposed; retry
	// later. Nothing was proposed.
	ErrOverloaded = errors.New("raftnode: too many pending proposals")
	// ErrTooLarge: the command does not fit in one raft entry.
	ErrTooLarge = errors.New("raftnode: command too large")
	// ErrNotLeader: membership changes must be asked of the leader.
	ErrNotLeader = errors.New("raftnode: not the leader")
	// ErrConfChangePending: another membership change is not applied yet.
	ErrConfChangePending = errors.New("raftnode: a membership change is in progress")
	// ErrBadConfChange: the membership change is not possible (unknown
	// member, removing the last voter, ...).
	ErrBadConfChange = errors.New("raftnode: invalid membership change")
)

// NotLeaderError is ErrNotLeader with the leader this node knows of (0:
// none).
type NotLeaderError struct{ Leader uint64 }

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("raftnode: not the leader (leader is %d)", e.Leader)
}

// Unwrap returns ErrNotLeader.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

type futureKind uint8

const (
	kindProposal futureKind = iota
	kindRead
	kindConf
)

// Future is a request in flight: a proposal (completes with the state
// machine's result once the command is applied here), a linearizable read
// (completes once this member has applied everything committed when the
// read was asked) or a membership change (completes once applied).
type Future struct {
	n    *Node
	kind futureKind
	seq  uint64
	data []byte       // proposal: the command (kept until completion, to propose again)
	conf *confRequest // membership change
	// lead and term are the leader this member knew, and its term, when
	// it last proposed the command (proposals only).
	lead, term uint64
	// start is when the proposal was asked for (proposals only).
	start time.Time

	done   chan struct{}
	result any
	err    error
}

func newFuture(n *Node, kind futureKind) *Future {
	return &Future{n: n, kind: kind, done: make(chan struct{})}
}

// Done is closed when the future completes.
func (f *Future) Done() <-chan struct{} { return f.done }

// Result waits for the future and returns the result and error. For a
// proposal, err is the state machine's error for the command (the command
// was applied and rejected) or one of this package's errors (it was not
// applied, or its outcome is unknown).
func (f *Future) Result() (any, error) {
	<-f.done
	return f.result, f.err
}

// Cancel gives up on the future: it completes with ErrCanceled unless it
// already completed. A proposal already handed to raft may still be
// applied.
func (f *Future) Cancel() {
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.completeLocked(f, nil, ErrCanceled)
}

// completed reports whether f completed. REQUIRES: n.mu held.
func (f *Future) completed() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// completeLocked completes f once and forgets it. REQUIRES: n.mu held.
func (n *Node) completeLocked(f *Future, result any, err error) {
	if f.completed() {
		return
	}
	f.result, f.err = result, err
	close(f.done)
	switch f.kind {
	case kindProposal:
		delete(n.pending, f.seq)
		f.data = nil
		n.metrics.proposed(f.start, err)
	case kindConf:
		delete(n.pending, f.seq)
		if n.confInFlight == f {
			n.confInFlight = nil
		}
	case kindRead:
		// Reads are dropped from their batch lazily (completed ones are
		// skipped).
	}
}

func (n *Node) complete(f *Future, result any, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.completeLocked(f, result, err)
}
