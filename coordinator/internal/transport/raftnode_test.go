package transport

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	"go.etcd.io/raft/v3/raftpb"
)

// TestRaftCluster_ElectsAndCommitsOverTLS runs three raftnode members whose
// messages travel over this transport with mutual TLS and per-member
// certificates: they elect a leader, commit a proposal on every member, and
// survive a leadership transfer.
func TestRaftCluster_ElectsAndCommitsOverTLS(t *testing.T) {
	p := newPKI(t)
	ids := []uint64{1, 2, 3}
	peers := []raftnode.Peer{{ID: 1}, {ID: 2}, {ID: 3}}
	ms := map[uint64]*member{}
	nodes := map[uint64]*raftnode.Node{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup

	for _, id := range ids {
		cert := p.issue(memberName(id))
		rep := &lateReporter{}
		tr, err := New(Options{ID: id, ClusterID: cluster, TLS: p.client(cert), Reporter: rep, Logger: discard, MinBackoff: 5e6, MaxBackoff: 50e6})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		n, err := raftnode.Open(raftnode.Options{ID: id, Dir: t.TempDir(), StateMachine: catalog.New(), Transport: tr, Peers: peers, Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		rep.n.Store(n)
		m := &member{id: id, name: memberName(id), tr: tr, rec: newRecorder()}
		srv, err := NewServer(ServerOptions{ID: id, ClusterID: cluster, TLS: p.server(cert), Peers: tr, Logger: discard,
			Step: func(_ context.Context, msg raftpb.Message) error { return n.Step(msg) }})
		if err != nil {
			t.Fatal(err)
		}
		m.srv = srv
		ms[id], nodes[id] = m, n
	}
	for _, m := range ms {
		lis, err := netListen()
		if err != nil {
			t.Fatal(err)
		}
		m.serveOn(t, lis)
	}
	connect(t, ms[1], ms[2], ms[3])
	for _, id := range ids {
		n := nodes[id]
		ticker := time.NewTicker(10 * time.Millisecond)
		t.Cleanup(ticker.Stop)
		wg.Go(func() {
			if err := n.Run(ctx, ticker.C); err != nil && ctx.Err() == nil {
				t.Errorf("run %d: %v", n.ID(), err)
			}
		})
	}

	// Cleanups run last-in first-out: stop the members before the
	// servers, transports and logs they use are closed.
	t.Cleanup(func() { cancel(); wg.Wait() })

	leader := func() uint64 {
		for _, id := range ids {
			if nodes[id].Status().IsLeader {
				return id
			}
		}
		return 0
	}
	eventually(t, "a leader", func() bool { return leader() != 0 })
	propose := func(edge string) uint64 {
		t.Helper()
		for {
			l := leader()
			if l == 0 {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := nodes[l].Propose(pctx, catalog.EncodeCommand(catalog.RegisterNode{ID: edge, Role: catalog.RoleEdge}))
			pcancel()
			if err == nil {
				return nodes[l].Status().Commit
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
		}
	}
	applied := func(index uint64) func() bool {
		return func() bool {
			for _, id := range ids {
				if nodes[id].Status().Applied < index {
					return false
				}
			}
			return true
		}
	}
	eventually(t, "proposal applied on every member", applied(propose("pi-1")))

	// Hand leadership to another member and commit again.
	old := leader()
	target := old%3 + 1
	tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
	defer tcancel()
	if err := nodes[old].TransferLeadership(tctx, target); err != nil {
		t.Fatalf("transfer leadership %d → %d: %v", old, target, err)
	}
	eventually(t, "second proposal applied on every member", applied(propose("pi-2")))
	for _, id := range ids {
		if st := ms[id].srv.Stats(); st.Refused != 0 || st.Received == 0 {
			t.Errorf("member %d server stats %+v", id, st)
		}
	}
}

// lateReporter forwards delivery outcomes to the raft member once it is
// open (it needs the Transport first); until then they are discarded.
type lateReporter struct{ n atomic.Pointer[raftnode.Node] }

func (r *lateReporter) ReportUnreachable(id uint64) {
	if n := r.n.Load(); n != nil {
		n.ReportUnreachable(id)
	}
}

func (r *lateReporter) ReportSnapshot(id uint64, ok bool) {
	if n := r.n.Load(); n != nil {
		n.ReportSnapshot(id, ok)
	}
}
