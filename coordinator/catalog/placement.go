package catalog

import (
	"cmp"
	"slices"
)

// Placement rules (deterministic: every choice breaks ties by node id):
//
//   - A coordinator may take replicas (is eligible) while it is
//     registered with RoleCoordinator, its RaftID is a raft member (voter
//     or learner) and its State is NodeActive. A coordinator that is
//     registered and a member but down or draining is present: the
//     replicas it has are kept as leaving replicas (still read, copied
//     from). Any other coordinator is gone: its replicas are dropped.
//   - Every edge gets min(ReplicationFactor, eligible coordinators) active
//     replicas. When a placement has too few, eligible coordinators that
//     are leaving replicas of the edge come back first (they hold its
//     history), then the least-loaded (load: the active replicas a
//     coordinator holds). Too many: the most loaded become leaving.
//   - An active replica that is no longer eligible becomes leaving (a
//     pinned placement is then unpinned and refilled).
//   - Make before break: a leaving replica is dropped only once no active
//     replica lacks a held segment it holds (pruneLeaving), or when its
//     coordinator is gone.
//   - Balancing (Rebalance, at most MaxMoves moves) moves single replicas
//     from the most to the least loaded coordinator until loads differ by
//     at most one; the replica moved away becomes leaving. Membership and
//     state changes only drop, trim and fill: the leader's healer then
//     balances a few moves at a time, so copies are rate-limited.
//   - Pinned placements (SetPlacement) are not balanced.

// eligible returns the sorted ids of coordinators that may take replicas.
// The result is cached until invalidateEligible; callers must not modify
// it.
func (s *state) eligible() []string {
	if s.eligibleOK {
		return s.eligibleCache
	}
	var out []string
	for id, n := range s.nodes {
		if n.Role == RoleCoordinator && s.members[n.RaftID] != nil && n.State == NodeActive {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	s.eligibleCache, s.eligibleOK = out, true
	return out
}

// present reports whether coordinator id may keep the replicas it has:
// registered and a raft member, whatever its state.
func (s *state) present(id string) bool {
	n := s.nodes[id]
	return n != nil && n.Role == RoleCoordinator && s.members[n.RaftID] != nil
}

// presentCoordinators returns the sorted ids of the present coordinators.
func (s *state) presentCoordinators() []string {
	var out []string
	for id := range s.nodes {
		if s.present(id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// invalidateEligible must be called whenever a coordinator node, its
// state or the raft membership changes.
func (s *state) invalidateEligible() { s.eligibleOK = false }

// freshHolding is the holding of a replica of edge placed at index: it
// lacks every held segment (nothing has been copied to it yet).
func (s *state) freshHolding(edge string, index uint64) Holding {
	h := Holding{Index: index}
	if p := s.progress[edge]; p != nil {
		h.Lacks = lacksOf(p.Held)
	}
	return h
}

// setReplicas makes reps (any order) the active replicas of p, keeping
// load in step. A replica kept keeps its holding; an active replica not in
// reps becomes leaving with its holding; a replica added comes back from
// Leaving with its holding, or is new and lacks every held segment. It
// reports whether anything changed; Epoch is set to index if so.
func (s *state) setReplicas(index uint64, p *Placement, reps []string) bool {
	reps = slices.Clone(reps)
	slices.Sort(reps)
	reps = slices.Compact(reps)
	if slices.Equal(reps, p.Replicas) {
		return false
	}
	holdings := make([]Holding, len(reps))
	leaving := slices.Clone(p.Leaving)
	for i, r := range reps {
		if j, found := slices.BinarySearch(p.Replicas, r); found && j < len(p.Holdings) {
			holdings[i] = p.Holdings[j]
			continue
		}
		if k := slices.IndexFunc(leaving, func(l LeavingReplica) bool { return l.ID == r }); k >= 0 {
			holdings[i] = leaving[k].Holding
			leaving = slices.Delete(leaving, k, k+1)
			continue
		}
		holdings[i] = s.freshHolding(p.Edge, index)
	}
	for j, r := range p.Replicas {
		if _, found := slices.BinarySearch(reps, r); !found {
			var h Holding
			if j < len(p.Holdings) {
				h = p.Holdings[j]
			}
			leaving = append(leaving, LeavingReplica{ID: r, Holding: h})
		}
		if s.load[r]--; s.load[r] <= 0 {
			delete(s.load, r)
		}
	}
	for _, r := range reps {
		s.load[r]++
	}
	slices.SortFunc(leaving, func(a, b LeavingReplica) int { return cmp.Compare(a.ID, b.ID) })
	if len(reps) == 0 {
		reps, holdings = nil, nil
	}
	if len(leaving) == 0 {
		leaving = nil
	}
	p.Replicas, p.Holdings, p.Leaving = reps, holdings, leaving
	p.Epoch = index
	return true
}

// dropGone removes every replica, active or leaving, whose coordinator is
// gone (not present); a pinned placement that loses one is unpinned. It
// reports whether anything changed.
func (s *state) dropGone(index uint64, p *Placement) bool {
	changed := false
	if slices.ContainsFunc(p.Replicas, func(r string) bool { return !s.present(r) }) {
		keep := slices.DeleteFunc(slices.Clone(p.Replicas), func(r string) bool { return !s.present(r) })
		s.setReplicas(index, p, keep)
		p.Pinned = false // refilled by the rules
		changed = true
	}
	if slices.ContainsFunc(p.Leaving, func(l LeavingReplica) bool { return !s.present(l.ID) }) {
		p.Leaving = slices.DeleteFunc(slices.Clone(p.Leaving), func(l LeavingReplica) bool { return !s.present(l.ID) })
		if len(p.Leaving) == 0 {
			p.Leaving = nil
		}
		p.Epoch = index
		changed = true
	}
	return changed
}

// pruneLeaving drops the leaving replicas of p that hold nothing an active
// replica lacks (make before break: a leaving replica goes only once its
// history is on every active replica). With no active replica nothing is
// dropped. It reports whether anything changed.
func (s *state) pruneLeaving(index uint64, p *Placement) bool {
	if len(p.Leaving) == 0 || len(p.Replicas) == 0 {
		return false
	}
	var held []HeldRange
	if pr := s.progress[p.Edge]; pr != nil {
		held = pr.Held
	}
	// need: the held segments some active replica lacks.
	var need []LackRange
	for _, h := range p.Holdings {
		for _, l := range lacksHeld(h.Lacks, held) {
			need = addLack(need, l)
		}
	}
	keep := p.Leaving[:0:0]
	for _, l := range p.Leaving {
		if holdsAnyOf(l.Lacks, held, need) {
			keep = append(keep, l)
		}
	}
	if len(keep) == len(p.Leaving) {
		return false
	}
	if len(keep) == 0 {
		keep = nil
	}
	p.Leaving = keep
	p.Epoch = index
	return true
}

// holdsAnyOf reports whether a replica with lacks holds a held segment
// numbered inside one of the runs of need.
func holdsAnyOf(lacks []LackRange, held []HeldRange, need []LackRange) bool {
	for _, n := range need {
		if holdsAny(lacks, held, n.FirstSeq, n.LastSeq) {
			return true
		}
	}
	return false
}

// holdsAny reports whether a replica with lacks holds some held segment
// numbered first..last.
func holdsAny(lacks []LackRange, held []HeldRange, first, last uint64) bool {
	i, _ := slices.BinarySearchFunc(held, first, func(h HeldRange, seq uint64) int { return cmp.Compare(h.LastSeq, seq) })
	for ; i < len(held) && held[i].FirstSeq <= last; i++ {
		lo, hi := max(first, held[i].FirstSeq), min(last, held[i].LastSeq)
		// Walk lo..hi past the lack runs that cover it.
		j, _ := slices.BinarySearchFunc(lacks, lo, func(l LackRange, seq uint64) int { return cmp.Compare(l.LastSeq, seq) })
		for lo <= hi {
			if j >= len(lacks) || lacks[j].FirstSeq > lo {
				return true // lo is held and not lacked
			}
			if lacks[j].LastSeq >= hi {
				break
			}
			lo = lacks[j].LastSeq + 1
			j++
		}
	}
	return false
}

// leastLoaded returns the coordinator of coords with the lowest load that
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

// fill adds active replicas to an unpinned placement until it has the
// replication factor's worth (or every eligible coordinator): eligible
// leaving replicas first, then the least loaded.
func (s *state) fill(index uint64, p *Placement, coords []string) bool {
	if p.Pinned {
		return false
	}
	rf := min(int(s.config.ReplicationFactor), len(coords))
	reps := slices.Clone(p.Replicas)
	for _, l := range p.Leaving {
		if len(reps) >= rf {
			break
		}
		if _, ok := slices.BinarySearch(coords, l.ID); ok {
			reps = append(reps, l.ID)
		}
	}
	var picked []string
	for len(reps) < rf {
		c := s.leastLoaded(coords, reps)
		if c == "" {
			break
		}
		reps = append(reps, c)
		picked = append(picked, c)
		s.load[c]++ // counted now so the next pick sees it; setReplicas recounts
	}
	for _, r := range picked {
		if s.load[r]--; s.load[r] <= 0 {
			delete(s.load, r)
		}
	}
	return s.setReplicas(index, p, reps)
}

// rebalance applies the placement rules to every placement and returns
// how many changed: drop replicas on gone coordinators, move active
// replicas of ineligible ones to leaving, trim, fill, prune leaving
// replicas, then at most maxMoves balancing moves (negative: no limit).
func (s *state) rebalance(index uint64, maxMoves int) int {
	coords := s.eligible()
	rf := min(int(s.config.ReplicationFactor), len(coords))
	edges := sortedKeys(s.placement)
	changed := map[string]bool{}

	for _, e := range edges {
		p := s.placement[e]
		if s.dropGone(index, p) {
			changed[e] = true
		}
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
		p := s.placement[e]
		if s.fill(index, p, coords) {
			changed[e] = true
		}
		if s.pruneLeaving(index, p) {
			changed[e] = true
		}
	}
	if maxMoves != 0 && len(coords) > 1 {
		moves := 0
		// Each move lowers the spread between the most and the least
		// loaded coordinator, so the loop ends; the bound is a backstop.
		for range len(edges) * (rf + 1) {
			if maxMoves > 0 && moves >= maxMoves {
				break
			}
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
				s.pruneLeaving(index, p)
				changed[e] = true
				moved = true
				moves++
				break
			}
			if !moved {
				break
			}
		}
	}
	return len(changed)
}

// Balance reports the spread between the most and the least loaded
// eligible coordinator (active replicas; 0 with fewer than two), and how
// many leaving replicas on coordinators not marked down all placements
// have: moves whose copies are not finished (a replica on a down
// coordinator waits for the edge or for its return, not for a copy).
func (f *FSM) Balance() (spread, leaving int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, p := range f.st.placement {
		for _, l := range p.Leaving {
			if n := f.st.nodes[l.ID]; n != nil && n.State != NodeDown {
				leaving++
			}
		}
	}
	return f.st.imbalance(), leaving
}

// imbalance is the spread between the most and the least loaded eligible
// coordinator (0 with fewer than two).
func (s *state) imbalance() int {
	coords := s.eligible()
	if len(coords) < 2 {
		return 0
	}
	lo, hi := s.load[coords[0]], s.load[coords[0]]
	for _, c := range coords {
		lo, hi = min(lo, s.load[c]), max(hi, s.load[c])
	}
	return hi - lo
}

func (s *state) setPlacement(index uint64, c SetPlacement) (any, error) {
	k := c.Kind()
	if err := s.checkEdge(k, c.Edge); err != nil {
		return nil, err
	}
	if len(c.Replicas) > MaxReplicationFactor {
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
			return nil, cmdErr(k, ErrNotFound, "edge %q: %q is not an active coordinator that is a raft member", c.Edge, r)
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
		s.rebalance(index, 0)
	} else {
		p.Pinned = true
		s.setReplicas(index, p, reps)
		s.pruneLeaving(index, p)
	}
	return clonePlacement(p), nil
}

// nextSeq returns one past the highest sequence recorded for edge: held,
// in a gap, or the watermark (1 when nothing is).
func (s *state) nextSeq(edge string) uint64 {
	p := s.progress[edge]
	if p == nil {
		return 1
	}
	return p.NextSeq()
}

func clonePlacement(p *Placement) Placement {
	c := *p
	c.Replicas = slices.Clone(p.Replicas)
	c.Holdings = make([]Holding, len(p.Holdings))
	for i, h := range p.Holdings {
		c.Holdings[i] = Holding{Lacks: slices.Clone(h.Lacks), Index: h.Index}
	}
	if len(c.Holdings) == 0 {
		c.Holdings = nil
	}
	c.Leaving = make([]LeavingReplica, len(p.Leaving))
	for i, l := range p.Leaving {
		c.Leaving[i] = LeavingReplica{ID: l.ID, Holding: Holding{Lacks: slices.Clone(l.Lacks), Index: l.Index}}
	}
	if len(c.Leaving) == 0 {
		c.Leaving = nil
	}
	return c
}
