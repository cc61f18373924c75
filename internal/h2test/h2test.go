// Package h2test speaks just enough HTTP/2 to send gRPC requests whose
// frames a test controls: a message header announcing bytes that never
// come, a message split at a chosen byte, frames of several streams
// interleaved. The grpc-go client cannot be made to do these things, and
// they are what a hostile client does.
//
// A Conn is not safe for concurrent use.
package h2test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

// Conn is a client HTTP/2 connection.
type Conn struct {
	c   net.Conn
	fr  *http2.Framer
	hb  bytes.Buffer
	enc *hpack.Encoder
}

// Dial connects to addr in plaintext and sends the connection preface.
func Dial(addr string) (*Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewConn(c)
}

// NewConn sends the client preface and settings on c (plaintext or TLS
// with "h2" negotiated).
func NewConn(c net.Conn) (*Conn, error) {
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		c.Close()
		return nil, err
	}
	hc := &Conn{c: c, fr: http2.NewFramer(c, c)}
	hc.enc = hpack.NewEncoder(&hc.hb)
	hc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := hc.fr.WriteSettings(); err != nil {
		c.Close()
		return nil, err
	}
	return hc, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Headers opens stream (odd, increasing) as a gRPC call of path with the
// metadata md.
func (c *Conn) Headers(stream uint32, path string, md map[string]string, endStream bool) error {
	c.hb.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path},
		{":authority", "test"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for k, v := range md {
		c.enc.WriteField(hpack.HeaderField{Name: k, Value: v})
	}
	return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: c.hb.Bytes(), EndHeaders: true, EndStream: endStream})
}

// Data sends data on stream as one DATA frame.
func (c *Conn) Data(stream uint32, data []byte, endStream bool) error {
	return c.fr.WriteData(stream, endStream, data)
}

// Message returns a gRPC length-prefixed message holding body.
func Message(body []byte) []byte {
	n := len(body)
	return append([]byte{0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

// ErrNoStatus is returned by Status when the call's status did not
// arrive in time.
var ErrNoStatus = errors.New("h2test: no grpc-status before the deadline")

// Status reads frames until stream's trailers arrive and returns their
// grpc-status and grpc-message. Frames of other streams are skipped.
func (c *Conn) Status(stream uint32, timeout time.Duration) (codes.Code, string, error) {
	c.c.SetReadDeadline(time.Now().Add(timeout))
	defer c.c.SetReadDeadline(time.Time{})
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return 0, "", ErrNoStatus
			}
			return 0, "", err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame:
			return 0, "", fmt.Errorf("h2test: GOAWAY %v: %s", f.ErrCode, f.DebugData())
		case *http2.RSTStreamFrame:
			if f.StreamID == stream {
				return 0, "", fmt.Errorf("h2test: stream %d reset: %v", stream, f.ErrCode)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != stream {
				continue
			}
			if s := f.PseudoValue("status"); s != "" && s != "200" {
				return 0, "", fmt.Errorf("h2test: HTTP status %s", s)
			}
			if v := f.Fields; len(v) > 0 {
				for _, hf := range v {
					if hf.Name == "grpc-status" {
						n, err := strconv.Atoi(hf.Value)
						if err != nil {
							return 0, "", fmt.Errorf("h2test: grpc-status %q", hf.Value)
						}
						var msg string
						for _, m := range v {
							if m.Name == "grpc-message" {
								msg = m.Value
							}
						}
						return codes.Code(n), msg, nil
					}
				}
			}
		}
	}
}

// Call sends one request on a new plaintext connection to addr: headers
// with md, then data (not ending the stream), and returns its status.
func Call(addr, path string, md map[string]string, data []byte, timeout time.Duration) (codes.Code, string, error) {
	c, err := Dial(addr)
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	if err := c.Headers(1, path, md, false); err != nil {
		return 0, "", err
	}
	if err := c.Data(1, data, false); err != nil {
		return 0, "", err
	}
	return c.Status(1, timeout)
}
