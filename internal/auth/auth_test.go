package auth

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/internal/h2test"
	"github.com/tributarydb/tributary/internal/testcert"
)

const tok = "s3cret-token-0123456789"

func TestTokens_HTTPForms(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	denied := 0
	h := NewTokens(tok).HTTP(ok, HTTPOptions{Open: []string{"/ping"}, QueryTokenPaths: InfluxV1Paths,
		OnDeny: func(*http.Request) { denied++ }})
	for _, tc := range []struct {
		name string
		set  func(*http.Request)
		path string
		want int
	}{
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }, "/write", 204},
		{"influx v2 token", func(r *http.Request) { r.Header.Set("Authorization", "Token "+tok) }, "/api/v2/write", 204},
		{"basic password", func(r *http.Request) { r.SetBasicAuth("telegraf", tok) }, "/write", 204},
		{"influx v1 p param on /write", func(*http.Request) {}, "/write?u=x&p=" + tok, 204},
		{"influx v1 p param on /query", func(*http.Request) {}, "/query?p=" + tok, 204},
		{"open path", func(*http.Request) {}, "/ping", 204},
		{"missing", func(*http.Request) {}, "/write", 401},
		{"wrong", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, "/write", 401},
		{"prefix of token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok[:5]) }, "/write", 401},
		{"empty bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") }, "/write", 401},
		{"p param off the v1 endpoints", func(*http.Request) {}, "/api/v2/write?p=" + tok, 401},
		{"p param on the Prometheus API", func(*http.Request) {}, "/api/v1/query?query=up&p=" + tok, 401},
	} {
		r := httptest.NewRequest("POST", tc.path, nil)
		tc.set(r)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, w.Code, tc.want, w.Body)
		}
		if w.Code == 401 && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
		}
	}
	if denied != 6 {
		t.Errorf("denied %d requests, want 6", denied)
	}
	// No tokens: authentication off.
	if NewTokens("", " ").Enabled() {
		t.Fatal("blank tokens enable authentication")
	}
}

// failingBody fails the test when a handler reads it.
type failingBody struct{ t *testing.T }

func (b failingBody) Read([]byte) (int, error) {
	b.t.Error("the body of an unauthenticated request was read")
	return 0, io.ErrUnexpectedEOF
}

func TestTokens_HTTPRefusesWithoutReadingTheBody(t *testing.T) {
	reads := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.ReadAll(r.Body) })
	h := NewTokens(tok).HTTP(reads, HTTPOptions{QueryTokenPaths: InfluxV1Paths})
	for _, enc := range []string{"", "gzip"} {
		r := httptest.NewRequest("POST", "/write", io.NopCloser(failingBody{t}))
		r.ContentLength = 64 << 20
		r.Header.Set("Content-Encoding", enc)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 401 || w.Header().Get("Connection") != "close" {
			t.Errorf("encoding %q: status %d, Connection %q; want 401 and close", enc, w.Code, w.Header().Get("Connection"))
		}
	}
}

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("# fleet\n\n"+tok+"\nanother-long-token-value\n"), 0o600)
	ts, err := LoadTokens(good)
	if err != nil || !ts.Valid(tok) || !ts.Valid("another-long-token-value") || ts.Valid("x") {
		t.Fatalf("LoadTokens: %v", err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	if _, err := LoadTokens(short); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("short token: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("# nothing\n"), 0o600)
	if _, err := LoadTokens(empty); err == nil {
		t.Fatal("empty token file accepted")
	}
}

func TestGRPCServerOptions_TokenForms(t *testing.T) {
	var denied atomic.Int64
	g := grpc.NewServer(GRPCServerOptions(GRPCOptions{Tokens: NewTokens(tok), OnDeny: func(string) { denied.Add(1) }})...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	defer g.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	for _, tc := range []struct {
		md   string
		want codes.Code
	}{{"", codes.Unauthenticated}, {"Bearer wrong", codes.Unauthenticated}, {"Bearer " + tok, codes.OK}, {"bearer " + tok, codes.OK}} {
		ctx := context.Background()
		if tc.md != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tc.md)
		}
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if status.Code(err) != tc.want {
			t.Errorf("authorization %q: %v, want %v", tc.md, err, tc.want)
		}
	}
	if denied.Load() != 2 {
		t.Errorf("denied = %d, want 2", denied.Load())
	}
	if GRPCServerOptions(GRPCOptions{}) != nil {
		t.Error("options returned with nothing to check")
	}
}

func TestGRPCServerOptions_RefusesBeforeTheMessageArrives(t *testing.T) {
	g := grpc.NewServer(GRPCServerOptions(GRPCOptions{Tokens: NewTokens(tok)})...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	defer g.Stop()
	// The message header announces 1 MiB; none of it is ever sent. A
	// server that reads the message before checking the token waits for
	// it (and would buffer it); one that checks the headers answers now.
	announce := []byte{0, 0, 0x10, 0, 0}
	code, msg, err := h2test.Call(lis.Addr().String(), "/grpc.health.v1.Health/Check", nil, announce, 5*time.Second)
	if err != nil || code != codes.Unauthenticated {
		t.Fatalf("call without a token: code %v %q, %v; want Unauthenticated before the message", code, msg, err)
	}
	// The control: with a token the server does wait for the message.
	md := map[string]string{"authorization": "Bearer " + tok}
	if code, msg, err := h2test.Call(lis.Addr().String(), "/grpc.health.v1.Health/Check", md, announce, 300*time.Millisecond); err == nil {
		t.Fatalf("authenticated call with a missing message answered %v %q; want it to wait for the message", code, msg)
	}
}

func TestGRPCServerOptions_RequireClientCert(t *testing.T) {
	ca := testcert.NewCA(t)
	srvCert := ca.Issue(t, "spiffe://tributary/server")
	// The listener asks for a certificate but accepts a handshake without
	// one: the per-call check is what refuses.
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool,
		ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12})
	g := grpc.NewServer(append(GRPCServerOptions(GRPCOptions{RequireClientCert: true}), grpc.Creds(creds))...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	defer g.Stop()
	check := func(cfg *tls.Config) error {
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		_, err = healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(&tls.Config{RootCAs: ca.Pool}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("call without a client certificate: %v; want Unauthenticated", err)
	}
	if err := check(&tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{ca.Issue(t, "spiffe://tributary/client")}}); err != nil {
		t.Errorf("call with a client certificate: %v", err)
	}
}

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr          string
		tls, insecure bool
		ok            bool
	}{
		{"127.0.0.1:7071", false, false, true},
		{"[::1]:7071", false, false, true},
		{"localhost:7071", false, false, true},
		{"0.0.0.0:7071", false, false, false},
		{":7071", false, false, false},
		{"192.168.1.10:7071", false, false, false},
		{"0.0.0.0:7071", true, false, true},
		{"0.0.0.0:7071", false, true, true},
		{"nonsense", false, false, false},
	} {
		err := CheckListen("--http-listen", tc.addr, tc.tls, tc.insecure)
		if (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q, tls=%v, insecure=%v) = %v", tc.addr, tc.tls, tc.insecure, err)
		}
	}
}

func TestTLSFiles(t *testing.T) {
	if cfg, err := (TLSFiles{}).ServerConfig(); cfg != nil || err != nil {
		t.Fatal("no files should mean no TLS")
	}
	if _, err := (TLSFiles{Cert: "a"}).ServerConfig(); err == nil {
		t.Fatal("cert without key accepted")
	}
	if _, err := (TLSFiles{ClientCA: "ca"}).ServerConfig(); err == nil {
		t.Fatal("client CA without server cert accepted")
	}
	if _, err := (TLSFiles{Cert: "/nonexistent/c", Key: "/nonexistent/k"}).ServerConfig(); err == nil || !strings.Contains(err.Error(), "load key pair") {
		t.Fatalf("missing files: %v", err)
	}
}

func TestGRPCServerOptions_NoTokenServicesSkipOnlyTheToken(t *testing.T) {
	g := grpc.NewServer(GRPCServerOptions(GRPCOptions{Tokens: NewTokens(tok),
		NoTokenServices: []string{healthpb.Health_ServiceDesc.ServiceName}})...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	defer g.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health without a token: %v", err)
	}
	// Another method of the same server still needs one.
	err = cc.Invoke(context.Background(), "/grpc.health.v1.HealthX/Check", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("other service without a token: %v, want Unauthenticated", err)
	}
	for m, want := range map[string]bool{"/grpc.health.v1.Health/Check": true, "/grpc.health.v1.Health/Watch": true,
		"/grpc.health.v1.HealthX/Check": false, "grpc.health.v1.Health/Check": false, "/grpc.health.v1.Health": false} {
		if got := (GRPCOptions{NoTokenServices: []string{"grpc.health.v1.Health"}}).noToken(m); got != want {
			t.Errorf("noToken(%q) = %v, want %v", m, got, want)
		}
	}
}
