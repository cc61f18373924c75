package transport

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/tributarydb/tributary/internal/testcert"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// pki is a test CA issuing one certificate per member, each carrying the
// member's URI name; every certificate is valid for 127.0.0.1.
type pki struct {
	t    testing.TB
	ca   *testcert.CA
	pool *x509.CertPool
}

func newPKI(t testing.TB) *pki {
	ca := testcert.NewCA(t)
	return &pki{t: t, ca: ca, pool: ca.Pool}
}

func memberName(id uint64) string { return "spiffe://tributary/coordinator/" + string(rune('0'+id)) }

// issue makes the certificate of a member named name.
func (p *pki) issue(name string) tls.Certificate { return p.ca.Issue(p.t, name) }

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
