package auth

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/testcert"
)

// TestClientCredentials_CheckTheIPAddressDialled: the server's certificate
// names 127.0.0.1 only; a server answering at 127.0.0.2 with it is refused
// through ClientCredentials, which the bare MutualTLS configuration alone
// (chain only, for an IP address) would accept.
func TestClientCredentials_CheckTheIPAddressDialled(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t)
	certFile, keyFile := testcert.WritePair(t, dir, "client", ca.Issue(t, "spiffe://test/client"))
	caFile := filepath.Join(dir, "ca.pem")
	testcert.WriteFile(t, caFile, ca.CertPEM())
	_, client, err := MutualTLS(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(host string) string {
		lis, err := tls.Listen("tcp", host+":0", &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "spiffe://test/server")}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
		if err != nil {
			t.Skipf("listen on %s: %v", host, err)
		}
		t.Cleanup(func() { lis.Close() })
		go func() {
			for {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				go func() { c.(*tls.Conn).Handshake(); time.Sleep(100 * time.Millisecond); c.Close() }()
			}
		}()
		return lis.Addr().String()
	}
	handshake := func(addr string) error {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _, err = ClientCredentials(client).ClientHandshake(ctx, addr, conn)
		return err
	}
	if err := handshake(serve("127.0.0.1")); err != nil {
		t.Fatalf("the address the certificate names: %v", err)
	}
	err = handshake(serve("127.0.0.2"))
	if err == nil || !strings.Contains(err.Error(), "does not name the address dialled") {
		t.Fatalf("a server at an address its certificate does not name: %v", err)
	}
}
