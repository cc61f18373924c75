package chunk

import (
	"encoding/binary"
	"math"
)

// decoder holds the state of reading one chunk; Decode and Iterator share
// it, so they accept and reject exactly the same bytes.
type decoder struct {
	n          int // samples in the chunk
	i          int // samples decoded so far
	minT, maxT int64
	lastT      int64 // last timestamp decoded
	step       int64 // the interval of evenly spaced timestamps, else 0
	enc        uint8
	v0         float64 // first value
	tr, vr     bitReader
	ts         intDec
	ms         intDec  // valDecimal
	p10        float64 // valDecimal: 10^e
	xd         xorDec  // valXOR
}

// init reads the header and the stream parameters.
func (d *decoder) init(b []byte) error {
	h, err := parseHeader(b)
	if err != nil {
		return err
	}
	*d = decoder{n: h.n, minT: h.minT, maxT: h.maxT, enc: h.enc}
	rest := b[h.size:]
	if h.regular {
		d.step = int64(uint64(h.maxT-h.minT) / uint64(h.n-1))
	} else if d.n >= 2 {
		l, k := binary.Uvarint(rest)
		if k <= 0 || l > uint64(len(rest)-k) {
			return corruptf("read chunk: bad timestamp stream length")
		}
		d.tr.reset(rest[k : k+int(l)])
		rest = rest[k+int(l):]
		if !d.ts.p.read(&d.tr) || d.tr.overrun() {
			return corruptf("read chunk: bad timestamp stream parameters")
		}
		d.ts.start(d.minT, predictDelta(d.n, uint64(d.maxT-d.minT)))
		if need := d.ts.p.c.minBits() * d.ts.p.residuals(d.n); need > d.tr.remaining() {
			return corruptf("read chunk: %d timestamps need at least %d bits, have %d", d.n, need, d.tr.remaining())
		}
	}
	r := &d.vr
	r.reset(rest)
	valueMin, valueCount := 0, d.n-1 // fewest bits per coded value; coded values
	switch d.enc {
	case valDecimal:
		e := r.read(4)
		if e > maxDecimalExp {
			return corruptf("read chunk: decimal exponent %d over %d", e, maxDecimalExp)
		}
		d.p10 = pow10[e]
		u, ok := readVarbits(r)
		if !ok {
			return corruptf("read chunk: bad first mantissa")
		}
		m0 := unzigzag(u)
		d.v0 = float64(m0) / d.p10
		if d.n >= 2 {
			if !d.ms.p.read(r) {
				return corruptf("read chunk: bad value stream parameters")
			}
			d.ms.start(m0, 0)
			valueMin, valueCount = d.ms.p.c.minBits(), d.ms.p.residuals(d.n)
		}
	case valXOR, valRaw, valConst:
		d.xd.prev = r.read(64)
		d.v0 = math.Float64frombits(d.xd.prev)
		switch d.enc {
		case valXOR:
			valueMin = 1
		case valRaw:
			valueMin = 64
		}
	}
	if r.overrun() {
		return corruptf("read chunk: truncated value stream parameters")
	}
	if need := valueMin * valueCount; need > r.remaining() {
		return corruptf("read chunk: %d values need at least %d bits, have %d", d.n, need, r.remaining())
	}
	return nil
}

// fill decodes the next len(ts) samples into ts and vs.
// REQUIRES: len(ts) == len(vs) <= d.n-d.i.
func (d *decoder) fill(ts []int64, vs []float64) error {
	if len(ts) == 0 {
		return nil
	}
	t, v := ts, vs
	prev := d.lastT
	if d.i == 0 {
		ts[0], vs[0] = d.minT, d.v0
		prev = d.minT
		t, v = ts[1:], vs[1:]
	}
	if d.step != 0 {
		// INVARIANT: the header checked that minT + (n-1)*step is maxT.
		x := d.lastT
		if d.i == 0 {
			x = d.minT
		}
		for i := range t {
			x += d.step
			t[i] = x
		}
	} else {
		fillInts(&d.ts, &d.tr, t, 0)
	}
	switch d.enc {
	case valDecimal:
		fillInts(&d.ms, &d.vr, v, d.p10)
	case valXOR:
		if !fillXOR(&d.xd, &d.vr, v) {
			return corruptf("decode chunk: bad XOR window after sample %d", d.i)
		}
	case valRaw:
		for i := range v {
			v[i] = math.Float64frombits(d.vr.read(64))
		}
	case valConst:
		for i := range v {
			v[i] = d.v0
		}
	}
	if d.tr.overrun() || d.vr.overrun() {
		return corruptf("decode chunk: truncated after sample %d", d.i)
	}
	for i, x := range t {
		if x <= prev {
			return corruptf("decode chunk: timestamp %d does not increase on %d", x, prev)
		}
		prev = t[i]
	}
	d.lastT = prev
	d.i += len(ts)
	if d.i == d.n {
		if prev != d.maxT {
			return corruptf("decode chunk: last timestamp %d, header says %d", prev, d.maxT)
		}
		if !d.tr.atCleanEnd() || !d.vr.atCleanEnd() {
			return corruptf("decode chunk: trailing bytes")
		}
	}
	return nil
}

// iteratorBatch is how many samples an Iterator decodes at a time.
const iteratorBatch = 64

// Iterator streams the samples of a chunk without materialising them: it
// decodes a small batch at a time into a buffer of its own, and does not
// allocate after NewIterator or Reset (except to build an error). An
// Iterator is not safe for concurrent use.
//
//	it := chunk.NewIterator(b)
//	for it.Next() {
//		t, v := it.At()
//		...
//	}
//	if err := it.Err(); err != nil {
//		...
//	}
type Iterator struct {
	d   decoder
	err error
	k   int // current sample in the batch
	m   int // samples in the batch
	ts  [iteratorBatch]int64
	vs  [iteratorBatch]float64
}

// NewIterator returns an iterator over chunk b. A malformed chunk is
// reported by Err once Next returns false.
func NewIterator(b []byte) *Iterator {
	it := new(Iterator)
	it.Reset(b)
	return it
}

// Reset makes the iterator start over on chunk b, reusing its memory.
func (it *Iterator) Reset(b []byte) {
	it.k, it.m = 0, 0
	it.err = it.d.init(b)
	if it.err != nil {
		it.d.n = 0
	}
}

// Next advances to the next sample and reports whether there is one. It
// returns false at the end of the chunk and on error; Err tells them
// apart. Samples returned before an error came from bytes that are corrupt
// further on.
func (it *Iterator) Next() bool {
	if it.k+1 < it.m {
		it.k++
		return true
	}
	return it.nextBatch()
}

func (it *Iterator) nextBatch() bool {
	d := &it.d
	m := min(iteratorBatch, d.n-d.i)
	if m <= 0 {
		return false
	}
	if err := d.fill(it.ts[:m], it.vs[:m]); err != nil {
		it.err, d.n, it.m = err, d.i, 0
		return false
	}
	it.k, it.m = 0, m
	return true
}

// NextBatch advances past the samples decoded so far and returns the
// next ones, at least one, in time order: the rest of the batch Next is
// in, or else the next batch decoded. The slices alias the iterator's
// buffer and are valid until the next call of Next, NextBatch or Reset.
// It returns ok false at the end of the chunk and on error, as Next does;
// afterwards At is the last sample returned. Next and NextBatch may be
// mixed: together they visit every sample once.
func (it *Iterator) NextBatch() (ts []int64, vs []float64, ok bool) {
	k := it.k + 1
	if k >= it.m {
		if !it.nextBatch() {
			return nil, nil, false
		}
		k = 0
	}
	ts, vs = it.ts[k:it.m], it.vs[k:it.m]
	it.k = it.m - 1
	return ts, vs, true
}

// At returns the current sample. It is only meaningful after Next
// returned true.
func (it *Iterator) At() (t int64, v float64) {
	return it.ts[it.k], it.vs[it.k]
}

// Err returns the error that stopped the iteration, if any; it wraps
// ErrCorrupt.
func (it *Iterator) Err() error { return it.err }
