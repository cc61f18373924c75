package chunk

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Gorilla XOR value coding (see "XOR codes" in the package doc).

// xorEnc holds the state of the XOR coder between values.
type xorEnc struct {
	prev        uint64 // bits of the previous value
	lead, trail uint   // current window; starts as the full 64 bits
}

// choose decides how to code x = cur ^ prev (x != 0): reuse the window, or
// open a new one [lead, 64-trail). It reuses when that is no bigger.
func (e *xorEnc) choose(x uint64) (reuse bool, lead, trail uint) {
	lead = uint(bits.LeadingZeros64(x))
	trail = uint(bits.TrailingZeros64(x))
	lead = min(lead, 31) // 5-bit field
	if lead >= e.lead && trail >= e.trail &&
		64-e.lead-e.trail <= 11+64-lead-trail {
		return true, e.lead, e.trail
	}
	return false, lead, trail
}

// cost returns the bits the next value takes and advances the state.
func (e *xorEnc) cost(v uint64) int {
	x := v ^ e.prev
	e.prev = v
	if x == 0 {
		return 1
	}
	reuse, lead, trail := e.choose(x)
	if reuse {
		return 2 + int(64-lead-trail)
	}
	e.lead, e.trail = lead, trail
	return 13 + int(64-lead-trail)
}

// xorDec reads XOR-coded values.
type xorDec struct {
	prev        uint64
	lead, trail uint
}

// fillXOR decodes the next len(out) values. It returns false on a window
// that does not fit in 64 bits.
func fillXOR(d *xorDec, r *bitReader, out []float64) bool {
	prev, lead, trail := d.prev, d.lead, d.trail
	buf, nb, pos, b := r.buf, r.n, r.pos, r.b
	ok := true
loop:
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
		switch buf >> 62 {
		case 0, 1: // '0': repeat
			buf <<= 1
			nb--
			out[i] = math.Float64frombits(prev)
			continue
		case 3: // '11': new window
			ctl := buf >> 51 & (1<<11 - 1)
			buf <<= 13
			nb -= 13
			l, sig := uint(ctl>>6), uint(ctl&63)
			if sig == 0 {
				sig = 64
			}
			if l+sig > 64 {
				ok = false
				break loop
			}
			lead, trail = l, 64-l-sig
		default: // '10': same window
			buf <<= 2
			nb -= 2
		}
		sig := 64 - lead - trail
		if sig > nb {
			r.buf, r.n, r.pos = buf, nb, pos
			prev ^= r.read(sig) << trail
			buf, nb, pos = r.buf, r.n, r.pos
		} else {
			prev ^= buf >> (64 - sig) << trail // 1 <= sig <= nb < 64
			buf <<= sig
			nb -= sig
		}
		out[i] = math.Float64frombits(prev)
	}
	r.buf, r.n, r.pos = buf, nb, pos
	d.prev, d.lead, d.trail = prev, lead, trail
	return ok
}

// putXOR writes vs[1:] after vs[0], making the choices cost counts.
func putXOR(w *bitWriter, vs []float64) {
	e := xorEnc{prev: math.Float64bits(vs[0])}
	for _, f := range vs[1:] {
		v := math.Float64bits(f)
		x := v ^ e.prev
		e.prev = v
		if x == 0 {
			w.write(0, 1)
			continue
		}
		reuse, lead, trail := e.choose(x)
		sig := 64 - lead - trail // 1..64
		var ctl uint64           // the control bits, then sig bits of x
		var nctl uint
		if reuse {
			ctl, nctl = 0b10, 2
		} else {
			e.lead, e.trail = lead, trail
			// '11', 5 bits of leading zeros, 6 bits of sig (64 as 0).
			ctl, nctl = 0b11<<11|uint64(lead)<<6|uint64(sig&63), 13
		}
		if nctl+sig <= 64 {
			w.write(ctl<<sig|x>>trail, nctl+sig)
		} else {
			w.write(ctl, nctl)
			w.write(x>>trail, sig)
		}
	}
}
