package intake_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/klauspost/compress/zstd"
	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/intake"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const coordID = "coord-1"

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type noTransport struct{}

func (noTransport) Send([]raftpb.Message) {}

// startRaft runs a single-member raft with a catalog in which coord-1 is
// the one coordinator, so that every edge gets it as its replica. coord-1
// lists the catalog feature record-batch, so that the segments' records
// go to raft in batches, and not announce-series, whose gate a test
// opens itself.
func startRaft(t *testing.T) (*raftnode.Node, *catalog.FSM) {
	t.Helper()
	fsm := catalog.New()
	n, err := raftnode.Open(raftnode.Options{ID: 1, Dir: t.TempDir(), StateMachine: fsm, Transport: noTransport{},
		Peers: []raftnode.Peer{{ID: 1}}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ticker := time.NewTicker(10 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := n.Run(ctx, ticker.C); err != nil {
			t.Errorf("raft run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		ticker.Stop()
		if err := n.Close(); err != nil {
			t.Errorf("close raft: %v", err)
		}
	})
	n.Campaign()
	eventually(t, "a raft leader", func() bool { return n.Status().IsLeader })
	if _, err := n.Propose(context.Background(), catalog.EncodeCommand(catalog.RegisterNode{
		ID: coordID, Role: catalog.RoleCoordinator, RaftID: 1, Addr: "127.0.0.1:1",
		Labels: labels.Labels{{Name: catalog.FeaturesLabel, Value: catalog.FeatureRecordBatch}}})); err != nil {
		t.Fatal(err)
	}
	if !fsm.RecordBatchReady() {
		t.Fatal("record batches not enabled")
	}
	return n, fsm
}

// replicas is an in-memory Replicas: per coordinator, per (edge, seq), the
// crc and how many times the segment was newly stored (must stay 1).
type replicas struct {
	mu       sync.Mutex
	segs     map[string]map[string]*stored // coordinator → "edge/seq"
	failNext int                           // fail this many Store calls
	down     map[string]bool               // coordinators whose Store fails
	gate     map[string]chan struct{}      // coordinators whose Store waits for the channel
	restores int                           // Store calls for a segment already stored with the same crc
	// afterStore, if set, runs after a successful Store (outside mu).
	afterStore func(edge string, seq uint64)
}

type stored struct {
	crc    uint32
	points int64
	times  int
}

func newReplicas() *replicas { return &replicas{segs: map[string]map[string]*stored{}} }

func segKey(edge string, seq uint64) string { return fmt.Sprintf("%s/%d", edge, seq) }

var errReplicaDown = errors.New("replica down (injected)")

func (r *replicas) Store(ctx context.Context, coord, edge string, seq uint64, crc uint32, file []byte) (intake.Stored, error) {
	var series []labels.Labels
	var dec record.Decoder
	info, err := wal.VerifySegment("stored", file, func(rec wal.Record) error {
		return dec.Decode(rec.Data, func(_ uint64, key []byte) error {
			ls, err := labels.DecodeKey(key)
			series = append(series, ls)
			return err
		}, func(uint64, []int64, []float64) error { return nil })
	})
	if err != nil {
		return intake.Stored{}, fmt.Errorf("fake replica: %w", err)
	}
	if info.CRC != crc || info.Seq != seq {
		return intake.Stored{}, fmt.Errorf("fake replica: file is segment %d crc %08x, asked to store %d %08x", info.Seq, info.CRC, seq, crc)
	}
	r.mu.Lock()
	if r.failNext > 0 || r.down[coord] {
		if !r.down[coord] {
			r.failNext--
		}
		r.mu.Unlock()
		return intake.Stored{}, errReplicaDown
	}
	if g := r.gate[coord]; g != nil {
		r.mu.Unlock()
		select {
		case <-g:
		case <-ctx.Done():
			return intake.Stored{}, ctx.Err()
		}
		r.mu.Lock()
	}
	dup := false
	m := r.segs[coord]
	if m == nil {
		m = map[string]*stored{}
		r.segs[coord] = m
	}
	if old := m[segKey(edge, seq)]; old != nil {
		r.mu.Unlock()
		if old.crc != crc {
			return intake.Stored{}, fmt.Errorf("fake replica: held with %08x: %w", old.crc, intake.ErrConflict)
		}
		r.mu.Lock()
		r.restores++
		r.mu.Unlock()
		dup = true
	} else {
		m[segKey(edge, seq)] = &stored{crc: crc, points: info.Points, times: 1}
		r.mu.Unlock()
	}
	r.mu.Lock()
	f := r.afterStore
	r.mu.Unlock()
	if f != nil {
		f(edge, seq)
	}
	if dup {
		return intake.Stored{Series: series, Duplicate: true}, nil
	}
	return intake.Stored{Series: series, Points: info.Points}, nil
}

func (r *replicas) CRC(ctx context.Context, coord, edge string, seq uint64) (uint32, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.segs[coord][segKey(edge, seq)]
	if s == nil {
		return 0, false, nil
	}
	return s.crc, true, nil
}

func (r *replicas) get(coord, edge string, seq uint64) (stored, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.segs[coord][segKey(edge, seq)]
	if s == nil {
		return stored{}, false
	}
	return *s, true
}

func (r *replicas) count(coord string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.segs[coord])
}

// env is an intake on loopback gRPC with its raft and fake replicas.
type env struct {
	raft *raftnode.Node
	fsm  *catalog.FSM
	reps *replicas
	in   *intake.Server
	addr string
	// cancelStreams cancels every server stream open now.
	mu      sync.Mutex
	cancels []context.CancelFunc
}

func startEnv(t *testing.T, edit func(*intake.Options)) *env {
	t.Helper()
	n, fsm := startRaft(t)
	e := &env{raft: n, fsm: fsm, reps: newReplicas()}
	o := intake.Options{CoordinatorID: coordID, Catalog: fsm, Raft: n, Replicas: e.reps, Logger: testLogger(t),
		Limits: wire.Limits{MaxPartBytes: 16 << 10}, ProposalTimeout: 2 * time.Second}
	if edit != nil {
		edit(&o)
	}
	in, err := intake.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.in = in
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = lis.Addr().String()
	// The interceptor lets a test kill the server side of open streams.
	g := grpc.NewServer(grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, cancel := context.WithCancel(ss.Context())
		defer cancel()
		e.mu.Lock()
		e.cancels = append(e.cancels, cancel)
		e.mu.Unlock()
		return h(srv, ctxStream{ss, ctx})
	}))
	in.Register(g)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-served
		in.Close()
	})
	return e
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

func (e *env) killStreams() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.cancels {
		c()
	}
	e.cancels = nil
}

// client is a raw ReplicationService stream.
type client struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[pb.ShipRequest, pb.ShipResponse]
}

func dial(t *testing.T, addr string) pb.ReplicationServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewReplicationServiceClient(cc)
}

// open opens a stream and sends the hello; it does not read the welcome.
func open(t *testing.T, c pb.ReplicationServiceClient, node string) *client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.Ship(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Hello{Hello: &pb.ShipHello{
		NodeId: node, ProtocolVersion: wire.ProtocolVersion, QueryAddr: node + ":7000"}}}); err != nil {
		t.Fatal(err)
	}
	return &client{t: t, stream: s}
}

func (c *client) recv() *pb.ShipResponse {
	c.t.Helper()
	r, err := c.stream.Recv()
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	return r
}

func (c *client) welcome() *pb.ShipWelcome {
	c.t.Helper()
	w := c.recv().GetWelcome()
	if w == nil {
		c.t.Fatal("first response is not a welcome")
	}
	return w
}

func (c *client) send(parts ...*pb.ShipSegment) {
	c.t.Helper()
	for _, p := range parts {
		if err := c.stream.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Segment{Segment: p}}); err != nil {
			c.t.Fatal(err)
		}
	}
}

// segments writes n segments of a wal of node (different contents per
// salt) and returns their encoded parts.
type segment struct {
	info  wal.SegmentInfo
	parts []*pb.ShipSegment
}

func makeSegments(t *testing.T, node string, n int, salt float64) []segment {
	t.Helper()
	l, err := wal.Open(wal.Options{Dir: t.TempDir(), NodeID: node})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	enc, err := wire.NewEncoder(zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var out []segment
	for i := range n {
		key := labels.FromStrings("__name__", "temp", "room", fmt.Sprint("r", i%2)).AppendKey(nil)
		var re record.Encoder
		re.Reset()
		re.DefineSeries(1, key)
		ts := make([]int64, 200)
		vs := make([]float64, 200)
		for k := range ts {
			ts[k] = 1_700_000_000_000 + int64(i)*1_000_000 + int64(k)*1000
			vs[k] = salt + float64(k%17)*0.5
		}
		re.AddRun(1, ts, vs)
		pos, err := l.Append(wal.Record{Data: re.AppendTo(nil), MinT: re.MinT(), MaxT: re.MaxT(), Points: re.Points()})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(pos); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Cut(); err != nil {
			t.Fatal(err)
		}
	}
	for _, info := range l.Segments() {
		if !info.Sealed {
			continue
		}
		file, info, err := l.ReadSealed(info.Seq)
		if err != nil {
			t.Fatal(err)
		}
		e, err := enc.Encode(node, info, file, 1024)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, segment{info: info, parts: e.Parts})
	}
	if len(out) != n {
		t.Fatalf("%d sealed segments, want %d", len(out), n)
	}
	return out
}

// eventually polls cond every 5 ms for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func zstdDecoder() (*zstd.Decoder, error) { return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1)) }
