package auth

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// SharedCAs reads two PEM CA bundles and returns the subjects of the
// certificates they have in common, in the order of fileA: certificates
// with the same subject and the same public key verify the same
// certificates, so a CA re-issued with a new validity or serial counts as
// the same CA. The files themselves (paths, order, other certificates,
// comments) do not matter.
func SharedCAs(fileA, fileB string) ([]string, error) {
	a, err := readCerts(fileA)
	if err != nil {
		return nil, err
	}
	b, err := readCerts(fileB)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ca := range a {
		for _, cb := range b {
			if bytes.Equal(ca.RawSubject, cb.RawSubject) && bytes.Equal(ca.RawSubjectPublicKeyInfo, cb.RawSubjectPublicKeyInfo) {
				out = append(out, ca.Subject.String())
				break
			}
		}
	}
	return out, nil
}

// readCerts parses every CERTIFICATE block of a PEM file.
func readCerts(file string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	var out []*x509.Certificate
	for n := 1; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA bundle %s: PEM block %d: %w", file, n, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", file)
	}
	return out, nil
}
