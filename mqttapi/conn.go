package mqttapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/packets"
)

// packetOverhead is what the Maximum Packet Size the broker is told adds
// to MaxPayloadBytes: the fixed header, the longest topic and some
// properties.
const packetOverhead = 5 + 2 + 65535 + 4096

// ErrPacketTooLarge is returned (wrapped) when the broker sends a packet
// larger than the Maximum Packet Size this client announced; the
// connection is closed rather than the packet read.
var ErrPacketTooLarge = errors.New("mqtt: packet larger than the announced maximum packet size")

// dial opens a connection to the broker (autopaho's AttemptConnection).
func (a *Adapter) dial(ctx context.Context, _ autopaho.ClientConfig, u *url.URL) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, a.o.ConnectTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	switch u.Scheme {
	case "tls", "ssl", "mqtts":
		cfg := a.o.TLS.Clone()
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		d := tls.Dialer{Config: cfg}
		conn, err = d.DialContext(ctx, "tcp", u.Host)
	default:
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", u.Host)
	}
	if err != nil {
		return nil, err // autopaho names the broker
	}
	// paho writes from several goroutines; a tls.Conn is not safe for
	// that on its own.
	return packets.NewThreadSafeConn(&limitConn{Conn: conn, max: uint32(a.o.MaxPayloadBytes + packetOverhead)}), nil
}

// limitConn follows the MQTT framing of what it reads and fails the read
// that would hand over the length of a packet larger than max, so that no
// packet larger than the announced Maximum Packet Size is ever allocated
// for (paho allocates what the length says). A conforming broker never
// sends one: it drops such a message instead (MQTT 5, 3.1.2.11.4).
type limitConn struct {
	net.Conn
	max uint32

	state     uint8  // 0 header byte, 1 length, 2 body
	length    uint32 // the length being read
	shift     uint
	remaining uint32 // body bytes still to come
}

func (c *limitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if serr := c.scan(p[:n]); serr != nil {
		return 0, serr
	}
	return n, err
}

// scan advances the framing state over b.
func (c *limitConn) scan(b []byte) error {
	for i := 0; i < len(b); {
		switch c.state {
		case 0:
			c.state, c.length, c.shift = 1, 0, 0
			i++
		case 1:
			v := b[i]
			i++
			c.length |= uint32(v&0x7f) << c.shift
			c.shift += 7
			if v&0x80 != 0 {
				if c.shift >= 28 {
					return fmt.Errorf("%w: malformed remaining length", ErrPacketTooLarge)
				}
				continue
			}
			if c.length+5 > c.max {
				return fmt.Errorf("%w: %d bytes, announced %d", ErrPacketTooLarge, c.length+5, c.max)
			}
			c.remaining, c.state = c.length, 2
			if c.remaining == 0 {
				c.state = 0
			}
		case 2:
			k := min(uint32(len(b)-i), c.remaining)
			i += int(k)
			if c.remaining -= k; c.remaining == 0 {
				c.state = 0
			}
		}
	}
	return nil
}
