package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tributarydb/tributary/internal/testcert"
	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

func TestGRPCHealth_NodeServesItsServices(t *testing.T) {
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	h := nodeGRPCHealth(n)
	defer h.Close()
	g := grpc.NewServer()
	defer g.Stop()
	h.Register(testNodeAPI(n, "test").Register)(g)
	for _, s := range []string{"", pb.WriteService_ServiceDesc.ServiceName, pb.QueryService_ServiceDesc.ServiceName} {
		resp, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: s})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%q of a healthy node: %v, %v", s, resp, err)
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
