// Package connlimit caps the connections a listener holds open: in total
// and per remote IP address. A gRPC server keeps every accepted connection
// (and its buffers and goroutines) until the peer goes away, so without a
// cap one host opening connections and leaving them idle, or leaving TLS
// handshakes half done, makes a server hold memory without bound.
//
// Listener wraps a net.Listener. Accept hands on a connection only while
// both caps have room; a connection over a cap is closed at once, counted,
// and Accept waits for the next one (it never returns an error for a
// refusal, which would make grpc.Server.Serve back off or stop). Closing an
// accepted connection frees its place; closing it twice frees it once.
//
// Concurrency: Accept, Stats, Close (the underlying listener's) and the
// accepted connections' Close may be called from any goroutine.
package connlimit

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Limits are the caps of one listener. Zero means no cap.
type Limits struct {
	// MaxConns caps the connections open at once.
	MaxConns int
	// MaxConnsPerIP caps the connections open at once from one remote
	// IP address.
	MaxConnsPerIP int
}

// Validate rejects negative caps.
func (l Limits) Validate() error {
	if l.MaxConns < 0 || l.MaxConnsPerIP < 0 {
		return fmt.Errorf("connection limits: negative cap (MaxConns %d, MaxConnsPerIP %d)", l.MaxConns, l.MaxConnsPerIP)
	}
	return nil
}

// Stats are a Listener's counters.
type Stats struct {
	Open          int    // connections open now
	Accepted      uint64 // connections handed on since Listen
	RefusedTotal  uint64 // closed at once: MaxConns reached
	RefusedPerIP  uint64 // closed at once: MaxConnsPerIP reached for their address
	PeakOpen      int    // the most connections open at once
	AddressesOpen int    // remote addresses with a connection open now
}

// Listener is a net.Listener with connection caps; see the package doc.
type Listener struct {
	net.Listener
	lim Limits
	// onRefuse, when not nil, is called (without locks held) for every
	// connection closed because of a cap.
	onRefuse func(remote net.Addr, reason string)

	mu    sync.Mutex
	open  int            // REQUIRES: mu held
	peak  int            // REQUIRES: mu held
	perIP map[string]int // REQUIRES: mu held

	accepted, refusedTotal, refusedPerIP atomic.Uint64
}

// Listen wraps l with the caps of lim (which must be valid). onRefuse may
// be nil.
func Listen(l net.Listener, lim Limits, onRefuse func(remote net.Addr, reason string)) *Listener {
	return &Listener{Listener: l, lim: lim, onRefuse: onRefuse, perIP: map[string]int{}}
}

// Accept returns the next connection within the caps.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c.RemoteAddr())
		reason := l.take(ip)
		if reason == "" {
			l.accepted.Add(1)
			return &conn{Conn: c, l: l, ip: ip}, nil
		}
		// NB: closing without reading leaves the peer a reset or an EOF;
		// nothing of it is buffered.
		c.Close()
		if l.onRefuse != nil {
			l.onRefuse(c.RemoteAddr(), reason)
		}
	}
}

// take reserves a place for a connection from ip, or says which cap is
// reached.
func (l *Listener) take(ip string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.lim.MaxConns > 0 && l.open >= l.lim.MaxConns:
		l.refusedTotal.Add(1)
		return fmt.Sprintf("%d connections open, the listener's cap", l.open)
	case l.lim.MaxConnsPerIP > 0 && l.perIP[ip] >= l.lim.MaxConnsPerIP:
		l.refusedPerIP.Add(1)
		return fmt.Sprintf("%d connections open from %s, the cap per address", l.perIP[ip], ip)
	}
	l.open++
	l.peak = max(l.peak, l.open)
	l.perIP[ip]++
	return ""
}

func (l *Listener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

// Stats returns the counters.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.open, PeakOpen: l.peak, AddressesOpen: len(l.perIP),
		Accepted: l.accepted.Load(), RefusedTotal: l.refusedTotal.Load(), RefusedPerIP: l.refusedPerIP.Load()}
}

// conn frees its place in the listener once, on the first Close.
type conn struct {
	net.Conn
	l    *Listener
	ip   string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}

// NetConn returns the wrapped connection (for code that looks through
// wrappers, as crypto/tls and grpc do for diagnostics).
func (c *conn) NetConn() net.Conn { return c.Conn }

// remoteIP is the address part of a remote address (the whole string when
// it has no port).
func remoteIP(a net.Addr) string {
	if a == nil {
		return ""
	}
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
