package tunnel

// Conn adapts a stream to a net.Conn: Read returns the payloads of the
// received messages in order, Write sends its bytes in messages of at most
// MaxChunkBytes, Close ends the stream. Listener yields one Conn once, for
// grpc.Server.Serve.
//
// Concurrency: one Read and one Write may run at the same time (as
// net.Conn requires of its users, concurrent Reads and concurrent Writes
// are serialized), and Close may be called at any time from any goroutine;
// it unblocks a pending Read or Write through the cancel function the
// owner of the stream provides. Deadlines are not supported: the Set*
// methods accept and ignore them, and the owner bounds the stream's life
// with its context instead.

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// MaxChunkBytes bounds the payload of one message Write sends.
const MaxChunkBytes = 64 << 10

// Stream is one side of a tunnel's gRPC stream reduced to its payloads.
// Send may keep p: Conn hands it a fresh slice each time.
type Stream interface {
	Send(p []byte) error
	Recv() ([]byte, error)
}

// Addr names one end of a tunnel.
type Addr string

// Network returns "tunnel".
func (Addr) Network() string { return "tunnel" }

func (a Addr) String() string { return string(a) }

// Conn is a net.Conn over a Stream. Create it with NewConn.
type Conn struct {
	s             Stream
	cancel        func()
	local, remote net.Addr

	rmu  sync.Mutex
	rbuf []byte // REQUIRES: rmu held; received bytes not read yet

	wmu sync.Mutex

	endOnce sync.Once
	done    chan struct{}
	mu      sync.Mutex
	err     error // why the conn ended; REQUIRES: mu held
}

var _ net.Conn = (*Conn)(nil)

// NewConn returns a Conn over s. cancel ends the stream (it must make a
// pending Send or Recv return); Close calls it, and so does the end of the
// stream in either direction.
func NewConn(s Stream, cancel func(), local, remote net.Addr) *Conn {
	return &Conn{s: s, cancel: cancel, local: local, remote: remote, done: make(chan struct{})}
}

// end records why the conn ended (the first reason wins) and cancels the
// stream.
func (c *Conn) end(err error) {
	c.endOnce.Do(func() {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
		c.cancel()
	})
}

// Done is closed once the conn has ended: closed, or its stream failed or
// ended in either direction.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the conn ended: net.ErrClosed after Close, io.EOF after
// the peer ended the stream cleanly, else the stream's error. Nil while it
// has not ended.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Conn) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Read reads the received bytes, waiting for the next message when none
// are buffered.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for len(c.rbuf) == 0 {
		if c.ended() {
			return 0, c.readErr()
		}
		b, err := c.s.Recv()
		if err != nil {
			c.end(err)
			return 0, c.readErr()
		}
		c.rbuf = b
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

func (c *Conn) readErr() error {
	if err := c.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return io.EOF
}

// Write sends p in messages of at most MaxChunkBytes (copies: the caller
// may reuse p once Write returns).
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := 0
	for n < len(p) {
		if c.ended() {
			return n, net.ErrClosed
		}
		k := min(len(p)-n, MaxChunkBytes)
		if err := c.s.Send(append([]byte(nil), p[n:n+k]...)); err != nil {
			c.end(err)
			return n, err
		}
		n += k
	}
	return n, nil
}

// Close ends the conn and its stream. It never fails, and later calls do
// nothing.
func (c *Conn) Close() error {
	c.end(net.ErrClosed)
	return nil
}

// LocalAddr returns the local address given to NewConn.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the remote address given to NewConn.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline is accepted and ignored (see the package documentation).
func (c *Conn) SetDeadline(time.Time) error { return nil }

// SetReadDeadline is accepted and ignored.
func (c *Conn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline is accepted and ignored.
func (c *Conn) SetWriteDeadline(time.Time) error { return nil }

// Listener yields one connection once, then blocks in Accept until it is
// closed: a grpc.Server serving it serves exactly that connection.
type Listener struct {
	mu     sync.Mutex
	conn   net.Conn // REQUIRES: mu held; nil once accepted
	closed chan struct{}
	once   sync.Once
}

var _ net.Listener = (*Listener)(nil)

// NewListener returns a Listener yielding c.
func NewListener(c net.Conn) *Listener {
	return &Listener{conn: c, closed: make(chan struct{})}
}

// Accept returns the connection on the first call; later calls wait for
// Close and return net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.conn
	l.conn = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

// Close unblocks Accept. It does not close the connection it yielded.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr returns the local address of the connection.
func (l *Listener) Addr() net.Addr { return Addr("tunnel") }
