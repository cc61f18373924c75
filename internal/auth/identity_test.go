package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed PEM certificate with the given names.
func writeCert(t *testing.T, cn string, dns []string, uris ...string) (string, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	for _, u := range uris {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, p)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cert.pem")
	// A key block first: the leaf is the first CERTIFICATE block.
	data := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}})
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, c
}

func TestCertIdentity_FirstDNSThenURIThenCommonName(t *testing.T) {
	cases := []struct {
		name, cn string
		dns      []string
		uris     []string
		want     string
	}{
		{"dns first", "cn", []string{"edge-1", "edge-2"}, []string{"spiffe://x/edge-3"}, "edge-1"},
		{"uri when no dns", "cn", nil, []string{"spiffe://x/edge-3", "spiffe://x/edge-4"}, "spiffe://x/edge-3"},
		{"common name last", "edge-5", nil, nil, "edge-5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, cert := writeCert(t, c.cn, c.dns, c.uris...)
			if got, err := CertIdentity(cert); err != nil || got != c.want {
				t.Fatalf("CertIdentity = %q, %v; want %q", got, err, c.want)
			}
			if got, err := CertFileIdentity(path); err != nil || got != c.want {
				t.Fatalf("CertFileIdentity = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	if _, cert := writeCert(t, "", nil); true {
		if _, err := CertIdentity(cert); err == nil {
			t.Fatal("a certificate naming nobody has an identity")
		}
	}
	bad := filepath.Join(t.TempDir(), "x.pem")
	os.WriteFile(bad, []byte("not pem"), 0o600)
	if _, err := CertFileIdentity(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("CertFileIdentity of a non-PEM file: %v", err)
	}
}
