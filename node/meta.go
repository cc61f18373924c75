package node

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	"github.com/tributarydb/tributary/node/wal"
)

// Series returns the label sets of the series selected by ms, at most
// limit (<= 0: no limit), sorted. The node does not consult ctx (nor in
// LabelNames and LabelValues).
func (n *Node) Series(_ context.Context, ms []*labels.Matcher, limit int) ([]labels.Labels, error) {
	if n.closed.Load() {
		return nil, model.ErrClosed
	}
	if err := (&model.Query{Matchers: ms, Mode: model.ModeRaw}).Validate(); err != nil {
		return nil, err
	}
	list, err := n.selectSeries(ms)
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(list) > limit {
		list = list[:limit]
	}
	out := make([]labels.Labels, len(list))
	for i, s := range list {
		out[i] = s.lset
	}
	return out, nil
}

// LabelNames lists label names, of all series or of those matching ms.
func (n *Node) LabelNames(_ context.Context, ms []*labels.Matcher) ([]string, error) {
	if len(ms) == 0 {
		return n.db.LabelNames()
	}
	return n.collectLabels(ms, func(l labels.Label) string { return l.Name }, "")
}

// LabelValues lists the values of a label, of all series or of those
// matching ms.
func (n *Node) LabelValues(_ context.Context, name string, ms []*labels.Matcher) ([]string, error) {
	if len(ms) == 0 {
		return n.db.LabelValues(name)
	}
	return n.collectLabels(ms, func(l labels.Label) string { return l.Value }, name)
}

func (n *Node) collectLabels(ms []*labels.Matcher, pick func(labels.Label) string, only string) ([]string, error) {
	sets, err := n.Series(context.Background(), ms, 0)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, ls := range sets {
		for _, l := range ls {
			if only == "" || l.Name == only {
				seen[pick(l)] = true
			}
		}
	}
	return slices.Sorted(mapKeys(seen)), nil
}

// Status is a snapshot of the node's state.
type Status struct {
	NodeID             string
	Series             int
	HeadSamples        int64
	HeadBytes          int64 // memory held by head samples
	WAL                wal.Stats
	WALRecordBytes     int64 // record payload bytes appended since start
	Accepted, Rejected int64
	// RejectedBy counts rejected points by reason (index: RejectReason).
	RejectedBy    [model.NumRejectReasons]int64
	FlushedChunks int64
	FlushErrors   int64
	// StoreFlushes counts the flushes of the store's memtables to disk that
	// let WAL segments go; IdleFlushes the flushes after Options.IdleFlush
	// without writes.
	StoreFlushes, IdleFlushes int64
	// IdleCompactions counts the compactions after idle flushes that had
	// something to merge (IdleCompactionsAborted of them cut short by a
	// write or shutdown); IdleCompactionBytes is what RocksDB's
	// compactions wrote while they ran.
	IdleCompactions, IdleCompactionsAborted, IdleCompactionBytes int64
	RetentionDropped                                             int64
	Uptime                                                       time.Duration
	// Store is the store's health (health.go).
	Store StoreHealth
	// WALQuarantined counts WAL files quarantined as corrupt, ever (kept
	// in the store across restarts); WAL.CorruptQuarantined counts those
	// of this run.
	WALQuarantined int64
	// Losses summarises the ledger of repaired damage (StoreLosses):
	// table files quarantined, raw points counted lost, and ranges of raw
	// data or rollups not restored.
	StoreQuarantinedFiles, StoreLostPoints int64
	StoreUnrestoredRanges                  int
}

// Status reports counters and sizes.
func (n *Node) Status() Status {
	n.idxMu.RLock()
	series := len(n.byID)
	n.idxMu.RUnlock()
	st := Status{
		NodeID:                 n.opts.NodeID,
		Series:                 series,
		HeadSamples:            n.headSamples.Load(),
		HeadBytes:              n.headBytes.Load(),
		WAL:                    n.wal.Stats(),
		WALRecordBytes:         n.stats.walRecordBytes.Load(),
		Accepted:               n.stats.accepted.Load(),
		Rejected:               n.stats.rejected.Load(),
		RejectedBy:             n.rejectedBy(),
		FlushedChunks:          n.stats.flushedChunks.Load(),
		FlushErrors:            n.stats.flushErrors.Load(),
		StoreFlushes:           n.stats.storeFlushes.Load(),
		IdleFlushes:            n.stats.idleFlushes.Load(),
		IdleCompactions:        n.stats.idleCompactions.Load(),
		IdleCompactionsAborted: n.stats.idleCompactAborted.Load(),
		IdleCompactionBytes:    n.stats.idleCompactBytes.Load(),
		RetentionDropped:       n.stats.retentionDropped.Load(),
		Uptime:                 n.opts.Now().Sub(n.started),
		Store:                  n.health.state(),
		WALQuarantined:         n.walQuarantined(),
	}
	n.lossMu.Lock()
	st.StoreQuarantinedFiles = n.loss.losses.QuarantinedFiles
	st.StoreLostPoints = n.loss.losses.LostPoints
	st.StoreUnrestoredRanges = n.loss.losses.unrestored()
	n.lossMu.Unlock()
	return st
}

func (n *Node) rejectedBy() (out [model.NumRejectReasons]int64) {
	for i := range out {
		out[i] = n.stats.rejectedBy[i].Load()
	}
	return out
}

// Flush writes the whole head to the store now (tests, benchmarks, and
// operators before a backup).
func (n *Node) Flush() error { return n.flush(true, true) }

// CompactStore flushes RocksDB memtables and compacts everything; it
// returns the resulting SST bytes.
func (n *Node) CompactStore() (int64, error) {
	if err := n.db.Flush(); err != nil {
		return 0, err
	}
	if err := n.db.CompactAll(); err != nil {
		return 0, err
	}
	st, err := n.db.Stats()
	return st.SSTBytes, err
}

// StoredPoints counts the samples in the store, from the daily rollups (which
// count exactly). Head samples are not included; Flush first.
func (n *Node) StoredPoints() (int64, error) {
	n.idxMu.RLock()
	ids := slices.Collect(mapKeys(n.byID))
	n.idxMu.RUnlock()
	var total int64
	for _, id := range ids {
		err := n.db.Rollups(store.KindRollup1d, id, math.MinInt64, math.MaxInt64, func(p int64, val []byte) error {
			pack, err := rollup.DecodeDaily(val, p)
			for _, a := range pack.Days {
				total += a.Count
			}
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	return total, nil
}
