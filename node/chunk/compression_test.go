package chunk

import (
	"math"
	"math/bits"
	"testing"
)

// gorillaBits is the size of the samples in the Gorilla paper's format
// (Pelkonen et al., VLDB 2015): a 64-bit first timestamp, a 14-bit first
// delta, delta-of-delta buckets {0, 7, 9, 12, 32 bits}, and XOR values
// that always reuse a window that fits. It is the baseline to beat.
func gorillaBits(ts []int64, vs []float64) int {
	n := 64 + 64 // first timestamp and value
	if len(ts) > 1 {
		n += 14
	}
	prevD := int64(0)
	for i := 2; i < len(ts); i++ {
		d := ts[i] - ts[i-1]
		dd := d - prevD
		if i == 2 {
			dd = d - (ts[1] - ts[0])
		}
		prevD = d
		switch {
		case dd == 0:
			n++
		case dd >= -63 && dd <= 64:
			n += 2 + 7
		case dd >= -255 && dd <= 256:
			n += 3 + 9
		case dd >= -2047 && dd <= 2048:
			n += 4 + 12
		default:
			n += 4 + 32
		}
	}
	prev := math.Float64bits(vs[0])
	lead, trail := -1, 0
	for _, v := range vs[1:] {
		x := math.Float64bits(v) ^ prev
		prev = math.Float64bits(v)
		if x == 0 {
			n++
			continue
		}
		l, t := min(bits.LeadingZeros64(x), 31), bits.TrailingZeros64(x)
		if lead >= 0 && l >= lead && t >= trail {
			n += 2 + 64 - lead - trail
			continue
		}
		lead, trail = l, t
		n += 2 + 5 + 6 + 64 - l - t
	}
	return n
}

// TestCompression checks bytes per sample for every benchmark shape
// against the project's targets and Gorilla, and logs them (go test -v).
func TestCompression(t *testing.T) {
	// Upper bounds in bytes per sample: regressions past these fail.
	limits := map[string][2]float64{ // n=120, n=1024
		"sensor-decimal": {0.35, 0.22},
		"sensor-2dp":     {0.50, 0.35},
		"jittery-ts":     {1.30, 1.10},
		"noisy-float":    {6.9, 6.8},
		"constant":       {0.20, 0.03},
		"counter":        {1.25, 1.05},
	}
	for _, s := range shapes {
		for k, n := range benchSizes {
			tss, vss := series(s, n, benchChunks)
			var auto, xorOnly, gorilla int
			for i := range tss {
				auto += len(Encode(nil, tss[i], vss[i]))
				xorOnly += len(encode(nil, tss[i], vss[i], 1<<valXOR))
				gorilla += (gorillaBits(tss[i], vss[i]) + 7) / 8
			}
			per := func(b int) float64 { return float64(b) / float64(n*benchChunks) }
			t.Logf("%-15s n=%-5d %.3f B/sample (XOR values %.3f, Gorilla %.3f)", s.name, n, per(auto), per(xorOnly), per(gorilla))
			if got := per(auto); got > limits[s.name][k] {
				t.Errorf("%s n=%d: %.3f B/sample, limit %.3f", s.name, n, got, limits[s.name][k])
			}
			if auto > xorOnly || auto > gorilla {
				t.Errorf("%s n=%d: %d bytes, more than XOR values (%d) or Gorilla (%d)", s.name, n, auto, xorOnly, gorilla)
			}
		}
	}
}
