package chunk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
)

// ErrCorrupt is wrapped by every error about malformed chunk bytes.
var ErrCorrupt = errors.New("chunk: corrupt")

// MaxSamples is the most samples a chunk holds. It bounds what a decoder
// allocates for a chunk whose samples cost no bits (a constant series at a
// regular interval).
const MaxSamples = 1 << 16

// The first byte: format version, a flag, and the value encoding.
const (
	formatVersion = 1
	versionShift  = 5
	flagRegular   = 1 << 4 // timestamps are evenly spaced: no timestamp stream
	encMask       = 1<<4 - 1
)

// Value encodings: the low nibble of the first byte.
const (
	valRaw     = 0 // 64 bits per value
	valXOR     = 1 // Gorilla XOR
	valDecimal = 2 // m/10^e with m an integer stream
	valConst   = 3 // one value, stored once
	numVal     = 4
)

// allEncodings lets Encode pick any value encoding.
const allEncodings = 1<<numVal - 1

// Encode appends the encoding of the samples to dst and returns it.
//
// REQUIRES: 1 <= len(ts) == len(vs) <= MaxSamples and ts strictly
// increasing; Encode panics otherwise (callers sort and dedupe first).
func Encode(dst []byte, ts []int64, vs []float64) []byte {
	return encode(dst, ts, vs, allEncodings)
}

// scratch is Encode's working memory, pooled between calls.
type scratch struct {
	ms   []int64  // decimal mantissas
	us   []uint64 // residuals
	plan planScratch
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// encode is Encode restricted to the value encodings in the bit set allow
// (tests use it to measure one encoding alone). valRaw is always allowed.
func encode(dst []byte, ts []int64, vs []float64, allow uint) []byte {
	n := len(ts)
	if n != len(vs) || n < 1 || n > MaxSamples {
		panic(fmt.Sprintf("BUG: chunk.Encode: %d timestamps and %d values, want equal counts in [1, %d]", n, len(vs), MaxSamples))
	}
	for i := 1; i < n; i++ {
		if ts[i] <= ts[i-1] {
			panic(fmt.Sprintf("BUG: chunk.Encode: timestamp %d at index %d does not increase on %d", ts[i], i, ts[i-1]))
		}
	}

	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	regular := n >= 2
	for i := 2; i < n && regular; i++ {
		regular = ts[i]-ts[i-1] == ts[1]-ts[0]
	}
	var tp intParams
	tsBits := 0
	if n >= 2 && !regular {
		pred := predictDelta(n, uint64(ts[n-1]-ts[0]))
		tp, tsBits = planInts(ts, pred, &sc.plan)
	}
	sc.ms = slices.Grow(sc.ms[:0], n)[:n]
	sc.us = slices.Grow(sc.us[:0], n)
	ms := sc.ms
	vp := planValues(vs, ms, allow, &sc.plan)

	dst = slices.Grow(dst, 5*binary.MaxVarintLen64+(tsBits+vp.bits)/8+16)
	start := len(dst)
	first := formatVersion<<versionShift | vp.enc
	if regular {
		first |= flagRegular
	}
	dst = append(dst, first)
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendVarint(dst, ts[0])
	if n >= 2 {
		dst = binary.AppendUvarint(dst, uint64(ts[n-1]-ts[0]))
	}
	if n >= 2 && !regular {
		// The stream's length goes before it; reserve the most a length
		// can take and close the gap afterwards.
		at := len(dst)
		dst = append(dst, make([]byte, maxStreamLenBytes)...)
		w := bitWriter{b: dst}
		tp.write(&w)
		putInts(&w, &tp, ts, sc.us)
		dst = w.flush()
		var lb [binary.MaxVarintLen64]byte
		k := binary.PutUvarint(lb[:], uint64(len(dst)-at-maxStreamLenBytes))
		copy(dst[at:], lb[:k])
		dst = append(dst[:at+k], dst[at+maxStreamLenBytes:]...)
	}

	valuesAt := len(dst)
	w := bitWriter{b: dst}
	switch vp.enc {
	case valDecimal:
		w.write(uint64(vp.exp), 4)
		writeVarbits(&w, zigzag(ms[0]))
		if n >= 2 {
			vp.ints.write(&w)
			putInts(&w, &vp.ints, ms, sc.us)
		}
	case valXOR:
		w.write(math.Float64bits(vs[0]), 64)
		putXOR(&w, vs)
		if vp.orRaw && (len(w.b)-valuesAt)*8+int(w.n) > 64*n {
			w = bitWriter{b: w.b[:valuesAt]}
			putRaw(&w, vs)
			w.b[start] = w.b[start]&^encMask | valRaw
		}
	case valRaw:
		putRaw(&w, vs)
	case valConst:
		w.write(math.Float64bits(vs[0]), 64)
	}
	return w.flush()
}

func putRaw(w *bitWriter, vs []float64) {
	for _, v := range vs {
		w.write(math.Float64bits(v), 64)
	}
}

// maxStreamLenBytes is the most bytes the uvarint timestamp-stream length
// takes: a stream has at most MaxSamples residuals of at most 71 bits plus
// parameters, under 2^21 bytes.
const maxStreamLenBytes = 3

// predictDelta is the decoder's guess of the first timestamp delta: the
// mean delta, span/(n-1). REQUIRES: n >= 2.
func predictDelta(n int, span uint64) int64 { return int64(span / uint64(n-1)) }

// valuePlan is the chosen value encoding.
type valuePlan struct {
	enc  uint8
	exp  int       // valDecimal: the exponent e
	ints intParams // valDecimal with n >= 2: the mantissa stream
	bits int       // estimated size in bits; at least the true size
	// orRaw: valXOR was not sized; write it, and raw instead if smaller.
	orRaw bool
}

// planValues picks the value encoding with the fewest bits. For
// valDecimal it leaves the mantissas in ms. REQUIRES: len(ms) == len(vs).
func planValues(vs []float64, ms []int64, allow uint, sc *planScratch) valuePlan {
	n := len(vs)
	best := valuePlan{enc: valRaw, bits: 64 * n}
	// One pass finds the decimal mantissas (at the smallest exponent
	// that fits every value), whether every value is the same, and
	// xorMin, a lower bound of the XOR size: a repeat costs 1 bit, a
	// change 2 bits plus at least its significant bits.
	decimal := allow&(1<<valDecimal) != 0
	e := 0
	if decimal {
		ms[0], decimal = mantissa(vs[0], 0)
		if !decimal {
			e, decimal = raiseExp(vs, ms, 0, 0)
		}
	}
	xorMin := 64
	var changed uint64
	prev := math.Float64bits(vs[0])
	for i := 1; i < n; i++ {
		v := vs[i]
		b := math.Float64bits(v)
		x := b ^ prev
		prev = b
		changed |= x
		c := 66 - min(bits.LeadingZeros64(x), 31) - bits.TrailingZeros64(x)
		if x == 0 {
			c = 1
		}
		xorMin += c
		if decimal {
			var ok bool
			if ms[i], ok = mantissa(v, e); !ok {
				e, decimal = raiseExp(vs, ms, i, e)
			}
		}
	}
	if allow&(1<<valConst) != 0 && changed == 0 && n > 1 {
		best = valuePlan{enc: valConst, bits: 64}
	}
	if decimal {
		p := valuePlan{enc: valDecimal, exp: e, bits: 4 + varbitsLen(zigzag(ms[0]))}
		if n >= 2 {
			var c int
			p.ints, c = planInts(ms, 0, sc)
			p.bits += c
		}
		if p.bits < best.bits {
			best = p
		}
	}
	if allow&(1<<valXOR) != 0 && xorMin < best.bits && best.enc == valRaw {
		// Only raw to beat: write XOR and fall back to raw if it is
		// bigger, rather than size it first.
		return valuePlan{enc: valXOR, bits: 77 * n, orRaw: true}
	}
	if allow&(1<<valXOR) != 0 && xorMin < best.bits {
		x := xorEnc{prev: math.Float64bits(vs[0])}
		c := 64
		for _, v := range vs[1:] {
			c += x.cost(math.Float64bits(v))
		}
		if c < best.bits {
			best = valuePlan{enc: valXOR, bits: c}
		}
	}
	return best
}

// header is the byte-aligned start of a chunk.
type header struct {
	n          int
	minT, maxT int64
	enc        uint8
	regular    bool
	size       int // bytes
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrCorrupt)...)
}

func parseHeader(b []byte) (header, error) {
	var h header
	if len(b) == 0 {
		return h, corruptf("read chunk header: empty chunk")
	}
	if v := b[0] >> versionShift; v != formatVersion {
		return h, corruptf("read chunk header: unknown format version %d", v)
	}
	h.regular = b[0]&flagRegular != 0
	h.enc = b[0] & encMask
	if h.enc >= numVal {
		return h, corruptf("read chunk header: unknown value encoding %d", h.enc)
	}
	pos := 1
	n, k := binary.Uvarint(b[pos:])
	if k <= 0 {
		return h, corruptf("read chunk header: bad sample count")
	}
	pos += k
	if n == 0 || n > MaxSamples {
		return h, corruptf("read chunk header: sample count %d out of range [1, %d]", n, MaxSamples)
	}
	h.n = int(n)
	h.minT, k = binary.Varint(b[pos:])
	if k <= 0 {
		return h, corruptf("read chunk header: bad min timestamp")
	}
	pos += k
	h.maxT = h.minT
	if n >= 2 {
		span, k := binary.Uvarint(b[pos:])
		if k <= 0 {
			return h, corruptf("read chunk header: bad time span")
		}
		pos += k
		// Strictly increasing timestamps advance at least 1 ms per sample,
		// and the last one must be an int64.
		if span < n-1 || span > uint64(math.MaxInt64)-uint64(h.minT) {
			return h, corruptf("read chunk header: time span %d impossible for %d samples from %d", span, n, h.minT)
		}
		h.maxT = h.minT + int64(span)
		if h.regular && span%(n-1) != 0 {
			return h, corruptf("read chunk header: time span %d not a multiple of %d intervals", span, n-1)
		}
	} else if h.regular {
		return h, corruptf("read chunk header: one sample cannot be evenly spaced")
	}
	h.size = pos
	return h, nil
}

// Info reads the header only: the number of samples and the first and
// last timestamps.
func Info(b []byte) (n int, minT, maxT int64, err error) {
	h, err := parseHeader(b)
	if err != nil {
		return 0, 0, 0, err
	}
	return h.n, h.minT, h.maxT, nil
}

// Decode appends the samples of chunk b to ts and vs and returns them. On
// error it returns ts and vs with their original lengths and an error
// wrapping ErrCorrupt; it never panics.
func Decode(b []byte, ts []int64, vs []float64) ([]int64, []float64, error) {
	var d decoder
	if err := d.init(b); err != nil {
		return ts, vs, err
	}
	nt, nv := len(ts), len(vs)
	ts, vs = slices.Grow(ts, d.n)[:nt+d.n], slices.Grow(vs, d.n)[:nv+d.n]
	if err := d.fill(ts[nt:], vs[nv:]); err != nil {
		return ts[:nt], vs[:nv], err
	}
	return ts, vs, nil
}
