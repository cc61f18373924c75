package tributary_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/internal/testcert"
	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is a real storage node served over gRPC on loopback, with
// optional faults injected in front of it.
type testServer struct {
	addr string
	node *node.Node

	mu     sync.Mutex
	faults map[string][]codes.Code // method suffix -> codes to fail with, in order
	calls  map[string]*atomic.Int64
	// hang makes the next calls of a method wait until their deadline.
	hang map[string]int
	// lastAuth is the authorization metadata of the last call.
	lastAuth string
}

type serverConfig struct {
	token string
	tls   *tls.Config
	node  node.Options
}

type serverOption func(*serverConfig)

func withServerToken(tok string) serverOption { return func(c *serverConfig) { c.token = tok } }
func withServerTLS(cfg *tls.Config) serverOption {
	return func(c *serverConfig) { c.tls = cfg }
}

func startServer(t testing.TB, opts ...serverOption) *testServer {
	t.Helper()
	cfg := serverConfig{node: node.Options{DataDir: t.TempDir()}}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := node.Open(cfg.node)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	s := &testServer{addr: lis.Addr().String(), node: n, faults: map[string][]codes.Code{}, calls: map[string]*atomic.Int64{}, hang: map[string]int{}}
	gopts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := s.intercept(ctx, info.FullMethod, cfg.token); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := s.intercept(ss.Context(), info.FullMethod, cfg.token); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
	if cfg.tls != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(cfg.tls)))
	}
	g := grpc.NewServer(gopts...)
	grpcapi.New(n, grpcapi.Options{Status: edgeStatus(n)}).Register(g)
	go g.Serve(lis)
	t.Cleanup(func() {
		g.Stop()
		if err := n.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	return s
}

func (s *testServer) intercept(ctx context.Context, method, token string) error {
	name := method[strings.LastIndexByte(method, '/')+1:]
	s.mu.Lock()
	if s.calls[name] == nil {
		s.calls[name] = new(atomic.Int64)
	}
	s.calls[name].Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	s.lastAuth = strings.Join(md.Get("authorization"), ",")
	var fault codes.Code
	if f := s.faults[name]; len(f) > 0 {
		fault, s.faults[name] = f[0], f[1:]
	}
	hang := s.hang[name] > 0
	if hang {
		s.hang[name]--
	}
	s.mu.Unlock()
	if token != "" && s.lastAuth != "Bearer "+token {
		return status.Error(codes.Unauthenticated, "bad or missing token")
	}
	if hang {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	if fault != codes.OK {
		return status.Errorf(fault, "injected %s", fault)
	}
	return nil
}

// fail makes the next calls of method (e.g. "Write") fail with codes, in
// order.
func (s *testServer) fail(method string, cs ...codes.Code) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], cs...)
}

// hangNext makes the next n calls of method wait for their deadline.
func (s *testServer) hangNext(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hang[method] += n
}

func (s *testServer) callCount(method string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.calls[method]; c != nil {
		return c.Load()
	}
	return 0
}

func (s *testServer) auth() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastAuth
}

// fastRetry retries quickly so that tests stay fast.
var fastRetry = tributary.WithRetry(tributary.RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond})

func dial(t testing.TB, s *testServer, opts ...tributary.Option) *tributary.Client {
	t.Helper()
	c, err := tributary.Dial(context.Background(), s.addr, append([]tributary.Option{fastRetry}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// selfSignedCert makes a certificate for 127.0.0.1 and localhost and
// returns the server configuration and the CA file.
func selfSignedCert(t testing.TB) (*tls.Config, string) {
	c := testcert.New(t)
	return c.Server, c.CertFile
}

// edgeStatus answers Status with n's counters, as tributary node does
// (version "test", role "edge"; fewer fields).
func edgeStatus(n *node.Node) grpcapi.StatusFunc {
	return func(context.Context) (*pb.StatusResponse, error) {
		st := n.Status()
		return &pb.StatusResponse{NodeId: st.NodeID, Role: "edge", Version: "test", Series: int64(st.Series),
			PointsAcceptedTotal: st.Accepted, PointsRejectedTotal: st.Rejected, UptimeMs: st.Uptime.Milliseconds()}, nil
	}
}
