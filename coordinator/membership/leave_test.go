package membership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/internal/loopback"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// ---- unit tests against fake members ----

// leaveFakeMember answers ClusterService for one member of a fake cluster: the
// leader answers with the shared view and records changes; any other
// member just answers (it is alive).
type leaveCluster struct {
	mu        sync.Mutex
	leader    uint64
	members   []*pb.Member
	removes   []uint64
	transfers []uint64
	cluster   serverCluster // the members that answer, by cluster address
}

type leaveFakeMember struct {
	pb.UnimplementedClusterServiceServer
	f  *leaveCluster
	id uint64
}

func (m *leaveFakeMember) Members(context.Context, *pb.MembersRequest) (*pb.MembersResponse, error) {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	return &pb.MembersResponse{LeaderRaftId: m.f.leader, Members: slices.Clone(m.f.members)}, nil
}

func (m *leaveFakeMember) RemoveMember(_ context.Context, req *pb.RemoveMemberRequest) (*pb.RemoveMemberResponse, error) {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	if m.id != m.f.leader {
		return nil, status.Error(codes.FailedPrecondition, "not the leader")
	}
	m.f.removes = append(m.f.removes, req.RaftId)
	m.f.members = slices.DeleteFunc(m.f.members, func(x *pb.Member) bool { return x.RaftId == req.RaftId })
	return &pb.RemoveMemberResponse{}, nil
}

func (m *leaveFakeMember) TransferLeadership(_ context.Context, req *pb.TransferLeadershipRequest) (*pb.TransferLeadershipResponse, error) {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	m.f.transfers = append(m.f.transfers, req.ToRaftId)
	m.f.leader = req.ToRaftId
	return &pb.TransferLeadershipResponse{LeaderRaftId: req.ToRaftId}, nil
}

// newLeaveCluster makes voters 1..n (learners listed in learners) led by
// leader; the members in alive answer (in f.cluster), the others do not.
func newLeaveCluster(n, leader uint64, learners, alive []uint64) *leaveCluster {
	f := &leaveCluster{leader: leader, cluster: serverCluster{}}
	for id := uint64(1); id <= n; id++ {
		addr := fmt.Sprintf("coord-%d:7444", id-1)
		f.members = append(f.members, &pb.Member{RaftId: id, NodeId: fmt.Sprintf("coord-%d", id-1), Addr: addr,
			Learner: slices.Contains(learners, id), Leader: id == leader, MatchIndex: 100 + id})
		if slices.Contains(alive, id) {
			f.cluster[addr] = &leaveFakeMember{f: f, id: id}
		}
	}
	return f
}

func (f *leaveCluster) ids() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []uint64
	for _, m := range f.members {
		out = append(out, m.RaftId)
	}
	return out
}

// testLeaver is the leaver of raft id self, with a clock the test moves.
func testLeaver(f *leaveCluster, self, expected uint64, clock *time.Time) *leaver {
	return &leaver{
		self:     Peer{RaftID: self, NodeID: fmt.Sprintf("coord-%d", self-1), Addr: fmt.Sprintf("coord-%d:7444", self-1)},
		expected: FixedExpected(expected), cluster: f.cluster,
		interval: time.Millisecond, goneAfter: time.Minute, callTime: 2 * time.Second,
		now: func() time.Time { return *clock }, log: discard(),
		goneSince: map[uint64]time.Time{},
	}
}

// rounds runs n rounds, moving the clock by step before each.
func rounds(t *testing.T, l *leaver, clock *time.Time, n int, step time.Duration) []error {
	t.Helper()
	var errs []error
	for range n {
		*clock = clock.Add(step)
		if err := l.round(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func TestAutoLeave_RemovesSilentMembersBeyondExpectedAfterGrace(t *testing.T) {
	// Scaled from 5 to 3: pods 3 and 4 (raft ids 4, 5) are gone.
	f := newLeaveCluster(5, 1, nil, []uint64{1, 2, 3})
	clock := time.Unix(1000, 0)
	l := testLeaver(f, 1, 3, &clock)
	if errs := rounds(t, l, &clock, 3, 10*time.Second); len(errs) > 0 || len(f.removes) > 0 {
		t.Fatalf("within the grace period: removes %v errs %v, want none", f.removes, errs)
	}
	if errs := rounds(t, l, &clock, 10, 30*time.Second); len(errs) > 0 {
		t.Fatal(errs)
	}
	if !slices.Equal(f.removes, []uint64{5, 4}) || !slices.Equal(f.ids(), []uint64{1, 2, 3}) {
		t.Fatalf("removed %v, members %v: want 5 then 4 removed, 1..3 left", f.removes, f.ids())
	}
}

func TestAutoLeave_LeavesMembersWithinExpectedAndAnsweringOnes(t *testing.T) {
	cases := map[string]struct {
		n, expected uint64
		alive       []uint64
	}{
		// Rolling restart or a crash of a pod within the replica count.
		"silent member within expected": {3, 3, []uint64{1, 2}},
		// Its pod is not deleted yet: it still answers.
		"answering member beyond expected": {4, 3, []uint64{1, 2, 3, 4}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newLeaveCluster(tc.n, 1, nil, tc.alive)
			clock := time.Unix(1000, 0)
			l := testLeaver(f, 1, tc.expected, &clock)
			if errs := rounds(t, l, &clock, 5, time.Hour); len(errs) > 0 || len(f.removes) > 0 {
				t.Fatalf("removes %v errs %v, want none", f.removes, errs)
			}
		})
	}
}

// liveCount is an expected member count the test changes between rounds,
// as `kubectl scale` changes a StatefulSet's: err set means it cannot be
// read.
type liveCount struct {
	mu  sync.Mutex
	n   uint64
	err error
}

func (c *liveCount) set(n uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n, c.err = n, err
}

func (c *liveCount) read(context.Context) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.err
}

func TestAutoLeave_CountFallsThenMembersBeyondAreRemovedAfterGrace(t *testing.T) {
	// Five voters, 4 and 5 silent (their pods restart, say) while the
	// count is 5: nobody is removed. Then the count falls to 3 (kubectl
	// scale): 5 and 4 go once the grace has passed since the count fell.
	f := newLeaveCluster(5, 1, nil, []uint64{1, 2, 3})
	clock := time.Unix(1000, 0)
	l := testLeaver(f, 1, 5, &clock)
	count := &liveCount{n: 5}
	l.expected = count.read
	if errs := rounds(t, l, &clock, 5, time.Hour); len(errs) > 0 || len(f.removes) > 0 {
		t.Fatalf("count 5: removes %v errs %v, want none", f.removes, errs)
	}
	count.set(3, nil)
	if errs := rounds(t, l, &clock, 2, 30*time.Second); len(errs) > 0 || len(f.removes) > 0 {
		t.Fatalf("count 3, within the grace: removes %v errs %v, want none", f.removes, errs)
	}
	if errs := rounds(t, l, &clock, 6, 30*time.Second); len(errs) > 0 {
		t.Fatal(errs)
	}
	if !slices.Equal(f.removes, []uint64{5, 4}) || !slices.Equal(f.ids(), []uint64{1, 2, 3}) {
		t.Fatalf("removed %v, members %v: want 5 then 4 removed, 1..3 left", f.removes, f.ids())
	}
}

func TestAutoLeave_CountRisesBeforeGraceKeepsTheMembers(t *testing.T) {
	// Scaled 5 -> 3 and back to 5 before the grace ran out: 4 and 5 stay,
	// however long they are silent afterwards (they are pods again).
	f := newLeaveCluster(5, 1, nil, []uint64{1, 2, 3})
	clock := time.Unix(1000, 0)
	l := testLeaver(f, 1, 3, &clock)
	count := &liveCount{n: 3}
	l.expected = count.read
	rounds(t, l, &clock, 2, 10*time.Second)
	count.set(5, nil)
	if errs := rounds(t, l, &clock, 5, time.Hour); len(errs) > 0 || len(f.removes) > 0 {
		t.Fatalf("count back to 5: removes %v errs %v, want none", f.removes, errs)
	}
}

func TestAutoLeave_UnreadableCountRemovesNothing(t *testing.T) {
	// 4 and 5 are gone with the count at 3, but the count cannot be read
	// (the API server is down, the Role was deleted): nothing is removed
	// and each round says why. Once it is read again, the members silent
	// past the grace go.
	f := newLeaveCluster(5, 1, nil, []uint64{1, 2, 3})
	clock := time.Unix(1000, 0)
	l := testLeaver(f, 1, 3, &clock)
	count := &liveCount{n: 3}
	l.expected = count.read
	rounds(t, l, &clock, 1, time.Second) // 5 is seen silent
	count.set(0, errors.New("403 Forbidden"))
	errs := rounds(t, l, &clock, 5, time.Hour)
	if len(f.removes) > 0 {
		t.Fatalf("removed %v with no count", f.removes)
	}
	if len(errs) != 5 {
		t.Fatalf("%d errors in 5 rounds without a count, want 5", len(errs))
	}
	if got, want := errs[0].Error(), "read the expected member count: 403 Forbidden: nothing removed"; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
	count.set(3, nil)
	if errs := rounds(t, l, &clock, 6, time.Hour); len(errs) > 0 {
		t.Fatal(errs)
	}
	if !slices.Equal(f.removes, []uint64{5, 4}) {
		t.Fatalf("removed %v once the count is read again, want 5 then 4", f.removes)
	}
}

func TestAutoLeave_OnlyTheLeaderActs(t *testing.T) {
	f := newLeaveCluster(5, 1, nil, []uint64{1, 2, 3})
	clock := time.Unix(1000, 0)
	l := testLeaver(f, 2, 3, &clock) // a follower
	if errs := rounds(t, l, &clock, 5, time.Hour); len(errs) > 0 || len(f.removes) > 0 {
		t.Fatalf("a follower: removes %v errs %v, want none", f.removes, errs)
	}
}

func TestAutoLeave_LearnersFirst(t *testing.T) {
	f := newLeaveCluster(5, 1, []uint64{4}, []uint64{1, 2, 3})
	clock := time.Unix(1000, 0)
	l := testLeaver(f, 1, 3, &clock)
	rounds(t, l, &clock, 2, time.Hour)
	if !slices.Equal(f.removes, []uint64{4}) {
		t.Fatalf("removed %v after the first removal round, want the learner 4", f.removes)
	}
}

func TestAutoLeave_NeverBelowQuorum(t *testing.T) {
	// Voters 1..5, expected 3; 5 is gone and so is 2 (within expected:
	// a crash). Removing 5 would leave 1..4 with 2 answering, not a
	// quorum of 4: refused, with a message saying so.
	f := newLeaveCluster(5, 1, nil, []uint64{1, 3})
	clock := time.Unix(1000, 0)
	l := testLeaver(f, 1, 3, &clock)
	errs := rounds(t, l, &clock, 4, time.Hour)
	if len(f.removes) > 0 {
		t.Fatalf("removed %v without a quorum left", f.removes)
	}
	if len(errs) == 0 {
		t.Fatal("no error reported")
	}
	if got := errs[len(errs)-1].Error(); got != "remove member 5: 2 of the 4 voters left answer, a quorum needs 3: not removed" {
		t.Fatalf("error %q", got)
	}
}

func TestAutoLeave_LeaderBeyondExpectedHandsOver(t *testing.T) {
	f := newLeaveCluster(5, 5, nil, []uint64{1, 2, 3, 5})
	clock := time.Unix(1000, 0)
	l := testLeaver(f, 5, 3, &clock)
	if errs := rounds(t, l, &clock, 1, time.Hour); len(errs) > 0 {
		t.Fatal(errs)
	}
	// The most up-to-date voter within 1..3 (match 103) that answers.
	if !slices.Equal(f.transfers, []uint64{3}) || len(f.removes) > 0 {
		t.Fatalf("transfers %v removes %v: want leadership handed to 3 and nothing removed", f.transfers, f.removes)
	}
}

// ---- a real cluster in this process ----

// leaveMember is one coordinator with its ClusterService listener.
type leaveMember struct {
	c          *coordinator.Coordinator
	raftID     uint64
	g          *grpc.Server
	clientAddr string
	stopped    bool
}

func (m *leaveMember) stop(t *testing.T) {
	t.Helper()
	if m.stopped {
		return
	}
	m.stopped = true
	m.g.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := m.c.Stop(ctx); err != nil {
		t.Logf("stop %d: %v", m.raftID, err)
	}
}

func (m *leaveMember) members(t *testing.T) *pb.MembersResponse {
	t.Helper()
	conn, err := grpc.NewClient(m.clientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := pb.NewClusterServiceClient(conn).Members(ctx, &pb.MembersRequest{})
	if err != nil {
		return nil
	}
	return r
}

func TestAutoLeave_RealClusterScaledFrom5To3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five coordinators")
	}
	const n, expected = 5, 3
	var peers []coordinator.Peer
	// The members listen on a loopback host of their own: a port freed
	// here and bound again by the member is then not taken meanwhile by
	// another test's connection on 127.0.0.1.
	base, _, err := loopback.ReserveHosts(1)
	if err != nil {
		t.Fatal(err)
	}
	var ls []net.Listener
	for i := range n {
		l, err := net.Listen("tcp", base+"1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		peers = append(peers, coordinator.Peer{RaftID: uint64(i + 1), NodeID: fmt.Sprintf("tributary-%d", i), Addr: l.Addr().String()})
	}
	for _, l := range ls {
		l.Close()
	}
	ms := make([]*leaveMember, n)
	clientOf := map[string]string{}
	for i, p := range peers {
		c, err := coordinator.Open(coordinator.Options{
			NodeID: p.NodeID, RaftID: p.RaftID, DataDir: t.TempDir(), ClusterListen: p.Addr, ClusterAddr: p.Addr,
			IntakeListen: "127.0.0.1:0", Peers: peers, Insecure: true, TickInterval: 50 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		g := grpc.NewServer()
		c.RegisterAdmin(g)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go g.Serve(lis)
		ms[i] = &leaveMember{c: c, raftID: p.RaftID, g: g, clientAddr: lis.Addr().String()}
		clientOf[p.Addr] = ms[i].clientAddr
		t.Cleanup(func() { ms[i].stop(t) })
	}
	var mu sync.Mutex // guards clientOf against the leavers
	clientAddr := func(a string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := clientOf[a]; ok {
			return c, nil
		}
		return "", fmt.Errorf("no member at %s", a)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for: %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	leaderOf := func() uint64 {
		for _, m := range ms {
			if m.stopped {
				continue
			}
			if r := m.members(t); r != nil && r.LeaderRaftId != 0 {
				return r.LeaderRaftId
			}
		}
		return 0
	}
	waitFor("a leader", func() bool { return leaderOf() != 0 })
	// Put the leadership on raft id 5, beyond the expected members.
	lead := ms[leaderOf()-1]
	waitFor("leadership on raft id 5", func() bool {
		conn, err := grpc.NewClient(lead.clientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pb.NewClusterServiceClient(conn).TransferLeadership(ctx, &pb.TransferLeadershipRequest{ToRaftId: 5})
		if l := leaderOf(); l != 0 {
			lead = ms[l-1]
		}
		return leaderOf() == 5
	})

	// Every member runs a leaver, as every pod does with the chart.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, m := range ms {
		p := peers[m.raftID-1]
		o := Options{Self: Peer{RaftID: p.RaftID, NodeID: p.NodeID, Addr: p.Addr}, Expected: FixedExpected(expected),
			LeaveAfter: 500 * time.Millisecond, LeaveInterval: 50 * time.Millisecond, Logger: discard(),
			Cluster: &GRPCCluster{ClientAddr: clientAddr,
				DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}}}
		wg.Go(func() { Run(ctx, o) })
	}
	waitFor("leadership handed to a member within the expected 3", func() bool { l := leaderOf(); return l >= 1 && l <= expected })
	// Running members beyond the expected ones are not removed.
	time.Sleep(1500 * time.Millisecond)
	if r := ms[0].members(t); r == nil || len(r.Members) != n {
		t.Fatalf("members %v while all five run: want all five", r)
	}
	// The StatefulSet deletes pods 4 then 3 (raft ids 5, 4).
	ms[4].stop(t)
	ms[3].stop(t)
	waitFor("raft ids 4 and 5 removed", func() bool {
		r := ms[0].members(t)
		if r == nil {
			return false
		}
		var ids []uint64
		for _, m := range r.Members {
			if m.Learner {
				return false
			}
			ids = append(ids, m.RaftId)
		}
		return slices.Equal(ids, []uint64{1, 2, 3})
	})
	// The three left still commit: a leader, and one more member
	// change round trip works.
	waitFor("a leader among 1..3", func() bool { l := leaderOf(); return l >= 1 && l <= expected })
}
