package store

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/linxGnu/grocksdb"
	"github.com/tributarydb/tributary/node/labels"
)

// Batch collects writes that DB.Write applies atomically. It is not safe for
// concurrent use; putting into it after its DB is closed panics. Close it
// when done; Reset makes it reusable.
type Batch struct {
	db  *DB
	wb  *grocksdb.WriteBatch
	key []byte // scratch; RocksDB copies keys and values into the batch
	val []byte

	maxSpanMs int64 // longest maxT-minT of the chunks put
	// bytes approximates the batch's memory: the keys and values put, plus
	// a few bytes of framing each.
	bytes int
}

// batchEntryOverhead approximates RocksDB's framing of one batch entry (a
// tag, a column family id and two length varints).
const batchEntryOverhead = 8

// NewBatch returns an empty batch for db.
func (db *DB) NewBatch() *Batch {
	return &Batch{db: db, wb: grocksdb.NewWriteBatch()}
}

// begin checks that b and its DB are open and holds the DB open (the batch
// refers to its column family handles) until the matching b.db.release().
func (b *Batch) begin() {
	if b.wb == nil {
		panic("BUG: store: use of a closed Batch")
	}
	if err := b.db.acquire(); err != nil {
		panic("BUG: store: Batch used after its DB was closed")
	}
}

// PutSeries records a series: its labels under its id, and one postings key
// per label with a non-empty value.
func (b *Batch) PutSeries(id uint64, ls labels.Labels) {
	b.begin()
	defer b.db.release()
	b.key = appendID(b.key[:0], id)
	b.val = ls.AppendKey(b.val[:0])
	b.wb.PutCF(b.db.series, b.key, b.val)
	b.bytes += len(b.key) + len(b.val) + batchEntryOverhead
	for _, l := range ls {
		if l.Value == "" {
			continue
		}
		b.key = appendPostingsKey(b.key[:0], l.Name, l.Value, id)
		b.wb.PutCF(b.db.postings, b.key, nil)
		b.bytes += len(b.key) + batchEntryOverhead
	}
}

// PutChunk stores a chunk covering [minT, maxT] (Unix ms, inclusive).
// REQUIRES: minT <= maxT, both in [MinTimestampMs, MaxTimestampMs], and in
// the same partition of the DB's PartitionDuration.
func (b *Batch) PutChunk(seriesID uint64, minT, maxT int64, data []byte) {
	b.begin()
	defer b.db.release()
	if minT > maxT || !inTimeRange(minT) || !inTimeRange(maxT) {
		panic(fmt.Sprintf("BUG: store: chunk [%d, %d] is empty or outside the supported time range", minT, maxT))
	}
	p := partitionStart(minT, b.db.chunkWidthMs)
	if maxT >= p+b.db.chunkWidthMs {
		panic(fmt.Sprintf("BUG: store: chunk [%d, %d] crosses the partition boundary %d", minT, maxT, p+b.db.chunkWidthMs))
	}
	b.maxSpanMs = max(b.maxSpanMs, maxT-minT)
	b.key = appendTimeKey(b.key[:0], p, seriesID, minT)
	b.val = binary.AppendUvarint(b.val[:0], uint64(maxT-minT))
	b.val = append(b.val, data...)
	b.wb.PutCF(b.db.timeCFs[KindChunks], b.key, b.val)
	b.bytes += len(b.key) + len(b.val) + batchEntryOverhead
}

// DeleteChunk deletes the chunk of seriesID that starts at minT, if any.
func (b *Batch) DeleteChunk(seriesID uint64, minT int64) {
	b.begin()
	defer b.db.release()
	if !inTimeRange(minT) {
		panic(fmt.Sprintf("BUG: store: chunk start %d outside the supported time range", minT))
	}
	b.key = appendTimeKey(b.key[:0], partitionStart(minT, b.db.chunkWidthMs), seriesID, minT)
	b.wb.DeleteCF(b.db.timeCFs[KindChunks], b.key)
	b.bytes += len(b.key) + batchEntryOverhead
}

// PutRollup stores the rollup value of one bucket; k is KindRollup1h or
// KindRollup1d. The store does not interpret bucketStart beyond placing it
// in its partition.
func (b *Batch) PutRollup(k Kind, seriesID uint64, bucketStart int64, val []byte) {
	b.begin()
	defer b.db.release()
	if k != KindRollup1h && k != KindRollup1d {
		panic(fmt.Sprintf("BUG: store: PutRollup with kind %v", k))
	}
	if !inTimeRange(bucketStart) {
		panic(fmt.Sprintf("BUG: store: bucket start %d outside the supported time range", bucketStart))
	}
	b.key = appendTimeKey(b.key[:0], partitionStart(bucketStart, b.db.widthMs(k)), seriesID, bucketStart)
	b.wb.PutCF(b.db.timeCFs[k], b.key, val)
	b.bytes += len(b.key) + len(val) + batchEntryOverhead
}

// PutMeta sets a metadata key. Keys starting with "store." are reserved.
func (b *Batch) PutMeta(key string, val []byte) {
	b.begin()
	defer b.db.release()
	if isReservedMetaKey(key) {
		panic(fmt.Sprintf("BUG: store: meta key %q is reserved", key))
	}
	b.wb.PutCF(b.db.meta, []byte(key), val)
	b.bytes += len(key) + len(val) + batchEntryOverhead
}

// DeleteMeta deletes a metadata key. Keys starting with "store." are
// reserved.
func (b *Batch) DeleteMeta(key string) {
	b.begin()
	defer b.db.release()
	if isReservedMetaKey(key) {
		panic(fmt.Sprintf("BUG: store: meta key %q is reserved", key))
	}
	b.wb.DeleteCF(b.db.meta, []byte(key))
	b.bytes += len(key) + batchEntryOverhead
}

// DeleteMetaPrefix deletes every metadata key that starts with prefix
// (one range deletion, whatever the number of keys). The prefix must not
// overlap the reserved "store." keys.
func (b *Batch) DeleteMetaPrefix(prefix string) {
	b.begin()
	defer b.db.release()
	if prefix == "" || isReservedMetaKey(prefix) || strings.HasPrefix(reservedMetaPrefix, prefix) {
		panic(fmt.Sprintf("BUG: store: meta prefix %q covers reserved keys", prefix))
	}
	b.wb.DeleteRangeCF(b.db.meta, []byte(prefix), PrefixEnd([]byte(prefix)))
	b.bytes += 2*len(prefix) + batchEntryOverhead
}

// Len returns the number of RocksDB operations in the batch (PutSeries
// counts one plus one per label).
func (b *Batch) Len() int {
	if b.wb == nil {
		return 0
	}
	return b.wb.Count()
}

// Bytes approximates the memory the batch holds: what RocksDB copied into
// it, which its memtables copy again when it is written.
func (b *Batch) Bytes() int { return b.bytes }

// Reset empties the batch for reuse.
func (b *Batch) Reset() {
	if b.wb != nil {
		b.wb.Clear()
	}
	b.maxSpanMs = 0
	b.bytes = 0
}

// Close frees the batch. Closing twice is a no-op.
func (b *Batch) Close() {
	if b.wb != nil {
		b.wb.Destroy()
		b.wb = nil
	}
}

// widthMs returns the partition width of k.
func (db *DB) widthMs(k Kind) int64 {
	switch k {
	case KindChunks:
		return db.chunkWidthMs
	case KindRollup1h:
		return rollup1hWidthMs
	case KindRollup1d:
		return rollup1dWidthMs
	}
	panic(fmt.Sprintf("BUG: store: unknown kind %d", int(k)))
}
