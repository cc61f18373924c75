package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tributarydb/tributary/coordinator"
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
	for id := uint64(1); id <= uint64(len(f.members))+1; id++ {
		if m, ok := f.members[id]; ok {
			out = append(out, proto.Clone(m).(*pb.Member))
		}
	}
	return out
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

// startFakeRaft serves f on loopback and returns its port.
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

func testJoiner(port string) *autoJoiner {
	peers := []coordinator.Peer{{RaftID: 1, NodeID: "coord-1", Addr: "127.0.0.1:7444"}, {RaftID: 2, NodeID: "coord-2", Addr: "127.0.0.1:7444"}}
	return &autoJoiner{
		self:  coordinator.Peer{RaftID: 4, NodeID: "coord-3", Addr: "127.0.0.1:7444"},
		peers: peers, clientPort: port,
		dialOpts: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		interval: time.Millisecond, maxLag: 10, callTime: 5 * time.Second,
		log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func runJoiner(t *testing.T, j *autoJoiner) {
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
	runJoiner(t, testJoiner(startFakeRaft(t, f)))
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
	runJoiner(t, testJoiner(startFakeRaft(t, f)))
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.adds) != 0 || len(f.promotes) != 0 {
		t.Fatalf("adds %v promotes %v: want none", f.adds, f.promotes)
	}
}

func TestAutoJoin_LearnerIsPromotedNotReAdded(t *testing.T) {
	f := newFakeRaft()
	f.members[4] = &pb.Member{RaftId: 4, NodeId: "coord-3", Addr: "127.0.0.1:7444", Learner: true}
	runJoiner(t, testJoiner(startFakeRaft(t, f)))
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.adds) != 0 || len(f.promotes) != 1 {
		t.Fatalf("adds %v promotes %v: want no add and one promotion", f.adds, f.promotes)
	}
}

func TestAutoJoin_StopsWithContext(t *testing.T) {
	// Nobody answers: run keeps trying until its context ends.
	j := testJoiner("1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- j.run(ctx) }()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("run = %v, want context.Canceled", err)
	}
}

func TestNewAutoJoiner_AdvertisedAddressAndClientPort(t *testing.T) {
	o := coordinator.Options{RaftID: 4, NodeID: "co-3", ClusterAddr: "co-3.h.ns.svc:7444", Insecure: true,
		JoinPeers: []coordinator.Peer{{RaftID: 1, NodeID: "co-0", Addr: "co-0.h.ns.svc:7444"}}}
	sf := serveFlags{grpcListen: "0.0.0.0:7070"}
	j, err := newAutoJoiner(o, "[::]:7444", &sf, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if j.self.Addr != "co-3.h.ns.svc:7444" || j.self.RaftID != 4 || j.self.NodeID != "co-3" {
		t.Errorf("self %+v: want the advertised cluster address", j.self)
	}
	if a, err := j.clientAddr(o.JoinPeers[0].Addr); err != nil || a != "co-0.h.ns.svc:7070" {
		t.Errorf("client address of co-0 = %q, %v; want its host at this --listen port", a, err)
	}
	o.ClusterAddr = ""
	if j, _ = newAutoJoiner(o, "10.0.0.4:7444", &sf, slog.New(slog.NewTextHandler(io.Discard, nil))); j.self.Addr != "10.0.0.4:7444" {
		t.Errorf("without an advertised address: %q, want the bound one", j.self.Addr)
	}
	sf.grpcListen = "nonsense"
	if _, err := newAutoJoiner(o, "x:1", &sf, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Error("--listen without a port accepted")
	}
}

func TestNewRaftID_KeepsTheOrdinalWithIdentityFromHostname(t *testing.T) {
	byHost := coordinatorFlags{identityFromHostname: true}
	plain := coordinatorFlags{}
	cases := []struct {
		f          *coordinatorFlags
		max, old   uint64
		want, ordn uint64
	}{
		{&byHost, 3, 2, 1002, 2},
		{&byHost, 1002, 2, 2002, 2},
		{&byHost, 1500, 3, 2003, 3},
		{&plain, 3, 2, 4, 4},
		{&plain, 9, 2, 10, 10},
	}
	for _, c := range cases {
		got := c.f.newRaftID(c.max, c.old)
		if got != c.want || got <= c.max || ordinalOf(got) != c.ordn {
			t.Errorf("newRaftID(%d, %d) = %d (ordinal %d), want %d (ordinal %d)", c.max, c.old, got, ordinalOf(got), c.want, c.ordn)
		}
	}
}
