package chunk

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoders. They must never panic,
// and whatever they accept must be a valid chunk: Info agrees with it, the
// Iterator yields the same samples, and they encode and decode again.
func FuzzDecode(f *testing.F) {
	for _, s := range shapes {
		for _, n := range []int{1, 2, 3, 17, 120} {
			tss, vss := series(s, n, 1)
			f.Add(Encode(nil, tss[0], vss[0]))
			for enc := range numVal {
				f.Add(encode(nil, tss[0], vss[0], 1<<enc))
			}
		}
	}
	f.Add([]byte{})
	f.Add([]byte{formatVersion << versionShift})
	f.Add([]byte{formatVersion<<versionShift | valDecimal, 1, 0, 0x08, 0x20})
	f.Add(Encode(nil, []int64{math.MinInt64, math.MaxInt64}, []float64{math.NaN(), math.Inf(-1)}))
	f.Add(Encode(nil, []int64{math.MinInt64, 0, 1, math.MaxInt64}, []float64{math.Copysign(0, -1), 1, 2, 3}))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecodeConsistent(t, b)
	})
}

// FuzzRoundTrip derives samples from the fuzzer's bytes and requires every
// encoding of them to decode to the same samples, bit for bit.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x05\x05\x05\x01\x01\x02abcdefgh\x03\x07\x0b"))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\x7f\x01"))                                     // starts at MaxInt64
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x80\xc1\xff\xff\xff\xff\xff\xff\xff\xff\x01")) // MinInt64, huge delta
	f.Add([]byte("\x10\x27\x00\x00\x00\x00\x00\x00\x89\x01\x85\x02\x81\xfe\xe1\x05\xe5\x7f\x0d\x11\x15\x19\x1d"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\xf8\x7f\x02\x01\x00\x00\x00\x00\x00\xf0\x7f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, vs := samplesFromBytes(data)
		if len(ts) == 0 {
			return
		}
		checkRoundTrip(t, ts, vs)
		for enc := range numVal {
			b := encode(nil, ts, vs, 1<<enc)
			gotTs, gotVs, err := Decode(b, nil, nil)
			if err != nil || !sameInts(gotTs, ts) || !sameBits(gotVs, vs) {
				t.Fatalf("value encoding %d alone: %v", enc, err)
			}
		}
	})
}

// samplesFromBytes turns fuzz input into valid samples: 8 bytes of first
// timestamp, then per sample an op byte (and its operands). The op's low 2
// bits pick the value (repeat, decimal walk, raw bits, special), bits 2-4
// a parameter, bits 5-7 the next timestamp delta.
func samplesFromBytes(data []byte) ([]int64, []float64) {
	if len(data) < 9 {
		return nil, nil
	}
	t := int64(binary.LittleEndian.Uint64(data))
	data = data[8:]
	next := func(n int) uint64 { // little-endian, zero past the end
		var v uint64
		for i := range n {
			if len(data) > 0 {
				v |= uint64(data[0]) << (8 * i)
				data = data[1:]
			}
		}
		return v
	}
	specials := [8]float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0,
		math.MaxFloat64, math.SmallestNonzeroFloat64, math.Float64frombits(0x7ff0_dead_beef_0001)}
	var ts []int64
	var vs []float64
	var v float64
	var m int64
	for len(data) > 0 && len(ts) < MaxSamples {
		op := data[0]
		data = data[1:]
		param := int(op >> 2 & 7)
		switch op & 3 {
		case 0: // repeat
		case 1:
			m += int64(int8(next(1)))
			v = float64(m) / pow10[param]
		case 2:
			v = math.Float64frombits(next(8))
		case 3:
			v = specials[param]
		}
		ts, vs = append(ts, t), append(vs, v)
		var d uint64
		switch op >> 5 {
		case 0, 1, 2:
			d = 1000
		case 3:
			d = 1
		case 4:
			d = 1 + next(1)
		case 5:
			d = 1 + next(2)
		case 6:
			d = 1 + next(8)
		case 7:
			d = uint64(1000 + int64(int8(next(1))))
		}
		if d > uint64(math.MaxInt64-t) || d == 0 {
			break // the next timestamp would not fit
		}
		t += int64(d)
	}
	return ts, vs
}
