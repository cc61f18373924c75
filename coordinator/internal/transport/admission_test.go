package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/internal/hostile"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// hostileBytes is the size of every hostile first message, and
// heapLimit the heap growth at which the clients give up (a server that
// buffers them would otherwise take gigabytes).
const (
	hostileBytes  = 200 << 20
	hostileCalls  = 50
	heapLimit     = 256 << 20
	heapGrowthMax = 32 << 20
	// refusalMax bounds how long one refusal may take; refusals come from
	// the tap, so they take milliseconds, but the machine may be busy.
	refusalMax = 5 * time.Second
)

// stubReplica is a ReplicaService that counts the calls that reached it.
type stubReplica struct {
	clusterv1.UnimplementedReplicaServiceServer
	calls atomic.Int64
}

func (s *stubReplica) Store(context.Context, *clusterv1.StoreRequest) (*clusterv1.StoreResponse, error) {
	s.calls.Add(1)
	return &clusterv1.StoreResponse{}, nil
}

// clusterListener is member 1's server with a ReplicaService beside
// RaftService, and member 2 (and 3, with the name memberName(3)) in its
// address book.
type clusterListener struct {
	addr    string
	srv     *Server
	tr      *Transport
	replica *stubReplica
	pki     *pki
}

func startClusterListener(t *testing.T, mod func(*ServerOptions)) *clusterListener {
	t.Helper()
	p := newPKI(t)
	cert := p.issue(memberName(1))
	tr, err := New(Options{ID: 1, ClusterID: cluster, TLS: p.client(cert), Logger: discard, MinBackoff: 5e6, MaxBackoff: 50e6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	// The peers' addresses lead nowhere: only the book matters here.
	for _, id := range []uint64{2, 3} {
		if err := tr.AddPeer(id, Peer{Addr: "127.0.0.1:1", Name: memberName(id)}); err != nil {
			t.Fatal(err)
		}
	}
	cl := &clusterListener{tr: tr, replica: &stubReplica{}, pki: p}
	o := ServerOptions{ID: 1, ClusterID: cluster, TLS: p.server(cert), Peers: tr, Logger: discard,
		Step:     func(context.Context, raftpb.Message) error { return nil },
		Register: func(g *grpc.Server) { clusterv1.RegisterReplicaServiceServer(g, cl.replica) }}
	if mod != nil {
		mod(&o)
	}
	srv, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	cl.addr, cl.srv = lis.Addr().String(), srv
	return cl
}

// dial opens a connection to the listener presenting cert.
func (cl *clusterListener) dial(t *testing.T, cert tls.Certificate) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(cl.addr, grpc.WithTransportCredentials(credentials.NewTLS(cl.pki.client(cert))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// sendRaft opens a raft stream on conn, sends one message of size bytes
// and returns the stream's status.
func sendRaft(ctx context.Context, conn *grpc.ClientConn, size int) error {
	s, err := conn.NewStream(ctx, &clusterv1.RaftService_ServiceDesc.Streams[0], clusterv1.RaftService_Send_FullMethodName, hostile.CallOption(size))
	if err != nil {
		return err
	}
	if err := s.SendMsg(&clusterv1.SendRequest{}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	s.CloseSend()
	for {
		if err := s.RecvMsg(&clusterv1.SendResponse{}); err != nil {
			return err
		}
	}
}

// storeReplica makes a ReplicaService.Store call of size bytes.
func storeReplica(ctx context.Context, conn *grpc.ClientConn, size int) error {
	return conn.Invoke(ctx, clusterv1.ReplicaService_Store_FullMethodName, &clusterv1.StoreRequest{}, &clusterv1.StoreResponse{}, hostile.CallOption(size))
}

// storeOK makes a well-formed ReplicaService.Store call.
func storeOK(ctx context.Context, conn *grpc.ClientConn) error {
	_, err := clusterv1.NewReplicaServiceClient(conn).Store(ctx, &clusterv1.StoreRequest{})
	return err
}

// attack runs n calls of each given kind at once, over several
// connections, and checks that every one ends with code want within
// refusalMax while the heap of this process (server and clients) grows by
// less than heapGrowthMax.
func attack(t *testing.T, conns []*grpc.ClientConn, want codes.Code, kinds map[string]func(context.Context, *grpc.ClientConn, int) error, hdr metadata.MD) {
	t.Helper()
	watch, ctx, cancel := hostile.Start(context.Background(), heapLimit, time.Millisecond)
	defer cancel()
	if hdr != nil {
		ctx = metadata.NewOutgoingContext(ctx, hdr)
	}
	type result struct {
		kind string
		err  error
		took time.Duration
	}
	results := make(chan result, len(kinds)*hostileCalls)
	var wg sync.WaitGroup
	for kind, call := range kinds {
		for i := range hostileCalls {
			wg.Go(func() {
				cctx, ccancel := context.WithTimeout(ctx, 4*refusalMax)
				defer ccancel()
				start := time.Now()
				err := call(cctx, conns[i%len(conns)], hostileBytes)
				results <- result{kind, err, time.Since(start)}
			})
		}
	}
	wg.Wait()
	close(results)
	growth := watch.Stop()
	if watch.Over() {
		t.Fatalf("heap grew past %s while %d hostile calls of %s ran: the server buffers what it has not admitted", hostile.MiB(heapLimit), len(kinds)*hostileCalls, hostile.MiB(hostileBytes))
	}
	var slowest time.Duration
	for r := range results {
		if status.Code(r.err) != want {
			t.Errorf("%s: %v, want code %v", r.kind, r.err, want)
		}
		slowest = max(slowest, r.took)
	}
	if slowest > refusalMax {
		t.Errorf("slowest refusal took %v, want under %v", slowest, refusalMax)
	}
	if growth > heapGrowthMax {
		t.Errorf("heap grew by %s, want under %s", hostile.MiB(growth), hostile.MiB(heapGrowthMax))
	}
	t.Logf("%d calls of %s refused with %v: heap growth %s, slowest %v", len(kinds)*hostileCalls, hostile.MiB(hostileBytes), want, hostile.MiB(growth), slowest)
}

func dialN(t *testing.T, cl *clusterListener, cert tls.Certificate, n int) []*grpc.ClientConn {
	t.Helper()
	out := make([]*grpc.ClientConn, n)
	for i := range out {
		out[i] = cl.dial(t, cert)
	}
	return out
}

func TestServer_CertificateNamingNoMemberIsRefusedBeforeReading(t *testing.T) {
	// An edge's certificate from the members' CA passes the handshake but
	// names no member: every raft stream and replica call is refused by
	// the tap, before gRPC reads its 200 MB first message.
	cl := startClusterListener(t, nil)
	edge := cl.pki.issue("spiffe://tributary/edge/7")
	attack(t, dialN(t, cl, edge, 5), codes.PermissionDenied, map[string]func(context.Context, *grpc.ClientConn, int) error{
		"raft stream": sendRaft, "replica call": storeReplica}, nil)
	if n := cl.replica.calls.Load(); n != 0 {
		t.Fatalf("%d replica calls reached the service", n)
	}
	if st := cl.srv.Stats(); st.RefusedAtAdmission != 2*hostileCalls || st.Received != 0 {
		t.Fatalf("stats %+v, want %d refused at admission", st, 2*hostileCalls)
	}
}

func TestServer_RaftHeadersNamingAnotherClusterAreRefusedBeforeReading(t *testing.T) {
	// A member's certificate, but the stream is for another cluster.
	cl := startClusterListener(t, nil)
	m2 := cl.pki.issue(memberName(2))
	attack(t, dialN(t, cl, m2, 5), codes.FailedPrecondition, map[string]func(context.Context, *grpc.ClientConn, int) error{"raft stream": sendRaft},
		metadata.Pairs(HeaderClusterID, "another-cluster", HeaderMemberID, "2"))
}

func TestServer_RaftHeadersNamingAnotherMemberAreRefusedBeforeReading(t *testing.T) {
	// Member 2's certificate claiming to be member 3.
	cl := startClusterListener(t, nil)
	m2 := cl.pki.issue(memberName(2))
	attack(t, dialN(t, cl, m2, 5), codes.PermissionDenied, map[string]func(context.Context, *grpc.ClientConn, int) error{"raft stream": sendRaft},
		metadata.Pairs(HeaderClusterID, cluster, HeaderMemberID, "3"))
}

func TestServer_RaftHeaderChecks(t *testing.T) {
	cl := startClusterListener(t, nil)
	conn := cl.dial(t, cl.pki.issue(memberName(2)))
	for name, tc := range map[string]struct {
		md   metadata.MD
		want codes.Code
	}{
		"cluster id only":        {metadata.Pairs(HeaderClusterID, cluster), codes.InvalidArgument},
		"member id only":         {metadata.Pairs(HeaderMemberID, "2"), codes.FailedPrecondition},
		"member id not a number": {metadata.Pairs(HeaderClusterID, cluster, HeaderMemberID, "two"), codes.InvalidArgument},
		"member id 0":            {metadata.Pairs(HeaderClusterID, cluster, HeaderMemberID, "0"), codes.InvalidArgument},
		"this member's id":       {metadata.Pairs(HeaderClusterID, cluster, HeaderMemberID, "1"), codes.InvalidArgument},
		"unknown member":         {metadata.Pairs(HeaderClusterID, cluster, HeaderMemberID, "9"), codes.PermissionDenied},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), tc.md), 10*time.Second)
			defer cancel()
			if err := sendRaft(ctx, conn, 16); status.Code(err) != tc.want {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
}

// envelope sends one envelope on a raft stream with headers md (nil: a
// sender of an earlier version, without headers) and returns the status
// the server ends the stream with.
func envelope(t *testing.T, conn *grpc.ClientConn, md metadata.MD, req *clusterv1.SendRequest) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if md != nil {
		ctx = metadata.NewOutgoingContext(ctx, md)
	}
	s, err := clusterv1.NewRaftServiceClient(conn).Send(ctx)
	if err != nil {
		return err
	}
	if err := s.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	s.CloseSend()
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func heartbeat(from, to uint64) []byte {
	b, err := (&raftpb.Message{Type: raftpb.MsgHeartbeat, From: from, To: to}).Marshal()
	if err != nil {
		panic(err)
	}
	return b
}

func TestServer_EnvelopesAreStillCheckedAfterAdmission(t *testing.T) {
	var stepped atomic.Int64
	cl := startClusterListener(t, func(o *ServerOptions) {
		o.Step = func(context.Context, raftpb.Message) error { stepped.Add(1); return nil }
	})
	conn := cl.dial(t, cl.pki.issue(memberName(2)))
	hdr := metadata.Pairs(HeaderClusterID, cluster, HeaderMemberID, "2")
	for name, tc := range map[string]struct {
		md   metadata.MD
		req  *clusterv1.SendRequest
		want codes.Code
	}{
		"headers, good envelope":           {hdr, &clusterv1.SendRequest{ClusterId: cluster, FromMemberId: 2, Messages: [][]byte{heartbeat(2, 1)}}, codes.OK},
		"headers, envelope of another id":  {hdr, &clusterv1.SendRequest{ClusterId: cluster, FromMemberId: 3, Messages: [][]byte{heartbeat(3, 1)}}, codes.InvalidArgument},
		"headers, envelope of another cid": {hdr, &clusterv1.SendRequest{ClusterId: "x", FromMemberId: 2, Messages: [][]byte{heartbeat(2, 1)}}, codes.InvalidArgument},
		"headers, message from another":    {hdr, &clusterv1.SendRequest{ClusterId: cluster, FromMemberId: 2, Messages: [][]byte{heartbeat(3, 1)}}, codes.InvalidArgument},
		// A sender of an earlier version sends no headers: the first
		// envelope is checked as before.
		"legacy, good envelope":      {nil, &clusterv1.SendRequest{ClusterId: cluster, FromMemberId: 2, Messages: [][]byte{heartbeat(2, 1)}}, codes.OK},
		"legacy, bogus cluster id":   {nil, &clusterv1.SendRequest{ClusterId: "bogus", FromMemberId: 2, Messages: [][]byte{heartbeat(2, 1)}}, codes.FailedPrecondition},
		"legacy, claims member 3":    {nil, &clusterv1.SendRequest{ClusterId: cluster, FromMemberId: 3, Messages: [][]byte{heartbeat(3, 1)}}, codes.PermissionDenied},
		"legacy, unknown member":     {nil, &clusterv1.SendRequest{ClusterId: cluster, FromMemberId: 9, Messages: [][]byte{heartbeat(9, 1)}}, codes.PermissionDenied},
		"legacy, misaddressed inner": {nil, &clusterv1.SendRequest{ClusterId: cluster, FromMemberId: 2, Messages: [][]byte{heartbeat(2, 3)}}, codes.InvalidArgument},
	} {
		t.Run(name, func(t *testing.T) {
			before := stepped.Load()
			err := envelope(t, conn, tc.md, tc.req)
			if status.Code(err) != tc.want {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			if want := tc.want == codes.OK; (stepped.Load() > before) != want {
				t.Fatalf("stepped %d messages, want stepped: %v", stepped.Load()-before, want)
			}
		})
	}
	if st := cl.srv.Stats(); st.LegacyStreams != 5 {
		t.Errorf("%d legacy streams counted, want 5", st.LegacyStreams)
	}
}

func TestServer_RemovedMemberIsRefusedAtAdmission(t *testing.T) {
	cl := startClusterListener(t, nil)
	conn := cl.dial(t, cl.pki.issue(memberName(3)))
	req := &clusterv1.SendRequest{ClusterId: cluster, FromMemberId: 3, Messages: [][]byte{heartbeat(3, 1)}}
	hdr := metadata.Pairs(HeaderClusterID, cluster, HeaderMemberID, "3")
	if err := envelope(t, conn, hdr, req); err != nil {
		t.Fatalf("member 3 before its removal: %v", err)
	}
	cl.tr.RemovePeer(3)
	if err := envelope(t, conn, hdr, req); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("member 3 after its removal: %v, want PermissionDenied", err)
	}
	if err := storeReplica(context.Background(), conn, 16); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("replica call of a removed member: %v, want PermissionDenied", err)
	}
}

func TestServer_MembersDecidesAdmission(t *testing.T) {
	// Members other than the address book (the coordinator adds the
	// catalog's registered coordinators): a name it knows is admitted on
	// every service; the raft headers are still checked against the book.
	cl := startClusterListener(t, func(o *ServerOptions) { o.Members = nameSet{"spiffe://tributary/coordinator/8": true} })
	c8 := cl.dial(t, cl.pki.issue("spiffe://tributary/coordinator/8"))
	if err := storeOK(context.Background(), c8); err != nil {
		t.Fatalf("replica call of a member: %v", err)
	}
	if cl.replica.calls.Load() != 1 {
		t.Fatal("replica call did not reach the service")
	}
	hdr := metadata.Pairs(HeaderClusterID, cluster, HeaderMemberID, "8")
	if err := envelope(t, c8, hdr, &clusterv1.SendRequest{ClusterId: cluster, FromMemberId: 8}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("raft stream of a member not in the address book: %v", err)
	}
	// Member 2 is in the book but not in this Members: refused.
	if err := storeReplica(context.Background(), cl.dial(t, cl.pki.issue(memberName(2))), 16); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("replica call of a name Members does not know: %v", err)
	}
}

type nameSet map[string]bool

func (s nameSet) IsMember(name string) bool { return s[name] }

func TestServer_ConnectionsBeyondThePerAddressCapAreClosed(t *testing.T) {
	cl := startClusterListener(t, func(o *ServerOptions) { o.MaxConnsPerIP = 3 })
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", cl.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	c, err := net.Dial("tcp", cl.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("fourth connection from one address: read %v, want it closed", err)
	}
	if n := cl.srv.Stats().ConnsRefused; n != 1 {
		t.Fatalf("%d connections refused, want 1", n)
	}
	// A member's connection gets through once one closes.
	conns[0].Close()
	conns = conns[1:]
	eventually(t, "member admitted after a place freed", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return storeOK(ctx, cl.dial(t, cl.pki.issue(memberName(2)))) == nil
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestVerifiedLeaf_RequiresAVerifiedTLSClientCertificate(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	leaf := newPKI(t).issue(memberName(2))
	for name, ctx := range map[string]context.Context{
		"no peer":       context.Background(),
		"not TLS":       grpcpeer.NewContext(context.Background(), &grpcpeer.Peer{Addr: addr}),
		"no chain":      grpcpeer.NewContext(context.Background(), &grpcpeer.Peer{Addr: addr, AuthInfo: credentials.TLSInfo{}}),
		"unverified":    grpcpeer.NewContext(context.Background(), &grpcpeer.Peer{Addr: addr, AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: leafOf(t, leaf)}}}),
		"verified leaf": nil,
	} {
		t.Run(name, func(t *testing.T) {
			if ctx == nil {
				state := tls.ConnectionState{PeerCertificates: leafOf(t, leaf), VerifiedChains: [][]*x509.Certificate{leafOf(t, leaf)}}
				ctx = grpcpeer.NewContext(context.Background(), &grpcpeer.Peer{Addr: addr, AuthInfo: credentials.TLSInfo{State: state}})
				if c, err := VerifiedLeaf(ctx); err != nil || c.URIs[0].String() != memberName(2) {
					t.Fatalf("VerifiedLeaf = %v, %v", c, err)
				}
				return
			}
			if _, err := VerifiedLeaf(ctx); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("VerifiedLeaf: %v, want Unauthenticated", err)
			}
		})
	}
}

func TestRequireClientCert_AlsoForReloadedConfigs(t *testing.T) {
	base := &tls.Config{ClientAuth: tls.NoClientCert}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven}, nil
	}
	got := RequireClientCert(base)
	if got.ClientAuth != tls.RequireAndVerifyClientCert || base.ClientAuth != tls.NoClientCert {
		t.Fatalf("ClientAuth %v (base %v)", got.ClientAuth, base.ClientAuth)
	}
	inner, err := got.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil || inner.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("reloaded config ClientAuth %v, %v", inner.ClientAuth, err)
	}
}

func TestLogLimiter_OncePerInterval(t *testing.T) {
	var l logLimiter
	t0 := time.Unix(1000, 0)
	got := ""
	for _, d := range []time.Duration{0, 10 * time.Millisecond, 999 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second} {
		got += strconv.FormatBool(l.allow(t0.Add(d)))[:1]
	}
	if got != "tfftft" {
		t.Fatalf("allowed %q, want tfftft", got)
	}
}

// leafOf parses the leaf of c.
func leafOf(t *testing.T, c tls.Certificate) []*x509.Certificate {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return []*x509.Certificate{leaf}
}
