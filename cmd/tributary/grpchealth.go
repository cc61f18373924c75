package main

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The gRPC health service (grpc.health.v1) of a client listener, beside
// /readyz on the HTTP listener:
//
//   - the overall status (service "") is SERVING when every readiness
//     check passes, the same checks as /readyz, else NOT_SERVING;
//   - each gRPC service of the listener has its own status, from the
//     checks it depends on (an edge's WriteService keeps SERVING while its
//     store cannot flush but writes still go to the WAL; its QueryService
//     does not, since answers may lack what the store cannot read);
//     services without their own checks follow the overall status.
//
// Statuses are evaluated on every Check call and every healthPollInterval
// for Watch streams. Close sets every service NOT_SERVING (shutdown).

// healthPollInterval is how often Watch streams see the checks again.
const healthPollInterval = time.Second

// grpcHealth is the health service of one listener.
type grpcHealth struct {
	*health.Server
	overall readiness
	// services maps service names to their own checks.
	services map[string]readiness

	mu      sync.Mutex // serialises refresh; guards names and started
	names   []string   // every service of the listener, once registered
	started bool       // the poller runs

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// newGRPCHealth returns a health service for the checks; services maps
// a service name (e.g. "tributary.v1.WriteService") to its own checks.
func newGRPCHealth(overall readiness, services map[string]readiness) *grpcHealth {
	return &grpcHealth{Server: health.NewServer(), overall: overall, services: services,
		stop: make(chan struct{}), done: make(chan struct{})}
}

// register wraps a listener's register function: it registers the
// services, then the health service, which learns their names.
func (h *grpcHealth) register(next func(*grpc.Server)) func(*grpc.Server) {
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

// refresh evaluates every status now.
func (h *grpcHealth) refresh() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.stop:
		return // Shutdown set everything NOT_SERVING
	default:
	}
	overall := h.overall.check() == nil
	h.SetServingStatus("", servingStatus(overall))
	for _, name := range h.names {
		ok := overall
		if checks, own := h.services[name]; own {
			ok = checks.check() == nil
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
func (h *grpcHealth) Check(ctx context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.refresh()
	return h.Server.Check(ctx, in)
}

// Watch streams status changes until the client leaves or the health
// service closes (then with UNAVAILABLE): a graceful stop of the server
// does not wait for watchers.
func (h *grpcHealth) Watch(in *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
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

func (h *grpcHealth) poll() {
	defer close(h.done)
	t := time.NewTicker(healthPollInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			h.refresh()
		}
	}
}

// close stops polling and sets every service NOT_SERVING. A nil receiver
// does nothing; closing twice is fine.
func (h *grpcHealth) close() {
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

// nodeGRPCHealth is an edge node's health service: overall and
// QueryService follow Ready (store healthy), WriteService follows
// WriteReady (writes still accepted).
func nodeGRPCHealth(n *node.Node) *grpcHealth {
	ready, writes := readiness{nodeReady(n)}, readiness{nodeWriteReady(n)}
	return newGRPCHealth(ready, map[string]readiness{
		pb.WriteService_ServiceDesc.ServiceName: writes,
		pb.QueryService_ServiceDesc.ServiceName: ready,
	})
}
