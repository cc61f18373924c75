package catalog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Bounds that every decoder enforces, so that hostile bytes cannot make it
// allocate more than a small multiple of the input's size.
const (
	// MaxIDBytes bounds a node id.
	MaxIDBytes = 128
	// MaxAddrBytes bounds an advertised address.
	MaxAddrBytes = 512
	// MaxIdentityBytes bounds a certificate identity.
	MaxIdentityBytes = 1024
	// MaxNodeLabels bounds the labels of a node.
	MaxNodeLabels = 32
	// MaxHeldRuns bounds the held sequence runs kept per edge: an edge
	// with more gaps than this must have old ranges forgotten first.
	MaxHeldRuns = 4096
	// MaxGapRuns bounds the recorded gaps kept per edge (after merging
	// adjacent gaps of the same reason).
	MaxGapRuns = 4096
	// MaxLackRuns bounds the runs a replica's Holding lists as lacking;
	// past it the two runs closest together are merged (the replica is
	// then taken to lack the numbers between them too, which is safe:
	// it is only read and repaired more).
	MaxLackRuns = 4096
	// MaxReplicationFactor bounds FleetConfig.ReplicationFactor.
	MaxReplicationFactor = 7
)

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func appendVarint(b []byte, v int64) []byte   { return binary.AppendVarint(b, v) }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendList appends the number of items and then every item, with
// appendItem: the layout of every list in the catalog formats.
func appendList[T any](b []byte, items []T, appendItem func([]byte, T) []byte) []byte {
	b = appendUvarint(b, uint64(len(items)))
	for _, it := range items {
		b = appendItem(b, it)
	}
	return b
}

// decodeList reads a list appendList wrote, whose items take at least
// minItemBytes each (what names them in errors; see count), reading each
// item with read until the first problem. The slice is never nil.
func decodeList[T any](d *decoder, what string, minItemBytes int, read func(*decoder) T) []T {
	n := d.count(what, minItemBytes)
	items := make([]T, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		items = append(items, read(d))
	}
	return items
}

// decoder reads the primitives of the catalog formats. The first problem
// sticks: every later read returns a zero value, and err says what was
// wrong and at which byte offset.
type decoder struct {
	b    []byte
	off  int
	what string // what is being decoded, for errors
	err  error
}

func (d *decoder) failf(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("decode %s: at byte %d: %s", d.what, d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.failf("unexpected end of input")
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

func (d *decoder) bool() bool {
	switch c := d.byte(); c {
	case 0:
		return false
	case 1:
		return true
	default:
		d.off--
		d.failf("boolean byte is %d, want 0 or 1", c)
		return false
	}
}

func (d *decoder) uvarint() uint64 { return readVarint(d, binary.Uvarint, "uvarint") }
func (d *decoder) varint() int64   { return readVarint(d, binary.Varint, "varint") }

// readVarint reads a number with read (binary.Uvarint or binary.Varint;
// kind names which, for errors), which must be minimally encoded.
func readVarint[T uint64 | int64](d *decoder, read func([]byte) (T, int), kind string) T {
	if d.err != nil {
		return 0
	}
	v, n := read(d.b[d.off:])
	if n <= 0 {
		d.failf("bad %s", kind)
		return 0
	}
	if n > 1 && d.b[d.off+n-1] == 0 {
		d.failf("%s is not minimally encoded", kind)
		return 0
	}
	d.off += n
	return v
}

// string reads a length-prefixed string of at most max bytes (what names
// the field in errors).
func (d *decoder) string(what string, max int) string {
	return string(d.lengthPrefixed(what, uint64(max)))
}

// bytes reads a length-prefixed byte string without copying.
func (d *decoder) bytes(what string) []byte {
	return d.lengthPrefixed(what, math.MaxUint64)
}

// lengthPrefixed reads a length-prefixed byte string of at most max bytes
// without copying (what names the field in errors).
func (d *decoder) lengthPrefixed(what string, max uint64) []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > max {
		d.failf("%s is %d bytes, limit is %d", what, n, max)
		return nil
	}
	if n > uint64(d.remaining()) {
		d.failf("%s length %d runs past the end (%d bytes left)", what, n, d.remaining())
		return nil
	}
	b := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return b
}

// count reads an item count and checks it against the bytes left, given
// that every item takes at least minItemBytes; this bounds the allocations
// a caller makes from the count.
func (d *decoder) count(what string, minItemBytes int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if minItemBytes < 1 {
		minItemBytes = 1
	}
	if n > uint64(d.remaining()/minItemBytes) || n > math.MaxInt32 {
		d.failf("%s count %d is more than the %d bytes left can hold", what, n, d.remaining())
		return 0
	}
	return int(n)
}

// keyOrder checks that the entries of a section come in strictly
// increasing order of their keys (edge or node ids, names), as written.
type keyOrder struct {
	what, prev string // what names the entries in errors
	seen       bool
}

// next accepts key if it comes after the previous one.
func (o *keyOrder) next(key string) error {
	if o.seen && key <= o.prev {
		return fmt.Errorf("%s %q not after %q", o.what, key, o.prev)
	}
	o.prev, o.seen = key, true
	return nil
}

func (d *decoder) finish() error {
	if d.err == nil && d.off != len(d.b) {
		d.failf("%d trailing bytes", len(d.b)-d.off)
	}
	return d.err
}
