package chunk

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"
)

// Appender builds an open head chunk one sample at a time, compressed
// (see "Appender streams" in the package doc), so that the head holds a
// sensor series in under a byte per sample instead of 16. The zero value
// is an empty Appender that holds no memory.
//
// An Appender is not safe for concurrent use: its reads (Len,
// AppendSamples, ...) must not run alongside Append. Seal hands the
// samples over as a Sealed, which is.
type Appender struct {
	// words is the bit stream, most significant bit first. INVARIANT:
	// with samples, len(words) == nbits/64 + 1, and the last word holds
	// nbits%64 bits, then zeros; no Sealed shares the array.
	words  []uint64
	nbits  uint32
	n      uint32 // samples
	firstT int64
	lastT  int64
	lastD  int64 // lastT minus the timestamp before it; 0 with one sample
	vals   valueState
	// sizeHint is the words of the last chunk sealed, the first
	// allocation for the next: a series' chunks take about the same
	// room, and growing to it step by step would allocate a dozen times.
	sizeHint uint32
}

// Sealed is an immutable run of samples taken from an Appender by Seal.
// It is safe for concurrent use. The zero value holds no samples.
type Sealed struct {
	words  []uint64 // never written again
	n      int
	firstT int64
	lastT  int64
}

// Growth of the stream buffer, in 64-bit words: the first allocation (or
// the size of the chunk sealed last), then steps of a quarter, each
// rounded up to the allocator's size class. Small steps keep the slack
// that Seal hands over small; the copying they cost is about four words
// per word written.
const (
	minStreamWords   = 4
	streamGrowthFrac = 4
)

// Append adds a sample after the last one. It does not allocate except to
// grow the stream buffer.
//
// REQUIRES: Len() == 0 or t > LastT(), and Len() < MaxSamples; Append
// panics otherwise (the head cuts chunks before MaxSamples, which is all
// Encode takes).
func (a *Appender) Append(t int64, v float64) {
	if a.n == 0 {
		a.firstT, a.lastT, a.lastD, a.n = t, t, 0, 1
		a.push(0)
		a.putValue(v, 0, 0)
		return
	}
	if t <= a.lastT || a.n >= MaxSamples {
		a.badAppend(t)
	}
	// NB: the delta may pass MaxInt64 and the delta of deltas anything;
	// the arithmetic wraps and the reader's wraps back.
	d := t - a.lastT
	dod := d - a.lastD
	a.lastT, a.lastD = t, d
	a.n++
	c, nb := uint64(0), uint(1) // the timestamp's code
	if dod != 0 {
		u := zigzag(dod)
		if u >= tsCode.c.lo[tsWide] {
			a.put(tsCode.c.pat[tsWide], uint(tsCode.c.plen[tsWide]))
			a.put(u-tsCode.c.lo[tsWide], 64)
			a.putValue(v, 0, 0)
			return
		}
		// tsCode.encode(u), with the lookup of small values.
		if u < smallCodes {
			e := tsCode.small[u]
			c, nb = uint64(e>>8), uint(e&0xff)
		} else {
			c, nb = tsCode.encode(u)
		}
	}

	// putValue by hand, for the common codes: Go does not inline it.
	s := &a.vals
	b := math.Float64bits(v)
	var vc uint64 // the value's code
	var vn uint
	if s.xorLeft == 0 {
		m, ok := mantissa(v, int(s.e))
		if !ok {
			a.putValue(v, c, nb)
			return
		}
		if u := zigzag(m - s.m); u < smallCodes {
			e := valueCode.small[u]
			vc, vn = uint64(e>>8), uint(e&0xff)
		} else {
			vc, vn = valueCode.encode(u)
		}
		s.m, s.prev, s.misses = m, b, 0
	} else {
		// s.xorCode(b) by hand; keep the two alike.
		x := b ^ s.prev
		s.prev = b
		ctl, nctl, sig := uint64(0), uint(1), uint(0)
		if x != 0 {
			lead, trail := int(s.lead), int(s.trail)
			lz := min(bits.LeadingZeros64(x), 31)
			tz := bits.TrailingZeros64(x)
			reuse := (lz-lead)|(tz-trail)|(11+lead+trail-lz-tz) >= 0
			nctl, ctl = 2, 0b10
			if !reuse {
				lead = lz
			}
			if !reuse {
				trail = tz
			}
			sig = uint(64 - lead - trail)
			if !reuse {
				nctl = 13
			}
			if !reuse {
				ctl = 0b11<<11 | uint64(lz)<<6 | uint64(sig&63)
			}
			s.lead, s.trail = uint8(lead), uint8(trail)
			x >>= uint(trail)
		}
		s.xorCoded()
		if nctl+sig > 64 {
			a.put(c, nb)
			a.put(ctl, nctl)
			a.put(x, sig)
			return
		}
		vc, vn = ctl<<(sig&63)|x, nctl+sig
	}
	if nb+vn > 64 {
		a.put(c, nb)
		c, nb = 0, 0
	}
	c, nb = c<<(vn&63)|vc, nb+vn
	// put by hand.
	used := uint(a.nbits) & 63
	a.nbits += uint32(nb)
	hi := c << ((64 - nb) & 63)
	a.words[len(a.words)-1] |= hi >> used
	if used+nb >= 64 {
		a.push(hi << (64 - used)) // NB: 0 if used == 0
	}
}

func (a *Appender) badAppend(t int64) {
	if a.n >= MaxSamples {
		panic(fmt.Sprintf("BUG: chunk.Appender.Append: already %d samples, the most a chunk holds", a.n))
	}
	panic(fmt.Sprintf("BUG: chunk.Appender.Append: timestamp %d does not increase on %d", t, a.lastT))
}

// putValue writes the nb bits of c (a timestamp code; nb <= 64, maybe
// 0), then the code of v. It is Append's general case.
func (a *Appender) putValue(v float64, c uint64, nb uint) {
	if nb > 0 {
		a.put(c, nb)
	}
	s := &a.vals
	b := math.Float64bits(v)
	if s.xorLeft != 0 {
		a.putXOR(b)
		s.xorCoded()
		return
	}
	m, ok := mantissa(v, int(s.e))
	if !ok {
		a.escape(v, b)
		return
	}
	a.put(valueCode.encode(zigzag(m - s.m)))
	s.m, s.prev, s.misses = m, b, 0
}

// escape writes a value that is no decimal at the current exponent: as a
// raise of the exponent if one fits, else as an exception.
func (a *Appender) escape(v float64, b uint64) {
	s := &a.vals
	if e, m, ok := s.raise(v); ok {
		a.put(valueEscape<<5|1<<4|uint64(e), valueEscapeBits+5)
		s.m *= int64(pow10[e-s.e])
		s.e = e
		a.put(valueCode.encode(zigzag(m - s.m)))
		s.m, s.prev, s.misses = m, b, 0
		return
	}
	a.put(valueEscape<<1, valueEscapeBits+1)
	a.putXOR(b)
	s.missed()
}

// putXOR writes the XOR code of the value with bits b.
func (a *Appender) putXOR(b uint64) {
	ctl, nctl, x, sig := a.vals.xorCode(b)
	a.put(ctl, nctl)
	if sig > 0 {
		a.put(x, sig)
	}
}

// xorCode returns the XOR code of the value with bits b (see "XOR codes"
// in the package doc): nctl control bits, then sig bits of x (sig may be
// 0). It moves s on to the value.
func (s *valueState) xorCode(b uint64) (ctl uint64, nctl uint, x uint64, sig uint) {
	x = b ^ s.prev
	s.prev = b
	if x == 0 {
		return 0, 1, 0, 0
	}
	// xorEnc.choose without branches: noisy values reuse the window or
	// not at random, and a mispredicted branch costs more than the rest.
	lead, trail := int(s.lead), int(s.trail)
	lz := min(bits.LeadingZeros64(x), 31) // 5-bit field
	tz := bits.TrailingZeros64(x)
	// Reuse iff lz >= lead, tz >= trail and 64-lead-trail <= 11+64-lz-tz.
	// The ifs below compile to conditional moves.
	reuse := (lz-lead)|(tz-trail)|(11+lead+trail-lz-tz) >= 0
	nctl, ctl = 2, 0b10
	if !reuse {
		lead = lz
	}
	if !reuse {
		trail = tz
	}
	sig = uint(64 - lead - trail) // 1..64
	if !reuse {
		nctl = 13
	}
	if !reuse {
		ctl = 0b11<<11 | uint64(lz)<<6 | uint64(sig&63)
	}
	s.lead, s.trail = uint8(lead), uint8(trail)
	return ctl, nctl, x >> uint(trail), sig
}

// put appends the low nb bits of c to the stream.
// REQUIRES: 1 <= nb <= 64 and c < 1<<nb.
func (a *Appender) put(c uint64, nb uint) {
	used := uint(a.nbits) & 63
	a.nbits += uint32(nb)
	hi := c << ((64 - nb) & 63)
	a.words[len(a.words)-1] |= hi >> used
	if used+nb >= 64 {
		a.push(hi << (64 - used)) // NB: 0 if used == 0
	}
}

// push starts a word with the bits of w.
func (a *Appender) push(w uint64) {
	if len(a.words) == cap(a.words) {
		a.grow()
	}
	a.words = append(a.words, w)
}

// grow makes room for at least one more word.
//
//go:noinline
func (a *Appender) grow() {
	c := cap(a.words)
	want := max(minStreamWords, c+c/streamGrowthFrac)
	if c == 0 {
		want = max(minStreamWords, int(a.sizeHint))
	}
	// Appending to nil sizes the array to its size class, so that cap, and
	// hence SizeBytes, counts every byte the allocator hands out.
	w := append([]uint64(nil), make([]uint64, want)...)
	a.words = w[:copy(w, a.words)]
}

// Len returns the number of samples.
func (a *Appender) Len() int { return int(a.n) }

// FirstT returns the first timestamp. REQUIRES: Len() > 0.
func (a *Appender) FirstT() int64 {
	if a.n == 0 {
		panic("BUG: chunk.Appender.FirstT: no samples")
	}
	return a.firstT
}

// LastT returns the last timestamp. REQUIRES: Len() > 0.
func (a *Appender) LastT() int64 {
	if a.n == 0 {
		panic("BUG: chunk.Appender.LastT: no samples")
	}
	return a.lastT
}

// Reset empties the Appender but keeps its buffer, so that refilling it
// does not allocate; SizeBytes goes on counting the buffer. To release
// the memory, Seal and drop the result, or assign Appender{}.
func (a *Appender) Reset() {
	*a = Appender{words: a.words[:0], sizeHint: a.sizeHint}
}

// SizeBytes returns the bytes of memory the Appender holds: its buffer's
// capacity and the Appender itself.
func (a *Appender) SizeBytes() int {
	return 8*cap(a.words) + int(unsafe.Sizeof(*a))
}

// AppendSamples decodes every sample, appends the timestamps to ts and
// the values to vs, and returns them.
func (a *Appender) AppendSamples(ts []int64, vs []float64) ([]int64, []float64) {
	return appendSamples(a.words, int(a.n), a.firstT, ts, vs)
}

// Seal returns the samples as a Sealed and leaves the Appender empty and
// holding no buffer. The Sealed takes over the buffer without copying it.
// The next chunk starts with a buffer the size of this one's.
func (a *Appender) Seal() Sealed {
	if a.n == 0 {
		return Sealed{}
	}
	s := Sealed{words: a.words, n: int(a.n), firstT: a.firstT, lastT: a.lastT}
	*a = Appender{sizeHint: uint32(len(a.words))}
	return s
}

// Len returns the number of samples.
func (s Sealed) Len() int { return s.n }

// FirstT returns the first timestamp. REQUIRES: Len() > 0.
func (s Sealed) FirstT() int64 {
	if s.n == 0 {
		panic("BUG: chunk.Sealed.FirstT: no samples")
	}
	return s.firstT
}

// LastT returns the last timestamp. REQUIRES: Len() > 0.
func (s Sealed) LastT() int64 {
	if s.n == 0 {
		panic("BUG: chunk.Sealed.LastT: no samples")
	}
	return s.lastT
}

// SizeBytes returns the bytes of memory the Sealed holds: the buffer's
// capacity and the Sealed value itself.
func (s Sealed) SizeBytes() int {
	return 8*cap(s.words) + int(unsafe.Sizeof(s))
}

// AppendSamples decodes every sample, appends the timestamps to ts and
// the values to vs, and returns them.
func (s Sealed) AppendSamples(ts []int64, vs []float64) ([]int64, []float64) {
	return appendSamples(s.words, s.n, s.firstT, ts, vs)
}

// Value modes (see "Appender streams" in the package doc).
const (
	// maxMisses exceptions in a row switch to XOR mode.
	maxMisses = 2
	// firstXORRun is the length of the first XOR-mode run; each later run
	// is twice the one before, up to maxXORRun.
	firstXORRun     = 64
	xorRunDoublings = 9
	maxXORRun       = firstXORRun << xorRunDoublings
	// maxRaise is the most an escape raises a nonzero mantissa's exponent:
	// a raise multiplies every later mantissa delta by 10 per step, so one
	// stray long decimal would otherwise bloat the rest of the chunk.
	maxRaise = 3
)

// valueState is the state of the value coder, which the writer and the
// reader keep alike. The zero value is the state before the first value.
type valueState struct {
	m       int64  // mantissa of the last decimal-coded value, at exponent e
	prev    uint64 // bits of the last value
	e       uint8  // decimal exponent
	lead    uint8  // XOR window
	trail   uint8
	misses  uint8  // exceptions since the last decimal-coded value
	runs    uint8  // XOR runs so far
	xorLeft uint16 // values left in XOR mode; 0 in decimal mode
}

// missed follows an exception.
func (s *valueState) missed() {
	if s.misses++; s.misses < maxMisses {
		return
	}
	s.xorLeft = uint16(min(int(firstXORRun)<<s.runs, maxXORRun))
	s.runs = min(s.runs+1, xorRunDoublings)
	s.misses = 0
}

// xorCoded follows a value coded in XOR mode.
func (s *valueState) xorCoded() {
	if s.xorLeft--; s.xorLeft == 0 {
		// Back to decimal mode on probation: one exception ends it.
		s.misses = maxMisses - 1
	}
}

// raise finds the smallest exponent e above s.e at which v is a decimal
// and s.m can be rescaled, and v's mantissa there. Unless s.m is 0, e is
// at most s.e+maxRaise.
func (s *valueState) raise(v float64) (e uint8, m int64, ok bool) {
	hi := uint8(maxDecimalExp)
	if s.m != 0 {
		hi = min(hi, s.e+maxRaise)
	}
	for e = s.e + 1; e <= hi; e++ {
		if !(math.Abs(v*pow10[e]) < maxMantissa) {
			return 0, 0, false // and more so at larger exponents; NaN, ±Inf
		}
		if m, ok = mantissa(v, int(e)); ok {
			// s.m*10^(e-s.e) must stay below 2^53, as in raiseExp.
			lim := maxMantissa / int64(pow10[e-s.e])
			if s.m >= lim || s.m <= -lim {
				return 0, 0, false
			}
			return e, m, true
		}
	}
	return 0, 0, false
}

// streamCode is a fixed bucket code (see "Bucket codes" in the package
// doc) with the tables its writer and reader use.
type streamCode struct {
	c     code
	bits  [maxBuckets]uint8  // prefix and payload bits of each bucket
	first [65]uint8          // by bit length: the bucket of the smallest value
	split [65]uint64         // by bit length: values above go to the next bucket
	shift [maxBuckets]uint64 // pat << width, for buckets of at most 64 bits
	// small[u] is the code of u < smallCodes, over its length in 8 bits.
	small [smallCodes]uint32
}

// smallCodes is how many of the smallest values a streamCode looks up
// whole, skipping the bucket search.
const smallCodes = 1024

// newStreamCode builds a code whose first data buckets hold values; a
// further bucket, if any, is an escape. REQUIRES: widths ascend over the
// data buckets, which cover every value they are given.
func newStreamCode(widths []uint8, data int) streamCode {
	s := streamCode{c: makeCode(widths)}
	for j := range widths {
		s.bits[j] = s.c.plen[j] + s.c.width[j]
		if s.bits[j] <= 64 {
			s.shift[j] = s.c.pat[j] << s.c.width[j]
		}
	}
	// As in putBuckets: bucket starts more than double, so the values of
	// one bit length span at most two buckets.
	j := 0
	for b := range 65 {
		smallest := uint64(1) << b >> 1
		for j < data-1 && smallest >= s.c.lo[j+1] {
			j++
		}
		s.first[b], s.split[b] = uint8(j), math.MaxUint64
		if j < data-1 {
			s.split[b] = s.c.lo[j+1] - 1
		}
	}
	for u := range uint64(smallCodes) {
		j := s.bucket(u)
		if s.bits[j] > 24 {
			panic("BUG: chunk: small codes must take at most 24 bits")
		}
		s.small[u] = uint32(s.word(j, u))<<8 | uint32(s.bits[j])
	}
	return s
}

// encode returns the code of u and its length. Append looks values below
// smallCodes up in small instead. REQUIRES: u's bucket takes at most 64
// bits.
func (s *streamCode) encode(u uint64) (uint64, uint) {
	j := s.bucket(u)
	return s.word(j, u), uint(s.bits[j])
}

// bucket returns the bucket of u.
func (s *streamCode) bucket(u uint64) int {
	bl := bits.Len64(u)
	_, above := bits.Sub64(s.split[bl], u, 0) // 1 if u > split
	return int(s.first[bl]) + int(above)
}

// word returns the code of u in bucket j. REQUIRES: bits[j] <= 64.
func (s *streamCode) word(j int, u uint64) uint64 {
	j &= maxBuckets - 1
	return s.shift[j] | (u - s.c.lo[j])
}

var (
	// tsCode codes zigzag(delta of deltas); its last bucket takes 69 bits.
	tsCode = newStreamCode([]uint8{0, 4, 7, 12, 20, 64}, 6)
	// valueCode codes zigzag(mantissa delta), which is below 2^55 as
	// mantissas are below 2^53; its last bucket is the escape.
	valueCode = newStreamCode([]uint8{0, 1, 3, 6, 10, 16, 55, 0}, 7)
)

const (
	tsWide = 5 // tsCode's 69-bit bucket
	// valueCode's escape: seven one bits. Then 1 and a 4-bit exponent (a
	// raise), or 0 (an exception).
	valueEscapeJ    = 7
	valueEscape     = 1<<7 - 1
	valueEscapeBits = 7
)

// appendSamples decodes the n samples of a stream that starts at t0 and
// appends them to ts and vs.
func appendSamples(ws []uint64, n int, t0 int64, ts []int64, vs []float64) ([]int64, []float64) {
	nt, nv := len(ts), len(vs)
	ts, vs = slices.Grow(ts, n)[:nt+n], slices.Grow(vs, n)[:nv+n]
	if n > 0 {
		readStream(ws, t0, ts[nt:], vs[nv:])
	}
	return ts, vs
}

// streamReader reads an Appender's bit stream.
type streamReader struct {
	ws  []uint64
	pos uint   // the first bit not yet in buf
	buf uint64 // nb bits from the stream, left-aligned, then zeros
	nb  uint
}

// refill tops buf up to 64 bits (zeros past the end of the stream).
func refill(ws []uint64, pos uint, buf uint64, nb uint) (uint, uint64, uint) {
	i, s := pos>>6, pos&63
	if i >= uint(len(ws)) {
		return pos, buf, nb // every bit is in buf
	}
	w := ws[i] << s
	if i+1 < uint(len(ws)) {
		w |= ws[i+1] >> 1 >> (63 - s) // NB: two shifts, for s == 0
	}
	return pos + 64 - nb, buf | w>>(nb&63), 64
}

// read returns the next k bits. REQUIRES: 1 <= k <= 64, and the stream
// holds them.
func (r *streamReader) read(k uint) uint64 {
	if r.nb < k {
		r.pos, r.buf, r.nb = refill(r.ws, r.pos, r.buf, r.nb)
	}
	v := r.buf >> (64 - k)
	r.buf <<= k
	r.nb -= k
	return v
}

// topCode is what the top bits of the stream say about a bucket code:
// its bucket and its length.
type topCode struct{ j, bits uint8 }

// top maps the top topBits bits to their bucket code. REQUIRES:
// topBits >= the longest prefix (the escape or the last bucket's).
func (s *streamCode) top(topBits uint) []topCode {
	t := make([]topCode, 1<<topBits)
	for x := range t {
		ones := uint(bits.LeadingZeros64(^(uint64(x) << (64 - topBits))))
		j := min(ones, uint(s.c.last))
		t[x] = topCode{uint8(j), s.bits[j]}
	}
	return t
}

const (
	tsTopBits    = 5 // tsCode's longest prefix
	valueTopBits = 7 // valueCode's
	// The longest codes the loop below reads without refilling.
	tsFastBits    = 25 // tsCode's buckets but the last
	valueFastBits = 22 // valueCode's first six buckets
)

var (
	tsTop    = [1 << tsTopBits]topCode(tsCode.top(tsTopBits))
	valueTop = [1 << valueTopBits]topCode(valueCode.top(valueTopBits))
)

// payload returns the value in bucket j whose code starts w.
// REQUIRES: bits[j] <= 64.
func (s *streamCode) payload(j uint, w uint64) uint64 {
	j &= maxBuckets - 1
	pl, wd := uint(s.c.plen[j]), uint(s.c.width[j])
	return s.c.lo[j] + w<<(pl&63)>>((63-wd)&63)>>1
}

// readStream decodes len(ts) samples into ts and vs, the first at t0.
// REQUIRES: the stream holds them.
func readStream(ws []uint64, t0 int64, ts []int64, vs []float64) {
	vs = vs[:len(ts)]
	var s valueState
	t, d := t0, int64(0)
	// The hot state in locals, so that it stays in registers: the
	// reader's, and the value coder's m, prev, 10^e and xorLeft; s holds
	// the rest, and all of it around calls to s.read. (Holding more in
	// locals spills registers and slows the loop.)
	var pos, nb uint
	var buf uint64
	m, prev, p10 := int64(0), uint64(0), 1.0
	xorLeft := uint(0)
	for i := range ts {
		if i > 0 {
			if nb < tsFastBits {
				pos, buf, nb = refill(ws, pos, buf, nb)
			}
			if int64(buf) >= 0 { // the same delta
				buf <<= 1
				nb--
			} else {
				c := tsTop[buf>>(64-tsTopBits)]
				j := uint(c.j)
				var u uint64
				if j != tsWide {
					u = tsCode.payload(j, buf)
					buf <<= c.bits & 63
					nb -= uint(c.bits)
				} else {
					r := streamReader{ws, pos, buf, nb}
					r.read(uint(tsCode.c.plen[tsWide]))
					u = tsCode.c.lo[tsWide] + r.read(64)
					pos, buf, nb = r.pos, r.buf, r.nb
				}
				d += unzigzag(u)
			}
			t += d
		}
		ts[i] = t
		if xorLeft == 0 {
			if nb < valueFastBits {
				pos, buf, nb = refill(ws, pos, buf, nb)
			}
			c := valueTop[buf>>(64-valueTopBits)]
			if j := uint(c.j); j != valueEscapeJ && uint(c.bits) <= nb {
				m += unzigzag(valueCode.payload(j, buf))
				buf <<= c.bits & 63
				nb -= uint(c.bits)
				v := float64(m) / p10
				prev, s.misses = math.Float64bits(v), 0
				vs[i] = v
				continue
			}
		} else {
			if nb < 64 {
				pos, buf, nb = refill(ws, pos, buf, nb)
			}
			// Only codes that fit in buf and do not end the XOR run are
			// read here; the general path takes the rest, and keeps the
			// mode rules in one place.
			if int64(buf) >= 0 && xorLeft > 1 { // the same value
				buf <<= 1
				nb--
				xorLeft--
				vs[i] = math.Float64frombits(prev)
				continue
			}
			// A new window or the same one; branch-free, as noisy values
			// take either at random.
			c := uint(buf >> 51 & (1<<11 - 1))
			sigNew := (c-1)&63 + 1
			l, tr, ctl := uint(s.lead), uint(s.trail), uint(2)
			if buf>>62 == 0b11 {
				l = c >> 6
			}
			if buf>>62 == 0b11 {
				tr = 64 - c>>6 - sigNew
			}
			if buf>>62 == 0b11 {
				ctl = 13
			}
			if sig := 64 - l - tr; ctl+sig <= nb && xorLeft > 1 {
				prev ^= buf << (ctl & 63) >> ((64 - sig) & 63) << (tr & 63)
				s.lead, s.trail = uint8(l), uint8(tr)
				buf <<= ctl + sig // may be 64
				nb -= ctl + sig
				xorLeft--
				vs[i] = math.Float64frombits(prev)
				continue
			}
		}
		s.m, s.prev, s.xorLeft = m, prev, uint16(xorLeft)
		r := streamReader{ws, pos, buf, nb}
		vs[i] = s.read(&r)
		pos, buf, nb = r.pos, r.buf, r.nb
		m, prev, p10 = s.m, s.prev, pow10[s.e&15]
		xorLeft = uint(s.xorLeft)
	}
}

// read decodes the next value, whatever its code.
func (s *valueState) read(r *streamReader) float64 {
	if s.xorLeft > 0 {
		s.readXOR(r)
		s.xorCoded()
		return math.Float64frombits(s.prev)
	}
	j := s.readBucket(r)
	if j == valueEscapeJ {
		if r.read(1) == 0 { // an exception
			s.readXOR(r)
			s.missed()
			return math.Float64frombits(s.prev)
		}
		e := uint8(r.read(4))
		s.m *= int64(pow10[(e-s.e)&15])
		s.e = e
		j = s.readBucket(r)
	}
	var u uint64
	if w := uint(valueCode.c.width[j]); w > 0 {
		u = r.read(w)
	}
	s.m += unzigzag(valueCode.c.lo[j] + u)
	v := float64(s.m) / pow10[s.e&15]
	s.prev, s.misses = math.Float64bits(v), 0
	return v
}

// readBucket reads a valueCode prefix and returns its bucket.
func (s *valueState) readBucket(r *streamReader) uint {
	if r.nb < valueTopBits {
		r.pos, r.buf, r.nb = refill(r.ws, r.pos, r.buf, r.nb)
	}
	j := uint(valueTop[r.buf>>(64-valueTopBits)].j)
	r.read(uint(valueCode.c.plen[j&7]))
	return j & 7
}

// readXOR decodes an XOR code into s.prev.
func (s *valueState) readXOR(r *streamReader) {
	if r.read(1) == 0 { // the same value
		return
	}
	if r.read(1) == 1 { // a new window
		ctl := r.read(11)
		lead, sig := uint8(ctl>>6), uint8(ctl&63)
		if sig == 0 {
			sig = 64
		}
		s.lead, s.trail = lead, 64-lead-sig
	}
	s.prev ^= r.read(64-uint(s.lead)-uint(s.trail)) << s.trail
}
