package heal_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/heal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeRaft applies proposals to the catalog at once.
type fakeRaft struct {
	mu     sync.Mutex
	fsm    *catalog.FSM
	index  uint64
	leader bool
	kinds  []catalog.Kind
}

func (r *fakeRaft) Propose(_ context.Context, cmd []byte) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.index++
	if c, err := catalog.DecodeCommand(cmd); err == nil {
		r.kinds = append(r.kinds, c.Kind())
	}
	return r.fsm.Apply(r.index, cmd)
}

func (r *fakeRaft) IsLeader() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader
}

func (r *fakeRaft) apply(t *testing.T, c catalog.Command) any {
	t.Helper()
	res, err := r.Propose(context.Background(), catalog.EncodeCommand(c))
	if err != nil {
		t.Fatalf("apply %s: %v", c.Kind(), err)
	}
	return res
}

func (r *fakeRaft) members(t *testing.T, voters ...uint64) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.index++
	if err := r.fsm.ApplyMembership(r.index, catalog.Membership{Voters: voters}); err != nil {
		t.Fatal(err)
	}
}

// fakeStore is a Repairer whose holdings are sets of sequences per edge.
type fakeStore struct {
	mu      sync.Mutex
	has     map[string]map[uint64]bool
	fail    int // fail this many copies
	copies  []catalog.RepairTask
	sources []string
	forgot  []string
}

func (s *fakeStore) Copy(ctx context.Context, t catalog.RepairTask, source string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		return 0, errors.New("copy failed (injected)")
	}
	s.copies = append(s.copies, t)
	s.sources = append(s.sources, source)
	if s.has[t.Edge] == nil {
		s.has[t.Edge] = map[uint64]bool{}
	}
	for q := t.Run.FirstSeq; q <= t.Run.LastSeq; q++ {
		s.has[t.Edge][q] = true
	}
	return int64(100 * (t.Run.LastSeq - t.Run.FirstSeq + 1)), nil
}

func (s *fakeStore) Holdings(edge string) ([]catalog.SeqRange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var seqs []uint64
	for q := range s.has[edge] {
		seqs = append(seqs, q)
	}
	slices.Sort(seqs)
	var out []catalog.SeqRange
	for _, q := range seqs {
		if n := len(out); n > 0 && out[n-1].LastSeq+1 == q {
			out[n-1].LastSeq = q
			continue
		}
		out = append(out, catalog.SeqRange{FirstSeq: q, LastSeq: q})
	}
	return out, nil
}

func (s *fakeStore) Forget(edge string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.has, edge)
	s.forgot = append(s.forgot, edge)
	return nil
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type world struct {
	raft  *fakeRaft
	store *fakeStore
	clk   *clock
	h     *heal.Healer
}

// newWorld: coordinators c1..c3 (raft voters, all heartbeating at the
// clock's start), edges e1 and e2, replication factor 2; the healer runs
// as c1.
func newWorld(t *testing.T, edit func(*heal.Options)) *world {
	t.Helper()
	w := &world{raft: &fakeRaft{fsm: catalog.New(), leader: true}, store: &fakeStore{has: map[string]map[uint64]bool{}},
		clk: &clock{now: time.UnixMilli(1_000_000_000)}}
	cfg := catalog.DefaultConfig
	cfg.ReplicationFactor, cfg.DeadAfterMs = 2, 30_000
	w.raft.apply(t, catalog.SetConfig{Config: cfg})
	w.raft.members(t, 1, 2, 3)
	for i, c := range []string{"c1", "c2", "c3"} {
		w.raft.apply(t, catalog.RegisterNode{ID: c, Role: catalog.RoleCoordinator, RaftID: uint64(i + 1), TimeMs: w.clk.Now().UnixMilli()})
	}
	for _, e := range []string{"e1", "e2"} {
		w.raft.apply(t, catalog.RegisterNode{ID: e, Role: catalog.RoleEdge})
	}
	o := heal.Options{Self: "c1", Catalog: w.raft.fsm, Raft: w.raft, Repairer: w.store, Now: w.clk.Now, ScrubInterval: -1}
	if edit != nil {
		edit(&o)
	}
	h, err := heal.New(o)
	if err != nil {
		t.Fatal(err)
	}
	w.h = h
	return w
}

func (w *world) round(t *testing.T) {
	t.Helper()
	var wg sync.WaitGroup
	w.h.Round(context.Background(), &wg)
	wg.Wait()
}

func (w *world) beat(t *testing.T, ids ...string) {
	t.Helper()
	var beats []catalog.Beat
	for _, id := range ids {
		beats = append(beats, catalog.Beat{ID: id, TimeMs: w.clk.Now().UnixMilli()})
	}
	w.raft.apply(t, catalog.Heartbeat{Beats: beats})
}

func state(t *testing.T, f *catalog.FSM, id string) catalog.NodeState {
	t.Helper()
	n, ok := f.Node(id)
	if !ok {
		t.Fatalf("no node %s", id)
	}
	return n.State
}

func TestHealer_LeaderMarksASilentCoordinatorDownAndBackUp(t *testing.T) {
	w := newWorld(t, nil)
	w.round(t) // leader since now
	w.clk.add(20 * time.Second)
	w.beat(t, "c1", "c2")
	w.round(t)
	if state(t, w.raft.fsm, "c3") != catalog.NodeActive {
		t.Fatal("c3 marked down before dead-after")
	}
	w.clk.add(15 * time.Second) // c3 silent 35 s
	w.beat(t, "c1", "c2")
	w.round(t)
	if state(t, w.raft.fsm, "c3") != catalog.NodeDown {
		t.Fatal("c3 not marked down after dead-after")
	}
	for _, p := range w.raft.fsm.Placements() {
		if slices.Contains(p.Replicas, "c3") {
			t.Fatalf("c3 still an active replica: %+v", p)
		}
		if len(p.Replicas) != 2 {
			t.Fatalf("placement not refilled: %+v", p)
		}
	}
	// c3 heartbeats again: marked active.
	w.clk.add(time.Second)
	w.beat(t, "c3")
	w.round(t)
	if state(t, w.raft.fsm, "c3") != catalog.NodeActive {
		t.Fatal("c3 not active again")
	}
	if st := w.h.Stats(); st.MarkedDown != 1 || st.MarkedUp != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestHealer_FollowerAndNewLeaderDoNotCondemnEarly(t *testing.T) {
	w := newWorld(t, nil)
	w.raft.leader = false
	w.clk.add(time.Hour)
	w.round(t)
	if state(t, w.raft.fsm, "c2") != catalog.NodeActive {
		t.Fatal("a follower marked c2 down")
	}
	// Becoming leader after an hour of nobody heartbeating (a full
	// restart): silence counts from the election.
	w.raft.leader = true
	w.round(t)
	w.clk.add(20 * time.Second)
	w.round(t)
	if state(t, w.raft.fsm, "c2") != catalog.NodeActive {
		t.Fatal("a new leader condemned c2 before dead-after of its own")
	}
	w.clk.add(15 * time.Second)
	w.round(t)
	if state(t, w.raft.fsm, "c2") != catalog.NodeDown {
		t.Fatal("c2 not marked down after dead-after of the new leader")
	}
}

func TestHealer_CopiesWhatThisReplicaLacksAndRecordsIt(t *testing.T) {
	w := newWorld(t, nil)
	// e1 on c1 and another; segments 1..5 stored on the other only.
	pl, _ := w.raft.fsm.Placement("e1")
	if !slices.Contains(pl.Replicas, "c1") {
		w.raft.apply(t, catalog.SetPlacement{Edge: "e1", Replicas: []string{"c1", "c2"}})
		pl, _ = w.raft.fsm.Placement("e1")
	}
	other := pl.Replicas[0]
	if other == "c1" {
		other = pl.Replicas[1]
	}
	w.raft.apply(t, catalog.RecordHeld{Edge: "e1", Epoch: pl.Epoch, Holders: []string{other},
		Ranges: []catalog.HeldRange{{FirstSeq: 1, LastSeq: 5, Points: 50, MinTimeMs: 1000, MaxTimeMs: 5000}}})
	w.store.fail = 1
	w.round(t)
	if st := w.h.Stats(); st.CopyFailures != 1 || st.Copies != 0 {
		t.Fatalf("stats after a failed copy: %+v", st)
	}
	w.round(t) // within the backoff: not retried
	if st := w.h.Stats(); st.CopyFailures != 1 || st.Copies != 0 {
		t.Fatalf("retried within the backoff: %+v", st)
	}
	w.clk.add(2 * time.Second)
	w.round(t)
	if st := w.h.Stats(); st.Copies != 1 || st.CopiedBytes != 500 {
		t.Fatalf("stats %+v", st)
	}
	if w.store.sources[0] != other {
		t.Fatalf("copied from %s, want %s", w.store.sources[0], other)
	}
	pl, _ = w.raft.fsm.Placement("e1")
	if h, _, _ := pl.HoldingOf("c1"); len(h.Lacks) != 0 {
		t.Fatalf("c1 still lacks %+v", h.Lacks)
	}
	w.round(t)
	if st := w.h.Stats(); st.Copies != 1 {
		t.Fatalf("copied again: %+v", st)
	}
}

func TestHealer_ScrubReportsMissingAndFoundAndForgetsEdgesPlacedElsewhere(t *testing.T) {
	w := newWorld(t, nil)
	w.raft.apply(t, catalog.SetPlacement{Edge: "e1", Replicas: []string{"c1", "c2"}})
	w.raft.apply(t, catalog.SetPlacement{Edge: "e2", Replicas: []string{"c2", "c3"}})
	pl, _ := w.raft.fsm.Placement("e1")
	w.raft.apply(t, catalog.RecordHeld{Edge: "e1", Epoch: pl.Epoch, Holders: []string{"c1", "c2"},
		Ranges: []catalog.HeldRange{{FirstSeq: 1, LastSeq: 4, Points: 40, MinTimeMs: 1000, MaxTimeMs: 4000}}})
	// The store lost 2..3 of e1, and still holds e2 from an earlier life.
	w.store.has["e1"] = map[uint64]bool{1: true, 4: true}
	w.store.has["e2"] = map[uint64]bool{1: true}
	w.h.Scrub(context.Background())
	pl, _ = w.raft.fsm.Placement("e1")
	h, _, _ := pl.HoldingOf("c1")
	if len(h.Lacks) != 1 || h.Lacks[0].FirstSeq != 2 || h.Lacks[0].LastSeq != 3 {
		t.Fatalf("c1 lacks %+v, want 2..3", h.Lacks)
	}
	if !slices.Equal(w.store.forgot, []string{"e2"}) {
		t.Fatalf("forgot %v", w.store.forgot)
	}
	// The repair copies them back; a scrub then finds nothing.
	w.round(t)
	w.h.Scrub(context.Background())
	if st := w.h.Stats(); st.ScrubMissing != 1 || st.Forgotten != 1 || st.Copies != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Stored but listed as lacking: recorded.
	w.raft.apply(t, catalog.RecordMissing{Edge: "e1", Replica: "c1", PlacedIndex: h.Index, Ranges: []catalog.SeqRange{{FirstSeq: 4, LastSeq: 4}}})
	w.raft.leader = false // no repair copy: only the scrub may fix it
	w.store.fail = 100
	w.h.Scrub(context.Background())
	pl, _ = w.raft.fsm.Placement("e1")
	if h, _, _ := pl.HoldingOf("c1"); len(h.Lacks) != 0 {
		t.Fatalf("c1 lacks %+v after the scrub found them stored", h.Lacks)
	}
}

func TestHealer_BalancesAFewMovesAtATime(t *testing.T) {
	w := newWorld(t, func(o *heal.Options) { o.MaxMovesInFlight = 1 })
	// Ten more edges, all on c1 and c2 (pinned, then unpinned so that the
	// rules apply); c3 has none.
	for i := range 10 {
		e := "x" + string(rune('a'+i))
		w.raft.apply(t, catalog.RegisterNode{ID: e, Role: catalog.RoleEdge})
		w.raft.apply(t, catalog.SetPlacement{Edge: e, Replicas: []string{"c1", "c2"}})
		w.raft.apply(t, catalog.SetPlacement{Edge: e})
	}
	spread, _ := w.raft.fsm.Balance()
	if spread <= 1 {
		t.Fatalf("spread %d: nothing to balance", spread)
	}
	w.round(t)
	if st := w.h.Stats(); st.Rebalances != 1 || st.Moves != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Without history to copy the moved replica is dropped at once, so
	// the next round moves again, until balanced.
	for range 30 {
		w.round(t)
	}
	if spread, leaving := w.raft.fsm.Balance(); spread > 1 || leaving != 0 {
		t.Fatalf("spread %d, leaving %d after balancing", spread, leaving)
	}
}

// pacedStore is a fakeStore whose copies take a while and which records
// the most copies of one edge that ran at once.
type pacedStore struct {
	*fakeStore
	mu       sync.Mutex
	running  map[string]int
	maxOfOne int
}

func (s *pacedStore) Copy(ctx context.Context, t catalog.RepairTask, source string) (int64, error) {
	s.mu.Lock()
	s.running[t.Edge]++
	s.maxOfOne = max(s.maxOfOne, s.running[t.Edge])
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.running[t.Edge]--; s.mu.Unlock() }()
	time.Sleep(20 * time.Millisecond)
	return s.fakeStore.Copy(ctx, t, source)
}

func TestHealer_NextCopyStartsWhenOneEndsOneAtATimePerEdge(t *testing.T) {
	var ps *pacedStore
	w := newWorld(t, func(o *heal.Options) {
		o.Interval = time.Hour // only the end of a copy can start the next one in time
		o.CopyParallelism = 2
		ps = &pacedStore{fakeStore: o.Repairer.(*fakeStore), running: map[string]int{}}
		o.Repairer = ps
	})
	// e1 and e2 on c1 and c2; c1 lacks two runs of e1 (apart) and one of e2.
	for _, e := range []string{"e1", "e2"} {
		w.raft.apply(t, catalog.SetPlacement{Edge: e, Replicas: []string{"c1", "c2"}})
	}
	held := func(e string, first, last uint64) {
		pl, _ := w.raft.fsm.Placement(e)
		w.raft.apply(t, catalog.RecordHeld{Edge: e, Epoch: pl.Epoch, Holders: []string{"c2"},
			Ranges: []catalog.HeldRange{{FirstSeq: first, LastSeq: last, Points: 10, MinTimeMs: int64(first) * 1000, MaxTimeMs: int64(last) * 1000}}})
	}
	held("e1", 1, 5)
	held("e1", 6, 6)
	w.raft.apply(t, catalog.RecordReplicated{Edge: "e1", Replica: "c1", PlacedIndex: holdingIndex(t, w, "e1"),
		Ranges: []catalog.SeqRange{{FirstSeq: 6, LastSeq: 6}}}) // c1 holds 6: e1's lack runs are 1-5 and 7-9
	held("e1", 7, 9)
	held("e2", 1, 3)
	if n := len(w.raft.fsm.RepairsOf("c1")); n != 3 {
		t.Fatalf("%d repair tasks, want 3: %+v", n, w.raft.fsm.RepairsOf("c1"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.h.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for w.h.Stats().Copies < 3 {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("after 10 s (the interval is an hour): %+v", w.h.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if ps.maxOfOne != 1 {
		t.Fatalf("%d copies of one edge ran at once, want 1", ps.maxOfOne)
	}
	if n := len(w.raft.fsm.RepairsOf("c1")); n != 0 {
		t.Fatalf("repairs left: %+v", w.raft.fsm.RepairsOf("c1"))
	}
}

func holdingIndex(t *testing.T, w *world, edge string) uint64 {
	t.Helper()
	pl, _ := w.raft.fsm.Placement(edge)
	h, _, ok := pl.HoldingOf("c1")
	if !ok {
		t.Fatalf("c1 holds no replica of %s", edge)
	}
	return h.Index
}

// TestHealer_CopiesRunningTogetherReadFromDifferentSources: two runs that
// both other replicas can give are copied at once, one from each.
func TestHealer_CopiesRunningTogetherReadFromDifferentSources(t *testing.T) {
	var ps *pacedStore
	w := newWorld(t, func(o *heal.Options) {
		o.CopyParallelism = 2
		ps = &pacedStore{fakeStore: o.Repairer.(*fakeStore), running: map[string]int{}}
		o.Repairer = ps
	})
	cfg := w.raft.fsm.Config()
	cfg.ReplicationFactor = 3
	w.raft.apply(t, catalog.SetConfig{Config: cfg})
	for _, e := range []string{"e1", "e2"} {
		w.raft.apply(t, catalog.SetPlacement{Edge: e, Replicas: []string{"c1", "c2", "c3"}})
		pl, _ := w.raft.fsm.Placement(e)
		w.raft.apply(t, catalog.RecordHeld{Edge: e, Epoch: pl.Epoch, Holders: []string{"c2", "c3"},
			Ranges: []catalog.HeldRange{{FirstSeq: 1, LastSeq: 5, Points: 10, MinTimeMs: 1000, MaxTimeMs: 5000}}})
	}
	tasks := w.raft.fsm.RepairsOf("c1")
	if len(tasks) != 2 || !slices.Equal(tasks[0].Sources, []string{"c2", "c3"}) || !slices.Equal(tasks[1].Sources, []string{"c2", "c3"}) {
		t.Fatalf("repair tasks %+v, want two from c2 or c3", tasks)
	}
	w.round(t)
	if st := w.h.Stats(); st.Copies != 2 {
		t.Fatalf("stats %+v, want 2 copies", st)
	}
	got := slices.Sorted(slices.Values(ps.sources))
	if !slices.Equal(got, []string{"c2", "c3"}) {
		t.Fatalf("copies read from %v, want one from c2 and one from c3", ps.sources)
	}
	// One at a time: each reads from the first source again.
	w.raft.apply(t, catalog.RecordMissing{Edge: "e1", Replica: "c1", PlacedIndex: holdingIndex(t, w, "e1"),
		Ranges: []catalog.SeqRange{{FirstSeq: 1, LastSeq: 5}}})
	w.round(t)
	if n := len(ps.sources); n != 3 || ps.sources[2] != "c2" {
		t.Fatalf("copies read from %v, want a third from c2", ps.sources)
	}
}
