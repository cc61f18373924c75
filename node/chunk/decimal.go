package chunk

import (
	"math"
)

// maxDecimalExp is the largest decimal exponent e a chunk may use (a 4-bit
// field). Powers of ten up to 1e22 are exact float64s, so every pow10 entry
// is exact.
const maxDecimalExp = 15

var pow10 = [maxDecimalExp + 1]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// maxMantissa bounds |m|: integers up to 2^53 convert to float64 exactly.
const maxMantissa = 1 << 53

// mantissa returns m with float64(m)/10^e == v bit for bit, if there is
// one with |m| < 2^53. The decoder computes exactly float64(m)/pow10[e], so
// the check is that expression and nothing looser; it rejects -0.0 (m = 0
// decodes as +0.0), NaN and ±Inf.
func mantissa(v float64, e int) (int64, bool) {
	x := math.RoundToEven(v * pow10[e])
	if !(math.Abs(x) < maxMantissa) {
		return 0, false
	}
	m := int64(x)
	return m, math.Float64bits(float64(m)/pow10[e]) == math.Float64bits(v)
}

// raiseExp is called when vs[i] is not m/10^e. It finds the smallest
// larger exponent at which it is, stores its mantissa in ms[i] and
// rescales ms[:i] to the new exponent, or reports that there is none.
//
// Rescaling is exact: the values already done are m/10^e, and m*10^k /
// 10^(e+k) is the same rational, which rounds to the same float64, as long
// as m*10^k stays below 2^53 (checked) and 10^(e+k) is exact (e+k <= 15).
func raiseExp(vs []float64, ms []int64, i, e int) (int, bool) {
	e0 := e
	var m int64
	for {
		if e++; e > maxDecimalExp {
			return 0, false
		}
		var ok bool
		if m, ok = mantissa(vs[i], e); ok {
			break
		}
	}
	scale := int64(pow10[e-e0])
	lim := maxMantissa / scale
	for j, x := range ms[:i] {
		if x >= lim || x <= -lim {
			return 0, false
		}
		ms[j] = x * scale
	}
	ms[i] = m
	return e, true
}
