package store

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/linxGnu/grocksdb"
)

// NumLevels is the number of LSM levels of a column family (RocksDB's
// default num_levels, which cfOptions leaves alone).
const NumLevels = 7

// compactPollInterval is how often CompactIdle asks whether it must give
// way to writes.
const compactPollInterval = 100 * time.Millisecond

// IdleCompaction is what one CompactIdle did.
type IdleCompaction struct {
	// ColumnFamilies is the number of column families it compacted (0:
	// nothing was left to merge).
	ColumnFamilies int
	// WrittenBytes is what RocksDB's compactions wrote while it ran
	// (statistics ticker rocksdb.compact.write.bytes).
	WrittenBytes int64
	// Aborted: stop closed or busy reported true before it was done; what
	// it compacted so far stays compacted.
	Aborted bool
}

// CompactIdle merges what flushes left above the bottom level of each
// column family (level-0 files, files in upper levels) into it, so that the
// store at rest takes what a full compaction leaves, without rewriting the
// bottom level itself: only bottom files that overlap newer data are
// rewritten, which with time-partitioned keys are the recent partitions'.
// A column family whose files are all in one level below level 0 is left
// alone.
//
// It never blocks writes: RocksDB's own flushes and compactions go on
// beside it. Once stop is closed or busy (polled every 100 ms) reports true
// it cancels its running compaction and returns within one RocksDB work
// step; the next call picks up what is left.
func (db *DB) CompactIdle(stop <-chan struct{}, busy func() bool) (IdleCompaction, error) {
	if err := db.acquire(); err != nil {
		return IdleCompaction{}, err
	}
	defer db.release()

	var res IdleCompaction
	var todo []*grocksdb.ColumnFamilyHandle
	for _, h := range db.handles {
		if db.needsCompaction(h) {
			todo = append(todo, h)
		}
	}
	if len(todo) == 0 {
		return res, nil
	}

	// The watcher cancels the running compaction: RocksDB's
	// DisableManualCompaction makes it stop at its next work step and
	// CompactRange return.
	var (
		mu      sync.Mutex
		aborted bool
	)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(compactPollInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-stop:
			case <-tick.C:
				if busy == nil || !busy() {
					continue
				}
			}
			mu.Lock()
			aborted = true
			mu.Unlock()
			db.rdb.DisableManualCompaction()
			return
		}
	}()
	isAborted := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return aborted
	}

	before, _ := tickers(db.dbOpts.GetStatisticsString(), "rocksdb.compact.write.bytes", "")
	co := grocksdb.NewCompactRangeOptions()
	defer co.Destroy()
	// Writes (and the flushes and compactions they cause) go on meanwhile.
	co.SetExclusiveManualCompaction(false)
	// Merge the upper levels into the bottom one, but do not rewrite the
	// bottom level's files among themselves: that costs the whole store
	// for nothing once they are compacted.
	co.SetBottommostLevelCompaction(grocksdb.KSkip)
	for _, h := range todo {
		if isAborted() || db.closed.Load() {
			res.Aborted = true
			break
		}
		db.rdb.CompactRangeCFOpt(h, grocksdb.Range{}, co) // reports no error
		res.ColumnFamilies++
	}
	close(done)
	<-exited
	if isAborted() {
		res.Aborted = true
		db.rdb.EnableManualCompaction()
	}
	if db.closed.Load() {
		res.Aborted = true // by Close, which disabled manual compactions
	}
	after, _ := tickers(db.dbOpts.GetStatisticsString(), "rocksdb.compact.write.bytes", "")
	res.WrittenBytes = after - before
	return res, nil
}

// needsCompaction reports whether h has files in level 0 or in more than
// one level. (A lone level-0 file moves down without being rewritten.)
func (db *DB) needsCompaction(h *grocksdb.ColumnFamilyHandle) bool {
	levels := 0
	for l := range NumLevels {
		n := db.levelFiles(h, l)
		if l == 0 && n > 0 {
			return true
		}
		if n > 0 {
			levels++
		}
	}
	return levels > 1
}

// LevelFiles returns the number of SST files in each level of every
// column family, by column family name.
func (db *DB) LevelFiles() (map[string][NumLevels]int, error) {
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()
	out := make(map[string][NumLevels]int, len(cfSpecs))
	for i, h := range db.handles {
		var per [NumLevels]int
		for l := range NumLevels {
			per[l] = db.levelFiles(h, l)
		}
		out[cfSpecs[i].name] = per
	}
	return out, nil
}

// levelFiles returns the number of SST files of h in level l (a string
// property, which GetIntPropertyCF does not read), 0 when RocksDB does not
// know it.
func (db *DB) levelFiles(h *grocksdb.ColumnFamilyHandle, l int) int {
	n, err := strconv.Atoi(db.rdb.GetPropertyCF(fmt.Sprintf("rocksdb.num-files-at-level%d", l), h))
	if err != nil {
		return 0
	}
	return n
}
