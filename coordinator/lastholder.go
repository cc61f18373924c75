package coordinator

import (
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// SoleHolding is what one coordinator alone holds of an edge: held
// segments that every other live replica of the edge lacks. Removing the
// coordinator from the raft cluster drops its replicas at once (they are
// not kept until copied, as draining keeps them), so these segments would
// then be on no live coordinator.
type SoleHolding struct {
	Edge string
	// Runs are the segment runs only this coordinator holds, sorted;
	// Segments the numbers they cover.
	Runs     []SeqRun
	Segments uint64
	// Only is set when the coordinator is the edge's only live replica:
	// it then alone holds every held segment it does not lack (Runs is
	// empty; the answer does not list the held runs).
	Only bool
}

// SoleHoldings returns, edge by edge, the held segments of which the
// replica on coordinator (active or leaving, whatever its state) is the
// only live holder: every other replica whose coordinator is not down
// lacks them. edges is a ClusterService.Edges answer, whose lack runs list
// held segments only.
func SoleHoldings(edges []*pb.EdgeInfo, coordinator string) []SoleHolding {
	var out []SoleHolding
	for _, e := range edges {
		var mine *pb.ReplicaInfo
		var others []*pb.ReplicaInfo
		for _, r := range e.GetReplicas() {
			switch {
			case r.GetCoordinator() == coordinator:
				mine = r
			case r.GetState() != "down":
				others = append(others, r)
			}
		}
		if mine == nil {
			continue
		}
		if len(others) == 0 {
			if e.GetHeldPoints() > 0 {
				out = append(out, SoleHolding{Edge: e.GetNodeId(), Only: true})
			}
			continue
		}
		// Held segments every other live replica lacks (their lack runs
		// are held numbers), minus those this replica lacks too.
		common := lackRuns(others[0])
		for _, o := range others[1:] {
			common = intersectRuns(common, lackRuns(o))
		}
		sole := subtractRuns(common, lackRuns(mine))
		if len(sole) == 0 {
			continue
		}
		h := SoleHolding{Edge: e.GetNodeId(), Runs: sole}
		for _, r := range sole {
			h.Segments += r.LastSeq - r.FirstSeq + 1
		}
		out = append(out, h)
	}
	return out
}

// lackRuns returns a replica's lack runs as sequence runs (sorted and
// disjoint, as the answer lists them).
func lackRuns(r *pb.ReplicaInfo) []SeqRun {
	out := make([]SeqRun, 0, len(r.GetLacks()))
	for _, l := range r.GetLacks() {
		if l.GetFirstSeq() <= l.GetLastSeq() {
			out = append(out, SeqRun{l.GetFirstSeq(), l.GetLastSeq()})
		}
	}
	return out
}

// intersectRuns returns the numbers in both a and b (sorted, disjoint
// runs in, sorted disjoint runs out).
func intersectRuns(a, b []SeqRun) []SeqRun {
	var out []SeqRun
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].FirstSeq, b[j].FirstSeq), min(a[i].LastSeq, b[j].LastSeq)
		if lo <= hi {
			out = append(out, SeqRun{lo, hi})
		}
		if a[i].LastSeq < b[j].LastSeq {
			i++
		} else {
			j++
		}
	}
	return out
}

// subtractRuns returns the numbers in a that are not in b.
func subtractRuns(a, b []SeqRun) []SeqRun {
	var out []SeqRun
	j := 0
	for _, r := range a {
		lo, done := r.FirstSeq, false
		for j < len(b) && b[j].LastSeq < lo {
			j++
		}
		for k := j; k < len(b) && b[k].FirstSeq <= r.LastSeq; k++ {
			if b[k].FirstSeq > lo {
				out = append(out, SeqRun{lo, b[k].FirstSeq - 1})
			}
			if b[k].LastSeq >= r.LastSeq {
				done = true
				break
			}
			lo = b[k].LastSeq + 1 // <= r.LastSeq
		}
		if !done {
			out = append(out, SeqRun{lo, r.LastSeq})
		}
	}
	return out
}
