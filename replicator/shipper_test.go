package replicator_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
	"github.com/tributarydb/tributary/replicator/internal/cursor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const t0 = int64(1_767_225_600_000) // 2026-01-01, ms

func options(t *testing.T, cursorPath string, targets ...string) replicator.Options {
	return replicator.Options{
		Targets:         targets,
		Insecure:        true,
		CursorPath:      cursorPath,
		SoftwareVersion: "test",
		BackoffInitial:  10 * time.Millisecond,
		BackoffMax:      100 * time.Millisecond,
		AckTimeout:      500 * time.Millisecond,
		PollInterval:    10 * time.Millisecond,
		Logger:          slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
}

func newShipper(t *testing.T, o replicator.Options) *replicator.Shipper {
	t.Helper()
	s, err := replicator.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// start runs s until the returned stop is called (or the test ends).
func start(t *testing.T, s *replicator.Shipper, src replicator.Source) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, src) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func cursorPath(t *testing.T) string { return filepath.Join(t.TempDir(), "replication.cursor") }

// sealN seals n segments of 4 records each and returns them.
func sealN(t *testing.T, w walSource, n int) []wal.SegmentInfo {
	t.Helper()
	for i := range n {
		w.sealSegment(t, 4, t0+int64(i)*1_000_000)
	}
	return sealed(w.l.Segments())
}

func TestShipper_ShipsEverySegmentOnceInSequenceOrder(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	want := sealN(t, w, 6)
	o := options(t, cursorPath(t), in.addr)
	o.FreshSegments = -1
	o.WindowSegments = 2
	s := newShipper(t, o)
	stop := start(t, s, w)
	last := want[len(want)-1].Seq
	eventually(t, "every segment acknowledged", func() bool { return s.Stats().AckedThrough == last && s.RetainFrom() == last+1 })
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	checkHeldOnce(t, c, "pi-7", want)
	_, _, order, dups := c.snapshot("pi-7")
	if !slices.IsSorted(order) || dups != 0 {
		t.Fatalf("arrival order %v with %d duplicates; want ascending, none", order, dups)
	}
	st := s.Stats()
	var points int64
	for _, seg := range want {
		points += seg.Points
	}
	if st.ShippedSegments != 6 || st.ShippedPoints != points || st.BytesPerPoint <= 0 || st.BacklogSegments != 0 ||
		st.LagSeconds != 0 || st.Connected || st.Sends != 6 {
		t.Fatalf("stats after shipping everything: %+v", st)
	}
	cur, found, err := cursor.Load(vfs.OS{}, o.CursorPath)
	if err != nil || !found || cur.AckedThrough != last || cur.Released != last || cur.NodeID != "pi-7" {
		t.Fatalf("cursor file: %+v, %v, %v", cur, found, err)
	}
}

func TestShipper_FreshDataShipsFirstAndTheBacklogDrainsBehind(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	want := sealN(t, w, 8)
	o := options(t, cursorPath(t), in.addr)
	o.FreshSegments = 2
	o.WindowSegments = 1
	s := newShipper(t, o)
	start(t, s, w)
	eventually(t, "every segment acknowledged", func() bool { return s.Stats().AckedThrough == want[7].Seq })
	_, _, order, _ := c.snapshot("pi-7")
	if !slices.Equal(order, []uint64{7, 8, 1, 2, 3, 4, 5, 6}) {
		t.Fatalf("arrival order %v; want the newest two first, then the backlog oldest first", order)
	}
	checkHeldOnce(t, c, "pi-7", want)
}

// TestShipper_LostAcksAreResentAndStoredOnce: no ack arrives, the stream
// is declared dead, and the next coordinator's welcome (from a replica that
// has not caught up) does not list what is held, so every segment is sent
// again; the cloud stores each once and acknowledges the duplicates.
func TestShipper_LostAcksAreResentAndStoredOnce(t *testing.T) {
	c := newCloud(t)
	a := startIntake(t, "coord-a", c)
	b := startIntake(t, "coord-b", c)
	b.stale.Store(true)
	a.dropAcks.Store(1 << 30)
	w := openWAL(t, "pi-7")
	want := sealN(t, w, 4)
	s := newShipper(t, options(t, cursorPath(t), a.addr, b.addr))
	start(t, s, w)
	eventually(t, "every segment acknowledged", func() bool { return s.Stats().AckedThrough == want[3].Seq })
	checkHeldOnce(t, c, "pi-7", want)
	_, _, _, dups := c.snapshot("pi-7")
	st := s.Stats()
	// Every resend reached the cloud as a duplicate. How many were resent
	// depends on timing: an ack of a duplicate carries acked_through,
	// which makes resending the rest unnecessary.
	if dups < 1 || int64(dups) != st.Sends-4 || st.SessionFailures < 1 || !strings.Contains(st.LastError, "ack timeout") {
		t.Fatalf("%d duplicates stored once; stats %+v", dups, st)
	}
}

func TestShipper_StreamKilledMidSegmentIsResumed(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	in.killMid.Store(true)
	w := openWAL(t, "pi-7")
	// Records of random-looking samples are big enough for several parts.
	for i := range 3 {
		w.sealSegment(t, 60, t0+int64(i)*10_000_000)
	}
	want := sealed(w.l.Segments())
	o := options(t, cursorPath(t), in.addr)
	o.MaxPartBytes = 1024
	s := newShipper(t, o)
	start(t, s, w)
	eventually(t, "every segment acknowledged", func() bool { return s.Stats().AckedThrough == want[2].Seq })
	checkHeldOnce(t, c, "pi-7", want)
	if in.killMid.Load() || in.streams.Load() < 2 {
		t.Fatalf("the stream was never killed mid-segment (%d streams)", in.streams.Load())
	}
}

func TestShipper_HalfOpenStreamIsDetectedAndAnotherCoordinatorTakesOver(t *testing.T) {
	c := newCloud(t)
	a := startIntake(t, "coord-a", c)
	a.halfOpen.Store(true)
	b := startIntake(t, "coord-b", c)
	w := openWAL(t, "pi-7")
	want := sealN(t, w, 3)
	s := newShipper(t, options(t, cursorPath(t), a.addr, b.addr))
	start(t, s, w)
	eventually(t, "every segment acknowledged", func() bool { return s.Stats().AckedThrough == want[2].Seq })
	checkHeldOnce(t, c, "pi-7", want)
	if st := s.Stats(); st.Coordinator != "coord-b" || !strings.Contains(st.LastError, "ack timeout") {
		t.Fatalf("stats %+v; want shipping through coord-b after an ack timeout on coord-a", st)
	}
}

func TestShipper_FailsOverBetweenCoordinatorsWithoutResending(t *testing.T) {
	c := newCloud(t)
	a := startIntake(t, "coord-a", c)
	b := startIntake(t, "coord-b", c)
	dead := "127.0.0.1:1" // nothing listens: the first attempt fails
	w := openWAL(t, "pi-7")
	first := sealN(t, w, 3)
	s := newShipper(t, options(t, cursorPath(t), dead, a.addr, b.addr))
	start(t, s, w)
	eventually(t, "first segments acknowledged", func() bool { return s.Stats().AckedThrough == first[2].Seq })
	if st := s.Stats(); st.Coordinator != "coord-a" || st.SessionFailures < 1 {
		t.Fatalf("stats %+v; want coord-a after the dead target failed", st)
	}
	a.srv.Stop() // coordinator a goes away mid-stream
	for i := range 3 {
		w.sealSegment(t, 4, t0+int64(10+i)*1_000_000)
	}
	all := sealed(w.l.Segments())
	eventually(t, "later segments acknowledged", func() bool { return s.Stats().AckedThrough == all[len(all)-1].Seq })
	checkHeldOnce(t, c, "pi-7", all)
	if _, _, _, dups := c.snapshot("pi-7"); dups != 0 {
		t.Fatalf("%d segments sent again after failover; the welcome says what is held", dups)
	}
	if st := s.Stats(); st.Coordinator != "coord-b" {
		t.Fatalf("shipping through %q, want coord-b", st.Coordinator)
	}
}

func TestShipper_RestartResumesFromThePersistedCursor(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	first := sealN(t, w, 4)
	path := cursorPath(t)
	s := newShipper(t, options(t, path, in.addr))
	stop := start(t, s, w)
	eventually(t, "first segments acknowledged", func() bool { return s.RetainFrom() == first[3].Seq+1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A new process: the cursor alone says what may be deleted, before any
	// connection; and a coordinator that remembers nothing (stale) gets
	// only the new segments.
	in.stale.Store(true)
	s2 := newShipper(t, options(t, path, in.addr))
	if got := s2.RetainFrom(); got != first[3].Seq+1 {
		t.Fatalf("RetainFrom after restart = %d, want %d", got, first[3].Seq+1)
	}
	for i := range 2 {
		w.sealSegment(t, 4, t0+int64(10+i)*1_000_000)
	}
	all := sealed(w.l.Segments())
	start(t, s2, w)
	eventually(t, "new segments acknowledged", func() bool { return s2.RetainFrom() == all[len(all)-1].Seq+1 })
	checkHeldOnce(t, c, "pi-7", all)
	_, _, order, dups := c.snapshot("pi-7")
	if dups != 0 || len(order) != len(all) {
		t.Fatalf("arrivals %v, %d duplicates: the restarted shipper resent acknowledged segments", order, dups)
	}
	c.mu.Lock()
	last := c.hellos[len(c.hellos)-1]
	c.mu.Unlock()
	if last.AckedThrough != first[3].Seq || last.NodeId != "pi-7" || last.ProtocolVersion != 1 || last.SoftwareVersion != "test" {
		t.Fatalf("hello after restart: %+v", last)
	}
}

func TestShipper_RetryableRefusalIsResent(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	in.refuseOnce.Store(uint64(2), pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE)
	w := openWAL(t, "pi-7")
	want := sealN(t, w, 3)
	s := newShipper(t, options(t, cursorPath(t), in.addr))
	start(t, s, w)
	eventually(t, "every segment acknowledged", func() bool { return s.Stats().AckedThrough == want[2].Seq })
	checkHeldOnce(t, c, "pi-7", want)
	if st := s.Stats(); st.Refusals != 1 || st.SessionFailures != 0 {
		t.Fatalf("stats %+v; want one refusal, no broken stream", st)
	}
}

// TestShipper_AnAckReleasesRefusedSegments: segments refused while the
// cloud could not store them (a replica down) wait out a growing backoff;
// once the cloud acknowledges anything again they are resent at once
// instead of waiting, so the acknowledged-through point catches up.
func TestShipper_AnAckReleasesRefusedSegments(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	in.refuseAll.Store(true)
	w := openWAL(t, "pi-7")
	sealN(t, w, 3)
	o := options(t, cursorPath(t), in.addr)
	o.BackoffInitial, o.BackoffMax = time.Hour, time.Hour // a refused segment would wait an hour
	s := newShipper(t, o)
	start(t, s, w)
	eventually(t, "the first segments refused", func() bool { return s.Stats().Refusals >= 3 })
	in.refuseAll.Store(false)
	want := sealN(t, w, 1) // every sealed segment, the new one last
	eventually(t, "every segment acknowledged", func() bool { return s.Stats().AckedThrough == want[len(want)-1].Seq })
	checkHeldOnce(t, c, "pi-7", want)
}

// TestShipper_MissingSegmentsAreDeclaredAsAGap: segments deleted before
// replication began are reported, so the cloud's acked_through can move on
// and the hole stays visible. Their count is unknown (the Shipper never
// saw them), so they are unrecoverable and never backfilled.
func TestShipper_MissingSegmentsAreDeclaredAsAGap(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	all := sealN(t, w, 5)
	if err := w.l.RemoveBefore(all[2].Seq); err != nil {
		t.Fatal(err)
	}
	s := newShipper(t, options(t, cursorPath(t), in.addr))
	start(t, s, w)
	eventually(t, "acked through the last segment", func() bool { return c.ackedThrough("pi-7") == all[4].Seq })
	checkHeldOnce(t, c, "pi-7", all[2:])
	_, gaps, _, _ := c.snapshot("pi-7")
	g := gaps[all[1].Seq]
	if len(gaps) != 1 || g == nil || g.AfterSeq != 0 || g.Reason != pb.GapReason_GAP_REASON_MISSING || g.Points != -1 {
		t.Fatalf("gaps held by the cloud: %v", gaps)
	}
	eventually(t, "gap reported", func() bool { st := s.Stats(); return len(st.Gaps) == 1 && st.Gaps[0].Reported })
	if st := s.Stats(); !st.Gaps[0].Unrecoverable || st.UnrecoverableGaps != 1 || st.BackfilledGaps != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

// budgetSetup seals 8 segments with the coordinator down and a budget of
// 3.5 segments.
func budgetSetup(t *testing.T, policy replicator.OverflowPolicy) (*cloud, *intake, walSource, []wal.SegmentInfo, replicator.Options) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	in.down.Store(true)
	w := openWAL(t, "pi-7")
	segs := sealN(t, w, 8)
	o := options(t, cursorPath(t), in.addr)
	o.BudgetBytes = segs[0].Bytes*3 + segs[0].Bytes/2
	o.Overflow = policy
	return c, in, w, segs, o
}

func TestShipper_OverflowKeepInStoreRecordsTheGapAndItsPoints(t *testing.T) {
	c, in, w, segs, o := budgetSetup(t, replicator.OverflowKeepInStore)
	s := newShipper(t, o)
	stop1 := start(t, s, w)
	// Down to 90% of the budget: the 5 oldest go, the 3 newest stay.
	eventually(t, "oldest segments released", func() bool { return s.RetainFrom() == segs[5].Seq })
	var points int64
	for _, seg := range segs[:5] {
		points += seg.Points
	}
	st := s.Stats()
	if st.GapSegments != 5 || st.GapPoints != uint64(points) || st.DroppedPoints != 0 || len(st.Gaps) != 1 ||
		st.Gaps[0].Reason != "backlog_overflow" || st.Gaps[0].Points != points || st.Gaps[0].Reported || st.UnreportedGaps != 1 {
		t.Fatalf("stats after overflow: %+v", st)
	}
	if st.Gaps[0].MinT != segs[0].MinT || st.Gaps[0].MaxT != segs[4].MaxT {
		t.Fatalf("gap time span [%d, %d], want [%d, %d]", st.Gaps[0].MinT, st.Gaps[0].MaxT, segs[0].MinT, segs[4].MaxT)
	}
	cur, _, err := cursor.Load(vfs.OS{}, o.CursorPath)
	if err != nil || len(cur.Gaps) != 1 || cur.Gaps[0].Through != segs[4].Seq || cur.GapPoints != uint64(points) {
		t.Fatalf("cursor after overflow: %+v, %v", cur, err)
	}

	// The link comes back: the gap is declared, the rest shipped.
	in.down.Store(false)
	eventually(t, "everything covered", func() bool { return s.Stats().AckedThrough == segs[7].Seq })
	checkHeldOnce(t, c, "pi-7", segs[5:])
	_, gaps, _, _ := c.snapshot("pi-7")
	if g := gaps[segs[4].Seq]; g == nil || g.Points != points || g.Reason != pb.GapReason_GAP_REASON_BACKLOG_OVERFLOW || g.Segments != 5 {
		t.Fatalf("cloud gaps %v", gaps)
	}
	eventually(t, "gap reported", func() bool { return s.Stats().UnreportedGaps == 0 })

	// Then it is backfilled from the node's store: one file covering the
	// gap's numbers, holding its points, recorded with the gap's count.
	eventually(t, "gap backfilled", func() bool { return s.Stats().BackfilledGaps == 1 })
	held, _, order, _ := c.snapshot("pi-7")
	bf := held[segs[4].Seq]
	if !bf.backfill || bf.prev != segs[0].PrevSeq || bf.backfillPoints != points || bf.decoded != points || bf.stored != 1 {
		t.Fatalf("backfill held as %+v; want prev %d, %d points", bf, segs[0].PrevSeq, points)
	}
	if st := s.Stats(); st.BackfilledPoints != uint64(points) || !st.Gaps[0].Backfilled || st.GapPoints != uint64(points) {
		t.Fatalf("stats after the backfill: %+v", st)
	}
	if i := slices.Index(order, segs[4].Seq); i < slices.Index(order, segs[7].Seq) {
		t.Fatalf("backfill arrived before the fresh segments: %v", order)
	}
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	cur, _, err = cursor.Load(vfs.OS{}, o.CursorPath)
	if err != nil || !cur.Gaps[0].Backfilled || cur.Gaps[0].NeedsBackfill() {
		t.Fatalf("cursor after the backfill: %+v, %v", cur, err)
	}

	// A restart keeps it backfilled: nothing is built or sent again.
	s2 := newShipper(t, o)
	if st := s2.Stats(); st.BackfilledGaps != 1 || st.BackfilledPoints != uint64(points) {
		t.Fatalf("stats after a restart: %+v", st)
	}
	stop := start(t, s2, w)
	w.sealSegment(t, 4, t0+9_000_000)
	next := sealed(w.l.Segments())
	eventually(t, "new segment acknowledged", func() bool { return s2.Stats().AckedThrough == next[len(next)-1].Seq })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, _, order, _ = c.snapshot("pi-7")
	if n := countOf(order, segs[4].Seq); n != 1 {
		t.Fatalf("backfill received %d times across a restart: %v", n, order)
	}
}

func countOf(s []uint64, v uint64) (n int) {
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// TestShipper_BackfillTooLargeForOneSegmentIsSplit: a coordinator that
// takes small segments gets the gap in pieces that cover its numbers
// exactly and whose declared points sum to the gap's.
func TestShipper_BackfillTooLargeForOneSegmentIsSplit(t *testing.T) {
	c, in, w, segs, o := budgetSetup(t, replicator.OverflowKeepInStore)
	c.maxSegmentBytes = 8 << 10
	s := newShipper(t, o)
	start(t, s, w)
	eventually(t, "oldest segments released", func() bool { return s.RetainFrom() == segs[5].Seq })
	var points int64
	for _, seg := range segs[:5] {
		points += seg.Points
	}
	in.down.Store(false)
	eventually(t, "gap backfilled", func() bool { return s.Stats().BackfilledGaps == 1 })
	held, _, _, dups := c.snapshot("pi-7")
	var pieces []storedSeg
	var seqs []uint64
	for seq, h := range held {
		if h.backfill {
			pieces = append(pieces, h)
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	if len(pieces) < 2 || dups != 0 {
		t.Fatalf("%d backfill pieces (%d duplicates); want a split", len(pieces), dups)
	}
	var declared, decoded int64
	prev := segs[0].PrevSeq
	for _, seq := range seqs {
		h := held[seq]
		if h.prev != prev || h.stored != 1 {
			t.Fatalf("piece %d after %d, stored %d times; want after %d (pieces %v)", seq, h.prev, h.stored, prev, seqs)
		}
		prev = seq
		declared += h.backfillPoints
		decoded += h.decoded
	}
	if prev != segs[4].Seq || declared != points || decoded != points {
		t.Fatalf("pieces end at %d, declare %d points, hold %d; want %d, %d, %d", prev, declared, decoded, segs[4].Seq, points, points)
	}
}

func TestShipper_OverflowDropOldestCountsEveryDroppedPoint(t *testing.T) {
	_, _, w, segs, o := budgetSetup(t, replicator.OverflowDropOldest)
	s := newShipper(t, o)
	start(t, s, w)
	eventually(t, "oldest segments dropped", func() bool { return s.RetainFrom() == segs[5].Seq })
	var points int64
	for _, seg := range segs[:5] {
		points += seg.Points
	}
	if st := s.Stats(); st.DroppedPoints != uint64(points) || st.GapPoints != uint64(points) || st.Gaps[0].Reason != "dropped" {
		t.Fatalf("stats after drop-oldest: %+v", st)
	}
}

func TestShipper_OverflowBlockWritersRefusesWritesUntilShipped(t *testing.T) {
	c, in, w, segs, o := budgetSetup(t, replicator.OverflowBlockWriters)
	s := newShipper(t, o)
	start(t, s, w)
	eventually(t, "writes blocked", func() bool { return s.WriteGate() != nil && s.Stats().WritesBlocked })
	if err := s.WriteGate(); !errors.Is(err, replicator.ErrBacklogFull) || !errors.Is(err, model.ErrOverloaded) {
		t.Fatalf("WriteGate = %v; want ErrBacklogFull matching model.ErrOverloaded", err)
	}
	if st := s.Stats(); !st.WritesBlocked || st.GapSegments != 0 || s.RetainFrom() != 1 {
		t.Fatalf("block-writers must keep every segment: %+v, RetainFrom %d", st, s.RetainFrom())
	}
	in.down.Store(false)
	eventually(t, "writes accepted again", func() bool { return s.WriteGate() == nil && s.Stats().AckedThrough == segs[7].Seq })
	checkHeldOnce(t, c, "pi-7", segs)
}

func TestNew_DamagedCursorIsMovedAsideNotTrusted(t *testing.T) {
	path := cursorPath(t)
	if err := os.WriteFile(path, []byte("TRCU garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newShipper(t, options(t, path, "127.0.0.1:1"))
	if s.RetainFrom() != 1 {
		t.Fatalf("RetainFrom %d from a damaged cursor; want 1 (keep everything)", s.RetainFrom())
	}
	if b, err := os.ReadFile(path + ".corrupt"); err != nil || string(b) != "TRCU garbage" {
		t.Fatalf("damaged cursor not kept aside: %q, %v", b, err)
	}
}

func TestRun_RefusesAnotherNodesCursor(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	sealN(t, w, 1)
	path := cursorPath(t)
	s := newShipper(t, options(t, path, in.addr))
	stop := start(t, s, w)
	eventually(t, "acknowledged", func() bool { return s.RetainFrom() == 2 })
	stop()
	other := openWAL(t, "pi-8")
	err := newShipper(t, options(t, path, in.addr)).Run(context.Background(), other)
	if err == nil || !strings.Contains(err.Error(), `belongs to node "pi-7"`) {
		t.Fatalf("Run with another node's cursor = %v", err)
	}
}

func TestRun_StopsWhenTheWALWasReplaced(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	sealN(t, w, 3)
	path := cursorPath(t)
	s := newShipper(t, options(t, path, in.addr))
	stop := start(t, s, w)
	eventually(t, "acknowledged", func() bool { return s.RetainFrom() == 4 })
	stop()
	fresh := openWAL(t, "pi-7") // sequence numbers start at 1 again
	fresh.sealSegment(t, 1, t0)
	err := newShipper(t, options(t, path, in.addr)).Run(context.Background(), fresh)
	if !errors.Is(err, replicator.ErrSequenceReset) {
		t.Fatalf("Run over a replaced WAL = %v, want ErrSequenceReset", err)
	}
}

func TestOptions_Validate(t *testing.T) {
	ok := func() replicator.Options {
		return replicator.Options{Targets: []string{"c:1"}, Insecure: true, CursorPath: "x"}
	}
	for _, tc := range []struct {
		name   string
		change func(*replicator.Options)
		want   string
	}{
		{"no targets", func(o *replicator.Options) { o.Targets = nil }, "Targets is empty"},
		{"empty target", func(o *replicator.Options) { o.Targets = []string{" "} }, "Targets[0] is empty"},
		{"neither TLS nor insecure", func(o *replicator.Options) { o.Insecure = false }, "exactly one of TLS and Insecure"},
		{"no cursor", func(o *replicator.Options) { o.CursorPath = "" }, "CursorPath is required"},
		{"tiny parts", func(o *replicator.Options) { o.MaxPartBytes = 10 }, "MaxPartBytes"},
		{"backoff inverted", func(o *replicator.Options) { o.BackoffInitial, o.BackoffMax = time.Minute, time.Second }, "backoff"},
		{"jitter", func(o *replicator.Options) { o.BackoffJitter = 2 }, "backoff"},
		{"negative rate", func(o *replicator.Options) { o.MaxBytesPerSec = -1 }, "rate"},
		{"negative budget", func(o *replicator.Options) { o.BudgetBytes = -1 }, "BudgetBytes"},
		{"policy", func(o *replicator.Options) { o.Overflow = 9 }, "overflow policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok()
			tc.change(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	o := ok()
	if err := o.Validate(); err != nil || o.WindowSegments != 8 || o.BudgetBytes != 1<<30 || o.FreshSegments != 4 {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	for _, name := range []string{"keep-in-store", "block-writers", "drop-oldest"} {
		if p, err := replicator.ParseOverflowPolicy(name); err != nil || p.String() != name {
			t.Fatalf("ParseOverflowPolicy(%q) = %v, %v", name, p, err)
		}
	}
}

// TestShipper_BacklogRateIsLimitedFreshDataIsNot: with the backlog limited
// to a trickle, the backlog waits while fresh segments, even ones sealed
// later, ship at once.
func TestShipper_BacklogRateIsLimitedFreshDataIsNot(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	segs := sealN(t, w, 6)
	o := options(t, cursorPath(t), in.addr)
	o.FreshSegments = 2
	o.BacklogBytesPerSec = 1 // the first backlog segment runs into hours of debt
	s := newShipper(t, o)
	start(t, s, w)
	held := func() []uint64 {
		stored, _, _, _ := c.snapshot("pi-7")
		var out []uint64
		for seq := range stored {
			out = append(out, seq)
		}
		slices.Sort(out)
		return out
	}
	eventually(t, "fresh segments and one backlog segment", func() bool { return len(held()) == 3 })
	if got := held(); !slices.Equal(got, []uint64{segs[0].Seq, segs[4].Seq, segs[5].Seq}) {
		t.Fatalf("held %v; want the two fresh segments and the oldest of the backlog", got)
	}
	w.sealSegment(t, 4, t0+100_000_000)
	newest := sealed(w.l.Segments())[6].Seq
	eventually(t, "a newly sealed segment", func() bool { return slices.Contains(held(), newest) })
	if got := held(); len(got) != 4 {
		t.Fatalf("held %v: the backlog was not held back", got)
	}
	eventually(t, "its ack", func() bool { return s.Stats().ShippedSegments == 4 })
	if st := s.Stats(); st.BacklogSegments != 3 || st.LagSeconds <= 0 || st.AckedThrough != segs[0].Seq {
		t.Fatalf("stats with a throttled backlog: %+v", st)
	}
}

// TestShipper_HoldsBackSegmentsTheCoordinatorCannotRead: a WAL of format
// version 1 segments, then version 2 ones. A coordinator whose welcome
// lists no formats (older than the field) gets the version 1 segments
// only; the others wait on disk, and the stats say why. A coordinator that
// lists both gets the rest.
func TestShipper_HoldsBackSegmentsTheCoordinatorCannotRead(t *testing.T) {
	dir := t.TempDir()
	var want []wal.SegmentInfo
	for _, format := range []uint8{wal.FormatV1, wal.FormatV2} {
		l, err := wal.Open(wal.Options{Dir: dir, NodeID: "pi-7", Format: format})
		if err != nil {
			t.Fatal(err)
		}
		w := walSource{l: l, id: "pi-7", st: &memStore{points: map[int64]float64{}}, format: format}
		for i := range 2 {
			w.sealSegment(t, 4, t0+int64(len(want)+i)*1_000_000)
		}
		want = sealed(l.Segments())
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := wal.Open(wal.Options{Dir: dir, NodeID: "pi-7", Format: wal.FormatV2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	want = sealed(l.Segments())
	if len(want) != 4 || want[1].Version != wal.FormatV1 || want[2].Version != wal.FormatV2 {
		t.Fatalf("segments %+v; want two of version 1, then two of version 2", want)
	}
	w := walSource{l: l, id: "pi-7", st: &memStore{points: map[int64]float64{}}, format: wal.FormatV2}
	c := newCloud(t)
	c.formats = nil
	old := startIntake(t, "coord-old", c)
	o := options(t, cursorPath(t), old.addr)
	o.FreshSegments = -1
	s := newShipper(t, o)
	stop := start(t, s, w)
	eventually(t, "the version 1 segments acknowledged", func() bool { return s.Stats().AckedThrough == want[1].Seq })
	time.Sleep(200 * time.Millisecond)
	if st := s.Stats(); st.AckedThrough != want[1].Seq || !strings.Contains(st.LastError, "not format 2") {
		t.Fatalf("stats %+v; want shipping stopped before the version 2 segments, and the reason", st)
	}
	if _, _, order, _ := c.snapshot("pi-7"); len(order) != 2 {
		t.Fatalf("the old coordinator received segments %v; want the two of version 1", order)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.formats = []uint32{1, 2}
	c.mu.Unlock()
	upgraded := startIntake(t, "coord-new", c)
	o.Targets = []string{upgraded.addr}
	s = newShipper(t, o)
	start(t, s, w)
	eventually(t, "every segment acknowledged", func() bool { return s.Stats().AckedThrough == want[3].Seq })
	checkHeldOnce(t, c, "pi-7", want)
}

// TestShipper_ShipsAsWrittenWhatTheCloudHoldsSo: a segment the cloud
// already holds as written (shipped by an earlier version whose
// acknowledgement was lost) is refused compacted as a conflict; the edge
// then ships it as written, and the cloud acknowledges a duplicate.
func TestShipper_ShipsAsWrittenWhatTheCloudHoldsSo(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	l, err := wal.Open(wal.Options{Dir: t.TempDir(), NodeID: "pi-7", Format: wal.FormatV2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	w := walSource{l: l, id: "pi-7", st: &memStore{points: map[int64]float64{}}, format: wal.FormatV2}
	w.sealSegment(t, 5, 1_000_000)
	w.sealSegment(t, 5, 2_000_000)
	segs := sealed(l.Segments())
	if len(segs) != 2 || shippedCRC(t, segs[0]) == segs[0].CRC {
		t.Fatalf("want two sealed segments that compact, got %+v", segs)
	}
	c.preload("pi-7", segs[0])
	s := newShipper(t, options(t, cursorPath(t), in.addr))
	start(t, s, w)
	eventually(t, "both segments acknowledged", func() bool { return s.Stats().AckedThrough == segs[1].Seq })
	held, _, _, dups := c.snapshot("pi-7")
	if held[segs[0].Seq].crc != segs[0].CRC || held[segs[1].Seq].crc != shippedCRC(t, segs[1]) || dups != 1 {
		t.Fatalf("cloud holds %+v with %d duplicates; want the first as written, the second compacted, one duplicate", held, dups)
	}
	if st := s.Stats(); st.Refusals != 1 {
		t.Fatalf("%d refusals, want the one conflict", st.Refusals)
	}
}
