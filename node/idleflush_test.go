package node_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
)

// TestNode_IdleFlushReleasesTheWAL: once no write has come for IdleFlush,
// the head is flushed, the store flushed, and every WAL segment that
// replication does not hold is released, without any further write; the
// segments replication holds go as soon as it lets them.
func TestNode_IdleFlushReleasesTheWAL(t *testing.T) {
	var retain atomic.Uint64
	retain.Store(1) // replication has shipped nothing yet
	n := mustOpen(t, node.Options{
		DataDir:       t.TempDir(),
		FlushInterval: 5 * time.Millisecond,
		WALSegmentAge: time.Hour, // only the idle flush seals
		IdleFlush:     300 * time.Millisecond,
		WALRetention:  func() uint64 { return retain.Load() },
	})
	defer n.Close()
	// Within one hour: chunks also close at every hour boundary.
	start := time.Now().Add(-time.Hour).Truncate(time.Hour).Add(time.Minute).UnixMilli()
	ts := make([]int64, 100) // far fewer than a head chunk: nothing closes by itself
	vs := make([]float64, 100)
	for i := range ts {
		ts[i], vs[i] = start+int64(i)*1000, float64(i)
	}
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "idle"), Ts: ts, Vs: vs}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if st := n.Status(); st.IdleFlushes != 0 || st.HeadSamples != 100 {
		t.Fatalf("before the idle period: %d idle flushes, %d head samples; want 0 and 100", st.IdleFlushes, st.HeadSamples)
	}
	waitFor(t, "an idle flush", func() bool { return n.Status().IdleFlushes >= 1 })
	st := n.Status()
	if st.HeadSamples != 0 {
		t.Errorf("after the idle flush the head holds %d samples", st.HeadSamples)
	}
	if stored, err := n.StoredPoints(); err != nil || stored != 100 {
		t.Errorf("stored points %d (%v), want 100", stored, err)
	}
	segs := n.WALSegments()
	if len(segs) == 0 || segs[0].Points == 0 {
		t.Fatalf("WAL segments %+v: replication holds the written one, it must stay", segs)
	}
	retain.Store(segs[len(segs)-1].Seq + 1) // shipped and acknowledged
	waitFor(t, "the shipped segment released", func() bool {
		for _, s := range n.WALSegments() {
			if s.Points > 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(400 * time.Millisecond)
	if got := n.Status().IdleFlushes; got != 1 {
		t.Errorf("%d idle flushes without a write in between, want 1 per idle period", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
