package chunk

import "encoding/binary"

// bitWriter appends a bit stream to a byte slice, most significant bit
// first. The zero value writes to a nil slice.
type bitWriter struct {
	b   []byte
	acc uint64 // pending bits, left-aligned
	n   uint   // number of pending bits in acc; INVARIANT: n < 64
}

// write appends the low nb bits of v.
// REQUIRES: nb <= 64 and v < 1<<nb (no stray high bits).
func (w *bitWriter) write(v uint64, nb uint) {
	free := 64 - w.n
	if nb < free {
		w.acc |= v << (free - nb)
		w.n += nb
		return
	}
	over := nb - free // bits of v that do not fit in acc
	w.acc |= v >> over
	w.b = binary.BigEndian.AppendUint64(w.b, w.acc)
	w.n = over
	w.acc = v << (64 - over) // NB: a shift by 64 is 0 in Go, which is right for over == 0
}

// appendBits is write for a hot loop that keeps the writer's state in
// locals (acc, n, b): it appends the low nb bits of v and returns the new
// state. It is small enough to be inlined, so the loop's state stays in
// registers. REQUIRES: 1 <= nb <= 64 (the shifts are masked so that the
// compiler knows they stay under 64).
func appendBits(acc uint64, n uint, b []byte, v uint64, nb uint) (uint64, uint, []byte) {
	free := 64 - n
	if nb < free {
		return acc | v<<((free-nb)&63), n + nb, b
	}
	over := nb - free // bits of v that do not fit in acc
	b = binary.BigEndian.AppendUint64(b, acc|v>>(over&63))
	return v << ((63 - over) & 63) << 1, over, b
}

// flush pads the stream with zero bits to a byte boundary and returns the
// bytes. The writer must not be used afterwards.
func (w *bitWriter) flush() []byte {
	for w.n > 0 {
		w.b = append(w.b, byte(w.acc>>56))
		w.acc <<= 8
		w.n -= min(w.n, 8)
	}
	return w.b
}

// bitReader reads a bit stream written by bitWriter. Reading past the end
// yields zero bits and is reported by overrun, so that hot loops need only
// one check per sample instead of one per field.
type bitReader struct {
	b   []byte
	pos int // next byte of b to load into buf
	// buf holds the unread bits, left-aligned. The n top bits are valid;
	// INVARIANT: the bits below them are zero or the stream bits that follow.
	buf  uint64
	n    uint
	past uint // zero bits loaded from beyond the end of b
}

func (r *bitReader) reset(b []byte) { *r = bitReader{b: b} }

// refill tops buf up to at least 57 valid bits.
func (r *bitReader) refill() {
	if r.pos+8 <= len(r.b) {
		r.buf |= binary.BigEndian.Uint64(r.b[r.pos:]) >> r.n
		k := (63 - r.n) >> 3 // whole bytes that fit
		r.pos += int(k)
		r.n += k << 3
		return
	}
	r.refillSlow()
}

func (r *bitReader) refillSlow() {
	for r.n <= 56 {
		if r.pos < len(r.b) {
			r.buf |= uint64(r.b[r.pos]) << (56 - r.n)
			r.pos++
		} else {
			r.past += 8
		}
		r.n += 8
	}
}

// read returns the next nb bits. REQUIRES: nb <= 64.
func (r *bitReader) read(nb uint) uint64 {
	if nb > 56 {
		hi := r.read(nb - 32)
		return hi<<32 | r.read(32)
	}
	if r.n < nb {
		r.refill()
	}
	v := r.buf >> (64 - nb) // NB: nb == 0 shifts by 64, giving 0
	r.buf <<= nb
	r.n -= nb
	return v
}

// overrun reports whether more bits were read than the stream holds.
func (r *bitReader) overrun() bool { return r.past > r.n }

// remaining returns the number of unread bits in the stream (0 after an
// overrun).
func (r *bitReader) remaining() int {
	if r.overrun() {
		return 0
	}
	return (len(r.b)-r.pos)*8 + int(r.n-r.past)
}

// atCleanEnd reports whether the stream is fully read except for fewer
// than 8 padding bits, all zero.
func (r *bitReader) atCleanEnd() bool {
	rem := r.remaining()
	if r.overrun() || rem >= 8 {
		return false
	}
	// rem < 8 implies every byte is loaded, so the top rem bits of buf are
	// the padding.
	return r.buf>>(64-uint(rem)) == 0
}
