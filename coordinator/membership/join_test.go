package membership

import (
	"context"
	"errors"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// fakeRaft answers ClusterService like a three-voter cluster led by raft
// id 1, where a learner catches up to the leader's log one Members call
// after it was added.
type fakeRaft struct {
	pb.UnimplementedClusterServiceServer
	mu       sync.Mutex
	members  map[uint64]*pb.Member
	adds     []*pb.AddMemberRequest
	promotes []uint64
	removes  []uint64
	failAdds int // answer ABORTED this many times first
}

func newFakeRaft() *fakeRaft {
	f := &fakeRaft{members: map[uint64]*pb.Member{}}
	for id := uint64(1); id <= 3; id++ {
		f.members[id] = &pb.Member{RaftId: id, Addr: "127.0.0.1:7444", Leader: id == 1, MatchIndex: 500}
	}
	return f
}

func (f *fakeRaft) list() []*pb.Member {
	var out []*pb.Member
	for _, id := range slices.Sorted(maps.Keys(f.members)) {
		out = append(out, proto.Clone(f.members[id]).(*pb.Member))
	}
	return out
}

func (f *fakeRaft) RemoveMember(_ context.Context, req *pb.RemoveMemberRequest) (*pb.RemoveMemberResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removes = append(f.removes, req.RaftId)
	delete(f.members, req.RaftId)
	return &pb.RemoveMemberResponse{Members: f.list()}, nil
}

func (f *fakeRaft) Members(context.Context, *pb.MembersRequest) (*pb.MembersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &pb.MembersResponse{AnsweredBy: "coord-1", LeaderRaftId: 1, Members: f.list()}
	for _, m := range f.members {
		if m.Learner && m.MatchIndex < 500 {
			m.MatchIndex = 500 // caught up by the next call
		}
	}
	return out, nil
}

func (f *fakeRaft) AddMember(_ context.Context, req *pb.AddMemberRequest) (*pb.AddMemberResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.adds = append(f.adds, req)
	if f.failAdds > 0 {
		f.failAdds--
		return nil, status.Error(codes.Aborted, "another membership change is in progress")
	}
	f.members[req.RaftId] = &pb.Member{RaftId: req.RaftId, NodeId: req.NodeId, Addr: req.Addr, Learner: req.Learner}
	return &pb.AddMemberResponse{Members: f.list()}, nil
}

func (f *fakeRaft) PromoteMember(_ context.Context, req *pb.PromoteMemberRequest) (*pb.PromoteMemberResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promotes = append(f.promotes, req.RaftId)
	m, ok := f.members[req.RaftId]
	if !ok || !m.Learner || m.MatchIndex == 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "promote member %d: not a caught-up learner", req.RaftId)
	}
	m.Learner = false
	return &pb.PromoteMemberResponse{Members: f.list()}, nil
}

// startFakeRaft serves f over gRPC on loopback and returns its port.
func startFakeRaft(t *testing.T, f *fakeRaft) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	pb.RegisterClusterServiceServer(g, f)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	return port
}

// testJoiner is the joiner of raft id 4 (coord-3) asking coord-1 and
// coord-2, which both answer at 127.0.0.1:7444 in c.
func testJoiner(c Cluster) *joiner {
	peers := []Peer{{RaftID: 1, NodeID: "coord-1", Addr: "127.0.0.1:7444"}, {RaftID: 2, NodeID: "coord-2", Addr: "127.0.0.1:7444"}}
	return &joiner{
		self:  Peer{RaftID: 4, NodeID: "coord-3", Addr: "127.0.0.1:7444"},
		peers: peers, cluster: c,
		interval: time.Millisecond, maxLag: 10, callTime: 5 * time.Second,
		log: discard(),
	}
}

// inMemory is a cluster whose members all answer as f.
func inMemory(f *fakeRaft) Cluster { return serverCluster{"127.0.0.1:7444": f} }

func runJoiner(t *testing.T, j *joiner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := j.run(ctx); err != nil {
		t.Fatalf("auto-join: %v", err)
	}
}

func TestAutoJoin_AddsAsLearnerThenPromotes(t *testing.T) {
	f := newFakeRaft()
	f.failAdds = 2 // a change in progress: retried
	runJoiner(t, testJoiner(inMemory(f)))
	requireAddedThenPromoted(t, f)
}

// TestAutoJoin_OverGRPC runs the same join against the fake served over
// gRPC, reached through GRPCCluster at the members' client port.
func TestAutoJoin_OverGRPC(t *testing.T) {
	f := newFakeRaft()
	f.failAdds = 2
	port := startFakeRaft(t, f)
	runJoiner(t, testJoiner(&GRPCCluster{ClientAddr: ClientAddrAtPort(port),
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}}))
	requireAddedThenPromoted(t, f)
}

func requireAddedThenPromoted(t *testing.T, f *fakeRaft) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.adds) != 3 {
		t.Fatalf("%d AddMember calls, want 3 (two refused)", len(f.adds))
	}
	for _, a := range f.adds {
		if a.RaftId != 4 || a.NodeId != "coord-3" || a.Addr != "127.0.0.1:7444" || !a.Learner {
			t.Errorf("AddMember %v: want raft id 4, coord-3, its cluster address, as a learner", a)
		}
	}
	if len(f.promotes) != 1 || f.promotes[0] != 4 {
		t.Errorf("promotions %v, want [4] once", f.promotes)
	}
	if m := f.members[4]; m == nil || m.Learner {
		t.Errorf("member 4 = %v, want a voter", m)
	}
}

func TestAutoJoin_VoterIsLeftAlone(t *testing.T) {
	// A restarted coordinator that is already a voter must not be added
	// again: adding a voter as a learner would demote it.
	f := newFakeRaft()
	f.members[4] = &pb.Member{RaftId: 4, NodeId: "coord-3", Addr: "127.0.0.1:7444", MatchIndex: 500}
	runJoiner(t, testJoiner(inMemory(f)))
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.adds) != 0 || len(f.promotes) != 0 {
		t.Fatalf("adds %v promotes %v: want none", f.adds, f.promotes)
	}
}

func TestAutoJoin_LearnerIsPromotedNotReAdded(t *testing.T) {
	f := newFakeRaft()
	f.members[4] = &pb.Member{RaftId: 4, NodeId: "coord-3", Addr: "127.0.0.1:7444", Learner: true}
	runJoiner(t, testJoiner(inMemory(f)))
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.adds) != 0 || len(f.promotes) != 1 {
		t.Fatalf("adds %v promotes %v: want no add and one promotion", f.adds, f.promotes)
	}
}

func TestAutoJoin_StopsWithContext(t *testing.T) {
	// Nobody answers: run keeps trying until its context ends.
	j := testJoiner(serverCluster{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- j.run(ctx) }()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("run = %v, want context.Canceled", err)
	}
}

func TestAutoJoin_RemovesTheReplacedMemberFirst(t *testing.T) {
	// Raft id 4 lost its disk and rejoins as 1004: 4 is removed before
	// 1004 is added.
	f := newFakeRaft()
	f.members[4] = &pb.Member{RaftId: 4, NodeId: "coord-3", Addr: "127.0.0.1:7444", MatchIndex: 500}
	j := testJoiner(inMemory(f))
	j.self.RaftID, j.replaces = 1004, 4
	runJoiner(t, j)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.removes) != 1 || f.removes[0] != 4 || f.members[4] != nil {
		t.Fatalf("removes %v, member 4 %v: want 4 removed", f.removes, f.members[4])
	}
	if len(f.adds) != 1 || f.adds[0].RaftId != 1004 || f.members[1004] == nil || f.members[1004].Learner {
		t.Fatalf("adds %v, member 1004 %v: want 1004 added and promoted", f.adds, f.members[1004])
	}
}

// joinRounds runs n rounds of j and returns their errors.
func joinRounds(j *joiner, n int) []error {
	var errs []error
	for range n {
		if err := j.round(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func TestAutoJoin_WaitsUntilTheCountReachesItsOrdinal(t *testing.T) {
	// Raft id 4 (ordinal 3) while the count is 3: it waits, saying why.
	// kubectl scale raises the count to 5: it joins.
	f := newFakeRaft()
	j := testJoiner(inMemory(f))
	count := &liveCount{n: 3}
	j.expected = count.read
	errs := joinRounds(j, 3)
	if len(f.adds) != 0 || len(errs) != 3 || !errors.Is(errs[0], errWaiting) {
		t.Fatalf("count 3: adds %v errs %v, want no add and three waits", f.adds, errs)
	}
	if want := "auto-join: waiting: raft id 4 is beyond the 3 expected members (its StatefulSet is being scaled down, or not yet up)"; errs[0].Error() != want {
		t.Fatalf("error %q, want %q", errs[0], want)
	}
	count.set(5, nil)
	runJoiner(t, j)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.adds) != 1 || f.members[4] == nil || f.members[4].Learner {
		t.Fatalf("count 5: adds %v member 4 %v, want added and promoted", f.adds, f.members[4])
	}
}

func TestAutoJoin_UnreadableCount(t *testing.T) {
	// Never read: it waits. Read once (5), then unreadable: the last count
	// read lets it join.
	f := newFakeRaft()
	j := testJoiner(inMemory(f))
	count := &liveCount{err: errors.New("connection refused")}
	j.expected = count.read
	errs := joinRounds(j, 3)
	if len(f.adds) != 0 || len(errs) != 3 || !errors.Is(errs[0], errWaiting) {
		t.Fatalf("no count read: adds %v errs %v, want no add and three waits", f.adds, errs)
	}
	count.set(5, nil)
	if err := j.withinExpected(context.Background()); err != nil {
		t.Fatalf("count 5: %v", err)
	}
	count.set(0, errors.New("connection refused"))
	runJoiner(t, j)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.adds) != 1 || f.members[4] == nil || f.members[4].Learner {
		t.Fatalf("last count 5: adds %v member 4 %v, want added and promoted", f.adds, f.members[4])
	}
}

func TestAutoJoin_CountFallsBeforePromotion(t *testing.T) {
	// Added as a learner with the count at 5, then scaled back to 3: the
	// learner is not promoted (the leader removes it once its pod is gone).
	f := newFakeRaft()
	f.members[4] = &pb.Member{RaftId: 4, NodeId: "coord-3", Addr: "127.0.0.1:7444", Learner: true, MatchIndex: 500}
	j := testJoiner(inMemory(f))
	j.expected = FixedExpected(3)
	if errs := joinRounds(j, 3); len(f.promotes) != 0 || len(errs) != 3 {
		t.Fatalf("promotes %v errs %v: want no promotion", f.promotes, errs)
	}
}

func TestClientAddrAtPort(t *testing.T) {
	at := ClientAddrAtPort("7070")
	if a, err := at("co-0.h.ns.svc:7444"); err != nil || a != "co-0.h.ns.svc:7070" {
		t.Errorf("client address of co-0 = %q, %v; want its host at port 7070", a, err)
	}
	if a, err := at("[fd00::1]:7444"); err != nil || a != "[fd00::1]:7070" {
		t.Errorf("client address of an IPv6 member = %q, %v", a, err)
	}
	if _, err := at("nonsense"); err == nil {
		t.Error("a cluster address without a port accepted")
	}
}
