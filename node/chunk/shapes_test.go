package chunk

import "math/rand/v2"

// A shape generates the samples of one series, deterministically from a
// seed, for benchmarks and compression tests.
type shape struct {
	name string
	gen  func(r *rand.Rand, n int) ([]int64, []float64)
}

const (
	startMs    = int64(1_767_225_600_000) // 2026-01-01T00:00:00Z
	intervalMs = 10_000
)

func regularTs(n int) []int64 {
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = startMs + int64(i)*intervalMs
	}
	return ts
}

// walk returns n decimals m/10^digits whose mantissa m starts at start and
// moves by at most ±step per sample, staying put half the time: a room
// thermometer read to 0.1 °C. Values are made the way a parser makes them
// (the float nearest to m/10^digits), not by adding 0.1 repeatedly.
func walk(r *rand.Rand, n, digits int, start, step int64) []float64 {
	vs := make([]float64, n)
	m := start
	for i := range vs {
		vs[i] = float64(m) / pow10[digits]
		if r.IntN(2) == 0 {
			m += r.Int64N(2*step+1) - step
		}
	}
	return vs
}

var shapes = []shape{
	{"sensor-decimal", func(r *rand.Rand, n int) ([]int64, []float64) {
		return regularTs(n), walk(r, n, 1, 213, 1)
	}},
	{"sensor-2dp", func(r *rand.Rand, n int) ([]int64, []float64) {
		return regularTs(n), walk(r, n, 2, 2130, 4)
	}},
	{"jittery-ts", func(r *rand.Rand, n int) ([]int64, []float64) {
		ts := regularTs(n)
		for i := range ts {
			ts[i] += r.Int64N(51) - 25 // scrape jitter ±25 ms
		}
		return ts, walk(r, n, 1, 213, 1)
	}},
	{"noisy-float", func(r *rand.Rand, n int) ([]int64, []float64) {
		vs := make([]float64, n)
		for i := range vs {
			vs[i] = 20 + r.NormFloat64()
		}
		return regularTs(n), vs
	}},
	{"constant", func(r *rand.Rand, n int) ([]int64, []float64) {
		vs := make([]float64, n)
		for i := range vs {
			vs[i] = 42.5
		}
		return regularTs(n), vs
	}},
	{"counter", func(r *rand.Rand, n int) ([]int64, []float64) {
		vs := make([]float64, n)
		c := float64(r.Int64N(1 << 30))
		for i := range vs {
			vs[i] = c
			c += float64(r.IntN(200)) // requests per interval
		}
		return regularTs(n), vs
	}},
}

func shapeByName(name string) shape {
	for _, s := range shapes {
		if s.name == name {
			return s
		}
	}
	panic("no shape " + name)
}

// series returns count chunks of n samples of a shape from a fixed seed.
func series(s shape, n, count int) (tss [][]int64, vss [][]float64) {
	r := rand.New(rand.NewPCG(uint64(n), uint64(len(s.name))))
	for range count {
		ts, vs := s.gen(r, n)
		tss, vss = append(tss, ts), append(vss, vs)
	}
	return tss, vss
}
