package intake_test

import (
	"context"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/intake"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/wire"
)

func TestOptions_Validate(t *testing.T) {
	var o intake.Options
	if _, err := intake.New(o); err == nil {
		t.Fatal("New accepted options without CoordinatorID, Catalog, Raft and Replicas")
	}
}

func TestIntake_StoresRecordsAndAcksSegments(t *testing.T) {
	e := startEnv(t, nil)
	c := open(t, dial(t, e.addr), "pi-1")
	w := c.welcome()
	if w.CoordinatorId != coordID || w.AckedThrough != 0 || len(w.Held) != 0 || w.MaxPartBytes != 16<<10 {
		t.Fatalf("welcome %v", w)
	}
	segs := makeSegments(t, "pi-1", 3, 1)
	// Out of order: 3 first, then 1 and 2.
	for _, i := range []int{2, 0, 1} {
		c.send(segs[i].parts...)
	}
	acked := map[uint64]uint64{}
	for range 3 {
		a := c.recv().GetAck()
		if a == nil {
			t.Fatal("a refusal, want acks")
		}
		acked[a.Seq] = a.AckedThrough
	}
	// Acks leave as the segments become durable, in any order; the last
	// one carries acked_through 3.
	if len(acked) != 3 || max(acked[1], acked[2], acked[3]) != 3 {
		t.Errorf("acks %v", acked)
	}
	for _, s := range segs {
		got, ok := e.reps.get(coordID, "pi-1", s.info.Seq)
		if !ok || got.crc != s.info.CRC || got.times != 1 {
			t.Errorf("segment %d on the replica: %+v, %v", s.info.Seq, got, ok)
		}
	}
	p, _ := e.fsm.Progress("pi-1")
	if p.AckedThrough() != 3 || len(p.Held) != 1 || p.Held[0].Points != 600 {
		t.Errorf("catalog progress %+v", p)
	}
	if n, ok := e.fsm.Node("pi-1"); !ok || n.Role != catalog.RoleEdge || n.Addr != "pi-1:7000" {
		t.Errorf("edge in the catalog: %+v %v", n, ok)
	}
	if ids := e.fsm.EdgeSeries("pi-1"); len(ids) != 2 {
		t.Errorf("edge series %v, want the 2 series of the segments", ids)
	}
	st := e.in.Stats()
	if st.SegmentsStored != 3 || st.Duplicates != 0 || st.StreamsOpen != 1 || st.BytesReceived == 0 {
		t.Errorf("stats %+v", st)
	}

	// A resend of a held segment (a lost ack) is acknowledged again and
	// stored nowhere.
	c2 := open(t, dial(t, e.addr), "pi-1")
	if w := c2.welcome(); w.AckedThrough != 3 {
		t.Fatalf("second welcome %v", w)
	}
	c2.send(segs[1].parts...)
	if a := c2.recv().GetAck(); a == nil || a.Seq != 2 || a.AckedThrough != 3 {
		t.Fatalf("resend answered %v", a)
	}
	if st := e.in.Stats(); st.Duplicates != 1 || st.SegmentsStored != 3 {
		t.Errorf("after a resend: %+v", st)
	}
	if got, _ := e.reps.get(coordID, "pi-1", 2); got.times != 1 || e.reps.restores != 0 {
		t.Errorf("resend stored again: %+v, %d restores", got, e.reps.restores)
	}

	// The same sequence with other contents is a conflict.
	other := makeSegments(t, "pi-1", 1, 99)
	if other[0].info.CRC == segs[0].info.CRC {
		t.Fatal("test bug: same crc")
	}
	c2.send(other[0].parts...)
	r := c2.recv().GetError()
	if r == nil || r.Code != pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT || r.Retryable || r.Seq != 1 {
		t.Fatalf("conflicting segment answered %v", r)
	}
	if got, _ := e.reps.get(coordID, "pi-1", 1); got.crc != segs[0].info.CRC {
		t.Error("the conflicting segment replaced the held one")
	}
	if st := e.in.Stats(); st.Conflicts != 1 || st.Refusals["SHIP_ERROR_CODE_CONFLICT"] != 1 {
		t.Errorf("stats after a conflict: %+v", st)
	}
}

func TestIntake_ReplicaFailureIsUnavailableThenSucceeds(t *testing.T) {
	e := startEnv(t, nil)
	e.reps.failNext = 1
	c := open(t, dial(t, e.addr), "pi-2")
	c.welcome()
	segs := makeSegments(t, "pi-2", 1, 1)
	c.send(segs[0].parts...)
	r := c.recv().GetError()
	if r == nil || r.Code != pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE || !r.Retryable {
		t.Fatalf("replica failure answered %v", r)
	}
	if p, _ := e.fsm.Progress("pi-2"); len(p.Held) != 0 {
		t.Fatalf("recorded although a replica failed: %+v", p)
	}
	c.send(segs[0].parts...)
	if a := c.recv().GetAck(); a == nil || a.Seq != 1 || a.AckedThrough != 1 {
		t.Fatalf("retry answered %v", a)
	}
}

func TestIntake_ReplicaConflictIsConflict(t *testing.T) {
	e := startEnv(t, nil)
	// The replica holds segment 1 with other contents the catalog never
	// recorded (say, a store whose record was lost with the old WAL).
	old := makeSegments(t, "pi-3", 1, 5)
	if _, err := e.reps.Store(context.Background(), coordID, "pi-3", 1, old[0].info.CRC, mustFile(t, old[0])); err != nil {
		t.Fatal(err)
	}
	c := open(t, dial(t, e.addr), "pi-3")
	c.welcome()
	segs := makeSegments(t, "pi-3", 1, 1)
	c.send(segs[0].parts...)
	if r := c.recv().GetError(); r == nil || r.Code != pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT || r.Retryable {
		t.Fatalf("replica conflict answered %v", r)
	}
}

func TestIntake_GapIsRecordedAndAckedThroughMovesPastIt(t *testing.T) {
	e := startEnv(t, nil)
	c := open(t, dial(t, e.addr), "pi-4")
	c.welcome()
	segs := makeSegments(t, "pi-4", 1, 1)
	c.send(segs[0].parts...)
	if a := c.recv().GetAck(); a == nil || a.AckedThrough != 1 {
		t.Fatalf("segment answered %v", a)
	}
	gap := &pb.ShipGap{NodeId: "pi-4", AfterSeq: 1, ThroughSeq: 5, Reason: pb.GapReason_GAP_REASON_MISSING, Points: -1}
	for range 2 { // a replay records nothing more
		if err := c.stream.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Gap{Gap: gap}}); err != nil {
			t.Fatal(err)
		}
		if a := c.recv().GetAck(); a == nil || a.GapThrough != 5 || a.AckedThrough != 5 {
			t.Fatalf("gap answered %v", a)
		}
	}
	p, _ := e.fsm.Progress("pi-4")
	if len(p.Gaps) != 1 || p.Gaps[0].AfterSeq != 1 || p.Gaps[0].ThroughSeq != 5 || p.Gaps[0].Reason != catalog.GapMissing {
		t.Fatalf("gaps %+v", p.Gaps)
	}
	// A bad gap is refused, the stream stays open.
	bad := &pb.ShipGap{NodeId: "pi-4", AfterSeq: 9, ThroughSeq: 9, Reason: pb.GapReason_GAP_REASON_MISSING}
	if err := c.stream.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Gap{Gap: bad}}); err != nil {
		t.Fatal(err)
	}
	if r := c.recv().GetError(); r == nil || r.Code != pb.ShipErrorCode_SHIP_ERROR_CODE_MALFORMED || r.GapThrough != 9 {
		t.Fatalf("bad gap answered %v", r)
	}
	// A new stream's welcome covers what is held and recorded.
	c2 := open(t, dial(t, e.addr), "pi-4")
	if w := c2.welcome(); w.AckedThrough != 5 {
		t.Fatalf("welcome after the gap: %v", w)
	}
}

func TestIntake_WelcomeListsCoveredRunsAboveAckedThrough(t *testing.T) {
	e := startEnv(t, nil)
	c := open(t, dial(t, e.addr), "pi-5")
	c.welcome()
	segs := makeSegments(t, "pi-5", 3, 1)
	c.send(segs[2].parts...) // covers 3 only
	if a := c.recv().GetAck(); a == nil || a.AckedThrough != 0 {
		t.Fatalf("segment 3 answered %v", a)
	}
	gap := &pb.ShipGap{NodeId: "pi-5", AfterSeq: 3, ThroughSeq: 6, Reason: pb.GapReason_GAP_REASON_DROPPED, Points: 10}
	if err := c.stream.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Gap{Gap: gap}}); err != nil {
		t.Fatal(err)
	}
	c.recv()
	w := open(t, dial(t, e.addr), "pi-5").welcome()
	if w.AckedThrough != 0 || len(w.Held) != 1 || w.Held[0].FirstSeq != 3 || w.Held[0].LastSeq != 6 {
		t.Fatalf("welcome %v, want held [3,6]", w)
	}
}

func TestIntake_HelloErrors(t *testing.T) {
	e := startEnv(t, func(o *intake.Options) {
		o.Identity = func(context.Context) (string, error) { return "pi-6", nil }
	})
	cl := dial(t, e.addr)
	for _, tc := range []struct {
		name string
		req  *pb.ShipRequest
		code codes.Code
	}{
		{"another node's id", &pb.ShipRequest{Body: &pb.ShipRequest_Hello{Hello: &pb.ShipHello{NodeId: "pi-7", ProtocolVersion: 1}}}, codes.PermissionDenied},
		{"unknown version", &pb.ShipRequest{Body: &pb.ShipRequest_Hello{Hello: &pb.ShipHello{NodeId: "pi-6", ProtocolVersion: 9}}}, codes.FailedPrecondition},
		{"segment first", &pb.ShipRequest{Body: &pb.ShipRequest_Segment{Segment: &pb.ShipSegment{NodeId: "pi-6"}}}, codes.FailedPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s, err := cl.Ship(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(tc.req); err != nil {
				t.Fatal(err)
			}
			_, err = s.Recv()
			if status.Code(err) != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
	if _, ok := e.fsm.Node("pi-7"); ok {
		t.Error("a refused hello registered its node")
	}
	c := open(t, cl, "pi-6")
	c.welcome()
	if n, _ := e.fsm.Node("pi-6"); n.Identity != "pi-6" {
		t.Errorf("edge registered with identity %q", n.Identity)
	}
}

func TestIntake_HeartbeatsOfOpenStreamsAreBatched(t *testing.T) {
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	now := time.UnixMilli(1_000_000)
	e := startEnv(t, func(o *intake.Options) {
		o.HeartbeatInterval = 20 * time.Millisecond
		o.Now = func() time.Time {
			<-mu
			defer func() { mu <- struct{}{} }()
			now = now.Add(time.Second)
			return now
		}
	})
	cl := dial(t, e.addr)
	open(t, cl, "pi-8").welcome()
	open(t, cl, "pi-9").welcome()
	first, _ := e.fsm.Node("pi-8")
	eventually(t, "heartbeats", func() bool {
		a, _ := e.fsm.Node("pi-8")
		b, _ := e.fsm.Node("pi-9")
		return a.LastHeartbeatMs > first.LastHeartbeatMs+1000 && a.LastHeartbeatMs == b.LastHeartbeatMs
	})
	eventually(t, "the heartbeat counted", func() bool { return e.in.Stats().Heartbeats > 0 })
	if st := e.in.Stats(); st.StreamsOpen != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func mustFile(t *testing.T, s segment) []byte {
	t.Helper()
	var file []byte
	for _, p := range s.parts {
		file = append(file, p.Data...)
	}
	if s.parts[0].Compression == pb.SegmentCompression_SEGMENT_COMPRESSION_NONE {
		return file
	}
	dec, err := zstdDecoder()
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	out, err := dec.DecodeAll(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestIntake_BackfillRecordsTheDeclaredPointsAndCutsTheGap: a backfill
// built from the edge's store for a BACKLOG_OVERFLOW gap is stored like a
// segment, recorded with the points the gap declared (not its footer's),
// and the catalog's gap is gone.
func TestIntake_BackfillRecordsTheDeclaredPointsAndCutsTheGap(t *testing.T) {
	e := startEnv(t, nil)
	c := open(t, dial(t, e.addr), "pi-5")
	c.welcome()
	segs := makeSegments(t, "pi-5", 1, 1)
	c.send(segs[0].parts...)
	if a := c.recv().GetAck(); a == nil || a.AckedThrough != 1 {
		t.Fatalf("segment answered %v", a)
	}
	gap := &pb.ShipGap{NodeId: "pi-5", AfterSeq: 1, ThroughSeq: 5, Reason: pb.GapReason_GAP_REASON_BACKLOG_OVERFLOW,
		Segments: 4, Points: 300, MinTimeMs: 2_000_000, MaxTimeMs: 9_000_000}
	if err := c.stream.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Gap{Gap: gap}}); err != nil {
		t.Fatal(err)
	}
	if a := c.recv().GetAck(); a == nil || a.GapThrough != 5 || a.AckedThrough != 5 {
		t.Fatalf("gap answered %v", a)
	}
	// The backfill holds 500 points (neighbours' in the same span too).
	var re record.Encoder
	re.Reset()
	re.DefineSeries(1, labels.FromStrings("__name__", "temp", "room", "r0").AppendKey(nil))
	ts, vs := make([]int64, 500), make([]float64, 500)
	for i := range ts {
		ts[i], vs[i] = 2_000_000+int64(i)*1000, float64(i)
	}
	re.AddRun(1, ts, vs)
	file, info, err := wal.EncodeSegment("pi-5", 5, 1, []wal.Record{{Data: re.AppendTo(nil), MinT: re.MinT(), MaxT: re.MaxT(), Points: re.Points()}})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := wire.NewEncoder(zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	parts, err := enc.Encode("pi-5", info, file, 1024)
	if err != nil {
		t.Fatal(err)
	}
	parts.MarkBackfill(300)
	for range 2 { // a resend after a lost ack is acknowledged again, recorded once
		c.send(parts.Parts...)
		if a := c.recv().GetAck(); a == nil || a.Seq != 5 || a.AckedThrough != 5 {
			t.Fatalf("backfill answered %v", a)
		}
	}
	p, _ := e.fsm.Progress("pi-5")
	want := uint64(segs[0].info.Points) + 300
	if len(p.Gaps) != 0 || len(p.Held) != 1 || p.Held[0].FirstSeq != 1 || p.Held[0].LastSeq != 5 || p.Held[0].Points != want {
		t.Fatalf("progress after the backfill: held %+v, gaps %+v; want one run 1..5 of %d points, no gap", p.Held, p.Gaps, want)
	}
	if got, ok := e.reps.get(coordID, "pi-5", 5); !ok || got.crc != info.CRC || got.times != 1 {
		t.Fatalf("backfill on the replica: %+v, %v", got, ok)
	}
}
