package catalog

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

func lr(first, last uint64, lo, hi int64) LackRange {
	return LackRange{FirstSeq: first, LastSeq: last, MinTimeMs: lo, MaxTimeMs: hi}
}

func TestLacks_AddMergesOverlappingAndTouchingWithinAnHour(t *testing.T) {
	cases := []struct {
		name string
		in   []LackRange
		add  LackRange
		want []LackRange
	}{
		{"into empty", nil, lr(5, 7, 50, 70), []LackRange{lr(5, 7, 50, 70)}},
		{"apart", []LackRange{lr(1, 2, 10, 20)}, lr(5, 7, 50, 70), []LackRange{lr(1, 2, 10, 20), lr(5, 7, 50, 70)}},
		{"touching before", []LackRange{lr(1, 4, 10, 40)}, lr(5, 7, 50, 70), []LackRange{lr(1, 7, 10, 70)}},
		{"touching after", []LackRange{lr(8, 9, 80, 90)}, lr(5, 7, 50, 70), []LackRange{lr(5, 9, 50, 90)}},
		{"bridging two", []LackRange{lr(1, 2, 10, 20), lr(9, 9, 90, 95)}, lr(3, 8, 30, 80), []LackRange{lr(1, 9, 10, 95)}},
		// A segment next to a day of history keeps its own span: copying
		// it must not copy the day again.
		{"touching a day before", []LackRange{lr(1, 47, 0, day)}, lr(48, 48, day, day+1000), []LackRange{lr(1, 47, 0, day), lr(48, 48, day, day+1000)}},
		{"touching a day after", []LackRange{lr(49, 60, day, 2*day)}, lr(48, 48, day-1000, day), []LackRange{lr(48, 48, day-1000, day), lr(49, 60, day, 2*day)}},
		{"between a day and a minute", []LackRange{lr(1, 47, 0, day), lr(49, 49, day+1000, day+60_000)}, lr(48, 48, day, day+1000),
			[]LackRange{lr(1, 47, 0, day), lr(48, 49, day, day+60_000)}},
		{"overlapping a day", []LackRange{lr(1, 47, 0, day)}, lr(47, 48, day, day+1000), []LackRange{lr(1, 48, 0, day+1000)}},
		{"an hour exactly", []LackRange{lr(1, 1, 0, 1000)}, lr(2, 2, 1000, TouchMergeSpanMs), []LackRange{lr(1, 2, 0, TouchMergeSpanMs)}},
		{"past an hour", []LackRange{lr(1, 1, 0, 1000)}, lr(2, 2, 1000, TouchMergeSpanMs+1), []LackRange{lr(1, 1, 0, 1000), lr(2, 2, 1000, TouchMergeSpanMs+1)}},
		{"inside, wider times", []LackRange{lr(1, 9, 10, 90)}, lr(3, 4, 5, 99), []LackRange{lr(1, 9, 5, 99)}},
		{"from 1", []LackRange{lr(2, 3, 0, 1)}, lr(1, 2, -5, -1), []LackRange{lr(1, 3, -5, 1)}},
		{"max seq", []LackRange{lr(1, 1, 0, 0)}, lr(math.MaxUint64-1, math.MaxUint64, 0, 0), []LackRange{lr(1, 1, 0, 0), lr(math.MaxUint64-1, math.MaxUint64, 0, 0)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.in)
			got := addLack(c.in, c.add)
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			if !slices.Equal(in, c.in) {
				t.Fatal("input modified")
			}
			if err := checkLacks(got); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLacks_CutKeepsTimeSpansOfPieces(t *testing.T) {
	in := []LackRange{lr(1, 10, 10, 100), lr(20, 30, 200, 300)}
	if got := cutLack(in, 4, 6); !slices.Equal(got, []LackRange{lr(1, 3, 10, 100), lr(7, 10, 10, 100), lr(20, 30, 200, 300)}) {
		t.Fatalf("middle cut: %v", got)
	}
	if got := cutLack(in, 1, 25); !slices.Equal(got, []LackRange{lr(26, 30, 200, 300)}) {
		t.Fatalf("cut across: %v", got)
	}
	if got := cutLack(in, 11, 19); !slices.Equal(got, in) {
		t.Fatalf("cut between: %v", got)
	}
	if got := cutLack(in, 1, 30); len(got) != 0 {
		t.Fatalf("cut all: %v", got)
	}
}

func TestLacks_CapMergesClosestRuns(t *testing.T) {
	var lacks []LackRange
	for i := range uint64(MaxLackRuns) {
		lacks = addLack(lacks, lr(10*i+1, 10*i+1, int64(i), int64(i)))
	}
	lacks = addLack(lacks, lr(100000, 100000, 5, 5))
	if len(lacks) != MaxLackRuns {
		t.Fatalf("%d runs, want the cap %d", len(lacks), MaxLackRuns)
	}
	if err := checkLacks(lacks); err != nil {
		t.Fatal(err)
	}
	// Every number lacked before is still lacked (merging only widens).
	h := Holding{Lacks: lacks}
	for i := range uint64(MaxLackRuns) {
		if !h.LacksAny(10*i+1, 10*i+1) {
			t.Fatalf("sequence %d no longer lacked", 10*i+1)
		}
	}
}

func TestHoldsAny(t *testing.T) {
	held := []HeldRange{{FirstSeq: 1, LastSeq: 10}, {FirstSeq: 20, LastSeq: 30}}
	cases := []struct {
		lacks       []LackRange
		first, last uint64
		want        bool
	}{
		{nil, 1, 5, true},
		{[]LackRange{lr(1, 10, 0, 0)}, 1, 10, false},
		{[]LackRange{lr(1, 10, 0, 0)}, 1, 20, true},
		{[]LackRange{lr(1, 10, 0, 0), lr(20, 30, 0, 0)}, 1, 30, false},
		{[]LackRange{lr(1, 5, 0, 0), lr(6, 10, 0, 0)}, 1, 10, false}, // touching runs (not canonical) still cover
		{[]LackRange{lr(1, 4, 0, 0), lr(6, 10, 0, 0)}, 1, 10, true},
		{nil, 11, 19, false}, // nothing held there
	}
	for i, c := range cases {
		if got := holdsAny(c.lacks, held, c.first, c.last); got != c.want {
			t.Errorf("case %d: holdsAny(%v, %d..%d) = %v, want %v", i, c.lacks, c.first, c.last, got, c.want)
		}
	}
}

// threeCoordinators returns a catalog with coordinators c1..c3 (raft
// voters), replication factor rf, and edge e1 placed on them.
func threeCoordinators(t testing.TB, rf uint32) (*FSM, uint64) {
	t.Helper()
	f := New()
	cfg := DefaultConfig
	cfg.ReplicationFactor = rf
	applyOK(t, f, 1, SetConfig{Config: cfg})
	addCoordinator(t, f, 2, "c1", 1)
	addCoordinator(t, f, 3, "c2", 2)
	addCoordinator(t, f, 4, "c3", 3)
	applyOK(t, f, 5, RegisterNode{ID: "e1", Role: RoleEdge})
	return f, 6
}

func heldRun(first, last uint64, t0 int64) HeldRange {
	return HeldRange{FirstSeq: first, LastSeq: last, Points: 10 * (last - first + 1), MinTimeMs: t0, MaxTimeMs: t0 + 99}
}

func placementOf(t testing.TB, f *FSM, edge string) Placement {
	t.Helper()
	p, ok := f.Placement(edge)
	if !ok {
		t.Fatalf("no placement of %s", edge)
	}
	return p
}

func TestRecordHeld_HoldersAreRecordedAndOthersLack(t *testing.T) {
	f, i := threeCoordinators(t, 3)
	p := placementOf(t, f, "e1")
	if !slices.Equal(p.Replicas, []string{"c1", "c2", "c3"}) {
		t.Fatalf("placement %+v", p)
	}
	r := applyOK(t, f, i, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: []string{"c1", "c3"}, Ranges: []HeldRange{heldRun(1, 1, 1000)}}).(RecordHeldResult)
	if r.Holders != 2 || r.AckedThrough != 1 {
		t.Fatalf("result %+v", r)
	}
	p = placementOf(t, f, "e1")
	h2, _, _ := p.HoldingOf("c2")
	if !slices.Equal(h2.Lacks, []LackRange{lr(1, 1, 1000, 1099)}) {
		t.Fatalf("c2 lacks %v", h2.Lacks)
	}
	for _, c := range []string{"c1", "c3"} {
		if h, _, _ := p.HoldingOf(c); len(h.Lacks) != 0 {
			t.Fatalf("%s lacks %v", c, h.Lacks)
		}
	}
	// A replay (the same range again) adds nothing.
	applyOK(t, f, i+1, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: []string{"c1"}, Ranges: []HeldRange{heldRun(1, 1, 1000)}})
	if q := placementOf(t, f, "e1"); !slices.EqualFunc(q.Holdings, p.Holdings, func(a, b Holding) bool { return slices.Equal(a.Lacks, b.Lacks) }) {
		t.Fatalf("replay changed holdings: %+v", q)
	}
	// Adjacent segments that c2 misses too merge into one lack run.
	applyOK(t, f, i+2, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: []string{"c1", "c3"}, Ranges: []HeldRange{heldRun(2, 3, 1100)}})
	h2, _, _ = placementOf(t, f, "e1").HoldingOf("c2")
	if !slices.Equal(h2.Lacks, []LackRange{lr(1, 3, 1000, 1199)}) {
		t.Fatalf("c2 lacks %v", h2.Lacks)
	}
	// Holders that are no replica placed by the epoch: nothing would hold it.
	applyErr(t, f, i+3, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: []string{"c9"}, Ranges: []HeldRange{heldRun(4, 4, 1200)}}, ErrStale)
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestRecordReplicated_CutsLacksOnlyForTheSamePlacement(t *testing.T) {
	f, i := threeCoordinators(t, 3)
	p := placementOf(t, f, "e1")
	applyOK(t, f, i, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: []string{"c1"}, Ranges: []HeldRange{heldRun(1, 5, 1000)}})
	h2, _, _ := placementOf(t, f, "e1").HoldingOf("c2")
	// A copy reported for an earlier placement of c2 changes nothing.
	r := applyOK(t, f, i+1, RecordReplicated{Edge: "e1", Replica: "c2", PlacedIndex: h2.Index + 100, Ranges: []SeqRange{{1, 5}}}).(RecordReplicatedResult)
	if r.Changed {
		t.Fatal("a copy for another placement index cut lacks")
	}
	r = applyOK(t, f, i+2, RecordReplicated{Edge: "e1", Replica: "c2", PlacedIndex: h2.Index, Ranges: []SeqRange{{1, 3}}}).(RecordReplicatedResult)
	if !r.Changed || r.Lacks != 1 {
		t.Fatalf("result %+v", r)
	}
	h2, _, _ = placementOf(t, f, "e1").HoldingOf("c2")
	if !slices.Equal(h2.Lacks, []LackRange{lr(4, 5, 1000, 1099)}) {
		t.Fatalf("c2 lacks %v", h2.Lacks)
	}
	// Twice is the same as once.
	applyOK(t, f, i+3, RecordReplicated{Edge: "e1", Replica: "c2", PlacedIndex: h2.Index, Ranges: []SeqRange{{1, 3}}})
	if h, _, _ := placementOf(t, f, "e1").HoldingOf("c2"); !slices.Equal(h.Lacks, h2.Lacks) {
		t.Fatalf("replay changed lacks: %v", h.Lacks)
	}
	applyErr(t, f, i+4, RecordReplicated{Edge: "e1", Replica: "c2", PlacedIndex: h2.Index, Ranges: []SeqRange{{3, 2}}}, ErrBadCommand)
}

func TestRecordMissing_AddsLacksWithHeldTimes(t *testing.T) {
	f, i := threeCoordinators(t, 3)
	p := placementOf(t, f, "e1")
	applyOK(t, f, i, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: p.Replicas, Ranges: []HeldRange{heldRun(1, 4, 1000)}})
	applyOK(t, f, i+1, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: p.Replicas, Ranges: []HeldRange{heldRun(8, 9, 2000)}})
	h, _, _ := placementOf(t, f, "e1").HoldingOf("c2")
	// 2..9 meets both held runs; 5..7 is not held and stays out.
	r := applyOK(t, f, i+2, RecordMissing{Edge: "e1", Replica: "c2", PlacedIndex: h.Index, Ranges: []SeqRange{{2, 9}}}).(RecordReplicatedResult)
	if !r.Changed {
		t.Fatal("nothing changed")
	}
	h, _, _ = placementOf(t, f, "e1").HoldingOf("c2")
	if !slices.Equal(h.Lacks, []LackRange{lr(2, 4, 1000, 1099), lr(8, 9, 2000, 2099)}) {
		t.Fatalf("lacks %v", h.Lacks)
	}
	// Another placement index: ignored.
	r = applyOK(t, f, i+3, RecordMissing{Edge: "e1", Replica: "c1", PlacedIndex: 999, Ranges: []SeqRange{{1, 9}}}).(RecordReplicatedResult)
	if r.Changed {
		t.Fatal("a missing report for another placement changed lacks")
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestPlacement_DownCoordinatorLeavesAndIsDroppedOnlyAfterCopy(t *testing.T) {
	f, i := threeCoordinators(t, 2)
	f.ApplyMembership(i, Membership{Voters: []uint64{1, 2, 3}})
	p := placementOf(t, f, "e1")
	if len(p.Replicas) != 2 {
		t.Fatalf("placement %+v", p)
	}
	// Stored on one replica only (write quorum 1): the other lacks it.
	only := p.Replicas[0]
	other := p.Replicas[1]
	applyOK(t, f, i+1, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: []string{only}, Ranges: []HeldRange{heldRun(1, 10, 1000)}})
	applyOK(t, f, i+2, Heartbeat{Beats: []Beat{{ID: only, TimeMs: 5000}}})
	// A heartbeat newer than the guard wins over the healer's decision.
	if r := applyOK(t, f, i+3, SetNodeState{ID: only, State: NodeDown, HeartbeatBeforeMs: 4000}).(SetNodeStateResult); r.Changed {
		t.Fatal("marked down despite a newer heartbeat")
	}
	r := applyOK(t, f, i+4, SetNodeState{ID: only, State: NodeDown, HeartbeatBeforeMs: 6000}).(SetNodeStateResult)
	if !r.Changed || r.Moved != 1 {
		t.Fatalf("result %+v", r)
	}
	p = placementOf(t, f, "e1")
	if slices.Contains(p.Replicas, only) || len(p.Replicas) != 2 || len(p.Leaving) != 1 || p.Leaving[0].ID != only {
		t.Fatalf("after %s went down: %+v", only, p)
	}
	// The only holder is down: nothing can be copied; the edge must ship
	// it again.
	if u := f.Unsourced("e1"); len(u) != 1 || u[0].FirstSeq != 1 || u[0].LastSeq != 10 {
		t.Fatalf("unsourced %v", u)
	}
	// The edge ships it again to both active replicas: the leaving one
	// then holds nothing they lack and is dropped.
	for _, rep := range p.Replicas {
		h, _, _ := p.HoldingOf(rep)
		applyOK(t, f, i+5, RecordReplicated{Edge: "e1", Replica: rep, PlacedIndex: h.Index, Ranges: []SeqRange{{1, 10}}})
	}
	p = placementOf(t, f, "e1")
	if len(p.Leaving) != 0 {
		t.Fatalf("leaving replica kept after its history was copied: %+v", p)
	}
	_ = other
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestPlacement_LeavingReplicaIsASourceUntilDropped(t *testing.T) {
	f, i := threeCoordinators(t, 2)
	p := placementOf(t, f, "e1")
	applyOK(t, f, i, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: p.Replicas, Ranges: []HeldRange{heldRun(1, 10, 1000)}})
	// Drain one replica: it becomes leaving, a third coordinator takes its
	// place lacking the history, which the leaving and the other replica
	// can give.
	drained := p.Replicas[0]
	applyOK(t, f, i+1, SetNodeState{ID: drained, State: NodeDraining})
	p = placementOf(t, f, "e1")
	if len(p.Leaving) != 1 || p.Leaving[0].ID != drained || slices.Contains(p.Replicas, drained) {
		t.Fatalf("after draining %s: %+v", drained, p)
	}
	tasks := f.Repairs("e1")
	if len(tasks) != 1 || tasks[0].Run.FirstSeq != 1 || tasks[0].Run.LastSeq != 10 || len(tasks[0].Sources) != 2 {
		t.Fatalf("repairs %+v", tasks)
	}
	if !slices.Contains(tasks[0].Sources, drained) {
		t.Fatalf("the leaving replica is not a source: %+v", tasks[0])
	}
	if got := f.RepairsOf(tasks[0].Replica); len(got) != 1 {
		t.Fatalf("repairs of %s: %+v", tasks[0].Replica, got)
	}
	applyOK(t, f, i+2, RecordReplicated{Edge: "e1", Replica: tasks[0].Replica, PlacedIndex: tasks[0].PlacedIndex, Ranges: []SeqRange{{1, 10}}})
	if p = placementOf(t, f, "e1"); len(p.Leaving) != 0 {
		t.Fatalf("leaving kept: %+v", p)
	}
	// Back to active: it takes replicas again through a rebalance only.
	applyOK(t, f, i+3, SetNodeState{ID: drained, State: NodeActive})
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestRepairs_SourceMustNotLackDataInTheSpan(t *testing.T) {
	f, i := threeCoordinators(t, 3)
	p := placementOf(t, f, "e1")
	// c1 holds 1..2; c2 holds 1 only; c3 holds 2 only. Segment 2
	// rewrites times of segment 1 (late data), so c2 lacks data in
	// segment 2's span and must not be a source for c3's repair of 1.
	applyOK(t, f, i, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: []string{"c1", "c2"}, Ranges: []HeldRange{heldRun(1, 1, 1000)}})
	applyOK(t, f, i+1, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: []string{"c1", "c3"}, Ranges: []HeldRange{heldRun(2, 2, 1050)}})
	for _, task := range f.Repairs("e1") {
		switch task.Replica {
		case "c3":
			if !slices.Equal(task.Sources, []string{"c1"}) {
				t.Fatalf("c3's repair sources %v, want [c1]", task.Sources)
			}
		case "c2":
			if !slices.Equal(task.Sources, []string{"c1"}) {
				t.Fatalf("c2's repair sources %v, want [c1]", task.Sources)
			}
		default:
			t.Fatalf("unexpected task %+v", task)
		}
	}
}

func TestRegisterNode_AnotherStoreLacksEverythingAndRejoinNeedsANewMember(t *testing.T) {
	f, i := threeCoordinators(t, 3)
	applyOK(t, f, i, RegisterNode{ID: "c1", Role: RoleCoordinator, RaftID: 1, StoreID: "s-aaa"})
	applyOK(t, f, i+1, RegisterNode{ID: "c1", Role: RoleCoordinator, RaftID: 1}) // no store id: keeps the bound one
	if n, _ := f.Node("c1"); n.StoreID != "s-aaa" {
		t.Fatalf("store id %q", n.StoreID)
	}
	p := placementOf(t, f, "e1")
	applyOK(t, f, i+2, RecordHeld{Edge: "e1", Epoch: p.Epoch, Holders: p.Replicas, Ranges: []HeldRange{heldRun(1, 3, 1000)}})
	// The same member with another replica store: it lacks everything.
	applyOK(t, f, i+3, RegisterNode{ID: "c1", Role: RoleCoordinator, RaftID: 1, StoreID: "s-bbb"})
	h, _, _ := placementOf(t, f, "e1").HoldingOf("c1")
	if n, _ := f.Node("c1"); n.StoreID != "s-bbb" || !slices.Equal(h.Lacks, []LackRange{lr(1, 3, 1000, 1099)}) || h.Index != i+3 {
		t.Fatalf("after a new store: node %+v, holding %+v", n, h)
	}
	if h2, _, _ := placementOf(t, f, "e1").HoldingOf("c2"); len(h2.Lacks) != 0 {
		t.Fatalf("c2 lacks %+v", h2.Lacks)
	}
	applyErr(t, f, i+4, RegisterNode{ID: "e1", Role: RoleEdge, StoreID: "s-x"}, ErrBadCommand)
	// While raft id 1 is a member, another raft id is refused.
	applyErr(t, f, i+5, RegisterNode{ID: "c1", Role: RoleCoordinator, RaftID: 7, StoreID: "s-ccc"}, ErrConflict)
	// Once it was removed from raft, c1 may come back as a new member with
	// a new disk.
	f.ApplyMembership(i+6, Membership{Voters: []uint64{2, 3, 7}})
	applyOK(t, f, i+7, RegisterNode{ID: "c1", Role: RoleCoordinator, RaftID: 7, StoreID: "s-ccc"})
	if n, _ := f.Node("c1"); n.RaftID != 7 || n.StoreID != "s-ccc" || n.RegisteredIndex != i+7 {
		t.Fatalf("rejoined %+v", n)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestSetRevoked(t *testing.T) {
	f, i := threeCoordinators(t, 2)
	applyOK(t, f, i, SetRevoked{ID: "e1", Revoked: true})
	if n, _ := f.Node("e1"); !n.Revoked {
		t.Fatal("not revoked")
	}
	applyErr(t, f, i+1, SetRevoked{ID: "c1", Revoked: true}, ErrBadCommand)
	applyErr(t, f, i+1, SetRevoked{ID: "nope", Revoked: true}, ErrNotFound)
	snap := f.Snapshot()
	g := New()
	if err := g.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if n, _ := g.Node("e1"); !n.Revoked {
		t.Fatal("revocation lost in a snapshot")
	}
	applyOK(t, f, i+2, SetRevoked{ID: "e1"})
	if n, _ := f.Node("e1"); n.Revoked {
		t.Fatal("still revoked")
	}
}

func TestFleetConfig_QuorumAndDeadAfter(t *testing.T) {
	c := DefaultConfig
	for _, tc := range []struct {
		w          uint32
		replicas   int
		wantQuorum int
	}{{0, 3, 2}, {0, 2, 1}, {0, 1, 1}, {0, 0, 1}, {3, 3, 3}, {3, 2, 2}, {1, 3, 1}} {
		c.WriteQuorum = tc.w
		if got := c.Quorum(tc.replicas); got != tc.wantQuorum {
			t.Errorf("W=%d with %d replicas: quorum %d, want %d", tc.w, tc.replicas, got, tc.wantQuorum)
		}
	}
	if DefaultConfig.DeadAfter() != 5*60*1000 || (FleetConfig{}).DeadAfter() != DefaultDeadAfterMs {
		t.Fatal("dead-after default")
	}
	f := New()
	bad := DefaultConfig
	bad.WriteQuorum = bad.ReplicationFactor + 1
	applyErr(t, f, 1, SetConfig{Config: bad}, ErrBadCommand)
	bad = DefaultConfig
	bad.DeadAfterMs = 10
	applyErr(t, f, 1, SetConfig{Config: bad}, ErrBadCommand)
	good := DefaultConfig
	good.WriteQuorum, good.DeadAfterMs = 3, 30_000
	got := applyOK(t, f, 2, SetConfig{Config: good}).(FleetConfig)
	if got.WriteQuorum != 3 || got.DeadAfterMs != 30_000 {
		t.Fatalf("config %+v", got)
	}
	g := New()
	if err := g.Restore(f.Snapshot()); err != nil || g.Config() != f.Config() {
		t.Fatalf("restored %+v (%v), want %+v", g.Config(), err, f.Config())
	}
}

func TestConfig_SealPolicyIsValidatedAndRoundTrips(t *testing.T) {
	if DefaultConfig.LagBudget() != DefaultLagBudgetMs || (FleetConfig{LagBudgetMs: 60_000}).LagBudget() != 60_000 {
		t.Fatal("lag budget default")
	}
	f := New()
	for _, bad := range []FleetConfig{{LagBudgetMs: 999}, {LagBudgetMs: MaxLagBudgetMs + 1}, {LagBudgetMs: -1}, {MinSegmentPoints: MaxMinSegmentPoints + 1}} {
		c := DefaultConfig
		c.LagBudgetMs, c.MinSegmentPoints = bad.LagBudgetMs, bad.MinSegmentPoints
		applyErr(t, f, 1, SetConfig{Config: c}, ErrBadCommand)
	}
	// Without a seal policy, a configuration encodes as before it existed:
	// a command and a snapshot an earlier version decodes.
	plain := DefaultConfig
	plain.WriteQuorum = 2
	before := EncodeCommand(SetConfig{Config: plain})
	applyOK(t, f, 2, SetConfig{Config: plain})
	plainSnap := f.Snapshot()
	good := plain
	good.LagBudgetMs, good.MinSegmentPoints = 30_000, 240
	cmd := EncodeCommand(SetConfig{Config: good})
	if len(cmd) <= len(before) || string(cmd[:len(before)]) != string(before) {
		t.Fatalf("the seal policy is not an extension of the former encoding: %x, then %x", before, cmd)
	}
	dec, err := DecodeCommand(cmd)
	if err != nil || dec.(SetConfig).Config != good {
		t.Fatalf("decoded %+v (%v), want %+v", dec, err, good)
	}
	got := applyOK(t, f, 3, SetConfig{Config: good}).(FleetConfig)
	if got.LagBudgetMs != 30_000 || got.MinSegmentPoints != 240 {
		t.Fatalf("config %+v", got)
	}
	g := New()
	if err := g.Restore(f.Snapshot()); err != nil || g.Config() != f.Config() {
		t.Fatalf("restored %+v (%v), want %+v", g.Config(), err, f.Config())
	}
	h := New()
	if err := h.Restore(plainSnap); err != nil || h.Config().LagBudgetMs != 0 || h.Config().LagBudget() != DefaultLagBudgetMs {
		t.Fatalf("restored a snapshot without a seal policy: %+v (%v)", h.Config(), err)
	}
	if len(f.Snapshot()) <= len(plainSnap) {
		t.Fatal("the snapshot does not carry the seal policy")
	}
}

func TestSnapshot_Version3FromBecomesLacks(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot-v3.bin")
	if err != nil {
		t.Fatal(err)
	}
	f := New()
	if err := f.Restore(b); err != nil {
		t.Fatal(err)
	}
	// Written by version 3: e1 on c1 (whole history) and c3, placed after
	// segments 1..14 (FromSeq 15, lacking data through 2200).
	p := placementOf(t, f, "e1")
	h1, _, _ := p.HoldingOf("c1")
	h3, _, _ := p.HoldingOf("c3")
	if len(h1.Lacks) != 0 || !slices.Equal(h3.Lacks, []LackRange{lr(1, 14, math.MinInt64, 2200)}) {
		t.Fatalf("holdings %+v", p)
	}
	if f.Config().DeadAfterMs != DefaultDeadAfterMs || f.Config().ReplicationFactor != 2 {
		t.Fatalf("config %+v", f.Config())
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	// And it writes the current version, which restores to the same.
	g := New()
	if err := g.Restore(f.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if string(g.Snapshot()) != string(f.Snapshot()) {
		t.Fatal("round trip differs")
	}
}

// TestHoldings_NeverClaimWhatAReplicaDoesNotHold drives random placement
// changes, segment stores with partial holders, copies and state changes,
// and compares the catalog with a model of what each coordinator really
// stored: a replica the catalog says holds a segment must have it, and
// while a present coordinator that was ever a replica holds a segment no
// other present replica holds, the catalog keeps a replica that holds it
// (make before break).
func TestHoldings_NeverClaimWhatAReplicaDoesNotHold(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { holdingsModelRun(t, seed) })
	}
}

func holdingsModelRun(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 11))
	f := New()
	index := uint64(1)
	apply := func(c Command) (any, error) {
		index++
		return f.Apply(index, EncodeCommand(c))
	}
	must := func(c Command) any {
		res, err := apply(c)
		if err != nil {
			t.Fatalf("seed %d: %s: %v", seed, c.Kind(), err)
		}
		return res
	}
	coords := []string{"c1", "c2", "c3", "c4", "c5"}
	members := []uint64{1, 2, 3}
	f.ApplyMembership(index, Membership{Voters: members})
	cfg := DefaultConfig
	cfg.ReplicationFactor = uint32(2 + r.IntN(2))
	must(SetConfig{Config: cfg})
	for i, c := range coords {
		must(RegisterNode{ID: c, Role: RoleCoordinator, RaftID: uint64(i + 1)})
	}
	edges := []string{"e1", "e2"}
	for _, e := range edges {
		must(RegisterNode{ID: e, Role: RoleEdge})
	}
	// has[edge][coordinator] is the set of sequences it really stored.
	has := map[string]map[string]map[uint64]bool{}
	put := func(e, c string, first, last uint64) {
		if has[e] == nil {
			has[e] = map[string]map[uint64]bool{}
		}
		if has[e][c] == nil {
			has[e][c] = map[uint64]bool{}
		}
		for s := first; s <= last; s++ {
			has[e][c][s] = true
		}
	}
	next := map[string]uint64{"e1": 1, "e2": 1}
	for step := range 200 {
		before := map[string]map[uint64][]string{}
		for _, e := range edges {
			before[e] = claimers(t, f, e)
		}
		e := edges[r.IntN(len(edges))]
		lost := false // a store lost a segment this step: its loss is real
		switch k := r.IntN(10); {
		case k < 4: // store a segment on some active replicas, then record it
			p := placementOf(t, f, e)
			if len(p.Replicas) == 0 {
				continue
			}
			first := next[e]
			last := first + uint64(r.IntN(3))
			var holders []string
			for _, rep := range p.Replicas {
				if r.IntN(3) > 0 {
					holders = append(holders, rep)
				}
			}
			if len(holders) == 0 {
				holders = p.Replicas[:1]
			}
			for _, h := range holders {
				put(e, h, first, last)
			}
			if r.IntN(5) == 0 {
				// The placement changes between the store and the record.
				must(Rebalance{MaxMoves: 1})
			}
			if _, err := apply(RecordHeld{Edge: e, Epoch: p.Epoch, Holders: holders, Ranges: []HeldRange{{
				FirstSeq: first, LastSeq: last, Points: 1, MinTimeMs: int64(first) * 100, MaxTimeMs: int64(last)*100 + 99}}}); err == nil {
				next[e] = last + 1
			}
		case k < 6: // copy one repair task from its first source
			tasks := f.Repairs(e)
			if len(tasks) == 0 {
				continue
			}
			task := tasks[r.IntN(len(tasks))]
			if len(task.Sources) == 0 {
				// The edge ships it again: it has everything.
				put(e, task.Replica, task.Run.FirstSeq, task.Run.LastSeq)
			} else {
				src := task.Sources[0]
				for s := task.Run.FirstSeq; s <= task.Run.LastSeq; s++ {
					if f.isHeld(e, s) && !has[e][src][s] {
						t.Fatalf("seed %d step %d: source %s lacks %s/%d it was chosen for", seed, step, src, e, s)
					}
				}
				put(e, task.Replica, task.Run.FirstSeq, task.Run.LastSeq)
			}
			must(RecordReplicated{Edge: e, Replica: task.Replica, PlacedIndex: task.PlacedIndex, Ranges: []SeqRange{{task.Run.FirstSeq, task.Run.LastSeq}}})
		case k == 6 && r.IntN(4) == 0:
			// A replica's store loses a segment; the scrub reports it.
			p := placementOf(t, f, e)
			all := p.All()
			if len(all) == 0 || next[e] == 1 {
				continue
			}
			c := all[r.IntN(len(all))]
			seq := 1 + uint64(r.IntN(int(next[e]-1)))
			delete(has[e][c], seq)
			lost = true
			h, _, _ := p.HoldingOf(c)
			must(RecordMissing{Edge: e, Replica: c, PlacedIndex: h.Index, Ranges: []SeqRange{{seq, seq}}})
		case k == 6:
			c := coords[r.IntN(len(coords))]
			must(SetNodeState{ID: c, State: NodeState(r.IntN(3))})
		case k == 7:
			must(Rebalance{MaxMoves: uint32(1 + r.IntN(3))})
		case k == 8: // membership changes: at least two members stay
			var m []uint64
			for id := uint64(1); id <= uint64(len(coords)); id++ {
				if r.IntN(3) > 0 {
					m = append(m, id)
				}
			}
			if len(m) < 2 {
				continue
			}
			index++
			if err := f.ApplyMembership(index, Membership{Voters: m}); err != nil {
				t.Fatal(err)
			}
		default:
			p := placementOf(t, f, e)
			if len(p.Replicas) > 0 && r.IntN(2) == 0 {
				must(SetPlacement{Edge: e, Replicas: []string{p.Replicas[0]}})
			} else {
				must(SetPlacement{Edge: e})
			}
		}
		if err := f.Check(); err != nil {
			t.Fatalf("seed %d step %d: %v", seed, step, err)
		}
		// A coordinator that leaves a placement forgets the edge (the
		// replica store drops its index entries), as the coordinator does.
		for _, e := range edges {
			p := placementOf(t, f, e)
			for _, c := range coords {
				if _, _, ok := p.HoldingOf(c); !ok {
					delete(has[e], c)
				}
			}
		}
		for _, e := range edges {
			checkHoldingsSound(t, f, e, has[e], seed, step)
			// Make before break: a held segment that some replica held
			// keeps one, unless every replica that held it left the
			// cluster in this step.
			after := claimers(t, f, e)
			for s, was := range before[e] {
				if !lost && len(was) > 0 && len(after[s]) == 0 && slices.ContainsFunc(was, f.isPresent) {
					t.Fatalf("seed %d step %d: %s/%d lost its last replica; held before by %v", seed, step, e, s, was)
				}
			}
		}
	}
}

// claimers maps each held sequence of edge to the replicas the catalog
// says hold it.
func claimers(t *testing.T, f *FSM, e string) map[uint64][]string {
	t.Helper()
	out := map[uint64][]string{}
	p := placementOf(t, f, e)
	pr, _ := f.Progress(e)
	for _, run := range pr.Held {
		for s := run.FirstSeq; s <= run.LastSeq; s++ {
			out[s] = nil
			for _, c := range p.All() {
				if h, _, _ := p.HoldingOf(c); !h.LacksAny(s, s) {
					out[s] = append(out[s], c)
				}
			}
		}
	}
	return out
}

func (f *FSM) isPresent(id string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.present(id)
}

// isHeld reports whether the catalog records seq of edge as held.
func (f *FSM) isHeld(edge string, seq uint64) bool {
	p, ok := f.Progress(edge)
	return ok && heldContains(p.Held, seq)
}

func checkHoldingsSound(t *testing.T, f *FSM, e string, has map[string]map[uint64]bool, seed uint64, step int) {
	t.Helper()
	p := placementOf(t, f, e)
	pr, _ := f.Progress(e)
	for _, c := range p.All() {
		h, _, _ := p.HoldingOf(c)
		for _, run := range pr.Held {
			for s := run.FirstSeq; s <= run.LastSeq; s++ {
				if !h.LacksAny(s, s) && !has[c][s] {
					t.Fatalf("seed %d step %d: the catalog says %s holds %s/%d; it does not (placement %+v)", seed, step, c, e, s, p)
				}
			}
		}
	}
}
