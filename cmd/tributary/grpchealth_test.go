package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/internal/testcert"
	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// serveHealth serves register wrapped by h on a loopback listener and
// returns a health client; everything stops when the test ends.
func serveHealth(t *testing.T, h *grpcHealth, register func(*grpc.Server)) healthpb.HealthClient {
	t.Helper()
	g := grpc.NewServer()
	h.register(register)(g)
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
		h.close()
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

func TestGRPCHealth_OverallAndPerServiceStatusFollowTheChecks(t *testing.T) {
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
	h := newGRPCHealth(readiness{get(&storeErr)}, map[string]readiness{write: {get(&writeErr)}})
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
	if took := time.Since(start); took > 3*healthPollInterval {
		t.Fatalf("Watch saw the change after %v", took)
	}
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown service: %v, want NotFound", err)
	}
	// Shutdown: NOT_SERVING, and watchers are let go.
	h.close()
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

func TestGRPCHealth_NodeServesItsServices(t *testing.T) {
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := serveHealth(t, nodeGRPCHealth(n), testNodeAPI(n, "test").Register)
	for _, s := range []string{"", pb.WriteService_ServiceDesc.ServiceName, pb.QueryService_ServiceDesc.ServiceName} {
		if got := checkStatus(t, c, s); got != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%q of a healthy node: %v", s, got)
		}
	}
}

func TestStatus_PrintsAnUnhealthyStoreInRedWithItsReason(t *testing.T) {
	st := tributary.Status{NodeID: "edge-1", Role: "edge", Store: &tributary.StoreHealth{Reason: "corruption",
		Error: "Corruption: block checksum mismatch in 000034.sst", FailingSince: time.Unix(1_800_000_000, 0), Damaged: true,
		QuarantinedFiles: 1, LostPoints: 1200, UnrestoredRanges: 1}}
	var tty, plainOut, js bytes.Buffer
	if err := printNodeStatus(&tty, "text", "a:1", st, true); err != nil {
		t.Fatal(err)
	}
	if err := printNodeStatus(&plainOut, "text", "a:1", st, false); err != nil {
		t.Fatal(err)
	}
	if err := printNodeStatus(&js, "json", "a:1", st, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tty.String(), "\x1b[1;31mNOT READY: corruption since 2027-01-15T08:00:00Z, repair needed") ||
		!strings.Contains(tty.String(), "000034.sst") {
		t.Fatalf("terminal output:\n%s", tty.String())
	}
	if strings.Contains(plainOut.String(), "\x1b[") || !strings.Contains(plainOut.String(), "NOT READY: corruption") ||
		!strings.Contains(plainOut.String(), "1,200 points lost") {
		t.Fatalf("plain output:\n%s", plainOut.String())
	}
	if !strings.Contains(js.String(), `"reason": "corruption"`) || !strings.Contains(js.String(), `"healthy": false`) {
		t.Fatalf("json output:\n%s", js.String())
	}
	st.Store = &tributary.StoreHealth{Healthy: true, Reason: "ok"}
	plainOut.Reset()
	printNodeStatus(&plainOut, "text", "a:1", st, true)
	if !strings.Contains(plainOut.String(), "store:") || strings.Contains(plainOut.String(), "NOT READY") {
		t.Fatalf("healthy store:\n%s", plainOut.String())
	}
}

func TestNodeStart_RefusesACertificateNamingAnotherNode(t *testing.T) {
	cert := testcert.New(t) // names "localhost" (its first DNS SAN)
	for _, c := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"with --node-id", []string{"--node-id", "edge-1"}, `names node "localhost"`},
		{"id from the data dir", nil, `this node is "local"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"node", "--data-dir", filepath.Join(t.TempDir(), "d"), "--listen", "127.0.0.1:0", "--http-listen", "",
				"--replicate-to", "127.0.0.1:1", "--replicate-cert", cert.CertFile, "--replicate-key", cert.KeyFile, "--replicate-ca", cert.CertFile}, c.extra...)
			var out, errOut bytes.Buffer
			if code := run(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) || !strings.Contains(errOut.String(), "--replicate-cert") {
				t.Fatalf("exit %d, want 2 naming both ids; stderr:\n%s", code, errOut.String())
			}
		})
	}
}

func TestNodeRepair_DryRunOfAnIntactStore(t *testing.T) {
	dir := t.TempDir()
	n, err := node.Open(node.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"node", "repair", "--data-dir", dir, "--dry-run"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "0 damaged") {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if code := run([]string{"node", "repair", "--data-dir", filepath.Join(dir, "missing")}, &out, &errOut); code != 1 {
		t.Fatalf("repair of a missing data dir: exit %d", code)
	}
}
