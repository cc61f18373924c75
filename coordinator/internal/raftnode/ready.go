package raftnode

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Process does the queued work (ticks, received messages, proposals,
// reads, membership changes, transfers) and then handles raft's Ready
// until raft has nothing more to do. For each Ready, in this order:
//
//  1. persist the snapshot, entries and hard state, fsynced (raftlog.Save);
//  2. restore the state machine from the snapshot, if there is one;
//  3. send the messages (only now: a vote or an append acknowledged
//     before it is durable could be forgotten by a crash);
//  4. apply the committed entries in order, completing local proposals;
//  5. serve reads whose read index is applied;
//  6. Advance, then snapshot and compact the log every SnapshotEntries.
//
// Process is the only place raft runs; calls are serialized. It returns
// the error that failed the node (a storage error, a state machine that
// cannot restore a snapshot, a raft invariant violation); a failed node
// does nothing more and must be closed.
func (n *Node) Process() (err error) {
	n.procMu.Lock()
	defer n.procMu.Unlock()
	n.mu.Lock()
	if n.failed != nil || n.closed {
		err := n.usable()
		n.mu.Unlock()
		return err
	}
	in := n.inbox
	n.inbox = inbox{}
	n.pendingBytes = 0
	n.mu.Unlock()
	if in.empty() && !n.rn.HasReady() {
		return nil
	}

	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("raftnode %d: raft: %v", n.id, r)
		}
		if err != nil {
			n.fail(err)
		}
		n.publishStatus()
	}()

	for range in.ticks {
		n.rn.Tick()
	}
	n.ticks += uint64(in.ticks)
	if in.ticks > 0 && len(n.readBatches) > 0 {
		// A ReadIndex request lost on the way to the leader is asked
		// again once per election timeout.
		if n.readAskTicks += in.ticks; n.readAskTicks >= n.opts.ElectionTicks {
			n.reaskReads()
		}
	}
	for _, m := range in.msgs {
		if m.To != n.id {
			continue
		}
		if err := n.rn.Step(m); err != nil {
			n.logger.Debug("raft message ignored", "type", m.Type, "from", m.From, "err", err)
		}
	}
	for _, id := range in.unreachable {
		n.rn.ReportUnreachable(id)
	}
	for _, r := range in.snapReports {
		status := raft.SnapshotFinish
		if !r.ok {
			status = raft.SnapshotFailure
		}
		n.rn.ReportSnapshot(r.id, status)
	}
	n.propose(in.props, false)
	n.askReads(in.reads)
	for _, f := range in.confs {
		n.proposeConf(f)
	}
	for _, id := range in.transfers {
		n.rn.TransferLeader(id)
	}
	for n.rn.HasReady() {
		if err := n.handleReady(); err != nil {
			return err
		}
	}
	if in.campaign {
		// After the Readies: raft does not campaign while committed
		// configuration changes (a bootstrap's) wait to be applied.
		if err := n.rn.Campaign(); err != nil {
			n.logger.Debug("campaign refused", "err", err)
		}
		for n.rn.HasReady() {
			if err := n.handleReady(); err != nil {
				return err
			}
		}
	}
	return n.maybeSnapshot()
}

// fail stops the node for good with err.
func (n *Node) fail(err error) {
	n.logger.Error("raft member failed", "err", err)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failed == nil {
		n.failed = err
	}
	n.failAllLocked(fmt.Errorf("%w: %w", ErrStopped, err))
}

func (n *Node) handleReady() error {
	rd := n.rn.Ready()
	becameLeader := false
	if rd.SoftState != nil {
		becameLeader = rd.SoftState.RaftState == raft.StateLeader && n.state != raft.StateLeader
		if rd.SoftState.Lead != n.lead {
			n.leaderChanged = true
		}
		n.lead, n.state = rd.SoftState.Lead, rd.SoftState.RaftState
	}
	if !raft.IsEmptyHardState(rd.HardState) && rd.HardState.Term != n.term {
		// A new term, possibly with the same leader (a leader that
		// restarted fast and won again has lost what it had not
		// replicated).
		n.term = rd.HardState.Term
		n.leaderChanged = true
	}
	if err := n.log.Save(rd.HardState, rd.Entries, rd.Snapshot, rd.MustSync); err != nil {
		return fmt.Errorf("persist: %w", err)
	}
	if becameLeader {
		// raft refuses membership changes until the new leader applied
		// its whole log (pendingConfIndex); mirror that to fail fast.
		n.confBarrier, _ = n.log.LastIndex()
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.installSnapshot(rd.Snapshot); err != nil {
			return err
		}
	}
	if len(rd.Messages) > 0 {
		n.tr.Send(rd.Messages)
	}
	for _, e := range rd.CommittedEntries {
		n.applyEntry(e)
	}
	for _, rs := range rd.ReadStates {
		n.onReadState(rs)
	}
	n.completeReads()
	n.rn.Advance(rd)
	if n.leaderChanged {
		n.leaderChanged = false
		n.mu.Lock()
		// The change may never commit under another leader; its
		// future stays pending (it completes if the change applies),
		// but it no longer blocks the next change.
		n.confInFlight = nil
		n.mu.Unlock()
		n.reaskReads()
		n.reproposeLost()
	}
	return n.maybeSnapshot()
}

// reproposeLost proposes again, once a leader is known, the commands that
// were proposed under another leader or term, are not applied yet and that
// the StateMachine says may be applied twice (Reproposer): raft drops a
// proposal on its way to a leader that dies, or from a leader's log that
// a new leader overwrites, without telling anybody, and the proposer would
// wait for its whole timeout. If the first proposal did commit, the
// command is applied twice; the future completes with the first.
func (n *Node) reproposeLost() {
	if n.lead == 0 {
		return // proposing now would be dropped; wait for a leader
	}
	rp, _ := n.fsm.(Reproposer)
	if rp == nil {
		return
	}
	n.mu.Lock()
	var again []*Future
	for _, f := range n.pending {
		if f.kind == kindProposal && !f.completed() && f.data != nil && f.lead != 0 && (f.lead != n.lead || f.term != n.term) &&
			rp.Reproposable(f.data) {
			again = append(again, f)
		}
	}
	n.mu.Unlock()
	if len(again) == 0 {
		return
	}
	// In the order they were first proposed.
	slices.SortFunc(again, func(a, b *Future) int { return cmp.Compare(a.seq, b.seq) })
	n.reproposed += uint64(len(again))
	n.propose(again, true)
}

func (n *Node) installSnapshot(s raftpb.Snapshot) error {
	if err := n.fsm.Restore(s.Data); err != nil {
		return fmt.Errorf("restore snapshot %d/%d from the leader: %w", s.Metadata.Index, s.Metadata.Term, err)
	}
	n.applied, n.snapIndex = s.Metadata.Index, s.Metadata.Index
	n.nextSnapAt = n.applied + n.opts.SnapshotEntries
	n.setConfState(s.Metadata.ConfState)
	n.metrics.snapshotsRestored.Add(1)
	n.completeReads()
	return nil
}

// setConfState records the configuration in force and whether it removed
// this member (a joining member is not removed: it was never a member).
func (n *Node) setConfState(cs raftpb.ConfState) {
	n.confState = cs
	if isMember(cs, n.id) {
		n.everMember = true
	}
	n.removed = n.everMember && !isMember(cs, n.id)
}

func isMember(cs raftpb.ConfState, id uint64) bool {
	return slices.Contains(cs.Voters, id) || slices.Contains(cs.Learners, id) ||
		slices.Contains(cs.VotersOutgoing, id) || slices.Contains(cs.LearnersNext, id)
}

func (n *Node) applyEntry(e raftpb.Entry) {
	if e.Index <= n.applied {
		return
	}
	switch e.Type {
	case raftpb.EntryNormal:
		n.applyCommands(e)
	case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
		n.applyConfChange(e)
	}
	n.applied = e.Index
}

type completion struct {
	seq uint64
	res any
	err error
}

func (n *Node) applyCommands(e raftpb.Entry) {
	if len(e.Data) == 0 {
		return // a new leader's empty entry
	}
	var done []completion
	err := decodeEnvelope(e.Data, func(id proposalID, cmd []byte) {
		res, err := n.fsm.Apply(e.Index, cmd)
		if id.node == n.id && id.boot == n.boot {
			done = append(done, completion{id.seq, res, err})
		}
	})
	if err != nil {
		// Every member skips the same damaged entry.
		n.logger.Error("skipping a damaged raft entry", "index", e.Index, "err", err)
	}
	n.completeAll(done, kindProposal)
}

func (n *Node) completeAll(done []completion, kind futureKind) {
	if len(done) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range done {
		if f := n.pending[c.seq]; f != nil && f.kind == kind {
			n.completeLocked(f, c.res, c.err)
		}
	}
}

func (n *Node) applyConfChange(e raftpb.Entry) {
	var cc raftpb.ConfChangeV2
	if e.Type == raftpb.EntryConfChange {
		var v1 raftpb.ConfChange
		if err := v1.Unmarshal(e.Data); err != nil {
			n.logger.Error("skipping a damaged conf change entry", "index", e.Index, "err", err)
			return
		}
		cc = v1.AsV2()
	} else if err := cc.Unmarshal(e.Data); err != nil {
		n.logger.Error("skipping a damaged conf change entry", "index", e.Index, "err", err)
		return
	}
	ctx, err := decodeConfContext(cc.Context)
	if err != nil {
		n.logger.Warn("conf change with an unreadable context", "index", e.Index, "err", err)
	}
	var mine []completion
	if ctx.id.node == n.id && ctx.id.boot == n.boot && ctx.id.seq != 0 {
		mine = []completion{{seq: ctx.id.seq}}
	}
	next, err := confStateAfter(n.confState, cc)
	if err != nil {
		// Not applying a committed change is allowed, and every member
		// rejects it the same way (it depends only on the log).
		n.logger.Error("rejecting an invalid conf change", "index", e.Index, "err", err)
		if len(mine) > 0 {
			mine[0].err = fmt.Errorf("%w: %w", ErrBadConfChange, err)
		}
		n.completeAll(mine, kindConf)
		return
	}
	n.rn.ApplyConfChange(cc)
	for _, c := range cc.Changes {
		if (c.Type == raftpb.ConfChangeAddNode || c.Type == raftpb.ConfChangeAddLearnerNode) && !isMember(n.confState, c.NodeID) {
			// A new member starts from a snapshot unless the log still
			// holds everything from index 1; raft refuses a snapshot
			// whose configuration lacks the receiver, so take one now.
			n.nextSnapAt = e.Index
		}
	}
	n.setConfState(next)
	m := catalog.Membership{Voters: union(n.confState.Voters, n.confState.VotersOutgoing)}
	for _, id := range union(n.confState.Learners, n.confState.LearnersNext) {
		if !slices.Contains(m.Voters, id) {
			m.Learners = append(m.Learners, id)
		}
	}
	if ctx.addr != "" {
		for _, c := range cc.Changes {
			if c.Type == raftpb.ConfChangeAddNode || c.Type == raftpb.ConfChangeAddLearnerNode {
				m.Addrs = append(m.Addrs, catalog.MemberAddr{RaftID: c.NodeID, Addr: ctx.addr})
			}
		}
	}
	if err := n.fsm.ApplyMembership(e.Index, m); err != nil {
		n.logger.Error("state machine refused a membership change", "index", e.Index, "err", err)
	}
	n.completeAll(mine, kindConf)
}

func union(a, b []uint64) []uint64 {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// propose packs queued proposals into entries of at most MaxEntryBytes.
// again marks proposals proposed a second time: if raft drops those, they
// stay pending (their first proposal may still commit, or the next leader
// change proposes them again) instead of failing as not applied.
func (n *Node) propose(props []*Future, again bool) {
	n.mu.Lock()
	live := props[:0]
	for _, f := range props {
		if !f.completed() {
			live = append(live, f)
		}
	}
	n.mu.Unlock()
	var batch []*Future
	size := 0
	flush := func() {
		b := appendEnvelopeHeader(make([]byte, 0, size+16), len(batch))
		for _, f := range batch {
			b = appendEnvelopeCommand(b, proposalID{n.id, n.boot, f.seq}, f.data)
			f.lead, f.term = n.lead, n.term
		}
		if err := n.rn.Propose(b); err != nil && again {
			n.logger.Debug("proposing again after a leader change was dropped; will retry at the next change", "proposals", len(batch), "err", err)
		} else if err != nil {
			n.mu.Lock()
			for _, f := range batch {
				n.completeLocked(f, nil, fmt.Errorf("%w: %w", ErrProposalDropped, err))
			}
			n.mu.Unlock()
		}
		batch, size = batch[:0], 0
	}
	for _, f := range live {
		sz := len(f.data) + envelopeOverhead
		if len(batch) > 0 && size+sz+16 > n.opts.MaxEntryBytes {
			flush()
		}
		batch = append(batch, f)
		size += sz
	}
	if len(batch) > 0 {
		flush()
	}
}

// askReads starts one ReadIndex round for the queued reads.
func (n *Node) askReads(reads []*Future) {
	if len(reads) == 0 {
		return
	}
	n.mu.Lock()
	n.nextSeq++
	b := &readBatch{id: proposalID{n.id, n.boot, n.nextSeq}, futures: slices.Clone(reads)}
	n.mu.Unlock()
	n.readBatches = append(n.readBatches, b)
	n.rn.ReadIndex(encodeReadContext(b.id))
}

// reaskReads asks again for every read without a read index: the request
// may have been dropped (no leader) or lost. Batches whose futures all
// completed (canceled) are forgotten.
func (n *Node) reaskReads() {
	n.readAskTicks = 0
	n.mu.Lock()
	n.readBatches = slices.DeleteFunc(n.readBatches, func(b *readBatch) bool {
		for _, f := range b.futures {
			if !f.completed() {
				return false
			}
		}
		return true
	})
	n.mu.Unlock()
	for _, b := range n.readBatches {
		n.rn.ReadIndex(encodeReadContext(b.id))
	}
}

func (n *Node) onReadState(rs raft.ReadState) {
	id, ok := decodeReadContext(rs.RequestCtx)
	if !ok {
		return
	}
	i := slices.IndexFunc(n.readBatches, func(b *readBatch) bool { return b.id == id })
	if i < 0 {
		return // answered already (a request asked twice)
	}
	b := n.readBatches[i]
	n.readBatches = slices.Delete(n.readBatches, i, i+1)
	b.index = rs.Index
	n.readWaits = append(n.readWaits, b)
}

// completeReads completes the reads whose read index is applied.
func (n *Node) completeReads() {
	if len(n.readWaits) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.readWaits = slices.DeleteFunc(n.readWaits, func(b *readBatch) bool {
		if b.index > n.applied {
			return false
		}
		for _, f := range b.futures {
			n.completeLocked(f, nil, nil)
		}
		return true
	})
}

// maybeSnapshot snapshots the state machine every SnapshotEntries applied
// entries and compacts the log to KeepEntries before the snapshot.
func (n *Node) maybeSnapshot() error {
	if n.applied < n.nextSnapAt || n.ticks < n.snapRetryTick {
		return nil
	}
	if n.applied <= n.snapIndex {
		// A snapshot from the leader already covers what was due.
		n.nextSnapAt = n.snapIndex + n.opts.SnapshotEntries
		return nil
	}
	data := n.fsm.Snapshot()
	if err := n.log.CreateSnapshot(n.applied, n.confState, data); err != nil {
		if lerr := n.log.Err(); lerr != nil {
			return fmt.Errorf("snapshot: %w", lerr)
		}
		// A snapshot file that could not be written (disk full) does not
		// endanger the log: try again an election timeout later.
		n.logger.Warn("cannot write a snapshot; retrying later", "index", n.applied, "err", err)
		n.snapRetryTick = n.ticks + uint64(n.opts.ElectionTicks)
		return nil
	}
	n.snapIndex = n.applied
	n.nextSnapAt = n.applied + n.opts.SnapshotEntries
	n.metrics.snapshotsTaken.Add(1)
	if n.applied <= n.opts.KeepEntries {
		return nil
	}
	to := n.applied - n.opts.KeepEntries
	if first, _ := n.log.FirstIndex(); to < first {
		return nil
	}
	if err := n.log.Compact(to); err != nil && !errors.Is(err, raft.ErrCompacted) {
		return fmt.Errorf("compact log: %w", err)
	}
	return nil
}

// publishStatus refreshes the Status snapshot and wakes waiters if it
// changed.
func (n *Node) publishStatus() {
	bs := n.rn.BasicStatus()
	s := Status{
		ID: n.id, Lead: bs.Lead, IsLeader: bs.RaftState == raft.StateLeader, State: bs.RaftState,
		Term: bs.Term, Commit: bs.Commit, Applied: n.applied,
		Voters:   union(n.confState.Voters, n.confState.VotersOutgoing),
		Learners: union(n.confState.Learners, n.confState.LearnersNext),
		Joint:    len(n.confState.VotersOutgoing) > 0,
		Removed:  n.removed, Boot: n.boot, Snapshot: n.snapIndex, Reproposed: n.reproposed,
	}
	s.FirstLog, _ = n.log.FirstIndex()
	s.LastLog, _ = n.log.LastIndex()
	if s.IsLeader {
		s.Match = map[uint64]uint64{}
		n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) { s.Match[id] = pr.Match })
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	old := n.status
	s.Dropped, s.Transfers, s.Failed = old.Dropped, old.Transfers, n.failed
	n.status = s
	if old.Lead != s.Lead || old.State != s.State || old.Term != s.Term || old.Commit != s.Commit ||
		old.Applied != s.Applied || old.Removed != s.Removed || old.Failed != s.Failed {
		close(n.changed)
		n.changed = make(chan struct{})
	}
}
