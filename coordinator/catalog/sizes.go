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
	// UnderReplicatedSegments counts held segments an active replica
	// lacks (once per replica that lacks it); UnsourcedSegments those of
	// them no live replica can give (the edge must ship them again).
	UnderReplicatedSegments, UnsourcedSegments uint64
	// LeavingReplicas counts replicas being replaced, over all edges.
	LeavingReplicas int
	// CoordinatorsByState counts registered coordinators by state.
	CoordinatorsByState map[NodeState]int
}

// Sizes returns the catalog's counts.
func (f *FSM) Sizes() Sizes {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := Sizes{
		Series: f.st.series.len(), Members: len(f.st.members), Placements: len(f.st.placement),
		Gaps: map[GapReason]int{}, AppliedIndex: f.st.applied,
	}
	s.CoordinatorsByState = map[NodeState]int{}
	for _, n := range f.st.nodes {
		switch n.Role {
		case RoleEdge:
			s.Edges++
		case RoleCoordinator:
			s.Coordinators++
			s.CoordinatorsByState[n.State]++
		}
	}
	for e, p := range f.st.placement {
		s.LeavingReplicas += len(p.Leaving)
		lacking := false
		for _, h := range p.Holdings {
			lacking = lacking || len(h.Lacks) > 0
		}
		if !lacking {
			continue
		}
		for _, t := range f.st.repairs(e) {
			n := t.Run.LastSeq - t.Run.FirstSeq + 1
			s.UnderReplicatedSegments += n
			if len(t.Sources) == 0 {
				s.UnsourcedSegments += n
			}
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
