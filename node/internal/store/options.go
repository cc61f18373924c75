package store

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/linxGnu/grocksdb"
)

// Options configures a DB. The zero value of every field but Dir means "use
// the default"; defaults are sized for a 512 MiB Raspberry Pi.
type Options struct {
	// Dir is the RocksDB directory; created when missing.
	Dir string
	// PartitionDuration is the width of a raw chunk partition: a positive
	// multiple of 1h, default 24h. It is the unit of raw retention. It
	// cannot change once data has been written.
	PartitionDuration time.Duration
	// BlockCacheBytes is the LRU block cache shared by all column families,
	// holding data, index and filter blocks. Default 8 MiB.
	BlockCacheBytes int64
	// WriteBufferBytes is the size of one memtable of one column family.
	// Default 4 MiB, at least 64 KiB.
	WriteBufferBytes int64
	// MaxOpenFiles bounds the SST files RocksDB keeps open. Default 256, at
	// least 20.
	MaxOpenFiles int
	// MaxBackgroundJobs bounds concurrent flushes and compactions.
	// Default 2.
	MaxBackgroundJobs int
	// Logger receives the store's own log lines (RocksDB keeps its LOG file
	// in Dir). Default: discard.
	Logger *slog.Logger
}

// Defaults and limits of Options.
const (
	DefaultPartitionDuration = 24 * time.Hour
	DefaultBlockCacheBytes   = 8 << 20
	DefaultWriteBufferBytes  = 4 << 20
	DefaultMaxOpenFiles      = 256
	DefaultMaxBackgroundJobs = 2

	minWriteBufferBytes = 64 << 10 // RocksDB silently raises smaller values
	minMaxOpenFiles     = 20       // RocksDB silently raises smaller values

	// writeBuffers is the number of memtables a column family may hold
	// (one being written, the other waiting to be flushed), and exactly 2:
	// with one every flush stalls writes; with more, RocksDB 7.x (whose
	// flush keeps its reason on each column family) runs a store Flush
	// queued behind its own flush of a full memtable with mixed reasons,
	// which Debian's assertion-enabled build aborts on within seconds (seen
	// with 4 under TestFlushRace's load); with 2 a manual flush waits for
	// the queued one.
	writeBuffers = 2
)

// Tuning that does not need to be an option.
const (
	bloomBitsPerKey       = 10
	timeBlockBytes        = 16 << 10 // chunks and rollups: fewer index entries per GiB
	targetFileBytes       = 16 << 20 // keeps a few GiB within MaxOpenFiles
	levelBaseBytes        = 64 << 20
	bytesPerSync          = 1 << 20 // smooths write-back on SD cards
	rocksLogFileBytes     = 1 << 20
	rocksLogFilesKept     = 2        // each open starts a LOG with a ~75 KiB header
	defaultCFBufferBytes  = 64 << 10 // the unused "default" column family
	dbWriteBufferFactor   = 2        // DB-wide memtable budget, in per-CF budgets
	maxTotalWALSizeFactor = 4        // RocksDB WAL budget, in per-CF budgets
	// chunksL0Trigger is the number of level-0 files of the chunks column
	// family that starts a compaction (RocksDB's default, 4, elsewhere).
	// Chunks are written once and never overwritten, so merging their
	// level-0 files saves no space; each merge rewrites the overlapping
	// bottom-level files, which with keys led by the partition is all of
	// the current partition so far: with F store flushes a partition, a
	// partition is written about (F/trigger + 1)/2 times over by these
	// merges. A load of 43.2 M points into 10,000 series leaves 6–8
	// level-0 files (a store flush per 8 MiB of WAL, memtable-full
	// flushes, the idle flush), merged 1–2 times at the default and not
	// at all at 12. The price is up to 12 level-0 files a read seeks in
	// (their filter and index blocks stay pinned in the block cache).
	// Rollups keep the default: their level-0 files repeat the packs of
	// the hours and days a load spans, which a merge does shrink.
	chunksL0Trigger = 12
)

// Validate fills in defaults and rejects values that cannot work, naming
// the field.
func (o *Options) Validate() error {
	if o.Dir == "" {
		return errors.New("store options: Dir is empty")
	}
	o.PartitionDuration = cmp.Or(o.PartitionDuration, DefaultPartitionDuration)
	o.BlockCacheBytes = cmp.Or(o.BlockCacheBytes, DefaultBlockCacheBytes)
	o.WriteBufferBytes = cmp.Or(o.WriteBufferBytes, DefaultWriteBufferBytes)
	o.MaxOpenFiles = cmp.Or(o.MaxOpenFiles, DefaultMaxOpenFiles)
	o.MaxBackgroundJobs = cmp.Or(o.MaxBackgroundJobs, DefaultMaxBackgroundJobs)
	switch {
	case o.PartitionDuration < 0 || o.PartitionDuration%time.Hour != 0:
		return fmt.Errorf("store options: PartitionDuration %v is not a positive multiple of 1h", o.PartitionDuration)
	case o.BlockCacheBytes < 0:
		return fmt.Errorf("store options: BlockCacheBytes %d is negative", o.BlockCacheBytes)
	case o.WriteBufferBytes < minWriteBufferBytes:
		return fmt.Errorf("store options: WriteBufferBytes %d is below the minimum %d", o.WriteBufferBytes, minWriteBufferBytes)
	case o.MaxOpenFiles < minMaxOpenFiles:
		return fmt.Errorf("store options: MaxOpenFiles %d is below the minimum %d", o.MaxOpenFiles, minMaxOpenFiles)
	case o.MaxBackgroundJobs < 0:
		return fmt.Errorf("store options: MaxBackgroundJobs %d is negative", o.MaxBackgroundJobs)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// memtableBudget is the per-column-family memtable ceiling.
func (o *Options) memtableBudget() uint64 {
	return uint64(o.WriteBufferBytes) * writeBuffers
}

// compressions is what the linked librocksdb supports, in preference order.
type compressions struct {
	hot, cold grocksdb.CompressionType // see cfSpec.hot
}

// chooseCompressions probes the linked librocksdb once per process: LZ4 for
// the column families queries read in bulk (cheap to decode on a Pi CPU),
// ZSTD for the others (where most bytes rest), each falling back to Snappy
// and then to none.
var chooseCompressions = sync.OnceValue(func() compressions {
	pick := func(prefs ...grocksdb.CompressionType) grocksdb.CompressionType {
		for _, c := range prefs {
			if compressionLinked(c) {
				return c
			}
		}
		return grocksdb.NoCompression
	}
	return compressions{
		hot:  pick(grocksdb.LZ4Compression, grocksdb.SnappyCompression),
		cold: pick(grocksdb.ZSTDCompression, grocksdb.LZ4Compression, grocksdb.SnappyCompression),
	}
})

// compressionLinked reports whether RocksDB accepts c: DB::Open refuses a
// compression type that is not linked into the library, so open a throwaway
// DB in an in-memory file system with it.
func compressionLinked(c grocksdb.CompressionType) bool {
	opts := grocksdb.NewDefaultOptions()
	defer opts.Destroy() // also destroys the Env
	opts.SetEnv(grocksdb.NewMemEnv())
	opts.SetCreateIfMissing(true)
	opts.SetCompression(c)
	db, err := grocksdb.OpenDb(opts, "/compression-probe")
	if err != nil {
		return false
	}
	db.Close()
	return true
}

func compressionName(c grocksdb.CompressionType) string {
	switch c {
	case grocksdb.NoCompression:
		return "none"
	case grocksdb.SnappyCompression:
		return "snappy"
	case grocksdb.LZ4Compression:
		return "lz4"
	case grocksdb.ZSTDCompression:
		return "zstd"
	}
	return fmt.Sprintf("compression(%d)", c)
}

// dbOptions builds the DB-wide RocksDB options.
// manifestPreallocBytes is the MANIFEST's preallocation (RocksDB: 4 MiB).
const manifestPreallocBytes = 64 << 10

func dbOptions(o *Options) *grocksdb.Options {
	opts := grocksdb.NewDefaultOptions()
	opts.SetCreateIfMissing(true)
	opts.SetCreateIfMissingColumnFamilies(true)
	// The node writes chunks and rollups without RocksDB's WAL
	// (WriteUnlogged): a memtable that fills must then flush together with
	// the others, or a crash could keep a chunk and lose its rollup.
	opts.SetAtomicFlush(true)
	opts.SetMaxOpenFiles(o.MaxOpenFiles)
	opts.SetMaxBackgroundJobs(o.MaxBackgroundJobs)
	opts.SetBytesPerSync(bytesPerSync)
	opts.SetWALBytesPerSync(bytesPerSync)
	opts.SetDbWriteBufferSize(dbWriteBufferFactor * o.memtableBudget())
	// Without a WAL budget, a column family written rarely (meta, series)
	// keeps every WAL file alive until it happens to flush, and recovery
	// replays all of them.
	opts.SetMaxTotalWalSize(maxTotalWALSizeFactor * o.memtableBudget())
	// RocksDB's info LOG: warnings and errors only. At the info level it
	// logs every flush and compaction, some 40 KiB more for a day of a
	// hundred hosts, which beside a store of 3 MiB is a share of the data
	// directory at rest. Its header, the options in force (~75 KiB with
	// seven column families), is written at every open whatever the level,
	// so the LOGs of the last two opens are kept besides the current one.
	opts.SetInfoLogLevel(grocksdb.WarnInfoLogLevel)
	opts.SetKeepLogFileNum(rocksLogFilesKept)
	opts.SetMaxLogFileSize(rocksLogFileBytes)
	opts.SetStatsDumpPeriodSec(0) // no periodic LOG writes to the SD card
	// Statistics give the block cache hit and miss counters of /metrics
	// (Gauges); their cost is below the ingest benchmark's noise.
	opts.EnableStatistics()
	// No preallocation: RocksDB would fallocate 1.1 write buffers for each
	// WAL file and 4 MiB for the MANIFEST, blocks a data directory at rest
	// holds although they stay empty (its WAL carries little since flushes
	// bypass it).
	opts.SetManifestPreallocationSize(manifestPreallocBytes)
	// The series dictionary and postings of new series are the writes
	// that go through RocksDB's WAL (chunks and rollups do not),
	// about 590 bytes a series of eleven labels; zstd about halves what
	// reaches the disk.
	if chooseCompressions().cold == grocksdb.ZSTDCompression {
		opts.SetWALCompression(grocksdb.ZSTDCompression)
	}
	// Close flushes the memtables itself, in a crash-safe order
	// (flushOrdered); Abandon must leave them unflushed, as a crash does.
	// (No setters in the C API: parsed from an options string.)
	withAvoid, err := grocksdb.GetOptionsFromString(opts, "avoid_flush_during_shutdown=true;allow_fallocate=false")
	if err != nil {
		panic("BUG: store: " + err.Error())
	}
	opts.Destroy()
	return withAvoid
}

// cfSpec describes how one column family is tuned.
type cfSpec struct {
	name        string
	prefixBloom bool // bloom over the partition|series prefix
	keyBloom    bool // bloom over whole keys
	blockBytes  int
	// hot: read in bulk by queries, so every level keeps the
	// cheap-to-decompress codec; the others use the denser one.
	hot bool
	// l0Trigger: level-0 files that start a compaction; 0 is RocksDB's
	// default.
	l0Trigger int
	// writtenOnce: store flushes write each key once (a chunk is
	// rewritten only when late samples reach its hour), so its level-0
	// files hold next to nothing twice and CompactIdle leaves them to
	// RocksDB's own compactions (at l0Trigger files): merging them at
	// rest would rewrite the whole load to save about 3% of it.
	writtenOnce bool
}

// cfOptions builds the options of one column family; the caller destroys
// them after the DB is closed.
func cfOptions(o *Options, spec cfSpec, cache *grocksdb.Cache, comp compressions) (*grocksdb.Options, error) {
	bbto := grocksdb.NewDefaultBlockBasedTableOptions()
	defer bbto.Destroy() // the table factory keeps its own copy
	bbto.SetBlockCache(cache)
	bbto.SetCacheIndexAndFilterBlocks(true)
	bbto.SetCacheIndexAndFilterBlocksWithHighPriority(true)
	bbto.SetPinL0FilterAndIndexBlocksInCache(true)
	if spec.blockBytes > 0 {
		bbto.SetBlockSize(spec.blockBytes)
	}
	if spec.prefixBloom || spec.keyBloom {
		bbto.SetFilterPolicy(grocksdb.NewBloomFilterFull(bloomBitsPerKey)) // moved into bbto
		bbto.SetWholeKeyFiltering(spec.keyBloom)
	}

	opts := grocksdb.NewDefaultOptions()
	opts.SetBlockBasedTableFactory(bbto)
	if spec.name == cfDefault {
		opts.SetWriteBufferSize(defaultCFBufferBytes)
	} else {
		opts.SetWriteBufferSize(uint64(o.WriteBufferBytes))
	}
	opts.SetMaxWriteBufferNumber(writeBuffers)
	opts.SetCompactionStyle(grocksdb.LevelCompactionStyle)
	opts.SetLevelCompactionDynamicLevelBytes(true)
	opts.SetMaxBytesForLevelBase(levelBaseBytes)
	opts.SetTargetFileSizeBase(targetFileBytes)
	if spec.l0Trigger > 0 {
		opts.SetLevel0FileNumCompactionTrigger(spec.l0Trigger)
	}
	// Cold column families use the dense codec at every level, the
	// memtable flushes' level 0 included: with the node's few, large store
	// flushes most of a store at rest is level-0 output not yet compacted,
	// and the codec's CPU is small beside the ingest (chunks arrive
	// compressed, under a byte a point). Reads of compacted data pay it
	// already.
	if spec.hot {
		opts.SetCompression(comp.hot)
		opts.SetBottommostCompression(comp.hot)
	} else {
		opts.SetCompression(comp.cold)
		opts.SetBottommostCompression(comp.cold)
	}
	if !spec.prefixBloom {
		return opts, nil
	}

	// NB: the prefix extractor is set through an options string, not
	// Options.SetPrefixExtractor: grocksdb's Options.Destroy frees a
	// directly-set extractor that RocksDB also owns, a double free.
	defer opts.Destroy()
	withPrefix, err := grocksdb.GetOptionsFromString(opts,
		fmt.Sprintf("prefix_extractor=rocksdb.FixedPrefix.%d", seriesPrefixLen))
	if err != nil {
		return nil, fmt.Errorf("column family %s options: %w", spec.name, err)
	}
	return withPrefix, nil
}
