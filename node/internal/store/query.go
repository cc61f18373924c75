package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ChunkMeta identifies a stored chunk: its series and the time range
// [MinT, MaxT] (Unix ms, inclusive) its samples cover.
type ChunkMeta struct {
	SeriesID   uint64
	MinT, MaxT int64
}

// Chunks calls fn for every chunk of seriesID that overlaps [minT, maxT],
// in ascending MinT, stopping at the first error fn returns, which Chunks
// returns unchanged. data is valid only until fn returns; copy it to keep it.
func (db *DB) Chunks(seriesID uint64, minT, maxT int64, fn func(c ChunkMeta, data []byte) error) error {
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	if minT > maxT {
		return nil
	}
	s := db.openScan(db.timeCFs[KindChunks], scanPrefix, nil)
	defer s.close()
	return db.chunksWith(s, seriesID, minT, maxT, fn)
}

// chunksWith is Chunks on an open scan of the chunks, which must have been
// opened before it is called. REQUIRES: db acquired, minT <= maxT.
func (db *DB) chunksWith(s *scan, seriesID uint64, minT, maxT int64, fn func(c ChunkMeta, data []byte) error) error {
	minT, maxT = clampTime(minT), clampTime(maxT)
	// A chunk that starts before minT may still reach into the range, but
	// not one that starts more than the longest span before it, nor one in
	// an earlier partition: chunks never cross a partition boundary.
	// NB: computed after the scan was opened, as scanSeries does.
	from := max(MinTimestampMs, minT-db.maxChunkSpanMs.Load())
	pLo, pHi, err := db.partitionsOf(KindChunks, minT, maxT)
	if err != nil {
		return err
	}
	return db.scanSeriesWith(s, KindChunks, seriesID, from, pLo, pHi, maxT, func(t int64, v []byte) error {
		span, n := binary.Uvarint(v)
		if n <= 0 || span > uint64(MaxTimestampMs-t) {
			return fmt.Errorf("%w: chunk of series %d at %d: bad header", ErrCorrupt, seriesID, t)
		}
		c := ChunkMeta{SeriesID: seriesID, MinT: t, MaxT: t + int64(span)}
		if c.MaxT < minT {
			return nil
		}
		return fn(c, v[n:])
	})
}

// ChunkReader reads the chunks of several series, one after another,
// through one RocksDB iterator instead of one per series as DB.Chunks
// does: a query over many series opens and closes an iterator once.
//
// An iterator reads the store as of its creation. The reader creates it
// at its first read, and again at a read that finds the store written
// since (DB.writes counts every write of stored data once it has
// returned), so each read sees every write that returned before the read
// began, as DB.Chunks does: a caller that looked elsewhere first (the
// node's head, which drops flushed data only after the write returned)
// misses nothing in between. A ChunkReader is not safe for concurrent
// use; Close releases it.
type ChunkReader struct {
	db     *DB
	s      *scan  // nil: none open
	writes uint64 // db.writes when s was opened
}

// NewChunkReader returns a reader of db's chunks; it holds nothing until
// its first read.
func (db *DB) NewChunkReader() *ChunkReader { return &ChunkReader{db: db} }

// Chunks is DB.Chunks through the reader's iterator.
func (r *ChunkReader) Chunks(seriesID uint64, minT, maxT int64, fn func(c ChunkMeta, data []byte) error) error {
	if minT > maxT {
		return nil
	}
	db := r.db
	if r.s != nil && db.writes.Load() != r.writes {
		r.Close()
	}
	if r.s == nil {
		// Held until Close: the scan needs the DB open.
		if err := db.acquire(); err != nil {
			return err
		}
		r.writes = db.writes.Load() // before the iterator: it sees at least these
		r.s = db.openScan(db.timeCFs[KindChunks], scanPrefix, nil)
	}
	err := db.chunksWith(r.s, seriesID, minT, maxT, fn)
	if r.s.err != nil {
		r.Close() // the iterator's error stays with it: the next read opens another
	}
	return err
}

// Close frees the reader's iterator, if any. The reader may be used
// again.
func (r *ChunkReader) Close() {
	if r.s == nil {
		return
	}
	r.s.close()
	r.s = nil
	r.db.release()
}

// Rollups calls fn for every bucket of seriesID in the rollup tier k
// (KindRollup1h or KindRollup1d) with start <= bucketStart <= end, in
// ascending order, stopping at the first error fn returns, which Rollups
// returns unchanged. val is valid only until fn returns.
func (db *DB) Rollups(k Kind, seriesID uint64, start, end int64, fn func(bucketStart int64, val []byte) error) error {
	if k != KindRollup1h && k != KindRollup1d {
		panic(fmt.Sprintf("BUG: store: Rollups with kind %v", k))
	}
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	if start > end {
		return nil
	}
	start, end = clampTime(start), clampTime(end)
	return db.scanSeries(k, seriesID, start, func() int64 { return start }, end, fn)
}

// Rollup returns a copy of the value of the bucket of rollup tier k of
// seriesID that starts at bucketStart; found is false when none is stored.
// A point read: for one bucket it costs less than Rollups, which creates
// and seeks an iterator (the flush reads the open hourly and daily packs
// of every series it writes this way).
func (db *DB) Rollup(k Kind, seriesID uint64, bucketStart int64) (val []byte, found bool, err error) {
	if k != KindRollup1h && k != KindRollup1d {
		panic(fmt.Sprintf("BUG: store: Rollup with kind %v", k))
	}
	if err := db.acquire(); err != nil {
		return nil, false, err
	}
	defer db.release()
	t := clampTime(bucketStart)
	var key [timeKeyLen]byte
	return db.get(db.timeCFs[k], appendTimeKey(key[:0], partitionStart(t, db.widthMs(k)), seriesID, t))
}

// scanSeries calls visit for the keys of seriesID in column family k, in
// ascending time: in each partition from partitionStart(lo) through
// partitionStart(hi), the keys with time in [max(partition, from()), hi].
// val is valid only until visit returns. Errors from visit are returned
// unchanged.
// REQUIRES: db acquired; lo <= hi, both within the supported time range.
func (db *DB) scanSeries(k Kind, seriesID uint64, lo int64, from func() int64, hi int64, visit func(t int64, val []byte) error) error {
	// One prefix-bounded scan serves every partition: each seek is confined
	// to partition|series, and the prefix bloom filters skip the SST files
	// that hold nothing of the series in that partition.
	s := db.openScan(db.timeCFs[k], scanPrefix, nil)
	defer s.close()
	// NB: the scan reads the data as of its creation. Everything below is
	// computed after it, so it describes the same or newer data: a chunk
	// the scan sees was written after its span was published, and a
	// partition it sees is still there (or dropped whole) for the bounds.
	pLo, pHi, err := db.partitionsOf(k, lo, hi)
	if err != nil {
		return err
	}
	return db.scanSeriesWith(s, k, seriesID, from(), pLo, pHi, hi, visit)
}

// partitionsOf returns the first and last partition of k to visit for
// [lo, hi] (pLo > pHi: none).
func (db *DB) partitionsOf(k Kind, lo, hi int64) (pLo, pHi int64, err error) {
	w := db.widthMs(k)
	pLo, pHi = partitionStart(lo, w), partitionStart(hi, w)
	if pLo != pHi {
		// An open-ended range (say from MinTimestampMs) must not walk
		// millions of empty partitions: narrow it to those that exist.
		first, last, found, err := db.partitionBounds(k)
		if err != nil {
			return 0, 0, err
		}
		if !found {
			return 1, 0, nil
		}
		pLo, pHi = max(pLo, first), min(pHi, last)
	}
	return pLo, pHi, nil
}

// scanSeriesWith is scanSeries on an open scan, over the partitions
// pLo..pHi, from time start.
func (db *DB) scanSeriesWith(s *scan, k Kind, seriesID uint64, start, pLo, pHi, hi int64, visit func(t int64, val []byte) error) error {
	w := db.widthMs(k)
	var seek, limit [timeKeyLen]byte
	for p := pLo; p <= pHi; p += w {
		// The limit partition|series|hi+1 ends each batch at hi, instead of
		// reading ahead into the rest of the partition. NB: hi+1 cannot
		// overflow, hi <= MaxTimestampMs.
		s.seek(appendTimeKey(seek[:0], p, seriesID, max(p, start)), appendTimeKey(limit[:0], p, seriesID, hi+1), 0)
		for kb, val, ok := s.next(); ok; kb, val, ok = s.next() {
			if len(kb) != timeKeyLen {
				return fmt.Errorf("%w: %s key %x", ErrCorrupt, k, kb)
			}
			if err := visit(decodeTime(kb[seriesPrefixLen:]), val); err != nil {
				return err
			}
		}
		if s.err != nil {
			return fmt.Errorf("scan %s of series %d in partition %d: %w", k, seriesID, p, s.err)
		}
	}
	return nil
}

// ErrNextSeries, returned by the callback of RollupsOfSeries, skips the
// rest of the current series' buckets.
var ErrNextSeries = errors.New("next series")

// RollupsOfSeries calls fn for every bucket with start <= bucketStart <=
// end of each series of ids in turn, as Rollups does for one, with one
// RocksDB iterator for them all: listing many series costs a seek per
// series and partition, not an iterator each. fn returning ErrNextSeries
// moves on to the next series; any other error stops the scan and is
// returned unchanged.
func (db *DB) RollupsOfSeries(k Kind, ids []uint64, start, end int64, fn func(id uint64, bucketStart int64, val []byte) error) error {
	if k != KindRollup1h && k != KindRollup1d {
		panic(fmt.Sprintf("BUG: store: RollupsOfSeries with kind %v", k))
	}
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	if start > end || len(ids) == 0 {
		return nil
	}
	start, end = clampTime(start), clampTime(end)
	s := db.openScan(db.timeCFs[k], scanPrefix, nil)
	defer s.close()
	pLo, pHi, err := db.partitionsOf(k, start, end)
	if err != nil {
		return err
	}
	for _, id := range ids {
		err := db.scanSeriesWith(s, k, id, start, pLo, pHi, end, func(t int64, val []byte) error { return fn(id, t, val) })
		if err != nil && !errors.Is(err, ErrNextSeries) {
			return err
		}
	}
	return nil
}
