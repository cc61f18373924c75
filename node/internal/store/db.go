package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linxGnu/grocksdb"

	"github.com/tributarydb/tributary/internal/vfs"
)

// ErrClosed is returned by calls on a closed DB.
var ErrClosed = errors.New("store: closed")

// ErrCorrupt is wrapped by every error about bytes in RocksDB that do not
// follow the layout in the package doc.
var ErrCorrupt = errors.New("store: corrupt record")

// Column family names.
const (
	cfDefault  = "default" // required by RocksDB, unused
	cfSeries   = "series"
	cfPostings = "postings"
	cfChunks   = "chunks"
	cfRollup1h = "rollup_1h"
	cfRollup1d = "rollup_1d"
	cfMeta     = "meta"
)

var cfSpecs = []cfSpec{
	{name: cfDefault},
	{name: cfSeries, keyBloom: true},
	{name: cfPostings},
	{name: cfChunks, prefixBloom: true, blockBytes: timeBlockBytes, l0Trigger: chunksL0Trigger, writtenOnce: true},
	{name: cfRollup1h, prefixBloom: true, blockBytes: timeBlockBytes, hot: true},
	{name: cfRollup1d, prefixBloom: true, blockBytes: timeBlockBytes, hot: true},
	{name: cfMeta},
}

// Meta keys owned by this package.
const (
	reservedMetaPrefix = "store."
	metaLayout         = reservedMetaPrefix + "layout"
	metaMaxChunkSpan   = reservedMetaPrefix + "max_chunk_span_ms"
	layoutVersion      = 1
)

// DB is an open store. See the package doc for its concurrency contract.
type DB struct {
	log          *slog.Logger
	dir          string
	chunkWidthMs int64
	compression  string // for the log
	// layoutCreated: loadLayout found no layout record and wrote one (a
	// new store, or one whose record was lost; see Repair).
	layoutCreated bool

	// maxChunkSpanMs bounds maxT-minT of every stored chunk, so that a
	// query seeks to minT-maxChunkSpanMs instead of reading its first
	// partition from the start. It only grows; spanMu orders its growth with
	// the writes that persist it.
	maxChunkSpanMs atomic.Int64
	spanMu         sync.Mutex
	// writes counts the writes of stored data (batches, dropped
	// partitions) that have returned; see ChunkReader.
	writes atomic.Uint64

	rdb   *grocksdb.DB
	cache *grocksdb.Cache
	// manualMu runs the manual compactions (CompactAll, CompactIdle) one
	// at a time: CompactIdle cuts its own short by disabling manual
	// compactions, which would cut another one short too.
	manualMu sync.Mutex
	// flushMu runs the store's memtable flushes one at a time, those a
	// manual compaction starts included (CompactIdle and CompactAll hold
	// it while they run). With atomic flush, RocksDB 7.x keeps a flush's
	// reason on each column family rather than on the flush request, so
	// two flushes of different reasons requested at once (a manual flush
	// and a compaction's) can hand one job column families of both
	// reasons, which fails an assertion in AtomicFlushMemTablesToOutputFiles
	// and aborts a process built with assertions. flushWaiting counts the
	// flushes waiting for it: CompactIdle gives way to them.
	flushMu      sync.Mutex
	flushWaiting atomic.Int32
	// writeMu keeps the store's writes (read-locked around each) off
	// while a store flush is requested and runs (write-locked): every
	// flush RocksDB starts by itself (a full memtable, the write buffer
	// budget) is started by a write, so a store flush that waits for
	// those to finish and holds writes off until it is done never shares
	// a job with one. Without it a store flush (one column family per
	// request) could mark its column family of a queued RocksDB flush
	// with its own reason and abort the process as above (TestFlushRace
	// did, about one run in two, on a 2-vCPU machine).
	writeMu sync.RWMutex
	// idleCompacting is true while CompactIdle compacts (after its flush).
	idleCompacting atomic.Bool

	dbOpts   *grocksdb.Options
	cfOpts   []*grocksdb.Options
	handles  []*grocksdb.ColumnFamilyHandle // in cfSpecs order
	series   *grocksdb.ColumnFamilyHandle
	postings *grocksdb.ColumnFamilyHandle
	meta     *grocksdb.ColumnFamilyHandle
	timeCFs  [len(kinds)]*grocksdb.ColumnFamilyHandle // by Kind

	// Shared, never modified after Open: RocksDB only reads them.
	writeOpts    *grocksdb.WriteOptions // WAL on, sync off
	syncOpts     *grocksdb.WriteOptions // WAL on, sync on
	unloggedOpts *grocksdb.WriteOptions // WAL off (WriteUnlogged)
	readDefault  *grocksdb.ReadOptions  // point reads; scans make their own (scan.go)

	// mu guards the transition to closed; inflight counts running calls so
	// that Close frees nothing they still use.
	mu       sync.RWMutex
	closed   atomic.Bool
	inflight sync.WaitGroup
}

// Open opens or creates the store in o.Dir, creating missing column
// families.
func Open(o Options) (*DB, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	db, err := openRocks(&o, true)
	if err != nil {
		return nil, err
	}
	if err := db.loadLayout(); err != nil {
		db.free()
		return nil, fmt.Errorf("open store %s: %w", o.Dir, err)
	}
	db.checkNative() // scans use the C pointers under grocksdb's handles
	db.log.Info("store: opened", "dir", o.Dir,
		"partition", o.PartitionDuration,
		"block_cache_bytes", o.BlockCacheBytes,
		"memtable_max_bytes", uint64(len(cfSpecs)-1)*o.memtableBudget(),
		"compression", db.compression)
	return db, nil
}

// openRocks opens RocksDB in o.Dir with every column family, without
// reading anything from it. The caller frees the DB. paranoid: a table file
// that cannot be read at open fails the open (RocksDB's default); without,
// the open succeeds and lists it (Inspect).
// REQUIRES: o validated.
func openRocks(o *Options, paranoid bool) (*DB, error) {
	// Durably: RocksDB syncs what it writes in o.Dir, not o.Dir's own
	// entry in its parent.
	if err := vfs.MkdirAllDurable(vfs.OS{}, o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	comp := chooseCompressions()
	if comp.hot != grocksdb.LZ4Compression || comp.cold != grocksdb.ZSTDCompression {
		o.Logger.Warn("store: librocksdb lacks lz4 or zstd; using fallbacks",
			"hot_column_families", compressionName(comp.hot), "other_column_families", compressionName(comp.cold))
	}

	db := &DB{
		log:          o.Logger,
		dir:          o.Dir,
		chunkWidthMs: o.PartitionDuration.Milliseconds(),
		cache:        grocksdb.NewLRUCache(uint64(o.BlockCacheBytes)),
		dbOpts:       dbOptions(o),
	}
	db.dbOpts.SetParanoidChecks(paranoid)
	ok := false
	defer func() {
		if !ok {
			db.free()
		}
	}()

	names := make([]string, len(cfSpecs))
	for i, spec := range cfSpecs {
		opts, err := cfOptions(o, spec, db.cache, comp)
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", o.Dir, err)
		}
		db.cfOpts = append(db.cfOpts, opts)
		names[i] = spec.name
	}
	rdb, handles, err := grocksdb.OpenDbColumnFamilies(db.dbOpts, o.Dir, names, db.cfOpts)
	if err != nil {
		if isLockError(err) {
			return nil, fmt.Errorf("open store %s: %w: %v", o.Dir, ErrInUse, err)
		}
		return nil, fmt.Errorf("open store %s: %w", o.Dir, err)
	}
	db.rdb, db.handles = rdb, handles
	for i, spec := range cfSpecs {
		switch spec.name {
		case cfSeries:
			db.series = handles[i]
		case cfPostings:
			db.postings = handles[i]
		case cfMeta:
			db.meta = handles[i]
		case cfChunks:
			db.timeCFs[KindChunks] = handles[i]
		case cfRollup1h:
			db.timeCFs[KindRollup1h] = handles[i]
		case cfRollup1d:
			db.timeCFs[KindRollup1d] = handles[i]
		}
	}

	db.writeOpts = grocksdb.NewDefaultWriteOptions()
	db.syncOpts = grocksdb.NewDefaultWriteOptions()
	db.syncOpts.SetSync(true)
	db.unloggedOpts = grocksdb.NewDefaultWriteOptions()
	db.unloggedOpts.DisableWAL(true)
	db.readDefault = grocksdb.NewDefaultReadOptions()
	db.compression = compressionName(comp.hot) + "/" + compressionName(comp.cold)
	ok = true
	return db, nil
}

// loadLayout records the layout on first open and refuses a DB written
// with another layout or chunk partition width: its keys would be looked up
// in the wrong partitions and silently not found. It also loads the longest
// chunk span.
func (db *DB) loadLayout() error {
	want := make([]byte, 0, 9)
	want = append(want, layoutVersion)
	want = binary.BigEndian.AppendUint64(want, uint64(db.chunkWidthMs))

	got, found, err := db.getMeta(metaLayout)
	if err != nil {
		return err
	}
	if !found {
		wb := grocksdb.NewWriteBatch()
		defer wb.Destroy()
		wb.PutCF(db.meta, []byte(metaLayout), want)
		wb.PutCF(db.meta, []byte(metaMaxChunkSpan), binary.BigEndian.AppendUint64(nil, 0))
		if err := db.rdb.Write(db.syncOpts, wb); err != nil {
			return fmt.Errorf("record layout: %w", err)
		}
		db.layoutCreated = true
		return nil
	}
	if len(got) != len(want) || got[0] != layoutVersion {
		return fmt.Errorf("%w: unknown layout %x (this build writes version %d)", ErrCorrupt, got, layoutVersion)
	}
	if w := int64(binary.BigEndian.Uint64(got[1:])); w != db.chunkWidthMs {
		return fmt.Errorf("PartitionDuration is %v but the data was written with %v",
			time.Duration(db.chunkWidthMs)*time.Millisecond, time.Duration(w)*time.Millisecond)
	}

	span, found, err := db.getMeta(metaMaxChunkSpan)
	switch {
	case err != nil:
		return err
	case !found || len(span) != 8:
		// Scanning whole partitions is always correct, only slower.
		db.log.Warn("store: longest chunk span unknown; chunk queries read whole partitions", "found", found)
		db.maxChunkSpanMs.Store(db.chunkWidthMs)
	default:
		db.maxChunkSpanMs.Store(min(int64(binary.BigEndian.Uint64(span)), db.chunkWidthMs))
	}
	return nil
}

// Close waits for running calls to return, flushes every memtable to SST
// files (so that unlogged writes are kept and RocksDB's WAL holds nothing a
// restart would replay), then closes RocksDB and frees everything Open
// allocated. Closing twice is a no-op.
func (db *DB) Close() error {
	if !db.beginClose() {
		return nil
	}
	err := db.flushOrdered()
	db.free()
	if err != nil {
		return fmt.Errorf("close store %s: %w", db.dir, err)
	}
	return nil
}

// Abandon closes the store as a process crash would leave it: memtables
// are not flushed, so the writes of WriteUnlogged since the last Flush are
// lost and the ones logged in RocksDB's WAL are replayed by the next Open.
// For crash tests.
func (db *DB) Abandon() {
	if !db.beginClose() {
		return
	}
	db.free() // avoid_flush_during_shutdown is set (dbOptions)
}

// beginClose makes later calls fail and waits for running ones; it reports
// false if the DB was closed already.
func (db *DB) beginClose() bool {
	db.mu.Lock()
	if db.closed.Load() {
		db.mu.Unlock()
		return false
	}
	db.closed.Store(true)
	db.mu.Unlock()
	// A running CompactIdle returns at its next work step rather than
	// when it is done: Close waits for that step only.
	db.rdb.DisableManualCompaction()
	db.inflight.Wait()
	return true
}

// free releases every RocksDB object of db in dependency order: column
// family handles before the DB, the DB before the options and cache it uses.
// It tolerates a partly opened db.
func (db *DB) free() {
	for _, h := range db.handles {
		h.Destroy()
	}
	db.handles = nil
	if db.rdb != nil {
		db.rdb.Close()
		db.rdb = nil
	}
	for _, o := range []*grocksdb.WriteOptions{db.writeOpts, db.syncOpts, db.unloggedOpts} {
		if o != nil {
			o.Destroy()
		}
	}
	if db.readDefault != nil {
		db.readDefault.Destroy()
	}
	for _, o := range db.cfOpts {
		o.Destroy()
	}
	db.cfOpts = nil
	if db.dbOpts != nil {
		db.dbOpts.Destroy()
		db.dbOpts = nil
	}
	if db.cache != nil {
		db.cache.Destroy()
		db.cache = nil
	}
}

// acquire registers a running call; it fails once Close has begun.
// Every exported method that touches RocksDB starts with
//
//	if err := db.acquire(); err != nil { return err }
//	defer db.release()
func (db *DB) acquire() error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed.Load() {
		return ErrClosed
	}
	db.inflight.Add(1)
	return nil
}

func (db *DB) release() { db.inflight.Done() }

// Write applies b atomically across column families, logged in RocksDB's
// WAL but not synced: SyncWAL (or Flush) makes it durable. When b holds a
// chunk longer than any before, Write adds a store record to b.
func (db *DB) Write(b *Batch) error { return db.write(b, db.writeOpts) }

// WriteUnlogged applies b like Write but without RocksDB's WAL: until the
// next Flush returns, b lives only in memtables, and a crash loses it
// whole. With atomic flushes (see dbOptions) and the order of Flush, what a
// crash keeps of unlogged batches is always a prefix of them, and of each
// batch all of its column families or none.
// REQUIRES: the caller can write b again after a crash until Flush returns
// (the node replays it from its own WAL).
func (db *DB) WriteUnlogged(b *Batch) error { return db.write(b, db.unloggedOpts) }

func (db *DB) write(b *Batch, wo *grocksdb.WriteOptions) error {
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	if b.db != db {
		panic("BUG: store: Batch written to a DB it was not made by")
	}
	if b.wb == nil {
		panic("BUG: store: use of a closed Batch")
	}
	if b.maxSpanMs > db.maxChunkSpanMs.Load() {
		db.spanMu.Lock()
		defer db.spanMu.Unlock()
		if b.maxSpanMs > db.maxChunkSpanMs.Load() {
			// Publish before the write: a query that sees the new chunk
			// must also look back far enough to find it. If the write
			// fails, the bound is too high, which only costs time.
			db.maxChunkSpanMs.Store(b.maxSpanMs)
			b.wb.PutCF(db.meta, []byte(metaMaxChunkSpan), binary.BigEndian.AppendUint64(nil, uint64(b.maxSpanMs)))
		}
	}
	// Counted once returned, failed or not (see ChunkReader).
	defer db.writes.Add(1)
	db.writeMu.RLock()
	defer db.writeMu.RUnlock()
	if err := db.rdb.Write(wo, b.wb); err != nil {
		return fmt.Errorf("write batch of %d operations: %w", b.Len(), err)
	}
	return nil
}

// SyncWAL makes every write that returned so far durable (fsyncs RocksDB's
// WAL; flushed SST files are synced already).
func (db *DB) SyncWAL() error {
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	if err := db.rdb.FlushWAL(true); err != nil {
		return fmt.Errorf("sync rocksdb wal: %w", err)
	}
	return nil
}

// Flush writes the memtables of every column family to synced SST files
// and waits for it: every write that returned before, logged or not, is
// then durable, and RocksDB's WAL files up to here are obsolete.
func (db *DB) Flush() error {
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	return db.flushOrdered()
}

// flushOrdered flushes the column families one by one, chunks last. A
// crash between two of them must not keep a chunk whose rollup and span
// record are lost: replaying the chunk's samples would then take the
// append path and store them twice. Kept rollups without their chunks are
// safe (the replay merges, last write wins, and recomputes them).
func (db *DB) flushOrdered() error {
	db.flushWaiting.Add(1)
	db.flushMu.Lock()
	db.flushWaiting.Add(-1)
	defer db.flushMu.Unlock()
	return db.flushOrderedLocked()
}

// flushOrderedLocked is flushOrdered: with the store's writes held off,
// once RocksDB's own flushes are done. REQUIRES: db.flushMu held.
func (db *DB) flushOrderedLocked() error {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	db.waitFlushesDone(flushDrainTimeout)
	fo := grocksdb.NewDefaultFlushOptions()
	defer fo.Destroy()
	fo.SetWait(true)
	chunks := db.timeCFs[KindChunks]
	for i, h := range db.handles {
		if h == chunks {
			continue
		}
		if err := db.rdb.FlushCF(h, fo); err != nil {
			return fmt.Errorf("flush column family %s: %w", cfSpecs[i].name, err)
		}
	}
	if err := db.rdb.FlushCF(chunks, fo); err != nil {
		return fmt.Errorf("flush column family %s: %w", cfChunks, err)
	}
	return nil
}

// flushDrainTimeout bounds how long a store flush waits for RocksDB's
// own flushes: one that cannot finish (a failing disk) must not hold the
// store's writes off for good; the store flush then goes ahead, and
// fails as that one does.
const flushDrainTimeout = 10 * time.Second

// waitFlushesDone waits, up to timeout, until RocksDB has no flush
// running and no column family with a flush pending.
func (db *DB) waitFlushesDone(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		idle := db.rdb.GetProperty("rocksdb.num-running-flushes") == "0"
		for _, h := range db.handles {
			if !idle {
				break
			}
			idle = db.rdb.GetPropertyCF("rocksdb.mem-table-flush-pending", h) == "0"
		}
		if idle || time.Now().After(deadline) {
			return
		}
		time.Sleep(wait)
	}
}

// CompactAll compacts every column family fully, down to and including the
// bottommost level, which also purges the tombstones DropBefore left.
func (db *DB) CompactAll() error {
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	db.manualMu.Lock()
	defer db.manualMu.Unlock()
	// CompactRange flushes the memtables it overlaps first (flushMu).
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	co := grocksdb.NewCompactRangeOptions()
	defer co.Destroy()
	co.SetBottommostLevelCompaction(grocksdb.KForceOptimized)
	for _, h := range db.handles {
		db.rdb.CompactRangeCFOpt(h, grocksdb.Range{}, co) // reports no error
	}
	return nil
}

// GetMeta returns a copy of the value of a metadata key.
func (db *DB) GetMeta(key string) ([]byte, bool, error) {
	if err := db.acquire(); err != nil {
		return nil, false, err
	}
	defer db.release()
	return db.getMeta(key)
}

func (db *DB) getMeta(key string) ([]byte, bool, error) {
	v, found, err := db.get(db.meta, []byte(key))
	if err != nil {
		return nil, false, fmt.Errorf("get meta %q: %w", key, err)
	}
	return v, found, nil
}

// ScanMeta calls fn for every metadata key that starts with prefix, in key
// order, stopping at the first error fn returns (returned as is). key and
// val are only valid during the call.
func (db *DB) ScanMeta(prefix string, fn func(key, val []byte) error) error {
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	s := db.openScan(db.meta, scanTotal, PrefixEnd([]byte(prefix)))
	defer s.close()
	s.seek([]byte(prefix), nil, 0)
	for k, v, ok := s.next(); ok; k, v, ok = s.next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	if s.err != nil {
		return fmt.Errorf("scan meta %q: %w", prefix, s.err)
	}
	return nil
}

// PrefixEnd returns the first key after every key that starts with
// prefix, or nil when there is none (a prefix of 0xff bytes only).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// get returns a copy of the value of key in cf.
func (db *DB) get(cf *grocksdb.ColumnFamilyHandle, key []byte) ([]byte, bool, error) {
	s, err := db.rdb.GetCF(db.readDefault, cf, key)
	if err != nil {
		return nil, false, err
	}
	defer s.Free()
	if !s.Exists() {
		return nil, false, nil
	}
	return append([]byte{}, s.Data()...), true, nil
}

func isReservedMetaKey(key string) bool { return strings.HasPrefix(key, reservedMetaPrefix) }
