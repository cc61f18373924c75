// Package python_test runs the Python SDK's tests (sdk/python/tests)
// against a real storage node started in this process, and checks that the
// committed generated code matches what sdk/python/generate.sh produces.
//
// The node is served three ways at once, and the Python tests get each
// address from the environment:
//
//	TRIBUTARY_TEST_ADDR       plaintext, no authentication
//	TRIBUTARY_TEST_AUTH_ADDR  plaintext, bearer token required (TRIBUTARY_TEST_TOKEN)
//	TRIBUTARY_TEST_TLS_ADDR   TLS with a throwaway CA (TRIBUTARY_TEST_TLS_CA, a PEM file)
//	                          and the same token
//
// The tests need Debian's /usr/bin/python3 with python3-grpcio and
// python3-protobuf; without them they fail and say to run `make deps`.
// Python runs with -B so no __pycache__ lands in the tree.
package python_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
)

// python is the interpreter that sees Debian's grpcio and protobuf.
const python = "/usr/bin/python3"

const testToken = "py-sdk-test-token"

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requirePython fails the test when the Python runtime is incomplete.
func requirePython(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing: run `make deps` (installs python3, python3-grpcio, python3-protobuf)", python)
	}
	out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import grpc and protobuf: run `make deps` (installs python3-grpcio, python3-protobuf): %v\n%s", python, err, out)
	}
}

// openNode opens a node on a fresh directory, closed when the test ends
// (after the servers registered later have stopped).
func openNode(t testing.TB) *node.Node {
	t.Helper()
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("open node: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	return n
}

// serve serves n's API on a loopback port and returns the address.
func serve(t testing.TB, n *node.Node, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts...)
	grpcapi.New(n, grpcapi.Options{Status: edgeStatus(n)}).Register(g)
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	t.Cleanup(func() {
		g.Stop()
		if err := <-done; err != nil {
			t.Errorf("grpc serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// checkToken demands "authorization: Bearer <token>" metadata.
func checkToken(ctx context.Context, token string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if scheme, rest, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") && rest == token {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "a valid bearer token is required (metadata 'authorization')")
}

// requireToken returns server options whose interceptors refuse calls
// without the token.
func requireToken(token string) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := checkToken(ctx, token); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := checkToken(ss.Context(), token); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// selfSignedTLS makes a throwaway certificate for 127.0.0.1 and
// localhost, writes it as PEM to caFile, and returns the server credentials.
func selfSignedTLS(t testing.TB, caFile string) credentials.TransportCredentials {
	t.Helper()
	c := testcert.New(t)
	pem, err := os.ReadFile(c.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return credentials.NewTLS(c.Server)
}

// runPython runs the interpreter in this directory (sdk/python) with env
// added to the environment, and returns its combined output.
func runPython(t testing.TB, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{"-B"}, args...)...)
	cmd.Env = append(os.Environ(), append([]string{"PYTHONDONTWRITEBYTECODE=1"}, env...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestPythonSDK runs every Python test (unit tests, fake-server retry
// tests, and the tests against the node: plain, token, TLS + token) and
// fails with Python's output when any fails or is skipped.
func TestPythonSDK(t *testing.T) {
	requirePython(t)
	n := openNode(t)
	plain := serve(t, n)
	authed := serve(t, n, requireToken(testToken)...)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	tlsOpts := append([]grpc.ServerOption{grpc.Creds(selfSignedTLS(t, caFile))}, requireToken(testToken)...)
	tlsAddr := serve(t, n, tlsOpts...)

	out, err := runPython(t, []string{
		"TRIBUTARY_TEST_ADDR=" + plain,
		"TRIBUTARY_TEST_AUTH_ADDR=" + authed,
		"TRIBUTARY_TEST_TOKEN=" + testToken,
		"TRIBUTARY_TEST_TLS_ADDR=" + tlsAddr,
		"TRIBUTARY_TEST_TLS_CA=" + caFile,
	}, "-m", "unittest", "discover", "-s", "tests", "-v")
	if err != nil {
		t.Fatalf("Python SDK tests failed (%v):\n%s", err, out)
	}
	// Every test must have run: a skip here means the environment above
	// did not reach the tests.
	if m := regexp.MustCompile(`skipped=\d+`).FindString(out); m != "" {
		t.Fatalf("Python SDK tests were skipped (%s):\n%s", m, out)
	}
	ran := regexp.MustCompile(`Ran (\d+) tests?`).FindStringSubmatch(out)
	if ran == nil {
		t.Fatalf("no test summary in the Python output:\n%s", out)
	}
	if k, _ := strconv.Atoi(ran[1]); k < 30 {
		t.Fatalf("only %d Python tests ran; test discovery is broken:\n%s", k, out)
	}
	t.Logf("%s", out)
}

// TestGenerateIsReproducible regenerates the Python protobuf code into a
// temporary directory and requires it to equal the committed files byte
// for byte (what `make check-generate` relies on).
func TestGenerateIsReproducible(t *testing.T) {
	for _, tool := range []string{"protoc", "grpc_python_plugin", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: run `make deps` (installs protobuf-compiler and protobuf-compiler-grpc)", tool)
		}
	}
	dir := t.TempDir()
	if out, err := exec.Command("bash", "generate.sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("generate.sh: %v\n%s", err, out)
	}
	committed := filepath.Join("tributary", "_gen")
	want, err := filepath.Glob(filepath.Join(committed, "*.py"))
	if err != nil || len(want) == 0 {
		t.Fatalf("no committed generated code in %s (%v)", committed, err)
	}
	got, _ := filepath.Glob(filepath.Join(dir, "*.py"))
	if len(got) != len(want) {
		t.Fatalf("generate.sh wrote %d files, %d are committed: %v vs %v", len(got), len(want), got, want)
	}
	for _, w := range want {
		a, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.Base(w)))
		if err != nil {
			t.Fatalf("generate.sh did not write %s: %v", filepath.Base(w), err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from what generate.sh produces: run sdk/python/generate.sh and commit", w)
		}
	}
}

// BenchmarkPythonSDK runs bench/sdk_bench.py against an in-process node
// and reports its throughput figures (points/s written through
// Client.write and BatchWriter, points/s read back by query).
func BenchmarkPythonSDK(b *testing.B) {
	requirePython(b)
	n := openNode(b)
	addr := serve(b, n)
	for i := 0; i < b.N; i++ {
		out, err := runPython(b, []string{"TRIBUTARY_BENCH_ADDR=" + addr}, "bench/sdk_bench.py")
		if err != nil {
			b.Fatalf("sdk_bench.py: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var res map[string]float64
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
			b.Fatalf("sdk_bench.py output is not JSON: %v\n%s", err, out)
		}
		for k, v := range res {
			b.ReportMetric(v, k)
		}
	}
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
