package raftnode_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/node/labels"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/goleak"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 1}))

// memCluster is a small synchronous harness: messages are delivered in
// send order by pump, which processes members until nothing moves.
type memCluster struct {
	t     testing.TB
	nodes map[uint64]*raftnode.Node
	fsms  map[uint64]*catalog.FSM
	fs    map[uint64]vfs.FS
	queue []raftpb.Message
	ids   []uint64
	opts  func(*raftnode.Options)
	dir   func(id uint64) string
}

type queueTransport struct{ c *memCluster }

func (q queueTransport) Send(msgs []raftpb.Message) { q.c.queue = append(q.c.queue, msgs...) }

func newMemCluster(t testing.TB, n int, fsFor func(id uint64) vfs.FS, opts func(*raftnode.Options)) *memCluster {
	return newMemClusterIn(t, n, fsFor, nil, opts)
}

func newMemClusterIn(t testing.TB, n int, fsFor func(id uint64) vfs.FS, dir func(uint64) string, opts func(*raftnode.Options)) *memCluster {
	c := &memCluster{t: t, nodes: map[uint64]*raftnode.Node{}, fsms: map[uint64]*catalog.FSM{}, fs: map[uint64]vfs.FS{}, opts: opts, dir: dir}
	var peers []raftnode.Peer
	for id := uint64(1); id <= uint64(n); id++ {
		peers = append(peers, raftnode.Peer{ID: id, Addr: addrOf(id)})
		c.ids = append(c.ids, id)
		c.fs[id] = fsFor(id)
	}
	for _, id := range c.ids {
		c.start(id, peers)
	}
	c.nodes[1].Campaign()
	c.pump()
	if s := c.nodes[1].Status(); !s.IsLeader {
		t.Fatalf("member 1 did not win the first election: %+v", s)
	}
	return c
}

func (c *memCluster) start(id uint64, peers []raftnode.Peer) {
	c.fsms[id] = catalog.New()
	dir := "/raft"
	if c.dir != nil {
		dir = c.dir(id)
	}
	o := raftnode.Options{ID: id, Dir: dir, FS: c.fs[id], StateMachine: c.fsms[id], Transport: queueTransport{c}, Peers: peers, Logger: discard}
	if c.opts != nil {
		c.opts(&o)
	}
	n, err := raftnode.Open(o)
	if err != nil {
		c.t.Fatalf("open member %d: %v", id, err)
	}
	c.nodes[id] = n
}

// pump delivers messages and processes members until the cluster is
// quiet.
func (c *memCluster) pump() {
	for round := 0; ; round++ {
		if round > 10000 {
			c.t.Fatal("the cluster never went quiet")
		}
		for _, id := range c.ids {
			if err := c.nodes[id].Process(); err != nil {
				c.t.Fatalf("member %d: %v", id, err)
			}
		}
		if len(c.queue) == 0 {
			return
		}
		q := c.queue
		c.queue = nil
		for _, m := range q {
			if n := c.nodes[m.To]; n != nil {
				_ = n.Step(m)
				if m.Type == raftpb.MsgSnap {
					c.nodes[m.From].ReportSnapshot(m.To, true)
				}
			}
		}
	}
}

func (c *memCluster) closeAll() {
	for _, id := range c.ids {
		if err := c.nodes[id].Close(); err != nil {
			c.t.Fatal(err)
		}
	}
}

func registerEdge(t testing.TB, c *memCluster, edge string) {
	t.Helper()
	f := c.nodes[1].ProposeAsync(catalog.EncodeCommand(catalog.RegisterNode{ID: edge, Role: catalog.RoleEdge}))
	c.pump()
	if _, err := f.Result(); err != nil {
		t.Fatal(err)
	}
}

func seriesCmd(edge string, from, n int) []byte {
	var ss []labels.Labels
	for i := from; i < from+n; i++ {
		ss = append(ss, labels.FromStrings("__name__", "temperature", "sensor", fmt.Sprintf("s%06d", i), "site", fmt.Sprintf("site-%d", i%17)))
	}
	return catalog.EncodeCommand(catalog.RegisterSeries{Edge: edge, Series: ss})
}

func TestNode_ProposalsCoalesceAndSurviveRestart(t *testing.T) {
	c := newMemCluster(t, 3, func(uint64) vfs.FS { return vfs.NewCrashFS() }, nil)
	registerEdge(t, c, "pi-1")
	before := c.nodes[1].Status().LastLog
	// 40 proposals queued before one Process: one raft entry.
	var fs []*raftnode.Future
	for i := range 40 {
		fs = append(fs, c.nodes[1].ProposeAsync(seriesCmd("pi-1", i*10, 10)))
	}
	c.pump()
	if got := c.nodes[1].Status().LastLog - before; got != 1 {
		t.Fatalf("40 queued proposals took %d raft entries, want 1", got)
	}
	for i, f := range fs {
		res, err := f.Result()
		if err != nil {
			t.Fatal(err)
		}
		ids := res.(catalog.RegisterSeriesResult).IDs
		if want := uint64(i*10 + 1); ids[0] != want {
			t.Fatalf("proposal %d got ids from %d, want %d (ids follow proposal order)", i, ids[0], want)
		}
	}
	// Followers hold the same catalog.
	for _, id := range c.ids {
		if got := c.fsms[id].SeriesCount(); got != 400 {
			t.Fatalf("member %d has %d series", id, got)
		}
	}
	// A restarted member rebuilds its catalog from its log alone.
	snap := c.fsms[2].Snapshot()
	c.nodes[2].Close()
	c.fs[2] = c.fs[2].(*vfs.CrashFS).Crash()
	c.start(2, nil)
	c.pump()
	if string(c.fsms[2].Snapshot()) != string(snap) {
		t.Fatal("restarted member's catalog differs")
	}
	c.closeAll()
}

func TestNode_EntriesAreSplitAtMaxEntryBytes(t *testing.T) {
	c := newMemCluster(t, 1, func(uint64) vfs.FS { return vfs.NewCrashFS() }, func(o *raftnode.Options) { o.MaxEntryBytes = 8 << 10 })
	registerEdge(t, c, "pi-1")
	before := c.nodes[1].Status().LastLog
	var fs []*raftnode.Future
	cmd := seriesCmd("pi-1", 0, 40) // ~2.5 KB
	for range 10 {
		fs = append(fs, c.nodes[1].ProposeAsync(cmd))
	}
	c.pump()
	entries := c.nodes[1].Status().LastLog - before
	if entries < 3 || entries > 5 {
		t.Fatalf("10 proposals of %d bytes with 8 KiB entries took %d entries", len(cmd), entries)
	}
	for _, f := range fs {
		if _, err := f.Result(); err != nil {
			t.Fatal(err)
		}
	}
	if f := c.nodes[1].ProposeAsync(make([]byte, 9<<10)); !errors.Is(errOf(f), raftnode.ErrTooLarge) {
		t.Fatalf("oversized command: %v", errOf(f))
	}
	c.closeAll()
}

// errOf returns the error of a future that must have completed (the
// harness is synchronous: an incomplete future is a bug, not a wait).
func errOf(f *raftnode.Future) error {
	if !done(f) {
		panic("future not completed")
	}
	_, err := f.Result()
	return err
}

func TestNode_RejectedCommandIsAResult(t *testing.T) {
	c := newMemCluster(t, 3, func(uint64) vfs.FS { return vfs.NewCrashFS() }, nil)
	f := c.nodes[2].ProposeAsync(seriesCmd("nobody", 0, 1)) // through a follower
	c.pump()
	if err := errOf(f); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("command for an unknown edge: %v", err)
	}
	f = c.nodes[3].ProposeAsync([]byte("garbage"))
	c.pump()
	if err := errOf(f); !errors.Is(err, catalog.ErrBadCommand) {
		t.Fatalf("garbage command: %v", err)
	}
	c.closeAll()
	if err := errOf(c.nodes[1].ProposeAsync(seriesCmd("x", 0, 1))); !errors.Is(err, raftnode.ErrStopped) {
		t.Fatalf("proposal after Close: %v", err)
	}
}

func TestNode_ReadIndexWaitsForApply(t *testing.T) {
	c := newMemCluster(t, 3, func(uint64) vfs.FS { return vfs.NewCrashFS() }, nil)
	registerEdge(t, c, "pi-1")
	f := c.nodes[1].ProposeAsync(seriesCmd("pi-1", 0, 5))
	c.pump()
	if err := errOf(f); err != nil {
		t.Fatal(err)
	}
	r := c.nodes[3].ReadAsync()
	if done(r) {
		t.Fatal("read completed before any ReadIndex round")
	}
	c.pump()
	if err := errOf(r); err != nil {
		t.Fatal(err)
	}
	if c.fsms[3].SeriesCount() != 5 {
		t.Fatal("read completed before the follower applied the write")
	}
	c.closeAll()
}

func TestNode_MembershipChanges(t *testing.T) {
	c := newMemCluster(t, 3, func(uint64) vfs.FS { return vfs.NewCrashFS() }, func(o *raftnode.Options) {
		o.SnapshotEntries, o.KeepEntries = 5, 1
	})
	registerEdge(t, c, "pi-1")
	for i := range 12 {
		f := c.nodes[1].ProposeAsync(seriesCmd("pi-1", i, 1))
		c.pump()
		if err := errOf(f); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.nodes[1]
	change := func(typ raftnode.ChangeType, id uint64) error {
		f := leader.ChangeMembershipAsync(typ, id, addrOf(id))
		c.pump()
		return errOf(f)
	}
	var nle *raftnode.NotLeaderError
	f := c.nodes[2].ChangeMembershipAsync(raftnode.AddLearner, 4, "")
	c.pump()
	if err := errOf(f); !errors.As(err, &nle) || nle.Leader != 1 {
		t.Fatalf("change on a follower: %v", err)
	}
	for _, tc := range []struct {
		typ raftnode.ChangeType
		id  uint64
	}{{raftnode.PromoteLearner, 2}, {raftnode.RemoveMember, 9}, {raftnode.AddLearner, 2}} {
		if err := change(tc.typ, tc.id); !errors.Is(err, raftnode.ErrBadConfChange) {
			t.Fatalf("%s %d: %v", tc.typ, tc.id, err)
		}
	}
	// Add member 4 as a learner: the log was compacted, so it starts from
	// a snapshot, which must include it.
	c.ids = append(c.ids, 4)
	c.fs[4] = vfs.NewCrashFS()
	c.start(4, nil)
	if err := change(raftnode.AddLearner, 4); err != nil {
		t.Fatal(err)
	}
	c.pump()
	if got, want := string(c.fsms[4].Snapshot()), string(c.fsms[1].Snapshot()); got != want {
		t.Fatal("the new learner's catalog differs from the leader's")
	}
	if err := change(raftnode.PromoteLearner, 4); err != nil {
		t.Fatal(err)
	}
	if err := change(raftnode.AddVoter, 4); err != nil {
		t.Fatalf("adding an existing voter is a no-op: %v", err)
	}
	if err := change(raftnode.RemoveMember, 2); err != nil {
		t.Fatal(err)
	}
	c.pump()
	if s := c.nodes[2].Status(); !s.Removed {
		t.Fatalf("member 2 does not know it was removed: %+v", s)
	}
	s := leader.Status()
	if !slices.Equal(s.Voters, []uint64{1, 3, 4}) || len(s.Learners) != 0 {
		t.Fatalf("configuration %v / %v", s.Voters, s.Learners)
	}
	var members []string
	for _, m := range c.fsms[1].Members() {
		members = append(members, fmt.Sprintf("%d@%s", m.RaftID, m.Addr))
	}
	if want := []string{"1@" + addrOf(1), "3@" + addrOf(3), "4@" + addrOf(4)}; !slices.Equal(members, want) {
		t.Fatalf("catalog members %v, want %v", members, want)
	}
	// Removing every other voter leaves one; the last cannot go.
	if err := change(raftnode.RemoveMember, 3); err != nil {
		t.Fatal(err)
	}
	if err := change(raftnode.RemoveMember, 4); err != nil {
		t.Fatal(err)
	}
	if err := change(raftnode.RemoveMember, 1); !errors.Is(err, raftnode.ErrBadConfChange) {
		t.Fatalf("removing the last voter: %v", err)
	}
	c.closeAll()
}

// TestNode_StopHandsOverLeadership runs three members with their
// production Run loops (tickers on synctest's fake clock): stopping the
// leader transfers leadership, so a new leader is in place well before an
// election timeout.
func TestNode_StopHandsOverLeadership(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		const tick = 10 * time.Millisecond
		nodes := map[uint64]*raftnode.Node{}
		var mu sync.Mutex
		tr := func(from uint64) raftnode.Transport {
			return transportFunc(func(msgs []raftpb.Message) {
				mu.Lock()
				defer mu.Unlock()
				for _, m := range msgs {
					if n := nodes[m.To]; n != nil {
						_ = n.Step(m)
					}
				}
			})
		}
		peers := []raftnode.Peer{{ID: 1}, {ID: 2}, {ID: 3}}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		for _, p := range peers {
			n, err := raftnode.Open(raftnode.Options{ID: p.ID, Dir: "/raft", FS: vfs.NewCrashFS(), StateMachine: catalog.New(),
				Transport: tr(p.ID), Peers: peers, Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			nodes[p.ID] = n
			mu.Unlock()
			ticker := time.NewTicker(tick)
			defer ticker.Stop()
			wg.Go(func() {
				if err := n.Run(ctx, ticker.C); err != nil {
					t.Errorf("run %d: %v", p.ID, err)
				}
			})
		}
		leaderOf := func() uint64 {
			mu.Lock()
			defer mu.Unlock()
			for id, n := range nodes {
				if n.Status().IsLeader {
					return id
				}
			}
			return 0
		}
		for range 100 {
			if leaderOf() != 0 {
				break
			}
			time.Sleep(tick)
		}
		old := leaderOf()
		if old == 0 {
			t.Fatal("no leader after 100 ticks")
		}
		mu.Lock()
		n := nodes[old]
		mu.Unlock()
		if _, err := n.Propose(ctx, catalog.EncodeCommand(catalog.RegisterNode{ID: "pi-1", Role: catalog.RoleEdge})); err != nil {
			t.Fatal(err)
		}
		stopCtx, stopCancel := context.WithTimeout(ctx, 5*tick)
		defer stopCancel()
		start := time.Now()
		if err := n.Stop(stopCtx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		delete(nodes, old)
		mu.Unlock()
		time.Sleep(2 * tick)
		if next := leaderOf(); next == 0 || next == old {
			t.Fatalf("no new leader %v after stopping leader %d (an election would take 10+ ticks)", time.Since(start), old)
		}
		mu.Lock()
		rest := slices.Collect(maps.Values(nodes))
		clear(nodes)
		mu.Unlock()
		for _, n := range rest {
			n.Close() // not under mu: Close waits for Run, whose transport takes mu
		}
		cancel()
		wg.Wait()
	})
}

type transportFunc func([]raftpb.Message)

func (f transportFunc) Send(msgs []raftpb.Message) { f(msgs) }

func TestNode_OptionsAreValidated(t *testing.T) {
	base := raftnode.Options{ID: 1, Dir: "/raft", FS: vfs.NewCrashFS(), StateMachine: catalog.New(), Transport: transportFunc(nil), Logger: discard}
	cases := map[string]func(*raftnode.Options){
		"id 0":            func(o *raftnode.Options) { o.ID = 0 },
		"no dir":          func(o *raftnode.Options) { o.Dir = "" },
		"no fsm":          func(o *raftnode.Options) { o.StateMachine = nil },
		"ticks":           func(o *raftnode.Options) { o.ElectionTicks, o.HeartbeatTicks = 2, 2 },
		"peers w/o self":  func(o *raftnode.Options) { o.Peers = []raftnode.Peer{{ID: 2}} },
		"peers unsorted":  func(o *raftnode.Options) { o.Peers = []raftnode.Peer{{ID: 2}, {ID: 1}} },
		"peers repeated":  func(o *raftnode.Options) { o.Peers = []raftnode.Peer{{ID: 1}, {ID: 1}} },
		"tiny entries":    func(o *raftnode.Options) { o.MaxEntryBytes = 10 },
		"pending < entry": func(o *raftnode.Options) { o.MaxEntryBytes, o.MaxPendingBytes = 4<<20, 2<<20 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			o := base
			mutate(&o)
			if _, err := raftnode.Open(o); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestNode_ProposalLostWithTheLeaderIsProposedAgain: a follower's proposal
// forwarded to a leader that loses it (the message is lost, as when the
// leader dies) is proposed again once the follower sees a new leader, if
// the state machine says it may be applied twice; other commands wait for
// their caller's timeout.
func TestNode_ProposalLostWithTheLeaderIsProposedAgain(t *testing.T) {
	c := newMemCluster(t, 3, func(uint64) vfs.FS { return vfs.NewCrashFS() }, nil)
	registerEdge(t, c, "pi-1")
	series := c.nodes[2].ProposeAsync(seriesCmd("pi-1", 0, 5))
	cfg := catalog.DefaultConfig
	cfg.MaxSeries = 12345
	config := c.nodes[2].ProposeAsync(catalog.EncodeCommand(catalog.SetConfig{Config: cfg}))
	if err := c.nodes[2].Process(); err != nil {
		t.Fatal(err)
	}
	c.queue = nil // the forwarded proposals are lost on the way to the leader
	c.pump()
	if done(series) || done(config) {
		t.Fatal("a lost proposal completed before any leader change")
	}
	c.nodes[1].TransferLeadershipAsync(3)
	c.pump()
	if !c.nodes[3].Status().IsLeader {
		t.Fatalf("member 3 did not take over: %+v", c.nodes[3].Status())
	}
	if !done(series) {
		t.Fatal("the lost RegisterSeries was not applied after the leader change")
	}
	res, err := series.Result()
	if err != nil {
		t.Fatal(err)
	}
	if ids := res.(catalog.RegisterSeriesResult).IDs; len(ids) != 5 {
		t.Fatalf("ids %v", ids)
	}
	if got := c.nodes[2].Status().Reproposed; got != 1 {
		t.Fatalf("Reproposed = %d, want 1 (the SetConfig must not be proposed again)", got)
	}
	if done(config) || c.fsms[3].Config().MaxSeries == 12345 {
		t.Fatal("the lost SetConfig was proposed again; it may only be retried by its caller")
	}
	config.Cancel()
	for _, id := range c.ids {
		if got := c.fsms[id].SeriesCount(); got != 5 {
			t.Fatalf("member %d holds %d series, want 5", id, got)
		}
	}
	c.closeAll()
}
