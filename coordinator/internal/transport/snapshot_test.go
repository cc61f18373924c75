package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// snapMsg is a MsgSnap from from to to whose snapshot holds data.
func snapMsg(from, to uint64, data []byte) raftpb.Message {
	return raftpb.Message{Type: raftpb.MsgSnap, From: from, To: to, Term: 3,
		Snapshot: &raftpb.Snapshot{Data: data, Metadata: raftpb.SnapshotMetadata{Index: 42, Term: 3,
			ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}}
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// smallEnvelopes makes a server whose one-message limit is far below the
// snapshots the tests send, so that only chunks can carry them.
func smallEnvelopes(o *ServerOptions) { o.MaxEnvelopeBytes = 64 << 10 }

func TestTransport_SnapshotLargerThanAMessageArrivesInChunks(t *testing.T) {
	client, server := sharedTLS(t)
	cfg := memberConfig{client: client, server: server, name: "localhost", serverOpts: smallEnvelopes,
		opts: func(o *Options) { o.SnapshotChunkBytes = 16 << 10 }}
	a, b := startMember(t, 1, cfg), startMember(t, 2, cfg)
	connect(t, a, b)
	data := randomBytes(1<<20 + 123) // 65 chunks, the last one short
	a.tr.Send([]raftpb.Message{snapMsg(1, 2, data)})
	eventually(t, "snapshot report", func() bool { return len(a.rec.snapReports(2)) == 1 })
	if r := a.rec.snapReports(2); !r[0] {
		t.Fatal("snapshot reported failed")
	}
	got := b.rec.received()
	if len(got) != 1 {
		t.Fatalf("received %d messages, want the snapshot", len(got))
	}
	m := got[0]
	if m.Type != raftpb.MsgSnap || m.From != 1 || m.To != 2 || m.Term != 3 || m.Snapshot.Metadata.Index != 42 ||
		len(m.Snapshot.Metadata.ConfState.Voters) != 3 {
		t.Fatalf("received %v, index %d, conf state %v", m.Type, m.Snapshot.Metadata.Index, m.Snapshot.Metadata.ConfState)
	}
	if !bytes.Equal(m.Snapshot.Data, data) {
		t.Fatalf("snapshot data differs: %d bytes received, %d sent", len(m.Snapshot.Data), len(data))
	}
	if st := b.srv.Stats(); st.SnapshotsReceived != 1 || st.Received != 1 || st.Refused != 0 {
		t.Fatalf("receiver stats %+v", st)
	}
	if st := a.tr.Stats(); st.SnapshotsSent != 1 || st.SnapshotsFailed != 0 {
		t.Fatalf("sender stats %+v", st)
	}
}

func TestTransport_EmptySnapshotArrives(t *testing.T) {
	a, b := startMember(t, 1, memberConfig{}), startMember(t, 2, memberConfig{})
	connect(t, a, b)
	a.tr.Send([]raftpb.Message{snapMsg(1, 2, nil)})
	eventually(t, "snapshot report", func() bool { return len(a.rec.snapReports(2)) == 1 })
	if r := a.rec.snapReports(2); !r[0] || len(b.rec.received()) != 1 {
		t.Fatalf("reports %v, received %d", r, len(b.rec.received()))
	}
}

func TestTransport_SnapshotAboveReceiverLimitIsRefused(t *testing.T) {
	cfg := memberConfig{serverOpts: func(o *ServerOptions) { o.MaxSnapshotBytes = 100 << 10 }}
	a, b := startMember(t, 1, cfg), startMember(t, 2, cfg)
	connect(t, a, b)
	a.tr.Send([]raftpb.Message{snapMsg(1, 2, randomBytes(200<<10))})
	eventually(t, "snapshot report", func() bool { return len(a.rec.snapReports(2)) == 1 })
	if r := a.rec.snapReports(2); r[0] {
		t.Fatal("a snapshot above the receiver's limit reported delivered")
	}
	if n := len(b.rec.received()); n != 0 {
		t.Fatalf("the receiver stepped %d messages", n)
	}
}

func TestTransport_SnapshotAboveSenderLimitFails(t *testing.T) {
	cfg := memberConfig{opts: func(o *Options) { o.MaxSnapshotBytes = 1000 }}
	a, b := startMember(t, 1, cfg), startMember(t, 2, memberConfig{})
	connect(t, a, b)
	a.tr.Send([]raftpb.Message{snapMsg(1, 2, make([]byte, 1001))})
	eventually(t, "snapshot report", func() bool { return len(a.rec.snapReports(2)) == 1 })
	if r := a.rec.snapReports(2); r[0] || len(b.rec.received()) != 0 {
		t.Fatalf("reports %v, received %d", r, len(b.rec.received()))
	}
}

// legacyServer is a receiver of an earlier version: RaftService without
// SendSnapshot.
type legacyServer struct{ *Server }

func (legacyServer) SendSnapshot(clusterv1.RaftService_SendSnapshotServer) error {
	return status.Error(codes.Unimplemented, "method SendSnapshot not implemented")
}

func TestTransport_SnapshotToAnEarlierVersionGoesInOneEnvelope(t *testing.T) {
	a := startMember(t, 1, memberConfig{})
	b := startMember(t, 2, memberConfig{})
	// Serve b's Server without its SendSnapshot on another listener.
	g := grpc.NewServer()
	clusterv1.RegisterRaftServiceServer(g, legacyServer{b.srv})
	lis, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	if err := a.tr.AddPeer(2, Peer{Addr: lis.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	if err := b.tr.AddPeer(1, Peer{Addr: a.addr}); err != nil {
		t.Fatal(err)
	}
	data := randomBytes(300 << 10)
	a.tr.Send([]raftpb.Message{snapMsg(1, 2, data)})
	eventually(t, "snapshot report", func() bool { return len(a.rec.snapReports(2)) == 1 })
	got := b.rec.received()
	if r := a.rec.snapReports(2); !r[0] || len(got) != 1 || !bytes.Equal(got[0].Snapshot.Data, data) {
		t.Fatalf("reports %v, received %d messages", r, len(got))
	}
	if st := b.srv.Stats(); st.SnapshotsReceived != 0 {
		t.Fatalf("receiver stats %+v: the snapshot came in chunks", st)
	}
}

// rawSnapshotStream opens a SendSnapshot stream to m as member from (with
// the sender headers unless bare).
func rawSnapshotStream(t *testing.T, m *member, from uint64, bare bool) clusterv1.RaftService_SendSnapshotClient {
	t.Helper()
	conn, err := grpc.NewClient(m.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if !bare {
		ctx = metadata.AppendToOutgoingContext(ctx, HeaderClusterID, cluster, HeaderMemberID, strconv.FormatUint(from, 10))
	}
	s, err := clusterv1.NewRaftServiceClient(conn).SendSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// head is the first chunk of a snapshot of n data bytes from from to to.
func head(t *testing.T, from, to uint64, n uint64, data []byte) *clusterv1.SendSnapshotRequest {
	t.Helper()
	m := snapMsg(from, to, nil)
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return &clusterv1.SendSnapshotRequest{Message: b, DataBytes: n, Data: data}
}

// endStatus closes the send side (unless open) and returns the status the
// receiver ended the stream with.
func endStatus(t *testing.T, s clusterv1.RaftService_SendSnapshotClient, closeSend bool) *status.Status {
	t.Helper()
	if closeSend {
		_ = s.CloseSend()
	}
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return status.New(codes.OK, "")
			}
			return status.Convert(err)
		}
	}
}

func TestServer_RefusesMalformedSnapshotStreams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bare   bool
		chunks func(t *testing.T) []*clusterv1.SendSnapshotRequest
		code   codes.Code
	}{
		{"no headers", true, func(t *testing.T) []*clusterv1.SendSnapshotRequest {
			return []*clusterv1.SendSnapshotRequest{head(t, 1, 2, 0, nil)}
		}, codes.InvalidArgument},
		{"no chunk", false, func(*testing.T) []*clusterv1.SendSnapshotRequest { return nil }, codes.InvalidArgument},
		{"not a snapshot", false, func(t *testing.T) []*clusterv1.SendSnapshotRequest {
			m := app(1, 2, 1)
			b, _ := m.Marshal()
			return []*clusterv1.SendSnapshotRequest{{Message: b}}
		}, codes.InvalidArgument},
		{"from another member", false, func(t *testing.T) []*clusterv1.SendSnapshotRequest {
			return []*clusterv1.SendSnapshotRequest{head(t, 3, 2, 0, nil)}
		}, codes.InvalidArgument},
		{"to another member", false, func(t *testing.T) []*clusterv1.SendSnapshotRequest {
			return []*clusterv1.SendSnapshotRequest{head(t, 1, 3, 0, nil)}
		}, codes.InvalidArgument},
		{"garbage message", false, func(*testing.T) []*clusterv1.SendSnapshotRequest {
			return []*clusterv1.SendSnapshotRequest{{Message: []byte{0xff, 0xff, 0xff}}}
		}, codes.InvalidArgument},
		{"above the limit", false, func(t *testing.T) []*clusterv1.SendSnapshotRequest {
			return []*clusterv1.SendSnapshotRequest{head(t, 1, 2, 1<<40, nil)}
		}, codes.ResourceExhausted},
		{"short", false, func(t *testing.T) []*clusterv1.SendSnapshotRequest {
			return []*clusterv1.SendSnapshotRequest{head(t, 1, 2, 100, make([]byte, 10)), {Data: make([]byte, 20)}}
		}, codes.InvalidArgument},
		{"long", false, func(t *testing.T) []*clusterv1.SendSnapshotRequest {
			return []*clusterv1.SendSnapshotRequest{head(t, 1, 2, 100, make([]byte, 60)), {Data: make([]byte, 41)}}
		}, codes.InvalidArgument},
		{"a second head", false, func(t *testing.T) []*clusterv1.SendSnapshotRequest {
			return []*clusterv1.SendSnapshotRequest{head(t, 1, 2, 100, make([]byte, 10)), head(t, 1, 2, 90, nil)}
		}, codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := startMember(t, 1, memberConfig{}), startMember(t, 2, memberConfig{})
			connect(t, a, b)
			s := rawSnapshotStream(t, b, 1, tc.bare)
			for _, c := range tc.chunks(t) {
				if err := s.Send(c); err != nil {
					break // the receiver ended the stream; endStatus says why
				}
			}
			if st := endStatus(t, s, true); st.Code() != tc.code {
				t.Fatalf("status %v %q, want %v", st.Code(), st.Message(), tc.code)
			}
			if n := len(b.rec.received()); n != 0 {
				t.Fatalf("the receiver stepped %d messages", n)
			}
		})
	}
}

func TestServer_TakesOneSnapshotAtATimeAndDropsASilentSender(t *testing.T) {
	cfg := memberConfig{serverOpts: func(o *ServerOptions) { o.SnapshotIdleTimeout = 300 * time.Millisecond }}
	a, b := startMember(t, 1, cfg), startMember(t, 2, cfg)
	connect(t, a, b)
	first := rawSnapshotStream(t, b, 1, false)
	if err := first.Send(head(t, 1, 2, 100, make([]byte, 10))); err != nil {
		t.Fatal(err)
	}
	// The first stream holds the only slot; a second one is refused.
	time.Sleep(50 * time.Millisecond)
	second := rawSnapshotStream(t, b, 1, false)
	_ = second.Send(head(t, 1, 2, 10, make([]byte, 10)))
	if st := endStatus(t, second, true); st.Code() != codes.ResourceExhausted {
		t.Fatalf("second stream: %v %q, want ResourceExhausted", st.Code(), st.Message())
	}
	// The first sender stays silent: the receiver ends its stream.
	if st := endStatus(t, first, false); st.Code() != codes.DeadlineExceeded {
		t.Fatalf("silent stream: %v %q, want DeadlineExceeded", st.Code(), st.Message())
	}
	// The slot is free again.
	third := rawSnapshotStream(t, b, 1, false)
	if err := third.Send(head(t, 1, 2, 10, make([]byte, 10))); err != nil {
		t.Fatal(err)
	}
	if st := endStatus(t, third, true); st.Code() != codes.OK {
		t.Fatalf("third stream: %v %q", st.Code(), st.Message())
	}
	if n := len(b.rec.received()); n != 1 {
		t.Fatalf("the receiver stepped %d messages, want 1", n)
	}
}
