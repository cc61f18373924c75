package auth

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tributarydb/tributary/internal/testcert"
)

// reloadIn is Reload restricted to the files under dir: the values
// other tests built stay registered until collected, and their files are
// gone.
func reloadIn(dir string) error {
	return reloadWhere(true, nil, func(name string) bool { return strings.Contains(name, dir) })
}

func reloadStat(kind string) ReloadStat {
	for _, s := range ReloadStats() {
		if s.Kind == kind {
			return s
		}
	}
	panic("no stats for " + kind)
}

func TestLoadTokens_FollowsTheFileAndKeepsTheOldOnAFailedReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	const first, second = "first-token-0123456789", "second-token-0123456789"
	testcert.WriteFile(t, path, []byte(first+"\n"))
	toks, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	withEnv := toks.With("env-token-0123456789")
	before := reloadStat(KindTokens)

	testcert.WriteFile(t, path, []byte("# rotated\n"+second+"\n"))
	if err := reloadIn(dir); err != nil {
		t.Fatal(err)
	}
	for _, ts := range []Tokens{toks, withEnv} {
		if ts.Valid(first) || !ts.Valid(second) || ts.First() != second {
			t.Fatalf("after the rotation: first valid %v, second valid %v, First %q", ts.Valid(first), ts.Valid(second), ts.First())
		}
	}
	if !withEnv.Valid("env-token-0123456789") {
		t.Fatal("the token given beside the file was lost")
	}

	for name, content := range map[string]string{"short token": "abc\n", "no token": "# empty\n"} {
		testcert.WriteFile(t, path, []byte(content))
		if err := reloadIn(dir); err == nil || !strings.Contains(err.Error(), "keeping the previous") {
			t.Fatalf("%s: reload error %v", name, err)
		}
		if !toks.Valid(second) || !toks.Enabled() {
			t.Fatalf("%s: a failed reload changed the tokens", name)
		}
	}
	os.Remove(path)
	if err := reloadIn(dir); err == nil || !toks.Valid(second) {
		t.Fatalf("missing file: reload error %v, old token valid %v", err, toks.Valid(second))
	}
	after := reloadStat(KindTokens)
	if after.Successes-before.Successes < 1 || after.Failures-before.Failures != 3 {
		t.Errorf("counters moved by %d successes, %d failures; want ≥1 and 3",
			after.Successes-before.Successes, after.Failures-before.Failures)
	}
	if after.LastSuccess.IsZero() {
		t.Error("no last success time")
	}
}

func TestWatch_ReloadsAChangedFileWithoutASignal(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "tokens")
	const first, second = "first-token-0123456789", "second-token-0123456789"
	testcert.WriteFile(t, path, []byte(first+"\n"))
	toks, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { Watch(ctx, 5*time.Millisecond, nil) })
	defer func() { cancel(); wg.Wait() }()
	testcert.WriteFile(t, path, []byte(second+"\n"))
	for deadline := time.Now().Add(5 * time.Second); !toks.Valid(second); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not pick up the new token file")
		}
	}
	if toks.Valid(first) {
		t.Fatal("the old token is still valid")
	}
}

// tlsEcho serves cfg on loopback, echoing what each connection sends.
func tlsEcho(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := tls.NewListener(raw, cfg)
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { io.Copy(c, c); c.Close() })
		}
	})
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return raw.Addr().String()
}

// echo sends a line over c and reads it back: with TLS 1.3 a server
// refuses a client certificate only after the client's handshake ended,
// so this is where such a refusal shows.
func echo(c *tls.Conn) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	_, err := io.ReadFull(c, buf)
	return err
}

// dialEcho connects with cfg and checks the connection with echo.
func dialEcho(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	if err := echo(c); err != nil {
		c.Close()
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

func poolOf(cas ...*testcert.CA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AppendCertsFromPEM(ca.CertPEM())
	}
	return p
}

func clientConfig(roots *x509.CertPool, cert tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

func TestServerConfig_RotatedCertificatesAndCAsApplyToNewConnections(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := testcert.NewCA(t), testcert.NewCA(t)
	certFile, keyFile := testcert.WritePair(t, dir, "server", ca1.Issue(t, "spiffe://test/server-1"))
	caFile := filepath.Join(dir, "client-ca.pem")
	testcert.WriteFile(t, caFile, ca1.CertPEM())
	cfg, err := TLSFiles{Cert: certFile, Key: keyFile, ClientCA: caFile}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := tlsEcho(t, cfg)
	oldClient := ca1.Issue(t, "spiffe://test/client-1")
	both := poolOf(ca1, ca2)
	established, err := dialEcho(t, addr, clientConfig(both, oldClient))
	if err != nil {
		t.Fatalf("before the rotation: %v", err)
	}

	// Rotate: a server certificate from the new CA, and only the new CA
	// trusted for clients.
	newServer := ca2.Issue(t, "spiffe://test/server-2")
	testcert.WritePair(t, dir, "server", newServer)
	testcert.WriteFile(t, caFile, ca2.CertPEM())
	if err := reloadIn(dir); err != nil {
		t.Fatal(err)
	}

	if _, err := dialEcho(t, addr, clientConfig(both, oldClient)); err == nil {
		t.Error("a client certificate of the removed CA was accepted after the reload")
	}
	c, err := dialEcho(t, addr, clientConfig(ca2.Pool, ca2.Issue(t, "spiffe://test/client-2")))
	if err != nil {
		t.Fatalf("new client after the rotation: %v", err)
	}
	if got := c.ConnectionState().PeerCertificates[0].Raw; !bytes.Equal(got, newServer.Certificate[0]) {
		t.Error("a new connection got the old server certificate")
	}
	if err := echo(established); err != nil {
		t.Errorf("the connection made before the rotation broke: %v", err)
	}
}

func TestServerConfig_SessionFromBeforeACARemovalIsNotResumed(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := testcert.NewCA(t), testcert.NewCA(t)
	certFile, keyFile := testcert.WritePair(t, dir, "server", ca1.Issue(t, "spiffe://test/server"))
	caFile := filepath.Join(dir, "client-ca.pem")
	testcert.WriteFile(t, caFile, ca1.CertPEM())
	cfg, err := TLSFiles{Cert: certFile, Key: keyFile, ClientCA: caFile}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := tlsEcho(t, cfg)
	client := clientConfig(ca1.Pool, ca1.Issue(t, "spiffe://test/client"))
	client.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	if _, err := dialEcho(t, addr, client); err != nil {
		t.Fatal(err)
	}
	c, err := dialEcho(t, addr, client)
	if err != nil || !c.ConnectionState().DidResume {
		t.Fatalf("the second connection did not resume its session (%v): the test proves nothing", err)
	}
	testcert.WriteFile(t, caFile, ca2.CertPEM())
	if err := reloadIn(dir); err != nil {
		t.Fatal(err)
	}
	if c, err := dialEcho(t, addr, client); err == nil {
		t.Fatalf("a client of the removed CA got in after the reload (resumed: %v)", c.ConnectionState().DidResume)
	}
}

func TestServerConfig_FailedReloadKeepsTheCertificateInUse(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t)
	served := ca.Issue(t, "spiffe://test/server")
	certFile, keyFile := testcert.WritePair(t, dir, "server", served)
	cfg, err := TLSFiles{Cert: certFile, Key: keyFile}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := tlsEcho(t, cfg)
	before := reloadStat(KindTLS)
	testcert.WriteFile(t, certFile, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"))
	if err := reloadIn(dir); err == nil || !strings.Contains(err.Error(), certFile) {
		t.Fatalf("reload of a broken certificate: %v", err)
	}
	os.Remove(keyFile)
	if err := reloadIn(dir); err == nil {
		t.Fatal("reload with the key missing succeeded")
	}
	c, err := dialEcho(t, addr, &tls.Config{RootCAs: ca.Pool})
	if err != nil {
		t.Fatalf("handshake after failed reloads: %v", err)
	}
	if !bytes.Equal(c.ConnectionState().PeerCertificates[0].Raw, served.Certificate[0]) {
		t.Error("the server certificate changed after failed reloads")
	}
	if got := reloadStat(KindTLS).Failures - before.Failures; got != 2 {
		t.Errorf("failures counted: %d, want 2", got)
	}
}

func TestMutualTLS_ClientFollowsItsFiles(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := testcert.NewCA(t), testcert.NewCA(t)
	// A server of the new CA that records the client certificate it saw.
	seen := make(chan []byte, 4)
	srv := &tls.Config{Certificates: []tls.Certificate{ca2.Issue(t, "spiffe://test/server")}, ClientCAs: poolOf(ca1, ca2),
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error { seen <- cs.PeerCertificates[0].Raw; return nil }}
	addr := tlsEcho(t, srv)

	certFile, keyFile := testcert.WritePair(t, dir, "edge", ca1.Issue(t, "spiffe://test/edge-old"))
	caFile := filepath.Join(dir, "ca.pem")
	testcert.WriteFile(t, caFile, ca1.CertPEM())
	_, client, err := MutualTLS(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dialEcho(t, addr, client); err == nil {
		t.Fatal("the client trusted a server of a CA it does not hold")
	}
	newCert := ca2.Issue(t, "spiffe://test/edge-new")
	testcert.WritePair(t, dir, "edge", newCert)
	testcert.WriteFile(t, caFile, ca2.CertPEM())
	if err := reloadIn(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := dialEcho(t, addr, client.Clone()); err != nil {
		t.Fatalf("after the reload: %v", err)
	}
	if got := <-seen; !bytes.Equal(got, newCert.Certificate[0]) {
		t.Error("the server saw the old client certificate")
	}
}

func TestMutualTLS_ClientChecksTheServerName(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t)
	addr := tlsEcho(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "spiffe://test/server")}, MinVersion: tls.VersionTLS12})
	certFile, keyFile := testcert.WritePair(t, dir, "client", ca.Issue(t, "spiffe://test/client"))
	caFile := filepath.Join(dir, "ca.pem")
	testcert.WriteFile(t, caFile, ca.CertPEM())
	_, client, err := MutualTLS(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	// The certificate names 127.0.0.1 only.
	named := client.Clone()
	named.ServerName = "coordinator.example"
	if _, err := dialEcho(t, addr, named); err == nil || !strings.Contains(err.Error(), "coordinator.example") {
		t.Errorf("a server not carrying the name dialled was accepted: %v", err)
	}
	if _, err := dialEcho(t, addr, client); err != nil {
		t.Errorf("dialling the IP address: %v", err)
	}
	other := testcert.NewCA(t)
	addr2 := tlsEcho(t, &tls.Config{Certificates: []tls.Certificate{other.Issue(t, "spiffe://test/server")}, MinVersion: tls.VersionTLS12})
	if _, err := dialEcho(t, addr2, client); err == nil {
		t.Error("a server of another CA was accepted")
	}
}

// TestMutualTLS_GRPCLinkSurvivesARotationOfTheCAAndBothCertificates drives
// what the cluster and intake links do: both ends built by MutualTLS, the
// client wrapped with an extra identity check as the raft transport does.
func TestMutualTLS_GRPCLinkSurvivesARotationOfTheCAAndBothCertificates(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := testcert.NewCA(t), testcert.NewCA(t)
	files := func(name string, ca *testcert.CA) (string, string, string) {
		cert, key := testcert.WritePair(t, dir, name, ca.Issue(t, "spiffe://test/"+name))
		caFile := filepath.Join(dir, name+"-ca.pem")
		testcert.WriteFile(t, caFile, ca.CertPEM())
		return cert, key, caFile
	}
	srvTLS, _, err := MutualTLS(files("coordinator", ca1))
	if err != nil {
		t.Fatal(err)
	}
	_, cliTLS, err := MutualTLS(files("edge", ca1))
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(srvTLS)))
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	defer g.Stop()
	var checked atomic.Int64
	dial := func() *grpc.ClientConn {
		cfg := cliTLS.Clone()
		prev := cfg.VerifyConnection
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if err := prev(cs); err != nil {
				return err
			}
			checked.Add(1)
			if cs.PeerCertificates[0].URIs[0].String() != "spiffe://test/coordinator" {
				return errors.New("not the coordinator")
			}
			return nil
		}
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	call := func(cc *grpc.ClientConn) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	established := dial()
	if err := call(established); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}
	files("coordinator", ca2)
	files("edge", ca2)
	if err := reloadIn(dir); err != nil {
		t.Fatal(err)
	}
	if err := call(dial()); err != nil {
		t.Fatalf("a new link after the rotation: %v", err)
	}
	if err := call(established); err != nil {
		t.Fatalf("the link made before the rotation: %v", err)
	}
	if n := checked.Load(); n != 2 {
		t.Errorf("the caller's identity check ran %d times, want 2", n)
	}
}
