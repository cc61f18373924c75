package tunnel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/internal/tunnel"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// waitFor bounds every wait: generous for a loaded machine; nothing
// asserts on how long something took.
const waitFor = 20 * time.Second

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type service struct {
	pb.UnimplementedReplicationServiceServer
	r *tunnel.Registry
}

func (s service) Tunnel(stream grpc.BidiStreamingServer[pb.TunnelRequest, pb.TunnelResponse]) error {
	return s.r.Serve(stream)
}

// coordinator is a loopback gRPC server with only the Tunnel method.
type coordinator struct {
	r   *tunnel.Registry
	srv *grpc.Server
}

func startCoordinator(t *testing.T, addr string, identity func(context.Context) (string, error)) (*coordinator, string) {
	t.Helper()
	r, err := tunnel.NewRegistry(tunnel.RegistryOptions{Identity: identity,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	var lis net.Listener
	eventually(t, "listen on "+addr, func() bool {
		lis, err = net.Listen("tcp", addr)
		return err == nil
	})
	c := &coordinator{r: r, srv: grpc.NewServer()}
	pb.RegisterReplicationServiceServer(c.srv, service{r: r})
	go c.srv.Serve(lis)
	t.Cleanup(c.stop)
	return c, lis.Addr().String()
}

func (c *coordinator) stop() {
	c.r.Close()
	c.srv.Stop()
}

func openNode(t *testing.T, id string) *node.Node {
	t.Helper()
	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	base := time.Now().Add(-time.Hour).UnixMilli()
	for i := range 3 {
		b := model.Batch{Labels: []labels.Label{{Name: "__name__", Value: "temp"}, {Name: "sensor", Value: fmt.Sprint("s", i)}}}
		for k := range 100 {
			b.Ts = append(b.Ts, base+int64(k))
			b.Vs = append(b.Vs, float64(i*1000+k)/7)
		}
		if res, err := n.Write(context.Background(), []model.Batch{b}); err != nil || res.Accepted != 100 {
			t.Fatalf("write: %d accepted, %d rejected, %v", res.Accepted, res.Rejected, err)
		}
	}
	return n
}

// runTunnels runs an Edge for node n with the options a replicating node
// gives it (replicator.Options.TunnelOptions).
func runTunnels(t *testing.T, id string, n *node.Node, targets ...string) *tunnel.Edge {
	t.Helper()
	ro := replicator.Options{Targets: targets, Insecure: true, CursorPath: "unused",
		BackoffInitial: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if err := ro.Validate(); err != nil {
		t.Fatal(err)
	}
	tun, err := tunnel.NewEdge(ro.TunnelOptions(id, grpcapi.New(n, grpcapi.Options{}).QueryServer))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := tun.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("tunnels: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return tun
}

func source(t *testing.T, r *tunnel.Registry, edge string) query.Source {
	t.Helper()
	var s query.Source
	eventually(t, "a tunnel of "+edge, func() bool {
		cc, ok := r.Client(edge)
		if ok {
			s = query.NewEdgeClient("tunnel/"+edge, cc)
		}
		return ok
	})
	return s
}

// requireSameAnswers asks the edge through s and the node directly, and
// requires the same answers to Query, Series and LabelNames.
func requireSameAnswers(t *testing.T, s query.Source, n *node.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	eq, err := labels.NewMatcher(labels.MatchEqual, "__name__", "temp")
	if err != nil {
		t.Fatal(err)
	}
	ms := []*labels.Matcher{eq}
	q := model.Query{Matchers: ms, Start: 0, End: time.Now().UnixMilli(), Mode: model.ModeRaw}
	collect := func(b interface {
		Query(context.Context, model.Query, func(model.Series) error) (model.QueryInfo, error)
	}) []model.Series {
		var out []model.Series
		if _, err := b.Query(ctx, q, func(s model.Series) error {
			out = append(out, model.Series{Labels: s.Labels, Ts: slices.Clone(s.Ts), Vs: slices.Clone(s.Vs)})
			return nil
		}); err != nil {
			t.Fatalf("query: %v", err)
		}
		return out
	}
	direct := n
	got, want := collect(s), collect(direct)
	if len(got) != 3 || len(got) != len(want) {
		t.Fatalf("query through the tunnel: %d series, directly %d; want 3", len(got), len(want))
	}
	for i := range want {
		if got[i].Labels.String() != want[i].Labels.String() || !slices.Equal(got[i].Ts, want[i].Ts) || !slices.Equal(got[i].Vs, want[i].Vs) {
			t.Fatalf("series %d through the tunnel: %s with %d points, directly %s with %d", i, got[i].Labels, len(got[i].Ts), want[i].Labels, len(want[i].Ts))
		}
	}
	gs, err := s.Series(ctx, ms, 0)
	if err != nil {
		t.Fatalf("series: %v", err)
	}
	ws, _ := direct.Series(ctx, ms, 0)
	if len(gs) != 3 || fmt.Sprint(gs) != fmt.Sprint(ws) {
		t.Fatalf("series through the tunnel %v, directly %v", gs, ws)
	}
	gn, err := s.LabelNames(ctx, nil)
	if err != nil {
		t.Fatalf("label names: %v", err)
	}
	wn, _ := direct.LabelNames(ctx, nil)
	if !slices.Equal(gn, wn) || !slices.Contains(gn, "sensor") {
		t.Fatalf("label names through the tunnel %v, directly %v", gn, wn)
	}
}

// TestTunnel_QueriesReachTheEdgeAndSurviveARestart runs a real node behind
// an Edge, queries it through the coordinator's registry, restarts the
// coordinator's server, and queries it again through the new tunnel.
func TestTunnel_QueriesReachTheEdgeAndSurviveARestart(t *testing.T) {
	c, addr := startCoordinator(t, "127.0.0.1:0", nil)
	n := openNode(t, "pi-7")
	tun := runTunnels(t, "pi-7", n, addr)
	requireSameAnswers(t, source(t, c.r, "pi-7"), n)
	eventually(t, "the edge counts one open tunnel", func() bool { return tun.Open() == 1 })
	if got := c.r.Edges(); !slices.Equal(got, []string{"pi-7"}) {
		t.Fatalf("edges with a tunnel: %v", got)
	}

	c.stop()
	eventually(t, "the edge notices the tunnel ended", func() bool { return tun.Open() == 0 })
	if _, ok := c.r.Client("pi-7"); ok {
		t.Fatal("a stopped coordinator still lists the tunnel")
	}
	c2, _ := startCoordinator(t, addr, nil)
	requireSameAnswers(t, source(t, c2.r, "pi-7"), n)
}

// TestTunnel_HelloMustNameTheCaller refuses a hello naming another node
// than the caller's identity, and a stream that does not start with one.
func TestTunnel_HelloMustNameTheCaller(t *testing.T) {
	c, addr := startCoordinator(t, "127.0.0.1:0", func(context.Context) (string, error) { return "pi-7", nil })
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rc := pb.NewReplicationServiceClient(cc)
	for _, tc := range []struct {
		name  string
		first *pb.TunnelRequest
		code  codes.Code
	}{
		{"another node", &pb.TunnelRequest{Body: &pb.TunnelRequest_Hello{Hello: &pb.TunnelHello{NodeId: "pi-8"}}}, codes.PermissionDenied},
		{"data first", &pb.TunnelRequest{Body: &pb.TunnelRequest_Data{Data: []byte("PRI")}}, codes.FailedPrecondition},
		{"empty node id", &pb.TunnelRequest{Body: &pb.TunnelRequest_Hello{Hello: &pb.TunnelHello{}}}, codes.FailedPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			st, err := rc.Tunnel(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Send(tc.first); err != nil {
				t.Fatal(err)
			}
			_, err = st.Recv()
			if status.Code(err) != tc.code {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
	// A real edge under the wrong name never gets a tunnel registered.
	n := openNode(t, "pi-8")
	tun := runTunnels(t, "pi-8", n, addr)
	time.Sleep(100 * time.Millisecond) // a few refused attempts; nothing may register
	if got := c.r.Edges(); len(got) != 0 || tun.Open() != 0 {
		t.Fatalf("edges with a tunnel %v, open %d; want none", got, tun.Open())
	}
	// The right name does.
	n7 := openNode(t, "pi-7")
	runTunnels(t, "pi-7", n7, addr)
	requireSameAnswers(t, source(t, c.r, "pi-7"), n7)
}
