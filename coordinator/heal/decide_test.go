package heal

import (
	"slices"
	"testing"

	"github.com/tributarydb/tributary/coordinator/catalog"
)

func coord(id string, hbMs int64, st catalog.NodeState) catalog.Node {
	return catalog.Node{ID: id, Role: catalog.RoleCoordinator, RaftID: 1, LastHeartbeatMs: hbMs, State: st}
}

func TestHealthChanges(t *testing.T) {
	const dead = 30_000
	cases := []struct {
		name        string
		nodes       []catalog.Node
		now, leader int64
		want        []catalog.SetNodeState
	}{
		{"fresh heartbeats", []catalog.Node{coord("c1", 99_000, 0), coord("c2", 95_000, 0)}, 100_000, 0, nil},
		{"silent past dead-after", []catalog.Node{coord("c1", 99_000, 0), coord("c2", 69_000, 0)}, 100_000, 0,
			[]catalog.SetNodeState{{ID: "c2", State: catalog.NodeDown, HeartbeatBeforeMs: 69_001}}},
		{"exactly dead-after is not yet dead", []catalog.Node{coord("c2", 70_000, 0)}, 100_000, 0, nil},
		{"self is never marked", []catalog.Node{coord("self", 0, 0)}, 100_000, 0, nil},
		{"a new leader counts from its election", []catalog.Node{coord("c2", 10_000, 0)}, 100_000, 80_000, nil},
		{"and condemns after dead-after of its own", []catalog.Node{coord("c2", 10_000, 0)}, 111_000, 80_000,
			[]catalog.SetNodeState{{ID: "c2", State: catalog.NodeDown, HeartbeatBeforeMs: 10_001}}},
		{"down and heard again", []catalog.Node{coord("c2", 90_000, catalog.NodeDown)}, 100_000, 0,
			[]catalog.SetNodeState{{ID: "c2", State: catalog.NodeActive}}},
		{"down, heard long ago", []catalog.Node{coord("c2", 80_000, catalog.NodeDown)}, 100_000, 0, nil},
		{"draining is the operator's", []catalog.Node{coord("c2", 0, catalog.NodeDraining)}, 100_000, 0, nil},
		{"edges are not judged", []catalog.Node{{ID: "e1", Role: catalog.RoleEdge}}, 100_000, 0, nil},
		{"sorted", []catalog.Node{coord("c3", 0, 0), coord("c2", 0, 0)}, 100_000, 0,
			[]catalog.SetNodeState{{ID: "c2", State: catalog.NodeDown, HeartbeatBeforeMs: 1}, {ID: "c3", State: catalog.NodeDown, HeartbeatBeforeMs: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := HealthChanges(c.nodes, "self", c.now, c.leader, dead)
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestBalanceMoves(t *testing.T) {
	cases := []struct {
		spread, inFlight, max int
		want                  uint32
	}{{0, 0, 4, 0}, {1, 0, 4, 0}, {2, 0, 4, 4}, {5, 3, 4, 1}, {5, 4, 4, 0}, {5, 9, 4, 0}}
	for _, c := range cases {
		if got := BalanceMoves(c.spread, c.inFlight, c.max); got != c.want {
			t.Errorf("BalanceMoves(%d, %d, %d) = %d, want %d", c.spread, c.inFlight, c.max, got, c.want)
		}
	}
}

func sr(a, b uint64) catalog.SeqRange { return catalog.SeqRange{FirstSeq: a, LastSeq: b} }

func TestScrubFindings(t *testing.T) {
	held := []catalog.HeldRange{{FirstSeq: 1, LastSeq: 10}, {FirstSeq: 20, LastSeq: 25}}
	lack := func(a, b uint64) catalog.LackRange { return catalog.LackRange{FirstSeq: a, LastSeq: b} }
	cases := []struct {
		name           string
		lacks          []catalog.LackRange
		stored         []catalog.SeqRange
		missing, found []catalog.SeqRange
	}{
		{"consistent", nil, []catalog.SeqRange{sr(1, 10), sr(20, 25)}, nil, nil},
		{"consistent with ungapped store", nil, []catalog.SeqRange{sr(1, 30)}, nil, nil},
		{"store lost a segment", nil, []catalog.SeqRange{sr(1, 4), sr(6, 10), sr(20, 25)}, []catalog.SeqRange{sr(5, 5)}, nil},
		{"store empty", nil, nil, []catalog.SeqRange{sr(1, 10), sr(20, 25)}, nil},
		{"lacked and not stored", []catalog.LackRange{lack(1, 10)}, []catalog.SeqRange{sr(20, 25)}, nil, nil},
		{"lacked but stored", []catalog.LackRange{lack(3, 22)}, []catalog.SeqRange{sr(1, 25)}, nil, []catalog.SeqRange{sr(3, 10), sr(20, 22)}},
		{"mixed", []catalog.LackRange{lack(1, 5)}, []catalog.SeqRange{sr(4, 8)},
			[]catalog.SeqRange{sr(9, 10), sr(20, 25)}, []catalog.SeqRange{sr(4, 5)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			missing, found := ScrubFindings(held, c.lacks, c.stored)
			if !slices.Equal(missing, c.missing) || !slices.Equal(found, c.found) {
				t.Fatalf("missing %v found %v, want %v and %v", missing, found, c.missing, c.found)
			}
		})
	}
}
