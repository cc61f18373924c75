package auth

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// CertIdentity is the identity a certificate gives its holder: its first
// DNS subject alternative name, else its first URI SAN, else its common
// name. The coordinators take an edge's identity from its client
// certificate this way (the edge may ship only its own segments), and an
// edge checks at start that its certificate names its node id.
func CertIdentity(c *x509.Certificate) (string, error) {
	switch {
	case len(c.DNSNames) > 0:
		return c.DNSNames[0], nil
	case len(c.URIs) > 0:
		return c.URIs[0].String(), nil
	case c.Subject.CommonName != "":
		return c.Subject.CommonName, nil
	}
	return "", errors.New("the certificate names nobody (no SAN, no common name)")
}

// CertFileIdentity returns the CertIdentity of the first certificate of a
// PEM file (the leaf of a chain).
func CertFileIdentity(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read certificate: %w", err)
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return "", fmt.Errorf("certificate %s: no PEM CERTIFICATE block", path)
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return "", fmt.Errorf("certificate %s: %w", path, err)
		}
		id, err := CertIdentity(c)
		if err != nil {
			return "", fmt.Errorf("certificate %s: %w", path, err)
		}
		return id, nil
	}
}
