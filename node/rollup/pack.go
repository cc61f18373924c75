package rollup

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// DailySpan is the width of one Daily pack: 32 days, epoch-aligned.
const DailySpan = 32 * Day

// Hourly holds the hourly rollups of one series for one UTC day: Hours[h] is
// hour h (empty when Count is 0).
type Hourly struct {
	Hours [24]Agg
}

// Daily holds the daily rollups of one series for one pack of DailySpan:
// Days[i] covers packStart + i*Day (empty when Count is 0).
type Daily struct {
	Days [32]Agg
}

// PackStart returns the start of the Daily pack containing t.
func PackStart(t int64) int64 { return BucketStart(t, DailySpan) }

// Total merges the day's hours into the day's rollup.
func (d *Hourly) Total() Agg {
	var t Agg
	for _, h := range d.Hours {
		t.Merge(h)
	}
	return t
}

// AppendBinary appends the packed encoding of the day's hours.
// REQUIRES: every non-empty hour's samples lie inside the hour.
func (d *Hourly) AppendBinary(dst []byte, dayStart int64) []byte {
	return appendPack(dst, hourlyPack, d.Hours[:], dayStart)
}

// DecodeHourly parses a packed day written by Hourly.AppendBinary.
func DecodeHourly(b []byte, dayStart int64) (Hourly, error) {
	var d Hourly
	if err := decodePack(b, hourlyPack, d.Hours[:], dayStart); err != nil {
		return Hourly{}, err
	}
	return d, nil
}

// AppendBinary appends the packed encoding of the pack's days.
// REQUIRES: every non-empty day's samples lie inside the day.
func (d *Daily) AppendBinary(dst []byte, packStart int64) []byte {
	return appendPack(dst, dailyPack, d.Days[:], packStart)
}

// DecodeDaily parses a pack written by Daily.AppendBinary.
func DecodeDaily(b []byte, packStart int64) (Daily, error) {
	var d Daily
	if err := decodePack(b, dailyPack, d.Days[:], packStart); err != nil {
		return Daily{}, err
	}
	return d, nil
}

// packLayout describes one packed tier: slots buckets of width ms each.
type packLayout struct {
	format    byte
	slots     int // at most 32
	width     int64
	maskBytes int
	name      string // the tier and its slot, for errors
	slot      string
}

var (
	hourlyPack = packLayout{format: 1, slots: 24, width: Hour, maskBytes: 3, name: "hourly", slot: "hour"}
	dailyPack  = packLayout{format: 2, slots: 32, width: Day, maskBytes: 4, name: "daily", slot: "day"}
)

// floatFields names the five float columns in their order in a pack.
var floatFields = [5]string{"sum", "min", "max", "first", "last"}

// appendPack appends the packed encoding of aggs, slot i starting at
// start + i*l.width. REQUIRES: len(aggs) == l.slots.
func appendPack(dst []byte, l packLayout, aggs []Agg, start int64) []byte {
	var mask uint32
	var ints [3][32]int64
	var floats [5][32]float64
	k := 0
	for i, a := range aggs {
		if a.Count <= 0 {
			continue
		}
		mask |= 1 << i
		ints[0][k] = a.Count
		ints[1][k] = a.FirstT - (start + int64(i)*l.width)
		ints[2][k] = a.LastT - a.FirstT
		floats[0][k], floats[1][k], floats[2][k] = a.Sum, a.Min, a.Max
		floats[3][k], floats[4][k] = a.First, a.Last
		k++
	}
	dst = append(dst, l.format)
	for i := range l.maskBytes {
		dst = append(dst, byte(mask>>(8*i)))
	}
	if k == 0 {
		return dst
	}
	for c := range ints {
		dst = appendInts(dst, ints[c][:k])
	}
	for c := range floats {
		dst = appendFloats(dst, floats[c][:k])
	}
	return dst
}

// decodePack parses a value written by appendPack into aggs, which it
// expects zeroed. REQUIRES: len(aggs) == l.slots.
func decodePack(b []byte, l packLayout, aggs []Agg, start int64) error {
	if len(b) < 1+l.maskBytes {
		return fmt.Errorf("%w: %s pack of %d bytes", ErrCorrupt, l.name, len(b))
	}
	if b[0] != l.format {
		return fmt.Errorf("%w: format %d, want %d (%s pack)", ErrCorrupt, b[0], l.format, l.name)
	}
	var mb [4]byte
	copy(mb[:], b[1:1+l.maskBytes])
	mask := binary.LittleEndian.Uint32(mb[:])
	if l.slots < 32 && mask>>l.slots != 0 {
		return fmt.Errorf("%w: bad %s mask", ErrCorrupt, l.slot)
	}
	k := bits.OnesCount32(mask)
	i := 1 + l.maskBytes
	if k == 0 {
		if len(b) != i {
			return fmt.Errorf("%w: %d trailing bytes after an empty mask", ErrCorrupt, len(b)-i)
		}
		return nil
	}
	var slot [32]int // slot[j] holds the j-th entry of every column
	for j, m := 0, mask; m != 0; j, m = j+1, m&(m-1) {
		slot[j] = bits.TrailingZeros32(m)
	}

	var col [32]int64
	xs := col[:k]
	if i = readInts(b, i, xs); i > len(b) {
		return fmt.Errorf("%w: bad count column", ErrCorrupt)
	}
	for j, c := range xs {
		if c <= 0 {
			return fmt.Errorf("%w: %s %d has count %d", ErrCorrupt, l.slot, slot[j], c)
		}
		aggs[slot[j]].Count = c
	}
	// Firsts go in as offsets from the slot start, then spans move them
	// to absolute times; each entry is checked before it is used.
	if i = readInts(b, i, xs); i > len(b) {
		return fmt.Errorf("%w: bad first time column", ErrCorrupt)
	}
	for j, off := range xs {
		if off < 0 || off >= l.width {
			return fmt.Errorf("%w: %s %d holds samples outside it", ErrCorrupt, l.slot, slot[j])
		}
		aggs[slot[j]].FirstT = off
	}
	if i = readInts(b, i, xs); i > len(b) {
		return fmt.Errorf("%w: bad last time column", ErrCorrupt)
	}
	for j, span := range xs {
		a := &aggs[slot[j]]
		if span < 0 || span >= l.width-a.FirstT {
			return fmt.Errorf("%w: %s %d holds samples outside it", ErrCorrupt, l.slot, slot[j])
		}
		a.FirstT += start + int64(slot[j])*l.width
		a.LastT = a.FirstT + span
	}

	var fs [5][32]float64
	for c, name := range floatFields {
		if i = readFloats(b, i, fs[c][:k]); i > len(b) {
			return fmt.Errorf("%w: bad %s column", ErrCorrupt, name)
		}
	}
	for j := range k {
		a := &aggs[slot[j]]
		a.Sum, a.Min, a.Max = fs[0][j], fs[1][j], fs[2][j]
		a.First, a.Last = fs[3][j], fs[4][j]
	}
	if i != len(b) {
		return fmt.Errorf("%w: %d trailing bytes after the %ss", ErrCorrupt, len(b)-i, l.slot)
	}
	return nil
}
