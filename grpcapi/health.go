package grpcapi

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/internal/pace"
)

// The gRPC health service (grpc.health.v1) of a client listener, beside
// /readyz on the HTTP listener (httpapi.RegisterHealth):
//
//   - the overall status (service "") is SERVING when every overall
//     readiness check passes, the same checks as /readyz, else NOT_SERVING;
//   - each gRPC service of the listener has its own status, from the
//     checks it depends on (an edge's WriteService keeps SERVING while its
//     store cannot flush but writes still go to the WAL; its QueryService
//     does not, since answers may lack what the store cannot read);
//     services without their own checks follow the overall status.
//
// A readiness check is a func() error: nil means ready. Statuses are
// evaluated on every Check call and every PollInterval for Watch streams.
// Close sets every service NOT_SERVING (shutdown).

// HealthOptions configure a Health service. The zero value of a field
// means its default.
type HealthOptions struct {
	// Overall are the checks of the overall status (service "").
	Overall []func() error
	// Services maps a service name (e.g. "tributary.v1.WriteService") to
	// its own checks.
	Services map[string][]func() error
	// PollInterval is how often Watch streams see the checks again.
	// Default 1s.
	PollInterval time.Duration
}

// Validate fills in defaults; no value is refused.
func (o *HealthOptions) Validate() error {
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	return nil
}

// Health is the health service of one listener. It is safe for concurrent
// use.
type Health struct {
	*health.Server
	o HealthOptions

	mu      sync.Mutex // serialises refresh; guards names and started
	names   []string   // every service of the listener, once registered
	started bool       // the poller runs

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// NewHealth returns a health service for the checks of o.
func NewHealth(o HealthOptions) *Health {
	_ = o.Validate() // it refuses nothing
	return &Health{Server: health.NewServer(), o: o, stop: make(chan struct{}), done: make(chan struct{})}
}

// Register wraps a listener's register function: it registers the
// services, then the health service, which learns their names and starts
// polling.
func (h *Health) Register(next func(*grpc.Server)) func(*grpc.Server) {
	return func(g *grpc.Server) {
		next(g)
		healthpb.RegisterHealthServer(g, h)
		h.mu.Lock()
		for name := range g.GetServiceInfo() {
			if name != healthpb.Health_ServiceDesc.ServiceName {
				h.names = append(h.names, name)
			}
		}
		h.started = true
		h.mu.Unlock()
		h.refresh()
		go h.poll()
	}
}

// ready reports whether every check passes.
func ready(checks []func() error) bool {
	for _, c := range checks {
		if c != nil && c() != nil {
			return false
		}
	}
	return true
}

// refresh evaluates every status now.
func (h *Health) refresh() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.stop:
		return // Shutdown set everything NOT_SERVING
	default:
	}
	overall := ready(h.o.Overall)
	h.SetServingStatus("", servingStatus(overall))
	for _, name := range h.names {
		ok := overall
		if checks, own := h.o.Services[name]; own {
			ok = ready(checks)
		}
		h.SetServingStatus(name, servingStatus(ok))
	}
}

func servingStatus(ok bool) healthpb.HealthCheckResponse_ServingStatus {
	if ok {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}

// Check answers from the checks as they are now.
func (h *Health) Check(ctx context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.refresh()
	return h.Server.Check(ctx, in)
}

// Watch streams status changes until the client leaves or the health
// service closes (then with UNAVAILABLE): a graceful stop of the server
// does not wait for watchers.
func (h *Health) Watch(in *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-h.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := h.Server.Watch(in, watchStream{stream, ctx})
	select {
	case <-h.stop:
		return status.Error(codes.Unavailable, "the server is shutting down")
	default:
		return err
	}
}

// watchStream is a Watch stream whose context also ends at close.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (w watchStream) Context() context.Context { return w.ctx }

func (h *Health) poll() {
	defer close(h.done)
	pace.Every(h.stop, h.o.PollInterval, nil, h.refresh)
}

// Close stops polling and sets every service NOT_SERVING. A nil receiver
// does nothing; closing twice is fine.
func (h *Health) Close() {
	if h == nil {
		return
	}
	h.stopOnce.Do(func() {
		h.mu.Lock()
		close(h.stop)
		h.mu.Unlock()
		h.Shutdown()
		h.mu.Lock()
		started := h.started
		h.mu.Unlock()
		if started {
			<-h.done
		}
	})
}
