package catalog

import (
	"maps"
	"slices"
)

// Node returns a registered node.
func (f *FSM) Node(id string) (Node, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := f.st.nodes[id]
	if n == nil {
		return Node{}, false
	}
	return *n, true
}

// Nodes returns every registered node, sorted by id.
func (f *FSM) Nodes() []Node {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Node, 0, len(f.st.nodes))
	for _, id := range sortedKeys(f.st.nodes) {
		out = append(out, *f.st.nodes[id])
	}
	return out
}

// Members returns the raft members, sorted by raft id. A transport
// resolves member addresses from it.
func (f *FSM) Members() []Member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Member, 0, len(f.st.members))
	for _, id := range slices.Sorted(maps.Keys(f.st.members)) {
		out = append(out, *f.st.members[id])
	}
	return out
}

// Placement returns the placement of an edge.
func (f *FSM) Placement(edge string) (Placement, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p := f.st.placement[edge]
	if p == nil {
		return Placement{}, false
	}
	return clonePlacement(p), true
}

// Placements returns every placement, sorted by edge.
func (f *FSM) Placements() []Placement {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Placement, 0, len(f.st.placement))
	for _, e := range sortedKeys(f.st.placement) {
		out = append(out, clonePlacement(f.st.placement[e]))
	}
	return out
}

// Progress returns what the cloud holds of an edge (false if nothing was
// ever recorded).
func (f *FSM) Progress(edge string) (EdgeProgress, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p := f.st.progress[edge]
	if p == nil {
		return EdgeProgress{}, false
	}
	c := *p
	c.Held = slices.Clone(p.Held)
	c.Gaps = slices.Clone(p.Gaps)
	return c, true
}

// Progresses returns the progress of every edge with something recorded,
// sorted by edge.
func (f *FSM) Progresses() []EdgeProgress {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]EdgeProgress, 0, len(f.st.progress))
	for _, e := range sortedKeys(f.st.progress) {
		c := *f.st.progress[e]
		c.Held = slices.Clone(c.Held)
		c.Gaps = slices.Clone(c.Gaps)
		out = append(out, c)
	}
	return out
}

// Config returns the fleet configuration.
func (f *FSM) Config() FleetConfig {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.config
}
