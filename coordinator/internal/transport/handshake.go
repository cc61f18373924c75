package transport

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"google.golang.org/grpc/credentials"
)

// Handshake failure reasons, as WatchHandshakes reports them.
const (
	// HandshakeClosed: the client closed (or reset) the connection
	// before finishing the handshake: a port probe, a load balancer's
	// TCP check, a client that gave up.
	HandshakeClosed = "closed"
	// HandshakeTimeout: the handshake did not finish within the
	// listener's handshake timeout.
	HandshakeTimeout = "timeout"
	// HandshakeRejected: the TLS exchange failed: no certificate, one no
	// CA of the listener verifies, an expired one, no common protocol.
	HandshakeRejected = "rejected"
)

// WatchHandshakes wraps server credentials so that every failed
// handshake is reported to onFail with the client's address, a reason
// (HandshakeClosed, HandshakeTimeout or HandshakeRejected) and the error.
// gRPC closes such connections without a word to the log; a listener
// that is being refused by a misconfigured client, or probed by a
// stranger, must show it.
func WatchHandshakes(inner credentials.TransportCredentials, onFail func(remote net.Addr, reason string, err error)) credentials.TransportCredentials {
	return watched{TransportCredentials: inner, onFail: onFail}
}

type watched struct {
	credentials.TransportCredentials
	onFail func(net.Addr, string, error)
}

func (w watched) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := w.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		w.onFail(raw.RemoteAddr(), handshakeReason(err), err)
	}
	return conn, info, err
}

func (w watched) Clone() credentials.TransportCredentials {
	return watched{TransportCredentials: w.TransportCredentials.Clone(), onFail: w.onFail}
}

// handshakeReason classifies a handshake error.
func handshakeReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return HandshakeTimeout
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return HandshakeClosed
	default:
		return HandshakeRejected
	}
}
