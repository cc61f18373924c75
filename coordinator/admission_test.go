package coordinator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/transport"
	"github.com/tributarydb/tributary/internal/hostile"
	"github.com/tributarydb/tributary/internal/testcert"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

const (
	selfName = "coord-1"
	// heapLimit stops the hostile clients of a test against a coordinator
	// that buffers what it has not admitted; heapGrowthMax is what an
	// admitting coordinator may grow by (server and clients together).
	heapLimit     = 256 << 20
	heapGrowthMax = 32 << 20
	hostileCalls  = 50
	refusalMax    = 5 * time.Second
)

// tlsCoordinator is one coordinator with TLS whose peer and edge CA are
// the same (the worst case: --allow-shared-ca), so that an edge's
// certificate passes both handshakes and only admission keeps it out.
type tlsCoordinator struct {
	c  *Coordinator
	ca *testcert.CA

	mu       sync.Mutex
	admitted []string // identities AdmitEdge was asked about
}

func startTLSCoordinator(t *testing.T, mod func(*Options)) *tlsCoordinator {
	t.Helper()
	tc := &tlsCoordinator{ca: testcert.NewCA(t)}
	cert := tc.ca.IssueDNS(t, selfName)
	o := Options{NodeID: selfName, RaftID: 1, DataDir: t.TempDir(),
		ClusterListen: "127.0.0.1:0", IntakeListen: "127.0.0.1:0",
		Peers:            []Peer{{RaftID: 1, NodeID: selfName, Addr: "127.0.0.1:1"}},
		ClusterServerTLS: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: tc.ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13},
		ClusterClientTLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: tc.ca.Pool, MinVersion: tls.VersionTLS13},
		// NB: no ClientAuth: the coordinator must demand client
		// certificates on the intake whatever its configuration says.
		IntakeTLS:    &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: tc.ca.Pool, MinVersion: tls.VersionTLS13},
		TickInterval: 20 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})),
	}
	if mod != nil {
		mod(&o)
	}
	c, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Stop(ctx)
	})
	tc.c = c
	return tc
}

// dial connects to addr presenting cert (none when cert is nil).
func (tc *tlsCoordinator) dial(t *testing.T, addr string, cert *tls.Certificate) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: tc.ca.Pool, MinVersion: tls.VersionTLS13}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (tc *tlsCoordinator) issue(t *testing.T, name string) *tls.Certificate {
	c := tc.ca.IssueDNS(t, name)
	return &c
}

// stream opens a client stream of method (desc) on conn, sends one
// message of size bytes and returns the status the server ends it with.
func stream(ctx context.Context, conn *grpc.ClientConn, desc *grpc.StreamDesc, method string, size int) error {
	s, err := conn.NewStream(ctx, desc, method, hostile.CallOption(size))
	if err != nil {
		return err
	}
	if err := s.SendMsg(struct{}{}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	s.CloseSend()
	for {
		if err := s.RecvMsg(struct{}{}); err != nil {
			return err
		}
	}
}

func raftStream(ctx context.Context, conn *grpc.ClientConn, size int) error {
	return stream(ctx, conn, &clusterv1.RaftService_ServiceDesc.Streams[0], clusterv1.RaftService_Send_FullMethodName, size)
}

func replicaStore(ctx context.Context, conn *grpc.ClientConn, size int) error {
	return conn.Invoke(ctx, clusterv1.ReplicaService_Store_FullMethodName, struct{}{}, struct{}{}, hostile.CallOption(size))
}

func shipStream(ctx context.Context, conn *grpc.ClientConn, size int) error {
	for i := range pb.ReplicationService_ServiceDesc.Streams {
		if d := &pb.ReplicationService_ServiceDesc.Streams[i]; d.StreamName == "Ship" {
			return stream(ctx, conn, d, pb.ReplicationService_Ship_FullMethodName, size)
		}
	}
	return errors.New("no Ship stream in the service description")
}

type call func(context.Context, *grpc.ClientConn, int) error

// attack runs hostileCalls calls of each kind at once over conns, each
// sending a first message of size bytes, and checks that each ends with
// one of the codes want within refusalMax while the heap grows by less
// than heapGrowthMax.
func attack(t *testing.T, conns []*grpc.ClientConn, size int, kinds map[string]call, want ...codes.Code) {
	t.Helper()
	watch, ctx, cancel := hostile.Start(context.Background(), heapLimit, time.Millisecond)
	defer cancel()
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
				err := call(cctx, conns[i%len(conns)], size)
				results <- result{kind, err, time.Since(start)}
			})
		}
	}
	wg.Wait()
	close(results)
	growth := watch.Stop()
	if watch.Over() {
		t.Fatalf("heap grew past %s during %d calls of %s: the coordinator buffers what it has not admitted", hostile.MiB(heapLimit), len(kinds)*hostileCalls, hostile.MiB(uint64(size)))
	}
	var slowest time.Duration
	for r := range results {
		ok := false
		for _, w := range want {
			ok = ok || status.Code(r.err) == w
		}
		if !ok {
			t.Errorf("%s: %v, want one of %v", r.kind, r.err, want)
		}
		slowest = max(slowest, r.took)
	}
	if slowest > refusalMax {
		t.Errorf("slowest refusal took %v, want under %v", slowest, refusalMax)
	}
	if growth > heapGrowthMax {
		t.Errorf("heap grew by %s, want under %s", hostile.MiB(growth), hostile.MiB(heapGrowthMax))
	}
	t.Logf("%d calls of %s refused: heap growth %s, slowest %v", len(kinds)*hostileCalls, hostile.MiB(uint64(size)), hostile.MiB(growth), slowest)
}

func conns(t *testing.T, tc *tlsCoordinator, addr string, cert *tls.Certificate, n int) []*grpc.ClientConn {
	out := make([]*grpc.ClientConn, n)
	for i := range out {
		out[i] = tc.dial(t, addr, cert)
	}
	return out
}

func TestAdmission_EdgeCertificateIsRefusedOnTheClusterListenerBeforeReading(t *testing.T) {
	// An edge's certificate from the coordinators' own CA: 50 raft
	// streams and 50 replica calls, each with a 200 MB first message.
	tc := startTLSCoordinator(t, nil)
	edge := tc.issue(t, "edge-7")
	attack(t, conns(t, tc, tc.c.ClusterAddr(), edge, 5), 200<<20,
		map[string]call{"raft stream": raftStream, "replica Store": replicaStore}, codes.PermissionDenied)
	if st := tc.c.clusterSrv.Stats(); st.RefusedAtAdmission != 2*hostileCalls {
		t.Fatalf("cluster server stats %+v, want %d refused at admission", st, 2*hostileCalls)
	}
}

func TestAdmission_IntakeRefusesAClientWithoutACertificateBeforeReading(t *testing.T) {
	// IntakeTLS asks for no client certificate; the coordinator demands
	// one anyway, in the handshake, so nothing of the stream is read.
	tc := startTLSCoordinator(t, nil)
	attack(t, conns(t, tc, tc.c.IntakeAddr(), nil, 5), 3<<20, map[string]call{"Ship stream": shipStream},
		codes.Unavailable, codes.Unauthenticated)
	// The refusals show as failed handshakes, not as refused streams.
	if n := tc.c.admission.intakeHandshakes.Load(); n == 0 {
		t.Error("no failed intake handshake counted")
	}
	if n := tc.c.admission.intakeStreams.Load(); n != 0 {
		t.Errorf("%d intake streams refused at admission, want none (the handshake refuses)", n)
	}
}

func TestAdmission_IntakeRefusesACoordinatorsCertificateBeforeReading(t *testing.T) {
	// A member's certificate is no edge's: refused by the intake's tap.
	tc := startTLSCoordinator(t, nil)
	attack(t, conns(t, tc, tc.c.IntakeAddr(), tc.issue(t, selfName), 5), 3<<20, map[string]call{"Ship stream": shipStream},
		codes.PermissionDenied)
}

func TestAdmission_AdmitEdgeDecidesBeforeReading(t *testing.T) {
	var tc *tlsCoordinator
	tc = startTLSCoordinator(t, func(o *Options) {
		o.AdmitEdge = func(identity string) error {
			tc.mu.Lock()
			tc.admitted = append(tc.admitted, identity)
			tc.mu.Unlock()
			if identity == "edge-revoked" {
				return errors.New("revoked on purpose")
			}
			return nil
		}
	})
	attack(t, conns(t, tc, tc.c.IntakeAddr(), tc.issue(t, "edge-revoked"), 5), 3<<20, map[string]call{"Ship stream": shipStream},
		codes.PermissionDenied)

	// An admitted edge gets past the tap: its (malformed) first message
	// is read and refused by the intake itself.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := shipStream(ctx, tc.dial(t, tc.c.IntakeAddr(), tc.issue(t, "edge-8")), 16)
	if c := status.Code(err); c == codes.PermissionDenied || c == codes.Unauthenticated || c == codes.OK {
		t.Fatalf("admitted edge: %v, want a refusal of its message, not of itself", err)
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if n := len(tc.admitted); n != hostileCalls+1 || tc.admitted[n-1] != "edge-8" {
		t.Fatalf("AdmitEdge asked %d times, last about %q; want %d, last the admitted edge", n, tc.admitted[n-1], hostileCalls+1)
	}
	if got := tc.c.admission.intakeStreams.Load(); got != hostileCalls {
		t.Fatalf("%d intake streams counted refused, want %d", got, hostileCalls)
	}
}

func TestAdmission_RefusalMessageNamesTheReason(t *testing.T) {
	tc := startTLSCoordinator(t, func(o *Options) {
		o.AdmitEdge = func(string) error { return errors.New("revoked on purpose") }
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, tcase := range map[string]struct {
		addr string
		cert *tls.Certificate
		call call
		want string
	}{
		"edge on the cluster listener":  {tc.c.ClusterAddr(), tc.issue(t, "edge-1"), raftStream, "names no current member"},
		"member on the intake":          {tc.c.IntakeAddr(), tc.issue(t, selfName), shipStream, "the intake admits edges only"},
		"edge refused by AdmitEdge":     {tc.c.IntakeAddr(), tc.issue(t, "edge-2"), shipStream, "revoked on purpose"},
		"edge on the cluster (replica)": {tc.c.ClusterAddr(), tc.issue(t, "edge-3"), replicaStore, "names no current member"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tcase.call(ctx, tc.dial(t, tcase.addr, tcase.cert), 16)
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tcase.want) {
				t.Fatalf("%v, want PermissionDenied saying %q", err, tcase.want)
			}
		})
	}
}

func TestAdmission_IntakeConnectionsBeyondThePerAddressCapAreClosed(t *testing.T) {
	tc := startTLSCoordinator(t, func(o *Options) { o.IntakeLimits = ListenerLimits{MaxConnsPerIP: 2} })
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", tc.c.IntakeAddr())
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	open[2].SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := open[2].Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("third connection from one address: read %v, want it closed", err)
	}
	if got := tc.c.admission.intakeConns.Load(); got != 1 {
		t.Fatalf("%d intake connections refused, want 1", got)
	}
	if st := tc.c.intakeLis.Stats(); st.Open != 2 {
		t.Fatalf("intake listener stats %+v, want 2 open", st)
	}
}

func TestClusterMembers_FollowTheAddressBookAndTheCatalog(t *testing.T) {
	tc := startTLSCoordinator(t, nil)
	c, m := tc.c, clusterMembers{tc.c}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err, c.Readiness())
	}
	const two, three, edge = "coord-2", "coord-3", "edge-1"
	// Registered in the catalog without being a raft member (3), or as an
	// edge: not members.
	for _, reg := range []catalog.RegisterNode{
		{ID: three, Role: catalog.RoleCoordinator, RaftID: 3, Addr: "127.0.0.1:3"},
		{ID: edge, Role: catalog.RoleEdge},
	} {
		if _, err := c.raft.Propose(ctx, catalog.EncodeCommand(reg)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, want map[string]bool) {
		t.Helper()
		for name, w := range want {
			if got := m.IsMember(name); got != w {
				t.Errorf("%s: IsMember(%q) = %v, want %v", when, name, got, w)
			}
		}
	}
	check("registered", map[string]bool{selfName: true, "": false, two: false, three: false, edge: false})
	// In the address book (a member added, not registered yet): a member.
	if err := c.tr.AddPeer(2, transport.Peer{Addr: "127.0.0.1:1", Name: two}); err != nil {
		t.Fatal(err)
	}
	check("in the address book", map[string]bool{two: true, three: false})
	c.tr.RemovePeer(2)
	check("removed from the address book", map[string]bool{two: false})
}

func TestAdmission_ThreeCoordinatorsAndAnEdgeOverTLSWithTwoCAs(t *testing.T) {
	// The legitimate traffic the taps must let through: raft between the
	// members (with sender headers), replica calls between them (the
	// edge's placement holds all three), and an edge from its own CA
	// shipping to the intake. Nothing is refused.
	peerCA, edgeCA := testcert.NewCA(t), testcert.NewCA(t)
	addrs := freeAddrs(t, 3)
	var peers []Peer
	for i, a := range addrs {
		peers = append(peers, Peer{RaftID: uint64(i + 1), NodeID: fmt.Sprintf("coord-%d", i+1), Addr: a})
	}
	var ms []*member
	for _, p := range peers {
		cert := peerCA.IssueDNS(t, p.NodeID)
		ms = append(ms, startMemberWith(t, p.RaftID, p.NodeID, p.Addr, peers, nil, func(o *Options) {
			o.Insecure = false
			o.ClusterServerTLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: peerCA.Pool, MinVersion: tls.VersionTLS13}
			o.ClusterClientTLS = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: peerCA.Pool, MinVersion: tls.VersionTLS13}
			o.IntakeTLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: edgeCA.Pool, MinVersion: tls.VersionTLS13}
		}))
	}
	lead := leader(t, ms)
	eventually(t, "all three coordinators registered", func() bool { return len(registeredCoordinators(lead.c)) == 3 })
	var intakes []string
	for _, m := range ms {
		intakes = append(intakes, m.c.IntakeAddr())
	}
	edgeCert := edgeCA.IssueDNS(t, edgeID)
	e := startEdgeWith(t, intakes, &tls.Config{Certificates: []tls.Certificate{edgeCert}, RootCAs: peerCA.Pool, MinVersion: tls.VersionTLS13})
	through := e.writeAndShip(t, 6)
	e.checkQuery(t, lead, through, 0)
	// Three replicas (the default factor): at least two of them got the
	// segments from another coordinator's intake, over the cluster port.
	reps := placement(t, lead)
	if len(reps) != 3 {
		t.Fatalf("placement %q: want three coordinators", reps)
	}
	for _, m := range ms {
		if slices.Contains(reps, m.nodeID) && m.c.store.Stats().SegmentsApplied == 0 {
			t.Errorf("replica %s stored no segment", m.nodeID)
		}
	}
	for _, m := range ms {
		st := m.c.clusterSrv.Stats()
		if st.RefusedAtAdmission != 0 || st.LegacyStreams != 0 || st.Refused != 0 || st.Received == 0 {
			t.Errorf("%s cluster server: %+v, want raft traffic, all of it admitted with headers", m.nodeID, st)
		}
		if n := m.c.admission.intakeStreams.Load(); n != 0 {
			t.Errorf("%s refused %d intake streams", m.nodeID, n)
		}
	}
}
