package coordinator

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// TestHeal_DeadCoordinatorIsReplacedAndHistoryCopied runs four
// coordinators in process (replication factor 3) and a real edge: one
// replica coordinator stops for good and nobody acts. Shipping continues
// (a write quorum of 2 acknowledges), the leader marks it down after
// dead-after, its replicas leave, the fourth coordinator takes its place
// and copies the edge's whole history from a survivor, and then every
// active replica, asked alone, answers exactly what was written.
func TestHeal_DeadCoordinatorIsReplacedAndHistoryCopied(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-coordinator healing takes several seconds")
	}
	addrs := freeAddrs(t, 4)
	var peers []Peer
	for i := range 3 {
		peers = append(peers, Peer{RaftID: uint64(i + 1), NodeID: fmt.Sprintf("coord-%d", i+1), Addr: addrs[i]})
	}
	fast := func(o *Options) {
		o.DeadAfter, o.HealInterval, o.ScrubInterval = 3*time.Second, 200*time.Millisecond, -1
	}
	var ms []*member
	for _, p := range peers {
		ms = append(ms, startMemberWith(t, p.RaftID, p.NodeID, p.Addr, peers, nil, fast))
	}
	lead := leader(t, ms)
	eventually(t, "three coordinators registered", func() bool { return len(registeredCoordinators(lead.c)) == 3 })
	var targets []string
	for _, m := range ms {
		targets = append(targets, m.c.IntakeAddr())
	}
	e := startEdge(t, targets)
	through := e.writeAndShip(t, 20)
	e.checkQuery(t, lead, through, 0)

	// The fourth coordinator joins (it holds nothing: RF 3 is met).
	m4 := startMemberWith(t, 4, "coord-4", addrs[3], nil, peers, fast)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := lead.c.raft.AddVoter(ctx, 4, addrs[3]); err != nil {
		t.Fatal(err)
	}
	ms = append(ms, m4)
	eventually(t, "four coordinators registered", func() bool { return len(registeredCoordinators(lead.c)) == 4 })

	// A replica of the edge that is not the leader dies for good.
	pl := placement(t, lead)
	var victim *member
	for _, m := range ms {
		if m != lead && slices.Contains(pl, m.nodeID) {
			victim = m
			break
		}
	}
	victim.stop(t)
	killed := time.Now()

	// Shipping never stops: the quorum of the two survivors acknowledges.
	through = e.writeAndShip(t, 10)
	t.Logf("acknowledged through %d with %s dead, %s after the kill", through, victim.nodeID, time.Since(killed).Round(time.Millisecond))

	// Healed: the dead one is down, the edge's placement has three live
	// active replicas lacking nothing, and no leaving replica is left.
	eventually(t, "the placement healed", func() bool {
		n, _ := lead.c.Catalog().Node(victim.nodeID)
		p, _ := lead.c.Catalog().Placement(edgeID)
		if n.State != catalog.NodeDown || len(p.Replicas) != 3 || slices.Contains(p.Replicas, victim.nodeID) {
			return false
		}
		for _, h := range p.Holdings {
			if len(h.Lacks) != 0 {
				return false
			}
		}
		return len(p.Leaving) == 0 || (len(p.Leaving) == 1 && p.Leaving[0].ID == victim.nodeID)
	})
	t.Logf("healed %s after the kill", time.Since(killed).Round(time.Millisecond))

	// Each active replica alone holds every point written.
	var live *member
	for _, m := range ms {
		if m != victim {
			live = m
			break
		}
	}
	for _, id := range placement(t, live) {
		got := e.replicaPoints(t, live, id)
		e.compare(t, "replica "+id+" alone", got, 0, t.Errorf)
	}
	e.checkQuery(t, live, through, 0)
}

// replicaPoints reads every "temp" point replica id holds of the edge.
func (e *edge) replicaPoints(t *testing.T, m *member, id string) map[string]model.Series {
	t.Helper()
	rs, err := m.c.links.replicaSource(id)
	if err != nil {
		t.Fatalf("replica %s: %v", id, err)
	}
	eq, _ := labels.NewMatcher(labels.MatchEqual, "__name__", "temp")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	got := map[string]model.Series{}
	if _, err := rs.Query(ctx, []string{edgeID}, model.Query{Matchers: []*labels.Matcher{eq}, Start: 0, End: e.next + 1000, Mode: model.ModeRaw}, func(_ string, s model.Series) error {
		got[s.Labels.String()] = model.Series{Labels: s.Labels, Ts: slices.Clone(s.Ts), Vs: slices.Clone(s.Vs)}
		return nil
	}); err != nil {
		t.Fatalf("query replica %s: %v", id, err)
	}
	return got
}
