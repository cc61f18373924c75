package coordinator

import (
	"math/rand/v2"
	"slices"
	"testing"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

func lacks(runs ...[2]uint64) []*pb.LackRun {
	var out []*pb.LackRun
	for _, r := range runs {
		out = append(out, &pb.LackRun{FirstSeq: r[0], LastSeq: r[1]})
	}
	return out
}

func TestSoleHoldings_FindsSegmentsNoOtherLiveReplicaHolds(t *testing.T) {
	edges := []*pb.EdgeInfo{
		// c1 holds everything; c2 lacks 1-40: c1 alone holds 1-40.
		{NodeId: "e1", HeldPoints: 100, Replicas: []*pb.ReplicaInfo{
			{Coordinator: "c1", State: "active"},
			{Coordinator: "c2", State: "active", Lacks: lacks([2]uint64{1, 40})},
		}},
		// c1 is leaving and lacks 1-10; c2 and c3 lack 5-20: c1 alone
		// holds 11-20.
		{NodeId: "e2", HeldPoints: 100, Replicas: []*pb.ReplicaInfo{
			{Coordinator: "c2", State: "active", Lacks: lacks([2]uint64{5, 20})},
			{Coordinator: "c3", State: "active", Lacks: lacks([2]uint64{5, 20})},
			{Coordinator: "c1", State: "draining", Leaving: true, Lacks: lacks([2]uint64{1, 10})},
		}},
		// Another replica holds everything c1 holds.
		{NodeId: "e3", HeldPoints: 100, Replicas: []*pb.ReplicaInfo{
			{Coordinator: "c1", State: "active"},
			{Coordinator: "c3", State: "active", Lacks: lacks([2]uint64{1, 2})},
			{Coordinator: "c2", State: "active"},
		}},
		// The other replica is down: c1 is the only live one.
		{NodeId: "e4", HeldPoints: 7, Replicas: []*pb.ReplicaInfo{
			{Coordinator: "c1", State: "active", Lacks: lacks([2]uint64{3, 3})},
			{Coordinator: "c2", State: "down"},
		}},
		// c1 is the only replica, but nothing is held yet.
		{NodeId: "e5", Replicas: []*pb.ReplicaInfo{{Coordinator: "c1", State: "active"}}},
		// c1 is no replica.
		{NodeId: "e6", HeldPoints: 5, Replicas: []*pb.ReplicaInfo{{Coordinator: "c2", State: "active"}}},
	}
	got := SoleHoldings(edges, "c1")
	want := []SoleHolding{
		{Edge: "e1", Runs: []SeqRun{{1, 40}}, Segments: 40},
		{Edge: "e2", Runs: []SeqRun{{11, 20}}, Segments: 10},
		{Edge: "e4", Only: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Edge != want[i].Edge || !slices.Equal(got[i].Runs, want[i].Runs) || got[i].Segments != want[i].Segments || got[i].Only != want[i].Only {
			t.Errorf("%d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := SoleHoldings(edges, "c3"); len(got) != 0 {
		t.Errorf("c3: %+v, want nothing (every segment it holds is on another live replica)", got)
	}
}

// TestRunSetOperations_MatchANaiveSet compares intersectRuns and
// subtractRuns with sets of numbers on random runs.
func TestRunSetOperations_MatchANaiveSet(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	randRuns := func() []SeqRun {
		var out []SeqRun
		next := uint64(1 + rng.IntN(3))
		for next < 60 && rng.IntN(6) != 0 {
			first := next
			last := first + uint64(rng.IntN(6))
			out = append(out, SeqRun{first, last})
			next = last + 2 + uint64(rng.IntN(4))
		}
		return out
	}
	set := func(rs []SeqRun) map[uint64]bool {
		m := map[uint64]bool{}
		for _, r := range rs {
			for s := r.FirstSeq; s <= r.LastSeq; s++ {
				m[s] = true
			}
		}
		return m
	}
	check := func(what string, got []SeqRun, want func(uint64) bool) {
		t.Helper()
		for i, r := range got {
			if r.FirstSeq > r.LastSeq || (i > 0 && got[i-1].LastSeq >= r.FirstSeq) {
				t.Fatalf("%s: runs %v are not sorted and disjoint", what, got)
			}
		}
		g := set(got)
		for s := uint64(0); s < 80; s++ {
			if g[s] != want(s) {
				t.Fatalf("%s: %d is %v, want %v (runs %v)", what, s, g[s], want(s), got)
			}
		}
	}
	for range 2000 {
		a, b := randRuns(), randRuns()
		sa, sb := set(a), set(b)
		check("intersect", intersectRuns(a, b), func(s uint64) bool { return sa[s] && sb[s] })
		check("subtract", subtractRuns(a, b), func(s uint64) bool { return sa[s] && !sb[s] })
	}
	if got := subtractRuns([]SeqRun{{5, ^uint64(0)}}, []SeqRun{{7, ^uint64(0)}}); !slices.Equal(got, []SeqRun{{5, 6}}) {
		t.Errorf("subtract up to the largest number: %v", got)
	}
}
