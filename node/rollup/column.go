package rollup

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/tributarydb/tributary/internal/binread"
)

// Int column kinds (see the package doc).
const (
	intDelta byte = 0 // varint differences from the previous entry
	intPlain byte = 1 // varint entries
	intConst byte = 2 // one varint, every entry equal
)

// Float column schemes, the high nibble of the kind byte; the low nibble is
// the decimal exponent e.
const (
	floatXOR     byte = 0x00 // bits XOR the previous entry's bits, zero bytes trimmed
	floatDecimal byte = 0x10 // v = m / 10^e, m in an int column
	floatULP     byte = 0x20 // v = (m / 10^e) moved by r units in the last place
)

// maxDecimalExp is the largest decimal exponent a float column may use; 10^e
// is exact in a float64 up to e = 22, and the kind byte holds 4 bits of it.
const maxDecimalExp = 15

// maxExactInt bounds the mantissas the encoder tries: below 2^53 every
// integer converts to a float64 exactly.
const maxExactInt = 1 << 53

var pow10 = [maxDecimalExp + 1]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// intKind picks the shortest kind for xs and returns it with the column's
// encoded length, kind byte included. REQUIRES: len(xs) > 0.
func intKind(xs []int64) (kind byte, size int) {
	constant := true
	plain, delta := 0, 0
	var prev int64
	for _, x := range xs {
		constant = constant && x == xs[0]
		plain += binread.VarintLen(x)
		delta += binread.VarintLen(x - prev)
		prev = x
	}
	switch {
	case constant:
		return intConst, 1 + binread.VarintLen(xs[0])
	case delta <= plain:
		return intDelta, 1 + delta
	}
	return intPlain, 1 + plain
}

// appendInts appends xs as an int column of the shortest kind.
// Differences wrap around in two's complement, so every int64 survives.
func appendInts(dst []byte, xs []int64) []byte {
	kind, _ := intKind(xs)
	dst = append(dst, kind)
	switch kind {
	case intConst:
		return binary.AppendVarint(dst, xs[0])
	case intPlain:
		for _, x := range xs {
			dst = binary.AppendVarint(dst, x)
		}
		return dst
	}
	var prev int64
	for _, x := range xs {
		dst = binary.AppendVarint(dst, x-prev)
		prev = x
	}
	return dst
}

// xorLen is the length of the XOR entry for x: a header byte and the bytes
// left after trimming leading and trailing zero bytes.
func xorLen(x uint64) int {
	if x == 0 {
		return 1
	}
	return 1 + 8 - bits.LeadingZeros64(x)/8 - bits.TrailingZeros64(x)/8
}

// decimalOf returns the nearest m with v ≈ m/10^e and the distance from
// m/10^e to v in units in the last place (bit patterns as integers; the
// difference wraps, so adding it back is exact for any v). ok is false when
// v is not finite or |v·10^e| ≥ 2^53.
func decimalOf(v float64, e int) (m, r int64, ok bool) {
	s := v * pow10[e]
	if !(math.Abs(s) < maxExactInt) { // also false for NaN
		return 0, 0, false
	}
	m = int64(math.RoundToEven(s))
	r = int64(math.Float64bits(v) - math.Float64bits(float64(m)/pow10[e]))
	return m, r, true
}

// floatKind picks the scheme and exponent for vs: the shortest of xor,
// decimal at the smallest exact e, and decimal plus ulps at the best e below
// that found searching upward until the column stops shrinking.
// REQUIRES: 0 < len(vs) ≤ 32.
func floatKind(vs []float64) byte {
	kind, best := floatXOR, 1
	var prev uint64
	for _, v := range vs {
		b := math.Float64bits(v)
		best += xorLen(b ^ prev)
		prev = b
	}
	var m, r [32]int64
	n := len(vs)
	// Most tries fail at the first entry, so this search is cheap.
	exactE := maxDecimalExp + 1
exact:
	for e := 0; e <= maxDecimalExp; e++ {
		for j, v := range vs {
			var ok bool
			if m[j], r[j], ok = decimalOf(v, e); !ok {
				break exact // a larger e only makes |v·10^e| larger
			}
			if r[j] != 0 {
				continue exact
			}
		}
		if _, size := intKind(m[:n]); 1+size < best {
			kind, best = floatDecimal|byte(e), 1+size
		}
		exactE = e
		break
	}
	// The ulps shrink by about 3 bits per step of e while the mantissas grow
	// by as much, until the ulps are down to the rounding error of the values
	// (a sum of decimals); past that point the column only grows. NB: a sum
	// of 1-digit decimals may be "exact" at e = 13, far longer than at e = 1
	// with ulps.
	last := math.MaxInt
	for e := 0; e < exactE; e++ {
		for j, v := range vs {
			var ok bool
			if m[j], r[j], ok = decimalOf(v, e); !ok {
				return kind
			}
		}
		_, ms := intKind(m[:n])
		_, rs := intKind(r[:n])
		size := 1 + ms + rs
		if size >= last {
			break
		}
		last = size
		if size < best {
			kind, best = floatULP|byte(e), size
		}
	}
	return kind
}

// appendFloats appends vs as a float column of the shortest scheme.
// REQUIRES: 0 < len(vs) ≤ 32.
func appendFloats(dst []byte, vs []float64) []byte {
	kind := floatKind(vs)
	dst = append(dst, kind)
	if kind == floatXOR {
		var prev uint64
		for _, v := range vs {
			b := math.Float64bits(v)
			x := b ^ prev
			prev = b
			if x == 0 {
				dst = append(dst, 0)
				continue
			}
			t := bits.TrailingZeros64(x) / 8
			n := 8 - bits.LeadingZeros64(x)/8 - t
			dst = append(dst, byte(t<<4|n))
			for x >>= 8 * t; n > 0; n-- {
				dst = append(dst, byte(x))
				x >>= 8
			}
		}
		return dst
	}
	var m, r [32]int64
	e := int(kind & 0x0f)
	for j, v := range vs {
		m[j], r[j], _ = decimalOf(v, e)
	}
	dst = appendInts(dst, m[:len(vs)])
	if kind&0xf0 == floatULP {
		dst = appendInts(dst, r[:len(vs)])
	}
	return dst
}

// The readers below take b and the index i of the next unread byte and
// return the index after what they read. A failed read returns an index
// past len(b), which every later read passes on and the caller checks once
// per column: no read goes out of bounds, and garbage costs at most one
// pass over b.

// readUvarintSlow reads one uvarint of any length. The column loops read
// the common one- and two-byte entries inline before calling it: a call per
// entry costs more than all the rest of the decoding.
func readUvarintSlow(b []byte, i int) (uint64, int) {
	if len(b)-i >= 8 {
		// Up to 8 bytes without a branch per byte: find the first byte
		// without the continuation bit, then gather the 7-bit groups.
		w := binary.LittleEndian.Uint64(b[i:])
		if ends := ^w & 0x8080_8080_8080_8080; ends != 0 {
			n := bits.TrailingZeros64(ends)/8 + 1
			w &= math.MaxUint64 >> (64 - 8*n)
			u := w&0x7f | w>>1&(0x7f<<7) | w>>2&(0x7f<<14) | w>>3&(0x7f<<21) |
				w>>4&(0x7f<<28) | w>>5&(0x7f<<35) | w>>6&(0x7f<<42) | w>>7&(0x7f<<49)
			return u, i + n
		}
	}
	var u uint64
	for s := uint(0); s < 64 && i < len(b); s += 7 {
		c := b[i]
		i++
		if s == 63 && c > 1 {
			break // more than 64 bits
		}
		u |= uint64(c&0x7f) << s
		if c < 0x80 {
			return u, i
		}
	}
	return 0, len(b) + 1
}

// unzigzag undoes the zigzag mapping of binary.AppendVarint.
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// readInts reads an int column of len(out) entries into out.
func readInts(b []byte, i int, out []int64) int {
	if i >= len(b) {
		return len(b) + 1
	}
	kind := b[i]
	i++
	switch kind {
	case intDelta, intPlain:
		// carry keeps the last value under each delta (all ones) or
		// drops it for plain values (zero).
		var x, carry int64
		if kind == intDelta {
			carry = -1
		}
		for j := range out {
			var u uint64
			if i < len(b) && b[i] < 0x80 {
				u, i = uint64(b[i]), i+1
			} else if i+1 < len(b) && b[i+1] < 0x80 {
				u, i = uint64(b[i]&0x7f)|uint64(b[i+1])<<7, i+2
			} else {
				u, i = readUvarintSlow(b, i)
			}
			x = x&carry + unzigzag(u)
			out[j] = x
		}
	case intConst:
		var u uint64
		u, i = readUvarintSlow(b, i)
		x := unzigzag(u)
		for j := range out {
			out[j] = x
		}
	default:
		return len(b) + 1
	}
	return i
}

// readFloats reads a float column of len(out) entries into out.
// REQUIRES: len(out) ≤ 32.
func readFloats(b []byte, i int, out []float64) int {
	if i >= len(b) {
		return len(b) + 1
	}
	kind := b[i]
	i++
	e := kind & 0x0f
	switch kind & 0xf0 {
	case floatXOR:
		if e != 0 {
			return len(b) + 1
		}
		var prev uint64
		for j := range out {
			if i >= len(b) {
				return len(b) + 1
			}
			t, n := int(b[i]>>4), int(b[i]&0x0f)
			i++
			if t+n > 8 || (n == 0 && t != 0) || len(b)-i < n {
				return len(b) + 1
			}
			var x uint64
			if len(b)-i >= 8 {
				// One load instead of n; Go defines a shift by 64 as 0.
				x = binary.LittleEndian.Uint64(b[i:]) & (math.MaxUint64 >> (64 - 8*n))
			} else {
				for k := n - 1; k >= 0; k-- {
					x = x<<8 | uint64(b[i+k])
				}
			}
			i += n
			prev ^= x << (8 * t)
			out[j] = math.Float64frombits(prev)
		}
	case floatDecimal:
		var m [32]int64
		i = readInts(b, i, m[:len(out)])
		p := pow10[e]
		for j := range out {
			out[j] = float64(m[j]) / p
		}
	case floatULP:
		var m, d [32]int64
		i = readInts(b, i, m[:len(out)])
		i = readInts(b, i, d[:len(out)])
		p := pow10[e]
		for j := range out {
			out[j] = math.Float64frombits(math.Float64bits(float64(m[j])/p) + uint64(d[j]))
		}
	default:
		return len(b) + 1
	}
	return i
}
