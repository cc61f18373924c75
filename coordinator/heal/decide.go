package heal

import (
	"cmp"
	"slices"

	"github.com/tributarydb/tributary/coordinator/catalog"
)

// HealthChanges returns the state changes the leader proposes for the
// coordinators of nodes at nowMs: down for an active coordinator silent
// for longer than deadAfterMs (silence counted from the later of its
// newest heartbeat and leaderSinceMs), active for a down one whose
// heartbeat is within deadAfterMs/2. self is never marked down. Sorted by
// node id.
func HealthChanges(nodes []catalog.Node, self string, nowMs, leaderSinceMs, deadAfterMs int64) []catalog.SetNodeState {
	var out []catalog.SetNodeState
	for _, n := range nodes {
		if n.Role != catalog.RoleCoordinator || n.ID == self {
			continue
		}
		silentSince := max(n.LastHeartbeatMs, leaderSinceMs)
		switch {
		case n.State == catalog.NodeActive && nowMs-silentSince > deadAfterMs:
			// The guard: a heartbeat newer than the one judged cancels it.
			out = append(out, catalog.SetNodeState{ID: n.ID, State: catalog.NodeDown, HeartbeatBeforeMs: n.LastHeartbeatMs + 1})
		case n.State == catalog.NodeDown && nowMs-n.LastHeartbeatMs <= deadAfterMs/2:
			out = append(out, catalog.SetNodeState{ID: n.ID, State: catalog.NodeActive})
		}
	}
	slices.SortFunc(out, func(a, b catalog.SetNodeState) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// BalanceMoves returns how many balancing moves the leader proposes now
// (0: none): while loads differ by more than one, up to maxInFlight moves
// may be unfinished at once.
func BalanceMoves(spread, inFlight, maxInFlight int) uint32 {
	if spread <= 1 || inFlight >= maxInFlight {
		return 0
	}
	return uint32(maxInFlight - inFlight)
}

// ScrubFindings compares what the catalog says a replica holds of an edge
// with what its store holds. held are the edge's held runs; lacks the
// replica's lack runs; stored the runs its store holds (sorted, disjoint).
// missing are held runs the catalog credits the replica with that the
// store lacks; found are held runs the catalog lists as lacking that the
// store holds.
func ScrubFindings(held []catalog.HeldRange, lacks []catalog.LackRange, stored []catalog.SeqRange) (missing, found []catalog.SeqRange) {
	for _, h := range held {
		// Walk h's numbers in pieces where "lacked" and "stored" are both
		// constant.
		for lo := h.FirstSeq; lo <= h.LastSeq; {
			lacked, lEnd := runAt(lacksRuns(lacks), lo, h.LastSeq)
			has, sEnd := runAt(stored, lo, h.LastSeq)
			hi := min(lEnd, sEnd)
			switch {
			case !lacked && !has:
				missing = appendRun(missing, lo, hi)
			case lacked && has:
				found = appendRun(found, lo, hi)
			}
			if hi == h.LastSeq {
				break
			}
			lo = hi + 1
		}
	}
	return missing, found
}

func lacksRuns(lacks []catalog.LackRange) []catalog.SeqRange {
	out := make([]catalog.SeqRange, len(lacks))
	for i, l := range lacks {
		out[i] = catalog.SeqRange{FirstSeq: l.FirstSeq, LastSeq: l.LastSeq}
	}
	return out
}

// runAt reports whether seq lies in one of runs (sorted, disjoint) and
// the last number, at most limit, up to which that stays so.
func runAt(runs []catalog.SeqRange, seq, limit uint64) (in bool, end uint64) {
	i, _ := slices.BinarySearchFunc(runs, seq, func(r catalog.SeqRange, s uint64) int { return cmp.Compare(r.LastSeq, s) })
	if i < len(runs) && runs[i].FirstSeq <= seq {
		return true, min(runs[i].LastSeq, limit)
	}
	if i < len(runs) && runs[i].FirstSeq <= limit {
		return false, runs[i].FirstSeq - 1
	}
	return false, limit
}

func appendRun(runs []catalog.SeqRange, lo, hi uint64) []catalog.SeqRange {
	if n := len(runs); n > 0 && runs[n-1].LastSeq+1 == lo {
		runs[n-1].LastSeq = hi
		return runs
	}
	return append(runs, catalog.SeqRange{FirstSeq: lo, LastSeq: hi})
}
