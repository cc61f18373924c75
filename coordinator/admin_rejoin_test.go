package coordinator

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// TestAdmin_AddMemberTakesBackARemovedCoordinatorUnderANewRaftID: a
// coordinator that lost its disk rejoins (--rejoin) under a new raft id
// with its old node id: once its old raft member is removed, the leader
// adds the new one (the catalog's RegisterNode takes it back too); while
// the old member is still there, adding its node id under another raft id
// is refused.
func TestAdmin_AddMemberTakesBackARemovedCoordinatorUnderANewRaftID(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three coordinators")
	}
	addrs := freeAddrs(t, 4)
	var peers []Peer
	for i := range 3 {
		peers = append(peers, Peer{RaftID: uint64(i + 1), NodeID: fmt.Sprintf("coord-%d", i+1), Addr: addrs[i]})
	}
	var ms []*member
	for i, p := range peers {
		ms = append(ms, startMember(t, p.RaftID, p.NodeID, addrs[i], peers, nil))
	}
	lead := leader(t, ms)
	eventually(t, "three coordinators registered", func() bool { return len(registeredCoordinators(lead.c)) == 3 })
	var lost *member
	for _, m := range ms {
		if m != lead {
			lost = m
			break
		}
	}
	lost.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	again := &pb.AddMemberRequest{RaftId: 4, NodeId: lost.nodeID, Addr: addrs[3], Learner: true}

	_, err := lead.cl.AddMember(ctx, again)
	wantCode(t, "add the lost member's node id under a new raft id while its old raft id is a member", err, codes.FailedPrecondition, lost.nodeID)

	if _, err := lead.cl.RemoveMember(ctx, &pb.RemoveMemberRequest{RaftId: lost.raftID, Force: true}); err != nil {
		t.Fatalf("remove %s (raft %d): %v", lost.nodeID, lost.raftID, err)
	}
	var join []Peer
	for _, m := range ms {
		if m != lost {
			join = append(join, Peer{RaftID: m.raftID, NodeID: m.nodeID, Addr: m.c.ClusterAddr()})
		}
	}
	back := startMember(t, 4, lost.nodeID, addrs[3], nil, join)
	resp, err := lead.cl.AddMember(ctx, again)
	if err != nil {
		t.Fatalf("add %s back under raft id 4 after its old member was removed: %v", lost.nodeID, err)
	}
	if i := slices.IndexFunc(resp.Members, func(m *pb.Member) bool { return m.RaftId == 4 }); i < 0 || !resp.Members[i].Learner {
		t.Fatalf("members after the add: %v", resp.Members)
	}
	eventually(t, lost.nodeID+" registered again under raft id 4", func() bool {
		n, ok := lead.c.Catalog().Node(lost.nodeID)
		return ok && n.RaftID == 4 && n.StoreID == back.c.store.ID()
	})
}
