// Package grpclimit gives a gRPC server per-method request size limits
// that hold before a message is buffered.
//
// grpc-go has one receive limit per server (grpc.MaxRecvMsgSize), checked
// against the length a message's 5-byte header announces; it then opens
// the flow-control window for that many bytes and buffers them before any
// interceptor runs. A server whose writes may be 64 MiB would therefore
// buffer a 64 MiB query request too. This package reads the server side of
// each connection as grpc-go does, just ahead of it: it follows the
// HTTP/2 frames, decodes each request's :path from its HEADERS (HPACK),
// and for a method with a limit looks at the request's message header as
// it passes.
//
// When a message of a limited method announces more than the method's
// limit, or arrives compressed (its decompressed size could reach the
// server-wide limit), its announced length is rewritten to 0xFFFFFFFF
// before grpc-go sees it: grpc-go then refuses the call with
// ResourceExhausted ("received message larger than max") without opening
// its window or reading its body, and resets the stream. The rewrite needs
// the four length bytes still in hand: when the client splits a message
// header across DATA frames and part of it has already been passed on,
// the guard counts the stream's bytes instead and closes the connection
// once they exceed the limit, so that a limited method's request never
// costs more than its limit either way.
//
// Byte layout followed (RFC 9113): the 24-byte client preface, then
// frames of a 9-byte header (24-bit length, type, flags, 31-bit stream
// id) and a payload. DATA payload: [pad length if PADDED] data [padding].
// HEADERS payload: [pad length if PADDED] [5 priority bytes if PRIORITY]
// header block fragment [padding]; CONTINUATION: fragment. A gRPC request
// body is a sequence of messages: 1 byte compressed flag, 4 bytes
// big-endian length, then that many bytes.
//
// Concurrency: a connection returned by Credentials is read by one
// goroutine at a time (grpc-go's reader), like any net.Conn; writes and
// Close pass straight through.
package grpclimit

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/credentials"
)

// Options configure Credentials.
type Options struct {
	// Limit returns the largest request message that method (its full
	// name, "/package.Service/Method") accepts, or 0 to leave the method
	// to the server's MaxRecvMsgSize. A limited method must not be
	// client-streaming: its request is one message.
	Limit func(method string) int
	// MaxHeaderListBytes bounds one decoded header field, as the
	// server's grpc.MaxHeaderListSize bounds a header list; a longer one
	// closes the connection. Default 64 KiB.
	MaxHeaderListBytes int
	// MaxTrackedStreams bounds the streams of one connection followed at
	// once (the oldest is forgotten past it). Default 1024.
	MaxTrackedStreams int
	// OnRefuse, when not nil, is called for each refused request with
	// its method. It runs on the connection's reader goroutine and must
	// not block.
	OnRefuse func(method string)
	Logger   *slog.Logger
}

// Validate fills in defaults; no value is refused (a limit of 0 or less
// is its default).
func (o *Options) Validate() error {
	if o.MaxHeaderListBytes <= 0 {
		o.MaxHeaderListBytes = 64 << 10
	}
	if o.MaxTrackedStreams <= 0 {
		o.MaxTrackedStreams = 1024
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.Limit == nil {
		o.Limit = func(string) int { return 0 }
	}
	return nil
}

// Credentials wraps a server's transport credentials (TLS, or insecure)
// so that every connection it accepts is guarded. Client handshakes pass
// through unchanged.
func Credentials(inner credentials.TransportCredentials, o Options) credentials.TransportCredentials {
	_ = o.Validate() // it refuses nothing
	return creds{TransportCredentials: inner, o: o}
}

type creds struct {
	credentials.TransportCredentials
	o Options
}

func (c creds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return newConn(conn, c.o), info, nil
}

func (c creds) Clone() credentials.TransportCredentials {
	return creds{TransportCredentials: c.TransportCredentials.Clone(), o: c.o}
}

// ErrRequestTooLarge is returned by a guarded connection's Read (and so
// closes it) when a limited method's request outgrew its limit and could
// not be refused on its own.
var ErrRequestTooLarge = errors.New("grpclimit: request larger than its method's limit")

// conn is a guarded server connection. Bytes are read from the inner
// connection into buf, parsed, and handed out; the few bytes of a message
// header that may still need rewriting are held back until the rest of it
// has arrived.
type conn struct {
	net.Conn
	p parser
	// buf[r:ready] may be returned; buf[ready:w] is parsed but held.
	buf         []byte
	r, ready, w int
	base        int64 // connection offset of buf[0]
	err         error // from the inner Read, returned once buf is drained
}

const bufSize = 32 << 10

func newConn(c net.Conn, o Options) *conn {
	g := &conn{Conn: c, buf: make([]byte, bufSize)}
	g.p.init(o, c.RemoteAddr())
	return g
}

func (c *conn) Read(b []byte) (int, error) {
	for c.r == c.ready {
		if c.err != nil {
			return 0, c.err
		}
		if c.r > 0 {
			n := copy(c.buf, c.buf[c.r:c.w])
			c.base += int64(c.r)
			c.ready -= c.r
			c.w = n
			c.r = 0
		}
		n, err := c.Conn.Read(c.buf[c.w:])
		if n > 0 {
			from := c.w
			c.w += n
			pin, perr := c.p.feed(c.buf[from:c.w], c.base+int64(from), c)
			if perr != nil {
				c.err = perr
				return 0, perr
			}
			c.ready = c.w
			if pin >= 0 {
				c.ready = int(pin - c.base)
			}
		}
		if err != nil {
			// Nothing more will come to complete a held header.
			c.ready = c.w
			c.err = err
		}
	}
	n := copy(b, c.buf[c.r:c.ready])
	c.r += n
	return n, nil
}

// held reports whether the byte at connection offset off has been read
// but not yet handed out.
func (c *conn) held(off int64) bool {
	return off >= c.base+int64(c.r) && off < c.base+int64(c.w)
}

// set rewrites the held byte at connection offset off.
func (c *conn) set(off int64, v byte) { c.buf[off-c.base] = v }

// buffer is what the parser may rewrite: *conn, or a test's.
type buffer interface {
	held(off int64) bool
	set(off int64, v byte)
}

// HTTP/2 frame types and flags used.
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20
)

const prefaceLen = 24 // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// parser phases.
const (
	inPreface = iota
	inFrameHeader
	inPayload
)

// payload segments.
const (
	segPadLength = iota
	segPriority
	segBody
	segPadding
)

// stream is a request of a limited method being followed.
type stream struct {
	id     uint32
	method string
	limit  int64
	got    int64    // data bytes received
	hdr    [5]byte  // the first message header
	at     [5]int64 // connection offsets of hdr's bytes
}

type parser struct {
	o      Options
	remote net.Addr
	dec    *hpack.Decoder

	phase   int
	skip    int // preface bytes left
	fh      [9]byte
	fhN     int
	typ     byte
	flags   byte
	id      uint32
	left    int // payload bytes left in the frame
	seg     int
	segLeft int // bytes left in seg (segPriority, segBody, segPadding)
	padLen  int

	// the header block being decoded
	blockID        uint32
	blockEndStream bool
	path           string
	pathSet        bool

	maxID   uint32
	streams map[uint32]*stream
}

func (p *parser) init(o Options, remote net.Addr) {
	p.o, p.remote = o, remote
	p.skip = prefaceLen
	p.streams = map[uint32]*stream{}
	p.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":path" && !p.pathSet {
			p.path, p.pathSet = f.Value, true
		}
	})
	p.dec.SetMaxStringLength(o.MaxHeaderListBytes)
}

// feed parses b, the bytes at connection offsets base.., rewriting held
// bytes through buf. It returns the offset from which bytes must be held
// back (-1: none).
func (p *parser) feed(b []byte, base int64, buf buffer) (int64, error) {
	i := 0
	for i < len(b) {
		switch p.phase {
		case inPreface:
			n := min(p.skip, len(b)-i)
			p.skip -= n
			i += n
			if p.skip == 0 {
				p.phase = inFrameHeader
			}
		case inFrameHeader:
			n := copy(p.fh[p.fhN:], b[i:])
			p.fhN += n
			i += n
			if p.fhN == len(p.fh) {
				p.fhN = 0
				p.startFrame()
				if p.left == 0 {
					if err := p.endFrame(); err != nil {
						return -1, err
					}
				}
			}
		case inPayload:
			n, err := p.payload(b[i:], base+int64(i), buf)
			if err != nil {
				return -1, err
			}
			i += n
			if p.left == 0 {
				if err := p.endFrame(); err != nil {
					return -1, err
				}
			}
		}
	}
	return p.pin(), nil
}

func (p *parser) startFrame() {
	p.left = int(p.fh[0])<<16 | int(p.fh[1])<<8 | int(p.fh[2])
	p.typ, p.flags = p.fh[3], p.fh[4]
	p.id = binary.BigEndian.Uint32(p.fh[5:9]) & 0x7fffffff
	p.phase = inPayload
	p.padLen = 0
	switch {
	case (p.typ == frameData || p.typ == frameHeaders) && p.flags&flagPadded != 0:
		p.seg, p.segLeft = segPadLength, 1
	case p.typ == frameHeaders && p.flags&flagPriority != 0:
		p.seg, p.segLeft = segPriority, 5
	default:
		p.seg, p.segLeft = segBody, p.left
	}
	if p.typ == frameHeaders {
		p.blockID, p.blockEndStream = p.id, p.flags&flagEndStream != 0
		p.path, p.pathSet = "", false
	}
}

// payload consumes payload bytes of the current frame from b (at least
// one) and returns how many.
func (p *parser) payload(b []byte, off int64, buf buffer) (int, error) {
	n := min(len(b), p.left, p.segLeft)
	switch p.seg {
	case segPadLength:
		p.padLen = int(b[0])
	case segBody:
		switch p.typ {
		case frameData:
			if s := p.streams[p.id]; s != nil {
				if err := p.data(s, b[:n], off, buf); err != nil {
					return 0, err
				}
			}
		case frameHeaders, frameContinuation:
			if _, err := p.dec.Write(b[:n]); err != nil {
				return 0, fmt.Errorf("grpclimit: decode the headers of stream %d: %w", p.id, err)
			}
		}
	}
	p.left -= n
	p.segLeft -= n
	if p.segLeft == 0 && p.left > 0 {
		p.nextSegment()
	}
	return n, nil
}

// nextSegment moves past a finished segment of the frame's payload.
func (p *parser) nextSegment() {
	switch p.seg {
	case segPadLength:
		if p.typ == frameHeaders && p.flags&flagPriority != 0 {
			p.seg, p.segLeft = segPriority, 5
			return
		}
		p.seg, p.segLeft = segBody, p.left-p.padLen
	case segPriority:
		p.seg, p.segLeft = segBody, p.left-p.padLen
	default:
		p.seg, p.segLeft = segPadding, p.left
		return
	}
	if p.segLeft < 0 {
		// Padding longer than the frame: grpc-go closes the
		// connection for it; skip the payload until then.
		p.seg, p.segLeft = segPadding, p.left
	} else if p.segLeft == 0 {
		p.seg, p.segLeft = segPadding, p.left
	}
}

func (p *parser) endFrame() error {
	p.phase = inFrameHeader
	switch p.typ {
	case frameHeaders, frameContinuation:
		if p.flags&flagEndHeaders != 0 {
			if err := p.dec.Close(); err != nil {
				return fmt.Errorf("grpclimit: decode the headers of stream %d: %w", p.blockID, err)
			}
			p.endHeaders()
		}
	case frameData:
		if p.flags&flagEndStream != 0 {
			delete(p.streams, p.id)
		}
	case frameRSTStream:
		delete(p.streams, p.id)
	}
	return nil
}

// endHeaders starts following a new request of a limited method.
func (p *parser) endHeaders() {
	id := p.blockID
	if id <= p.maxID || id%2 == 0 {
		// Trailers of a stream already seen (or a bad stream id).
		if p.blockEndStream {
			delete(p.streams, id)
		}
		return
	}
	p.maxID = id
	if p.blockEndStream || !p.pathSet {
		return
	}
	limit := p.o.Limit(p.path)
	if limit <= 0 {
		return
	}
	if len(p.streams) >= p.o.MaxTrackedStreams {
		oldest := id
		for sid := range p.streams {
			oldest = min(oldest, sid)
		}
		delete(p.streams, oldest)
	}
	p.streams[id] = &stream{id: id, method: p.path, limit: int64(limit)}
}

// data follows the data bytes d of stream s, at connection offsets off...
func (p *parser) data(s *stream, d []byte, off int64, buf buffer) error {
	if s.got < int64(len(s.hdr)) {
		k := min(len(s.hdr)-int(s.got), len(d))
		for j := range k {
			s.hdr[int(s.got)+j] = d[j]
			s.at[int(s.got)+j] = off + int64(j)
		}
		s.got += int64(k)
		d = d[k:]
		if s.got == int64(len(s.hdr)) {
			if refused, err := p.check(s, buf); refused || err != nil {
				return err
			}
		}
	}
	s.got += int64(len(d))
	if s.got > s.limit+int64(len(s.hdr)) {
		p.refuse(s, s.got, "it carries more than one message; the connection is closed")
		return fmt.Errorf("%w: %s", ErrRequestTooLarge, s.method)
	}
	return nil
}

// check looks at the first message header of s once complete, and
// refuses the request if it announces more than the limit or is
// compressed. It reports whether it refused it.
func (p *parser) check(s *stream, buf buffer) (bool, error) {
	announced := int64(binary.BigEndian.Uint32(s.hdr[1:]))
	compressed := s.hdr[0] != 0
	if !compressed && announced <= s.limit {
		return false, nil
	}
	why := "it announces more than the limit"
	if compressed {
		why = "it is compressed, and a limited method takes only uncompressed requests"
	}
	delete(p.streams, s.id)
	if !buf.held(s.at[1]) {
		// Part of the length was passed on already (the client split
		// the header across frames): the call cannot be refused alone.
		p.refuse(s, announced, why+"; its header was split across frames, so the connection is closed")
		return true, fmt.Errorf("%w: %s announced %d bytes", ErrRequestTooLarge, s.method, announced)
	}
	for _, at := range s.at[1:] {
		buf.set(at, 0xff)
	}
	p.refuse(s, announced, why)
	return true, nil
}

func (p *parser) refuse(s *stream, announced int64, why string) {
	p.o.Logger.Warn("gRPC request refused before it was read", "method", s.method, "bytes", announced,
		"limit_bytes", s.limit, "remote", p.remote, "reason", why)
	if p.o.OnRefuse != nil {
		p.o.OnRefuse(s.method)
	}
}

// pin returns the offset of the first byte to hold back: the length bytes
// of a limited request's message header whose rest is still to come in
// the same DATA frame (so it will come whatever flow control does).
func (p *parser) pin() int64 {
	if p.phase != inPayload || p.typ != frameData || p.seg != segBody || p.segLeft == 0 {
		return -1
	}
	s := p.streams[p.id]
	if s == nil || s.got < 2 || s.got >= int64(len(s.hdr)) {
		return -1
	}
	return s.at[1]
}
