package node

import "github.com/tributarydb/tributary/node/internal/store"

// CrashForTest stops the node as a power cut would: no flush, no WAL
// seal. The caller has already crashed the WAL's file system; RocksDB is
// closed without flushing its memtables, so what flushes wrote to it
// without its WAL since the last store flush is lost, as in a crash.
func (n *Node) CrashForTest() {
	n.closed.Store(true)
	close(n.stop)
	n.wg.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wal.Close() // fails on the crashed file system; stops its goroutine
	n.db.Abandon()
}

// PauseFlushForTest blocks every flush until the returned function is
// called, as a stalled disk would.
func (n *Node) PauseFlushForTest() (resume func()) {
	n.flushMu.Lock()
	return n.flushMu.Unlock
}

// SetStoreFaultForTest makes the store writes of flushes and of new series
// fail with what f returns (nil f: no fault), as a failing store would.
func (n *Node) SetStoreFaultForTest(f func() error) {
	if f == nil {
		n.storeFault.Store(nil)
		return
	}
	n.storeFault.Store(&f)
}

// HoldWriteLockForTest takes the write lock, as a writer stuck inside it
// would, until the returned function is called.
func (n *Node) HoldWriteLockForTest() (release func()) {
	n.mu.Lock()
	return n.mu.Unlock
}

// FlushBatchesForTest is the number of store batches flushes have written.
func (n *Node) FlushBatchesForTest() int64 { return n.stats.flushBatches.Load() }

// StoreLevelFilesForTest returns the store's SST files by column family and
// level.
func (n *Node) StoreLevelFilesForTest() (map[string][store.NumLevels]int, error) {
	return n.db.LevelFiles()
}

// SetIdleCompactForTest makes idle compactions call f instead of the
// store's CompactIdle (nil f: the store's again).
func (n *Node) SetIdleCompactForTest(f func(stop <-chan struct{}, busy func() bool) (store.IdleCompaction, error)) {
	if f == nil {
		n.compactFake.Store(nil)
		return
	}
	n.compactFake.Store(&f)
}
