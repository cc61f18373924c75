package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/internal/testcert"
	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

func TestSeries_ListsMatchingSeries(t *testing.T) {
	n := startCLINode(t, "")
	queryFixture(t, n)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"temp"}, "temp{floor=\"1\",room=\"a\"}\ntemp{floor=\"1\",room=\"b\"}\n"},
		{[]string{`{room="a"}`}, "hum{floor=\"2\",room=\"a\"}\ntemp{floor=\"1\",room=\"a\"}\n"},
		{nil, "hum{floor=\"2\",room=\"a\"}\ntemp{floor=\"1\",room=\"a\"}\ntemp{floor=\"1\",room=\"b\"}\n"},
		{[]string{"--limit", "1"}, "hum{floor=\"2\",room=\"a\"}\n"},
		{[]string{"nothing"}, ""},
		{[]string{"--", "temp"}, "temp{floor=\"1\",room=\"a\"}\ntemp{floor=\"1\",room=\"b\"}\n"},
		{[]string{"temp", "--limit", "1"}, "temp{floor=\"1\",room=\"a\"}\n"},
	}
	for _, c := range cases {
		code, out, errOut := cli(append([]string{"series", "--addr", n.addr}, c.args...)...)
		if code != 0 || out != c.want {
			t.Errorf("series %q: exit %d\n%s\nwant\n%s%s", c.args, code, out, c.want, errOut)
		}
	}
	code, out, errOut := cli("series", "--addr", n.addr, "--format", "json", "temp")
	var got []map[string]string
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got) != 2 || got[1]["room"] != "b" || got[1]["__name__"] != "temp" {
		t.Errorf("json: exit %d %v\n%s%s", code, err, out, errOut)
	}
	if code, _, errOut := cli("series", "--addr", n.addr, `cpu{host=}`); code != 2 || !strings.Contains(errOut, "offset") {
		t.Errorf("bad selector: exit %d\n%s", code, errOut)
	}
}

func TestLabels_NamesAndValues(t *testing.T) {
	n := startCLINode(t, "")
	queryFixture(t, n)
	cases := []struct {
		args []string
		want string
	}{
		{nil, "__name__\nfloor\nroom\n"},
		{[]string{"room"}, "a\nb\n"},
		{[]string{"--match", "hum", "room"}, "a\n"},
		{[]string{"__name__"}, "hum\ntemp\n"},
		{[]string{"--match", `temp{room="b"}`}, "__name__\nfloor\nroom\n"},
		{[]string{"nosuchlabel"}, ""},
	}
	for _, c := range cases {
		code, out, errOut := cli(append([]string{"labels", "--addr", n.addr}, c.args...)...)
		if code != 0 || out != c.want {
			t.Errorf("labels %q: exit %d\n%s\nwant\n%s%s", c.args, code, out, c.want, errOut)
		}
	}
	code, out, _ := cli("labels", "--addr", n.addr, "--format", "json", "nosuchlabel")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("json of nothing: %q", out)
	}
	if code, _, errOut := cli("labels", "--addr", n.addr, "a", "b"); code != 2 || !strings.Contains(errOut, "at most one label name") {
		t.Errorf("two names: exit %d\n%s", code, errOut)
	}
}

func TestStatus_OverTLSWithAToken(t *testing.T) {
	cfg, caFile := cliTestCert(t)
	const token = "status-test-token-42"
	nd, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)), grpc.UnaryInterceptor(
		func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if md, _ := metadata.FromIncomingContext(ctx); strings.Join(md.Get("authorization"), ",") != "Bearer "+token {
				return nil, status.Error(codes.Unauthenticated, "missing or bad token")
			}
			return h(ctx, req)
		}))
	testNodeAPI(nd, "v-test").Register(g)
	go g.Serve(lis)
	defer func() {
		g.Stop()
		nd.Close()
	}()
	addr := lis.Addr().String()

	code, out, errOut := cli("status", "--addr", addr, "--tls-ca", caFile, "--token", token)
	if code != 0 || !strings.Contains(out, "version:") || !strings.Contains(out, "v-test") || !strings.Contains(out, "role:") {
		t.Fatalf("status over TLS: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = cli("status", "--addr", addr, "--tls-ca", caFile)
	if code != 1 || !strings.Contains(errOut, "Unauthenticated") {
		t.Fatalf("status without the token: exit %d\n%s", code, errOut)
	}
	code, out, errOut = cli("status", "--addr", addr, "--tls-insecure-skip-verify", "--token", token, "--format", "json")
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st["version"] != "v-test" {
		t.Fatalf("status json: exit %d %v\n%s%s", code, err, out, errOut)
	}
	code, _, errOut = cli("status", "--addr", addr, "--max-attempts", "1")
	if code != 1 {
		t.Fatalf("plaintext to a TLS server: exit %d\n%s", code, errOut)
	}
	code, _, errOut = cli("status", "--addr", addr, "--tls-ca", filepath.Join(t.TempDir(), "missing.pem"))
	if code != 2 || !strings.Contains(errOut, "CA file") {
		t.Fatalf("missing CA: exit %d\n%s", code, errOut)
	}
}

// cliTestCert makes a self-signed certificate for 127.0.0.1 and returns
// the server configuration and the CA file that verifies it.
func cliTestCert(t *testing.T) (*tls.Config, string) {
	c := testcert.New(t)
	return c.Server, c.CertFile
}

// An edge that replicates reports its replication in status, as text and
// as JSON; a node that does not prints no replication section.
func TestStatus_ShowsReplication(t *testing.T) {
	nd, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	a := grpcapi.New(nd, grpcapi.Options{Status: nodeStatus(nd, "v-test", func() *pb.ReplicationStatus {
		return &pb.ReplicationStatus{Connected: true, Coordinator: "coord-2", AckedThrough: 41, NewestSealedSeq: 44,
			LagSeconds: 2.5, LagBytes: 3 << 20, BacklogSegments: 3, BacklogBytes: 3 << 20, GapSegments: 2, GapPoints: 1500,
			DroppedPoints: 0, BackfilledPoints: 1500, BytesPerPoint: 1.26, LastError: "segment 42 refused (UNAVAILABLE)"}
	})})
	a.Register(g)
	go g.Serve(lis)
	defer func() {
		g.Stop()
		nd.Close()
	}()
	addr := lis.Addr().String()
	code, out, errOut := cli("status", "--addr", addr)
	for _, want := range []string{"connected to coord-2", "segment 41 (newest sealed 44)", "2.5s, 3.0 MiB", "3 segments",
		"2 segments, 1,500 points (0 dropped, 1,500 backfilled)", "1.26", "segment 42 refused"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("status lacks %q: exit %d\n%s%s", want, code, out, errOut)
		}
	}
	code, out, errOut = cli("status", "--addr", addr, "--format", "json")
	var st struct {
		Replication map[string]any `json:"replication"`
	}
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Replication["acked_through"] != float64(41) ||
		st.Replication["backfilled_points"] != float64(1500) {
		t.Fatalf("status json: exit %d %v\n%s%s", code, err, out, errOut)
	}

	plain := startCLINode(t, "")
	if code, out, _ := cli("status", "--addr", plain.addr); code != 0 || strings.Contains(out, "replication") {
		t.Fatalf("a node without replication: exit %d\n%s", code, out)
	}
}
