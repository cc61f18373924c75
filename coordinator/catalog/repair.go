package catalog

import (
	"slices"
)

// RepairTask is a run of an edge's held segments that one active replica
// lacks, and the replicas it can be copied from.
type RepairTask struct {
	Edge string
	// Replica lacks the run; PlacedIndex is its Holding.Index, which a
	// RecordReplicated about the copy must carry.
	Replica     string
	PlacedIndex uint64
	// Run is the lacking run, clipped to one held run; its time span is
	// the intersection of what the lack run and the held run say.
	Run LackRange
	// Sources are the other replicas, active or leaving, whose
	// coordinator is not down, that hold every segment of Run and lack no
	// data with times in Run's span (so that a copy by time span cannot
	// bring older values of a sample that the target holds newer): active
	// replicas first, then by id. Empty: no replica can give it, and the
	// edge must ship it again.
	Sources []string
}

// Repairs returns every repair task of edge, by replica, then sequence.
func (f *FSM) Repairs(edge string) []RepairTask {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.repairs(edge)
}

// RepairsOf returns the repair tasks of every edge in which replica is the
// replica that lacks, by edge, then sequence.
func (f *FSM) RepairsOf(replica string) []RepairTask {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []RepairTask
	for _, e := range sortedKeys(f.st.placement) {
		p := f.st.placement[e]
		if _, found := slices.BinarySearch(p.Replicas, replica); !found {
			continue
		}
		for _, t := range f.st.repairs(e) {
			if t.Replica == replica {
				out = append(out, t)
			}
		}
	}
	return out
}

// Unsourced returns the runs of edge's held segments that some active
// replica lacks and no live replica can give: the edge must ship them
// again. Runs are merged by sequence; their time spans joined.
func (f *FSM) Unsourced(edge string) []LackRange {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []LackRange
	for _, t := range f.st.repairs(edge) {
		if len(t.Sources) == 0 {
			out = addLack(out, t.Run)
		}
	}
	return out
}

func (s *state) repairs(edge string) []RepairTask {
	p := s.placement[edge]
	pr := s.progress[edge]
	if p == nil || pr == nil || len(pr.Held) == 0 {
		return nil
	}
	type cand struct {
		id     string
		h      Holding
		active bool
	}
	var cands []cand
	for i, r := range p.Replicas {
		if n := s.nodes[r]; n != nil && n.State != NodeDown {
			cands = append(cands, cand{r, p.Holdings[i], true})
		}
	}
	for _, l := range p.Leaving {
		if n := s.nodes[l.ID]; n != nil && n.State != NodeDown {
			cands = append(cands, cand{l.ID, l.Holding, false})
		}
	}
	var out []RepairTask
	for i, r := range p.Replicas {
		for _, run := range lacksHeld(p.Holdings[i].Lacks, pr.Held) {
			run = clipTimes(run, pr.Held)
			t := RepairTask{Edge: edge, Replica: r, PlacedIndex: p.Holdings[i].Index, Run: run}
			for _, c := range cands {
				if c.id == r || !heldBy(c.h.Lacks, pr.Held, run.FirstSeq, run.LastSeq) {
					continue
				}
				if lacksDataIn(c.h.Lacks, pr.Held, run.MinTimeMs, run.MaxTimeMs) {
					continue
				}
				t.Sources = append(t.Sources, c.id) // cands: active (by id), then leaving (by id)
			}
			out = append(out, t)
		}
	}
	return out
}

// clipTimes narrows run's time span to that of the held run containing
// it (lacksHeld clips runs to single held runs).
func clipTimes(run LackRange, held []HeldRange) LackRange {
	for _, h := range held {
		if h.FirstSeq <= run.FirstSeq && run.LastSeq <= h.LastSeq {
			lo, hi := max(run.MinTimeMs, h.MinTimeMs), min(run.MaxTimeMs, h.MaxTimeMs)
			if lo <= hi {
				run.MinTimeMs, run.MaxTimeMs = lo, hi
			} else {
				run.MinTimeMs, run.MaxTimeMs = h.MinTimeMs, h.MaxTimeMs
			}
			break
		}
	}
	return run
}

// lacksDataIn reports whether a replica with lacks may lack held data with
// times in [lo, hi].
func lacksDataIn(lacks []LackRange, held []HeldRange, lo, hi int64) bool {
	for _, l := range lacksHeld(lacks, held) {
		if l.MinTimeMs <= hi && l.MaxTimeMs >= lo {
			return true
		}
	}
	return false
}
