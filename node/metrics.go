package node

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/rollup"
)

// meterName is the instrumentation scope of the node's instruments.
const meterName = "github.com/tributarydb/tributary/node"

// queryAPIOther is the api attribute of tributary.query.duration for an
// untagged context (in-process callers); the others are those of
// model.WithQueryAPI.
const queryAPIOther = "other"

// queryAPIs are the api attribute's values, untagged last.
var queryAPIs = []string{model.QueryAPIGRPC, model.QueryAPIPromQL, model.QueryAPIOpenTSDB, queryAPIOther}

// Query kinds, the kind attribute of tributary.query.duration: how the
// node answers, from the Query's shape.
var queryKinds = []string{"raw", "downsample", "rollup", "aggregate", "last"}

// nodeMetrics holds the node's synchronous instruments and the attribute
// sets they record with, built once.
type nodeMetrics struct {
	reg       metric.Registration
	fsync     metric.Float64Histogram
	query     metric.Float64Histogram
	queryAttr [][]metric.RecordOption // [api][kind]
}

// initMetrics creates the node's instruments on opts.MeterProvider. The
// observable ones read the counters and sizes the node keeps anyway, once
// per collection; the histograms are recorded per fsync and per query.
// It runs before the WAL opens (the fsync histogram is the WAL's OnFsync).
func (n *Node) initMetrics() error {
	m := &n.metrics
	in := telemetry.NewInstruments(n.opts.MeterProvider.Meter(meterName))
	m.fsync = in.Histogram("tributary.wal.fsync.duration", "s", "Time an fsync of a WAL segment file took.")
	m.query = in.Histogram("tributary.query.duration", "s", "Time the node took to answer a query, by client API and kind.")
	if err := in.Err(); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	m.queryAttr = make([][]metric.RecordOption, len(queryAPIs))
	for i, api := range queryAPIs {
		m.queryAttr[i] = make([]metric.RecordOption, len(queryKinds))
		for j, kind := range queryKinds {
			m.queryAttr[i][j] = metric.WithAttributeSet(attribute.NewSet(attribute.String("api", api), attribute.String("kind", kind)))
		}
	}
	return nil
}

// observedInstruments are the node's callback instruments.
type observedInstruments struct {
	accepted, rejected, flushes, flushErrors, flushedChunks, fsyncs metric.Int64ObservableCounter
	storeFlushes, idleFlushes                                       metric.Int64ObservableCounter
	idleCompactions, idleCompactionBytes                            metric.Int64ObservableCounter
	cacheHits, cacheMisses                                          metric.Int64ObservableCounter
	storeWrites                                                     metric.Int64ObservableCounter
	series, headSamples, headChunks, headBytes                      metric.Int64ObservableGauge
	walBytes, walSegments                                           metric.Int64ObservableGauge
	sstBytes, memtableBytes, compactionPending, cacheBytes          metric.Int64ObservableGauge
	rollupLag                                                       metric.Float64ObservableGauge
	// Store health and loss (health.go, storeloss.go).
	storeHealthy, storeFailure, storeWritesRefused, storeUnrestored metric.Int64ObservableGauge
	storeFailingSince                                               metric.Float64ObservableGauge
	storeQuarantined, storeLostPoints, walQuarantined               metric.Int64ObservableCounter
}

// registerMetrics creates the observable instruments and their callback;
// the node must be open (WAL and store). Close unregisters it.
func (n *Node) registerMetrics() error {
	in := telemetry.NewInstruments(n.opts.MeterProvider.Meter(meterName))
	counter, gauge, floatGauge := in.Int64Counter, in.Int64Gauge, in.Float64Gauge
	var o observedInstruments
	o.accepted = counter("tributary.points.accepted", "{point}", "Points stored and acknowledged.")
	o.rejected = counter("tributary.points.rejected", "{point}", "Points refused by the node, by reason.")
	o.flushes = counter("tributary.flushes", "{flush}", "Flushes of the head's closed chunks to the store.")
	o.flushErrors = counter("tributary.flush.errors", "{error}", "Flushes of the head to the store that failed (a series kept in the head).")
	o.flushedChunks = counter("tributary.flushed.chunks", "{chunk}", "Head chunks written to the store.")
	o.fsyncs = counter("tributary.wal.fsyncs", "{fsync}", "WAL file and directory fsyncs.")
	o.storeFlushes = counter("tributary.store.flushes", "{flush}", "Flushes of the store's memtables to disk that let WAL segments go (flushes write the store without RocksDB's WAL).")
	o.idleFlushes = counter("tributary.idle.flushes", "{flush}", "Flushes of the whole head and the store after --idle-flush without a write.")
	o.idleCompactions = counter("tributary.idle.compactions", "{compaction}", "Compactions of the store's upper levels into its bottom one after an idle flush (--idle-compact), by outcome (done, or aborted by a write or shutdown).")
	o.idleCompactionBytes = counter("tributary.idle.compaction.bytes", "By", "Bytes RocksDB's compactions wrote while idle compactions ran: the SD card cost of --idle-compact.")
	o.cacheHits = counter("tributary.store.block_cache.hits", "{lookup}", "RocksDB block cache hits.")
	o.cacheMisses = counter("tributary.store.block_cache.misses", "{lookup}", "RocksDB block cache misses.")
	o.storeWrites = counter("tributary.store.write", "By", "Bytes RocksDB wrote since the node started, by writer: flush (memtables to level 0), compaction, wal (RocksDB's own log, which chunks and rollups bypass; counted before its compression).")
	o.series = gauge("tributary.series", "{series}", "Series known to the node.")
	o.headSamples = gauge("tributary.head.samples", "{sample}", "Samples in the head, not yet flushed to the store.")
	o.headChunks = gauge("tributary.head.chunks", "{chunk}", "Chunks in the head (open and closed).")
	o.headBytes = gauge("tributary.head.bytes", "By", "Memory held by unflushed samples.")
	o.walBytes = gauge("tributary.wal.bytes", "By", "Size of the WAL segments on disk.")
	o.walSegments = gauge("tributary.wal.segments", "{segment}", "WAL segment files on disk, the open one included.")
	o.sstBytes = gauge("tributary.store.sst.size", "By", "Size of the live RocksDB SST files, by column family.")
	o.memtableBytes = gauge("tributary.store.memtable.size", "By", "RocksDB memtables, active and unflushed.")
	o.compactionPending = gauge("tributary.store.compaction.pending", "By", "RocksDB's estimate of the bytes compaction still has to rewrite (compaction debt).")
	o.cacheBytes = gauge("tributary.store.block_cache.usage", "By", "RocksDB block cache in use.")
	o.storeHealthy = gauge("tributary.node.store.healthy", "", "1 while the store takes flushes and no damage is on record, else 0 (the node is not ready).")
	o.storeFailure = gauge("tributary.node.store.failure", "", "1 for the reason the store is unhealthy (corruption, no_space, io_error, store_error), 0 for the others.")
	o.storeWritesRefused = gauge("tributary.node.store.writes_refused", "", "1 while writes are refused: the store is unhealthy and unflushed data reached its bound.")
	o.storeUnrestored = gauge("tributary.node.store.lost_ranges", "{range}", "Key ranges of quarantined store files holding raw data or rollups not restored (from the cloud) yet.")
	o.storeFailingSince = floatGauge("tributary.node.store.failing_since", "s", "Unix time the store started failing (0 while healthy).")
	o.storeQuarantined = counter("tributary.node.store.quarantined_files", "{file}", "Damaged store table files moved to quarantine by repairs, ever.")
	o.storeLostPoints = counter("tributary.node.store.lost_points", "{point}", "Raw points the audit after a repair counted lost (neither in the store nor in the WAL), ever.")
	o.walQuarantined = counter("tributary.wal.quarantined_segments", "{file}", "WAL files quarantined as corrupt, ever (kept across restarts).")
	o.rollupLag = floatGauge("tributary.rollup.lag", "s", "How far the hourly and daily rollups trail the newest sample: its timestamp minus that of the oldest sample still in the head.")
	if err := in.Err(); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}

	var reasons [model.NumRejectReasons]metric.ObserveOption
	for r := model.RejectReason(1); r < model.NumRejectReasons; r++ {
		reasons[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r.String())))
	}
	outcomeDone := metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "done")))
	outcomeAborted := metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "aborted")))
	writerFlush := metric.WithAttributeSet(attribute.NewSet(attribute.String("writer", "flush")))
	writerCompaction := metric.WithAttributeSet(attribute.NewSet(attribute.String("writer", "compaction")))
	writerWAL := metric.WithAttributeSet(attribute.NewSet(attribute.String("writer", "wal")))
	failureAttrs := make([]metric.ObserveOption, len(StoreReasons))
	for i, r := range StoreReasons {
		failureAttrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
	}
	reg, err := in.Meter().RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		if n.closed.Load() {
			return nil
		}
		st := n.Status()
		obs.ObserveInt64(o.storeHealthy, boolInt(st.Store.Healthy))
		for i, r := range StoreReasons {
			obs.ObserveInt64(o.storeFailure, boolInt(!st.Store.Healthy && st.Store.Reason == r), failureAttrs[i])
		}
		obs.ObserveInt64(o.storeWritesRefused, boolInt(st.Store.WritesRefused))
		var sinceS float64
		if !st.Store.FailingSince.IsZero() && !st.Store.Healthy {
			sinceS = float64(st.Store.FailingSince.UnixMilli()) / 1e3
		}
		obs.ObserveFloat64(o.storeFailingSince, sinceS)
		obs.ObserveInt64(o.storeUnrestored, int64(st.StoreUnrestoredRanges))
		obs.ObserveInt64(o.storeQuarantined, st.StoreQuarantinedFiles)
		obs.ObserveInt64(o.storeLostPoints, st.StoreLostPoints)
		obs.ObserveInt64(o.walQuarantined, st.WALQuarantined)
		obs.ObserveInt64(o.accepted, st.Accepted)
		for r := model.RejectReason(1); r < model.NumRejectReasons; r++ {
			obs.ObserveInt64(o.rejected, st.RejectedBy[r], reasons[r])
		}
		obs.ObserveInt64(o.flushes, n.stats.flushes.Load())
		obs.ObserveInt64(o.flushErrors, st.FlushErrors)
		obs.ObserveInt64(o.flushedChunks, st.FlushedChunks)
		obs.ObserveInt64(o.fsyncs, st.WAL.Fsyncs)
		obs.ObserveInt64(o.storeFlushes, st.StoreFlushes)
		obs.ObserveInt64(o.idleFlushes, st.IdleFlushes)
		obs.ObserveInt64(o.idleCompactions, st.IdleCompactions-st.IdleCompactionsAborted, outcomeDone)
		obs.ObserveInt64(o.idleCompactions, st.IdleCompactionsAborted, outcomeAborted)
		obs.ObserveInt64(o.idleCompactionBytes, st.IdleCompactionBytes)
		obs.ObserveInt64(o.series, int64(st.Series))
		obs.ObserveInt64(o.headSamples, st.HeadSamples)
		obs.ObserveInt64(o.headBytes, st.HeadBytes)
		obs.ObserveInt64(o.walBytes, st.WAL.Bytes)
		obs.ObserveInt64(o.walSegments, int64(st.WAL.Segments))
		h := n.scanHead()
		obs.ObserveInt64(o.headChunks, h.chunks)
		obs.ObserveFloat64(o.rollupLag, h.rollupLag().Seconds())
		g, err := n.db.Gauges()
		if err != nil {
			return nil // closing
		}
		for cf, b := range g.SSTBytes {
			obs.ObserveInt64(o.sstBytes, b, metric.WithAttributes(attribute.String("cf", cf)))
		}
		obs.ObserveInt64(o.memtableBytes, g.MemtableBytes)
		obs.ObserveInt64(o.compactionPending, g.PendingCompactionBytes)
		obs.ObserveInt64(o.cacheBytes, g.BlockCacheBytes)
		obs.ObserveInt64(o.cacheHits, g.BlockCacheHits)
		obs.ObserveInt64(o.cacheMisses, g.BlockCacheMisses)
		obs.ObserveInt64(o.storeWrites, g.FlushWriteBytes, writerFlush)
		obs.ObserveInt64(o.storeWrites, g.CompactionWriteBytes, writerCompaction)
		obs.ObserveInt64(o.storeWrites, g.WALWriteBytes, writerWAL)
		return nil
	}, in.Observables()...)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	n.metrics.reg = reg
	return nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// unregisterMetrics stops the callback (Close).
func (n *Node) unregisterMetrics() {
	if n.metrics.reg != nil {
		_ = n.metrics.reg.Unregister()
	}
}

// observeFsync is the WAL's OnFsync.
func (n *Node) observeFsync(d time.Duration) {
	if n.metrics.fsync != nil {
		n.metrics.fsync.Record(context.Background(), d.Seconds())
	}
}

// observeQuery records a query's latency; Query defers it.
func (n *Node) observeQuery(ctx context.Context, q *model.Query, start time.Time) {
	if n.metrics.query == nil {
		return
	}
	api := len(queryAPIs) - 1
	if s, ok := model.QueryAPIFrom(ctx); ok {
		for i, a := range queryAPIs {
			if a == s {
				api = i
				break
			}
		}
	}
	n.metrics.query.Record(ctx, time.Since(start).Seconds(), n.metrics.queryAttr[api][queryKind(q)])
}

// queryKind indexes queryKinds.
func queryKind(q *model.Query) int {
	switch {
	case q.Mode == model.ModeLastPoint:
		return 4
	case q.Aggregate != rollup.FuncNone:
		return 3
	case q.Mode == model.ModeDownsample && q.Source() != "raw":
		return 2
	case q.Mode == model.ModeDownsample:
		return 1
	}
	return 0
}

// headFigures are figures of the head that need a walk over its series.
type headFigures struct {
	chunks int64
	// newest is the newest sample's timestamp; oldest the oldest sample's
	// still in the head (not in the store, so not in the rollups yet).
	newest, oldest int64
	has            bool
}

// rollupLag is newest - oldest: 0 with an empty head.
func (h headFigures) rollupLag() time.Duration {
	if !h.has || h.newest < h.oldest {
		return 0
	}
	return time.Duration(h.newest-h.oldest) * time.Millisecond
}

// scanHead walks the head's series (one lock each), for a scrape.
func (n *Node) scanHead() headFigures {
	h := headFigures{newest: math.MinInt64, oldest: math.MaxInt64}
	n.idxMu.RLock()
	defer n.idxMu.RUnlock()
	for _, s := range n.byID {
		s.mu.Lock()
		h.chunks += int64(len(s.closed))
		oldest := int64(math.MaxInt64)
		if len(s.closed) > 0 {
			oldest = s.closed[0].c.FirstT()
		}
		if s.open.Len() > 0 {
			h.chunks++
			oldest = min(oldest, s.open.FirstT())
		}
		for _, x := range s.ooo {
			oldest = min(oldest, x.t)
		}
		if oldest != math.MaxInt64 {
			h.has = true
			h.oldest = min(h.oldest, oldest)
		}
		if s.hasMaxT {
			h.newest = max(h.newest, s.maxT)
		}
		s.mu.Unlock()
	}
	return h
}
