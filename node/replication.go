package node

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
)

// What the node does for replication (package replicator ships its sealed
// WAL segments to the cloud):
//
//   - Options.WALRetention keeps segments on disk until the replicator
//     releases them, even once every sample in them is in RocksDB.
//   - WALSegments and ReadWALSegment let the replicator list and read them.
//   - The node records in its store meta the "flushed-through" sequence:
//     every sample of every segment at or below it is durable in RocksDB.
//     Replay starts after it, so segments kept only for shipping are not
//     applied again at every start.
//   - ExportRange reads every series' raw points of a time range, from
//     which the replicator builds backfills of segments it released or
//     lost (ExportRangeMatching reads the series some matchers select:
//     the coordinator's replica store exports one edge's series with
//     it); WALReplayFrom tells it which lost segments' samples the store
//     holds.
//   - Options.WriteGate lets the replicator refuse writes while its
//     backlog is over budget (the block-writers overflow policy).

// metaFlushedThrough is the store meta key of the flushed-through sequence:
// 8 bytes, little-endian.
const metaFlushedThrough = "wal.flushed_through"

// NodeID returns the node's id, as written into its WAL segment headers.
func (n *Node) NodeID() string { return n.opts.NodeID }

// WALSegments describes the node's WAL segments in ascending sequence: the
// sealed ones (immutable; kept on disk while Options.WALRetention asks for
// them) and, last, the open one (Sealed false).
func (n *Node) WALSegments() []wal.SegmentInfo { return n.wal.Segments() }

// ReadWALSegment returns the verified bytes of sealed WAL segment seq (see
// wal.Log.ReadSealed for its errors). Safe for concurrent use.
func (n *Node) ReadWALSegment(seq uint64) ([]byte, wal.SegmentInfo, error) {
	return n.wal.ReadSealed(seq)
}

// WALReplayFrom returns the first WAL sequence this Node replayed when it
// opened: every sample of every segment below it was durable in the store
// before the Node opened (the flushed-through record vouches for it), so
// it is in the store whether or not the segment file is still there.
// Samples of a segment at or above it are in the store only if the
// segment was intact when the Node opened (and replayed) or was written
// by this Node. The replicator re-ships lost segments from the store by
// this rule.
func (n *Node) WALReplayFrom() uint64 { return n.replayFrom }

// replayStart returns the first WAL sequence to replay: the one after the
// recorded flushed-through sequence. A record that is not below the open
// segment's sequence belongs to an earlier incarnation of the WAL
// directory (it was removed or replaced while the store stayed): skipping
// by it would skip the new segments' samples, so it is cleared (durably,
// before anything is replayed) and everything on disk is replayed.
func (n *Node) replayStart() (uint64, error) {
	b, ok, err := n.db.GetMeta(metaFlushedThrough)
	if err != nil {
		return 0, fmt.Errorf("read flushed-through sequence: %w", err)
	}
	if !ok {
		return 1, nil
	}
	if len(b) != 8 {
		n.log.Error("stored flushed-through sequence is damaged; replaying the whole WAL", "bytes", len(b))
		return 1, nil
	}
	through := binary.LittleEndian.Uint64(b)
	if open := n.wal.OpenSeq(); through >= open {
		n.log.Warn("WAL sequence numbers are behind the store's flushed-through record (WAL directory replaced?); replaying the whole WAL",
			"flushed_through", through, "open_segment", open)
		if err := n.recordFlushedThrough(0); err != nil {
			return 0, err
		}
		if err := n.db.SyncWAL(); err != nil {
			return 0, fmt.Errorf("sync store wal: %w", err)
		}
		return 1, nil
	}
	return through + 1, nil
}

// recordFlushedThrough writes the flushed-through sequence to the store
// meta. It is not synced by itself.
// REQUIRES: the samples of every segment <= seq are durable in RocksDB
// (a store Flush returned after they were written: flushes write them
// without RocksDB's WAL), so that a record that survives a crash never
// vouches for samples that did not.
func (n *Node) recordFlushedThrough(seq uint64) error {
	b := n.db.NewBatch()
	defer b.Close()
	b.PutMeta(metaFlushedThrough, binary.LittleEndian.AppendUint64(nil, seq))
	if err := n.db.Write(b); err != nil {
		return fmt.Errorf("record flushed-through sequence %d: %w", seq, err)
	}
	return nil
}

// ExportRange calls fn once for each series that has raw points with
// timestamps in [minT, maxT]: ExportRangeMatching over every series.
func (n *Node) ExportRange(ctx context.Context, minT, maxT int64, fn func(ls labels.Labels, ts []int64, vs []float64) error) error {
	all, err := labels.NewMatcher(labels.MatchRegexp, labels.MetricName, ".+")
	if err != nil {
		return fmt.Errorf("export range: %w", err)
	}
	return n.ExportRangeMatching(ctx, []*labels.Matcher{all}, minT, maxT, fn)
}

// ExportRangeMatching calls fn once for each series selected by matchers
// (all of them must match; at least one must not match the empty string)
// that has raw points with timestamps in [minT, maxT] (inclusive, ms), in
// label order, with those points in time order (stored chunks and the
// head merged, last write wins: what a raw query answers). The slices are
// only valid during the call. Memory is bounded by one series' points in
// the range at a time, and there is no limit on the number of series. It
// stops at the first error fn returns (returned as is) or when ctx is
// done. Bad arguments wrap model.ErrBadQuery. Safe for concurrent use, also with
// writes: points written meanwhile may or may not be included.
func (n *Node) ExportRangeMatching(ctx context.Context, matchers []*labels.Matcher, minT, maxT int64, fn func(ls labels.Labels, ts []int64, vs []float64) error) error {
	if err := n.checkExport("export range", matchers, minT, maxT); err != nil {
		return err
	}
	var ts []int64
	var vs []float64
	return n.exportSeries(ctx, "export range", matchers, minT, maxT, func(s *memSeries) error {
		samples, err := n.rawSamples(s, minT, maxT)
		if err != nil {
			return fmt.Errorf("export range [%d, %d]: read %s: %w", minT, maxT, s.lset, err)
		}
		if len(samples) == 0 {
			return nil
		}
		ts, vs = ts[:0], vs[:0]
		for _, x := range samples {
			ts, vs = append(ts, x.t), append(vs, x.v)
		}
		return fn(s.lset, ts, vs)
	})
}

// exportSeries calls each for every series the matchers select, in label
// order, until each fails or ctx is done (that error is returned as is);
// what and [minT, maxT] name the export in the error of the selection.
func (n *Node) exportSeries(ctx context.Context, what string, matchers []*labels.Matcher, minT, maxT int64, each func(*memSeries) error) error {
	list, err := n.selectSeries(matchers)
	if err != nil {
		return fmt.Errorf("%s [%d, %d]: select series: %w", what, minT, maxT, err)
	}
	for _, s := range list {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := each(s); err != nil {
			return err
		}
	}
	return nil
}

// checkExport checks the arguments of an export (what names it in the
// error): the node is open, [minT, maxT] is not reversed, and the matchers
// can select (checkExportMatchers).
func (n *Node) checkExport(what string, matchers []*labels.Matcher, minT, maxT int64) error {
	if n.closed.Load() {
		return model.ErrClosed
	}
	if maxT < minT {
		return fmt.Errorf("%s [%d, %d]: %w: end before start", what, minT, maxT, model.ErrBadQuery)
	}
	if err := checkExportMatchers(matchers); err != nil {
		return fmt.Errorf("%s [%d, %d]: %w", what, minT, maxT, err)
	}
	return nil
}

// checkExportMatchers: selectSeries needs one matcher that selects by a
// posting list (matchers that match the empty string only subtract).
func checkExportMatchers(ms []*labels.Matcher) error {
	ok := false
	for i, m := range ms {
		if m == nil {
			return fmt.Errorf("%w: matcher %d is nil", model.ErrBadQuery, i)
		}
		ok = ok || !m.MatchesEmpty()
	}
	if !ok {
		return fmt.Errorf("%w: at least one matcher must not match the empty string", model.ErrBadQuery)
	}
	return nil
}
