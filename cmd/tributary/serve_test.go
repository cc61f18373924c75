package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/internal/testcert"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// selfSigned makes a certificate for 127.0.0.1; it returns its files and a
// pool trusting it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	c := testcert.New(t)
	return c.CertFile, c.KeyFile, c.Pool
}

func TestServe_TLSAndTokensOnBothListeners(t *testing.T) {
	const token = "fleet-token-0123456789"
	t.Setenv("TRIBUTARY_TOKEN", token)
	certFile, keyFile, pool := selfSigned(t)
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	sf := serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0"}
	sf.tls.Cert, sf.tls.Key = certFile, keyFile
	fe, err := sf.start(n, testNodeAPI(n, "test").Register, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer fe.stop(time.Second)
	addr := map[string]string{}
	for i := 0; i+1 < len(fe.addrs); i += 2 {
		addr[fe.addrs[i].(string)] = fe.addrs[i+1].(string)
	}

	// gRPC over TLS: refused without a token, served with one.
	cc, err := grpc.NewClient(addr["grpc"], grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	qc := pb.NewQueryServiceClient(cc)
	ctx := context.Background()
	if _, err := qc.Status(ctx, &pb.StatusRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("status without token: %v, want Unauthenticated", err)
	}
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	if _, err := qc.Status(actx, &pb.StatusRequest{}); err != nil {
		t.Fatalf("status with token: %v", err)
	}

	// HTTP over TLS: plaintext fails, HTTPS without a token is 401.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 5 * time.Second}
	if resp, err := http.Get("http://" + addr["http"] + "/api/v1/labels"); err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("plaintext request to a TLS listener answered %d", resp.StatusCode)
		}
	}
	resp, err := hc.Get("https://" + addr["http"] + "/api/v1/labels")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("HTTPS without token: %d, want 401", resp.StatusCode)
	}
	if fe.stats.Get("unauthorized") != 2 {
		t.Fatalf("unauthorized counter = %d, want 2", fe.stats.Get("unauthorized"))
	}
}

func TestRunNode_RefusesPublicPlaintextAndBadTLS(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0"}, "--insecure-listen"},
		{[]string{"--http-listen", "0.0.0.0:0"}, "--http-listen"},
		{[]string{"--tls-cert", "x.pem"}, "key"},
		{[]string{"--token-file", filepath.Join(dir, "missing")}, "--token-file"},
	} {
		var out, errOut bytes.Buffer
		code := run(append([]string{"node", "--data-dir", filepath.Join(dir, "d")}, tc.args...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

func TestServe_MetricsCountViolations(t *testing.T) {
	sf := serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0", limits: httpapi.Limits{MaxBodyBytes: 1 << 10}}
	tp, err := sf.telemetry("node", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	n, err := node.Open(node.Options{DataDir: t.TempDir(), MeterProvider: tp.MeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	grpcAPI := testNodeAPI(n, "test")
	metrics := func(mux *http.ServeMux, st *httpapi.Stats) {
		mux.Handle("GET /metrics", metricsHandler(tp, grpcAPI, st))
	}
	fe, err := sf.start(n, grpcAPI.Register, metrics, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer fe.stop(time.Second)
	base := "http://" + fe.addrs[3].(string)
	post := func(body string) int {
		resp, err := http.Post(base+"/api/v2/write?bucket=b&precision=ms", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	now := time.Now().UnixMilli()
	good := fmt.Sprintf("m,host=a v=1 %d\n", now)
	future := fmt.Sprintf("m,host=a v=2 %d\n", now+24*3600_000)
	if st := post(good + future); st != http.StatusBadRequest {
		t.Fatalf("partial write: status %d, want 400", st)
	}
	if st := post(strings.Repeat(good, 100)); st != http.StatusRequestEntityTooLarge {
		t.Fatalf("body over the limit: status %d, want 413", st)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"tributary_points_accepted_total 1\n",
		`tributary_points_rejected_total{reason="too_far_in_future"} 1` + "\n",
		`tributary_api_events_total{event="body_too_large"} 1` + "\n",
		"# TYPE tributary_series gauge\n",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestServe_TelnetPutLinesReachTheNode(t *testing.T) {
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	sf := serveFlags{grpcListen: "127.0.0.1:0", tsdbListen: "127.0.0.1:0"}
	fe, err := sf.start(n, testNodeAPI(n, "test").Register, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	for i := 0; i+1 < len(fe.addrs); i += 2 {
		if fe.addrs[i] == "opentsdb_telnet" {
			addr = fe.addrs[i+1].(string)
		}
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	fmt.Fprintf(conn, "put sys.cpu.user %d 42.5 host=pi1\nput sys.cpu.user %d 43 host=pi1\n", now-1, now)
	conn.Close()
	defer fe.stop(5 * time.Second)
	ms, err := labels.ParseSelector(`sys.cpu.user{host="pi1"}`)
	if err != nil {
		t.Fatal(err)
	}
	// Telnet puts have no acknowledgement: wait for the points to land.
	var got []float64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = got[:0]
		_, err = n.Query(context.Background(), model.Query{Matchers: ms, Start: (now - 60) * 1000, End: (now + 60) * 1000, Mode: model.ModeRaw}, func(s model.Series) error { got = append(got, s.Vs...); return nil })
		if err != nil || len(got) == 2 {
			break
		}
	}
	if err != nil || len(got) != 2 || got[0] != 42.5 || got[1] != 43 {
		t.Fatalf("stored %v, %v; want [42.5 43]", got, err)
	}
}
