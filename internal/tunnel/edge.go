package tunnel

// The edge's end: the coordinators cannot dial an edge behind NAT, so the
// edge opens a tunnel to every coordinator and serves its QueryService on
// it.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/internal/pace"
	"github.com/tributarydb/tributary/internal/telemetry"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// EdgeOptions configure an Edge. The zero value of a field means its
// default.
type EdgeOptions struct {
	// NodeID is sent in every tunnel's hello: this node's id, the
	// identity of its client certificate. Required.
	NodeID string
	// Targets are the coordinators' intake addresses; the Edge keeps one
	// tunnel open to each of them, so that whichever coordinator a client
	// asks reaches this node directly. Required.
	Targets []string
	// DialOptions say how the coordinators are reached: transport
	// credentials (required: grpc.NewClient refuses a target without
	// them), keepalives, instrumentation. The Edge adds none of its own;
	// replicator.Options.TunnelOptions gives the Shipper's.
	DialOptions []grpc.DialOption
	// Query is the service served on every tunnel (the QueryServer of a
	// grpcapi.Server over this node). Required.
	Query pb.QueryServiceServer
	// Reconnection backoff per coordinator: attempt k waits a random
	// duration in [d*(1-BackoffJitter), d] with
	// d = min(BackoffInitial*2^k, BackoffMax). Defaults 500ms, 30s, 0.5.
	// A tunnel the coordinator used resets it.
	BackoffInitial, BackoffMax time.Duration
	BackoffJitter              float64
	Logger                     *slog.Logger
	// MeterProvider and TracerProvider instrument the query server on
	// each tunnel (otelgrpc); nil: no-op.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

// Validate fills in defaults and rejects impossible values.
func (o *EdgeOptions) Validate() error {
	var bad []string
	if o.NodeID == "" {
		bad = append(bad, "NodeID is required")
	}
	if len(o.Targets) == 0 {
		bad = append(bad, "Targets is empty")
	}
	for i, t := range o.Targets {
		if strings.TrimSpace(t) == "" {
			bad = append(bad, fmt.Sprintf("Targets[%d] is empty", i))
		}
	}
	if len(o.DialOptions) == 0 {
		bad = append(bad, "DialOptions is empty (transport credentials are required)")
	}
	if o.Query == nil {
		bad = append(bad, "Query is required")
	}
	o.BackoffInitial = cmp.Or(o.BackoffInitial, 500*time.Millisecond)
	o.BackoffMax = cmp.Or(o.BackoffMax, 30*time.Second)
	o.BackoffJitter = cmp.Or(o.BackoffJitter, 0.5)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.BackoffInitial < 0 || o.BackoffMax < o.BackoffInitial || o.BackoffJitter < 0 || o.BackoffJitter > 1 {
		bad = append(bad, fmt.Sprintf("backoff initial %s, max %s, jitter %g (want 0 < initial <= max, 0 <= jitter <= 1)",
			o.BackoffInitial, o.BackoffMax, o.BackoffJitter))
	}
	if len(bad) > 0 {
		return errors.New("tunnel options: " + strings.Join(bad, "; "))
	}
	return nil
}

// Edge keeps a query tunnel open from this node to each coordinator. Run
// it once; Open may be called concurrently with Run.
type Edge struct {
	o    EdgeOptions
	open atomic.Int64
}

// NewEdge validates o and returns an Edge ready to Run.
func NewEdge(o EdgeOptions) (*Edge, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Edge{o: o}, nil
}

// Open returns how many tunnels are established now (their coordinator
// has spoken on them).
func (t *Edge) Open() int { return int(t.open.Load()) }

// Run keeps the tunnels open until ctx ends, then closes them and returns
// ctx's error.
func (t *Edge) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	var errs []error
	var mu sync.Mutex
	for i, target := range t.o.Targets {
		cc, err := grpc.NewClient(target, t.o.DialOptions...)
		if err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("query tunnel to %s: %w", target, err))
			mu.Unlock()
			continue
		}
		seed := uint64(time.Now().UnixNano()) + uint64(i)
		b := &pace.Backoff{Initial: t.o.BackoffInitial, Max: t.o.BackoffMax, Jitter: t.o.BackoffJitter,
			Rand: rand.New(rand.NewPCG(seed, 0x7e11))}
		wg.Go(func() {
			defer cc.Close()
			t.keep(ctx, target, pb.NewReplicationServiceClient(cc), b)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return ctx.Err()
}

// keep opens a tunnel to one coordinator again and again until ctx ends.
func (t *Edge) keep(ctx context.Context, target string, rc pb.ReplicationServiceClient, b *pace.Backoff) {
	log := t.o.Logger.With("component", "query-tunnel", "coordinator", target)
	for ctx.Err() == nil {
		used, err := t.serve(ctx, rc)
		if ctx.Err() != nil {
			return
		}
		if used {
			b.Reset()
		}
		d := b.Next()
		log.Info("query tunnel ended; reopening", "err", err, "in", d)
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// clientStream reduces the edge's side of a Tunnel stream to payloads.
type clientStream struct {
	s grpc.BidiStreamingClient[pb.TunnelRequest, pb.TunnelResponse]
}

func (s clientStream) Send(p []byte) error {
	return s.s.Send(&pb.TunnelRequest{Body: &pb.TunnelRequest_Data{Data: p}})
}

func (s clientStream) Recv() ([]byte, error) {
	m, err := s.s.Recv()
	if err != nil {
		return nil, err
	}
	return m.GetData(), nil
}

// usedConn notes the first bytes the coordinator sends: the tunnel was
// accepted.
type usedConn struct {
	*Conn
	once   sync.Once
	onUsed func()
}

func (c *usedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.once.Do(c.onUsed)
	}
	return n, err
}

// serve opens one tunnel and serves the QueryService on it until it ends.
// used reports whether the coordinator spoke on it.
func (t *Edge) serve(ctx context.Context, rc pb.ReplicationServiceClient) (used bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := rc.Tunnel(sctx)
	if err != nil {
		return false, fmt.Errorf("open query tunnel: %w", err)
	}
	if err := stream.Send(&pb.TunnelRequest{Body: &pb.TunnelRequest_Hello{Hello: &pb.TunnelHello{NodeId: t.o.NodeID}}}); err != nil {
		return false, fmt.Errorf("send query tunnel hello: %w", err)
	}
	conn := NewConn(clientStream{stream}, cancel, Addr("edge"), Addr("coordinator"))
	// counted: the tunnel is in t.open; finished: it no longer may be.
	var mu sync.Mutex
	counted, finished := false, false
	uc := &usedConn{Conn: conn, onUsed: func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			counted = true
			t.open.Add(1)
		}
	}}
	srv := grpc.NewServer(telemetry.GRPCServerOption(t.o.MeterProvider, t.o.TracerProvider))
	pb.RegisterQueryServiceServer(srv, t.o.Query)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(NewListener(uc)) // returns once Stop closes the listener
	}()
	select {
	case <-conn.Done():
	case <-ctx.Done():
	}
	srv.Stop()
	conn.Close()
	<-served
	mu.Lock()
	finished, used = true, counted
	if counted {
		t.open.Add(-1)
	}
	mu.Unlock()
	err = conn.Err()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return used, err
}
