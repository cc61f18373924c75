package tunnel

// The coordinator's end: Registry.Serve handles one Tunnel stream. It
// checks the hello against the caller's identity the way the intake checks
// a Ship hello, wraps the stream as a Conn, opens a gRPC client connection
// over it and registers it for the edge, replacing the edge's older tunnel
// if any. The registration goes away when the stream ends. Registry.Client
// hands the connection to the query front end.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// maxNodeIDBytes bounds a hello's node id (as the Ship hello's).
const maxNodeIDBytes = 255

// RegistryOptions configure a Registry.
type RegistryOptions struct {
	// Identity returns the verified identity of a stream's caller (the
	// node id its client certificate proves); the hello must name it. Nil
	// trusts the hello's node_id: insecure or local mode only.
	Identity func(ctx context.Context) (string, error)
	// DialOptions are added to the client connection opened over each
	// tunnel (message size limits, interceptors). Transport credentials
	// and the dialer are the Registry's own: the tunnel is already
	// authenticated by the stream it rides on.
	DialOptions []grpc.DialOption
	// Revoked reports whether an edge is refused: its hello is refused
	// with PERMISSION_DENIED (an open tunnel is ended with Drop). Nil:
	// none is.
	Revoked func(edge string) bool
	Logger  *slog.Logger
}

// Validate fills in defaults.
func (o *RegistryOptions) Validate() error {
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	return nil
}

// Registry holds the open tunnels by edge node id.
type Registry struct {
	o RegistryOptions

	mu     sync.Mutex
	edges  map[string]*entry // REQUIRES: mu held
	closed bool              // REQUIRES: mu held
	stop   chan struct{}     // closed by Close
}

type entry struct {
	conn *Conn
	cc   *grpc.ClientConn
}

// NewRegistry returns an empty Registry.
func NewRegistry(o RegistryOptions) (*Registry, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("tunnel registry options: %w", err)
	}
	return &Registry{o: o, edges: map[string]*entry{}, stop: make(chan struct{})}, nil
}

// Client returns the client connection over edge's open tunnel, if it has
// one: the edge's QueryService answers on it. The Registry owns it; it
// fails once the tunnel ends.
func (r *Registry) Client(edge string) (grpc.ClientConnInterface, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.edges[edge]; e != nil {
		return e.cc, true
	}
	return nil, false
}

// Edges lists the edges with an open tunnel, sorted.
func (r *Registry) Edges() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id := range r.edges {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Drop ends edge's open tunnel, if it has one (a revoked edge).
func (r *Registry) Drop(edge string) bool {
	r.mu.Lock()
	e := r.edges[edge]
	delete(r.edges, edge)
	r.mu.Unlock()
	if e == nil {
		return false
	}
	e.conn.Close()
	r.o.Logger.Warn("query tunnel ended: the edge is revoked", "edge", edge)
	return true
}

// Close ends every tunnel and refuses new ones. Safe to call more than
// once.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	close(r.stop)
}

// serverStream reduces the server side of a Tunnel stream to payloads.
type serverStream struct {
	s grpc.BidiStreamingServer[pb.TunnelRequest, pb.TunnelResponse]
}

func (s serverStream) Send(p []byte) error { return s.s.Send(&pb.TunnelResponse{Data: p}) }

func (s serverStream) Recv() ([]byte, error) {
	m, err := s.s.Recv()
	if err != nil {
		return nil, err
	}
	if m.GetHello() != nil {
		return nil, status.Error(codes.FailedPrecondition, "a tunnel hello after the first message")
	}
	return m.GetData(), nil
}

// Serve handles one Tunnel stream until it ends, the edge's tunnel is
// replaced, or the Registry closes. It implements the Tunnel method of
// tributary.v1.ReplicationService.
func (r *Registry) Serve(stream grpc.BidiStreamingServer[pb.TunnelRequest, pb.TunnelResponse]) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	edge, err := r.hello(ctx, first.GetHello())
	if err != nil {
		return err
	}
	log := r.o.Logger.With("edge", edge)

	// The handler's return cancels the stream: Close of the conn makes
	// it return, which unblocks a pending Recv or Send.
	quit := make(chan struct{})
	var quitOnce sync.Once
	conn := NewConn(serverStream{stream}, func() { quitOnce.Do(func() { close(quit) }) },
		Addr("coordinator"), Addr("edge/"+edge))
	dialed := false
	var dmu sync.Mutex
	dial := func(context.Context, string) (net.Conn, error) {
		dmu.Lock()
		defer dmu.Unlock()
		if dialed {
			// The conn cannot be made again: the edge opens a new tunnel.
			return nil, fmt.Errorf("query tunnel of edge %q has ended", edge)
		}
		dialed = true
		return conn, nil
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial),
		// An idle channel would close its transport, and with it the
		// tunnel.
		grpc.WithIdleTimeout(0),
	}, r.o.DialOptions...)
	cc, err := grpc.NewClient("passthrough:///tunnel/"+edge, opts...)
	if err != nil {
		conn.Close()
		return status.Errorf(codes.Internal, "query tunnel of edge %q: client connection: %v", edge, err)
	}
	defer cc.Close()
	cc.Connect() // the HTTP/2 handshake now, not on the first query
	e := &entry{conn: conn, cc: cc}

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		conn.Close()
		return status.Error(codes.Unavailable, "coordinator is shutting down")
	}
	old := r.edges[edge]
	r.edges[edge] = e
	r.mu.Unlock()
	if old != nil {
		old.conn.Close()
		log.Info("query tunnel replaced by a newer one")
	} else {
		log.Info("query tunnel open")
	}
	defer func() {
		r.mu.Lock()
		if r.edges[edge] == e {
			delete(r.edges, edge)
		}
		r.mu.Unlock()
	}()

	select {
	case <-quit:
	case <-ctx.Done():
	case <-r.stop:
		conn.Close()
		return status.Error(codes.Unavailable, "coordinator is shutting down")
	}
	conn.Close()
	if err := conn.Err(); err != nil && !errors.Is(err, net.ErrClosed) {
		log.Info("query tunnel closed", "err", err)
	} else {
		log.Info("query tunnel closed")
	}
	return nil
}

// hello checks the first message: a hello naming the caller's identity.
func (r *Registry) hello(ctx context.Context, h *pb.TunnelHello) (string, error) {
	if h == nil {
		return "", status.Error(codes.FailedPrecondition, "the first message of a tunnel must be a hello")
	}
	edge := h.GetNodeId()
	if edge == "" || len(edge) > maxNodeIDBytes {
		return "", status.Errorf(codes.FailedPrecondition, "tunnel hello: node id of %d bytes (want 1 to %d)", len(edge), maxNodeIDBytes)
	}
	if r.o.Identity != nil {
		id, err := r.o.Identity(ctx)
		if err != nil {
			return "", status.Errorf(codes.Unauthenticated, "caller identity: %v", err)
		}
		if id == "" {
			return "", status.Error(codes.Unauthenticated, "caller has no identity")
		}
		if edge != id {
			return "", status.Errorf(codes.PermissionDenied, "tunnel hello names node %q, the caller is %q", edge, id)
		}
	}
	if r.o.Revoked != nil && r.o.Revoked(edge) {
		return "", status.Errorf(codes.PermissionDenied, "edge %q is revoked", edge)
	}
	return edge, nil
}
