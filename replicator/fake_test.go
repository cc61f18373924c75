package replicator_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/internal/seqset"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/segment"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/wire"
)

// cloud is the fake of what the coordinators hold durably, shared by every
// fake intake of a test (as the raft catalog and replica stores would be).
// It stores segments by (node, seq) and verifies everything the protocol
// says a coordinator must.
type cloud struct {
	t  testing.TB
	mu sync.Mutex
	// Per node: segments by seq, gaps by through_seq, covered numbers.
	segs map[string]map[uint64]storedSeg
	gaps map[string]map[uint64]*pb.ShipGap
	cov  map[string]*seqset.Set
	// held: the numbers of the segments stored (not gaps). A segment sent
	// again for numbers all held (a resend, or a reship) is taken as the
	// intake does: a backfill without comparing CRCs, another with the
	// stored CRC; each one is appended to refills.
	held    map[string]*seqset.Set
	refills map[string][]refill
	// unavailable: the ShipReshipUnavailable answers received.
	unavailable []*pb.ShipReshipUnavailable

	completions []uint64 // seq of every complete segment received, duplicates included, in order
	// maxSegmentBytes goes into every welcome (0: not said).
	maxSegmentBytes uint64
	duplicates      int
	hellos          []*pb.ShipHello
	// config goes into every welcome; afterWelcome are sent on every
	// stream right after the welcome.
	config       *pb.EdgeConfig
	afterWelcome []*pb.EdgeConfig
	// formats go into every welcome's segment_formats (newCloud: 1 and 2,
	// as a current coordinator says; nil: none listed, as from a
	// coordinator that reads format 1 only).
	formats []uint32
}

// refill is a segment received for numbers the cloud held already.
type refill struct {
	seq, prev      uint64
	crc            uint32
	backfill       bool
	backfillPoints int64
	decoded        int64
	// ts are the timestamps the file holds, in file order.
	ts []int64
}

type storedSeg struct {
	prev    uint64
	crc     uint32
	points  int64 // from the footer
	decoded int64 // counted by decoding every record
	stored  int   // times stored: must stay 1
	// backfill: built from the edge's store for a gap; backfillPoints is
	// what the cloud records for it (the gap's declared points).
	backfill       bool
	backfillPoints int64
}

func newCloud(t testing.TB) *cloud {
	return &cloud{t: t, segs: map[string]map[uint64]storedSeg{}, gaps: map[string]map[uint64]*pb.ShipGap{}, cov: map[string]*seqset.Set{},
		held: map[string]*seqset.Set{}, refills: map[string][]refill{}, formats: []uint32{1, 2}}
}

func (c *cloud) setFor(node string) *seqset.Set {
	if c.cov[node] == nil {
		c.cov[node] = &seqset.Set{}
		c.held[node] = &seqset.Set{}
		c.segs[node] = map[uint64]storedSeg{}
		c.gaps[node] = map[uint64]*pb.ShipGap{}
	}
	return c.cov[node]
}

// welcome is what a coordinator answers a hello with.
func (c *cloud) welcome(name, node string, stale bool) *pb.ShipWelcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &pb.ShipWelcome{CoordinatorId: name, MaxPartBytes: 64 << 10, MaxSegmentBytes: c.maxSegmentBytes, Config: c.config, SegmentFormats: c.formats}
	if stale {
		return w // as a replica that has not caught up would answer
	}
	cov := c.setFor(node)
	w.AckedThrough = cov.Through(0)
	for _, r := range cov.Ranges() {
		if r.First > w.AckedThrough+1 {
			w.Held = append(w.Held, &pb.SeqRange{FirstSeq: r.First, LastSeq: r.Last})
		}
	}
	return w
}

// store keeps a verified segment unless it holds it already; a different
// checksum under a held sequence is a conflict.
func (c *cloud) store(seg *wire.Segment) (uint64, *wire.Error) {
	// Decode every record as the replica store would apply it.
	var dec record.Decoder
	var decoded int64
	var times []int64
	_, err := wal.VerifySegment("shipped", seg.File, func(r wal.Record) error {
		return dec.Decode(r.Data, func(uint64, []byte) error { return nil }, func(_ uint64, ts []int64, _ []float64) error {
			decoded += int64(len(ts))
			times = append(times, ts...)
			return nil
		})
	})
	if err != nil {
		c.t.Errorf("fake intake: segment %d does not decode: %v", seg.Seq, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cov := c.setFor(seg.NodeID)
	c.completions = append(c.completions, seg.Seq)
	if c.held[seg.NodeID].Through(seg.PrevSeq) >= seg.Seq {
		// Held: the intake's held path.
		old, ok := c.segs[seg.NodeID][seg.Seq]
		if !seg.Backfill && ok && old.crc != seg.CRC {
			return cov.Through(0), &wire.Error{Seq: seg.Seq, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT,
				Msg: fmt.Sprintf("held with checksum %08x, sent with %08x", old.crc, seg.CRC)}
		}
		if !seg.Backfill && ok {
			c.duplicates++
		}
		c.refills[seg.NodeID] = append(c.refills[seg.NodeID], refill{seq: seg.Seq, prev: seg.PrevSeq, crc: seg.CRC,
			backfill: seg.Backfill, backfillPoints: seg.BackfillPoints, decoded: decoded, ts: times})
		return cov.Through(0), nil
	}
	if old, ok := c.segs[seg.NodeID][seg.Seq]; ok {
		if old.crc != seg.CRC {
			return cov.Through(0), &wire.Error{Seq: seg.Seq, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT,
				Msg: fmt.Sprintf("held with checksum %08x, sent with %08x", old.crc, seg.CRC)}
		}
		// Stored but not yet recorded as held (see preload): recorded now.
		c.duplicates++
		cov.Add(seg.PrevSeq+1, seg.Seq)
		c.held[seg.NodeID].Add(seg.PrevSeq+1, seg.Seq)
		return cov.Through(0), nil
	}
	c.segs[seg.NodeID][seg.Seq] = storedSeg{prev: seg.PrevSeq, crc: seg.CRC, points: seg.Points, decoded: decoded, stored: 1,
		backfill: seg.Backfill, backfillPoints: seg.BackfillPoints}
	cov.Add(seg.PrevSeq+1, seg.Seq)
	c.held[seg.NodeID].Add(seg.PrevSeq+1, seg.Seq)
	return cov.Through(0), nil
}

func (c *cloud) recordGap(node string, g *pb.ShipGap) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	cov := c.setFor(node)
	if _, ok := c.gaps[node][g.ThroughSeq]; !ok {
		c.gaps[node][g.ThroughSeq] = g
		cov.Add(g.AfterSeq+1, g.ThroughSeq)
	}
	return cov.Through(0)
}

func (c *cloud) ackedThrough(node string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setFor(node).Through(0)
}

// snapshot returns copies of what the cloud holds for node.
func (c *cloud) snapshot(node string) (map[uint64]storedSeg, map[uint64]*pb.ShipGap, []uint64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setFor(node)
	segs := map[uint64]storedSeg{}
	for k, v := range c.segs[node] {
		segs[k] = v
	}
	gaps := map[uint64]*pb.ShipGap{}
	for k, v := range c.gaps[node] {
		gaps[k] = v
	}
	return segs, gaps, slices.Clone(c.completions), c.duplicates
}

// reshipState returns copies of the refills of node and of the
// unavailable answers received.
func (c *cloud) reshipState(node string) ([]refill, []*pb.ShipReshipUnavailable) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.refills[node]), slices.Clone(c.unavailable)
}

// intake is one fake coordinator serving ReplicationService on loopback
// TCP, with fault injection.
type intake struct {
	pb.UnimplementedReplicationServiceServer
	name  string
	cloud *cloud
	srv   *grpc.Server
	addr  string

	down       atomic.Bool  // refuse every stream with UNAVAILABLE
	dropAcks   atomic.Int64 // drop this many segment acks
	killMid    atomic.Bool  // end the next stream when a segment's second part arrives
	halfOpen   atomic.Bool  // after the welcome, stop reading (never close)
	stale      atomic.Bool  // welcome with nothing held, as a lagging replica
	refuseOnce sync.Map     // seq → pb.ShipErrorCode: refuse that segment once
	refuseAll  atomic.Bool  // refuse every segment as UNAVAILABLE (retryable), as when a replica is down
	streams    atomic.Int64
	// reships: each value received is sent, as one batch of reship
	// requests, on the open stream (one stream takes it).
	reships chan []*pb.ShipReship
	// reshipAfterWelcome is sent on every stream right after the welcome.
	reshipAfterWelcome atomic.Pointer[[]*pb.ShipReship]
	// clientCert is the subject of the last verified client certificate.
	clientCert atomic.Value
}

func startIntake(t *testing.T, name string, c *cloud, opts ...grpc.ServerOption) *intake {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	in := &intake{name: name, cloud: c, addr: lis.Addr().String(), reships: make(chan []*pb.ShipReship, 16)}
	// The edge pings every KeepaliveTime, also between streams: the
	// enforcement policy must allow it.
	opts = append(opts, grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}))
	in.srv = grpc.NewServer(opts...)
	pb.RegisterReplicationServiceServer(in.srv, in)
	go in.srv.Serve(lis)
	t.Cleanup(in.srv.Stop)
	return in
}

func (in *intake) Ship(stream grpc.BidiStreamingServer[pb.ShipRequest, pb.ShipResponse]) error {
	in.streams.Add(1)
	if p, ok := peer.FromContext(stream.Context()); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			in.clientCert.Store(ti.State.VerifiedChains[0][0].Subject.CommonName)
		}
	}
	if in.down.Load() {
		return status.Error(codes.Unavailable, "fake intake is down")
	}
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := req.GetHello()
	if err := wire.CheckHello(hello, ""); err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	node := hello.NodeId
	in.cloud.mu.Lock()
	in.cloud.hellos = append(in.cloud.hellos, hello)
	in.cloud.mu.Unlock()
	w := in.cloud.welcome(in.name, node, in.stale.Load())
	if err := stream.Send(&pb.ShipResponse{Body: &pb.ShipResponse_Welcome{Welcome: w}}); err != nil {
		return err
	}
	in.cloud.mu.Lock()
	configs := slices.Clone(in.cloud.afterWelcome)
	in.cloud.mu.Unlock()
	for _, cfg := range configs {
		if err := stream.Send(&pb.ShipResponse{Body: &pb.ShipResponse_Config{Config: cfg}}); err != nil {
			return err
		}
	}
	// From here, reship requests go out beside the acks: one sender at a
	// time, and a batch of requests in one go (nothing between them).
	var sendMu sync.Mutex
	send := func(rs ...*pb.ShipResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		for _, r := range rs {
			if err := stream.Send(r); err != nil {
				return err
			}
		}
		return nil
	}
	reshipMsgs := func(rs []*pb.ShipReship) []*pb.ShipResponse {
		var out []*pb.ShipResponse
		for _, r := range rs {
			out = append(out, &pb.ShipResponse{Body: &pb.ShipResponse_Reship{Reship: r}})
		}
		return out
	}
	if rs := in.reshipAfterWelcome.Load(); rs != nil {
		if err := send(reshipMsgs(*rs)...); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case rs := <-in.reships:
				if send(reshipMsgs(rs)...) != nil {
					return
				}
			}
		}
	})
	asm, err := wire.NewAssembler(node, wire.Limits{MaxPartBytes: int(w.MaxPartBytes), MaxSegmentBytes: w.MaxSegmentBytes})
	if err != nil {
		return err
	}
	defer asm.Close()
	refuse := func(e *wire.Error) error {
		return send(&pb.ShipResponse{Body: &pb.ShipResponse_Error{Error: e.Proto()}})
	}
	ack := func(a *pb.ShipAck) error {
		return send(&pb.ShipResponse{Body: &pb.ShipResponse_Ack{Ack: a}})
	}
	for {
		if in.halfOpen.Load() {
			<-stream.Context().Done()
			return stream.Context().Err()
		}
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		switch b := req.Body.(type) {
		case *pb.ShipRequest_Segment:
			part := b.Segment
			if part.Offset > 0 && in.killMid.CompareAndSwap(true, false) {
				return status.Error(codes.Unavailable, "fake intake killed the stream mid-segment")
			}
			seg, werr := asm.Add(part)
			if werr != nil {
				if err := refuse(werr); err != nil {
					return err
				}
				continue
			}
			if seg == nil {
				continue
			}
			if in.refuseAll.Load() {
				if err := refuse(&wire.Error{Seq: seg.Seq, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE, Retryable: true, Msg: "injected: a replica is down"}); err != nil {
					return err
				}
				continue
			}
			if code, ok := in.refuseOnce.LoadAndDelete(seg.Seq); ok {
				if err := refuse(&wire.Error{Seq: seg.Seq, Code: code.(pb.ShipErrorCode), Retryable: true, Msg: "injected"}); err != nil {
					return err
				}
				continue
			}
			through, werr := in.cloud.store(seg)
			if werr != nil {
				if err := refuse(werr); err != nil {
					return err
				}
				continue
			}
			if in.dropAcks.Add(-1) >= 0 {
				continue
			}
			if err := ack(&pb.ShipAck{Seq: seg.Seq, AckedThrough: through}); err != nil {
				return err
			}
		case *pb.ShipRequest_Gap:
			if werr := wire.CheckGap(node, b.Gap); werr != nil {
				if err := refuse(werr); err != nil {
					return err
				}
				continue
			}
			through := in.cloud.recordGap(node, b.Gap)
			if err := ack(&pb.ShipAck{GapThrough: b.Gap.ThroughSeq, AckedThrough: through}); err != nil {
				return err
			}
		case *pb.ShipRequest_ReshipUnavailable:
			in.cloud.mu.Lock()
			in.cloud.unavailable = append(in.cloud.unavailable, b.ReshipUnavailable)
			in.cloud.mu.Unlock()
		default:
			return status.Error(codes.FailedPrecondition, "second hello")
		}
	}
}

// walSource ships straight from a wal.Log (no node): tests control exactly
// which segments exist.
type walSource struct {
	l  *wal.Log
	id string
	st *memStore // what the node's local store holds: every point sealed
	// replayFrom is what WALReplayFrom answers (0: nothing vouched for
	// by a flush before the source opened).
	replayFrom uint64
	// raw is the raw retention Retention answers (0: a century).
	raw time.Duration
	// format is the WAL's format version (0: version 1), and so the kind
	// of records sealSegment writes.
	format uint8
}

// memStore is a fake of the node's store for ExportRange: one series'
// points by time (last write wins).
type memStore struct {
	mu     sync.Mutex
	points map[int64]float64
}

func (m *memStore) add(ts []int64, vs []float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, t := range ts {
		m.points[t] = vs[i]
	}
}

func (w walSource) ExportRange(ctx context.Context, minT, maxT int64, fn func(labels.Labels, []int64, []float64) error) error {
	w.st.mu.Lock()
	var ts []int64
	for t := range w.st.points {
		if t >= minT && t <= maxT {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	vs := make([]float64, len(ts))
	for i, t := range ts {
		vs[i] = w.st.points[t]
	}
	w.st.mu.Unlock()
	if len(ts) == 0 {
		return ctx.Err()
	}
	return fn(labels.FromStrings("__name__", "temp", "room", "lab"), ts, vs)
}

func (w walSource) Retention() (raw, hourly, daily time.Duration) {
	raw = w.raw
	if raw == 0 {
		raw = 100 * 365 * 24 * time.Hour
	}
	return raw, raw, raw
}

func (w walSource) NodeID() string                 { return w.id }
func (w walSource) WALReplayFrom() uint64          { return w.replayFrom }
func (w walSource) WALSegments() []wal.SegmentInfo { return w.l.Segments() }
func (w walSource) ReadWALSegment(seq uint64) ([]byte, wal.SegmentInfo, error) {
	return w.l.ReadSealed(seq)
}

func openWAL(t *testing.T, id string) walSource {
	t.Helper()
	l, err := wal.Open(wal.Options{Dir: t.TempDir(), NodeID: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return walSource{l: l, id: id, st: &memStore{points: map[int64]float64{}}}
}

// sealSegment appends records of real samples (node/record payloads) and
// seals them into one segment. It returns the segment's points.
func (w walSource) sealSegment(t *testing.T, records int, t0 int64) int64 {
	t.Helper()
	key := labels.FromStrings("__name__", "temp", "room", "lab").AppendKey(nil)
	var points int64
	for r := range records {
		var enc record.Encoder
		enc.Reset()
		if w.format == wal.FormatV2 {
			enc.SetKind(record.KindCompressed)
		}
		enc.DefineSeries(1, key)
		ts := make([]int64, 50)
		vs := make([]float64, 50)
		for k := range ts {
			ts[k] = t0 + int64(r*50+k)*1000
			vs[k] = 20 + float64((r*50+k)%37)*0.173
		}
		enc.AddRun(1, ts, vs)
		w.st.add(ts, vs)
		data := enc.AppendTo(nil)
		pos, err := w.l.Append(wal.Record{Data: data, MinT: enc.MinT(), MaxT: enc.MaxT(), Points: enc.EncodedPoints()})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.l.Sync(pos); err != nil {
			t.Fatal(err)
		}
		points += enc.EncodedPoints()
	}
	if _, err := w.l.Cut(); err != nil {
		t.Fatal(err)
	}
	return points
}

// sealed returns the node's sealed segments.
func sealed(segs []wal.SegmentInfo) []wal.SegmentInfo {
	var out []wal.SegmentInfo
	for _, s := range segs {
		if s.Sealed {
			out = append(out, s)
		}
	}
	return out
}

// eventually polls cond every 5 ms for up to 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkHeldOnce requires that the cloud holds exactly the given segments
// (backfills aside), each stored once, with the right checksum, decoding
// to its points.
func checkHeldOnce(t *testing.T, c *cloud, node string, want []wal.SegmentInfo) {
	t.Helper()
	segs, _, _, _ := c.snapshot(node)
	for seq, s := range segs {
		if s.backfill {
			delete(segs, seq)
		}
	}
	for _, s := range want {
		got, ok := segs[s.Seq]
		switch {
		case !ok:
			t.Errorf("segment %d not held", s.Seq)
		case got.crc != shippedCRC(t, s) || got.prev != s.PrevSeq:
			t.Errorf("segment %d held with crc %08x prev %d, sealed with %08x (shipped as %08x) prev %d", s.Seq, got.crc, got.prev, s.CRC, shippedCRC(t, s), s.PrevSeq)
		case got.stored != 1:
			t.Errorf("segment %d stored %d times", s.Seq, got.stored)
		case got.decoded != s.Points || got.points != s.Points:
			t.Errorf("segment %d decodes to %d points (footer %d), sealed with %d", s.Seq, got.decoded, got.points, s.Points)
		}
	}
	if len(segs) != len(want) {
		t.Errorf("cloud holds %d segments, want %d", len(segs), len(want))
	}
}

// shippedCRC is the crc32c sealed WAL segment s reaches the cloud with: of
// its compacted form (segment.Compact) when it compacts, else its own. A
// format 1 segment never compacts; a format 2 one must still be on disk.
func shippedCRC(t *testing.T, s wal.SegmentInfo) uint32 {
	t.Helper()
	if s.Version != wal.FormatV2 {
		return s.CRC
	}
	file, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatalf("segment %d: %v", s.Seq, err)
	}
	return shippedCRCOf(t, s, file)
}

// shippedCRCOf is shippedCRC of s, whose file holds file.
func shippedCRCOf(t *testing.T, s wal.SegmentInfo, file []byte) uint32 {
	t.Helper()
	_, ci, ok, err := segment.Compact(file)
	if err != nil {
		t.Fatalf("segment %d: %v", s.Seq, err)
	}
	if ok {
		return ci.CRC
	}
	return s.CRC
}

// preload stores segment s of node as if a replica had stored it and the
// catalog had not recorded it yet: the welcome does not list it, and the
// segment sent again is compared with its crc.
func (c *cloud) preload(node string, s wal.SegmentInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setFor(node)
	c.segs[node][s.Seq] = storedSeg{prev: s.PrevSeq, crc: s.CRC, points: s.Points, decoded: s.Points, stored: 1}
}
