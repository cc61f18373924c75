package hostilebench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/tributarydb/tributary/internal/hostile"
)

// ca is a throwaway certificate authority valid for a day.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate in PEM: a CA bundle
}

func newCA(dir, name string) (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make CA %s: %w", name, err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tribench hostile " + name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("make CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("make CA %s: %w", name, err)
	}
	c := &ca{cert: cert, key: key, file: filepath.Join(dir, name+".pem")}
	if err := os.WriteFile(c.file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("write CA %s: %w", name, err)
	}
	return c, nil
}

// issue writes a certificate for name (its DNS SAN and common name, and
// 127.0.0.1) and its key to NAME.crt and NAME.key in dir.
func (c *ca) issue(dir, name string) (hostile.CertFiles, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return hostile.CertFiles{}, fmt.Errorf("issue %s: %w", name, err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return hostile.CertFiles{}, fmt.Errorf("issue %s: %w", name, err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{name}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return hostile.CertFiles{}, fmt.Errorf("issue %s: %w", name, err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return hostile.CertFiles{}, fmt.Errorf("issue %s: %w", name, err)
	}
	f := hostile.CertFiles{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	if err := os.WriteFile(f.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return hostile.CertFiles{}, fmt.Errorf("issue %s: %w", name, err)
	}
	if err := os.WriteFile(f.Key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return hostile.CertFiles{}, fmt.Errorf("issue %s: %w", name, err)
	}
	return f, nil
}
