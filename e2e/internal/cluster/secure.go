package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/internal/loopback"
	"github.com/tributarydb/tributary/internal/testcert"
)

// PKI is the TLS material and the token of a fleet run as production runs
// it (Options.Security):
//
//   - two CAs: the peer CA signs the coordinators' certificates (the
//     cluster listener trusts it alone: --peer-ca; edges verify the
//     intake with it: --replicate-ca), the edge CA signs the edges'
//     (the intake trusts it alone: --edge-ca);
//   - one certificate per process naming its id (DNS SAN, and 127.0.0.1),
//     used on its mutual-TLS links and on its client listeners
//     (--tls-cert);
//   - one token file on every process (--token-file), which the
//     coordinators also send to edges they query (--edge-token-file).
//
// The CA bundle files and the certificates can be rewritten while the
// fleet runs (WriteBundles, Issue), as an operator rotates them; the
// processes read them again on their reload poll or on SIGHUP. The test's
// own clients (ClientTLS) trust every CA the PKI ever made.
//
// Its methods are safe for concurrent use.
type PKI struct {
	t   testing.TB
	Dir string
	// PeerCAFile and EdgeCAFile are the CA bundles the processes are
	// given.
	PeerCAFile, EdgeCAFile string
	TokenFile, Token       string
	// ReloadInterval, when not zero, is every process's
	// --credentials-reload-interval.
	ReloadInterval time.Duration

	mu         sync.Mutex
	peer, edge *testcert.CA // REQUIRES: mu held; the issuers of new certificates
	trusted    *x509.CertPool
}

// NewPKI makes the two CAs, writes their bundles (one CA each) and a token
// file under dir.
func NewPKI(t testing.TB, dir string) *PKI {
	t.Helper()
	p := &PKI{t: t, Dir: dir, PeerCAFile: filepath.Join(dir, "peer-ca.pem"), EdgeCAFile: filepath.Join(dir, "edge-ca.pem"),
		TokenFile: filepath.Join(dir, "tokens"), Token: "e2e-token-0123456789abcdef", trusted: x509.NewCertPool()}
	p.peer, p.edge = p.NewCA(), p.NewCA()
	p.WriteBundles([]*testcert.CA{p.peer}, []*testcert.CA{p.edge})
	testcert.WriteFile(t, p.TokenFile, []byte(p.Token+"\n"))
	return p
}

// NewCA makes a CA that the test's clients trust from now on.
func (p *PKI) NewCA() *testcert.CA {
	ca := testcert.NewCA(p.t)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trusted.AppendCertsFromPEM(ca.CertPEM())
	return ca
}

// CAs returns the current issuers.
func (p *PKI) CAs() (peer, edge *testcert.CA) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peer, p.edge
}

// SetCAs makes peer and edge the issuers of the next certificates.
func (p *PKI) SetCAs(peer, edge *testcert.CA) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peer, p.edge = peer, edge
}

// WriteBundles replaces the CA bundle files: the peer bundle holds the
// CAs of peer, the edge bundle those of edge.
func (p *PKI) WriteBundles(peer, edge []*testcert.CA) {
	bundle := func(cas []*testcert.CA) []byte {
		var b []byte
		for _, ca := range cas {
			b = append(b, ca.CertPEM()...)
		}
		return b
	}
	testcert.WriteFile(p.t, p.PeerCAFile, bundle(peer))
	testcert.WriteFile(p.t, p.EdgeCAFile, bundle(edge))
}

// IsCoordinator says whether a process name is a coordinator's (c1, c2,
// ...), whose certificate the peer CA signs.
func IsCoordinator(name string) bool {
	return len(name) > 1 && name[0] == 'c' && strings.Trim(name[1:], "0123456789") == ""
}

// Issue (re)writes the certificate and key of process name, signed by the
// current peer or edge CA, and returns their files.
func (p *PKI) Issue(name string) (certFile, keyFile string) {
	peer, edge := p.CAs()
	ca := edge
	if IsCoordinator(name) {
		ca = peer
	}
	return testcert.WritePair(p.t, p.Dir, name, ca.IssueDNS(p.t, name))
}

// Files returns the certificate and key files of process name.
func (p *PKI) Files(name string) (certFile, keyFile string) {
	return filepath.Join(p.Dir, name+".pem"), filepath.Join(p.Dir, name+".key")
}

func (p *PKI) commonArgs(name string) []string {
	cert, key := p.Issue(name)
	args := []string{"--tls-cert", cert, "--tls-key", key, "--token-file", p.TokenFile}
	if p.ReloadInterval != 0 {
		args = append(args, "--credentials-reload-interval", p.ReloadInterval.String())
	}
	return args
}

func (p *PKI) coordinatorArgs(id string) []string {
	cert, key := p.Files(id)
	return append(p.commonArgs(id), "--peer-cert", cert, "--peer-key", key,
		"--peer-ca", p.PeerCAFile, "--edge-ca", p.EdgeCAFile, "--edge-token-file", p.TokenFile)
}

func (p *PKI) edgeArgs(id string) []string {
	cert, key := p.Files(id)
	return append(p.commonArgs(id), "--replicate-cert", cert, "--replicate-key", key, "--replicate-ca", p.PeerCAFile)
}

// ClientTLS is the configuration of the test's own clients: it verifies a
// server's chain against every CA the PKI made (the listeners are dialled
// by IP address, so no name is checked) and presents no certificate.
func (p *PKI) ClientTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// NB: verification is done by VerifyConnection against the pool as
		// it is at the handshake, so that CAs made later are trusted.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server presented no certificate")
			}
			p.mu.Lock()
			roots := p.trusted.Clone()
			p.mu.Unlock()
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		},
	}
}

// Client is how the test's clients reach the fleet's client listeners.
func (p *PKI) Client() Client { return Client{TLS: p.ClientTLS(), Token: p.Token} }

// Client is how a test reaches a client listener: TLS (nil: plaintext)
// and a bearer token ("": none).
type Client struct {
	TLS   *tls.Config
	Token string
}

// DialOptions are the gRPC options that apply c.
func (c Client) DialOptions() []grpc.DialOption {
	var opts []grpc.DialOption
	if c.TLS != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(c.TLS)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if c.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(c.Token)))
	}
	return opts
}

// bearer sends a token as gRPC metadata.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// URL is the URL of path on the HTTP listener at addr.
func (c Client) URL(addr, path string) string {
	if c.TLS != nil {
		return "https://" + addr + path
	}
	return "http://" + addr + path
}

// NewRequest makes a GET of path on the HTTP listener at addr, with the
// token.
func (c Client) NewRequest(ctx context.Context, addr, path string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(addr, path), nil)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// HTTPClient is an HTTP client for c's listeners.
func (c Client) HTTPClient() *http.Client {
	hc := &http.Client{Timeout: 10 * time.Second}
	if c.TLS != nil {
		hc.Transport = &http.Transport{TLSClientConfig: c.TLS}
	}
	return hc
}

// Metrics scrapes GET /metrics at httpAddr and returns the samples whose
// metric name starts with prefix.
func (c Client) Metrics(ctx context.Context, httpAddr, prefix string) (map[string]float64, error) {
	req, err := c.NewRequest(ctx, httpAddr, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", httpAddr, err)
	}
	hc := c.HTTPClient()
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", httpAddr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: read: %w", httpAddr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics of %s: %s", httpAddr, resp.Status)
	}
	return parseMetrics(string(body), prefix)
}

// Client is how the test reaches the fleet's client listeners.
func (c *Cluster) Client() Client {
	if c.Opts.Security == nil {
		return Client{}
	}
	return c.Opts.Security.Client()
}

func (c *Cluster) newRequest(ctx context.Context, addr, path string) (*http.Request, error) {
	return c.Client().NewRequest(ctx, addr, path)
}

// AddEdge lays out one more edge shipping to targets (nil: the
// coordinators' intakes), with the fleet's options; it is not started.
func (c *Cluster) AddEdge(id string, targets []string) (*Edge, error) {
	addrs, err := loopback.FreePorts(2)
	if err != nil {
		return nil, err
	}
	if targets == nil {
		for _, co := range c.Coordinators {
			targets = append(targets, co.Intake)
		}
	}
	e := c.newEdge(id, addrs[0], addrs[1], targets)
	c.More = append(c.More, e)
	return e, nil
}

// Signal sends sig to the running process (SIGHUP: read certificates,
// keys, CA bundles and token files again).
func (p *Process) Signal(sig os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("signal %s: not running", p.Name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %s: %w", p.Name, err)
	}
	return nil
}
