package raftnode

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tributarydb/tributary/internal/telemetry"
)

// Proposal outcomes, the "outcome" attribute of tributary.raft.proposal.duration.
const (
	outcomeApplied    = iota // applied; the state machine accepted it
	outcomeRejected          // applied; the state machine refused it (its error)
	outcomeDropped           // raft refused it (no leader, transfer in progress)
	outcomeOverloaded        // too many proposal bytes were waiting
	outcomeTooLarge          // did not fit in one entry
	outcomeCanceled          // the proposer gave up
	outcomeStopped           // the member stopped first
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"applied", "rejected", "dropped", "overloaded", "too_large", "canceled", "stopped"}

func proposalOutcome(err error) int {
	switch {
	case err == nil:
		return outcomeApplied
	case errors.Is(err, ErrCanceled):
		return outcomeCanceled
	case errors.Is(err, ErrStopped):
		return outcomeStopped
	case errors.Is(err, ErrProposalDropped):
		return outcomeDropped
	case errors.Is(err, ErrOverloaded):
		return outcomeOverloaded
	case errors.Is(err, ErrTooLarge):
		return outcomeTooLarge
	}
	return outcomeRejected
}

// metrics are a member's instruments. Values raft keeps (term, leader,
// indexes) are read from the published Status when a reader collects;
// proposals are timed as they complete; snapshots are counted here.
type metrics struct {
	proposal metric.Float64Histogram
	outcome  [numOutcomes]metric.RecordOption // prebuilt attribute sets

	snapshotsTaken, snapshotsRestored atomic.Int64

	reg metric.Registration
}

// newMetrics creates the instruments of n on mp.
func newMetrics(mp metric.MeterProvider, n *Node) (*metrics, error) {
	m := &metrics{}
	for i, name := range outcomeNames {
		m.outcome[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", name)))
	}
	in := telemetry.NewInstruments(mp.Meter("github.com/tributarydb/tributary/coordinator/raftnode"))
	m.proposal = in.Histogram("tributary.raft.proposal.duration", "s",
		"Time from proposing a catalog command to its application on this member (or its failure), by outcome.")
	gauge, counter := in.Int64Gauge, in.Int64Counter
	term := gauge("tributary.raft.term", "{term}", "Raft term this member is in.")
	leader := gauge("tributary.raft.leader", "{id}", "Raft id of the leader this member knows of (0: none).")
	isLeader := gauge("tributary.raft.is_leader", "", "1 when this member is the raft leader, else 0.")
	commit := gauge("tributary.raft.commit_index", "{entry}", "Highest raft log index this member knows to be committed.")
	applied := gauge("tributary.raft.applied_index", "{entry}", "Highest raft log index applied to this member's catalog.")
	snapIndex := gauge("tributary.raft.snapshot_index", "{entry}", "Raft log index of this member's latest snapshot.")
	logEntries := gauge("tributary.raft.log.entries", "{entry}", "Entries held in this member's raft log (after compaction).")
	voters := gauge("tributary.raft.voters", "{member}", "Voting members in the configuration this member applied.")
	learners := gauge("tributary.raft.learners", "{member}", "Learners in the configuration this member applied.")
	taken := counter("tributary.raft.snapshots.taken", "{snapshot}", "Catalog snapshots this member wrote (the log is compacted behind them).")
	restored := counter("tributary.raft.snapshots.restored", "{snapshot}", "Catalog snapshots this member restored (from its disk at start or sent by the leader).")
	dropped := counter("tributary.raft.messages.dropped", "{message}", "Raft messages received and dropped because the inbox was full.")
	reproposed := counter("tributary.raft.proposals.reproposed", "{proposal}", "Proposals proposed again after a leader change.")
	if err := in.Err(); err != nil {
		return nil, fmt.Errorf("raft metrics: %w", err)
	}
	var err error
	m.reg, err = in.Meter().RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := n.Status()
		o.ObserveInt64(term, int64(st.Term))
		o.ObserveInt64(leader, int64(st.Lead))
		o.ObserveInt64(isLeader, b2i(st.IsLeader))
		o.ObserveInt64(commit, int64(st.Commit))
		o.ObserveInt64(applied, int64(st.Applied))
		o.ObserveInt64(snapIndex, int64(st.Snapshot))
		entries := int64(0)
		if st.LastLog >= st.FirstLog && st.LastLog > 0 {
			entries = int64(st.LastLog - st.FirstLog + 1)
		}
		o.ObserveInt64(logEntries, entries)
		o.ObserveInt64(voters, int64(len(st.Voters)))
		o.ObserveInt64(learners, int64(len(st.Learners)))
		o.ObserveInt64(taken, m.snapshotsTaken.Load())
		o.ObserveInt64(restored, m.snapshotsRestored.Load())
		o.ObserveInt64(dropped, int64(st.Dropped))
		o.ObserveInt64(reproposed, int64(st.Reproposed))
		return nil
	}, in.Observables()...)
	if err != nil {
		return nil, fmt.Errorf("raft metrics: %w", err)
	}
	return m, nil
}

// proposed records a completed proposal.
func (m *metrics) proposed(start time.Time, err error) {
	if m == nil || start.IsZero() {
		return
	}
	m.proposal.Record(context.Background(), time.Since(start).Seconds(), m.outcome[proposalOutcome(err)])
}

// close stops observing the member.
func (m *metrics) close() {
	if m != nil && m.reg != nil {
		_ = m.reg.Unregister()
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
