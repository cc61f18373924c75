package catalog

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Lack lists: what a replica may lack of an edge's held segments. The
// functions here never modify their input; a changed list is a copy.

// TouchMergeSpanMs bounds the merging of touching lack runs: two runs
// whose numbers touch merge only while their joined time span is at most
// this long (one hour). A copy goes by time span, so the few segments
// recorded as lacking next to a long run (a day of history being copied)
// must not take that run's span and be copied with the whole day again;
// a replica that misses segment after segment still gets one run per hour
// of data, not one per segment.
const TouchMergeSpanMs = 3_600_000

// addLack returns lacks with r added: runs that overlap r merge with it
// (their time spans join), runs that touch it merge within
// TouchMergeSpanMs. Past MaxLackRuns, the two runs with the fewest
// numbers between them merge.
func addLack(lacks []LackRange, r LackRange) []LackRange {
	// i: the first run that ends at or after r.FirstSeq-1 (touching
	// counts); j: one past the last run starting at or before r.LastSeq+1.
	lo := r.FirstSeq
	if lo > 0 {
		lo--
	}
	i, _ := slices.BinarySearchFunc(lacks, lo, func(l LackRange, seq uint64) int { return cmp.Compare(l.LastSeq, seq) })
	if i < len(lacks) && lacks[i].LastSeq < r.FirstSeq && !touchMerges(lacks[i], r) {
		i++ // touches r from below, but too long a span to take
	}
	j := i
	for j < len(lacks) && (lacks[j].FirstSeq <= r.LastSeq ||
		(r.LastSeq < math.MaxUint64 && lacks[j].FirstSeq == r.LastSeq+1 && touchMerges(r, lacks[j]))) {
		r = joinLacks(r, lacks[j])
		j++
	}
	out := slices.Clone(lacks)
	out = slices.Replace(out, i, j, r)
	for len(out) > MaxLackRuns {
		out = mergeClosestLacks(out)
	}
	return out
}

// touchMerges reports whether touching runs a and b merge: their joined
// span is at most TouchMergeSpanMs.
func touchMerges(a, b LackRange) bool {
	j := joinLacks(a, b)
	return j.MaxTimeMs-j.MinTimeMs <= TouchMergeSpanMs && j.MaxTimeMs >= j.MinTimeMs && j.MinTimeMs > math.MinInt64/2 && j.MaxTimeMs < math.MaxInt64/2
}

// joinLacks is the smallest run covering a and b, with both time spans.
func joinLacks(a, b LackRange) LackRange {
	return LackRange{
		FirstSeq: min(a.FirstSeq, b.FirstSeq), LastSeq: max(a.LastSeq, b.LastSeq),
		MinTimeMs: min(a.MinTimeMs, b.MinTimeMs), MaxTimeMs: max(a.MaxTimeMs, b.MaxTimeMs),
	}
}

// mergeClosestLacks merges the two neighbouring runs with the fewest
// numbers between them (ties: the lowest). len(lacks) >= 2.
func mergeClosestLacks(lacks []LackRange) []LackRange {
	best := 1
	for k := 2; k < len(lacks); k++ {
		if lacks[k].FirstSeq-lacks[k-1].LastSeq < lacks[best].FirstSeq-lacks[best-1].LastSeq {
			best = k
		}
	}
	return slices.Replace(lacks, best-1, best+1, joinLacks(lacks[best-1], lacks[best]))
}

// cutLack returns lacks without the numbers first..last. A run that loses
// some numbers keeps its time span (the catalog does not know the spans
// of its parts).
func cutLack(lacks []LackRange, first, last uint64) []LackRange {
	i, _ := slices.BinarySearchFunc(lacks, first, func(l LackRange, seq uint64) int { return cmp.Compare(l.LastSeq, seq) })
	if i == len(lacks) || lacks[i].FirstSeq > last {
		return lacks
	}
	var pieces []LackRange
	j := i
	for ; j < len(lacks) && lacks[j].FirstSeq <= last; j++ {
		l := lacks[j]
		if l.FirstSeq < first {
			left := l
			left.LastSeq = first - 1
			pieces = append(pieces, left)
		}
		if l.LastSeq > last {
			right := l
			right.FirstSeq = last + 1
			pieces = append(pieces, right)
		}
	}
	return slices.Replace(slices.Clone(lacks), i, j, pieces...)
}

// lacksOf is the lack list of a replica that holds none of held: one run
// per held run, each with the run's time span.
func lacksOf(held []HeldRange) []LackRange {
	var out []LackRange
	for _, h := range held {
		out = addLack(out, LackRange{FirstSeq: h.FirstSeq, LastSeq: h.LastSeq, MinTimeMs: h.MinTimeMs, MaxTimeMs: h.MaxTimeMs})
	}
	return out
}

// heldBy reports whether a replica with lacks holds every held segment in
// first..last: no lack run meets the held numbers of that span.
func heldBy(lacks []LackRange, held []HeldRange, first, last uint64) bool {
	for _, l := range lacks {
		if l.LastSeq < first || l.FirstSeq > last {
			continue
		}
		if heldOverlaps(held, max(l.FirstSeq, first), min(l.LastSeq, last)) {
			return false
		}
	}
	return true
}

// lacksHeld returns the parts of lacks that are held (clipped to the held
// runs), each with its lack run's time span: what the replica really
// lacks.
func lacksHeld(lacks []LackRange, held []HeldRange) []LackRange {
	var out []LackRange
	for _, l := range lacks {
		i, _ := slices.BinarySearchFunc(held, l.FirstSeq, func(h HeldRange, seq uint64) int { return cmp.Compare(h.LastSeq, seq) })
		for ; i < len(held) && held[i].FirstSeq <= l.LastSeq; i++ {
			c := l
			c.FirstSeq, c.LastSeq = max(l.FirstSeq, held[i].FirstSeq), min(l.LastSeq, held[i].LastSeq)
			out = append(out, c)
		}
	}
	return out
}

// checkLacks verifies a lack list: valid runs, sorted, disjoint (they may
// touch), at most MaxLackRuns.
func checkLacks(lacks []LackRange) error {
	if len(lacks) > MaxLackRuns {
		return fmt.Errorf("%d lack runs, limit is %d", len(lacks), MaxLackRuns)
	}
	for i, l := range lacks {
		if l.FirstSeq == 0 || l.FirstSeq > l.LastSeq || l.MinTimeMs > l.MaxTimeMs {
			return fmt.Errorf("bad lack run [%d,%d] (times %d..%d)", l.FirstSeq, l.LastSeq, l.MinTimeMs, l.MaxTimeMs)
		}
		if i > 0 && lacks[i-1].LastSeq >= l.FirstSeq {
			return fmt.Errorf("lack runs [%d,%d] and [%d,%d] overlap", lacks[i-1].FirstSeq, lacks[i-1].LastSeq, l.FirstSeq, l.LastSeq)
		}
	}
	return nil
}
