package store

import (
	"bytes"
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
// way to writes (a variable for the tests, which need a compaction cut
// short within its first milliseconds on a fast disk).
var compactPollInterval = 100 * time.Millisecond

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
// column family (level-0 files, files in upper levels) into it, so that
// what flushes rewrite (rollup packs, postings, the series dictionary) is
// kept once at rest, as a full compaction leaves it, without rewriting the
// bottom level itself: only bottom files that overlap newer data are
// rewritten, which with time-partitioned keys are the recent partitions'.
// A column family whose files are all in one level below level 0 is left
// alone, and so is one where the merge would rewrite more than
// maxIdleRewriteFactor times the bytes it merges (see needsCompaction), and
// one whose flushes write each key once (cfSpec.writtenOnce: the chunks),
// where merging saves little space for a rewrite of all that was flushed.
//
// It blocks writes only while it flushes the memtables first (as every
// store flush does, DB.writeMu); RocksDB's own flushes and compactions go
// on beside its compactions. It holds the store's flush lock while it
// runs (DB.flushMu); once stop is closed, busy (polled every
// 100 ms) reports true or a Flush waits for the lock, it cancels its
// running compaction and returns within one RocksDB work step; the next
// call picks up what is left.
func (db *DB) CompactIdle(stop <-chan struct{}, busy func() bool) (IdleCompaction, error) {
	if err := db.acquire(); err != nil {
		return IdleCompaction{}, err
	}
	defer db.release()
	db.manualMu.Lock()
	defer db.manualMu.Unlock()

	var res IdleCompaction
	var todo []*grocksdb.ColumnFamilyHandle
	for i, h := range db.handles {
		if !cfSpecs[i].writtenOnce && db.needsCompaction(h) {
			todo = append(todo, h)
		}
	}
	if len(todo) == 0 {
		return res, nil
	}

	// CompactRange flushes the memtables it overlaps before it compacts,
	// a flush that must not run beside the store's own (DB.flushMu). The
	// memtables are flushed first, so that at rest it has nothing to
	// flush; a flush the node asks for meanwhile makes it give way (busy).
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	if err := db.flushOrderedLocked(); err != nil {
		return res, err
	}
	wait := busy
	busy = func() bool { return db.flushWaiting.Load() > 0 || (wait != nil && wait()) }

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
				if !busy() {
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
	db.idleCompacting.Store(true)
	defer db.idleCompacting.Store(false)
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

// maxIdleRewriteFactor bounds what CompactIdle rewrites per byte it
// merges: a column family is compacted when its files above the bottom
// level, together with the bottom files their key range overlaps, come to
// at most this many times the bytes above the bottom level.
const maxIdleRewriteFactor = 4

// needsCompaction reports whether h has files in level 0 or in more than
// one level (a lone level-0 file moves down without being rewritten), and
// merging them costs at most maxIdleRewriteFactor times their size: the
// bottom-level files that overlap their key range are rewritten with them.
// Otherwise RocksDB's own compactions merge them when their size calls for
// it; an idle period of a small write leaves them where they are.
func (db *DB) needsCompaction(h *grocksdb.ColumnFamilyHandle) bool {
	md := db.rdb.GetColumnFamilyMetadataCF(h)
	if md == nil {
		return false
	}
	bottom := -1
	for _, lm := range md.LevelMetas() {
		if len(lm.SstMetas()) > 0 {
			bottom = lm.Level()
		}
	}
	if bottom < 0 {
		return false // no files
	}
	var upper uint64
	var lo, hi []byte
	moved := false // level-0 files or files above the bottom
	for _, lm := range md.LevelMetas() {
		if lm.Level() == bottom && bottom > 0 {
			continue
		}
		for _, f := range lm.SstMetas() {
			moved = true
			upper += f.Size()
			if lo == nil || bytes.Compare(f.SmallestKey(), lo) < 0 {
				lo = f.SmallestKey()
			}
			if hi == nil || bytes.Compare(f.LargestKey(), hi) > 0 {
				hi = f.LargestKey()
			}
		}
	}
	if !moved {
		return false
	}
	var overlap uint64
	if bottom > 0 {
		for _, lm := range md.LevelMetas() {
			if lm.Level() != bottom {
				continue
			}
			for _, f := range lm.SstMetas() {
				if bytes.Compare(f.LargestKey(), lo) >= 0 && bytes.Compare(f.SmallestKey(), hi) <= 0 {
					overlap += f.Size()
				}
			}
		}
	}
	return upper+overlap <= maxIdleRewriteFactor*upper
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
