package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

func nextID(maxID, _ uint64) uint64 { return maxID + 1 }

func TestDecideFresh(t *testing.T) {
	self := Peer{RaftID: 2, NodeID: "c2", Addr: "h2:7444"}
	p1, p3 := Peer{RaftID: 1, NodeID: "c1"}, Peer{RaftID: 3, NodeID: "c3"}
	fresh := func(p Peer) PeerAnswer {
		return PeerAnswer{Peer: p, Resp: &clusterv1.WhoisResponse{NodeId: p.NodeID, RaftId: p.RaftID, MaxRaftId: p.RaftID}}
	}
	down := func(p Peer) PeerAnswer { return PeerAnswer{Peer: p, Err: errors.New("connection refused")} }
	running := func(p Peer, applied, registered uint64, member bool) PeerAnswer {
		return PeerAnswer{Peer: p, Resp: &clusterv1.WhoisResponse{NodeId: p.NodeID, RaftId: p.RaftID, AppliedIndex: applied,
			RegisteredRaftId: registered, RaftIdIsMember: member, MaxRaftId: 7}}
	}
	cases := []struct {
		name              string
		bootstrap, rejoin bool
		answers           []PeerAnswer
		want              FreshAction
		wantID, replaces  uint64
	}{
		{"new cluster: all fresh", true, false, []PeerAnswer{fresh(p1), fresh(p3)}, FreshBootstrap, 0, 0},
		{"new cluster: majority fresh", true, false, []PeerAnswer{fresh(p1), down(p3)}, FreshBootstrap, 0, 0},
		{"new cluster: no majority yet", true, false, []PeerAnswer{down(p1), down(p3)}, FreshWait, 0, 0},
		{"lost disk, same flags: refused", true, false, []PeerAnswer{running(p1, 55, 2, true), down(p3)}, FreshRefuse, 0, 0},
		{"lost disk, a leader change later: refused", true, false, []PeerAnswer{running(p1, 55, 2, true), running(p3, 60, 2, true)}, FreshRefuse, 0, 0},
		{"a bootstrap member starting late", true, false, []PeerAnswer{running(p1, 5, 0, true), fresh(p3)}, FreshBootstrap, 0, 0},
		{"lost disk, rejoin", true, true, []PeerAnswer{running(p1, 55, 2, true), running(p3, 56, 2, true)}, FreshRejoin, 8, 2},
		{"lost disk after a rejoin: registered under another id", false, true, []PeerAnswer{running(p1, 90, 8, false)}, FreshRejoin, 8, 8},
		{"bootstrap into a running cluster that does not know us", true, false, []PeerAnswer{running(p1, 5, 0, false)}, FreshRefuse, 0, 0},
		{"join a running cluster", false, false, []PeerAnswer{running(p1, 5, 0, false)}, FreshJoin, 0, 0},
		{"join with nobody answering", false, false, []PeerAnswer{down(p1)}, FreshJoin, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := DecideFresh(self, c.bootstrap, c.rejoin, c.answers, nextID)
			if d.Action != c.want || d.RaftID != c.wantID || d.Replaces != c.replaces {
				t.Fatalf("got %+v, want action %d raft id %d replacing %d", d, c.want, c.wantID, c.replaces)
			}
			if d.Reason == "" {
				t.Fatal("no reason given")
			}
		})
	}
}

func TestOpen_DataDirectoryIsLockedAndBoundToItsMember(t *testing.T) {
	addrs := freeAddrs(t, 1)
	dir := t.TempDir()
	m := startMemberWith(t, 1, "c1", addrs[0], []Peer{{RaftID: 1, NodeID: "c1", Addr: addrs[0]}}, nil, func(o *Options) { o.DataDir = dir })
	_, err := Open(Options{NodeID: "c1", RaftID: 1, DataDir: dir, ClusterListen: "127.0.0.1:0", IntakeListen: "127.0.0.1:0", Insecure: true})
	if !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("a second process on the directory: %v, want ErrDataDirInUse", err)
	}
	m.stop(t)
	got, ok, err := ReadMember(dir)
	if err != nil || !ok || got != (Member{NodeID: "c1", RaftID: 1}) {
		t.Fatalf("member file %+v %v %v", got, ok, err)
	}
	_, err = Open(Options{NodeID: "c1", RaftID: 9, DataDir: dir, ClusterListen: "127.0.0.1:0", IntakeListen: "127.0.0.1:0", Insecure: true})
	if err == nil || !strings.Contains(err.Error(), "belongs to coordinator") {
		t.Fatalf("another raft id on the directory: %v", err)
	}
	if present, err := RaftLogPresent(dir); err != nil || !present {
		t.Fatalf("raft log present %v %v", present, err)
	}
}

func TestCheckFreshDataDir_LostDiskIsRefusedOrRejoins(t *testing.T) {
	addrs := freeAddrs(t, 3)
	peers := []Peer{{RaftID: 1, NodeID: "c1", Addr: addrs[0]}, {RaftID: 2, NodeID: "c2", Addr: addrs[1]}, {RaftID: 3, NodeID: "c3", Addr: addrs[2]}}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	// A new cluster: the three decide to bootstrap, each starting as soon
	// as it decided (as a process does); the last may find the others
	// running already.
	type started struct {
		i int
		d FreshDecision
		m *member
	}
	done := make(chan started, 3)
	for i := range 3 {
		go func() {
			o := Options{NodeID: peers[i].NodeID, RaftID: peers[i].RaftID, DataDir: dirs[i], ClusterListen: addrs[i],
				IntakeListen: "127.0.0.1:0", Peers: peers, Insecure: true}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			d, err := CheckFreshDataDir(ctx, o, false, nextID)
			if err != nil {
				t.Error(err)
			}
			var m *member
			if d.Action == FreshBootstrap {
				c, err := Open(withTestDefaults(t, o))
				if err != nil {
					t.Error(err)
				} else {
					m = &member{c: c, raftID: o.RaftID, nodeID: o.NodeID}
				}
			}
			done <- started{i, d, m}
		}()
	}
	ms := make([]*member, 3)
	for range 3 {
		s := <-done
		if s.d.Action != FreshBootstrap || s.m == nil {
			t.Fatalf("new cluster, member %d: %+v", s.i+1, s.d)
		}
		ms[s.i] = s.m
		t.Cleanup(func() { s.m.c.Stop(context.Background()) })
	}
	lead := leader(t, ms)
	eventually(t, "every coordinator registered", func() bool { return len(registeredCoordinators(lead.c)) == 3 })
	// c2 loses its disk.
	victim := ms[1]
	if victim == lead {
		victim = ms[2]
	}
	victim.c.Stop(context.Background())
	i := int(victim.raftID - 1)
	if err := os.RemoveAll(dirs[i]); err != nil {
		t.Fatal(err)
	}
	o := Options{NodeID: victim.nodeID, RaftID: victim.raftID, DataDir: dirs[i], ClusterListen: addrs[i], IntakeListen: "127.0.0.1:0", Peers: peers, Insecure: true}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := CheckFreshDataDir(ctx, o, false, nextID)
	if err != nil || d.Action != FreshRefuse || !strings.Contains(d.Reason, "--rejoin") {
		t.Fatalf("lost disk without --rejoin: %+v %v", d, err)
	}
	d, err = CheckFreshDataDir(ctx, o, true, nextID)
	if err != nil || d.Action != FreshRejoin || d.Replaces != victim.raftID || d.RaftID != 4 {
		t.Fatalf("lost disk with --rejoin: %+v %v", d, err)
	}
}

// withTestDefaults gives o the options startMemberWith gives its members.
func withTestDefaults(t *testing.T, o Options) Options {
	o.TickInterval = 50 * time.Millisecond
	o.Logger = testLogger(t, o.NodeID)
	return o
}

func testLogger(t *testing.T, node string) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})).With("test_member", node)
}
