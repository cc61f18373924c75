package auth

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const tok = "s3cret-token-0123456789"

func TestTokens_HTTPForms(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	denied := 0
	h := NewTokens(tok).HTTP(ok, func(*http.Request) { denied++ }, "/ping")
	for _, tc := range []struct {
		name string
		set  func(*http.Request)
		path string
		want int
	}{
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }, "/write", 204},
		{"influx v2 token", func(r *http.Request) { r.Header.Set("Authorization", "Token "+tok) }, "/api/v2/write", 204},
		{"basic password", func(r *http.Request) { r.SetBasicAuth("telegraf", tok) }, "/write", 204},
		{"influx v1 p param", func(*http.Request) {}, "/write?u=x&p=" + tok, 204},
		{"open path", func(*http.Request) {}, "/ping", 204},
		{"missing", func(*http.Request) {}, "/write", 401},
		{"wrong", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, "/write", 401},
		{"prefix of token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok[:5]) }, "/write", 401},
		{"empty bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") }, "/write", 401},
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
	if denied != 4 {
		t.Errorf("denied %d requests, want 4", denied)
	}
	// No tokens: authentication off.
	if NewTokens("", " ").Enabled() {
		t.Fatal("blank tokens enable authentication")
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

func TestTokens_GRPC(t *testing.T) {
	denied := 0
	g := grpc.NewServer(NewTokens(tok).ServerOptions(func(string) { denied++ })...)
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
	}{{"", codes.Unauthenticated}, {"Bearer wrong", codes.Unauthenticated}, {"Bearer " + tok, codes.OK}} {
		ctx := context.Background()
		if tc.md != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tc.md)
		}
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if status.Code(err) != tc.want {
			t.Errorf("authorization %q: %v, want %v", tc.md, err, tc.want)
		}
	}
	if denied != 2 {
		t.Errorf("denied = %d, want 2", denied)
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
