package catalog

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// checkEdge returns the error for command k naming edge unless edge is a
// registered node with the edge role.
func (s *state) checkEdge(k Kind, edge string) error {
	n := s.nodes[edge]
	switch {
	case n == nil:
		return cmdErr(k, ErrNotFound, "node %q is not registered", edge)
	case n.Role != RoleEdge:
		return cmdErr(k, ErrBadCommand, "node %q is a %s, not an edge", edge, n.Role)
	}
	return nil
}

// checkEdgeRanges returns the error for command k unless edge passes
// checkEdge and every one of its ranges starts at sequence 1 or later and
// does not end before it starts.
func (s *state) checkEdgeRanges(k Kind, edge string, ranges []SeqRange) error {
	if err := s.checkEdge(k, edge); err != nil {
		return err
	}
	for i, r := range ranges {
		if r.FirstSeq == 0 || r.FirstSeq > r.LastSeq {
			return cmdErr(k, ErrBadCommand, "edge %q: range %d is [%d,%d]", edge, i, r.FirstSeq, r.LastSeq)
		}
	}
	return nil
}

func (s *state) recordHeld(c RecordHeld) (any, error) {
	k := c.Kind()
	if err := s.checkEdge(k, c.Edge); err != nil {
		return nil, err
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
	var added []HeldRange
	for _, r := range ranges {
		var dup bool
		var err *CommandError
		held, dup, err = addHeld(held, r)
		if err != nil {
			err.Msg = "edge \"" + c.Edge + "\": " + err.Msg
			err.Kind = k
			return nil, err
		}
		if dup {
			res.Duplicates++
		} else {
			res.Added++
			added = append(added, r)
		}
	}
	holders, lacking := s.holders(c)
	if c.Holders != nil && len(added) > 0 && len(holders) == 0 {
		return nil, cmdErr(k, ErrStale, "edge %q: none of the coordinators that stored the segments (%s) is a replica placed at or before epoch %d",
			c.Edge, strings.Join(c.Holders, ", "), c.Epoch)
	}
	if len(held) > MaxHeldRuns {
		return nil, cmdErr(k, ErrLimit, "edge %q would have %d held runs, limit is %d", c.Edge, len(held), MaxHeldRuns)
	}
	var gaps []GapRange
	var wmSeq uint64
	var wmTime int64
	if p != nil {
		gaps = cutGaps(p.Gaps, ranges)
		wmSeq, wmTime = p.WatermarkSeq, p.WatermarkTimeMs
	}
	if len(gaps) > MaxGapRuns {
		return nil, cmdErr(k, ErrLimit, "edge %q: the ranges cut its gaps into %d, limit is %d", c.Edge, len(gaps), MaxGapRuns)
	}
	if c.WatermarkSeq != 0 {
		if !heldContains(held, c.WatermarkSeq) && !gapContains(gaps, c.WatermarkSeq) {
			return nil, cmdErr(k, ErrBadCommand, "edge %q: watermark %d is neither held nor in a recorded gap", c.Edge, c.WatermarkSeq)
		}
		switch {
		case c.WatermarkSeq > wmSeq:
			wmSeq, wmTime = c.WatermarkSeq, max(wmTime, c.WatermarkTimeMs)
		case c.WatermarkSeq == wmSeq:
			wmTime = max(wmTime, c.WatermarkTimeMs)
		}
	}
	res.AckedThrough, res.WatermarkSeq, res.WatermarkTimeMs = s.setProgress(c.Edge, held, gaps, wmSeq, wmTime)
	if pl := s.placement[c.Edge]; pl != nil && len(added) > 0 && len(lacking) > 0 {
		for _, r := range added {
			l := LackRange{FirstSeq: r.FirstSeq, LastSeq: r.LastSeq, MinTimeMs: r.MinTimeMs, MaxTimeMs: r.MaxTimeMs}
			for i, rep := range pl.Replicas {
				if slices.Contains(lacking, rep) {
					pl.Holdings[i].Lacks = addLack(pl.Holdings[i].Lacks, l)
				}
			}
			for i := range pl.Leaving {
				if slices.Contains(lacking, pl.Leaving[i].ID) {
					pl.Leaving[i].Lacks = addLack(pl.Leaving[i].Lacks, l)
				}
			}
		}
	}
	res.Holders = len(holders)
	return res, nil
}

// holders splits the replicas of c's edge (active and leaving) into those
// that hold c's segments and those that lack them. A replica holds them if
// it was placed at or before the epoch the segments were stored on and,
// when the command names its holders, is one of them. An epoch of 0 or one
// newer than the placement's (a placement this catalog no longer has) is
// taken as the edge's registration, its first placement: every replica
// placed since is taken to lack the segments (conservative).
func (s *state) holders(c RecordHeld) (holders, lacking []string) {
	p := s.placement[c.Edge]
	if p == nil {
		return nil, nil
	}
	epoch := c.Epoch
	if n := s.nodes[c.Edge]; n != nil && (epoch == 0 || epoch > p.Epoch) {
		epoch = n.RegisteredIndex
	}
	consider := func(id string, h Holding) {
		if h.Index <= epoch && (c.Holders == nil || slices.Contains(c.Holders, id)) {
			holders = append(holders, id)
		} else {
			lacking = append(lacking, id)
		}
	}
	for i, r := range p.Replicas {
		consider(r, p.Holdings[i])
	}
	for _, l := range p.Leaving {
		consider(l.ID, l.Holding)
	}
	return holders, lacking
}

// replicaHolding returns the holding of replica in edge's placement if
// its Index is placedIndex.
func (s *state) replicaHolding(edge, replica string, placedIndex uint64) *Holding {
	p := s.placement[edge]
	if p == nil {
		return nil
	}
	var h *Holding
	if i, found := slices.BinarySearch(p.Replicas, replica); found {
		h = &p.Holdings[i]
	} else if j := slices.IndexFunc(p.Leaving, func(l LeavingReplica) bool { return l.ID == replica }); j >= 0 {
		h = &p.Leaving[j].Holding
	}
	if h == nil || h.Index != placedIndex {
		return nil
	}
	return h
}

func (s *state) recordMissing(c RecordMissing) (any, error) {
	if err := s.checkEdgeRanges(c.Kind(), c.Edge, c.Ranges); err != nil {
		return nil, err
	}
	var res RecordReplicatedResult
	h := s.replicaHolding(c.Edge, c.Replica, c.PlacedIndex)
	pr := s.progress[c.Edge]
	if h == nil || pr == nil {
		return res, nil
	}
	lacks := h.Lacks
	for _, r := range c.Ranges {
		i, _ := slices.BinarySearchFunc(pr.Held, r.FirstSeq, func(hr HeldRange, seq uint64) int { return cmp.Compare(hr.LastSeq, seq) })
		for ; i < len(pr.Held) && pr.Held[i].FirstSeq <= r.LastSeq; i++ {
			hr := pr.Held[i]
			lacks = addLack(lacks, LackRange{FirstSeq: max(r.FirstSeq, hr.FirstSeq), LastSeq: min(r.LastSeq, hr.LastSeq),
				MinTimeMs: hr.MinTimeMs, MaxTimeMs: hr.MaxTimeMs})
		}
	}
	res.Changed = !slices.Equal(lacks, h.Lacks)
	h.Lacks = lacks
	res.Lacks = len(lacks)
	return res, nil
}

func (s *state) recordReplicated(index uint64, c RecordReplicated) (any, error) {
	if err := s.checkEdgeRanges(c.Kind(), c.Edge, c.Ranges); err != nil {
		return nil, err
	}
	var res RecordReplicatedResult
	p := s.placement[c.Edge]
	h := s.replicaHolding(c.Edge, c.Replica, c.PlacedIndex)
	if h == nil {
		// Not a replica, or placed again since: the copy was made for a
		// placement that no longer exists.
		return res, nil
	}
	lacks := h.Lacks
	for _, r := range c.Ranges {
		lacks = cutLack(lacks, r.FirstSeq, r.LastSeq)
	}
	if len(lacks) == 0 {
		lacks = nil
	}
	res.Changed = !slices.Equal(lacks, h.Lacks)
	h.Lacks = lacks
	if res.Changed && s.pruneLeaving(index, p) {
		res.Dropped = true
	}
	res.Lacks = len(lacks)
	return res, nil
}

// setProgress stores an edge's new held runs, gaps and watermark after
// moving the watermark forward to what they cover from sequence 1 (see
// EdgeProgress), and returns AckedThrough and the watermark. It stores
// nothing for an edge with nothing recorded.
func (s *state) setProgress(edge string, held []HeldRange, gaps []GapRange, wmSeq uint64, wmTime int64) (uint64, uint64, int64) {
	ack := EdgeProgress{Held: held, Gaps: gaps}.AckedThrough()
	if ack > wmSeq {
		wmSeq = ack
	}
	// Held runs never straddle ack: a run starting at or before it lies
	// within 1..ack.
	for _, h := range held {
		if h.FirstSeq > ack {
			break
		}
		wmTime = max(wmTime, h.MaxTimeMs)
	}
	p := s.progress[edge]
	if p == nil {
		if len(held) == 0 && len(gaps) == 0 && wmSeq == 0 {
			return ack, wmSeq, wmTime
		}
		p = &EdgeProgress{Edge: edge}
		s.progress[edge] = p
	}
	p.Held, p.Gaps, p.WatermarkSeq, p.WatermarkTimeMs = held, gaps, wmSeq, wmTime
	return ack, wmSeq, wmTime
}

func (s *state) recordGap(c RecordGap) (any, error) {
	k := c.Kind()
	if err := s.checkEdge(k, c.Edge); err != nil {
		return nil, err
	}
	for i, g := range c.Gaps {
		if err := g.validate(); err != nil {
			return nil, cmdErr(k, ErrBadCommand, "edge %q: gap %d: %v", c.Edge, i, err)
		}
	}
	p := s.progress[c.Edge]
	var held []HeldRange
	var gaps []GapRange
	var wmSeq uint64
	var wmTime int64
	if p != nil {
		held, gaps = p.Held, p.Gaps
		wmSeq, wmTime = p.WatermarkSeq, p.WatermarkTimeMs
	}
	var res RecordGapResult
	for _, g := range c.Gaps {
		pieces := uncovered(g.AfterSeq+1, g.ThroughSeq, held, gaps)
		switch {
		case len(pieces) == 0:
			res.Duplicates++
			continue
		case len(pieces) > 1 || pieces[0] != [2]uint64{g.AfterSeq + 1, g.ThroughSeq}:
			g.Segments, g.Points = 0, -1
		}
		if res.Added == 0 {
			gaps = slices.Clone(gaps) // copy on the first change
		}
		res.Added++
		for _, pc := range pieces {
			g.AfterSeq, g.ThroughSeq = pc[0]-1, pc[1]
			gaps = insertGap(gaps, g)
		}
	}
	if len(gaps) > MaxGapRuns {
		return nil, cmdErr(k, ErrLimit, "edge %q would have %d gaps, limit is %d", c.Edge, len(gaps), MaxGapRuns)
	}
	if res.Added == 0 {
		// Nothing changed; report the progress as it is.
		if p != nil {
			res.AckedThrough = p.AckedThrough()
		}
		res.WatermarkSeq, res.WatermarkTimeMs = wmSeq, wmTime
		return res, nil
	}
	res.AckedThrough, res.WatermarkSeq, res.WatermarkTimeMs = s.setProgress(c.Edge, held, gaps, wmSeq, wmTime)
	return res, nil
}

// validate checks one gap on its own.
func (g GapRange) validate() error {
	switch {
	case g.ThroughSeq <= g.AfterSeq:
		return fmt.Errorf("through sequence %d is not after sequence %d", g.ThroughSeq, g.AfterSeq)
	case !g.Reason.valid():
		return fmt.Errorf("unknown reason %d", uint8(g.Reason))
	case g.Points < -1:
		return fmt.Errorf("points %d (-1 is unknown)", g.Points)
	case g.MinTimeMs > g.MaxTimeMs:
		return fmt.Errorf("min time %d after max time %d", g.MinTimeMs, g.MaxTimeMs)
	}
	return nil
}

// uncovered returns the runs [first, last] of lo..hi that neither a held
// run nor a gap covers, in order.
func uncovered(lo, hi uint64, held []HeldRange, gaps []GapRange) [][2]uint64 {
	var cov [][2]uint64
	i, _ := slices.BinarySearchFunc(held, lo, func(h HeldRange, seq uint64) int { return cmp.Compare(h.LastSeq, seq) })
	for ; i < len(held) && held[i].FirstSeq <= hi; i++ {
		cov = append(cov, [2]uint64{held[i].FirstSeq, held[i].LastSeq})
	}
	j, _ := slices.BinarySearchFunc(gaps, lo, func(g GapRange, seq uint64) int { return cmp.Compare(g.ThroughSeq, seq) })
	for ; j < len(gaps) && gaps[j].AfterSeq < hi; j++ {
		cov = append(cov, [2]uint64{gaps[j].AfterSeq + 1, gaps[j].ThroughSeq})
	}
	slices.SortFunc(cov, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]uint64
	next := lo // first number not yet accounted for
	for _, c := range cov {
		if c[0] > next {
			out = append(out, [2]uint64{next, min(c[0]-1, hi)})
		}
		if c[1] >= hi {
			return out
		}
		next = max(next, c[1]+1)
	}
	return append(out, [2]uint64{next, hi})
}

// insertGap inserts g, which overlaps no gap of gaps, keeping gaps sorted
// and merging g with adjacent gaps of the same reason.
func insertGap(gaps []GapRange, g GapRange) []GapRange {
	i, _ := slices.BinarySearchFunc(gaps, g.AfterSeq, func(x GapRange, seq uint64) int { return cmp.Compare(x.AfterSeq, seq) })
	lo, hi := i, i
	if i > 0 && gaps[i-1].ThroughSeq == g.AfterSeq && gaps[i-1].Reason == g.Reason {
		lo = i - 1
		g = mergeGaps(gaps[i-1], g)
	}
	if i < len(gaps) && g.ThroughSeq == gaps[i].AfterSeq && gaps[i].Reason == g.Reason {
		hi = i + 1
		g = mergeGaps(g, gaps[i])
	}
	return slices.Replace(gaps, lo, hi, g)
}

// mergeGaps joins two adjacent gaps of the same reason, a before b. A
// count or time span unknown in either is unknown in the result.
func mergeGaps(a, b GapRange) GapRange {
	m := GapRange{AfterSeq: a.AfterSeq, ThroughSeq: b.ThroughSeq, Reason: a.Reason, Points: -1}
	if a.Segments != 0 && b.Segments != 0 {
		m.Segments = satAdd(a.Segments, b.Segments)
	}
	if a.Points >= 0 && b.Points >= 0 {
		m.Points = int64(min(uint64(a.Points)+uint64(b.Points), math.MaxInt64))
	}
	if a.timeKnown() && b.timeKnown() {
		m.MinTimeMs, m.MaxTimeMs = min(a.MinTimeMs, b.MinTimeMs), max(a.MaxTimeMs, b.MaxTimeMs)
	}
	return m
}

func (g GapRange) timeKnown() bool { return g.MinTimeMs != 0 || g.MaxTimeMs != 0 }

// cutGaps removes from gaps every number of the sorted, disjoint ranges
// (held segments win). A gap that loses numbers keeps its reason and time
// span; its counts become unknown. gaps is not modified: a changed list is
// a copy. Cost: a binary search per range, plus the gaps it cuts.
func cutGaps(gaps []GapRange, ranges []HeldRange) []GapRange {
	copied := false
	for _, r := range ranges {
		i, _ := slices.BinarySearchFunc(gaps, r.FirstSeq, func(g GapRange, seq uint64) int { return cmp.Compare(g.ThroughSeq, seq) })
		j := i
		var pieces []GapRange
		for ; j < len(gaps) && gaps[j].AfterSeq < r.LastSeq; j++ {
			g := gaps[j]
			g.Segments, g.Points = 0, -1
			if g.AfterSeq+1 < r.FirstSeq {
				left := g
				left.ThroughSeq = r.FirstSeq - 1
				pieces = append(pieces, left)
			}
			if g.ThroughSeq > r.LastSeq {
				right := g
				right.AfterSeq = r.LastSeq
				pieces = append(pieces, right)
			}
		}
		if j == i {
			continue
		}
		if !copied {
			gaps, copied = slices.Clone(gaps), true
		}
		gaps = slices.Replace(gaps, i, j, pieces...)
	}
	return gaps
}

// heldOverlaps reports whether a held run has a number in first..last.
func heldOverlaps(held []HeldRange, first, last uint64) bool {
	i, _ := slices.BinarySearchFunc(held, first, func(h HeldRange, seq uint64) int { return cmp.Compare(h.LastSeq, seq) })
	return i < len(held) && held[i].FirstSeq <= last
}

func gapContains(gaps []GapRange, seq uint64) bool {
	i, _ := slices.BinarySearchFunc(gaps, seq, func(g GapRange, seq uint64) int { return cmp.Compare(g.ThroughSeq, seq) })
	return i < len(gaps) && gaps[i].AfterSeq < seq
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
