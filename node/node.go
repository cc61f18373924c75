// Package node is Tributary's storage node: the write path (validate → WAL
// → head), the flush of closed head chunks and their rollups into RocksDB,
// retention, and the local query engine.
//
// Concurrency: a Node is safe for concurrent use. Writes are serialised by
// Node.mu from WAL encoding to head apply, so the WAL order is the apply
// order and replay reproduces last-write-wins exactly; the fsync wait
// (group commit) happens outside the lock. One flush goroutine writes
// closed chunks to RocksDB; queries read a head snapshot first and RocksDB
// second, so a chunk moving from head to RocksDB in between is seen at
// least once and de-duplicated by timestamp.
//
// Durability: an acknowledged write is in an fsynced WAL record. Flushes
// write samples to RocksDB without RocksDB's own WAL; before WAL segments
// are deleted (or the flushed-through record advanced), the store's
// memtables are flushed to disk, so a segment is removed only when every
// sample in it is durable in RocksDB (flush.go, truncateWAL).
//
// Health (health.go): store failures are classified; a corruption makes
// the node not ready at once and until Repair (repair.go), other failures
// once they persist. While the store cannot flush, writes are taken into
// the WAL within bounds, then refused with a retryable *StoreError. After
// a repair, Open audits the lost key ranges around the WAL replay and
// counts what neither the store nor the WAL holds (audit.go, storeloss.go).
package node

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/wal"
)

// Node is one storage node.
type Node struct {
	opts Options
	log  *slog.Logger
	wal  *wal.Log
	db   *store.DB

	// mu serialises writes: MaybeCut → series lookup/creation → record
	// encoding → WAL append → head apply. A write waits for it only as
	// long as its context lets it (LockContext).
	mu     ctxMutex
	enc    record.Encoder
	recBuf []byte
	keyBuf []byte
	nextID uint64

	// idx maps series ids and label keys to head series. Writers hold mu
	// and idxMu for writing; readers hold idxMu for reading.
	idxMu  sync.RWMutex
	byID   map[uint64]*memSeries
	byHash map[uint64][]*memSeries
	highID uint64 // the highest id in byID (CreatedSeries)

	// replaySeq is the segment being replayed (0 outside replay); walLow
	// is the lowest WAL segment kept; flushedLow is the lowest segment
	// that may hold samples not durable in RocksDB, recorded in the store
	// as flushed-through = flushedLow-1 (flush loop only).
	replaySeq  atomic.Uint64
	walLow     uint64
	flushedLow uint64
	// lastAppendNs is when the head last took a write (Open counts as
	// one); idleDoneNs is the lastAppendNs the last idle flush covered
	// (flush loop only).
	lastAppendNs atomic.Int64
	idleDoneNs   int64
	// replayFrom is the first WAL sequence Open replayed (set once).
	replayFrom uint64
	// audit is the audit of repaired ranges while Open replays (audit.go).
	audit *auditPlan
	// flushSkip holds series whose stored data cannot be read back (flush
	// loop only, under flushMu).
	flushSkip map[uint64]error

	// headSamples counts samples in the head; headBytes is the memory they
	// hold (compressed chunks plus out-of-order buffers).
	headSamples atomic.Int64
	headBytes   atomic.Int64
	flushWake   chan struct{}
	// compactWake wakes compactLoop after an idle flush (unless NoIdleCompact).
	compactWake chan struct{}
	flushMu     sync.Mutex // one flush round at a time
	stop        chan struct{}
	wg          sync.WaitGroup
	closed      atomic.Bool
	started     time.Time

	// health classifies store failures (health.go); unflushedWALBytes is
	// the size of the WAL segments flushes have not released, measured by
	// the flush loop.
	health            healthTracker
	unflushedWALBytes atomic.Int64
	storeFault        atomic.Pointer[func() error] // tests: health.go
	compactFake       atomic.Pointer[compactFunc]  // tests: compact.go
	// loss holds the node's records of damage and loss (storeloss.go);
	// lossMu guards loss.losses.
	lossMu sync.Mutex
	loss   lossState

	stats    counters
	metrics  nodeMetrics // metrics.go
	postings postingsCache
	fleet    fleetState  // fleetconfig.go
	tracing  nodeTracing // trace.go
}

type counters struct {
	accepted, rejected atomic.Int64
	rejectedBy         [model.NumRejectReasons]atomic.Int64
	flushedChunks      atomic.Int64
	flushBatches       atomic.Int64 // store batches written by flushes (flushBatchBytes)
	flushes            atomic.Int64
	storeFlushes       atomic.Int64 // store flushes that let WAL segments go (truncateWAL)
	idleFlushes        atomic.Int64
	idleCompactions    atomic.Int64 // idle compactions that merged something (compact.go)
	idleCompactAborted atomic.Int64 // ... cut short by a write or shutdown
	idleCompactBytes   atomic.Int64 // bytes RocksDB's compactions wrote during them
	walRecordBytes     atomic.Int64 // payload bytes appended to the WAL
	flushErrors        atomic.Int64
	retentionDropped   atomic.Int64
}

// Open opens (or creates) a node in opts.DataDir, replays its WAL and starts
// the flush and retention loops.
func Open(opts Options) (*Node, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	// Durable: a power cut must not take the new directory's entry (and
	// every acknowledged point under it) away.
	if err := vfs.MkdirAllDurable(vfs.OS{}, opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	n := &Node{
		opts:        opts,
		log:         opts.Logger,
		mu:          newCtxMutex(),
		byID:        map[uint64]*memSeries{},
		byHash:      map[uint64][]*memSeries{},
		flushSkip:   map[uint64]error{},
		flushWake:   make(chan struct{}, 1),
		compactWake: make(chan struct{}, 1),
		stop:        make(chan struct{}),
		started:     opts.Now(),
		nextID:      1,
	}
	n.health = healthTracker{limit: opts.FailuresBeforeUnhealthy, window: opts.FailingBeforeUnhealthy,
		now: opts.Now, log: opts.Logger, damagePath: filepath.Join(opts.DataDir, damageFileName)}
	if err := n.health.loadDamage(); err != nil {
		return nil, err
	}
	if st := n.health.state(); st.Damaged {
		opts.Logger.Error("the store was found damaged and is not repaired: the node starts not ready; stop it and run tributary node repair",
			"data_dir", opts.DataDir, "since", st.FailingSince, "err", st.Err)
	}
	if err := n.initMetrics(); err != nil {
		return nil, err
	}
	n.initTracing()
	start := time.Now()
	db, err := store.Open(store.Options{
		Dir:               opts.dbDir(),
		PartitionDuration: opts.PartitionDuration,
		BlockCacheBytes:   opts.BlockCacheBytes,
		WriteBufferBytes:  opts.WriteBufferBytes,
		Logger:            opts.Logger,
	})
	if err != nil {
		return nil, n.damaged(fmt.Errorf("open store: %w", err))
	}
	n.db = db
	if err := n.resolveNodeID(); err != nil {
		db.Close()
		return nil, n.damaged(err)
	}
	if err := n.loadSeries(); err != nil {
		db.Close()
		return nil, n.damaged(err)
	}
	w, err := wal.Open(wal.Options{
		Dir:              opts.walDir(),
		NodeID:           n.opts.NodeID,
		MaxSegmentBytes:  opts.WALSegmentBytes,
		MaxSegmentAge:    opts.WALSegmentAge,
		MinSegmentPoints: opts.WALSegmentMinPoints,
		Format:           opts.WALFormat,
		Sync:             opts.WALSync,
		FS:               opts.WALFS,
		Logger:           opts.Logger,
		OnFsync:          n.observeFsync,
		OnSeal:           n.onSeal,
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open wal: %w", err)
	}
	n.wal = w
	if opts.WALFormat == wal.FormatV2 {
		n.enc.SetKind(record.KindCompressed)
	}
	if err := n.loadLossRecords(); err != nil {
		w.Close()
		db.Close()
		return nil, n.damaged(err)
	}
	from, err := n.replayStart()
	if err != nil {
		w.Close()
		db.Close()
		return nil, err
	}
	n.flushedLow, n.replayFrom = from, from
	// After a repair, audit the quarantined ranges around the replay
	// (audit.go). A failure leaves them for the next Open.
	plan, err := n.planAudit()
	if err != nil {
		n.noteStoreErr(err)
		n.log.Error("store repair audit failed; the loss of the repaired ranges is not counted yet", "err", err)
		plan = nil
	}
	n.audit = plan
	replayed, err := n.replay(from)
	n.audit = nil
	if err != nil {
		w.Close()
		db.Close()
		return nil, n.damaged(fmt.Errorf("replay wal: %w", err))
	}
	if err := n.finishAudit(plan); err != nil {
		n.log.Error("store repair audit failed; the loss of the repaired ranges is not counted yet", "err", err)
	}
	n.log.Info("node opened", "data_dir", opts.DataDir, "series", len(n.byID),
		"replayed_points", replayed, "head_samples", n.headSamples.Load(), "took", time.Since(start).Round(time.Millisecond))
	n.lastAppendNs.Store(n.opts.Now().UnixNano())
	n.wg.Add(3)
	go n.flushLoop()
	go n.retentionLoop()
	go n.compactLoop()
	if err := n.registerMetrics(); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

// damaged records a corruption that keeps the node from opening (and
// makes it start not ready until repaired, should it open later), and says
// what to do.
func (n *Node) damaged(err error) error {
	if classify(err) != store.FaultCorruption {
		return err
	}
	n.health.observe(err)
	return fmt.Errorf("%w\nthe store is damaged: with the node stopped, run tributary node repair --data-dir %s (docs/operations.md, Recovering from a damaged store)",
		err, n.opts.DataDir)
}

// metaNodeID is the store's record of the node id it was created with.
const metaNodeID = "node.id"

// resolveNodeID keeps a data directory bound to one node id: an empty
// Options.NodeID takes the stored one, a different one is refused (its WAL
// segments and, later, its replicated data carry the id).
func (n *Node) resolveNodeID() error {
	stored, ok, err := n.db.GetMeta(metaNodeID)
	if err != nil {
		return fmt.Errorf("read node id: %w", err)
	}
	switch {
	case ok && n.opts.NodeID == "":
		n.opts.NodeID = string(stored)
		return nil
	case ok && n.opts.NodeID != string(stored):
		return fmt.Errorf("data dir %s belongs to node %q, not %q", n.opts.DataDir, stored, n.opts.NodeID)
	case ok:
		return nil
	}
	if n.opts.NodeID == "" {
		n.opts.NodeID = DefaultNodeID
	}
	b := n.db.NewBatch()
	defer b.Close()
	b.PutMeta(metaNodeID, []byte(n.opts.NodeID))
	if err := n.db.Write(b); err != nil {
		return fmt.Errorf("record node id: %w", err)
	}
	return n.db.SyncWAL()
}

// loadSeries reads the series dictionary from RocksDB into the head index.
func (n *Node) loadSeries() error {
	return n.db.ForEachSeries(func(id uint64, ls labels.Labels) error {
		n.addSeriesLocked(id, ls, ls.AppendKey(nil))
		return nil
	})
}

// addSeriesLocked registers a series in the index. REQUIRES: n.mu held (or
// no concurrency, during Open).
func (n *Node) addSeriesLocked(id uint64, ls labels.Labels, key []byte) *memSeries {
	s := &memSeries{id: id, lset: ls}
	h := labels.Hash(key)
	n.idxMu.Lock()
	n.byID[id] = s
	n.byHash[h] = append(n.byHash[h], s)
	n.highID = max(n.highID, id)
	n.idxMu.Unlock()
	if id >= n.nextID {
		n.nextID = id + 1
	}
	return s
}

// lookupLocked finds a series by canonical key. REQUIRES: n.mu held.
func (n *Node) lookupLocked(key []byte, ls labels.Labels) *memSeries {
	for _, s := range n.byHash[labels.Hash(key)] {
		if labels.Equal(s.lset, ls) {
			return s
		}
	}
	return nil
}

// replay re-applies the WAL records of segments fromSeq and later (the
// earlier ones are all in RocksDB and may be on disk only for shipping).
// Records already flushed to RocksDB are applied again harmlessly: the
// flush merges them with what is stored, last write wins, and rollups are
// recomputed from the result.
func (n *Node) replay(fromSeq uint64) (points int64, err error) {
	var dec record.Decoder
	defs := map[uint64]*memSeries{}
	lastSeq := uint64(0)
	nowNs := n.opts.Now().UnixNano()
	err = n.wal.Replay(fromSeq, func(seq uint64, r wal.Record) error {
		if seq != lastSeq {
			clear(defs) // definitions are per segment
			lastSeq = seq
			n.replaySeq.Store(seq)
			// Keep the head within its memory bound while replaying a long WAL.
			if n.headBytes.Load() > n.opts.HeadMaxBytes {
				if err := n.flush(true, false); err != nil {
					return err
				}
			}
		}
		return dec.Decode(r.Data, func(id uint64, key []byte) error {
			ls, err := labels.DecodeKey(key)
			if err != nil {
				return fmt.Errorf("segment %d: series %d: %w", seq, id, err)
			}
			s := n.byID[id]
			if s == nil {
				s = n.addSeriesLocked(id, ls, key)
				if err := n.persistSeries(s); err != nil {
					return err
				}
			} else if !labels.Equal(s.lset, ls) {
				return fmt.Errorf("segment %d: series %d is %s in the WAL but %s in the store", seq, id, ls, s.lset)
			}
			defs[id] = s
			return nil
		}, func(id uint64, ts []int64, vs []float64) error {
			s := defs[id]
			if s == nil {
				return fmt.Errorf("segment %d: %w: samples for undefined series %d", seq, record.ErrCorrupt, id)
			}
			var grown int64
			s.mu.Lock()
			for i := range ts {
				d, _ := s.append(ts[i], vs[i], seq, nowNs, n.opts.HeadChunkSamples)
				grown += d
			}
			s.mu.Unlock()
			n.headBytes.Add(grown)
			n.headSamples.Add(int64(len(ts)))
			points += int64(len(ts))
			n.audit.replayed(seq, id, ts)
			return nil
		})
	})
	n.replaySeq.Store(0)
	return points, err
}

func (n *Node) persistSeries(s *memSeries) error {
	b := n.db.NewBatch()
	defer b.Close()
	b.PutSeries(s.id, s.lset)
	err := n.injectedFault()
	if err == nil {
		err = n.db.Write(b)
	}
	if err != nil {
		err = fmt.Errorf("persist series %d: %w", s.id, err)
		if n.health.observe(err) {
			n.log.Error("store cannot record new series: the node is not ready", "err", err)
		}
		if e := n.health.storeError("a new series cannot be recorded in the store's series dictionary"); e != nil {
			return e
		}
		return err
	}
	n.postings.invalidate()
	return nil
}

// dropFlushedWAL seals the open WAL segment and removes every segment whose
// samples are all in the store (and that Options.WALRetention releases), so
// the next start has nothing to replay.
func (n *Node) dropFlushedWAL() error {
	if _, err := n.wal.Cut(); err != nil {
		return fmt.Errorf("seal wal segment: %w", err)
	}
	n.flushMu.Lock()
	defer n.flushMu.Unlock()
	n.idxMu.RLock()
	list := slices.Collect(maps.Values(n.byID))
	n.idxMu.RUnlock()
	return n.truncateWAL(list, true)
}

// Close flushes the whole head to RocksDB, syncs it, removes the WAL
// segments it covers, and closes everything. It is safe to call twice.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	n.unregisterMetrics()
	close(n.stop)
	n.wg.Wait()
	n.mu.Lock() // no write is in flight past this point
	defer n.mu.Unlock()
	var errs []error
	if err := n.flush(true, false); err != nil {
		n.health.observe(err)
		if st := n.health.state(); !st.Healthy {
			// Nothing is lost: every segment holding samples the store
			// lacks stays on disk, and the next start replays it.
			n.log.Error("final flush failed: the store is unhealthy; unflushed samples stay in the WAL and are replayed at the next start",
				"reason", st.Reason, "head_samples", n.headSamples.Load(), "wal_from_segment", n.flushedLow, "err", err)
		} else {
			errs = append(errs, fmt.Errorf("final flush: %w", err))
		}
	} else if err := n.dropFlushedWAL(); err != nil {
		errs = append(errs, err)
	}
	if err := n.wal.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close wal: %w", err))
	}
	if err := n.db.Close(); err != nil {
		n.health.observe(err)
		if st := n.health.state(); !st.Healthy {
			// The store refused its last flush (a damaged store stops
			// taking writes). What its memtables held is in WAL segments
			// that were not released: those are released only after a
			// store flush, so the next start replays them.
			n.log.Error("store closed without its last flush: it is unhealthy; what it did not persist is replayed from the WAL at the next start",
				"reason", st.Reason, "err", err)
		} else {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
	}
	return errors.Join(errs...)
}
