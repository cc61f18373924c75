package catalog

import (
	"cmp"
	"math"
	"slices"
)

func (s *state) recordHeld(c RecordHeld) (any, error) {
	k := c.Kind()
	n := s.nodes[c.Edge]
	switch {
	case n == nil:
		return nil, cmdErr(k, ErrNotFound, "node %q is not registered", c.Edge)
	case n.Role != RoleEdge:
		return nil, cmdErr(k, ErrBadCommand, "node %q is a %s, not an edge", c.Edge, n.Role)
	}
	ranges := slices.Clone(c.Ranges)
	for i, r := range ranges {
		switch {
		case r.FirstSeq == 0:
			return nil, cmdErr(k, ErrBadCommand, "edge %q: range %d starts at sequence 0; sequences start at 1", c.Edge, i)
		case r.FirstSeq > r.LastSeq:
			return nil, cmdErr(k, ErrBadCommand, "edge %q: range %d: first sequence %d after last %d", c.Edge, i, r.FirstSeq, r.LastSeq)
		case r.MinTimeMs > r.MaxTimeMs:
			return nil, cmdErr(k, ErrBadCommand, "edge %q: range %d: min time %d after max time %d", c.Edge, i, r.MinTimeMs, r.MaxTimeMs)
		}
	}
	slices.SortFunc(ranges, func(a, b HeldRange) int { return cmp.Compare(a.FirstSeq, b.FirstSeq) })
	for i := 1; i < len(ranges); i++ {
		if ranges[i].FirstSeq <= ranges[i-1].LastSeq {
			return nil, cmdErr(k, ErrBadCommand, "edge %q: ranges [%d,%d] and [%d,%d] of the command overlap",
				c.Edge, ranges[i-1].FirstSeq, ranges[i-1].LastSeq, ranges[i].FirstSeq, ranges[i].LastSeq)
		}
	}
	p := s.progress[c.Edge]
	var held []HeldRange
	if p != nil {
		held = slices.Clone(p.Held)
	}
	var res RecordHeldResult
	for _, r := range ranges {
		var dup bool
		var err *CommandError
		held, dup, err = addHeld(held, r)
		if err != nil {
			err.Msg = "edge \"" + c.Edge + "\": " + err.Msg
			return nil, err
		}
		if dup {
			res.Duplicates++
		} else {
			res.Added++
		}
	}
	if len(held) > MaxHeldRuns {
		return nil, cmdErr(k, ErrLimit, "edge %q would have %d held runs, limit is %d", c.Edge, len(held), MaxHeldRuns)
	}
	var wmSeq uint64
	var wmTime int64
	if p != nil {
		wmSeq, wmTime = p.WatermarkSeq, p.WatermarkTimeMs
	}
	if c.WatermarkSeq != 0 {
		if !heldContains(held, c.WatermarkSeq) {
			return nil, cmdErr(k, ErrBadCommand, "edge %q: watermark %d is not a held sequence", c.Edge, c.WatermarkSeq)
		}
		switch {
		case c.WatermarkSeq > wmSeq:
			wmSeq, wmTime = c.WatermarkSeq, max(wmTime, c.WatermarkTimeMs)
		case c.WatermarkSeq == wmSeq:
			wmTime = max(wmTime, c.WatermarkTimeMs)
		}
	}
	if len(held) == 0 && wmSeq == 0 {
		res.WatermarkSeq, res.WatermarkTimeMs = wmSeq, wmTime
		return res, nil
	}
	if p == nil {
		p = &EdgeProgress{Edge: c.Edge}
		s.progress[c.Edge] = p
	}
	p.Held, p.WatermarkSeq, p.WatermarkTimeMs = held, wmSeq, wmTime
	res.WatermarkSeq, res.WatermarkTimeMs = wmSeq, wmTime
	return res, nil
}

// addHeld adds r to the sorted, disjoint, non-adjacent runs held. A range
// inside one run is a duplicate (no change); a range overlapping runs
// without lying inside one is a conflict.
func addHeld(held []HeldRange, r HeldRange) ([]HeldRange, bool, *CommandError) {
	// i is the first run that ends at or after r.FirstSeq.
	i, _ := slices.BinarySearchFunc(held, r.FirstSeq, func(h HeldRange, seq uint64) int { return cmp.Compare(h.LastSeq, seq) })
	if i < len(held) && held[i].FirstSeq <= r.LastSeq {
		h := held[i]
		if h.FirstSeq <= r.FirstSeq && r.LastSeq <= h.LastSeq {
			return held, true, nil
		}
		return nil, false, cmdErr(KindRecordHeld, ErrConflict, "range [%d,%d] overlaps held run [%d,%d] without lying inside it",
			r.FirstSeq, r.LastSeq, h.FirstSeq, h.LastSeq)
	}
	// Merge with the run before (ending at FirstSeq-1) and the run after
	// (starting at LastSeq+1).
	lo, hi := i, i
	if i > 0 && held[i-1].LastSeq+1 == r.FirstSeq {
		lo = i - 1
		r = mergeHeld(held[i-1], r)
	}
	if i < len(held) && r.LastSeq+1 == held[i].FirstSeq {
		hi = i + 1
		r = mergeHeld(r, held[i])
	}
	return slices.Replace(held, lo, hi, r), false, nil
}

// mergeHeld joins two adjacent runs, a before b.
func mergeHeld(a, b HeldRange) HeldRange {
	return HeldRange{
		FirstSeq:  a.FirstSeq,
		LastSeq:   b.LastSeq,
		Points:    satAdd(a.Points, b.Points),
		MinTimeMs: min(a.MinTimeMs, b.MinTimeMs),
		MaxTimeMs: max(a.MaxTimeMs, b.MaxTimeMs),
	}
}

func heldContains(held []HeldRange, seq uint64) bool {
	i, _ := slices.BinarySearchFunc(held, seq, func(h HeldRange, seq uint64) int { return cmp.Compare(h.LastSeq, seq) })
	return i < len(held) && held[i].FirstSeq <= seq
}

// satAdd adds without wrapping around (hostile counts saturate).
func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
