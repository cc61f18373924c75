// Package seqset is a set of WAL sequence numbers kept as sorted, disjoint,
// non-adjacent inclusive runs. The replicator uses it for the sequence
// numbers the cloud covers: a segment covers prev_seq+1..seq, a gap
// after_seq+1..through_seq, and acked_through is where the run from 1 ends.
// A coordinator's replica store uses it for the sequence numbers of an
// edge it holds.
//
// A Set is a value type holding a slice; it is not safe for concurrent use.
package seqset

import (
	"slices"
	"sort"
)

// Range is an inclusive run First..Last, First <= Last.
type Range struct{ First, Last uint64 }

// Set is a set of sequence numbers. The zero value is empty.
type Set struct {
	runs []Range // sorted, disjoint, not adjacent
}

// Add adds first..last. An inverted range (last < first) adds nothing.
func (s *Set) Add(first, last uint64) {
	if last < first {
		return
	}
	// i: the first run that overlaps first..last or touches it from below.
	i := sort.Search(len(s.runs), func(k int) bool {
		r := s.runs[k]
		return r.Last >= first || r.Last+1 == first
	})
	j := i
	for j < len(s.runs) && (s.runs[j].First <= last || s.runs[j].First == last+1) {
		first = min(first, s.runs[j].First)
		last = max(last, s.runs[j].Last)
		j++
	}
	s.runs = slices.Replace(s.runs, i, j, Range{first, last})
}

// Contains reports whether x is in the set.
func (s *Set) Contains(x uint64) bool {
	i := sort.Search(len(s.runs), func(k int) bool { return s.runs[k].Last >= x })
	return i < len(s.runs) && s.runs[i].First <= x
}

// Through returns the highest S >= base such that every number in
// base+1..S is in the set (base itself when base+1 is not).
func (s *Set) Through(base uint64) uint64 {
	for _, r := range s.runs {
		if r.First > base+1 {
			break
		}
		if r.Last > base {
			base = r.Last
		}
	}
	return base
}

// TrimThrough removes every number <= x.
func (s *Set) TrimThrough(x uint64) {
	k := 0
	for k < len(s.runs) && s.runs[k].Last <= x {
		k++
	}
	s.runs = slices.Delete(s.runs, 0, k)
	if len(s.runs) > 0 && s.runs[0].First <= x {
		s.runs[0].First = x + 1
	}
}

// Ranges returns the runs in ascending order (a copy).
func (s *Set) Ranges() []Range { return slices.Clone(s.runs) }

// Len returns the number of runs.
func (s *Set) Len() int { return len(s.runs) }
