package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/testcert"
	"go.etcd.io/raft/v3/raftpb"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// pki is a test CA issuing one certificate per member, each carrying the
// member's URI name; every certificate is valid for 127.0.0.1.
type pki struct {
	t    testing.TB
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tributary test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &pki{t: t, ca: ca, key: key, pool: pool}
}

func memberName(id uint64) string { return "spiffe://tributary/coordinator/" + string(rune('0'+id)) }

// issue makes the certificate of a member named name.
func (p *pki) issue(name string) tls.Certificate {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	u, err := url.Parse(name)
	if err != nil {
		p.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		URIs:        []*url.URL{u},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (p *pki) client(c tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c}, RootCAs: p.pool, MinVersion: tls.VersionTLS13}
}

func (p *pki) server(c tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c}, ClientCAs: p.pool, MinVersion: tls.VersionTLS13}
}

// sharedTLS returns client and server configurations from one testcert
// certificate, which all members share; its DNS name is "localhost".
func sharedTLS(t testing.TB) (client, server *tls.Config) {
	c := testcert.New(t)
	server = c.Server.Clone()
	server.ClientCAs = c.Pool
	client = &tls.Config{Certificates: c.Server.Certificates, RootCAs: c.Pool, MinVersion: tls.VersionTLS12}
	return client, server
}

// recorder is a Reporter and a Step target that remembers everything.
type recorder struct {
	mu          sync.Mutex
	msgs        []raftpb.Message
	unreachable map[uint64]int
	snaps       map[uint64][]bool
	stepErr     error
}

func newRecorder() *recorder {
	return &recorder{unreachable: map[uint64]int{}, snaps: map[uint64][]bool{}}
}

func (r *recorder) ReportUnreachable(id uint64) {
	r.mu.Lock()
	r.unreachable[id]++
	r.mu.Unlock()
}

func (r *recorder) ReportSnapshot(id uint64, ok bool) {
	r.mu.Lock()
	r.snaps[id] = append(r.snaps[id], ok)
	r.mu.Unlock()
}

func (r *recorder) step(m raftpb.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stepErr != nil {
		return r.stepErr
	}
	r.msgs = append(r.msgs, m)
	return nil
}

func (r *recorder) received() []raftpb.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]raftpb.Message(nil), r.msgs...)
}

func (r *recorder) unreachableCount(id uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unreachable[id]
}

func (r *recorder) snapReports(id uint64) []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]bool(nil), r.snaps[id]...)
}

// eventually polls cond until it holds; the deadline only bounds a hung
// test, it is not a performance assertion.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitABit() { time.Sleep(50 * time.Microsecond) }
