package raftnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tributarydb/tributary/coordinator/internal/raftlog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Node is one raft member: the raft state machine, its durable log and the
// state machine it applies to. See the package documentation for how it
// is driven.
type Node struct {
	opts   Options
	id     uint64
	log    *raftlog.Log
	fsm    StateMachine
	tr     Transport
	logger *slog.Logger
	boot   uint64
	signal chan struct{} // buffered(1): work was queued

	metrics *metrics

	mu sync.Mutex
	// REQUIRES: mu held for the fields below.
	inbox        inbox
	pendingBytes int
	nextSeq      uint64
	pending      map[uint64]*Future // proposals and membership changes by seq
	confInFlight *Future            // the membership change raft has not applied yet
	status       Status
	changed      chan struct{} // closed and replaced when status changes
	failed       error
	closed       bool
	running      bool
	runDone      chan struct{}
	stopRun      chan struct{}

	procMu sync.Mutex
	// REQUIRES: procMu held for the fields below (the processing goroutine).
	rn         *raft.RawNode
	applied    uint64
	snapIndex  uint64
	nextSnapAt uint64
	ticks      uint64 // ticks processed since Open
	// snapRetryTick: after a failed snapshot, none is tried before this tick.
	snapRetryTick uint64
	confState     raftpb.ConfState
	confBarrier   uint64 // raft refuses membership changes until applied >= this
	lead          uint64
	state         raft.StateType
	leaderChanged bool
	reproposed    uint64       // proposals proposed again after a leader change
	term          uint64       // the term of the last hard state handled
	readBatches   []*readBatch // asked of raft, no read index yet
	readWaits     []*readBatch // read index known, waiting for applied >= index
	readAskTicks  int
	everMember    bool // this member was in a configuration it applied
	removed       bool
}

type inbox struct {
	ticks       int
	msgs        []raftpb.Message
	props       []*Future
	reads       []*Future
	confs       []*Future
	transfers   []uint64
	unreachable []uint64
	snapReports []snapReport
	campaign    bool
}

func (in *inbox) empty() bool {
	return in.ticks == 0 && len(in.msgs) == 0 && len(in.props) == 0 && len(in.reads) == 0 && len(in.confs) == 0 &&
		len(in.transfers) == 0 && len(in.unreachable) == 0 && len(in.snapReports) == 0 && !in.campaign
}

type snapReport struct {
	id uint64
	ok bool
}

type readBatch struct {
	id      proposalID
	index   uint64
	futures []*Future
}

// Status is a member's view of the cluster.
type Status struct {
	ID        uint64
	Lead      uint64 // 0: no known leader
	IsLeader  bool
	State     raft.StateType
	Term      uint64
	Commit    uint64
	Applied   uint64
	Voters    []uint64 // sorted; incoming and outgoing in a joint configuration
	Learners  []uint64 // sorted
	Joint     bool
	Removed   bool // this member was removed from the configuration
	Boot      uint64
	Snapshot  uint64 // index of the latest snapshot
	FirstLog  uint64 // first index still in the log
	LastLog   uint64 // last index in the log
	Dropped   uint64 // received messages dropped because the inbox was full
	Failed    error  // the error that stopped the node, if any
	Match     map[uint64]uint64
	Transfers uint64 // leadership transfers asked of this member
	// Reproposed counts proposals proposed again after a leader change.
	Reproposed uint64
}

// Open opens (or creates) a member's log in opts.Dir, restores the state
// machine from the latest snapshot, and prepares raft. Nothing happens
// until the node is driven (Run, or Tick/Step/Process).
func Open(opts Options) (*Node, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	l, err := raftlog.Open(raftlog.Options{Dir: opts.Dir, FS: opts.FS, SegmentBytes: opts.SegmentBytes, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("raftnode %d: %w", opts.ID, err)
	}
	n := &Node{
		opts: opts, id: opts.ID, log: l, fsm: opts.StateMachine, tr: opts.Transport,
		logger: opts.Logger.With("raft_id", opts.ID), boot: l.Boot(),
		signal: make(chan struct{}, 1), pending: map[uint64]*Future{},
		changed: make(chan struct{}), runDone: make(chan struct{}), stopRun: make(chan struct{}),
	}
	if n.metrics, err = newMetrics(opts.MeterProvider, n); err != nil {
		l.Close()
		return nil, fmt.Errorf("raftnode %d: %w", opts.ID, err)
	}
	if err := n.start(); err != nil {
		n.metrics.close()
		l.Close()
		return nil, fmt.Errorf("raftnode %d: %w", opts.ID, err)
	}
	n.publishStatus()
	return n, nil
}

func (n *Node) start() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("start raft: %v", r)
		}
	}()
	snap, err := n.log.Snapshot()
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	if !raft.IsEmptySnap(snap) {
		if err := n.fsm.Restore(snap.Data); err != nil {
			return fmt.Errorf("restore snapshot %d: %w", snap.Metadata.Index, err)
		}
		n.applied, n.snapIndex = snap.Metadata.Index, snap.Metadata.Index
		n.setConfState(snap.Metadata.ConfState)
		n.metrics.snapshotsRestored.Add(1)
	}
	n.nextSnapAt = n.snapIndex + n.opts.SnapshotEntries
	o := n.opts
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        o.ID,
		ElectionTick:              o.ElectionTicks,
		HeartbeatTick:             o.HeartbeatTicks,
		Storage:                   n.log,
		Applied:                   n.applied,
		MaxSizePerMsg:             o.MaxSizePerMsg,
		MaxCommittedSizePerReady:  4 * o.MaxSizePerMsg,
		MaxUncommittedEntriesSize: o.MaxUncommittedBytes,
		MaxInflightMsgs:           o.MaxInflightMsgs,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{n.logger},
	})
	if err != nil {
		return err
	}
	n.rn = rn
	n.term = rn.BasicStatus().Term
	last, _ := n.log.LastIndex()
	if last == 0 && n.snapIndex == 0 && len(o.Peers) > 0 {
		peers := make([]raft.Peer, len(o.Peers))
		for i, p := range o.Peers {
			peers[i] = raft.Peer{ID: p.ID, Context: encodeConfContext(confContext{addr: p.Addr})}
		}
		if err := rn.Bootstrap(peers); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
	}
	return nil
}

// ID returns the member's raft id.
func (n *Node) ID() uint64 { return n.id }

func (n *Node) notify() {
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

// Tick advances the member's logical clock by one tick (queued; at most
// ElectionTicks ticks are kept between two Process calls, so a stalled
// member does not campaign the moment it resumes).
func (n *Node) Tick() {
	n.mu.Lock()
	if n.inbox.ticks < n.opts.ElectionTicks {
		n.inbox.ticks++
	}
	n.mu.Unlock()
	n.notify()
}

// Step queues a message received from another member. It returns
// ErrOverloaded, dropping the message, when too many wait.
func (n *Node) Step(m raftpb.Message) error {
	n.mu.Lock()
	if len(n.inbox.msgs) >= n.opts.MaxInboxMessages {
		n.status.Dropped++
		n.mu.Unlock()
		return ErrOverloaded
	}
	n.inbox.msgs = append(n.inbox.msgs, m)
	n.mu.Unlock()
	n.notify()
	return nil
}

// ReportUnreachable tells raft that the last message to id was not
// delivered (the transport calls it).
func (n *Node) ReportUnreachable(id uint64) {
	n.mu.Lock()
	n.inbox.unreachable = append(n.inbox.unreachable, id)
	n.mu.Unlock()
	n.notify()
}

// ReportSnapshot tells raft whether the snapshot sent to id arrived (the
// transport must call it for every MsgSnap it was given).
func (n *Node) ReportSnapshot(id uint64, ok bool) {
	n.mu.Lock()
	n.inbox.snapReports = append(n.inbox.snapReports, snapReport{id, ok})
	n.mu.Unlock()
	n.notify()
}

// Campaign asks this member to start an election now.
func (n *Node) Campaign() {
	n.mu.Lock()
	n.inbox.campaign = true
	n.mu.Unlock()
	n.notify()
}

// usable reports why no new request is accepted. REQUIRES: n.mu held.
func (n *Node) usable() error {
	if n.failed != nil {
		return fmt.Errorf("%w: %w", ErrStopped, n.failed)
	}
	if n.closed {
		return ErrStopped
	}
	return nil
}

// ProposeAsync queues a command. Commands queued before the next Process
// are packed into as few raft entries as fit MaxEntryBytes. The future
// completes with the state machine's result once the command is applied
// on this member.
func (n *Node) ProposeAsync(cmd []byte) *Future {
	f := newFuture(n, kindProposal)
	f.start = time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.usable() != nil:
		n.completeLocked(f, nil, n.usable())
		return f
	case len(cmd)+envelopeOverhead+16 > n.opts.MaxEntryBytes:
		n.completeLocked(f, nil, fmt.Errorf("%w: %d bytes, limit is %d", ErrTooLarge, len(cmd), n.opts.MaxEntryBytes-envelopeOverhead-16))
		return f
	case n.pendingBytes+len(cmd) > n.opts.MaxPendingBytes:
		n.completeLocked(f, nil, ErrOverloaded)
		return f
	}
	n.nextSeq++
	f.seq, f.data = n.nextSeq, cmd
	n.pending[f.seq] = f
	n.pendingBytes += len(cmd)
	n.inbox.props = append(n.inbox.props, f)
	n.notify()
	return f
}

// Propose proposes a command and waits until it is applied here,
// returning the state machine's result. On a context error the outcome is
// unknown: the command may still be applied.
func (n *Node) Propose(ctx context.Context, cmd []byte) (any, error) {
	return wait(ctx, n.ProposeAsync(cmd))
}

func wait(ctx context.Context, f *Future) (any, error) {
	select {
	case <-f.Done():
		return f.Result()
	case <-ctx.Done():
		f.Cancel()
		res, err := f.Result()
		if errors.Is(err, ErrCanceled) {
			return nil, fmt.Errorf("%w: %w", ErrCanceled, ctx.Err())
		}
		return res, err
	}
}

// ReadAsync starts a linearizable read (raft ReadIndex): the future
// completes once this member has applied every entry committed when the
// read was asked, so the state machine then reflects every write
// acknowledged before ReadAsync was called. Reads queued together share
// one ReadIndex round.
func (n *Node) ReadAsync() *Future {
	f := newFuture(n, kindRead)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.usable(); err != nil {
		n.completeLocked(f, nil, err)
		return f
	}
	n.inbox.reads = append(n.inbox.reads, f)
	n.notify()
	return f
}

// LinearizableRead waits until reading this member's state machine is
// linearizable (see ReadAsync).
func (n *Node) LinearizableRead(ctx context.Context) error {
	_, err := wait(ctx, n.ReadAsync())
	return err
}

// TransferLeadershipAsync asks the leader (this member) to hand
// leadership to id; it does nothing on a follower.
func (n *Node) TransferLeadershipAsync(id uint64) {
	n.mu.Lock()
	n.inbox.transfers = append(n.inbox.transfers, id)
	n.status.Transfers++
	n.mu.Unlock()
	n.notify()
}

// TransferLeadership hands leadership to id and waits until this member
// is no longer the leader (or ctx is done). The node must be running.
func (n *Node) TransferLeadership(ctx context.Context, id uint64) error {
	n.TransferLeadershipAsync(id)
	return n.waitStatus(ctx, func(s Status) bool { return s.Lead != n.id && s.Lead != 0 })
}

// waitStatus waits until cond holds for the status, the node fails or
// ctx is done.
func (n *Node) waitStatus(ctx context.Context, cond func(Status) bool) error {
	for {
		n.mu.Lock()
		st, ch := n.status, n.changed
		n.mu.Unlock()
		if st.Failed != nil {
			return fmt.Errorf("%w: %w", ErrStopped, st.Failed)
		}
		if cond(st) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Status returns this member's view of the cluster as of the last Process.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.status
	s.Voters, s.Learners = slices.Clone(s.Voters), slices.Clone(s.Learners)
	if s.Match != nil {
		m := make(map[uint64]uint64, len(s.Match))
		for k, v := range s.Match {
			m[k] = v
		}
		s.Match = m
	}
	return s
}

// Run drives the node in production: a Tick per value from ticks, and
// Process whenever work is queued. It returns when ctx is done, Close is
// called, or the node fails (with the failure).
func (n *Node) Run(ctx context.Context, ticks <-chan time.Time) error {
	n.mu.Lock()
	if n.running || n.closed {
		n.mu.Unlock()
		return errors.New("raftnode: Run called twice or after Close")
	}
	n.running = true
	n.mu.Unlock()
	defer close(n.runDone)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.stopRun:
			return nil
		case <-ticks:
			n.Tick()
		case <-n.signal:
		}
		if err := n.Process(); err != nil {
			n.mu.Lock()
			closed := n.closed && n.failed == nil
			n.mu.Unlock()
			if closed {
				return nil // Close raced with a wake-up
			}
			return err
		}
	}
}

// Stop shuts the node down gracefully: if it leads, it first hands
// leadership to the most up-to-date voter (waiting at most until ctx is
// done), so that the cluster does not wait an election timeout; then it
// closes. The node must be running (Run) for the transfer to happen.
func (n *Node) Stop(ctx context.Context) error {
	st := n.Status()
	if st.IsLeader && !st.Removed {
		target, best := uint64(0), uint64(0)
		for _, v := range st.Voters {
			if v != n.id && (target == 0 || st.Match[v] > best) {
				target, best = v, st.Match[v]
			}
		}
		if target != 0 {
			if err := n.TransferLeadership(ctx, target); err != nil {
				n.logger.Warn("leadership transfer before stopping did not finish", "to", target, "err", err)
			}
		}
	}
	return n.Close()
}

// Close stops the node at once: Run returns, every waiting request
// completes with ErrStopped, and the log is closed.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	running := n.running
	close(n.stopRun)
	n.mu.Unlock()
	if running {
		<-n.runDone
	}
	n.procMu.Lock()
	defer n.procMu.Unlock()
	n.mu.Lock()
	n.failAllLocked(ErrStopped)
	n.mu.Unlock()
	n.metrics.close()
	return n.log.Close()
}

// failAllLocked completes every waiting request with err.
// REQUIRES: n.mu held.
func (n *Node) failAllLocked(err error) {
	for _, f := range n.inbox.props {
		n.completeLocked(f, nil, err)
	}
	for _, f := range n.inbox.reads {
		n.completeLocked(f, nil, err)
	}
	for _, f := range n.inbox.confs {
		n.completeLocked(f, nil, err)
	}
	n.inbox = inbox{}
	n.pendingBytes = 0
	for _, seq := range slices.Sorted(maps.Keys(n.pending)) {
		n.completeLocked(n.pending[seq], nil, err)
	}
	for _, b := range append(n.readBatches, n.readWaits...) {
		for _, f := range b.futures {
			n.completeLocked(f, nil, err)
		}
	}
	n.readBatches, n.readWaits = nil, nil
}
