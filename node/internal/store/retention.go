package store

import (
	"bytes"
	"fmt"

	"github.com/linxGnu/grocksdb"
)

// DropBefore removes every partition of k that ends at or before t (Unix
// ms): all data of k with partition start + width <= t. It returns how many
// partitions held data. Its cost depends on the number of partitions and SST
// files, not on the number of series: one range tombstone hides the data at
// once, and the SST files wholly inside the range are deleted to give the
// space back; the rest is reclaimed by compaction.
func (db *DB) DropBefore(k Kind, t int64) (partitions int, err error) {
	if !k.valid() {
		panic(fmt.Sprintf("BUG: store: DropBefore with kind %v", k))
	}
	if err := db.acquire(); err != nil {
		return 0, err
	}
	defer db.release()
	cf := db.timeCFs[k]
	// INVARIANT: partition starts are aligned, so "p + width <= t" is
	// "p < cut".
	cut := partitionStart(clampTime(t), db.widthMs(k))
	err = db.walkPartitions(k, cut, func(int64) { partitions++ })
	if err != nil || partitions == 0 {
		return 0, err
	}

	// Counted once returned, failed or not (see ChunkReader).
	defer db.writes.Add(1)

	start := make([]byte, partitionPrefixLen) // below every key
	end := appendTime(nil, cut)               // first key of partition cut
	// Inclusive upper key for DeleteFilesInRange: the largest possible key
	// of a partition before cut. Using end instead would also delete a file
	// whose largest key is the first key of partition cut, with live data.
	last := append(appendTime(nil, cut-1), bytes.Repeat([]byte{0xFF}, timeKeyLen-partitionPrefixLen)...)

	db.writeMu.RLock()
	defer db.writeMu.RUnlock()
	if err := db.rdb.DeleteRangeCF(db.writeOpts, cf, start, end); err != nil {
		return 0, fmt.Errorf("drop %s before %d: delete range: %w", k, t, err)
	}
	if err := db.rdb.DeleteFileInRangeCF(cf, grocksdb.Range{Start: start, Limit: last}); err != nil {
		return 0, fmt.Errorf("drop %s before %d: delete files: %w", k, t, err)
	}
	// Deleting files can take with it the file holding a fragment of the
	// tombstone above while a lower-level file that straddles the range
	// boundary keeps old keys it covered; a fresh tombstone hides them again.
	if err := db.rdb.DeleteRangeCF(db.writeOpts, cf, start, end); err != nil {
		return 0, fmt.Errorf("drop %s before %d: delete range: %w", k, t, err)
	}
	db.log.Info("store: dropped partitions", "kind", k.String(), "before", cut, "partitions", partitions)
	return partitions, nil
}

// Partitions returns the start of every partition of k that holds data,
// ascending.
func (db *DB) Partitions(k Kind) ([]int64, error) {
	if !k.valid() {
		panic(fmt.Sprintf("BUG: store: Partitions with kind %v", k))
	}
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()
	var ps []int64
	err := db.walkPartitions(k, MaxTimestampMs, func(p int64) { ps = append(ps, p) })
	return ps, err
}

// walkPartitions calls fn with the start of every partition of k below
// before, ascending, seeking from each partition to the next instead of
// reading its keys.
// REQUIRES: db acquired; before <= MaxTimestampMs.
func (db *DB) walkPartitions(k Kind, before int64, fn func(p int64)) error {
	w := db.widthMs(k)
	s := db.openScan(db.timeCFs[k], scanTotal, nil)
	defer s.close()
	var seek [partitionPrefixLen]byte
	s.seek(nil, nil, 1)
	for {
		kb, _, ok := s.next()
		if !ok {
			break
		}
		if len(kb) != timeKeyLen {
			return fmt.Errorf("%w: %s key %x", ErrCorrupt, k, kb)
		}
		p := decodeTime(kb)
		if p >= before {
			break
		}
		fn(p)
		s.seek(appendTime(seek[:0], p+w), nil, 1) // NB: p < before <= MaxTimestampMs, no overflow
	}
	if s.err != nil {
		return fmt.Errorf("list %s partitions: %w", k, s.err)
	}
	return nil
}

// partitionBounds returns the first and last partition of k that hold data.
// REQUIRES: db acquired.
func (db *DB) partitionBounds(k Kind) (first, last int64, found bool, err error) {
	s := db.openScan(db.timeCFs[k], scanTotal, nil)
	defer s.close()
	var bounds [2]int64
	for i := range bounds {
		if i == 0 {
			s.seek(nil, nil, 1)
		} else {
			s.seekLast()
		}
		kb, _, ok := s.next()
		if !ok {
			if s.err != nil {
				return 0, 0, false, fmt.Errorf("find %s partitions: %w", k, s.err)
			}
			return 0, 0, false, nil
		}
		if len(kb) != timeKeyLen {
			return 0, 0, false, fmt.Errorf("%w: %s key %x", ErrCorrupt, k, kb)
		}
		bounds[i] = decodeTime(kb)
	}
	return bounds[0], bounds[1], true, nil
}
