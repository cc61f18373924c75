package node

import (
	"time"

	"github.com/tributarydb/tributary/node/internal/store"
)

// compactFunc is the signature of store.DB.CompactIdle.
type compactFunc = func(stop <-chan struct{}, busy func() bool) (store.IdleCompaction, error)

// compactLoop runs an idle compaction each time an idle flush wakes it,
// until the node stops. It has its own goroutine so that the flush loop,
// and with it the writes that wait on flushes, never waits for it.
func (n *Node) compactLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case <-n.compactWake:
			n.idleCompact()
		}
	}
}

// idleCompact merges what the store's flushes left in level 0 and upper
// levels into its bottom level (store.DB.CompactIdle), so that the data
// directory at rest holds what a full compaction leaves: one copy of each
// rollup pack, every file in its bottommost compression. A write that
// arrives meanwhile, or Close, cuts it short (the write does not wait for
// it); the next idle period finishes it.
func (n *Node) idleCompact() {
	mark := n.lastAppendNs.Load()
	start := time.Now()
	compact := n.db.CompactIdle
	if f := n.compactFake.Load(); f != nil {
		compact = *f
	}
	res, err := compact(n.stop, func() bool { return n.lastAppendNs.Load() != mark })
	if err != nil {
		if !n.closed.Load() {
			n.log.Error("idle compaction failed", "err", err)
		}
		return
	}
	if res.ColumnFamilies == 0 {
		return
	}
	n.stats.idleCompactions.Add(1)
	n.stats.idleCompactBytes.Add(res.WrittenBytes)
	if res.Aborted {
		n.stats.idleCompactAborted.Add(1)
	}
	n.log.Info("idle compaction", "column_families", res.ColumnFamilies, "written_bytes", res.WrittenBytes,
		"aborted", res.Aborted, "took", time.Since(start).Round(time.Millisecond))
}
