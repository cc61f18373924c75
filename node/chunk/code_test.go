package chunk

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// codeCost is what values cost under c, table included, or -1 if some
// value fits no bucket. It is the naive definition: find the bucket by
// scanning.
func codeCost(c *code, us []uint64) int {
	cost := tableBits(int(c.last) + 1)
	for _, u := range us {
		j := 0
		for ; j <= int(c.last); j++ {
			if u >= c.lo[j] && (u-c.lo[j])>>c.width[j] == 0 {
				break
			}
		}
		if j > int(c.last) {
			return -1
		}
		cost += int(c.plen[j]) + int(c.width[j])
	}
	return cost
}

func plan(us []uint64) (code, int) {
	var h histogram
	var maxU uint64
	for _, u := range us {
		h.add(u)
		maxU = max(maxU, u)
	}
	var sc planScratch
	return planCode(&h, maxU, &sc)
}

// bruteForce returns the cheapest cost over every code whose ascending
// widths come from cands, with at most maxK buckets.
func bruteForce(us []uint64, cands []uint8, maxK int) int {
	best := math.MaxInt
	for set := 1; set < 1<<len(cands); set++ {
		if bits.OnesCount(uint(set)) > maxK {
			continue
		}
		var ws []uint8
		for i, w := range cands {
			if set&(1<<i) != 0 {
				ws = append(ws, w)
			}
		}
		c := makeCode(ws)
		if cost := codeCost(&c, us); cost >= 0 && cost < best {
			best = cost
		}
	}
	return best
}

func TestPlanCode_ExactForSmallValues(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for trial := range 3000 {
		n := 1 + r.IntN(200)
		top := 1 + r.IntN(16)
		skew := r.Float64()
		us := make([]uint64, n)
		for i := range us {
			u := uint64(r.IntN(top))
			if r.Float64() < skew {
				u = uint64(r.IntN(2)) // mostly 0 and 1
			}
			us[i] = u
		}
		c, cost := plan(us)
		if got := codeCost(&c, us); got != cost {
			t.Fatalf("trial %d: planned cost %d, actual %d (code %+v)", trial, cost, got, c)
		}
		if want := bruteForce(us, []uint8{0, 1, 2, 3, 4}, maxBuckets); cost != want {
			t.Fatalf("trial %d: planned cost %d, best possible %d (values %v)", trial, cost, want, us)
		}
	}
}

func TestPlanCode_CostBoundsTheTruthAndIsNearOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	worst := 0.0
	for trial := range 600 {
		n := 1 + r.IntN(150)
		us := make([]uint64, n)
		base := r.IntN(50)
		spread := r.IntN(64)
		for i := range us {
			switch r.IntN(4) {
			case 0:
				us[i] = 0
			case 1:
				us[i] = uint64(r.IntN(1 + base))
			default:
				us[i] = r.Uint64() >> (63 - spread) >> 1
			}
			if r.IntN(50) == 0 {
				us[i] = r.Uint64() // outlier, up to 64 bits
			}
		}
		c, cost := plan(us)
		got := codeCost(&c, us)
		if got < 0 || got > cost {
			t.Fatalf("trial %d: planned cost %d, actual %d (code %+v)", trial, cost, got, c)
		}
		var cands []uint8
		seen := map[uint8]bool{}
		for _, w := range []uint8{0, 1, 2, 3, 4} {
			cands, seen[w] = append(cands, w), true
		}
		for _, u := range us {
			if w := uint8(bits.Len64(u)); !seen[w] {
				cands, seen[w] = append(cands, w), true
			}
		}
		if len(cands) > 12 {
			continue // too many subsets
		}
		slicesSort(cands)
		best := bruteForce(us, cands, maxBuckets)
		if ratio := float64(got) / float64(best); ratio > worst {
			worst = ratio
		}
		if float64(got) > 1.1*float64(best)+8 {
			t.Fatalf("trial %d: plan costs %d bits, a brute-force code %d", trial, got, best)
		}
	}
	t.Logf("worst plan / brute force = %.3f", worst)
}

func slicesSort(s []uint8) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestBitStream_RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for range 200 {
		type field struct {
			v  uint64
			nb uint
		}
		fields := make([]field, r.IntN(300))
		var w bitWriter
		for i := range fields {
			nb := uint(r.IntN(65))
			v := r.Uint64()
			if nb < 64 {
				v &= 1<<nb - 1
			}
			fields[i] = field{v, nb}
			w.write(v, nb)
		}
		b := w.flush()
		var rd bitReader
		rd.reset(b)
		total := 0
		for i, f := range fields {
			if got := rd.read(f.nb); got != f.v {
				t.Fatalf("field %d: read %x, wrote %x (%d bits)", i, got, f.v, f.nb)
			}
			total += int(f.nb)
		}
		if rd.overrun() || !rd.atCleanEnd() || len(b) != (total+7)/8 {
			t.Fatalf("after %d bits: overrun %v, clean end %v, %d bytes", total, rd.overrun(), rd.atCleanEnd(), len(b))
		}
		rd.read(8)
		if !rd.overrun() {
			t.Fatal("reading past the end is not an overrun")
		}
	}
}

func TestIntStream_AllParameterCombinations(t *testing.T) {
	// The encoder never picks some combinations (order 2 with an offset),
	// but decoders must read them; write each by hand and read it back.
	r := rand.New(rand.NewPCG(9, 9))
	for range 200 {
		n := 2 + r.IntN(100)
		xs := make([]int64, n)
		for i := range xs {
			xs[i] = r.Int64() >> r.UintN(64)
		}
		pred := r.Int64() >> r.UintN(64)
		for _, p := range []intParams{{}, {offset: true}, {order2: true}, {order2: true, offset: true}} {
			// Residuals, as the decoder defines them.
			var us []uint64
			prevD := int64(0)
			start := 1
			if p.order2 {
				p.first = xs[1] - xs[0] - pred
				prevD, start = xs[1]-xs[0], 2
			}
			var rs []int64
			for i := start; i < n; i++ {
				d := xs[i] - xs[i-1]
				res := d
				if p.order2 {
					res = d - prevD
				}
				prevD = d
				rs = append(rs, res)
			}
			if p.offset && len(rs) > 0 {
				p.base = rs[0]
				for _, x := range rs {
					p.base = min(p.base, x)
				}
			}
			for _, x := range rs {
				if p.offset {
					us = append(us, uint64(x-p.base))
				} else {
					us = append(us, zigzag(x))
				}
			}
			p.c, _ = plan(us)
			var w bitWriter
			p.write(&w)
			putInts(&w, &p, xs, nil)
			b := w.flush()

			var rd bitReader
			rd.reset(b)
			var d intDec
			if !d.p.read(&rd) {
				t.Fatal("reading parameters failed")
			}
			d.start(xs[0], pred)
			got := make([]int64, n-1)
			fillInts(&d, &rd, got, 0)
			if rd.overrun() || !rd.atCleanEnd() || !sameInts(got, xs[1:]) {
				t.Fatalf("params %+v: got %v, want %v", p, head(got), head(xs[1:]))
			}
		}
	}
}
