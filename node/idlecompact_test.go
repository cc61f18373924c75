package node_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/internal/store"
)

// writeRound writes points of 20 series, each round an hour later, the
// same hourly and daily rollups rewritten.
func writeRound(t *testing.T, n *node.Node, start int64, round int) {
	t.Helper()
	var batches []model.Batch
	for s := range 20 {
		ts := make([]int64, 600)
		vs := make([]float64, len(ts))
		for i := range ts {
			ts[i] = start + int64(round)*3_600_000 + int64(i)*5000
			vs[i] = float64(s*i + round)
		}
		batches = append(batches, model.Batch{Labels: lbl("__name__", "ic", "s", fmt.Sprint(s)), Ts: ts, Vs: vs})
	}
	if _, err := n.Write(context.Background(), batches); err != nil {
		t.Fatal(err)
	}
}

func idleOpts(t *testing.T) node.Options {
	return node.Options{
		DataDir:          t.TempDir(),
		FlushInterval:    5 * time.Millisecond,
		IdleFlush:        200 * time.Millisecond,
		HeadChunkSamples: 120,
	}
}

// TestNode_IdleCompactionLeavesNoLevel0: after the idle flush that
// follows writes, the store's files are merged into one level per column
// family, none in level 0, as a full compaction leaves them — but for the
// chunks, whose level-0 files hold nothing twice and stay; the points are
// all there.
func TestNode_IdleCompactionLeavesNoLevel0(t *testing.T) {
	n := mustOpen(t, idleOpts(t))
	defer n.Close()
	// Two idle periods without the compaction: their store flushes leave
	// level-0 files.
	var fakeCalls atomic.Int32
	n.SetIdleCompactForTest(func(<-chan struct{}, func() bool) (store.IdleCompaction, error) {
		fakeCalls.Add(1)
		return store.IdleCompaction{}, nil
	})
	start := time.Now().Add(-6 * time.Hour).Truncate(time.Hour).UnixMilli()
	for round := range 2 {
		writeRound(t, n, start, round)
		want := int64(round + 1)
		waitFor(t, "an idle flush", func() bool { return n.Status().IdleFlushes >= want })
	}
	files, err := n.StoreLevelFilesForTest()
	if err != nil {
		t.Fatal(err)
	}
	if files["chunks"][0] < 2 || files["rollup_1h"][0] < 2 {
		t.Fatalf("setup: store files by level %v; want level-0 files left by two idle flushes", files)
	}
	// The second idle flush's wake must have reached the fake, or the real
	// compaction would take it and meet the next write.
	waitFor(t, "the idle compactions of the setup", func() bool { return fakeCalls.Load() >= 2 })
	n.SetIdleCompactForTest(nil)
	writeRound(t, n, start, 2)
	waitFor(t, "an idle compaction", func() bool { return n.Status().IdleCompactions >= 1 })
	st := n.Status()
	if st.IdleCompactionsAborted != 0 || st.IdleCompactionBytes <= 0 {
		t.Errorf("status after the idle compaction: %d aborted, %d bytes; want 0 aborted, some bytes", st.IdleCompactionsAborted, st.IdleCompactionBytes)
	}
	if files, err = n.StoreLevelFilesForTest(); err != nil {
		t.Fatal(err)
	}
	for cf, per := range files {
		if cf == "chunks" {
			if per[0] < 3 {
				t.Errorf("chunks after the idle compaction: files by level %v; want the three idle flushes' level-0 files left", per)
			}
			continue
		}
		levels := 0
		for _, f := range per {
			if f > 0 {
				levels++
			}
		}
		if per[0] != 0 || levels > 1 {
			t.Errorf("column family %s after the idle compaction: files by level %v; want none in level 0, one level", cf, per)
		}
	}
	if stored, err := n.StoredPoints(); err != nil || stored != 3*20*600 {
		t.Errorf("stored points %d (%v), want %d", stored, err, 3*20*600)
	}
	time.Sleep(500 * time.Millisecond)
	if got := n.Status().IdleCompactions; got != 1 {
		t.Errorf("%d idle compactions without a write in between, want 1", got)
	}
}

// TestNode_IdleCompactionNeitherHoldsWritesNorClose: a write during an
// idle compaction (one that would never end by itself) is acknowledged at
// once and tells the compaction to give way; Close during one is prompt.
func TestNode_IdleCompactionNeitherHoldsWritesNorClose(t *testing.T) {
	o := idleOpts(t)
	// Long enough that a loaded machine does not see an idle period in
	// the middle of writeRound's write.
	o.IdleFlush = time.Second
	n := mustOpen(t, o)
	defer n.Close()
	started := make(chan struct{}, 4)
	var sawBusy atomic.Bool
	n.SetIdleCompactForTest(func(stop <-chan struct{}, busy func() bool) (store.IdleCompaction, error) {
		started <- struct{}{}
		for {
			select {
			case <-stop:
				return store.IdleCompaction{ColumnFamilies: 1, Aborted: true}, nil
			case <-time.After(time.Millisecond):
				if busy() {
					sawBusy.Store(true)
				}
			}
		}
	})
	start := time.Now().Add(-6 * time.Hour).Truncate(time.Hour).UnixMilli()
	writeRound(t, n, start, 0)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no idle compaction after 10 s")
	}
	if sawBusy.Load() {
		t.Fatal("busy before any write")
	}
	t0 := time.Now()
	writeRound(t, n, start, 1)
	if took := time.Since(t0); took > time.Second {
		t.Errorf("a write during the idle compaction took %v", took)
	}
	waitFor(t, "the compaction told of the write", sawBusy.Load)
	t0 = time.Now()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took > 2*time.Second {
		t.Errorf("Close during an idle compaction took %v", took)
	}
	if st := n.Status(); st.IdleCompactionsAborted != 1 {
		t.Errorf("%d idle compactions aborted, want 1", st.IdleCompactionsAborted)
	}
}

// TestNode_NoIdleCompact: with NoIdleCompact the idle flush leaves the
// store as its flushes wrote it.
func TestNode_NoIdleCompact(t *testing.T) {
	o := idleOpts(t)
	o.NoIdleCompact = true
	n := mustOpen(t, o)
	defer n.Close()
	start := time.Now().Add(-6 * time.Hour).Truncate(time.Hour).UnixMilli()
	for round := range 2 {
		writeRound(t, n, start, round)
		want := int64(round + 1)
		waitFor(t, "an idle flush", func() bool { return n.Status().IdleFlushes >= want })
	}
	time.Sleep(300 * time.Millisecond)
	files, err := n.StoreLevelFilesForTest()
	if err != nil {
		t.Fatal(err)
	}
	if st := n.Status(); st.IdleCompactions != 0 || files["chunks"][0] < 2 {
		t.Errorf("NoIdleCompact: %d idle compactions, chunks files by level %v; want none, level-0 files left", st.IdleCompactions, files["chunks"])
	}
}
