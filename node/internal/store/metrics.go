package store

import (
	"strconv"
	"strings"
)

// Gauges are the store figures a metrics scrape reads: cheap RocksDB
// properties and statistics tickers, no iteration over keys.
type Gauges struct {
	// SSTBytes is the size of the live SST files of each column family.
	SSTBytes               map[string]int64
	MemtableBytes          int64 // active and unflushed memtables, all column families
	PendingCompactionBytes int64 // RocksDB's estimate of bytes compaction still has to rewrite
	BlockCacheBytes        int64 // block cache in use
	// BlockCacheHits and BlockCacheMisses count block cache lookups since
	// Open (RocksDB statistics tickers rocksdb.block.cache.hit and .miss).
	BlockCacheHits, BlockCacheMisses int64
	// FlushWriteBytes, CompactionWriteBytes and WALWriteBytes count the
	// bytes RocksDB wrote since Open by memtable flushes, by compactions
	// and into its own WAL (tickers rocksdb.flush.write.bytes,
	// rocksdb.compact.write.bytes, rocksdb.wal.bytes): the store's share
	// of what the node writes to storage. WALWriteBytes counts records
	// before RocksDB's WAL compression.
	FlushWriteBytes, CompactionWriteBytes, WALWriteBytes int64
}

// Gauges reads the figures of Gauges. It fails only on a closed store.
func (db *DB) Gauges() (Gauges, error) {
	if err := db.acquire(); err != nil {
		return Gauges{}, err
	}
	defer db.release()
	g := Gauges{SSTBytes: make(map[string]int64, len(cfSpecs))}
	for i, h := range db.handles {
		g.SSTBytes[cfSpecs[i].name] = db.intProperty("rocksdb.total-sst-files-size", h)
		g.MemtableBytes += db.intProperty("rocksdb.size-all-mem-tables", h)
		g.PendingCompactionBytes += db.intProperty("rocksdb.estimate-pending-compaction-bytes", h)
	}
	g.BlockCacheBytes = int64(db.cache.GetUsage())
	g.BlockCacheHits, g.BlockCacheMisses = tickers(db.dbOpts.GetStatisticsString(),
		"rocksdb.block.cache.hit", "rocksdb.block.cache.miss")
	g.FlushWriteBytes, g.CompactionWriteBytes = tickers(db.dbOpts.GetStatisticsString(),
		"rocksdb.flush.write.bytes", "rocksdb.compact.write.bytes")
	g.WALWriteBytes, _ = tickers(db.dbOpts.GetStatisticsString(), "rocksdb.wal.bytes", "")
	return g, nil
}

// tickers picks two counters out of RocksDB's statistics dump, whose
// ticker lines read "rocksdb.block.cache.hit COUNT : 12". A ticker
// missing from the dump (statistics off) reads 0.
func tickers(dump, a, b string) (va, vb int64) {
	for line := range strings.Lines(dump) {
		name, rest, ok := strings.Cut(line, " COUNT : ")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case a:
			dst = &va
		case b:
			dst = &vb
		default:
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil {
			*dst = v
		}
	}
	return va, vb
}
