package replicator_test

import (
	"crypto/tls"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tributarydb/tributary/internal/testcert"
)

// TestShipper_MutualTLS: the edge presents its own certificate, which the
// coordinator verifies; without one it cannot ship.
func TestShipper_MutualTLS(t *testing.T) {
	server, edge := testcert.New(t), testcert.New(t)
	srvTLS := server.Server.Clone()
	srvTLS.ClientAuth = tls.RequireAndVerifyClientCert
	srvTLS.ClientCAs = edge.Pool
	c := newCloud(t)
	in := startIntake(t, "coord-a", c, grpc.Creds(credentials.NewTLS(srvTLS)))
	w := openWAL(t, "pi-7")
	want := sealN(t, w, 2)

	o := options(t, cursorPath(t), in.addr)
	o.Insecure = false
	o.TLS = &tls.Config{RootCAs: server.Pool, Certificates: edge.Server.Certificates, MinVersion: tls.VersionTLS12}
	s := newShipper(t, o)
	start(t, s, w)
	eventually(t, "every segment acknowledged", func() bool { return s.Stats().AckedThrough == want[1].Seq })
	checkHeldOnce(t, c, "pi-7", want)
	if cn, _ := in.clientCert.Load().(string); cn != "tributary test" {
		t.Fatalf("coordinator saw client certificate %q", cn)
	}

	// The same edge without its certificate is refused at the handshake.
	c2 := newCloud(t)
	in2 := startIntake(t, "coord-b", c2, grpc.Creds(credentials.NewTLS(srvTLS)))
	o2 := options(t, cursorPath(t), in2.addr)
	o2.Insecure = false
	o2.TLS = &tls.Config{RootCAs: server.Pool, MinVersion: tls.VersionTLS12}
	s2 := newShipper(t, o2)
	start(t, s2, w)
	eventually(t, "a failed attempt", func() bool { return s2.Stats().SessionFailures >= 2 })
	if st := s2.Stats(); st.AckedThrough != 0 || st.Connected {
		t.Fatalf("shipped without a client certificate: %+v", st)
	}
}
