package chunk

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// An integer stream codes a sequence x[0..n-1] of int64 given x[0] (see
// "Integer streams" in the package doc). All arithmetic wraps modulo 2^64,
// so every int64 sequence round-trips.

func zigzag(x int64) uint64   { return uint64(x<<1 ^ x>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// varbitsLen is the size of writeVarbits(u).
func varbitsLen(u uint64) int { return 7 + bits.Len64(u) }

// writeVarbits writes u as a 7-bit length L then L bits.
func writeVarbits(w *bitWriter, u uint64) {
	l := uint(bits.Len64(u))
	if l+7 <= 64 {
		w.write(uint64(l)<<l|u, l+7)
		return
	}
	w.write(uint64(l), 7)
	w.write(u, l)
}

func readVarbits(r *bitReader) (uint64, bool) {
	l := r.read(7)
	if l > 64 {
		return 0, false
	}
	return r.read(uint(l)), true
}

// intParams are the per-chunk parameters of an integer stream.
type intParams struct {
	order2 bool  // residuals are deltas of deltas, not deltas
	offset bool  // residual = base + u, not unzigzag(u)
	base   int64 // offset only
	first  int64 // order2 only: x[1]-x[0] minus the predicted first delta
	c      code
}

func (p *intParams) write(w *bitWriter) {
	var flags uint64
	if p.order2 {
		flags |= 2
	}
	if p.offset {
		flags |= 1
	}
	w.write(flags, 2)
	if p.offset {
		writeVarbits(w, zigzag(p.base))
	}
	if p.order2 {
		writeVarbits(w, zigzag(p.first))
	}
	p.c.writeTable(w)
}

func (p *intParams) read(r *bitReader) bool {
	flags := r.read(2)
	p.order2, p.offset = flags&2 != 0, flags&1 != 0
	if p.offset {
		u, ok := readVarbits(r)
		if !ok {
			return false
		}
		p.base = unzigzag(u)
	}
	if p.order2 {
		u, ok := readVarbits(r)
		if !ok {
			return false
		}
		p.first = unzigzag(u)
	}
	var ok bool
	p.c, ok = readTable(r)
	return ok
}

// paramBits is the size of the parameters without the code table.
func (p *intParams) paramBits() int {
	n := 2
	if p.offset {
		n += varbitsLen(zigzag(p.base))
	}
	if p.order2 {
		n += varbitsLen(zigzag(p.first))
	}
	return n
}

// residuals returns how many coded residuals a stream of n values has.
func (p *intParams) residuals(n int) int {
	if p.order2 {
		return max(n-2, 0)
	}
	return n - 1
}

// putInts writes the residuals of xs, using us as scratch. REQUIRES:
// len(xs) >= 2 and p planned for xs (so every residual fits a bucket,
// and the widths ascend).
func putInts(w *bitWriter, p *intParams, xs []int64, us []uint64) {
	c := &p.c
	if c.last == 0 && c.width[0] == 0 {
		return // every residual is zero bits
	}
	us = residuals(p, xs, us)
	if c.last == 0 {
		putFixed(w, us, uint(c.width[0]))
		return
	}
	putBuckets(w, c, us)
}

// residuals returns the coded residuals u of xs in us[:0] (reallocated if
// too small). One loop per kind keeps each loop small.
func residuals(p *intParams, xs []int64, us []uint64) []uint64 {
	start := 1
	if p.order2 {
		start = 2
	}
	if cap(us) < len(xs)-start {
		us = make([]uint64, len(xs)-start)
	}
	us = us[:len(xs)-start]
	base := p.base
	switch {
	case !p.order2 && p.offset:
		for i := range us {
			us[i] = uint64(xs[i+1] - xs[i] - base)
		}
	case !p.order2:
		for i := range us {
			us[i] = zigzag(xs[i+1] - xs[i])
		}
	default:
		prevD := xs[1] - xs[0]
		for i := range us {
			d := xs[i+2] - xs[i+1]
			if p.offset {
				us[i] = uint64(d - prevD - base)
			} else {
				us[i] = zigzag(d - prevD)
			}
			prevD = d
		}
	}
	return us
}

// putFixed writes each of us in width bits (a one-bucket code).
// REQUIRES: 1 <= width <= 64.
func putFixed(w *bitWriter, us []uint64, width uint) {
	acc, nacc, b := w.acc, w.n, w.b
	for _, v := range us {
		acc, nacc, b = appendBits(acc, nacc, b, v, width)
	}
	w.acc, w.n, w.b = acc, nacc, b
}

// putBuckets writes each of us with a code of two or more buckets.
func putBuckets(w *bitWriter, c *code, us []uint64) {
	// Code words: bucket j's prefix shifted over its width, and lengths.
	var pat [maxBuckets]uint64
	var plen [maxBuckets]uint
	long := false // some bucket takes more than 64 bits
	for j := 0; j <= int(c.last); j++ {
		pat[j] = c.pat[j] << c.width[j]
		plen[j] = uint(c.plen[j]) + uint(c.width[j])
		long = long || plen[j] > 64
	}
	// Widths ascend, so bucket starts more than double: lo[j] < 2^w[j]
	// makes lo[j+1] = lo[j] + 2^w[j] > 2*lo[j]. Hence the values of one
	// bit length span at most two buckets: first[b], the bucket of the
	// smallest, and the next one for values above split[b].
	var first [65]uint8
	var split [65]uint64
	maxLen := 64 // of the values the code holds
	if end := c.lo[c.last] + 1<<c.width[c.last]; end > c.lo[c.last] {
		maxLen = bits.Len64(end - 1)
	}
	j := 0
	for b := range maxLen + 1 {
		smallest := uint64(1) << b >> 1 // 0 for b == 0
		for j < int(c.last) && smallest >= c.lo[j+1] {
			j++
		}
		first[b], split[b] = uint8(j), math.MaxUint64
		if j < int(c.last) {
			split[b] = c.lo[j+1] - 1
		}
	}
	lo := c.lo
	acc, nacc, b := w.acc, w.n, w.b
	for _, u := range us {
		bl := bits.Len64(u)
		_, above := bits.Sub64(split[bl], u, 0) // 1 if u > split
		j := (uint(first[bl]) + uint(above)) & 7
		v, nb := pat[j]|(u-lo[j]), plen[j]
		if long && nb > 64 {
			w.acc, w.n, w.b = acc, nacc, b
			w.write(c.pat[j], uint(c.plen[j]))
			w.write(u-lo[j], uint(c.width[j]))
			acc, nacc, b = w.acc, w.n, w.b
			continue
		}
		// With two or more buckets every code has 1..64 bits.
		acc, nacc, b = appendBits(acc, nacc, b, v, nb)
	}
	w.acc, w.n, w.b = acc, nacc, b
}

// intDec reads the values of an integer stream.
type intDec struct {
	p       intParams
	x       int64 // last value
	d       int64 // last delta
	pending bool  // x is the next value and is not coded (order 2's x[1])
	// Residual r = int64(u>>z) ^ -int64(u&z) + base: zigzag when z is 1,
	// offset when z is 0. Delta d = d&dmask + r: order 2 when dmask is all
	// ones, order 1 when 0.
	z      uint64
	base   int64
	dmask  int64
	fast   bool // every bucket fits 56 bits with its prefix
	zero   bool // every residual is zero bits
	single bool // one bucket: no prefix
	// With two or more buckets, the top last bits of the stream select
	// the bucket: byTop[top] is its index and the bits its code takes.
	// Reading these in one load keeps the bit buffer's dependency chain
	// (shift, load, shift) short.
	byTop [1 << (maxBuckets - 1)]struct{ j, bits uint8 }
}

// start sets up decoding after x[0] with pred, the predicted first delta.
func (d *intDec) start(x0, pred int64) {
	p := &d.p
	d.x, d.d, d.pending = x0, 0, false
	d.z, d.base, d.dmask = 1, 0, 0
	if p.offset {
		d.z, d.base = 0, p.base
	}
	if p.order2 {
		d.dmask = -1
		d.d = pred + p.first
		d.x += d.d
		d.pending = true
	}
	d.fast = true
	for j := 0; j <= int(p.c.last); j++ {
		if p.c.plen[j]+p.c.width[j] > 56 {
			d.fast = false
		}
	}
	d.zero = p.c.last == 0 && p.c.width[0] == 0
	d.single = p.c.last == 0 && !d.zero
	if last := uint(p.c.last); last > 0 {
		for top := range uint(1) << last {
			// Leading ones of top as a last-bit number, at most last.
			// NB: shift as uint64; uint is 32 bits on armv7.
			j := min(uint(bits.LeadingZeros64(^(uint64(top) << (64 - last)))), last)
			d.byTop[top].j, d.byTop[top].bits = uint8(j), p.c.plen[j]+p.c.width[j]
		}
	}
}

// fillInts decodes the next len(out) values of the stream into out. For
// float64 it stores each value divided by scale (decimal mantissas), for
// int64 the value itself. Reading past the end of the stream yields zeros
// and is caught by r.overrun.
func fillInts[T int64 | float64](s *intDec, r *bitReader, out []T, scale float64) {
	if len(out) == 0 {
		return
	}
	isFloat := scale != 0
	if s.pending {
		out[0] = conv[T](s.x, isFloat, scale)
		out = out[1:]
		s.pending = false
	}
	x, d := s.x, s.d
	z, base, dmask := s.z, s.base, s.dmask
	switch {
	case s.zero:
		res := base // u is always 0
		for i := range out {
			d = d&dmask + res
			x += d
			out[i] = conv[T](x, isFloat, scale)
		}
	case s.single && s.fast:
		w := uint(s.p.c.width[0]) // 1..56
		buf, nb, pos, b := r.buf, r.n, r.pos, r.b
		for i := range out {
			if nb < 56 {
				if pos+8 <= len(b) {
					buf |= binary.BigEndian.Uint64(b[pos:]) >> (nb & 63)
					k := (63 - nb) >> 3
					pos += int(k)
					nb += k << 3
				} else {
					r.buf, r.n, r.pos = buf, nb, pos
					r.refillSlow()
					buf, nb, pos = r.buf, r.n, r.pos
				}
			}
			u := buf >> ((64 - w) & 63)
			buf <<= w & 63
			nb -= w
			d = d&dmask + (int64(u>>z) ^ -int64(u&z) + base)
			x += d
			out[i] = conv[T](x, isFloat, scale)
		}
		r.buf, r.n, r.pos = buf, nb, pos
	case !s.fast:
		for i := range out {
			u := s.p.c.get(r)
			d = d&dmask + (int64(u>>z) ^ -int64(u&z) + base)
			x += d
			out[i] = conv[T](x, isFloat, scale)
		}
	default:
		c := &s.p.c
		topShift := 64 - uint(c.last) // 57..63
		plen, width, lo := c.plen, c.width, c.lo
		byTop := &s.byTop
		buf, nb, pos, b := r.buf, r.n, r.pos, r.b
		for i := range out {
			if nb < 56 {
				if pos+8 <= len(b) {
					buf |= binary.BigEndian.Uint64(b[pos:]) >> (nb & 63)
					k := (63 - nb) >> 3
					pos += int(k)
					nb += k << 3
				} else {
					r.buf, r.n, r.pos = buf, nb, pos
					r.refillSlow()
					buf, nb, pos = r.buf, r.n, r.pos
				}
			}
			e := byTop[(buf>>(topShift&63))&(1<<(maxBuckets-1)-1)]
			j, used := uint(e.j)&7, uint(e.bits)
			pl, w := uint(plen[j]), uint(width[j])
			// pl+w <= 56: the shifts below stay under 64.
			v := buf << (pl & 63) >> ((63 - w) & 63) >> 1
			buf <<= used & 63
			nb -= used
			u := lo[j] + v
			d = d&dmask + (int64(u>>z) ^ -int64(u&z) + base)
			x += d
			out[i] = conv[T](x, isFloat, scale)
		}
		r.buf, r.n, r.pos = buf, nb, pos
	}
	s.x, s.d = x, d
}

func conv[T int64 | float64](x int64, isFloat bool, scale float64) T {
	if isFloat {
		return T(float64(x) / scale)
	}
	return T(x)
}

// planInts chooses the parameters for xs that cost the fewest bits and
// returns them with that cost (parameters, table and residuals). pred is
// the decoder's prediction of xs[1]-xs[0] for order 2. REQUIRES:
// len(xs) >= 2.
//
// It tries deltas with offset coding, deltas with zigzag coding when some
// delta is negative (otherwise offset coding is never bigger: the offset
// value is at most the delta, the zigzag value twice it), and deltas of
// deltas with zigzag coding (they centre on zero, where zigzag does as
// well as an offset).
func planInts(xs []int64, pred int64, sc *planScratch) (intParams, int) {
	n := len(xs)
	d1 := xs[1] - xs[0]
	min1, max1 := d1, d1
	for i := 2; i < n; i++ {
		d := xs[i] - xs[i-1]
		min1, max1 = min(min1, d), max(max1, d)
	}
	zero := makeCode([]uint8{0})
	if min1 == max1 {
		// Every residual of one of these is zero: pick the cheapest header.
		best := intParams{order2: true, first: d1 - pred, c: zero}
		if d1 == 0 {
			best = intParams{c: zero}
		} else if p := (intParams{offset: true, base: d1, c: zero}); p.paramBits() < best.paramBits() {
			best = p
		}
		return best, best.paramBits() + tableBits(1)
	}

	zig1 := min1 < 0
	hs := &sc.hist
	clear(hs[:])
	hs[0].add(uint64(d1 - min1))
	if zig1 {
		hs[1].add(zigzag(d1))
	}
	prev := d1
	var min2, max2 int64 // of the deltas of deltas
	for i := 2; i < n; i++ {
		d := xs[i] - xs[i-1]
		hs[0].add(uint64(d - min1))
		if zig1 {
			hs[1].add(zigzag(d))
		}
		dd := d - prev
		hs[2].add(zigzag(dd))
		min2, max2 = min(min2, dd), max(max2, dd)
		prev = d
	}
	maxU := [3]uint64{uint64(max1 - min1), max(zigzag(min1), zigzag(max1)), max(zigzag(min2), zigzag(max2))}

	cands := [3]intParams{
		{offset: true, base: min1},
		{},
		{order2: true, first: d1 - pred},
	}
	var best intParams
	bc := math.MaxInt
	for i := range cands {
		if i == 1 && !zig1 {
			continue
		}
		c, cost := planCode(&hs[i], maxU[i], sc)
		if cost += cands[i].paramBits(); cost < bc {
			best, bc = cands[i], cost
			best.c = c
		}
	}
	return best, bc
}
