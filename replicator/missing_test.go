package replicator_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// damage flips bytes in the middle of a segment file (as bit rot would).
func damage(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		b[len(b)/2+i] ^= 0xA5
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// lose makes a segment file unusable the way the test case says.
func lose(t *testing.T, how, path string) {
	t.Helper()
	switch how {
	case "corrupt":
		damage(t, path)
	case "vanished":
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown way to lose a segment: %q", how)
	}
}

// reopenWAL closes w's log and opens its directory again, as the node
// does when it restarts (a damaged sealed segment is quarantined), with
// the same store and the given WALReplayFrom.
func reopenWAL(t *testing.T, w walSource, replayFrom uint64) walSource {
	t.Helper()
	dir := filepath.Dir(sealed(w.l.Segments())[0].Path)
	w.l.Close()
	l, err := wal.Open(wal.Options{Dir: dir, NodeID: w.id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return walSource{l: l, id: w.id, st: w.st, replayFrom: replayFrom}
}

// checkBackfilledOnce requires the cloud to hold seg's numbers as one
// backfill recorded with seg's points, decoding to them, stored once.
func checkBackfilledOnce(t *testing.T, c *cloud, seg wal.SegmentInfo) {
	t.Helper()
	held, _, _, _ := c.snapshot("pi-7")
	bf, ok := held[seg.Seq]
	if !ok || !bf.backfill || bf.prev != seg.PrevSeq || bf.backfillPoints != seg.Points || bf.decoded != seg.Points || bf.stored != 1 {
		t.Fatalf("segment %d held as %+v (found %v); want a backfill after %d recording %d points", seg.Seq, bf, ok, seg.PrevSeq, seg.Points)
	}
}

// TestShipper_SegmentLostWhileRunningIsReshippedFromTheStore: a sealed
// segment the cloud does not hold rots or vanishes while the node runs.
// It is declared a MISSING gap with the points and span the node listed,
// and, since its samples are in the node's store, backfilled from there
// with that count: the cloud ends up holding every point.
func TestShipper_SegmentLostWhileRunningIsReshippedFromTheStore(t *testing.T) {
	for _, how := range []string{"corrupt", "vanished"} {
		t.Run(how, func(t *testing.T) {
			c := newCloud(t)
			in := startIntake(t, "coord-a", c)
			in.down.Store(true)
			w := openWAL(t, "pi-7")
			segs := sealN(t, w, 4)
			s := newShipper(t, options(t, cursorPath(t), in.addr))
			start(t, s, w)
			lose(t, how, segs[1].Path)
			in.down.Store(false)
			eventually(t, "gap backfilled", func() bool { return s.Stats().BackfilledGaps == 1 })
			eventually(t, "acked through the last segment", func() bool { return c.ackedThrough("pi-7") == segs[3].Seq })
			checkHeldOnce(t, c, "pi-7", []wal.SegmentInfo{segs[0], segs[2], segs[3]})
			checkBackfilledOnce(t, c, segs[1])
			_, gaps, _, _ := c.snapshot("pi-7")
			if g := gaps[segs[1].Seq]; g == nil || g.Reason != pb.GapReason_GAP_REASON_MISSING || g.Points != segs[1].Points ||
				g.MinTimeMs != segs[1].MinT || g.MaxTimeMs != segs[1].MaxT {
				t.Fatalf("gap declared %v; want missing with %d points in [%d, %d]", g, segs[1].Points, segs[1].MinT, segs[1].MaxT)
			}
			st := s.Stats()
			if len(st.Gaps) != 1 || st.Gaps[0].Unrecoverable || st.BackfilledPoints != uint64(segs[1].Points) || st.UnrecoverableGaps != 0 {
				t.Fatalf("stats: %+v", st)
			}
		})
	}
}

// TestShipper_SegmentLostAcrossARestart: the Shipper saw a sealed segment
// (and recorded its summary), then the node stopped and the segment was
// damaged or removed before it restarted. When the node's store held
// every sample of it before the restart (below WALReplayFrom), it is
// backfilled with the summary's count and span; when it did not (the
// samples were only in the head that died with the process), it stays a
// MISSING gap with that count, unrecoverable, and nothing is re-shipped
// for it.
func TestShipper_SegmentLostAcrossARestart(t *testing.T) {
	for _, how := range []string{"corrupt", "vanished"} {
		for _, flushed := range []bool{true, false} {
			name := how + "/not flushed"
			if flushed {
				name = how + "/flushed"
			}
			t.Run(name, func(t *testing.T) {
				c := newCloud(t)
				in := startIntake(t, "coord-a", c)
				in.down.Store(true)
				w := openWAL(t, "pi-7")
				segs := sealN(t, w, 4)
				o := options(t, cursorPath(t), in.addr)
				s := newShipper(t, o)
				stop := start(t, s, w)
				eventually(t, "a session tried", func() bool { return s.Stats().SessionFailures > 0 })
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				lose(t, how, segs[1].Path)
				replayFrom := uint64(1) // nothing flushed: segments 1.. replayed
				if flushed {
					replayFrom = segs[2].Seq // 1..segs[1] were flushed before the stop
				}
				w = reopenWAL(t, w, replayFrom)
				s = newShipper(t, o)
				start(t, s, w)
				in.down.Store(false)
				eventually(t, "acked through the last segment", func() bool { return c.ackedThrough("pi-7") == segs[3].Seq })
				_, gaps, _, _ := c.snapshot("pi-7")
				if g := gaps[segs[1].Seq]; g == nil || g.AfterSeq != segs[1].PrevSeq || g.Reason != pb.GapReason_GAP_REASON_MISSING ||
					g.Points != segs[1].Points || g.MinTimeMs != segs[1].MinT || g.MaxTimeMs != segs[1].MaxT {
					t.Fatalf("gap declared %v; want missing after %d with %d points in [%d, %d] (from the summary)",
						g, segs[1].PrevSeq, segs[1].Points, segs[1].MinT, segs[1].MaxT)
				}
				if flushed {
					eventually(t, "gap backfilled", func() bool { return s.Stats().BackfilledGaps == 1 })
					checkBackfilledOnce(t, c, segs[1])
					return
				}
				eventually(t, "gap reported", func() bool { return s.Stats().UnreportedGaps == 0 })
				st := s.Stats()
				if st.UnrecoverableGaps != 1 || st.UnrecoverablePoints != uint64(segs[1].Points) || !st.Gaps[0].Unrecoverable ||
					st.BackfilledGaps != 0 {
					t.Fatalf("stats: %+v", st)
				}
				held, _, _, _ := c.snapshot("pi-7")
				if _, ok := held[segs[1].Seq]; ok {
					t.Fatalf("segment %d re-shipped although the store may lack its points", segs[1].Seq)
				}
			})
		}
	}
}

var _ replicator.Source = walSource{}
