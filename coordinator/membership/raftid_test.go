package membership

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestNewRaftID_KeepsTheOrdinalWithIdentityFromHostname(t *testing.T) {
	cases := []struct {
		byOrdinal  bool
		max, old   uint64
		want, ordn uint64
	}{
		{true, 3, 2, 1002, 2},
		{true, 1002, 2, 2002, 2},
		{true, 1500, 3, 2003, 3},
		{false, 3, 2, 4, 4},
		{false, 9, 2, 10, 10},
	}
	for _, c := range cases {
		got := NewRaftID(c.max, c.old, c.byOrdinal)
		if got != c.want || got <= c.max || Ordinal(got) != c.ordn {
			t.Errorf("NewRaftID(%d, %d, %v) = %d (ordinal %d), want %d (ordinal %d)", c.max, c.old, c.byOrdinal, got, Ordinal(got), c.want, c.ordn)
		}
	}
}

func TestIdentityFromHostname(t *testing.T) {
	good := map[string]struct {
		node string
		raft uint64
	}{
		"tributary-coordinator-0":   {"tributary-coordinator-0", 1},
		"tributary-coordinator-2":   {"tributary-coordinator-2", 3},
		"c-41":                      {"c-41", 42},
		"release-tributary-coord-9": {"release-tributary-coord-9", 10},
	}
	for h, want := range good {
		node, raft, err := IdentityFromHostname(h)
		if err != nil || node != want.node || raft != want.raft {
			t.Errorf("IdentityFromHostname(%q) = %q, %d, %v; want %q, %d", h, node, raft, err, want.node, want.raft)
		}
	}
	for _, h := range []string{"", "coordinator", "coordinator-", "-3", "coordinator-x", "coordinator-01", "coordinator-+1", "coordinator-1 ", "coordinator-99999999999999999999", "coordinator-999"} {
		if _, _, err := IdentityFromHostname(h); err == nil {
			t.Errorf("IdentityFromHostname(%q) accepted", h)
		}
	}
}

func TestOptions_Validate(t *testing.T) {
	good := func() Options {
		return Options{Self: Peer{RaftID: 1, NodeID: "co-0", Addr: "co-0:7444"}, Cluster: serverCluster{}}
	}
	o := good()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.LeaveAfter != time.Minute || o.JoinInterval != 2*time.Second || o.LeaveInterval != 5*time.Second || o.MaxLag != 1000 || o.Now == nil || o.Logger == nil {
		t.Fatalf("defaults not filled: %+v", o)
	}
	for name, edit := range map[string]func(*Options){
		"no raft id":     func(o *Options) { o.Self.RaftID = 0 },
		"no address":     func(o *Options) { o.Self.Addr = "" },
		"no cluster":     func(o *Options) { o.Cluster = nil },
		"negative grace": func(o *Options) { o.LeaveAfter = -time.Second },
	} {
		o := good()
		edit(&o)
		if err := o.Validate(); err == nil || !strings.HasPrefix(err.Error(), "membership options: ") {
			t.Errorf("%s: err = %v, want a membership options error", name, err)
		}
	}
}

func TestRun_BeyondExpectedDoesNotJoin(t *testing.T) {
	// Raft id 5 (ordinal 4) with 3 expected: no join is asked for, and the
	// leave loop, which runs on every member, asks this one's view.
	f := newFakeRaft()
	c := &countingCluster{Cluster: inMemory(f)}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := Run(ctx, Options{Self: Peer{RaftID: 5, NodeID: "co-4", Addr: "127.0.0.1:7444"}, Cluster: c,
		Join:     []Peer{{RaftID: 1, NodeID: "co-0", Addr: "127.0.0.1:7444"}},
		Expected: FixedExpected(3), LeaveInterval: time.Millisecond, Logger: discard()})
	if err != context.DeadlineExceeded {
		t.Fatalf("Run = %v, want the context's error", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.adds) != 0 || c.members.Load() == 0 {
		t.Fatalf("adds %v, %d Members calls: want no add and the leave loop running", f.adds, c.members.Load())
	}
}

func TestRun_NothingToDo(t *testing.T) {
	if err := Run(context.Background(), Options{Self: Peer{RaftID: 1, NodeID: "co-0", Addr: "co-0:7444"}, Cluster: serverCluster{}}); err != nil {
		t.Fatalf("Run without join or expected members = %v, want nil at once", err)
	}
}
