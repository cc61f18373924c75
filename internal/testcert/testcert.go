// Package testcert makes throwaway TLS material for tests: a self-signed
// certificate for 127.0.0.1, ::1 and localhost that is its own CA, written
// to PEM files in a test's temporary directory (New), or a CA issuing one
// certificate per identity for mutual-TLS tests (NewCA).
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is one self-signed certificate and its key.
type Cert struct {
	// CertFile holds the certificate in PEM; it is also the CA file that
	// verifies it. KeyFile holds the private key in PEM.
	CertFile, KeyFile string
	// Pool trusts the certificate.
	Pool *x509.CertPool
	// Server is a server configuration presenting the certificate.
	Server *tls.Config
}

// New makes a certificate valid for an hour around now.
func New(t testing.TB) *Cert {
	t.Helper()
	key := newKey(t)
	tmpl := hourAroundNow(newSerial(t), "tributary test")
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	tmpl.DNSNames = []string{"localhost"}
	tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	der := sign(t, tmpl, key, tmpl, key)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	dir := t.TempDir()
	c := &Cert{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), Pool: x509.NewCertPool()}
	if err := os.WriteFile(c.CertFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.KeyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c.Pool.AppendCertsFromPEM(certPEM)
	c.Server = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return c
}

// CA is a throwaway certificate authority issuing one certificate per
// identity, for tests of mutual TLS where identities must differ.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// Pool trusts the CA.
	Pool *x509.CertPool
}

// NewCA makes a CA valid for an hour around now.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := hourAroundNow(big.NewInt(1), "tributary test CA")
	tmpl.KeyUsage = x509.KeyUsageCertSign
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	cert, err := x509.ParseCertificate(sign(t, tmpl, key, tmpl, key))
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	return ca
}

// Issue makes a client-and-server certificate for 127.0.0.1 whose identity
// is the URI name (for example "spiffe://tributary/coordinator/1"), also
// used as its common name.
func (ca *CA) Issue(t testing.TB, name string) tls.Certificate {
	t.Helper()
	u, err := url.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca.issue(t, name, func(c *x509.Certificate) { c.URIs = []*url.URL{u} })
}

// IssueDNS makes a client-and-server certificate for 127.0.0.1 whose
// identity is the DNS name (for example "coord-1", a node id), also used
// as its common name.
func (ca *CA) IssueDNS(t testing.TB, name string) tls.Certificate {
	t.Helper()
	return ca.issue(t, name, func(c *x509.Certificate) { c.DNSNames = []string{name} })
}

func (ca *CA) issue(t testing.TB, name string, identity func(*x509.Certificate)) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := hourAroundNow(newSerial(t), name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	identity(tmpl)
	der := sign(t, tmpl, key, ca.cert, ca.key)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// newKey makes a P-256 key.
func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// newSerial makes a random certificate serial number.
func newSerial(t testing.TB) *big.Int {
	t.Helper()
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	return serial
}

// hourAroundNow starts a certificate template valid for an hour around now.
func hourAroundNow(serial *big.Int, commonName string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
}

// sign returns the DER of tmpl's certificate for key, signed by parent's
// parentKey (tmpl and key themselves for a self-signed one).
func sign(t testing.TB, tmpl *x509.Certificate, key *ecdsa.PrivateKey, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// CertPEM returns the CA's certificate in PEM: the content of a CA bundle
// file that trusts it.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// WritePair writes an issued certificate and its key to NAME.pem and
// NAME.key in dir and returns the two paths. It writes each file under a
// temporary name and renames it, as a secret volume or a careful operator
// replaces certificates.
func WritePair(t testing.TB, dir, name string, c tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	var certPEM []byte
	for _, der := range c.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	key, ok := c.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("testcert: WritePair: key is %T, want *ecdsa.PrivateKey", c.PrivateKey)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	WriteFile(t, certFile, certPEM)
	WriteFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	return certFile, keyFile
}

// WriteFile replaces path with data by writing a temporary file beside it
// and renaming it over path.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
