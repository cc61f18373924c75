package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// caPEM makes a self-signed CA certificate for key, named cn, with serial.
func caPEM(t *testing.T, key *ecdsa.PrivateKey, cn string, serial int64) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Duration(serial) * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSharedCAs_ComparesCertificatesNotFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, parts ...[]byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, slices.Concat(parts...), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	peerKey, edgeKey := newKey(t), newKey(t)
	peer := caPEM(t, peerKey, "cluster CA", 1)
	edge := caPEM(t, edgeKey, "edge CA", 1)
	comment := []byte("# a comment line before the block\n")
	key := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}})
	cases := map[string]struct {
		a, b string
		want []string
	}{
		"separate CAs":                {write("p1", peer), write("e1", edge), nil},
		"the same file twice":         {write("p2", peer), write("p2", peer), []string{"CN=cluster CA"}},
		"a copy at another path":      {write("p3", peer), write("e3", comment, peer), []string{"CN=cluster CA"}},
		"the CA inside a bundle":      {write("p4", peer), write("e4", edge, key, peer), []string{"CN=cluster CA"}},
		"re-issued with the same key": {write("p5", peer), write("e5", caPEM(t, peerKey, "cluster CA", 2)), []string{"CN=cluster CA"}},
		"same name, another key":      {write("p6", peer), write("e6", caPEM(t, newKey(t), "cluster CA", 1)), nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := SharedCAs(tc.a, tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("SharedCAs = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := SharedCAs(write("k", key), write("p7", peer)); err == nil {
		t.Error("a bundle without certificates was accepted")
	}
	if _, err := SharedCAs(filepath.Join(dir, "missing"), write("p8", peer)); err == nil {
		t.Error("a missing file was accepted")
	}
	if _, err := SharedCAs(write("bad", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")})), write("p9", peer)); err == nil {
		t.Error("a malformed certificate was accepted")
	}
}
