package grpcapi_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/grpcapi"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// pollEvery is the Watch streams' poll interval in these tests.
const pollEvery = time.Second

// serveHealth serves register wrapped by h on a loopback listener and
// returns a health client; everything stops when the test ends.
func serveHealth(t *testing.T, h *grpcapi.Health, register func(*grpc.Server)) healthpb.HealthClient {
	t.Helper()
	g := grpc.NewServer()
	h.Register(register)(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		h.Close()
		g.GracefulStop()
	})
	return healthpb.NewHealthClient(conn)
}

func checkStatus(t *testing.T, c healthpb.HealthClient, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("Check(%q): %v", service, err)
	}
	return resp.Status
}

func TestHealth_OverallAndPerServiceStatusFollowTheChecks(t *testing.T) {
	var storeErr, writeErr atomic.Pointer[error]
	get := func(p *atomic.Pointer[error]) func() error {
		return func() error {
			if e := p.Load(); e != nil {
				return *e
			}
			return nil
		}
	}
	set := func(p *atomic.Pointer[error], err error) { p.Store(&err) }
	write := pb.WriteService_ServiceDesc.ServiceName
	query := pb.QueryService_ServiceDesc.ServiceName
	h := grpcapi.NewHealth(grpcapi.HealthOptions{Overall: []func() error{get(&storeErr)},
		Services: map[string][]func() error{write: {get(&writeErr)}}, PollInterval: pollEvery})
	c := serveHealth(t, h, func(g *grpc.Server) {
		pb.RegisterWriteServiceServer(g, pb.UnimplementedWriteServiceServer{})
		pb.RegisterQueryServiceServer(g, pb.UnimplementedQueryServiceServer{})
	})
	const serving, notServing = healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING
	for _, s := range []string{"", write, query} {
		if got := checkStatus(t, c, s); got != serving {
			t.Fatalf("%q healthy: %v", s, got)
		}
	}
	// The store cannot flush, writes still go to the WAL.
	set(&storeErr, errors.New("store: corruption"))
	if got := [3]healthpb.HealthCheckResponse_ServingStatus{checkStatus(t, c, ""), checkStatus(t, c, write), checkStatus(t, c, query)}; got != [3]healthpb.HealthCheckResponse_ServingStatus{notServing, serving, notServing} {
		t.Fatalf("store failing: overall, write, query = %v", got)
	}
	// A Watch sees the write service go NOT_SERVING when writes are refused.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, &healthpb.HealthCheckRequest{Service: write})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != serving {
		t.Fatalf("first Watch answer: %v %v", r, err)
	}
	set(&writeErr, errors.New("unflushed data at its bound"))
	start := time.Now()
	if r, err := w.Recv(); err != nil || r.Status != notServing {
		t.Fatalf("Watch after the refusal: %v %v", r, err)
	}
	if took := time.Since(start); took > 3*pollEvery {
		t.Fatalf("Watch saw the change after %v", took)
	}
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown service: %v, want NotFound", err)
	}
	// Shutdown: NOT_SERVING, and watchers are let go.
	h.Close()
	if _, err := w.Recv(); err == nil {
		// The NOT_SERVING of the shutdown may come first.
		if _, err = w.Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("Watch after close: %v, want Unavailable", err)
		}
	}
	set(&storeErr, nil)
	set(&writeErr, nil)
	if got := checkStatus(t, c, ""); got != notServing {
		t.Fatalf("after close: %v", got)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
