package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const cluster = "test-cluster"

type member struct {
	id   uint64
	name string
	tr   *Transport
	srv  *Server
	addr string
	rec  *recorder
	done chan struct{}
	// serverOpts, when set, changes the server's options.
	serverOpts func(*ServerOptions)
}

type memberConfig struct {
	cluster        string
	client, server *tls.Config
	name           string
	addr           string // default: a free loopback port
	opts           func(*Options)
	serverOpts     func(*ServerOptions)
}

func startMember(t *testing.T, id uint64, cfg memberConfig) *member {
	t.Helper()
	if cfg.cluster == "" {
		cfg.cluster = cluster
	}
	m := &member{id: id, name: cfg.name, rec: newRecorder(), serverOpts: cfg.serverOpts}
	o := Options{ID: id, ClusterID: cfg.cluster, TLS: cfg.client, Reporter: m.rec, Logger: discard, MinBackoff: 5e6, MaxBackoff: 50e6}
	o.Insecure = cfg.client == nil
	if cfg.opts != nil {
		cfg.opts(&o)
	}
	tr, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	m.tr = tr
	t.Cleanup(func() { _ = tr.Close() })
	m.serve(t, cfg.server, cfg.addr)
	return m
}

// serve (re)starts the member's server, on addr if not empty.
func (m *member) serve(t *testing.T, serverTLS *tls.Config, addr string) {
	t.Helper()
	so := ServerOptions{ID: m.id, ClusterID: cluster, TLS: serverTLS, Insecure: serverTLS == nil, Peers: m.tr, Logger: discard,
		Step: func(_ context.Context, msg raftpb.Message) error { return m.rec.step(msg) }}
	if m.serverOpts != nil {
		m.serverOpts(&so)
	}
	srv, err := NewServer(so)
	if err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	m.srv = srv
	m.serveOn(t, lis)
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// serveOn serves m.srv on lis until the test ends.
func (m *member) serveOn(t *testing.T, lis net.Listener) {
	m.addr, m.done = lis.Addr().String(), make(chan struct{})
	done, srv := m.done, m.srv
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(m.stopServer)
}

func (m *member) stopServer() {
	m.srv.Stop()
	<-m.done
}

func connect(t *testing.T, ms ...*member) {
	t.Helper()
	for _, a := range ms {
		for _, b := range ms {
			if a != b {
				if err := a.tr.AddPeer(b.id, Peer{Addr: b.addr, Name: b.name}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func app(from, to, index uint64) raftpb.Message {
	return raftpb.Message{Type: raftpb.MsgApp, From: from, To: to, Term: 1, Index: index,
		Entries: []raftpb.Entry{{Term: 1, Index: index + 1, Data: []byte("entry")}}}
}

func TestTransport_DeliversInOrderOverTLS(t *testing.T) {
	client, server := sharedTLS(t)
	cfg := memberConfig{client: client, server: server, name: "localhost"}
	a, b := startMember(t, 1, cfg), startMember(t, 2, cfg)
	connect(t, a, b)

	const n = 2000
	for i := uint64(0); i < n; i += 10 {
		var batch []raftpb.Message
		for j := i; j < i+10; j++ {
			batch = append(batch, app(1, 2, j))
		}
		a.tr.Send(batch)
		b.tr.Send([]raftpb.Message{app(2, 1, i)})
	}
	eventually(t, "all messages at member 2", func() bool { return len(b.rec.received()) == n })
	eventually(t, "all messages at member 1", func() bool { return len(a.rec.received()) == n/10 })
	for i, m := range b.rec.received() {
		if m.Index != uint64(i) || m.From != 1 || m.To != 2 || string(m.Entries[0].Data) != "entry" {
			t.Fatalf("message %d: got index %d from %d to %d", i, m.Index, m.From, m.To)
		}
	}
	if st := a.tr.Stats(); st.Sent != n || st.Dropped != 0 || st.Connects != 1 {
		t.Fatalf("stats %+v", st)
	}
	if st := b.srv.Stats(); st.Received != n || st.Refused != 0 {
		t.Fatalf("server stats %+v", st)
	}

	// A snapshot travels on its own stream and is reported delivered.
	snap := raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2, Term: 1,
		Snapshot: &raftpb.Snapshot{Data: make([]byte, 8<<20), Metadata: raftpb.SnapshotMetadata{Index: 99, Term: 1}}}
	a.tr.Send([]raftpb.Message{snap, app(1, 2, n)})
	eventually(t, "snapshot report", func() bool { return len(a.rec.snapReports(2)) == 1 })
	if r := a.rec.snapReports(2); !r[0] {
		t.Fatal("snapshot reported failed")
	}
	eventually(t, "snapshot and message", func() bool { return len(b.rec.received()) == n+2 })
	got := b.rec.received()[n:]
	if i := slices.IndexFunc(got, func(m raftpb.Message) bool { return m.Type == raftpb.MsgSnap }); i < 0 ||
		got[i].Snapshot.Metadata.Index != 99 || len(got[i].Snapshot.Data) != 8<<20 {
		t.Fatalf("snapshot not delivered intact: %+v", got)
	}

	// Messages for a member not in the address book are dropped and
	// reported; a snapshot for it is reported failed.
	a.tr.Send([]raftpb.Message{app(1, 7, 0), {Type: raftpb.MsgSnap, From: 1, To: 7, Snapshot: &raftpb.Snapshot{}}})
	if a.rec.unreachableCount(7) != 1 || !slices.Equal(a.rec.snapReports(7), []bool{false}) || a.tr.Stats().UnknownPeer != 2 {
		t.Fatalf("unknown peer: unreachable %d, snapshots %v, stats %+v", a.rec.unreachableCount(7), a.rec.snapReports(7), a.tr.Stats())
	}
}

func TestServer_RefusesMemberWithAnotherMembersCertificate(t *testing.T) {
	p := newPKI(t)
	certs := map[uint64]tls.Certificate{1: p.issue(memberName(1)), 2: p.issue(memberName(2))}
	m1 := startMember(t, 1, memberConfig{client: p.client(certs[1]), server: p.server(certs[1]), name: memberName(1)})
	m2 := startMember(t, 2, memberConfig{client: p.client(certs[2]), server: p.server(certs[2]), name: memberName(2)})
	// Member 3 is in the address books but presents member 2's certificate.
	m3 := startMember(t, 3, memberConfig{client: p.client(certs[2]), server: p.server(certs[2]), name: memberName(3)})
	connect(t, m1, m2, m3)

	m2.tr.Send([]raftpb.Message{app(2, 1, 5)})
	eventually(t, "message from member 2", func() bool { return len(m1.rec.received()) == 1 })
	m3.tr.Send([]raftpb.Message{app(3, 1, 6)})
	// Refused by the tap: the stream's headers name member 3, whose name
	// the certificate does not carry.
	eventually(t, "member 3 refused", func() bool { return m1.srv.Stats().RefusedAtAdmission >= 1 && m3.rec.unreachableCount(1) >= 1 })
	if got := m1.rec.received(); len(got) != 1 || got[0].From != 2 {
		t.Fatalf("member 1 received %+v", got)
	}
	if m3.tr.Stats().StreamFailures == 0 {
		t.Fatal("impostor's stream did not fail")
	}

	// The client side checks the server too: member 1 dialling member 3
	// finds member 2's certificate and sends nothing.
	m1.tr.Send([]raftpb.Message{app(1, 3, 7)})
	eventually(t, "member 3 unreachable from 1", func() bool { return m1.rec.unreachableCount(3) >= 1 })
	if len(m3.rec.received()) != 0 {
		t.Fatalf("member 3 received %+v", m3.rec.received())
	}
}

func TestServer_RefusesWrongClusterID(t *testing.T) {
	client, server := sharedTLS(t)
	a := startMember(t, 1, memberConfig{client: client, server: server, name: "localhost"})
	b := startMember(t, 2, memberConfig{client: client, server: server, name: "localhost", cluster: "another-cluster"})
	connect(t, a, b)
	b.tr.Send([]raftpb.Message{app(2, 1, 1)})
	// Refused by the tap, from the stream's headers.
	eventually(t, "refusal", func() bool { return a.srv.Stats().RefusedAtAdmission >= 1 && b.rec.unreachableCount(1) >= 1 })
	if got := a.rec.received(); len(got) != 0 {
		t.Fatalf("received %+v from another cluster", got)
	}
}

func TestServer_RefusesMisaddressedMessage(t *testing.T) {
	client, server := sharedTLS(t)
	a := startMember(t, 1, memberConfig{client: client, server: server, name: "localhost"})
	b := startMember(t, 2, memberConfig{client: client, server: server, name: "localhost"})
	connect(t, a, b)
	// From 3 on member 2's stream: refused before Step.
	b.tr.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 3, To: 1}})
	eventually(t, "refusal", func() bool { return a.srv.Stats().Refused >= 1 })
	// A message sent before the sender noticed the refusal is lost, as
	// raft tolerates; like raft, resend until one arrives on a new stream.
	eventually(t, "next message after reconnect", func() bool {
		b.tr.Send([]raftpb.Message{app(2, 1, 1)})
		return len(a.rec.received()) > 0
	})
	for _, m := range a.rec.received() {
		if m.From != 2 || m.Type != raftpb.MsgApp {
			t.Fatalf("member 1 received %+v", m)
		}
	}
}

func TestTransport_ReconnectsAfterServerRestart(t *testing.T) {
	client, server := sharedTLS(t)
	cfg := memberConfig{client: client, server: server, name: "localhost"}
	a, b := startMember(t, 1, cfg), startMember(t, 2, cfg)
	connect(t, a, b)
	a.tr.Send([]raftpb.Message{app(1, 2, 1)})
	eventually(t, "first message", func() bool { return len(b.rec.received()) == 1 })

	b.stopServer()
	// Raft keeps sending (heartbeats) while the peer is down.
	idx := uint64(2)
	eventually(t, "peer reported unreachable", func() bool {
		a.tr.Send([]raftpb.Message{app(1, 2, idx)})
		idx++
		return a.rec.unreachableCount(2) >= 1
	})
	b.serve(t, server, b.addr)
	eventually(t, "delivery after restart", func() bool {
		a.tr.Send([]raftpb.Message{app(1, 2, idx)})
		idx++
		return len(b.rec.received()) > 1
	})
	if st := a.tr.Stats(); st.Connects < 2 || st.StreamFailures < 1 {
		t.Fatalf("stats %+v", st)
	}
	got := b.rec.received()
	if !slices.IsSortedFunc(got, func(x, y raftpb.Message) int { return int(x.Index) - int(y.Index) }) {
		t.Fatal("messages out of order after reconnect")
	}
}

func TestTransport_QueueOverflowIsCountedAndReported(t *testing.T) {
	// A peer that accepts TCP connections and never answers: the worker
	// hangs in the TLS handshake while the queue fills.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	defer func() {
		_ = lis.Close()
		<-accepted
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	client, _ := sharedTLS(t)
	rec := newRecorder()
	tr, err := New(Options{ID: 1, ClusterID: cluster, TLS: client, Reporter: rec, Logger: discard, QueueMessages: 8, MaxBatchBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.AddPeer(2, Peer{Addr: lis.Addr().String(), Name: "localhost"}); err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := range uint64(n) {
		tr.Send([]raftpb.Message{app(1, 2, i)})
	}
	// At most the queue plus the one message the worker holds (batches
	// are one message here) were not dropped.
	if st := tr.Stats(); st.Dropped < n-8-1 || st.Sent != 0 {
		t.Fatalf("stats %+v", st)
	}
	if rec.unreachableCount(2) == 0 {
		t.Fatal("full queue not reported as unreachable")
	}
}

func TestTransport_AddressBookChanges(t *testing.T) {
	client, server := sharedTLS(t)
	cfg := memberConfig{client: client, server: server, name: "localhost"}
	a, b, c := startMember(t, 1, cfg), startMember(t, 2, cfg), startMember(t, 3, cfg)
	if err := a.tr.AddPeer(2, Peer{Addr: c.addr, Name: "localhost"}); err != nil { // wrong address first
		t.Fatal(err)
	}
	if err := a.tr.AddPeer(2, Peer{Addr: b.addr, Name: "localhost"}); err == nil {
		t.Fatal("AddPeer of an existing peer succeeded")
	}
	if err := a.tr.UpdatePeer(2, Peer{Addr: b.addr, Name: "localhost"}); err != nil {
		t.Fatal(err)
	}
	if err := b.tr.AddPeer(1, Peer{Addr: a.addr, Name: "localhost"}); err != nil {
		t.Fatal(err)
	}
	a.tr.Send([]raftpb.Message{app(1, 2, 1)})
	eventually(t, "delivery at the updated address", func() bool { return len(b.rec.received()) == 1 })
	if p, ok := a.tr.Peer(2); !ok || p.Addr != b.addr {
		t.Fatalf("Peer(2) = %+v, %v", p, ok)
	}
	a.tr.RemovePeer(2)
	a.tr.Send([]raftpb.Message{app(1, 2, 2)})
	if a.tr.Stats().UnknownPeer != 1 || a.rec.unreachableCount(2) != 1 {
		t.Fatalf("after RemovePeer: stats %+v", a.tr.Stats())
	}
	if err := a.tr.UpdatePeer(2, Peer{Addr: b.addr, Name: "localhost"}); err == nil {
		t.Fatal("UpdatePeer of a removed peer succeeded")
	}
	for _, bad := range []Peer{{Name: "localhost"}, {Addr: b.addr}} {
		if err := a.tr.AddPeer(4, bad); err == nil {
			t.Fatalf("AddPeer(%+v) succeeded", bad)
		}
	}
	if err := a.tr.AddPeer(1, Peer{Addr: a.addr, Name: "localhost"}); err == nil {
		t.Fatal("AddPeer of this member succeeded")
	}
	_ = a.tr.Close()
	if err := a.tr.AddPeer(5, Peer{Addr: b.addr, Name: "localhost"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddPeer after Close: %v", err)
	}
}

func TestOptions_RequireTLSUnlessInsecure(t *testing.T) {
	client, server := sharedTLS(t)
	step := func(context.Context, raftpb.Message) error { return nil }
	tr, _ := New(Options{ID: 1, ClusterID: cluster, Insecure: true})
	defer tr.Close()
	for name, o := range map[string]Options{
		"no TLS":       {ID: 1, ClusterID: cluster},
		"TLS+Insecure": {ID: 1, ClusterID: cluster, TLS: client, Insecure: true},
		"no id":        {ClusterID: cluster, TLS: client},
		"no cluster":   {ID: 1, TLS: client},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	noCAs := server.Clone()
	noCAs.ClientCAs = nil
	for name, o := range map[string]ServerOptions{
		"no TLS":        {ID: 1, ClusterID: cluster, Peers: tr, Step: step},
		"no client CAs": {ID: 1, ClusterID: cluster, TLS: noCAs, Peers: tr, Step: step},
		"no Step":       {ID: 1, ClusterID: cluster, TLS: server, Peers: tr},
		"no Peers":      {ID: 1, ClusterID: cluster, TLS: server, Step: step},
	} {
		if _, err := NewServer(o); err == nil || !strings.HasPrefix(err.Error(), "transport: ") {
			t.Errorf("%s: NewServer: %v", name, err)
		}
	}
	if _, err := NewServer(ServerOptions{ID: 1, ClusterID: cluster, Insecure: true, Peers: tr, Step: step}); err != nil {
		t.Fatal(err)
	}
}

func TestTransport_SnapshotRefusedByReceiverIsReportedFailed(t *testing.T) {
	client, server := sharedTLS(t)
	cfg := memberConfig{client: client, server: server, name: "localhost"}
	a, b := startMember(t, 1, cfg), startMember(t, 2, cfg)
	connect(t, a, b)
	b.rec.mu.Lock()
	b.rec.stepErr = errors.New("inbox full")
	b.rec.mu.Unlock()
	a.tr.Send([]raftpb.Message{{Type: raftpb.MsgSnap, From: 1, To: 2, Term: 1,
		Snapshot: &raftpb.Snapshot{Data: []byte("state"), Metadata: raftpb.SnapshotMetadata{Index: 5, Term: 1}}}})
	eventually(t, "snapshot report", func() bool { return len(a.rec.snapReports(2)) == 1 })
	if r := a.rec.snapReports(2); r[0] {
		t.Fatal("refused snapshot reported delivered")
	}
	if st := a.tr.Stats(); st.SnapshotsFailed != 1 || st.SnapshotsSent != 0 {
		t.Fatalf("stats %+v", st)
	}
	// A refused ordinary message is only dropped: the stream stays up.
	a.tr.Send([]raftpb.Message{app(1, 2, 1)})
	eventually(t, "step failure counted", func() bool { return b.srv.Stats().StepFailed == 2 })
	if st := a.tr.Stats(); st.StreamFailures != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTransport_InsecureLoopback(t *testing.T) {
	a, b := startMember(t, 1, memberConfig{}), startMember(t, 2, memberConfig{})
	connect(t, a, b)
	a.tr.Send([]raftpb.Message{app(1, 2, 1), app(1, 2, 2)})
	eventually(t, "delivery", func() bool { return len(b.rec.received()) == 2 })
}
