package rollup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/tributarydb/tributary/internal/enum"
)

// Hour and Day are the two rollup resolutions, in milliseconds.
const (
	Hour int64 = 3600_000
	Day  int64 = 24 * Hour
)

// ErrCorrupt is returned for a value that cannot be decoded.
var ErrCorrupt = errors.New("rollup: corrupt value")

// Func is an aggregate function over samples.
type Func int

// The supported functions. FuncNone means no aggregation.
const (
	FuncNone Func = iota
	FuncAvg
	FuncSum
	FuncMin
	FuncMax
	FuncCount
	FuncFirst
	FuncLast
)

var funcNames = [...]string{"none", "avg", "sum", "min", "max", "count", "first", "last"}

func (f Func) String() string { return enum.Name(funcNames[:], f, "func") }

// ParseFunc maps a name such as "avg" to its Func.
func ParseFunc(s string) (Func, error) {
	for i, n := range funcNames {
		if n == s {
			return Func(i), nil
		}
	}
	return FuncNone, fmt.Errorf("unknown aggregate function %q (want avg, sum, min, max, count, first or last)", s)
}

// Agg is the aggregate of a set of samples. The zero value is empty.
type Agg struct {
	Count         int64
	Sum, Min, Max float64
	First, Last   float64
	FirstT, LastT int64
}

// Add folds one sample into a. Samples may arrive in any time order.
func (a *Agg) Add(t int64, v float64) {
	if a.Count == 0 {
		*a = Agg{Count: 1, Sum: v, Min: v, Max: v, First: v, Last: v, FirstT: t, LastT: t}
		return
	}
	a.Count++
	a.Sum += v
	if v < a.Min {
		a.Min = v
	}
	if v > a.Max {
		a.Max = v
	}
	if t < a.FirstT {
		a.First, a.FirstT = v, t
	}
	if t >= a.LastT {
		a.Last, a.LastT = v, t
	}
}

// Merge folds b into a. REQUIRES: a and b aggregate disjoint sample sets.
func (a *Agg) Merge(b Agg) {
	switch {
	case b.Count == 0:
		return
	case a.Count == 0:
		*a = b
		return
	}
	a.Count += b.Count
	a.Sum += b.Sum
	if b.Min < a.Min {
		a.Min = b.Min
	}
	if b.Max > a.Max {
		a.Max = b.Max
	}
	if b.FirstT < a.FirstT {
		a.First, a.FirstT = b.First, b.FirstT
	}
	if b.LastT >= a.LastT {
		a.Last, a.LastT = b.Last, b.LastT
	}
}

// Value returns the aggregate under f. The caller guarantees Count > 0.
func (a Agg) Value(f Func) float64 {
	switch f {
	case FuncAvg:
		return a.Sum / float64(a.Count)
	case FuncSum:
		return a.Sum
	case FuncMin:
		return a.Min
	case FuncMax:
		return a.Max
	case FuncCount:
		return float64(a.Count)
	case FuncFirst:
		return a.First
	case FuncLast:
		return a.Last
	}
	return math.NaN()
}

// AppendBinary appends the encoding of a, relative to bucketStart, to dst.
func (a Agg) AppendBinary(dst []byte, bucketStart int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(a.Count))
	dst = binary.AppendVarint(dst, a.FirstT-bucketStart)
	dst = binary.AppendVarint(dst, a.LastT-a.FirstT)
	for _, f := range [...]float64{a.Sum, a.Min, a.Max, a.First, a.Last} {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
	}
	return dst
}

// Decode parses a value written by AppendBinary for the same bucketStart.
func Decode(b []byte, bucketStart int64) (Agg, error) {
	a, rest, err := decodePrefix(b, bucketStart)
	if err == nil && len(rest) != 0 {
		return a, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(rest))
	}
	return a, err
}

// decodePrefix decodes one Agg from the front of b and returns the rest.
func decodePrefix(b []byte, bucketStart int64) (Agg, []byte, error) {
	var a Agg
	c, n := binary.Uvarint(b)
	if n <= 0 || c == 0 || c > math.MaxInt64 {
		return a, nil, fmt.Errorf("%w: bad count", ErrCorrupt)
	}
	b = b[n:]
	d1, n := binary.Varint(b)
	if n <= 0 {
		return a, nil, fmt.Errorf("%w: bad first timestamp", ErrCorrupt)
	}
	b = b[n:]
	d2, n := binary.Varint(b)
	if n <= 0 || d2 < 0 {
		return a, nil, fmt.Errorf("%w: bad last timestamp", ErrCorrupt)
	}
	b = b[n:]
	if len(b) < 40 {
		return a, nil, fmt.Errorf("%w: %d value bytes, want 40", ErrCorrupt, len(b))
	}
	a.Count = int64(c)
	a.FirstT = bucketStart + d1
	a.LastT = a.FirstT + d2
	f := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[i*8:])) }
	a.Sum, a.Min, a.Max, a.First, a.Last = f(0), f(1), f(2), f(3), f(4)
	return a, b[40:], nil
}

// BucketStart returns the start of the bucket of width step containing t,
// aligned to multiples of step since the epoch (also for negative t).
func BucketStart(t, step int64) int64 {
	b := t - t%step
	if t < 0 && t%step != 0 {
		b -= step
	}
	return b
}
