package catalog

// Sizes counts what the catalog holds (the coordinator's metrics read it
// on every collection, so it copies nothing).
type Sizes struct {
	Series       int // registered series
	Edges        int // registered edge nodes
	Coordinators int // registered coordinators
	Members      int // raft members known to the catalog
	Placements   int // edges with a placement
	// HeldRuns is the number of held sequence runs over all edges;
	// HeldSegments the sequence numbers they cover.
	HeldRuns     int
	HeldSegments uint64
	// Gaps counts the open recorded gaps by reason (a backfilled gap is
	// cut out of the list); GapSegments the sequence numbers they cover.
	Gaps        map[GapReason]int
	GapSegments uint64
	// AppliedIndex is the raft index of the last command applied.
	AppliedIndex uint64
}

// Sizes returns the catalog's counts.
func (f *FSM) Sizes() Sizes {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := Sizes{
		Series: f.st.series.len(), Members: len(f.st.members), Placements: len(f.st.placement),
		Gaps: map[GapReason]int{}, AppliedIndex: f.st.applied,
	}
	for _, n := range f.st.nodes {
		switch n.Role {
		case RoleEdge:
			s.Edges++
		case RoleCoordinator:
			s.Coordinators++
		}
	}
	for _, p := range f.st.progress {
		s.HeldRuns += len(p.Held)
		for _, h := range p.Held {
			s.HeldSegments += h.LastSeq - h.FirstSeq + 1
		}
		for _, g := range p.Gaps {
			s.Gaps[g.Reason]++
			s.GapSegments += g.ThroughSeq - g.AfterSeq
		}
	}
	return s
}
