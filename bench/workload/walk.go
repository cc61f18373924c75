package workload

import (
	"math"
	"math/rand/v2"
)

// newRand returns the random stream of one unit. Streams of different units
// (or seeds) are independent; the same (seed, unit) always gives the same
// stream.
func newRand(seed uint64, unit int) *rand.PCG {
	return rand.NewPCG(seed, 0x9e3779b97f4a7c15^uint64(unit))
}

// uniform returns a float64 in [0, 1).
func uniform(r *rand.PCG) float64 {
	return float64(r.Uint64()>>11) / (1 << 53)
}

// noise returns a value in (-1, 1) with a triangular distribution centred
// on 0, a cheap stand-in for Gaussian noise.
func noise(r *rand.PCG) float64 {
	return uniform(r) - uniform(r)
}

// quantize rounds x to a multiple of 1/scale. For a decimal scale (10, 100,
// ...) the result is the float64 nearest to that decimal, exactly what
// parsing its decimal text gives: the division of two exactly representable
// integers is correctly rounded. For a power-of-two scale it is exact.
// Negative zero becomes zero, so that a reading never prints as "-0".
func quantize(x, scale float64) float64 {
	q := math.Round(x * scale)
	if q == 0 {
		return 0
	}
	return q / scale
}

// walk is a slow random walk over integer quanta, reflected at its bounds,
// so that its values are decimals with a fixed number of fractional digits.
//
// Each step moves with probability moveP16/65536, by 1..maxStep quanta up or
// down.
type walk struct {
	q        int64 // current value, in quanta
	min, max int64 // bounds, in quanta
	maxStep  uint64
	moveP16  uint64
	scale    float64 // quanta per unit
}

// newWalk starts a walk inside [lo, hi] (in units) at a random point of the
// middle 60% of the range.
func newWalk(r *rand.PCG, lo, hi float64, decimals int, maxStep int, moveP float64) walk {
	scale := math.Pow10(decimals)
	w := walk{
		min:     int64(math.Round(lo * scale)),
		max:     int64(math.Round(hi * scale)),
		maxStep: uint64(maxStep),
		moveP16: uint64(moveP * 65536),
		scale:   scale,
	}
	span := float64(w.max - w.min)
	w.q = w.min + int64(span*(0.2+0.6*uniform(r)))
	return w
}

func (w *walk) next(r *rand.PCG) float64 {
	x := r.Uint64()
	if x&0xffff < w.moveP16 {
		step := int64((x>>17)%w.maxStep) + 1
		if x&(1<<16) != 0 {
			step = -step
		}
		w.q += step
		if w.q > w.max {
			w.q = 2*w.max - w.q
		}
		if w.q < w.min {
			w.q = 2*w.min - w.q
		}
	}
	return float64(w.q) / w.scale
}
