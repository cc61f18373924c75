// Package netlimit bounds the connections a listener holds: in all, and
// per client address. A connection over either bound is closed as soon as
// it is accepted, before a byte of it is read (and before a TLS handshake
// could cost anything), and counted.
//
// The per-address bound groups IPv4 clients by address and IPv6 clients
// by /64 prefix (one host usually holds a whole /64). Clients behind one
// NAT or proxy share its address: size MaxConnsPerIP for the largest such
// group.
//
// Concurrency: a Listener is safe for concurrent use; Accept may be called
// from several goroutines and connections closed from any.
package netlimit

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Reasons a connection is refused, as passed to Options.OnRefuse.
const (
	ReasonListenerFull = "listener_full" // MaxConns reached
	ReasonPerIP        = "per_ip"        // MaxConnsPerIP reached for the client's address
)

// Options bound a listener.
type Options struct {
	// MaxConns bounds the connections open at once; 0: no bound.
	MaxConns int
	// MaxConnsPerIP bounds the connections open at once from one client
	// address (IPv6: one /64); 0: no bound.
	MaxConnsPerIP int
	// OnRefuse, when not nil, is called for each refused connection with
	// its remote address and Reason*; it must not block.
	OnRefuse func(remote net.Addr, reason string)
}

// Validate checks the options.
func (o Options) Validate() error {
	if o.MaxConns < 0 || o.MaxConnsPerIP < 0 {
		return errors.New("netlimit: connection limits must not be negative")
	}
	return nil
}

// Listener wraps a net.Listener with the bounds of Options.
type Listener struct {
	net.Listener
	o Options

	mu    sync.Mutex
	open  int                // REQUIRES: mu held
	peak  int                // REQUIRES: mu held
	perIP map[netip.Addr]int // REQUIRES: mu held; only non-zero counts

	accepted, refusedFull, refusedPerIP atomic.Uint64
}

// Stats are a Listener's counters.
type Stats struct {
	Open          int    // connections open now
	PeakOpen      int    // the most connections open at once
	AddressesOpen int    // client addresses (IPv6: /64s) with a connection open now
	Accepted      uint64 // connections handed on since Wrap
	RefusedFull   uint64 // closed at once: MaxConns reached
	RefusedPerIP  uint64 // closed at once: MaxConnsPerIP reached for their address
}

// Stats returns the counters.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.open, PeakOpen: l.peak, AddressesOpen: len(l.perIP), Accepted: l.accepted.Load(),
		RefusedFull: l.refusedFull.Load(), RefusedPerIP: l.refusedPerIP.Load()}
}

// Wrap returns l bounded by o.
func Wrap(l net.Listener, o Options) (*Listener, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Listener{Listener: l, o: o, perIP: map[netip.Addr]int{}}, nil
}

// Accept returns the next connection within the bounds; connections over
// them are closed and counted without returning.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, keyed := clientKey(c.RemoteAddr())
		if reason := l.admit(key, keyed); reason != "" {
			if reason == ReasonPerIP {
				l.refusedPerIP.Add(1)
			} else {
				l.refusedFull.Add(1)
			}
			// Reported before the close, so that whoever sees the close
			// (a client, a test) finds the refusal counted and reported.
			if l.o.OnRefuse != nil {
				l.o.OnRefuse(c.RemoteAddr(), reason)
			}
			c.Close()
			continue
		}
		l.accepted.Add(1)
		return &conn{Conn: c, release: func() { l.release(key, keyed) }}, nil
	}
}

// Open returns the number of connections open through l.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

func (l *Listener) admit(key netip.Addr, keyed bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.o.MaxConns > 0 && l.open >= l.o.MaxConns {
		return ReasonListenerFull
	}
	if keyed && l.o.MaxConnsPerIP > 0 && l.perIP[key] >= l.o.MaxConnsPerIP {
		return ReasonPerIP
	}
	l.open++
	l.peak = max(l.peak, l.open)
	if keyed {
		l.perIP[key]++
	}
	return ""
}

func (l *Listener) release(key netip.Addr, keyed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if keyed {
		if l.perIP[key] <= 1 {
			delete(l.perIP, key)
		} else {
			l.perIP[key]--
		}
	}
}

// clientKey is the address a connection is counted under: its IP, or for
// IPv6 its /64. keyed is false when the address is not an IP (a Unix
// socket), which only the listener-wide bound applies to.
func clientKey(a net.Addr) (netip.Addr, bool) {
	var ip netip.Addr
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	default:
		ap, err := netip.ParseAddrPort(a.String())
		if err != nil {
			return netip.Addr{}, false
		}
		ip = ap.Addr()
	}
	if !ip.IsValid() {
		return netip.Addr{}, false
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, err := ip.Prefix(64)
		if err != nil {
			return netip.Addr{}, false
		}
		ip = p.Addr()
	}
	return ip, true
}

// conn releases its slot once, on the first Close.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn returns the wrapped connection (for code that looks through
// wrappers, as crypto/tls and grpc do for diagnostics).
func (c *conn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection when the wrapped one can (TCP):
// net/http uses it to let a client read a refusal before the connection
// closes under its upload.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
