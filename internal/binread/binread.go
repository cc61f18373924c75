// Package binread reads the primitives of the project's small binary
// records (varints, bytes, little-endian words, length-prefixed byte
// strings, item counts) from a byte slice, with a sticky first error: after
// a problem every read returns a zero value, and Err or Done says what the
// problem was. Counts and lengths are checked against the bytes left, so
// that a damaged or hostile count never sizes an allocation larger than
// the input.
//
// A Reader is not safe for concurrent use. It never copies: byte strings
// it returns alias the input. UvarintLen and VarintLen say how long a
// varint's encoding is, for the writers of those records.
package binread

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Reader reads from a byte slice.
type Reader struct {
	b   []byte
	err error
}

// New returns a Reader of b.
func New(b []byte) *Reader { return &Reader{b: b} }

// Err returns the first problem, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records err as the problem unless there is one already: for checks
// of the values read that the caller makes.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Rest returns the bytes not read yet (nil after a problem).
func (r *Reader) Rest() []byte {
	if r.err != nil {
		return nil
	}
	return r.b
}

// Done returns the first problem, or an error if bytes are left unread.
func (r *Reader) Done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	return r.err
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 { return r.uvarint("uvarint") }

// Varint reads a signed (zig-zag) varint.
func (r *Reader) Varint() int64 {
	u := r.uvarint("varint")
	return int64(u>>1) ^ -int64(u&1)
}

// uvarint reads an unsigned varint; what names it in the error.
func (r *Reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("bad " + what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

// Uint32 reads a little-endian 32-bit word.
func (r *Reader) Uint32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// Count reads a uvarint count of items that take at least one byte each
// (what names them in the error): a count larger than the bytes left is a
// problem, so the count can size an allocation.
func (r *Reader) Count(what string) uint64 {
	n := r.Uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%s count %d exceeds the %d bytes left", what, n, len(r.b))
	}
	if r.err != nil {
		return 0
	}
	return n
}

// Bytes reads a uvarint length and that many bytes (what names them in
// the error). The result aliases the input, with its capacity clipped so
// that appending to it cannot overwrite what follows.
func (r *Reader) Bytes(what string) []byte {
	n := r.Uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("%s length %d runs past the end (%d bytes left)", what, n, len(r.b))
	}
	if r.err != nil {
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

// Next reads n bytes. The result aliases the input.
func (r *Reader) Next(n int) []byte { return r.take(n) }

// take returns the next n bytes, or nil (and a problem) if fewer are left.
func (r *Reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("unexpected end of input: %d bytes wanted, %d left", n, len(r.b))
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

// UvarintLen is the length of v's uvarint encoding (binary.AppendUvarint),
// for writers that size a record before they write it.
func UvarintLen(v uint64) int {
	// NB: 9/64 for 1/7: ceil(bits/7) for every bit count from 1 to 64,
	// without a division.
	return int(9*uint32(bits.Len64(v|1))+64) / 64
}

// VarintLen is the length of v's varint encoding (binary.AppendVarint).
func VarintLen(v int64) int { return UvarintLen(uint64(v<<1) ^ uint64(v>>63)) }
