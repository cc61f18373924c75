package replicator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
	"github.com/tributarydb/tributary/replicator/internal/cursor"
)

// Source is the node whose WAL segments are shipped; *node.Node is one.
type Source interface {
	// NodeID is the id in the node's segment headers.
	NodeID() string
	// WALSegments lists the WAL segments in ascending sequence, the open
	// one last.
	WALSegments() []wal.SegmentInfo
	// ReadWALSegment returns the verified file of a sealed segment.
	ReadWALSegment(seq uint64) ([]byte, wal.SegmentInfo, error)
	// ExportRange calls fn for each series with points in [minT, maxT]
	// (ms, inclusive), with those points in time order (the node's raw
	// query); the slices are valid only during the call. Backfills of
	// gaps are built from it.
	ExportRange(ctx context.Context, minT, maxT int64, fn func(ls labels.Labels, ts []int64, vs []float64) error) error
	// WALReplayFrom is the first WAL sequence the node replayed when it
	// opened: every sample of a segment below it is in the node's store
	// even if the segment file is gone (see node.Node.WALReplayFrom).
	WALReplayFrom() uint64
}

// RetentionSource is a Source that says how long its store keeps raw
// points; *node.Node is one. A run the cloud asks to ship again is
// rebuilt from the store only when it starts after the horizon (now
// minus raw), and only from a Source that says so: from any other, such
// runs are shipped from WAL files or answered unavailable (reship.go).
type RetentionSource interface {
	Source
	// Retention is the retention in force for raw points, hourly and
	// daily rollups: the store may have dropped raw points older than
	// now minus raw.
	Retention() (raw, hourly, daily time.Duration)
}

var _ RetentionSource = (*node.Node)(nil)

// ErrBacklogFull is what WriteGate returns while the backlog is over budget
// under OverflowBlockWriters. It matches model.ErrOverloaded (errors.Is), so
// the node's protocols answer it as retryable (HTTP 429, gRPC
// RESOURCE_EXHAUSTED).
var ErrBacklogFull error = backlogFullError{}

type backlogFullError struct{}

func (backlogFullError) Error() string {
	return "replicator: replication backlog is over its disk budget; writes resume once it ships; retry later"
}

func (backlogFullError) Is(target error) bool { return target == model.ErrOverloaded }

// ErrSequenceReset is returned by Run when the node's WAL sequence numbers
// are at or below what the cursor says was already shipped or released:
// the WAL directory was replaced while the cursor stayed. Shipping the new
// segments under reused numbers would conflict with what the cloud holds;
// the node needs a new id or a fresh cursor (and the cloud's consent).
var ErrSequenceReset = errors.New("replicator: node WAL sequence numbers went back below the replication cursor")

// Shipper ships one node's sealed WAL segments to the coordinators. See the
// package documentation.
type Shipper struct {
	opts Options

	// initial is the cursor loaded by New, handed to Run.
	initial cursor.State

	retainFrom atomic.Uint64
	blocked    atomic.Bool
	running    atomic.Bool

	statsMu sync.Mutex
	stats   Stats
}

// New validates opts and loads the cursor file. It starts nothing: wire
// RetainFrom (and WriteGate) into the node's options, open the node, then
// call Run. A cursor file that does not decode is moved aside to
// <path>.corrupt (never deleted), logged, and replaced by an empty cursor:
// the cloud's acknowledgements, on the next connection, say again what it
// holds.
func New(opts Options) (*Shipper, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Shipper{opts: opts}
	st, found, err := cursor.Load(opts.FS, opts.CursorPath)
	var ce *cursor.CorruptError
	switch {
	case errors.As(err, &ce):
		aside := opts.CursorPath + ".corrupt"
		if rerr := opts.FS.Rename(opts.CursorPath, aside); rerr != nil {
			return nil, fmt.Errorf("%w; and moving it aside failed: %v", err, rerr)
		}
		opts.Logger.Error("replication cursor is damaged; moved aside, starting from an empty cursor (segments already deleted will be reported as missing)",
			"cursor", opts.CursorPath, "moved_to", aside, "err", err)
		st = cursor.State{}
	case err != nil:
		return nil, err
	case found:
		opts.Logger.Info("replication cursor loaded", "cursor", opts.CursorPath, "acked_through", st.AckedThrough,
			"released", st.Released, "gaps", len(st.Gaps))
	}
	s.initial = st
	s.retainFrom.Store(st.Released + 1)
	s.stats = Stats{AckedThrough: st.AckedThrough, Released: st.Released}
	s.stats.setGaps(&st)
	if err := s.registerMetrics(); err != nil {
		return nil, err
	}
	return s, nil
}

// RetainFrom returns the lowest WAL sequence the node must keep: every
// segment below it is acknowledged by the cloud or recorded as a gap, and
// that is durable in the cursor file. Pass it as node.Options.WALRetention.
// Safe for concurrent use; it never blocks.
func (s *Shipper) RetainFrom() uint64 { return s.retainFrom.Load() }

// WriteGate returns ErrBacklogFull while the node should refuse writes
// (only under OverflowBlockWriters), nil otherwise. Pass it as
// node.Options.WriteGate. Safe for concurrent use; it never blocks.
func (s *Shipper) WriteGate() error {
	if s.blocked.Load() {
		return ErrBacklogFull
	}
	return nil
}

// Stats returns a snapshot of the Shipper's state and counters. Safe for
// concurrent use.
func (s *Shipper) Stats() Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st := s.stats
	st.Gaps = append([]Gap(nil), s.stats.Gaps...)
	return st
}

// Run ships src's sealed segments until ctx is done, then persists the
// cursor and returns nil. It returns an error only when shipping cannot go
// on at all: the cursor belongs to another node, or ErrSequenceReset.
// Run may be called once.
func (s *Shipper) Run(ctx context.Context, src Source) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("replicator: Run called twice")
	}
	id := src.NodeID()
	if s.initial.NodeID != "" && s.initial.NodeID != id {
		return fmt.Errorf("replicator: cursor %s belongs to node %q, not %q", s.opts.CursorPath, s.initial.NodeID, id)
	}
	if id == "" || len(id) > 255 {
		return fmt.Errorf("replicator: node id of %d bytes", len(id))
	}
	l, err := newLoop(s, src)
	if err != nil {
		return err
	}
	return l.run(ctx)
}
