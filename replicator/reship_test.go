package replicator_test

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
	"github.com/tributarydb/tributary/replicator/wire"
)

// reshipOf asks for segs (consecutive) again, with their time span.
func reshipOf(segs ...wal.SegmentInfo) *pb.ShipReship {
	return &pb.ShipReship{FirstSeq: segs[0].PrevSeq + 1, LastSeq: segs[len(segs)-1].Seq,
		MinTimeMs: segs[0].MinT, MaxTimeMs: segs[len(segs)-1].MaxT}
}

// shipped starts s on w and waits until the cloud acknowledged every
// sealed segment and the Shipper released them.
func shipped(t *testing.T, s *replicator.Shipper, w walSource, segs []wal.SegmentInfo) func() error {
	t.Helper()
	stop := start(t, s, w)
	last := segs[len(segs)-1].Seq
	eventually(t, "every segment acknowledged and released", func() bool {
		return s.Stats().AckedThrough == last && s.RetainFrom() == last+1
	})
	return stop
}

// reshipDone waits until no reship is queued and cond holds.
func reshipDone(t *testing.T, s *replicator.Shipper, what string, cond func(replicator.Stats) bool) replicator.Stats {
	t.Helper()
	var st replicator.Stats
	eventually(t, what, func() bool {
		st = s.Stats()
		return st.ReshipsQueued == 0 && cond(st)
	})
	return st
}

// checkRebuilt requires the refills to be backfills with 0 points
// chaining over after+1..through exactly, holding every point of the
// store in [minT, maxT] once.
func checkRebuilt(t *testing.T, refills []refill, w walSource, after, through uint64, minT, maxT int64) {
	t.Helper()
	slices.SortFunc(refills, func(a, b refill) int { return int(a.seq) - int(b.seq) })
	prev := after
	var ts []int64
	for _, r := range refills {
		if r.prev != prev || !r.backfill || r.backfillPoints != 0 {
			t.Fatalf("refill %d after %d (backfill %v, %d points); want a backfill of 0 points after %d (refills %+v)",
				r.seq, r.prev, r.backfill, r.backfillPoints, prev, refills)
		}
		prev = r.seq
		ts = append(ts, r.ts...)
	}
	if prev != through {
		t.Fatalf("refills end at %d, want %d", prev, through)
	}
	var want []int64
	w.st.mu.Lock()
	for t := range w.st.points {
		if t >= minT && t <= maxT {
			want = append(want, t)
		}
	}
	w.st.mu.Unlock()
	slices.Sort(want)
	slices.Sort(ts)
	if !slices.Equal(ts, want) {
		t.Fatalf("rebuilt files hold %d timestamps, the store %d in [%d, %d]", len(ts), len(want), minT, maxT)
	}
}

// TestShipper_ReshipFromTheWALSendsTheOriginalFiles: the hello lists the
// feature; asked for a run whose files are still on disk, the edge sends
// those files as they are (their own numbers, the CRC the cloud recorded),
// not as backfills.
func TestShipper_ReshipFromTheWALSendsTheOriginalFiles(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	segs := sealN(t, w, 4)
	s := newShipper(t, options(t, cursorPath(t), in.addr))
	shipped(t, s, w, segs)
	c.mu.Lock()
	features := c.hellos[0].GetFeatures()
	c.mu.Unlock()
	if !slices.Contains(features, wire.FeatureReship) {
		t.Fatalf("hello features %v; want %q", features, wire.FeatureReship)
	}

	in.reships <- []*pb.ShipReship{reshipOf(segs[1], segs[2])}
	st := reshipDone(t, s, "run shipped again", func(st replicator.Stats) bool { return st.ReshipRequests == 1 })
	refills, unavailable := c.reshipState("pi-7")
	if len(refills) != 2 || len(unavailable) != 0 {
		t.Fatalf("refills %+v, unavailable %v; want the two segments", refills, unavailable)
	}
	for i, r := range refills {
		want := segs[1+i]
		if r.seq != want.Seq || r.prev != want.PrevSeq || r.crc != want.CRC || r.backfill || r.decoded != want.Points {
			t.Errorf("refill %d: segment %d after %d crc %08x with %d points (backfill %v); want segment %d after %d crc %08x with %d points, not a backfill",
				i, r.seq, r.prev, r.crc, r.decoded, r.backfill, want.Seq, want.PrevSeq, want.CRC, want.Points)
		}
	}
	if st.ReshipRequests != 1 || st.ReshippedRebuilt != 0 || st.ReshipsUnavailable != 0 || st.ReshippedBytes <= 0 || st.ReshipsIgnored != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestShipper_ReshipIsRebuiltFromTheStoreWhenTheWALFilesAreGone: the
// files were removed after they were acknowledged; the run is rebuilt
// from the store as backfills of 0 points covering exactly its numbers
// (in pieces, for a coordinator of small segments) and holding every
// point of its time span.
func TestShipper_ReshipIsRebuiltFromTheStoreWhenTheWALFilesAreGone(t *testing.T) {
	c := newCloud(t)
	c.maxSegmentBytes = 8 << 10
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	segs := sealN(t, w, 4)
	s := newShipper(t, options(t, cursorPath(t), in.addr))
	shipped(t, s, w, segs)
	if err := w.l.RemoveBefore(segs[3].Seq + 1); err != nil {
		t.Fatal(err)
	}
	if len(sealed(w.l.Segments())) != 0 {
		t.Fatal("sealed segments left on disk")
	}
	r := reshipOf(segs...)
	in.reships <- []*pb.ShipReship{r}
	st := reshipDone(t, s, "run rebuilt", func(st replicator.Stats) bool { return st.ReshippedRebuilt > 0 })
	refills, unavailable := c.reshipState("pi-7")
	if len(unavailable) != 0 || len(refills) < 2 {
		t.Fatalf("%d refills, unavailable %v; want the run in pieces", len(refills), unavailable)
	}
	checkRebuilt(t, refills, w, segs[0].PrevSeq, segs[3].Seq, r.MinTimeMs, r.MaxTimeMs)
	if st.ReshippedFromWAL != 0 || st.ReshippedRebuilt != int64(len(refills)) || st.ReshipsUnavailable != 0 {
		t.Fatalf("stats %+v with %d refills", st, len(refills))
	}
}

// TestShipper_ReshipPastTheRetentionHorizonIsAnsweredUnavailable: a run
// whose time span starts before now minus the node's raw retention is not
// rebuilt (the store may have dropped part of it): the edge answers
// unavailable for exactly that run, saying why, and ships nothing of it;
// a run after the horizon is rebuilt.
func TestShipper_ReshipPastTheRetentionHorizonIsAnsweredUnavailable(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	w.raw = 24 * time.Hour
	segs := sealN(t, w, 4)
	o := options(t, cursorPath(t), in.addr)
	horizon := time.UnixMilli(segs[2].MinT)
	o.Now = func() time.Time { return horizon.Add(w.raw) }
	s := newShipper(t, o)
	shipped(t, s, w, segs)
	if err := w.l.RemoveBefore(segs[3].Seq + 1); err != nil {
		t.Fatal(err)
	}
	old, recent := reshipOf(segs[0], segs[1]), reshipOf(segs[2], segs[3])
	in.reships <- []*pb.ShipReship{old, recent}
	st := reshipDone(t, s, "both answered", func(st replicator.Stats) bool { return st.ReshipRequests == 2 })
	if st.ReshipsUnavailable != 1 || st.ReshippedRebuilt == 0 {
		t.Fatalf("stats %+v; want one run unavailable, one rebuilt", st)
	}
	refills, unavailable := c.reshipState("pi-7")
	eventually(t, "the answer received", func() bool { _, unavailable = c.reshipState("pi-7"); return len(unavailable) == 1 })
	u := unavailable[0]
	if u.FirstSeq != old.FirstSeq || u.LastSeq != old.LastSeq || !strings.Contains(u.Reason, "retention") {
		t.Fatalf("unavailable %v; want %d..%d, past the retention", u, old.FirstSeq, old.LastSeq)
	}
	checkRebuilt(t, refills, w, segs[1].Seq, segs[3].Seq, recent.MinTimeMs, recent.MaxTimeMs)
	if st.ReshipRequests != 2 || st.ReshippedFromWAL != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestShipper_RepeatedReshipRequestsChangeNothing: requests for a run
// already queued, or overlapping it, are ignored: each file goes once.
// Once the run is done a new request ships it again.
func TestShipper_RepeatedReshipRequestsChangeNothing(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	segs := sealN(t, w, 4)
	s := newShipper(t, options(t, cursorPath(t), in.addr))
	shipped(t, s, w, segs)
	all := reshipOf(segs...)
	// One batch: the repeats arrive before any file of the run is
	// acknowledged.
	in.reships <- []*pb.ShipReship{all, reshipOf(segs[1], segs[2]), all}
	st := reshipDone(t, s, "run shipped again", func(st replicator.Stats) bool { return st.ReshippedFromWAL >= 4 })
	if st.ReshipRequests != 3 || st.ReshipsIgnored != 2 || st.ReshippedFromWAL != 4 {
		t.Fatalf("stats %+v; want 3 requests, 2 ignored", st)
	}
	refills, _ := c.reshipState("pi-7")
	var seqs []uint64
	for _, r := range refills {
		seqs = append(seqs, r.seq)
	}
	if want := []uint64{segs[0].Seq, segs[1].Seq, segs[2].Seq, segs[3].Seq}; !slices.Equal(seqs, want) {
		t.Fatalf("refills %v; want %v, each once", seqs, want)
	}
	in.reships <- []*pb.ShipReship{all}
	reshipDone(t, s, "run shipped again once more", func(st replicator.Stats) bool { return st.ReshippedFromWAL == 8 })
}

// TestShipper_ReshipWaitsBehindFreshAndBacklogSegments: a run asked for
// while unshipped segments wait goes after them, within the window.
func TestShipper_ReshipWaitsBehindFreshAndBacklogSegments(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	segs := sealN(t, w, 4)
	o := options(t, cursorPath(t), in.addr)
	o.WindowSegments = 1
	stop := shipped(t, newShipper(t, o), w, segs)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		w.sealSegment(t, 4, t0+int64(10+i)*1_000_000)
	}
	all := sealed(w.l.Segments())
	rs := []*pb.ShipReship{reshipOf(segs[0], segs[1])}
	in.reshipAfterWelcome.Store(&rs)
	s := newShipper(t, o)
	start(t, s, w)
	reshipDone(t, s, "backlog and run shipped", func(st replicator.Stats) bool {
		return st.AckedThrough == all[len(all)-1].Seq && st.ReshippedFromWAL == 2
	})
	_, _, order, _ := c.snapshot("pi-7")
	want := []uint64{all[4].Seq, all[5].Seq, all[6].Seq, segs[0].Seq, segs[1].Seq}
	if got := order[len(order)-5:]; !slices.Equal(got, want) {
		t.Fatalf("arrival order %v; want the waiting segments %v first, then the run", order, want)
	}
}

// TestShipper_ReshipPieceRefusedConflictIsSplitThenAnsweredUnavailable:
// as a backfill's piece, a rebuilt piece refused CONFLICT is cut in two
// and both halves go; a piece of one number refused CONFLICT is answered
// unavailable for that number.
func TestShipper_ReshipPieceRefusedConflictIsSplitThenAnsweredUnavailable(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	segs := sealN(t, w, 4)
	s := newShipper(t, options(t, cursorPath(t), in.addr))
	shipped(t, s, w, segs)
	if err := w.l.RemoveBefore(segs[3].Seq + 1); err != nil {
		t.Fatal(err)
	}
	in.refuseOnce.Store(segs[3].Seq, pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT)
	r := reshipOf(segs...)
	in.reships <- []*pb.ShipReship{r}
	reshipDone(t, s, "run rebuilt", func(st replicator.Stats) bool { return st.ReshipRequests == 1 })
	refills, unavailable := c.reshipState("pi-7")
	if len(refills) != 2 || len(unavailable) != 0 {
		t.Fatalf("refills %+v, unavailable %v; want two halves", refills, unavailable)
	}
	checkRebuilt(t, refills, w, segs[0].PrevSeq, segs[3].Seq, r.MinTimeMs, r.MaxTimeMs)

	in.refuseOnce.Store(segs[2].Seq, pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT)
	in.reships <- []*pb.ShipReship{reshipOf(segs[2])}
	st := reshipDone(t, s, "answered", func(st replicator.Stats) bool { return st.ReshipRequests == 2 })
	eventually(t, "the answer received", func() bool { _, unavailable = c.reshipState("pi-7"); return len(unavailable) == 1 })
	if u := unavailable[0]; u.FirstSeq != segs[2].Seq || u.LastSeq != segs[2].Seq || !strings.Contains(u.Reason, "refused") {
		t.Fatalf("unavailable %v; want %d..%d refused", u, segs[2].Seq, segs[2].Seq)
	}
	if refills, _ := c.reshipState("pi-7"); len(refills) != 2 || st.ReshippedRebuilt != 2 {
		t.Fatalf("refills %+v, stats %+v; nothing more should be held", refills, st)
	}
}

// vanishing is a walSource whose listed files named in gone cannot be
// read any more (deleted or rotted after they were listed).
type vanishing struct {
	walSource
	mu   *sync.Mutex
	gone map[uint64]bool
}

func (v vanishing) ReadWALSegment(seq uint64) ([]byte, wal.SegmentInfo, error) {
	v.mu.Lock()
	gone := v.gone[seq]
	v.mu.Unlock()
	if gone {
		return nil, wal.SegmentInfo{}, fmt.Errorf("read segment %d: %w", seq, fs.ErrNotExist)
	}
	return v.walSource.ReadWALSegment(seq)
}

// TestShipper_ReshipRebuildsAWALFileThatVanishedBeforeItWasSent: a run
// planned from the WAL whose one file cannot be read when its turn comes
// gets that segment rebuilt from the store over the segment's own time
// span (a backfill of 0 points with its numbers); the other files go as
// they are.
func TestShipper_ReshipRebuildsAWALFileThatVanishedBeforeItWasSent(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := vanishing{walSource: openWAL(t, "pi-7"), mu: &sync.Mutex{}, gone: map[uint64]bool{}}
	segs := sealN(t, w.walSource, 4)
	s := newShipper(t, options(t, cursorPath(t), in.addr))
	start(t, s, w)
	eventually(t, "every segment acknowledged", func() bool { return s.Stats().AckedThrough == segs[3].Seq })
	w.mu.Lock()
	w.gone[segs[1].Seq] = true
	w.mu.Unlock()
	in.reships <- []*pb.ShipReship{reshipOf(segs...)}
	st := reshipDone(t, s, "run shipped again", func(st replicator.Stats) bool { return st.ReshipRequests == 1 })
	if st.ReshippedFromWAL != 3 || st.ReshippedRebuilt != 1 || st.ReshipsUnavailable != 0 {
		t.Fatalf("stats %+v; want 3 files from the WAL, 1 rebuilt", st)
	}
	refills, _ := c.reshipState("pi-7")
	slices.SortFunc(refills, func(a, b refill) int { return int(a.seq) - int(b.seq) })
	if len(refills) != 4 {
		t.Fatalf("%d refills, want 4", len(refills))
	}
	for i, r := range refills {
		if i == 1 {
			checkRebuilt(t, refills[1:2], w.walSource, segs[1].PrevSeq, segs[1].Seq, segs[1].MinT, segs[1].MaxT)
			continue
		}
		if r.seq != segs[i].Seq || r.prev != segs[i].PrevSeq || r.crc != segs[i].CRC || r.backfill {
			t.Errorf("refill %d: segment %d after %d crc %08x (backfill %v); want the original file of %d", i, r.seq, r.prev, r.crc, r.backfill, segs[i].Seq)
		}
	}
}

// TestShipper_ReshipOfAFormatTheCoordinatorCannotReadIsRebuilt: the WAL's
// files are of format 2; asked for them again by a coordinator that lists
// no formats (format 1 only), the edge rebuilds the run from its store (a
// format 1 backfill) instead of sending files it cannot read.
func TestShipper_ReshipOfAFormatTheCoordinatorCannotReadIsRebuilt(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	w := openWAL(t, "pi-7")
	w.format = wal.FormatV2
	l, err := wal.Open(wal.Options{Dir: t.TempDir(), NodeID: "pi-7", Format: wal.FormatV2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	w.l = l
	segs := sealN(t, w, 3)
	if segs[0].Version != wal.FormatV2 {
		t.Fatalf("segment of version %d, want 2", segs[0].Version)
	}
	o := options(t, cursorPath(t), in.addr)
	s := newShipper(t, o)
	stop := shipped(t, s, w, segs)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.formats = nil
	c.mu.Unlock()
	old := startIntake(t, "coord-old", c)
	o.Targets = []string{old.addr}
	s = newShipper(t, o)
	start(t, s, w)
	r := reshipOf(segs...)
	old.reships <- []*pb.ShipReship{r}
	st := reshipDone(t, s, "run rebuilt", func(st replicator.Stats) bool { return st.ReshippedRebuilt > 0 })
	refills, unavailable := c.reshipState("pi-7")
	if len(unavailable) != 0 {
		t.Fatalf("unavailable %v", unavailable)
	}
	checkRebuilt(t, refills, w, segs[0].PrevSeq, segs[2].Seq, r.MinTimeMs, r.MaxTimeMs)
	if st.ReshippedFromWAL != 0 {
		t.Fatalf("stats %+v: format 2 files sent to a coordinator that reads format 1", st)
	}
}
