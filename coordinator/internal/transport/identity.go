package transport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
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
