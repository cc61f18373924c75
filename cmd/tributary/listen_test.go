package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/internal/auth"
	"github.com/tributarydb/tributary/internal/h2test"
	"github.com/tributarydb/tributary/internal/testcert"
	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// listenNode serves a fresh node with sf and /metrics and the health
// endpoints mounted; it returns the listeners' addresses and counters.
func listenNode(t *testing.T, sf *serveFlags) (map[string]string, *frontend) {
	t.Helper()
	tp, err := sf.telemetry("node", "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	n, err := node.Open(node.Options{DataDir: t.TempDir(), MeterProvider: tp.MeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	grpcAPI := testNodeAPI(n, "test")
	extra := func(mux *http.ServeMux, st *httpapi.Stats) {
		mux.Handle("GET /metrics", metricsHandler(tp, grpcAPI, st))
		httpapi.RegisterHealth(mux, nodeReady(n))
	}
	fe, err := sf.start(n, grpcAPI.Register, extra, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fe.stop(time.Second) })
	addr := map[string]string{}
	for i := 0; i+1 < len(fe.addrs); i += 2 {
		addr[fe.addrs[i].(string)] = fe.addrs[i+1].(string)
	}
	return addr, fe
}

func get(t *testing.T, hc *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestServe_MetricsNeedTheTokenWhenTokensAreSet(t *testing.T) {
	const token = "metrics-token-0123456789"
	for _, tc := range []struct {
		name        string
		token       string
		metricsAuth string // "" leaves --metrics-auth unset
		want        int
	}{
		{"tokens set, default", token, "", http.StatusUnauthorized},
		{"tokens set, --metrics-auth=false", token, "false", http.StatusOK},
		{"no tokens, default", "", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TRIBUTARY_TOKEN", tc.token)
			sf := &serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0"}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.Var(&sf.metricsAuth, "metrics-auth", "")
			sf.fs = fs
			if tc.metricsAuth != "" {
				if err := fs.Parse([]string{"--metrics-auth=" + tc.metricsAuth}); err != nil {
					t.Fatal(err)
				}
			}
			addr, _ := listenNode(t, sf)
			base := "http://" + addr["http"]
			if code, _ := get(t, http.DefaultClient, base+"/metrics", ""); code != tc.want {
				t.Errorf("/metrics without a token: %d, want %d", code, tc.want)
			}
			if code, _ := get(t, http.DefaultClient, base+"/metrics", tc.token); code != http.StatusOK {
				t.Errorf("/metrics with the token: %d", code)
			}
			for _, p := range []string{"/healthz", "/readyz", "/-/healthy", "/-/ready", "/ping"} {
				if code, _ := get(t, http.DefaultClient, base+p, ""); code >= 400 {
					t.Errorf("%s without a token: %d; want it open", p, code)
				}
			}
			if tc.token != "" {
				resp, err := http.Post(base+"/api/v1/read", "application/x-protobuf", strings.NewReader("not even snappy"))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("remote_read without a token: %d, want 401", resp.StatusCode)
				}
			}
			want := `"metrics-auth":"` + map[string]string{"": "auto"}[tc.metricsAuth] + tc.metricsAuth + `"`
			if code, body := get(t, http.DefaultClient, base+"/api/v1/status/flags", tc.token); code != http.StatusOK || !strings.Contains(body, want) {
				t.Errorf("/api/v1/status/flags: %d %s, want %s", code, body, want)
			}
		})
	}
}

func TestOptionalBool_BareFlagTurnsItOn(t *testing.T) {
	var b optionalBool
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Var(&b, "metrics-auth", "")
	if b.or(false) || !b.or(true) || b.String() != "auto" {
		t.Fatal("an unset flag does not take the default")
	}
	if err := fs.Parse([]string{"--metrics-auth"}); err != nil || !b.or(false) {
		t.Fatalf("bare flag: %v, value %v", err, b.or(false))
	}
}

func TestServe_QueryTokenOnlyOnTheInfluxV1Endpoints(t *testing.T) {
	const token = "url-token-0123456789"
	t.Setenv("TRIBUTARY_TOKEN", token)
	addr, _ := listenNode(t, &serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0"})
	base := "http://" + addr["http"]
	resp, err := http.Post(base+"/write?db=x&p="+token, "text/plain", strings.NewReader("m v=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("/write with ?p=: %d, want 204", resp.StatusCode)
	}
	for _, p := range []string{"/api/v1/labels?p=" + token, "/api/v1/query?query=up&p=" + token, "/api/suggest?type=metrics&p=" + token} {
		if code, _ := get(t, http.DefaultClient, base+p, ""); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401 (a token in the URL is only for InfluxDB 1.x clients)", p, code)
		}
	}
}

func TestServe_TelnetListenerRefusedWhileTokensAreSet(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("telnet-token-0123456789\n"), 0o600)
	var out, errOut bytes.Buffer
	code := run([]string{"node", "--data-dir", filepath.Join(dir, "d"), "--token-file", tokens, "--opentsdb-listen", "127.0.0.1:0"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "--opentsdb-telnet-unauthenticated") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming --opentsdb-telnet-unauthenticated", code, errOut.String())
	}
	t.Setenv("TRIBUTARY_TOKEN", "telnet-token-0123456789")
	sf := &serveFlags{tsdbListen: "127.0.0.1:0"}
	if _, err := sf.tokens(); err == nil {
		t.Fatal("TRIBUTARY_TOKEN with --opentsdb-listen accepted")
	}
	sf.telnetUnauthenticated = true
	if _, err := sf.tokens(); err != nil {
		t.Fatalf("with --opentsdb-telnet-unauthenticated: %v", err)
	}
}

func TestServe_ConnectionsPastThePerIPBoundAreClosedAndCounted(t *testing.T) {
	sf := &serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0", tsdbListen: "127.0.0.1:0"}
	sf.conn.maxConnsPerIP = 2
	addr, fe := listenNode(t, sf)
	for _, l := range []string{"grpc", "http", "opentsdb_telnet"} {
		for i := range 3 {
			c, err := net.Dial("tcp", addr[l])
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if i < 2 {
				continue
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
				t.Errorf("%s: the third connection from one address was not closed (%v)", l, err)
			}
		}
		event := l + "_conn_refused_per_ip"
		if got := fe.stats.Get(event); got != 1 {
			t.Errorf("%s = %d, want 1", event, got)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestServe_OversizedQueryRequestIsRefusedBeforeItIsRead(t *testing.T) {
	const token = "size-token-0123456789"
	t.Setenv("TRIBUTARY_TOKEN", token)
	sf := &serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0"}
	addr, fe := listenNode(t, sf)
	md := map[string]string{"authorization": "Bearer " + token}
	eightMiB := h2test.Message(nil)
	eightMiB[2] = 0x80 // announces 8 MiB; none of it is sent
	code, msg, err := h2test.Call(addr["grpc"], pb.QueryService_Query_FullMethodName, md, eightMiB, 5*time.Second)
	if err != nil || code != codes.ResourceExhausted {
		t.Fatalf("8 MiB query: %v %q, %v; want ResourceExhausted before the body", code, msg, err)
	}
	if fe.stats.Get(eventGRPCRequestTooLarge) != 1 {
		t.Errorf("%s = %d, want 1", eventGRPCRequestTooLarge, fe.stats.Get(eventGRPCRequestTooLarge))
	}
	// Writes keep the large limit: the server waits for the body.
	if _, _, err := h2test.Call(addr["grpc"], pb.WriteService_Write_FullMethodName, md, eightMiB, 300*time.Millisecond); err != h2test.ErrNoStatus {
		t.Fatalf("8 MiB write: %v; want the server to wait for the message", err)
	}
}

// issue writes a certificate of ca to dir/name.{pem,key}.
func issue(t *testing.T, ca *testcert.CA, dir, name string) tls.Certificate {
	c := ca.Issue(t, "spiffe://test/"+name)
	testcert.WritePair(t, dir, name, c)
	return c
}

func TestServe_RotatedCertificatesAndTokensApplyWithoutARestart(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := testcert.NewCA(t), testcert.NewCA(t)
	issue(t, ca1, dir, "server")
	testcert.WriteFile(t, filepath.Join(dir, "clients.pem"), ca1.CertPEM())
	tokens := filepath.Join(dir, "tokens")
	const oldToken, newToken = "old-token-0123456789", "new-token-0123456789"
	testcert.WriteFile(t, tokens, []byte(oldToken+"\n"))
	sf := &serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0", tokenFile: tokens}
	sf.tls = auth.TLSFiles{Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server.key"), ClientCA: filepath.Join(dir, "clients.pem")}
	addr, _ := listenNode(t, sf) // no polling: SIGHUP only
	oldClient := ca1.Issue(t, "spiffe://test/client-1")
	both := x509.NewCertPool()
	both.AppendCertsFromPEM(ca1.CertPEM())
	both.AppendCertsFromPEM(ca2.CertPEM())

	status := func(cc *grpc.ClientConn, token string) error {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token), 5*time.Second)
		defer cancel()
		_, err := pb.NewQueryServiceClient(cc).Status(ctx, &pb.StatusRequest{})
		return err
	}
	dial := func(roots *x509.CertPool, cert tls.Certificate) *grpc.ClientConn {
		cc, err := grpc.NewClient(addr["grpc"], grpc.WithTransportCredentials(credentials.NewTLS(
			&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	established := dial(both, oldClient)
	if err := status(established, oldToken); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}

	newServer := issue(t, ca2, dir, "server")
	testcert.WriteFile(t, filepath.Join(dir, "clients.pem"), ca2.CertPEM())
	testcert.WriteFile(t, tokens, []byte(newToken+"\n"))
	newClient := ca2.Issue(t, "spiffe://test/client-2")
	// No polling in this test: nothing changes before the signal.
	if err := status(dial(ca2.Pool, newClient), newToken); err == nil {
		t.Fatal("the new files took effect before SIGHUP: the test proves nothing")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = status(dial(ca2.Pool, newClient), newToken); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("a new client after SIGHUP: %v", err)
	}
	if err := status(dial(both, oldClient), newToken); err == nil {
		t.Error("a client certificate of the removed CA was accepted after the reload")
	}
	if err := status(dial(ca2.Pool, newClient), oldToken); grpcCode(err) != codes.Unauthenticated {
		t.Errorf("the old token after the reload: %v; want Unauthenticated", err)
	}
	// The connection made before the rotation keeps working (with a
	// token valid now).
	if err := status(established, newToken); err != nil {
		t.Errorf("the connection made before the rotation: %v", err)
	}

	// HTTPS presents the new certificate too.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca2.Pool, Certificates: []tls.Certificate{newClient}}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + addr["http"] + "/healthz")
	if err != nil {
		t.Fatalf("HTTPS after the rotation: %v", err)
	}
	resp.Body.Close()
	if !bytes.Equal(resp.TLS.PeerCertificates[0].Raw, newServer.Certificate[0]) {
		t.Error("HTTPS presented the old certificate")
	}
	code, body := get(t, hc, "https://"+addr["http"]+"/metrics", newToken)
	if code != http.StatusOK || !strings.Contains(body, `tributary_credentials_reloads_total{kind="tls",result="ok"`) ||
		!strings.Contains(body, `tributary_credentials_last_load_timestamp_seconds{kind="tokens"`) {
		t.Errorf("/metrics (%d) lacks the reload metrics", code)
	}
}

func grpcCode(err error) codes.Code { return status.Code(err) }

// unreadBody fails the test when read.
type unreadBody struct{ t *testing.T }

func (b unreadBody) Read([]byte) (int, error) {
	b.t.Error("the body of an unauthenticated request was read")
	return 0, io.ErrUnexpectedEOF
}

func TestServe_EveryHTTPEndpointRefusesBeforeReadingTheBody(t *testing.T) {
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cfg := &httpapi.Config{}
	cfg.Normalize()
	sf := &serveFlags{}
	extra := func(mux *http.ServeMux, st *httpapi.Stats) {
		mux.Handle("GET /metrics", http.NotFoundHandler())
		mux.Handle("GET /api/v1/fleet", http.NotFoundHandler())
		httpapi.RegisterHealth(mux, nodeReady(n))
	}
	h, err := sf.httpHandler(n, cfg, auth.NewTokens("body-token-0123456789"), extra)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"/write", "/query", "/api/v2/write", "/api/put", "/api/query", "/api/query/last", "/api/suggest",
		"/api/search/lookup", "/api/aggregators", "/api/config/filters", "/api/version", "/api/stats", "/api/annotation",
		"/api/v1/write", "/api/v1/query", "/api/v1/query_range", "/api/v1/series", "/api/v1/labels", "/api/v1/label/job/values",
		"/api/v1/query_exemplars", "/api/v1/format_query", "/api/v1/status/buildinfo", "/api/v1/metadata", "/api/v1/rules",
		"/api/v1/alerts", "/api/v1/other", "/api/v1/fleet", "/metrics", "/no/such/path"}
	for _, p := range paths {
		for _, enc := range []string{"", "gzip", "snappy"} {
			r := httptest.NewRequest(http.MethodPost, p, io.NopCloser(unreadBody{t}))
			r.ContentLength = 64 << 20
			r.Header.Set("Content-Encoding", enc)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusUnauthorized {
				t.Errorf("POST %s (%q): %d, want 401", p, enc, w.Code)
			}
		}
	}
}
