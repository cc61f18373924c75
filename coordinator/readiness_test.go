package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	"github.com/tributarydb/tributary/model"
)

func TestReadiness_Reasons(t *testing.T) {
	led := raftnode.Status{Lead: 1, Term: 3, Commit: 40, Applied: 40}
	with := func(f func(*raftnode.Status)) raftnode.Status { s := led; f(&s); return s }
	cases := map[string]struct {
		st         raftnode.Status
		registered bool
		store      error
		intake     bool
		want       []string // substrings of the error; none: ready
	}{
		"ready":           {led, true, nil, true, nil},
		"no leader":       {with(func(s *raftnode.Status) { s.Lead = 0 }), false, nil, true, []string{"no raft leader known (term 3)"}},
		"catching up":     {with(func(s *raftnode.Status) { s.Applied = 12 }), true, nil, true, []string{"catching up: applied raft index 12 of 40 committed"}},
		"not registered":  {led, false, nil, true, []string{"not registered in the catalog yet"}},
		"raft failed":     {with(func(s *raftnode.Status) { s.Failed = errors.New("disk full") }), true, nil, true, []string{"raft member failed: disk full"}},
		"removed":         {with(func(s *raftnode.Status) { s.Removed = true }), true, nil, true, []string{"removed from the raft cluster"}},
		"store closed":    {led, true, model.ErrClosed, true, []string{"coordinator: " + model.ErrClosed.Error()}},
		"intake stopped":  {led, true, nil, false, []string{"intake not serving"}},
		"several reasons": {with(func(s *raftnode.Status) { s.Lead, s.Applied = 0, 1 }), false, nil, false, []string{"no raft leader", "catching up", "intake not serving"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := readiness(tc.st, tc.registered, tc.store, tc.intake)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("not ready: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("ready, want not ready")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

func TestReadiness_NotReadyWithoutALeaderReadyOnceElected(t *testing.T) {
	addrs := freeAddrs(t, 2)
	peers := []Peer{{RaftID: 1, NodeID: "c1", Addr: addrs[0]}, {RaftID: 2, NodeID: "c2", Addr: addrs[1]}}
	m1 := startMember(t, 1, "c1", addrs[0], peers, nil)
	// One of two voters cannot elect a leader, however long it waits
	// (three times the election timeout of 10 ticks of 50 ms).
	for range 3 {
		time.Sleep(500 * time.Millisecond)
		err := m1.c.Readiness()
		if err == nil || !strings.Contains(err.Error(), "no raft leader known") {
			t.Fatalf("a lone member of two: readiness %v, want no leader known", err)
		}
		if m1.c.Ready() {
			t.Fatal("Ready without a leader")
		}
	}
	m2 := startMember(t, 2, "c2", addrs[1], peers, nil)
	eventually(t, "both members are ready", func() bool { return m1.c.Readiness() == nil && m2.c.Readiness() == nil })
	m2.stop(t)
	if err := m2.c.Readiness(); err == nil || !strings.Contains(err.Error(), "stopping") {
		t.Fatalf("a stopped member: readiness %v, want stopping", err)
	}
}
