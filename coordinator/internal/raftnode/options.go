package raftnode

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/internal/vfs"
	"go.etcd.io/raft/v3/raftpb"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// Transport carries raft messages between members. It is the seam the
// gRPC transport plugs into; tests use an in-memory one.
//
// Send hands messages to the network and must not block on it: a message
// that cannot be sent now is dropped (raft retransmits). Send must not
// modify the messages (their entries are shared with the log). After
// sending a MsgSnap the transport must report, through
// Node.ReportSnapshot, whether it arrived; it should report peers it
// cannot reach with Node.ReportUnreachable. Received messages go to the
// destination's Node.Step.
type Transport interface {
	Send(msgs []raftpb.Message)
}

// StateMachine is what the node applies committed entries to;
// *catalog.FSM implements it. Apply and ApplyMembership must be
// deterministic; the node calls them from one goroutine, in log order.
// A command the StateMachine declares Reproposable may be applied twice.
type StateMachine interface {
	// Apply applies one command at a raft index (several commands may
	// share an index). The error is the command's result, handed to the
	// proposer: the state machine must not change on error.
	Apply(index uint64, cmd []byte) (any, error)
	// ApplyMembership records the raft configuration after a
	// configuration change at index.
	ApplyMembership(index uint64, m catalog.Membership) error
	// Snapshot encodes the whole state; Restore replaces the state with a
	// snapshot, or changes nothing and fails.
	Snapshot() []byte
	Restore(data []byte) error
}

// Reproposer is implemented by a StateMachine whose commands may be
// proposed again after a leader change (see the package doc on lost
// proposals). Reproposable must hold only for commands whose second
// application, even after other commands, changes nothing.
type Reproposer interface {
	Reproposable(cmd []byte) bool
}

// Peer is an initial member of a new cluster.
type Peer struct {
	ID   uint64
	Addr string // raft address, recorded in the catalog's member list
}

// Options configure a Node. Zero values take the defaults listed.
type Options struct {
	// ID is this member's raft id (non-zero, unique in the cluster, never
	// reused after a removal).
	ID uint64
	// Dir holds the raft log (see raftlog); FS is its file system
	// (default the real one) and SegmentBytes its segment size.
	Dir          string
	FS           vfs.FS
	SegmentBytes int64

	StateMachine StateMachine
	Transport    Transport

	// Peers bootstraps a new cluster when Dir holds no log yet: every
	// initial member must be started with the same Peers, itself
	// included. Without Peers, a member with an empty log waits to be
	// added by the leader (AddLearner, AddVoter). Ignored once Dir holds
	// a log.
	Peers []Peer

	// ElectionTicks (10) and HeartbeatTicks (1): Tick calls between
	// elections and between heartbeats.
	ElectionTicks  int
	HeartbeatTicks int

	// SnapshotEntries (10,000): take a state machine snapshot every this
	// many applied entries; KeepEntries (5,000) entries before it stay in
	// the log so a slightly lagging follower catches up without one.
	SnapshotEntries uint64
	KeepEntries     uint64

	// MaxEntryBytes (1 MiB) bounds one raft entry: proposals queued at
	// the same time are packed into entries up to this size.
	MaxEntryBytes int
	// MaxPendingBytes (64 MiB) bounds proposal bytes waiting for the next
	// Process; past it Propose fails fast with ErrOverloaded.
	MaxPendingBytes int
	// MaxInboxMessages (4,096) bounds received messages waiting for the
	// next Process; further messages are dropped (raft retransmits).
	MaxInboxMessages int
	// MaxSizePerMsg (1 MiB) and MaxInflightMsgs (256) bound replication
	// messages, as in raft.Config; MaxUncommittedBytes (64 MiB) bounds
	// the leader's uncommitted entries.
	MaxSizePerMsg       uint64
	MaxInflightMsgs     int
	MaxUncommittedBytes uint64

	Logger *slog.Logger
	// MeterProvider receives the member's metrics (metrics.go); nil: none.
	MeterProvider metric.MeterProvider
}

// Validate fills in defaults and rejects impossible values.
func (o *Options) Validate() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.ElectionTicks, 10)
	def(&o.HeartbeatTicks, 1)
	def(&o.MaxEntryBytes, 1<<20)
	def(&o.MaxPendingBytes, 64<<20)
	def(&o.MaxInboxMessages, 4096)
	def(&o.MaxInflightMsgs, 256)
	o.SnapshotEntries = cmp.Or(o.SnapshotEntries, 10_000)
	o.KeepEntries = cmp.Or(o.KeepEntries, 5_000)
	o.MaxSizePerMsg = cmp.Or(o.MaxSizePerMsg, 1<<20)
	o.MaxUncommittedBytes = cmp.Or(o.MaxUncommittedBytes, 64<<20)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	if o.MeterProvider == nil {
		o.MeterProvider = metricnoop.NewMeterProvider()
	}
	return o.check()
}

// check checks the options (after defaults).
func (o *Options) check() error {
	switch {
	case o.ID == 0:
		return errors.New("raftnode: Options.ID is 0")
	case o.Dir == "":
		return errors.New("raftnode: Options.Dir is empty")
	case o.StateMachine == nil:
		return errors.New("raftnode: Options.StateMachine is nil")
	case o.Transport == nil:
		return errors.New("raftnode: Options.Transport is nil")
	case o.HeartbeatTicks < 1 || o.ElectionTicks <= o.HeartbeatTicks:
		return fmt.Errorf("raftnode: ElectionTicks %d must exceed HeartbeatTicks %d >= 1", o.ElectionTicks, o.HeartbeatTicks)
	case o.MaxEntryBytes < 1024:
		return fmt.Errorf("raftnode: MaxEntryBytes %d is below 1 KiB", o.MaxEntryBytes)
	case o.MaxPendingBytes < o.MaxEntryBytes:
		return fmt.Errorf("raftnode: MaxPendingBytes %d is below MaxEntryBytes %d", o.MaxPendingBytes, o.MaxEntryBytes)
	case o.MaxInboxMessages < 1 || o.MaxInflightMsgs < 1:
		return errors.New("raftnode: MaxInboxMessages and MaxInflightMsgs must be positive")
	}
	if len(o.Peers) > 0 {
		ids := map[uint64]bool{}
		for _, p := range o.Peers {
			if p.ID == 0 || ids[p.ID] {
				return fmt.Errorf("raftnode: Peers: id %d is zero or repeated", p.ID)
			}
			ids[p.ID] = true
		}
		if !ids[o.ID] {
			return fmt.Errorf("raftnode: Peers do not include this member (%d)", o.ID)
		}
		if !slices.IsSortedFunc(o.Peers, func(a, b Peer) int { return cmp.Compare(a.ID, b.ID) }) {
			return errors.New("raftnode: Peers must be sorted by id (every member must bootstrap the same log)")
		}
	}
	return nil
}
