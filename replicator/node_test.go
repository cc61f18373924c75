package replicator_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// writePoints writes batches of fresh points to n, spread over a few
// series, and returns how many were accepted.
func writePoints(t *testing.T, n *node.Node, batches int, next *int64) int64 {
	t.Helper()
	var total int64
	for i := range batches {
		ts := make([]int64, 100)
		vs := make([]float64, 100)
		for k := range ts {
			ts[k] = *next
			vs[k] = float64(*next%1000) * 0.37
			*next++
		}
		res, err := n.Write(context.Background(), []model.Batch{{
			Labels: []labels.Label{{Name: "__name__", Value: "vibration"}, {Name: "axis", Value: fmt.Sprint("xyz"[i%3 : i%3+1])}},
			Ts:     ts, Vs: vs,
		}})
		if err != nil || res.Accepted != int64(len(ts)) {
			t.Fatalf("write: %+v, %v", res, err)
		}
		total += res.Accepted
	}
	return total
}

// TestShipper_RealNode runs a node whose WAL retention is the Shipper's:
// while the coordinator is unreachable, flushed segments stay on disk and
// survive a restart without being replayed; once it is reachable every
// sealed segment arrives exactly once, decodes to the points written, and
// only then may the node delete it.
func TestShipper_RealNode(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	in.down.Store(true)
	dir := t.TempDir()
	path := cursorPath(t)
	nodeOptions := func(s interface {
		RetainFrom() uint64
		WriteGate() error
	}) node.Options {
		return node.Options{
			DataDir:          dir,
			NodeID:           "pi-7",
			WALSegmentBytes:  4096,
			WALSegmentAge:    20 * time.Millisecond,
			FlushInterval:    10 * time.Millisecond,
			HeadChunkSamples: 32,
			WALRetention:     s.RetainFrom,
			WriteGate:        s.WriteGate,
		}
	}
	s := newShipper(t, options(t, path, in.addr))
	n, err := node.Open(nodeOptions(s))
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, s, n)
	next := time.Now().Add(-10 * time.Minute).UnixMilli()
	written := writePoints(t, n, 40, &next)
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	held := sealed(n.WALSegments())
	if len(held) < 5 || held[0].Seq != 1 {
		t.Fatalf("with nothing acknowledged a flush left %d sealed segments from %d; want every one from 1", len(held), held[0].Seq)
	}
	// The identity each is shipped with: compacted, as nothing acked
	// them yet their files are all here.
	shipped := map[uint64]uint32{}
	compacted := 0
	for _, seg := range held {
		shipped[seg.Seq] = shippedCRC(t, seg)
		if shipped[seg.Seq] != seg.CRC {
			compacted++
		}
	}
	if compacted == 0 {
		t.Errorf("none of %d segments compacts", len(held))
	}

	// Restart node and shipper while the link is down.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	s = newShipper(t, options(t, path, in.addr))
	n, err = node.Open(nodeOptions(s))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if st := n.Status(); st.HeadSamples != 0 {
		t.Fatalf("restart replayed %d samples already flushed", st.HeadSamples)
	}
	if got := sealed(n.WALSegments()); got[0].Seq != 1 || len(got) < len(held) {
		t.Fatalf("unacknowledged segments lost across a restart: %d sealed from %d", len(got), got[0].Seq)
	}
	start(t, s, n)

	// The link comes back while writes go on.
	in.down.Store(false)
	written += writePoints(t, n, 40, &next)
	time.Sleep(30 * time.Millisecond) // let the last segment age, then cut it with one more write
	written += writePoints(t, n, 1, &next)
	var open int64
	eventually(t, "every sealed segment acknowledged", func() bool {
		segs := n.WALSegments()
		last := segs[len(segs)-1]
		if len(sealed(segs)) != len(segs)-1 || last.Sealed {
			return false // a cut segment is still being sealed
		}
		open = last.Points
		return s.Stats().AckedThrough == last.PrevSeq
	})

	stored, gaps, _, dups := c.snapshot("pi-7")
	if dups != 0 || len(gaps) != 0 {
		t.Fatalf("%d duplicates, gaps %v", dups, gaps)
	}
	// The held segments form one unbroken chain from the first segment,
	// and hold every point written except the open segment's.
	var points int64
	for seq, seg := range stored {
		if _, ok := stored[seg.prev]; seg.prev != 0 && !ok {
			t.Errorf("segment %d follows %d, which the cloud does not hold", seq, seg.prev)
		}
		if seg.decoded != seg.points {
			t.Errorf("segment %d decodes to %d points, its footer says %d", seq, seg.decoded, seg.points)
		}
		points += seg.decoded
	}
	if points+open != written {
		t.Fatalf("cloud holds %d points and the open segment %d; %d were written", points, open, written)
	}
	// By identity: those held through the restart, and those still on disk
	// (the flush loop may have released some since they were listed).
	for _, seg := range sealed(n.WALSegments()) {
		if _, ok := shipped[seg.Seq]; !ok {
			if file, err := os.ReadFile(seg.Path); err == nil {
				shipped[seg.Seq] = shippedCRCOf(t, seg, file)
			}
		}
	}
	for seq, crc := range shipped {
		if got, ok := stored[seq]; !ok || got.crc != crc {
			t.Errorf("sealed segment %d (shipped with crc %08x) arrived as %+v", seq, crc, got)
		}
	}
	// Acknowledged and flushed: now the node may delete them. RetainFrom
	// is read before the flush: an ack arriving during or after it moves
	// RetainFrom past what that flush could release.
	retain := s.RetainFrom()
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	if first := n.WALSegments()[0].Seq; retain <= 1 || first < retain {
		t.Fatalf("after acks and a flush the oldest segment is %d, RetainFrom before the flush %d", first, retain)
	}
	// The open segment ages out (20 ms) and may be sealed and shipped by
	// now, on a busy machine: then its points count as shipped too.
	var st replicator.Stats
	eventually(t, "the backlog drained", func() bool { st = s.Stats(); return st.BacklogSegments == 0 })
	stillOpen := st.ShippedPoints == points
	if (!stillOpen && st.ShippedPoints != points+open) || st.BytesPerPoint <= 0 || (stillOpen && st.LagBytes <= 0) {
		t.Fatalf("stats (%d points held before, %d then open): %+v", points, open, st)
	}
	t.Logf("shipped %d segments, %d points, %.2f bytes/point on the wire", st.ShippedSegments, st.ShippedPoints, st.BytesPerPoint)
}

// TestShipper_RealNodeReshipsAQuarantinedSegmentFromItsStore: a node whose
// link is down flushes and stops; a sealed segment the cloud never got is
// damaged on disk before the node starts again. The node quarantines it
// (its samples are in the store: it was flushed before the stop), and the
// Shipper re-ships them from the store as a backfill carrying the
// segment's count, from the summary it recorded before the damage: the
// cloud ends up holding every point written, each segment's numbers once.
func TestShipper_RealNodeReshipsAQuarantinedSegmentFromItsStore(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	in.down.Store(true)
	dir := t.TempDir()
	o := options(t, cursorPath(t), in.addr)
	openNode := func(s *replicator.Shipper) *node.Node {
		n, err := node.Open(node.Options{DataDir: dir, NodeID: "pi-7", WALSegmentBytes: 4096, WALSegmentAge: time.Hour,
			FlushInterval: 10 * time.Millisecond, HeadChunkSamples: 32, WALRetention: s.RetainFrom, WriteGate: s.WriteGate})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	s := newShipper(t, o)
	n := openNode(s)
	stop := start(t, s, n)
	next := time.Now().Add(-10 * time.Minute).UnixMilli()
	written := writePoints(t, n, 40, &next)
	segs := sealed(n.WALSegments())
	if len(segs) < 4 {
		t.Fatalf("%d sealed segments; want at least 4", len(segs))
	}
	eventually(t, "the Shipper listed every sealed segment", func() bool { return s.Stats().NewestSealed >= segs[len(segs)-1].Seq })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil { // flushes everything, keeps every segment (nothing acknowledged)
		t.Fatal(err)
	}
	victim := segs[len(segs)/2]
	damage(t, victim.Path)

	s = newShipper(t, o)
	n = openNode(s)
	defer n.Close()
	if n.WALReplayFrom() <= victim.Seq {
		t.Fatalf("WALReplayFrom %d after a clean stop; want past segment %d", n.WALReplayFrom(), victim.Seq)
	}
	for _, seg := range n.WALSegments() {
		if seg.Seq == victim.Seq {
			t.Fatalf("damaged segment %d still listed after a restart", victim.Seq)
		}
	}
	start(t, s, n)
	in.down.Store(false)
	last := sealed(n.WALSegments())
	eventually(t, "gap backfilled and everything acknowledged", func() bool {
		st := s.Stats()
		return st.BackfilledGaps == 1 && st.AckedThrough == last[len(last)-1].Seq
	})
	held, _, _, dups := c.snapshot("pi-7")
	var points int64
	for seq, h := range held {
		switch {
		case h.backfill && seq == victim.Seq && h.prev == victim.PrevSeq && h.backfillPoints == victim.Points && h.decoded >= victim.Points:
			points += h.backfillPoints
		case h.backfill:
			t.Errorf("unexpected backfill %d: %+v (victim %+v)", seq, h, victim)
		default:
			points += h.points
		}
	}
	if _, ok := held[victim.Seq]; !ok || dups != 0 {
		t.Fatalf("victim %d not held (or %d duplicates)", victim.Seq, dups)
	}
	var open int64
	if all := n.WALSegments(); !all[len(all)-1].Sealed {
		open = all[len(all)-1].Points
	}
	if points+open != written {
		t.Fatalf("cloud records %d points and the open segment holds %d; %d were written", points, open, written)
	}
}

// TestShipper_RealNodeReshipsARunFromItsStore: a real node ships and
// flushes, and deletes its acknowledged segments; asked for the whole run
// again, it rebuilds it from its store (within its raw retention) as
// backfills of 0 points covering exactly the run's numbers and holding
// every point written in the run's time span.
func TestShipper_RealNodeReshipsARunFromItsStore(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	s := newShipper(t, options(t, cursorPath(t), in.addr))
	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: "pi-7", WALSegmentBytes: 4096, WALSegmentAge: time.Hour,
		FlushInterval: 10 * time.Millisecond, HeadChunkSamples: 32, WALRetention: s.RetainFrom, WriteGate: s.WriteGate})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	start(t, s, n)
	next := time.Now().Add(-10 * time.Minute).UnixMilli()
	writePoints(t, n, 40, &next)
	segs := sealed(n.WALSegments())
	last := segs[len(segs)-1]
	eventually(t, "every sealed segment acknowledged and released", func() bool {
		return s.Stats().AckedThrough >= last.Seq && s.RetainFrom() > last.Seq
	})
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	if left := sealed(n.WALSegments()); len(left) > 0 && left[0].Seq <= last.Seq {
		t.Fatalf("segment %d still on disk after acks and a flush", left[0].Seq)
	}
	in.reships <- []*pb.ShipReship{{FirstSeq: segs[0].PrevSeq + 1, LastSeq: last.Seq, MinTimeMs: segs[0].MinT, MaxTimeMs: last.MaxT}}
	eventually(t, "run rebuilt", func() bool { st := s.Stats(); return st.ReshipRequests == 1 && st.ReshipsQueued == 0 })
	st := s.Stats()
	refills, unavailable := c.reshipState("pi-7")
	if st.ReshippedRebuilt == 0 || st.ReshippedFromWAL != 0 || len(unavailable) != 0 {
		t.Fatalf("stats %+v, unavailable %v; want the run rebuilt", st, unavailable)
	}
	slices.SortFunc(refills, func(a, b refill) int { return int(a.seq) - int(b.seq) })
	prev := segs[0].PrevSeq
	var ts []int64
	for _, r := range refills {
		if r.prev != prev || !r.backfill || r.backfillPoints != 0 {
			t.Fatalf("refill %d after %d (backfill %v, %d points); want a backfill of 0 points after %d", r.seq, r.prev, r.backfill, r.backfillPoints, prev)
		}
		prev = r.seq
		ts = append(ts, r.ts...)
	}
	slices.Sort(ts)
	if len(ts) == 0 {
		t.Fatalf("%d refills hold no points", len(refills))
	}
	// writePoints wrote one point every millisecond.
	if prev != last.Seq || int64(len(ts)) != last.MaxT-segs[0].MinT+1 || ts[0] != segs[0].MinT || ts[len(ts)-1] != last.MaxT ||
		len(slices.Compact(ts)) != len(ts) {
		t.Fatalf("refills end at %d with %d points in [%d, %d]; want %d with the %d written in [%d, %d]", prev, len(ts), ts[0], ts[len(ts)-1],
			last.Seq, last.MaxT-segs[0].MinT+1, segs[0].MinT, last.MaxT)
	}
}
