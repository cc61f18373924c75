package seqset

import (
	"math/rand/v2"
	"testing"
)

// naive is the oracle: a plain set of numbers below a small bound.
type naive map[uint64]bool

func (n naive) through(base uint64) uint64 {
	for n[base+1] {
		base++
	}
	return base
}

func TestSet_MatchesNaiveSet(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := 0; round < 200; round++ {
		var s Set
		ref := naive{}
		for op := 0; op < 40; op++ {
			switch rng.IntN(5) {
			case 0:
				x := uint64(rng.IntN(120))
				s.TrimThrough(x)
				for k := range ref {
					if k <= x {
						delete(ref, k)
					}
				}
			default:
				a := uint64(3 + rng.IntN(120))
				b := a + uint64(rng.IntN(8)) - 2 // sometimes inverted
				s.Add(a, b)
				for k := a; k <= b; k++ {
					ref[k] = true
				}
			}
			runs := s.Ranges()
			for i, r := range runs {
				if r.First > r.Last || (i > 0 && runs[i-1].Last+1 >= r.First) {
					t.Fatalf("runs not sorted, disjoint and apart: %v", runs)
				}
			}
			for x := uint64(0); x < 140; x++ {
				if s.Contains(x) != ref[x] {
					t.Fatalf("Contains(%d) = %v, want %v; runs %v", x, s.Contains(x), ref[x], runs)
				}
			}
			for _, base := range []uint64{0, 1, 17, 60} {
				if got, want := s.Through(base), ref.through(base); got != want {
					t.Fatalf("Through(%d) = %d, want %d; runs %v", base, got, want, runs)
				}
			}
		}
	}
}

func TestSet_ExtremeValues(t *testing.T) {
	var s Set
	s.Add(^uint64(0)-1, ^uint64(0))
	s.Add(1, 1)
	s.Add(2, 5)
	if got := s.Ranges(); len(got) != 2 || got[0] != (Range{1, 5}) || got[1] != (Range{^uint64(0) - 1, ^uint64(0)}) {
		t.Fatalf("runs %v", got)
	}
	if s.Through(0) != 5 || !s.Contains(^uint64(0)) || s.Contains(6) {
		t.Fatalf("Through(0)=%d Contains(max)=%v", s.Through(0), s.Contains(^uint64(0)))
	}
}
