package catalog

import (
	"math"
	"slices"
)

// Placement rules (deterministic: every choice breaks ties by node id):
//
//   - A coordinator may hold replicas while it is registered with
//     RoleCoordinator and its RaftID is a raft member (voter or learner).
//   - Every edge gets min(ReplicationFactor, eligible coordinators)
//     replicas, the least-loaded coordinators first (load: the number of
//     placements holding it).
//   - When coordinators come or go, or the replication factor changes,
//     replicas on coordinators that went away are dropped, placements over
//     the factor give up their most-loaded replicas, placements under it
//     are filled, and then single replicas move from the most- to the
//     least-loaded coordinator until loads differ by at most one. Nothing
//     else moves, so each move is data the replica store must copy.
//   - Pinned placements (SetPlacement) are left alone unless one of their
//     coordinators goes away; they are then unpinned and refilled.

// eligible returns the sorted ids of coordinators that may hold replicas.
// The result is cached until invalidateEligible; callers must not modify
// it.
func (s *state) eligible() []string {
	if s.eligibleOK {
		return s.eligibleCache
	}
	var out []string
	for id, n := range s.nodes {
		if n.Role == RoleCoordinator && s.members[n.RaftID] != nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	s.eligibleCache, s.eligibleOK = out, true
	return out
}

// invalidateEligible must be called whenever a coordinator node or the
// raft membership changes.
func (s *state) invalidateEligible() { s.eligibleOK = false }

// setReplicas replaces p's replicas (sorted copy), keeping load in step.
// A replica kept keeps its ReplicaFrom; a replica added holds the edge's
// segments from one past every sequence recorded so far (nothing copies
// older ones to it), placed at index. It reports whether anything changed.
func (s *state) setReplicas(index uint64, p *Placement, reps []string) bool {
	reps = slices.Clone(reps)
	slices.Sort(reps)
	if slices.Equal(reps, p.Replicas) {
		return false
	}
	var from []ReplicaFrom
	if len(reps) > 0 {
		from = make([]ReplicaFrom, len(reps))
		fresh := s.newReplicaFrom(p.Edge, index)
		for i, r := range reps {
			if j := slices.Index(p.Replicas, r); j >= 0 && j < len(p.From) {
				from[i] = p.From[j]
			} else {
				from[i] = fresh
			}
		}
	}
	p.From = from
	for _, r := range p.Replicas {
		if s.load[r]--; s.load[r] <= 0 {
			delete(s.load, r)
		}
	}
	for _, r := range reps {
		s.load[r]++
	}
	if len(reps) == 0 {
		reps = nil
	}
	p.Replicas = reps
	p.Epoch = index
	return true
}

// leastLoaded returns the eligible coordinator with the lowest load that
// is not in exclude (ties: smallest id), or "".
func (s *state) leastLoaded(coords, exclude []string) string {
	best, bestLoad := "", 0
	for _, c := range coords {
		if slices.Contains(exclude, c) {
			continue
		}
		if l := s.load[c]; best == "" || l < bestLoad {
			best, bestLoad = c, l
		}
	}
	return best
}

// fill adds replicas to an unpinned placement until it has the
// replication factor's worth (or every eligible coordinator).
func (s *state) fill(index uint64, p *Placement, coords []string) bool {
	if p.Pinned {
		return false
	}
	rf := min(int(s.config.ReplicationFactor), len(coords))
	reps := slices.Clone(p.Replicas)
	for len(reps) < rf {
		c := s.leastLoaded(coords, reps)
		if c == "" {
			break
		}
		reps = append(reps, c)
		s.load[c]++ // counted now so the next pick sees it; setReplicas recounts
	}
	for _, r := range reps[len(p.Replicas):] {
		if s.load[r]--; s.load[r] <= 0 {
			delete(s.load, r)
		}
	}
	return s.setReplicas(index, p, reps)
}

// rebalance applies the placement rules to every placement and returns
// how many changed. With balance false it only drops, trims and fills.
func (s *state) rebalance(index uint64, balance bool) int {
	coords := s.eligible()
	rf := min(int(s.config.ReplicationFactor), len(coords))
	edges := sortedKeys(s.placement)
	changed := map[string]bool{}

	for _, e := range edges {
		p := s.placement[e]
		kept := slices.DeleteFunc(slices.Clone(p.Replicas), func(r string) bool {
			_, found := slices.BinarySearch(coords, r)
			return !found
		})
		if len(kept) != len(p.Replicas) {
			p.Pinned = false
			if s.setReplicas(index, p, kept) {
				changed[e] = true
			}
		}
	}
	for _, e := range edges {
		p := s.placement[e]
		if p.Pinned || len(p.Replicas) <= rf {
			continue
		}
		reps := slices.Clone(p.Replicas)
		for len(reps) > rf {
			worst := 0
			for i, r := range reps {
				if l, w := s.load[r], s.load[reps[worst]]; l > w || (l == w && r > reps[worst]) {
					worst = i
				}
			}
			reps = slices.Delete(reps, worst, worst+1)
		}
		if s.setReplicas(index, p, reps) {
			changed[e] = true
		}
	}
	for _, e := range edges {
		if s.fill(index, s.placement[e], coords) {
			changed[e] = true
		}
	}
	if balance && len(coords) > 1 {
		// Each move lowers the spread between the most and the least
		// loaded coordinator, so the loop ends; the bound is a backstop.
		for range len(edges) * (rf + 1) {
			hi, lo := coords[0], coords[0]
			for _, c := range coords {
				if l := s.load[c]; l > s.load[hi] || (l == s.load[hi] && c > hi) {
					hi = c
				}
				if l := s.load[c]; l < s.load[lo] {
					lo = c
				}
			}
			if s.load[hi]-s.load[lo] <= 1 {
				break
			}
			moved := false
			for _, e := range edges {
				p := s.placement[e]
				if p.Pinned || !slices.Contains(p.Replicas, hi) || slices.Contains(p.Replicas, lo) {
					continue
				}
				reps := slices.Clone(p.Replicas)
				reps[slices.Index(reps, hi)] = lo
				s.setReplicas(index, p, reps)
				changed[e] = true
				moved = true
				break
			}
			if !moved {
				break
			}
		}
	}
	return len(changed)
}

func (s *state) setPlacement(index uint64, c SetPlacement) (any, error) {
	k := c.Kind()
	n := s.nodes[c.Edge]
	switch {
	case n == nil:
		return nil, cmdErr(k, ErrNotFound, "node %q is not registered", c.Edge)
	case n.Role != RoleEdge:
		return nil, cmdErr(k, ErrBadCommand, "node %q is a %s, not an edge", c.Edge, n.Role)
	case len(c.Replicas) > MaxReplicationFactor:
		return nil, cmdErr(k, ErrBadCommand, "edge %q: %d replicas, limit is %d", c.Edge, len(c.Replicas), MaxReplicationFactor)
	}
	coords := s.eligible()
	reps := slices.Clone(c.Replicas)
	slices.Sort(reps)
	for i, r := range reps {
		if i > 0 && reps[i-1] == r {
			return nil, cmdErr(k, ErrBadCommand, "edge %q: replica %q listed twice", c.Edge, r)
		}
		if _, ok := slices.BinarySearch(coords, r); !ok {
			return nil, cmdErr(k, ErrNotFound, "edge %q: %q is not a coordinator that is a raft member", c.Edge, r)
		}
	}
	p := s.placement[c.Edge]
	if p == nil {
		// Every registered edge has a placement; this is a restored
		// catalog that lacked one.
		p = &Placement{Edge: c.Edge}
		s.placement[c.Edge] = p
	}
	if len(reps) == 0 {
		// Unpin: back to the automatic rules.
		p.Pinned = false
		s.rebalance(index, false)
	} else {
		p.Pinned = true
		s.setReplicas(index, p, reps)
	}
	return clonePlacement(p), nil
}

// nextSeq returns one past the highest sequence recorded for edge: held,
// in a gap, or the watermark (1 when nothing is). A replica placed now
// holds nothing below it. Held runs above AckedThrough count: they were
// stored on the replicas of an earlier placement.
func (s *state) nextSeq(edge string) uint64 {
	p := s.progress[edge]
	if p == nil {
		return 1
	}
	top := p.WatermarkSeq
	if n := len(p.Held); n > 0 {
		top = max(top, p.Held[n-1].LastSeq)
	}
	if n := len(p.Gaps); n > 0 {
		top = max(top, p.Gaps[n-1].ThroughSeq)
	}
	if top == math.MaxUint64 {
		return top
	}
	return top + 1
}

// newReplicaFrom returns the ReplicaFrom of a replica of edge placed at
// index: from one past every sequence recorded, lacking the data up to
// the newest time recorded.
func (s *state) newReplicaFrom(edge string, index uint64) ReplicaFrom {
	f := wholeHistory
	f.FromSeq, f.Index = s.nextSeq(edge), index
	if p := s.progress[edge]; p != nil && len(p.Held) > 0 {
		f.LacksThroughMs = p.WatermarkTimeMs
		for _, h := range p.Held {
			f.LacksThroughMs = max(f.LacksThroughMs, h.MaxTimeMs)
		}
	}
	return f
}

// storedBefore moves past lastSeq the FromSeq of every replica of edge
// placed after epoch, the placement the segments through lastSeq were
// stored on (0: unknown, taken as the edge's first placement).
//
// Then every replica lacking one of ranges (sorted), those numbered
// below its FromSeq, lacks their data's times.
func (s *state) storedBefore(edge string, epoch uint64, ranges []HeldRange) {
	if len(ranges) == 0 {
		return
	}
	lastSeq := ranges[len(ranges)-1].LastSeq
	p := s.placement[edge]
	if p == nil {
		return
	}
	if n := s.nodes[edge]; n != nil && (epoch == 0 || epoch > p.Epoch) {
		// Unknown (or from a placement this catalog never had): the
		// earliest the segments can have been stored is the edge's
		// registration, which made its first placement.
		epoch = n.RegisteredIndex
	}
	next := lastSeq + 1
	if lastSeq == math.MaxUint64 {
		next = lastSeq
	}
	for i := range p.From {
		f := &p.From[i]
		if f.Index > epoch && f.FromSeq < next {
			f.FromSeq = next
		}
		for _, r := range ranges {
			if r.FirstSeq < f.FromSeq {
				f.LacksThroughMs = max(f.LacksThroughMs, r.MaxTimeMs)
			}
		}
	}
}

func clonePlacement(p *Placement) Placement {
	c := *p
	c.Replicas = slices.Clone(p.Replicas)
	c.From = slices.Clone(p.From)
	return c
}
