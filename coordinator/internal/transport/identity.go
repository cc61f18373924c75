package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"google.golang.org/grpc/credentials"
	grpcpeer "google.golang.org/grpc/peer"
)

// certHasName reports whether the certificate carries name as a DNS or URI
// subject alternative name.
func certHasName(c *x509.Certificate, name string) bool {
	if name == "" {
		return false
	}
	for _, d := range c.DNSNames {
		if d == name {
			return true
		}
	}
	for _, u := range c.URIs {
		if u.String() == name {
			return true
		}
	}
	return false
}

// checkIdentity checks the verified leaf certificate of a TLS connection
// against a member's name.
func checkIdentity(cs tls.ConnectionState, id uint64, name string) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("member %d presented no certificate", id)
	}
	if !certHasName(cs.PeerCertificates[0], name) {
		return fmt.Errorf("certificate of member %d does not carry its name %q as a DNS or URI SAN", id, name)
	}
	return nil
}

// clientTLS is cfg with an extra check that the server is member id.
func clientTLS(cfg *tls.Config, id uint64, name string) *tls.Config {
	return withServerCheck(cfg, func(cs tls.ConnectionState) error { return checkIdentity(cs, id, name) })
}

// withServerCheck is cfg with check run after the usual verification.
func withServerCheck(cfg *tls.Config, check func(tls.ConnectionState) error) *tls.Config {
	c := cfg.Clone()
	prev := c.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if prev != nil {
			if err := prev(cs); err != nil {
				return err
			}
		}
		return check(cs)
	}
	return c
}

// AuthorizeMember checks that the caller of a cluster-internal RPC presented
// a verified client certificate carrying the name of a current member:
// names lists the names of the members allowed. It returns the name it
// matched. Without TLS on the connection (an insecure server) it fails.
func AuthorizeMember(ctx context.Context, names []string) (string, error) {
	p, ok := grpcpeer.FromContext(ctx)
	if !ok {
		return "", errors.New("no peer information on the call")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return "", errors.New("the caller presented no verified client certificate")
	}
	for _, n := range names {
		if certHasName(ti.State.PeerCertificates[0], n) {
			return n, nil
		}
	}
	return "", errors.New("the caller's certificate names no current member")
}

// VerifyServerName returns cfg with an extra check that the server's
// certificate carries name (a member's node id), for cluster-internal
// clients other than the raft transport.
func VerifyServerName(cfg *tls.Config, name string) *tls.Config {
	return withServerCheck(cfg, func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 || !certHasName(cs.PeerCertificates[0], name) {
			return fmt.Errorf("server certificate does not carry the name %q", name)
		}
		return nil
	})
}
