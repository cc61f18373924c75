package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSFiles names the PEM files of a TLS listener. ClientCA, when set,
// makes the listener demand client certificates signed by it (mTLS).
type TLSFiles struct {
	Cert, Key, ClientCA string
}

// Enabled reports whether TLS is configured.
func (f TLSFiles) Enabled() bool { return f.Cert != "" || f.Key != "" }

// ServerConfig loads the files into a server TLS configuration (TLS 1.2 or
// newer). It returns nil, nil when TLS is not configured.
//
// The configuration follows the files (see Watch and Reload): each
// handshake uses the certificate, key and client CA bundle read last, by
// way of GetConfigForClient. A reload that fails keeps the previous files'
// material.
func (f TLSFiles) ServerConfig() (*tls.Config, error) {
	if !f.Enabled() {
		if f.ClientCA != "" {
			return nil, errors.New("tls: a client CA needs a server certificate and key too")
		}
		return nil, nil
	}
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("tls: both a certificate and a key file are required")
	}
	paths := []string{f.Cert, f.Key}
	if f.ClientCA != "" {
		paths = append(paths, f.ClientCA)
	}
	w, err := newWatched(KindTLS, "TLS certificate "+f.Cert, func() (*tlsMaterial, error) {
		return loadTLSMaterial(f.Cert, f.Key, f.ClientCA, "client CA")
	}, paths...)
	if err != nil {
		return nil, err
	}
	return serverConfig(w), nil
}

// MutualTLS loads a member's certificate and key and the CA that signs its
// peers into a server configuration that requires and verifies client
// certificates from that CA, and a client configuration that presents the
// certificate and trusts only that CA. Used for the links between
// coordinators and from edges to coordinators (mTLS both ways).
//
// Both configurations follow the files (see Watch and Reload): the server
// by way of GetConfigForClient, the client by way of GetClientCertificate
// and VerifyConnection, so new connections use the files read last while
// established ones keep working.
//
// NB: the client verifies the server's chain itself, in VerifyConnection,
// against the CA bundle read last (InsecureSkipVerify only turns off
// crypto/tls's verification against a fixed pool). It checks the host
// name when the address dialled is a name; for an IP address TLS carries
// no name to the verifier, so the chain alone is checked and the callers'
// identity checks (a member's name in its certificate) bind the peer.
func MutualTLS(certFile, keyFile, caFile string) (server, client *tls.Config, err error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, nil, errors.New("tls: a certificate, its key and a CA file are all required for mutual TLS")
	}
	w, err := newWatched(KindTLS, "TLS certificate "+certFile, func() (*tlsMaterial, error) {
		return loadTLSMaterial(certFile, keyFile, caFile, "CA")
	}, certFile, keyFile, caFile)
	if err != nil {
		return nil, nil, err
	}
	client = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // NB: verified in VerifyConnection; see above.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &w.load().cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error { return verifyServer(cs, w.load().pool) },
	}
	return serverConfig(w), client, nil
}

// tlsMaterial is one reading of a key pair and, optionally, a CA bundle.
type tlsMaterial struct {
	cert tls.Certificate
	pool *x509.CertPool // nil: no CA
	// server is what a server handshake uses: built once per reading.
	server *tls.Config
}

func loadTLSMaterial(certFile, keyFile, caFile, caWhat string) (*tlsMaterial, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load key pair %s / %s: %w", certFile, keyFile, err)
	}
	m := &tlsMaterial{cert: cert}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls: read %s: %w", caWhat, err)
		}
		m.pool = x509.NewCertPool()
		if !m.pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: %s %s holds no PEM certificate", caWhat, caFile)
		}
	}
	m.server = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if m.pool != nil {
		m.server.ClientCAs = m.pool
		m.server.ClientAuth = tls.RequireAndVerifyClientCert
	}
	// NB: a session resumed from a ticket issued before a reload is
	// verified again by crypto/tls against the ClientCAs of the handshake
	// (this configuration), so a removed CA also ends resumption.
	return m, nil
}

// serverConfig is the configuration handed to callers. Its own fields
// describe the material read first (so that callers may inspect them);
// every handshake takes the current material from GetConfigForClient.
func serverConfig(w *watched[tlsMaterial]) *tls.Config {
	first := w.load().server
	cfg := first.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return w.load().server, nil }
	return cfg
}

// verifyServer verifies a server's certificate chain against roots, and
// its name when the client sent one.
func verifyServer(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server presented no certificate")
	}
	opts := x509.VerifyOptions{
		Roots:         roots,
		DNSName:       cs.ServerName,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("tls: verify the server's certificate: %w", err)
	}
	return nil
}
