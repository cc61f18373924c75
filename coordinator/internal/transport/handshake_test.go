package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
)

// TestServer_FailedHandshakesAreCounted: a certificate of another CA, a
// connection closed before the handshake and one that never speaks are
// each counted as a failed handshake, none as an admitted stream.
func TestServer_FailedHandshakesAreCounted(t *testing.T) {
	cl := startClusterListener(t, func(o *ServerOptions) { o.HandshakeTimeout = 300 * time.Millisecond })
	want := uint64(0)
	waitFailed := func(what string) {
		t.Helper()
		want++
		deadline := time.Now().Add(5 * time.Second)
		for cl.srv.Stats().HandshakesFailed < want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: HandshakesFailed = %d, want %d", what, cl.srv.Stats().HandshakesFailed, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// A stranger's certificate: the listener's CA does not verify it.
	stranger := newPKI(t)
	conn := cl.dial(t, stranger.issue(memberName(2)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := storeOK(ctx, conn); err == nil {
		t.Fatal("a certificate of another CA was served")
	}
	waitFailed("certificate of another CA")

	// A port probe: connect and close.
	c, err := net.Dial("tcp", cl.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitFailed("connection closed before the handshake")

	// A client that connects and says nothing: the handshake times out.
	c, err = net.Dial("tcp", cl.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFailed("silent connection")

	if st := cl.srv.Stats(); st.RefusedAtAdmission != 0 || st.Received != 0 {
		t.Fatalf("failed handshakes reached admission or raft: %+v", st)
	}
}

// TestWatchHandshakes_Reasons: real TLS server handshakes end with the
// reason the failure deserves.
func TestWatchHandshakes_Reasons(t *testing.T) {
	p := newPKI(t)
	type failure struct {
		reason string
		err    error
	}
	got := make(chan failure, 1)
	creds := WatchHandshakes(credentials.NewTLS(RequireClientCert(p.server(p.issue(memberName(1))))),
		func(_ net.Addr, reason string, err error) { got <- failure{reason, err} })
	lis, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	cases := []struct {
		name, want string
		client     func(net.Conn)
	}{
		{"closed at once", HandshakeClosed, func(c net.Conn) { c.Close() }},
		{"silent", HandshakeTimeout, func(net.Conn) {}},
		{"stranger's certificate", HandshakeRejected, func(c net.Conn) {
			stranger := newPKI(t)
			cfg := stranger.client(stranger.issue(memberName(2)))
			cfg.InsecureSkipVerify = true // the client accepts the server; the server must refuse the client
			tc := tls.Client(c, cfg)
			tc.Handshake()
			tc.Read(make([]byte, 1)) // TLS 1.3: the server's verdict on the client arrives after the client's Finished
		}},
	}
	for _, tc := range cases {
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := lis.Accept()
		if err != nil {
			t.Fatal(err)
		}
		s.SetDeadline(time.Now().Add(300 * time.Millisecond))
		go tc.client(c)
		if _, _, err := creds.ServerHandshake(s); err == nil {
			t.Fatalf("%s: handshake succeeded", tc.name)
		}
		f := <-got
		if f.reason != tc.want {
			t.Errorf("%s: reason %q (%v), want %q", tc.name, f.reason, f.err, tc.want)
		}
		c.Close()
		s.Close()
	}
	if _, ok := creds.Clone().(watched); !ok {
		t.Error("Clone lost the watch")
	}
}

// TestHandshakeReason classifies errors of the kinds a handshake ends with.
func TestHandshakeReason(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	a.SetDeadline(time.Now().Add(-time.Second))
	_, err := a.Read(make([]byte, 1))
	if got := handshakeReason(err); got != HandshakeTimeout {
		t.Errorf("deadline: %q, want %q", got, HandshakeTimeout)
	}
	a.Close()
	_, err = b.Read(make([]byte, 1))
	if got := handshakeReason(err); got != HandshakeClosed {
		t.Errorf("peer closed (%v): %q, want %q", err, got, HandshakeClosed)
	}
	if got := handshakeReason(errors.New("tls: bad certificate")); got != HandshakeRejected {
		t.Errorf("bad certificate: %q, want %q", got, HandshakeRejected)
	}
}
