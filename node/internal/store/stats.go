package store

import "github.com/linxGnu/grocksdb"

// Stats is a snapshot of the store's size and memory.
type Stats struct {
	SSTBytes               int64          // live SST files, all column families
	MemtableBytes          int64          // active and unflushed memtables
	BlockCacheBytes        int64          // block cache in use
	PendingCompactionBytes int64          // RocksDB's estimate of bytes left to compact
	Partitions             map[string]int // partitions holding data, by Kind.String()
}

// Stats reads RocksDB's properties and counts partitions (one seek each).
func (db *DB) Stats() (Stats, error) {
	if err := db.acquire(); err != nil {
		return Stats{}, err
	}
	defer db.release()
	var s Stats
	for _, h := range db.handles {
		s.SSTBytes += db.intProperty("rocksdb.total-sst-files-size", h)
		s.MemtableBytes += db.intProperty("rocksdb.size-all-mem-tables", h)
		s.PendingCompactionBytes += db.intProperty("rocksdb.estimate-pending-compaction-bytes", h)
	}
	s.BlockCacheBytes = int64(db.cache.GetUsage())
	s.Partitions = make(map[string]int, len(kinds))
	for _, k := range kinds {
		n := 0
		if err := db.walkPartitions(k, MaxTimestampMs, func(int64) { n++ }); err != nil {
			return Stats{}, err
		}
		s.Partitions[k.String()] = n
	}
	return s, nil
}

// intProperty returns an integer property of a column family, 0 when
// RocksDB does not know it.
func (db *DB) intProperty(name string, h *grocksdb.ColumnFamilyHandle) int64 {
	v, ok := db.rdb.GetIntPropertyCF(name, h)
	if !ok {
		return 0
	}
	return int64(v)
}
