package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

// applyOK applies c and fails the test on a rejection.
func applyOK(t testing.TB, f *FSM, index uint64, c Command) any {
	t.Helper()
	res, err := f.Apply(index, EncodeCommand(c))
	if err != nil {
		t.Fatalf("apply %s at %d: %v", c.Kind(), index, err)
	}
	return res
}

// applyErr applies c and requires a rejection of the given class.
func applyErr(t testing.TB, f *FSM, index uint64, c Command, class error) *CommandError {
	t.Helper()
	before := f.Snapshot()
	_, err := f.Apply(index, EncodeCommand(c))
	var ce *CommandError
	if !errors.As(err, &ce) || !errors.Is(err, class) {
		t.Fatalf("apply %s: got %v, want a *CommandError wrapping %v", c.Kind(), err, class)
	}
	after := f.Snapshot()
	// Only the applied index may differ.
	if !bytes.Equal(stripApplied(t, before), stripApplied(t, after)) {
		t.Fatalf("rejected %s changed the catalog", c.Kind())
	}
	return ce
}

func stripApplied(t testing.TB, snap []byte) []byte {
	t.Helper()
	s, err := decodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	s.applied = 0
	b := s.appendSnapshot(nil)
	return b[:len(b)-4]
}

func series(nv ...string) labels.Labels { return labels.FromStrings(nv...) }

func newCatalogWithEdges(t testing.TB, edges ...string) *FSM {
	t.Helper()
	f := New()
	for i, e := range edges {
		applyOK(t, f, uint64(i+1), RegisterNode{ID: e, Role: RoleEdge, TimeMs: 1})
	}
	return f
}

func TestFSM_RegisterSeriesAssignsDenseIDsAndReusesKnown(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1", "pi-2")
	a, b, c := series("__name__", "cpu", "host", "a"), series("__name__", "cpu", "host", "b"), series("__name__", "mem", "host", "a")
	r := applyOK(t, f, 10, RegisterSeries{Edge: "pi-1", Series: []labels.Labels{a, b}}).(RegisterSeriesResult)
	if !slices.Equal(r.IDs, []uint64{1, 2}) || r.Created != 2 {
		t.Fatalf("first batch: %+v", r)
	}
	// Unsorted input is the same series; a repeat inside the batch too.
	unsorted := labels.Labels{{Name: "host", Value: "b"}, {Name: "__name__", Value: "cpu"}}
	r = applyOK(t, f, 11, RegisterSeries{Edge: "pi-2", Series: []labels.Labels{c, unsorted, c}}).(RegisterSeriesResult)
	if !slices.Equal(r.IDs, []uint64{3, 2, 3}) || r.Created != 1 {
		t.Fatalf("second batch: %+v", r)
	}
	if got := f.EdgeSeries("pi-2"); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("pi-2 series %v", got)
	}
	if got := f.EdgesOf([]uint64{2, 3}); len(got) != 2 || got[0].Edge != "pi-1" || !slices.Equal(got[0].IDs, []uint64{2}) ||
		got[1].Edge != "pi-2" || !slices.Equal(got[1].IDs, []uint64{2, 3}) {
		t.Fatalf("EdgesOf: %+v", got)
	}
	if id, ok := f.Lookup(unsorted); !ok || id != 2 {
		t.Fatalf("Lookup = %d, %v", id, ok)
	}
	if ls, ok := f.Series(3); !ok || !labels.Equal(ls, c) {
		t.Fatalf("Series(3) = %v, %v", ls, ok)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestFSM_RegisterSeriesRejectsBadSeriesOneByOne(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	batch := []labels.Labels{
		{{Name: "host", Value: "a"}}, // no metric name
		series("__name__", "ok"),
		{{Name: "__name__", Value: "x"}, {Name: "1bad", Value: "v"}},
		{{Name: "__name__", Value: "x"}, {Name: "v", Value: "\xff"}},
		{{Name: "__name__", Value: strings.Repeat("v", 2000)}},
	}
	r := applyOK(t, f, 5, RegisterSeries{Edge: "pi-1", Series: batch}).(RegisterSeriesResult)
	if !slices.Equal(r.IDs, []uint64{0, 1, 0, 0, 0}) || r.Created != 1 || len(r.Rejected) != 4 {
		t.Fatalf("result %+v", r)
	}
	for _, rej := range r.Rejected {
		if rej.Reason == "" || rej.Index == 1 {
			t.Fatalf("rejection %+v", rej)
		}
	}
	applyErr(t, f, 6, RegisterSeries{Edge: "nobody", Series: batch}, ErrNotFound)
}

func TestFSM_MaxSeriesIsEnforced(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	cfg := DefaultConfig
	cfg.MaxSeries = 2
	applyOK(t, f, 2, SetConfig{Config: cfg})
	r := applyOK(t, f, 3, RegisterSeries{Edge: "pi-1", Series: []labels.Labels{
		series("__name__", "a"), series("__name__", "b"), series("__name__", "c"), series("__name__", "a"),
	}}).(RegisterSeriesResult)
	if !slices.Equal(r.IDs, []uint64{1, 2, 0, 1}) || len(r.Rejected) != 1 || !strings.Contains(r.Rejected[0].Reason, "maximum") {
		t.Fatalf("result %+v", r)
	}
}

func mustMatcher(t testing.TB, typ labels.MatchType, name, value string) *labels.Matcher {
	t.Helper()
	m, err := labels.NewMatcher(typ, name, value)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFSM_SelectUsesPostings(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	var batch []labels.Labels
	for _, m := range []string{"cpu", "mem"} {
		for _, h := range []string{"a", "b", "c"} {
			batch = append(batch, series("__name__", m, "host", h))
		}
	}
	batch = append(batch, series("__name__", "cpu", "host", "a", "core", "0"))
	applyOK(t, f, 2, RegisterSeries{Edge: "pi-1", Series: batch})
	eq := func(n, v string) *labels.Matcher { return mustMatcher(t, labels.MatchEqual, n, v) }
	cases := []struct {
		name string
		ms   []*labels.Matcher
		want []uint64
	}{
		{"equal", []*labels.Matcher{eq("__name__", "cpu")}, []uint64{1, 2, 3, 7}},
		{"intersection", []*labels.Matcher{eq("__name__", "cpu"), eq("host", "a")}, []uint64{1, 7}},
		{"regexp", []*labels.Matcher{mustMatcher(t, labels.MatchRegexp, "host", "b|c")}, []uint64{2, 3, 5, 6}},
		{"not equal empty-matching filter", []*labels.Matcher{eq("__name__", "cpu"), mustMatcher(t, labels.MatchNotEqual, "host", "a")}, []uint64{2, 3}},
		{"missing label matches empty", []*labels.Matcher{eq("host", "a"), eq("core", "")}, []uint64{1, 4}},
		{"not regexp", []*labels.Matcher{eq("host", "a"), mustMatcher(t, labels.MatchNotRegexp, "__name__", "c.*")}, []uint64{4}},
		{"no match", []*labels.Matcher{eq("__name__", "disk")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.Select(tc.ms, 0)
			if err != nil {
				t.Fatal(err)
			}
			var ids []uint64
			for _, r := range got {
				ids = append(ids, r.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Fatalf("got %v, want %v", ids, tc.want)
			}
		})
	}
	if got, _ := f.Select([]*labels.Matcher{eq("__name__", "cpu")}, 2); len(got) != 2 {
		t.Fatalf("limit 2: %d results", len(got))
	}
	if _, err := f.Select([]*labels.Matcher{mustMatcher(t, labels.MatchRegexp, "host", ".*")}, 0); !errors.Is(err, ErrNoSelectiveMatcher) {
		t.Fatalf("all-matching selector: %v", err)
	}
}

func TestFSM_RegisterNodeRules(t *testing.T) {
	f := New()
	applyOK(t, f, 1, RegisterNode{ID: "pi-1", Role: RoleEdge, Identity: "spiffe://fleet/pi-1", TimeMs: 100,
		Labels: labels.Labels{{Name: "site", Value: "b"}, {Name: "rack", Value: "1"}}})
	r := applyOK(t, f, 2, RegisterNode{ID: "pi-1", Role: RoleEdge, Identity: "spiffe://fleet/pi-1", Addr: "10.0.0.1:7070", TimeMs: 50}).(RegisterNodeResult)
	if r.Created {
		t.Fatal("update reported as created")
	}
	n, _ := f.Node("pi-1")
	if n.Addr != "10.0.0.1:7070" || n.LastHeartbeatMs != 100 || n.RegisteredIndex != 1 || n.Labels != nil {
		t.Fatalf("node after update: %+v", n)
	}
	cases := []struct {
		name  string
		cmd   RegisterNode
		class error
	}{
		{"bad id", RegisterNode{ID: "pi 1", Role: RoleEdge}, ErrBadCommand},
		{"empty id", RegisterNode{Role: RoleEdge}, ErrBadCommand},
		{"no role", RegisterNode{ID: "x"}, ErrBadCommand},
		{"coordinator without raft id", RegisterNode{ID: "c1", Role: RoleCoordinator}, ErrBadCommand},
		{"edge with raft id", RegisterNode{ID: "e", Role: RoleEdge, RaftID: 3}, ErrBadCommand},
		{"role change", RegisterNode{ID: "pi-1", Role: RoleCoordinator, RaftID: 4, Identity: "spiffe://fleet/pi-1"}, ErrConflict},
		{"identity change", RegisterNode{ID: "pi-1", Role: RoleEdge, Identity: "spiffe://fleet/other"}, ErrConflict},
		{"bad label", RegisterNode{ID: "pi-2", Role: RoleEdge, Labels: labels.Labels{{Name: "a b", Value: "x"}}}, ErrBadCommand},
		{"duplicate label", RegisterNode{ID: "pi-2", Role: RoleEdge, Labels: labels.Labels{{Name: "a", Value: "x"}, {Name: "a", Value: "y"}}}, ErrBadCommand},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { applyErr(t, f, uint64(10+i), tc.cmd, tc.class) })
	}
	applyOK(t, f, 30, RegisterNode{ID: "c1", Role: RoleCoordinator, RaftID: 7})
	applyErr(t, f, 31, RegisterNode{ID: "c2", Role: RoleCoordinator, RaftID: 7}, ErrConflict)

	h := applyOK(t, f, 32, Heartbeat{Beats: []Beat{{ID: "pi-1", TimeMs: 500}, {ID: "ghost", TimeMs: 1}, {ID: "c1", TimeMs: 9}}}).(HeartbeatResult)
	if h.Updated != 2 || !slices.Equal(h.Unknown, []string{"ghost"}) {
		t.Fatalf("heartbeat: %+v", h)
	}
	if n, _ := f.Node("pi-1"); n.LastHeartbeatMs != 500 {
		t.Fatalf("heartbeat not recorded: %+v", n)
	}
	applyOK(t, f, 33, RemoveNode{ID: "pi-1"})
	if _, ok := f.Node("pi-1"); ok {
		t.Fatal("removed node still there")
	}
	applyErr(t, f, 34, RemoveNode{ID: "pi-1"}, ErrNotFound)
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestFSM_RecordHeldIsIdempotentAndMerges(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	rng := func(a, b uint64, pts uint64) HeldRange {
		return HeldRange{FirstSeq: a, LastSeq: b, Points: pts, MinTimeMs: int64(a) * 10, MaxTimeMs: int64(b)*10 + 9}
	}
	r := applyOK(t, f, 2, RecordHeld{Edge: "pi-1", Ranges: []HeldRange{rng(1, 3, 30), rng(6, 6, 5)}, WatermarkSeq: 3, WatermarkTimeMs: 39}).(RecordHeldResult)
	if r.Added != 2 || r.WatermarkSeq != 3 {
		t.Fatalf("first: %+v", r)
	}
	// A replay of a recorded range changes nothing.
	before := f.Snapshot()
	r = applyOK(t, f, 2, RecordHeld{Edge: "pi-1", Ranges: []HeldRange{rng(2, 2, 10)}, WatermarkSeq: 3, WatermarkTimeMs: 39}).(RecordHeldResult)
	if r.Duplicates != 1 || r.Added != 0 || !bytes.Equal(before, f.Snapshot()) {
		t.Fatalf("replay changed something: %+v", r)
	}
	// Filling the gap merges three runs into one.
	applyOK(t, f, 3, RecordHeld{Edge: "pi-1", Ranges: []HeldRange{rng(4, 5, 20)}, WatermarkSeq: 6, WatermarkTimeMs: 69})
	p, _ := f.Progress("pi-1")
	want := []HeldRange{{FirstSeq: 1, LastSeq: 6, Points: 55, MinTimeMs: 10, MaxTimeMs: 69}}
	if !slices.Equal(p.Held, want) || p.WatermarkSeq != 6 || p.WatermarkTimeMs != 69 {
		t.Fatalf("progress %+v", p)
	}
	// The watermark never goes back.
	r = applyOK(t, f, 4, RecordHeld{Edge: "pi-1", WatermarkSeq: 2, WatermarkTimeMs: 1}).(RecordHeldResult)
	if r.WatermarkSeq != 6 {
		t.Fatalf("watermark went back: %+v", r)
	}
	bad := []struct {
		name  string
		cmd   RecordHeld
		class error
	}{
		{"overlap", RecordHeld{Edge: "pi-1", Ranges: []HeldRange{rng(5, 8, 1)}}, ErrConflict},
		{"seq 0", RecordHeld{Edge: "pi-1", Ranges: []HeldRange{rng(0, 8, 1)}}, ErrBadCommand},
		{"inverted", RecordHeld{Edge: "pi-1", Ranges: []HeldRange{rng(9, 8, 1)}}, ErrBadCommand},
		{"self overlap", RecordHeld{Edge: "pi-1", Ranges: []HeldRange{rng(9, 10, 1), rng(10, 11, 1)}}, ErrBadCommand},
		{"watermark not held", RecordHeld{Edge: "pi-1", Ranges: []HeldRange{rng(9, 10, 1)}, WatermarkSeq: 11}, ErrBadCommand},
		{"unknown edge", RecordHeld{Edge: "pi-9", Ranges: []HeldRange{rng(1, 1, 1)}}, ErrNotFound},
	}
	for i, tc := range bad {
		t.Run(tc.name, func(t *testing.T) { applyErr(t, f, uint64(10+i), tc.cmd, tc.class) })
	}
	// Too many gaps.
	var many []HeldRange
	for i := range MaxHeldRuns {
		s := uint64(100 + 2*i)
		many = append(many, rng(s, s, 1))
	}
	applyErr(t, f, 20, RecordHeld{Edge: "pi-1", Ranges: many}, ErrLimit)
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

// addCoordinator registers a coordinator and makes it a raft voter.
func addCoordinator(t testing.TB, f *FSM, index uint64, id string, raftID uint64) {
	t.Helper()
	applyOK(t, f, index, RegisterNode{ID: id, Role: RoleCoordinator, RaftID: raftID})
	var voters []uint64
	for _, m := range f.Members() {
		voters = append(voters, m.RaftID)
	}
	voters = append(voters, raftID)
	if err := f.ApplyMembership(index, Membership{Voters: voters, Addrs: []MemberAddr{{RaftID: raftID, Addr: id + ":7071"}}}); err != nil {
		t.Fatal(err)
	}
}

func loads(f *FSM) map[string]int {
	m := map[string]int{}
	for _, p := range f.Placements() {
		for _, r := range p.Replicas {
			m[r]++
		}
	}
	return m
}

func TestFSM_PlacementFollowsCoordinators(t *testing.T) {
	var edges []string
	for i := range 10 {
		edges = append(edges, fmt.Sprintf("pi-%02d", i))
	}
	f := newCatalogWithEdges(t, edges...)
	for _, p := range f.Placements() {
		if len(p.Replicas) != 0 {
			t.Fatalf("placement without coordinators: %+v", p)
		}
	}
	rf2 := DefaultConfig
	rf2.ReplicationFactor = 2
	applyOK(t, f, 19, SetConfig{Config: rf2})
	addCoordinator(t, f, 20, "c1", 1)
	for _, p := range f.Placements() {
		if !slices.Equal(p.Replicas, []string{"c1"}) || p.Epoch != 20 {
			t.Fatalf("one coordinator: %+v", p)
		}
	}
	addCoordinator(t, f, 21, "c2", 2)
	addCoordinator(t, f, 22, "c3", 3)
	for _, p := range f.Placements() {
		if len(p.Replicas) != 2 {
			t.Fatalf("rf 2 with 3 coordinators: %+v", p)
		}
	}
	// A coordinator joining fills placements but moves nothing: balancing
	// is a Rebalance, which the leader proposes a few moves at a time.
	if l := loads(f); l["c3"] != 0 {
		t.Fatalf("c3 took replicas without a rebalance: %v", l)
	}
	if r := applyOK(t, f, 22, Rebalance{MaxMoves: 2}).(RebalanceResult); r.Changed != 2 {
		t.Fatalf("rebalance with 2 moves changed %d placements", r.Changed)
	}
	applyOK(t, f, 22, Rebalance{})
	l := loads(f)
	if spread(l) > 1 || l["c1"]+l["c2"]+l["c3"] != 20 {
		t.Fatalf("loads %v", l)
	}
	// A coordinator registered but not a raft member holds nothing.
	applyOK(t, f, 23, RegisterNode{ID: "c4", Role: RoleCoordinator, RaftID: 4})
	if loads(f)["c4"] != 0 {
		t.Fatal("non-member holds replicas")
	}
	// Dropping c2 from raft moves its replicas.
	if err := f.ApplyMembership(24, Membership{Voters: []uint64{1, 3, 4}}); err != nil {
		t.Fatal(err)
	}
	applyOK(t, f, 24, Rebalance{})
	l = loads(f)
	if l["c2"] != 0 || spread(l) > 1 || l["c1"]+l["c3"]+l["c4"] != 20 {
		t.Fatalf("after removing c2: %v", l)
	}
	// Pin, then remove a pinned replica: it is unpinned and refilled.
	pl := applyOK(t, f, 25, SetPlacement{Edge: "pi-00", Replicas: []string{"c4", "c3"}}).(Placement)
	if !pl.Pinned || !slices.Equal(pl.Replicas, []string{"c3", "c4"}) {
		t.Fatalf("pinned: %+v", pl)
	}
	applyErr(t, f, 26, SetPlacement{Edge: "pi-00", Replicas: []string{"c2"}}, ErrNotFound)
	applyErr(t, f, 26, SetPlacement{Edge: "pi-00", Replicas: []string{"c1", "c1"}}, ErrBadCommand)
	applyErr(t, f, 26, SetPlacement{Edge: "c1", Replicas: []string{"c1"}}, ErrBadCommand)
	applyOK(t, f, 27, RemoveNode{ID: "c4"})
	pl, _ = f.Placement("pi-00")
	if pl.Pinned || len(pl.Replicas) != 2 || slices.Contains(pl.Replicas, "c4") {
		t.Fatalf("after removing pinned c4: %+v", pl)
	}
	// Replication factor 1 trims; 3 fills up to the two coordinators left.
	cfg := DefaultConfig
	cfg.ReplicationFactor = 1
	applyOK(t, f, 28, SetConfig{Config: cfg})
	applyOK(t, f, 28, Rebalance{})
	for _, p := range f.Placements() {
		if len(p.Replicas) != 1 {
			t.Fatalf("rf 1: %+v", p)
		}
	}
	if l := loads(f); spread(l) > 1 {
		t.Fatalf("rf 1 loads %v", l)
	}
	cfg.ReplicationFactor = 3
	applyOK(t, f, 29, SetConfig{Config: cfg})
	for _, p := range f.Placements() {
		if !slices.Equal(p.Replicas, []string{"c1", "c3"}) {
			t.Fatalf("rf 3 with 2 coordinators: %+v", p)
		}
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

func spread(l map[string]int) int {
	lo, hi := -1, 0
	for _, v := range l {
		if lo < 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	return hi - max(lo, 0)
}

func TestFSM_ConfigValidation(t *testing.T) {
	f := New()
	bad := []func(*FleetConfig){
		func(c *FleetConfig) { c.RetentionRawMs = 0 },
		func(c *FleetConfig) { c.ReplicationFactor = 0 },
		func(c *FleetConfig) { c.MaxSeries = 0 },
		func(c *FleetConfig) { c.RateLimitBurstPoints = 5 },
	}
	for i, mutate := range bad {
		c := DefaultConfig
		mutate(&c)
		applyErr(t, f, uint64(i+1), SetConfig{Config: c}, ErrBadCommand)
	}
	c := DefaultConfig
	c.RateLimitPointsPerSec, c.RateLimitBurstPoints = 1000, 5000
	got := applyOK(t, f, 9, SetConfig{Config: c}).(FleetConfig)
	if got.Version != 9 || f.Config() != got {
		t.Fatalf("config %+v, stored %+v", got, f.Config())
	}
}

func TestFSM_ApplyRejectsMalformedBytes(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	good := EncodeCommand(RegisterSeries{Edge: "pi-1", Series: []labels.Labels{series("__name__", "a")}})
	cases := map[string][]byte{
		"empty":         nil,
		"bad version":   append([]byte{9}, good[1:]...),
		"unknown kind":  {CommandVersion, 99},
		"truncated":     good[:len(good)-2],
		"trailing":      append(slices.Clone(good), 0),
		"huge count":    {CommandVersion, byte(KindHeartbeat), 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge string":   {CommandVersion, byte(KindRemoveNode), 0xff, 0xff, 0x03, 'a'},
		"bad bool":      append(append([]byte{CommandVersion, byte(KindSetConfig)}, appendConfig(nil, DefaultConfig)[:3]...), 7),
		"rf over limit": EncodeCommand(SetConfig{Config: FleetConfig{ReplicationFactor: 99}}),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			before := stripApplied(t, f.Snapshot())
			_, err := f.Apply(100, b)
			if !errors.Is(err, ErrBadCommand) {
				t.Fatalf("got %v, want ErrBadCommand", err)
			}
			if !bytes.Equal(before, stripApplied(t, f.Snapshot())) {
				t.Fatal("malformed command changed the catalog")
			}
		})
	}
	if _, err := f.Apply(99, good); err == nil || !strings.Contains(err.Error(), "behind") {
		t.Fatalf("index going back: %v", err)
	}
}

// randomCommands returns a seeded stream of commands touching every part
// of the catalog, including some that are rejected.
func randomCommands(seed uint64, n int) []Command {
	r := rand.New(rand.NewPCG(seed, 7))
	edge := func() string { return fmt.Sprintf("pi-%d", r.IntN(6)) }
	var out []Command
	seq := map[string]uint64{}
	for range n {
		switch r.IntN(10) {
		case 0:
			out = append(out, RegisterNode{ID: edge(), Role: RoleEdge, TimeMs: int64(r.IntN(1000)),
				Labels: labels.Labels{{Name: "site", Value: fmt.Sprint(r.IntN(3))}}})
		case 1:
			id := uint64(1 + r.IntN(4))
			out = append(out, RegisterNode{ID: fmt.Sprintf("c%d", id), Role: RoleCoordinator, RaftID: id})
		case 2, 3, 4:
			var batch []labels.Labels
			for range 1 + r.IntN(20) {
				batch = append(batch, series("__name__", fmt.Sprintf("m%d", r.IntN(5)), "host", fmt.Sprintf("h%d", r.IntN(20)), "core", fmt.Sprint(r.IntN(3))))
			}
			out = append(out, RegisterSeries{Edge: edge(), Series: batch})
		case 5, 6:
			e := edge()
			first := seq[e] + 1
			if r.IntN(4) == 0 && first > 3 {
				first -= uint64(r.IntN(3)) // replay or overlap
			}
			last := first + uint64(r.IntN(3))
			if first > seq[e] {
				seq[e] = last
			}
			// Epoch: the placement the segments were stored on, some
			// index (0: unknown), derived without drawing from r so
			// that the stream stays as it was.
			rh := RecordHeld{Edge: e, WatermarkSeq: last, WatermarkTimeMs: int64(last * 100), Epoch: first * 13 % 40,
				Ranges: []HeldRange{{FirstSeq: first, LastSeq: last, Points: uint64(r.IntN(1000)), MinTimeMs: int64(first * 100), MaxTimeMs: int64(last*100 + 99)}}}
			if first%3 == 0 {
				rh.Holders = []string{fmt.Sprintf("c%d", 1+first%4), fmt.Sprintf("c%d", 1+(first/3)%4)}
			}
			out = append(out, rh)
		case 7:
			id, ms := edge(), int64(r.IntN(5000))
			c := fmt.Sprintf("c%d", 1+ms%4)
			switch ms % 9 {
			case 0:
				out = append(out, SetNodeState{ID: c, State: NodeState(ms % 3), HeartbeatBeforeMs: ms % 2 * ms})
			case 1:
				out = append(out, RecordReplicated{Edge: id, Replica: c, PlacedIndex: uint64(ms % 40), Ranges: []SeqRange{{1, uint64(1 + ms%6)}}})
			case 2:
				out = append(out, SetRevoked{ID: id, Revoked: ms%2 == 0})
			case 3:
				out = append(out, Rebalance{MaxMoves: uint32(1 + ms%3)})
			default:
				out = append(out, Heartbeat{Beats: []Beat{{ID: id, TimeMs: ms}}})
			}
		case 8:
			switch r.IntN(4) {
			case 0:
				out = append(out, RemoveNode{ID: edge()})
			case 1:
				out = append(out, Rebalance{})
			case 2:
				c := DefaultConfig
				c.ReplicationFactor = uint32(1 + r.IntN(3))
				out = append(out, SetConfig{Config: c})
			default:
				out = append(out, SetPlacement{Edge: edge(), Replicas: []string{fmt.Sprintf("c%d", 1+r.IntN(4))}})
			}
		case 9:
			if r.IntN(2) == 0 {
				out = append(out, membershipCmd{voters: randomSubset(r)})
				break
			}
			// A gap: usually the next numbers, sometimes over numbers
			// already held or recorded.
			e := edge()
			after := seq[e]
			if r.IntN(3) == 0 && after > 4 {
				after -= uint64(r.IntN(4))
			}
			through := after + 1 + uint64(r.IntN(4))
			seq[e] = max(seq[e], through)
			g := GapRange{AfterSeq: after, ThroughSeq: through, Reason: GapReason(1 + r.IntN(3)), Points: -1}
			if r.IntN(2) == 0 {
				g.Segments, g.Points = through-after, int64(r.IntN(500))
				g.MinTimeMs, g.MaxTimeMs = int64(after*100+100), int64(through*100+99)
			}
			out = append(out, RecordGap{Edge: e, Gaps: []GapRange{g}})
		}
	}
	return out
}

// membershipCmd stands for an ApplyMembership call in a command stream.
type membershipCmd struct{ voters []uint64 }

func (membershipCmd) Kind() Kind                 { return 0 }
func (membershipCmd) appendBody(b []byte) []byte { return b }

func randomSubset(r *rand.Rand) []uint64 {
	var out []uint64
	for id := uint64(1); id <= 4; id++ {
		if r.IntN(3) > 0 {
			out = append(out, id)
		}
	}
	return out
}

func applyStream(t testing.TB, f *FSM, cmds []Command, from uint64) {
	t.Helper()
	for i, c := range cmds {
		index := from + uint64(i)
		if m, ok := c.(membershipCmd); ok {
			if err := f.ApplyMembership(index, Membership{Voters: m.voters}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		res, err := f.Apply(index, EncodeCommand(c))
		var ce *CommandError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("command %d: error %v is not a *CommandError", i, err)
		}
		if err == nil && res == nil && c.Kind() != KindRemoveNode && c.Kind() != KindSetRevoked {
			t.Fatalf("command %d (%s): nil result", i, c.Kind())
		}
	}
}

func TestFSM_SameCommandsSameSnapshot(t *testing.T) {
	for seed := range uint64(20) {
		cmds := randomCommands(seed, 400)
		a, b := New(), New()
		applyStream(t, a, cmds, 1)
		// b restores a snapshot half way and continues from it.
		applyStream(t, b, cmds[:200], 1)
		c := New()
		if err := c.Restore(b.Snapshot()); err != nil {
			t.Fatalf("seed %d: restore: %v", seed, err)
		}
		applyStream(t, c, cmds[200:], 201)
		sa, sc := a.Snapshot(), c.Snapshot()
		if !bytes.Equal(sa, sc) {
			t.Fatalf("seed %d: snapshots differ after restore half way", seed)
		}
		if err := a.Check(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if a.AppliedIndex() != 400 {
			t.Fatalf("applied %d", a.AppliedIndex())
		}
		// Restoring the final snapshot re-encodes to the same bytes.
		d := New()
		if err := d.Restore(sa); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.Snapshot(), sa) {
			t.Fatalf("seed %d: restore+snapshot is not the identity", seed)
		}
	}
}

func TestFSM_RebalanceEvensLoads(t *testing.T) {
	for seed := range uint64(30) {
		f := New()
		applyStream(t, f, randomCommands(seed, 300), 1)
		applyOK(t, f, 1000, Rebalance{})
		coords := map[string]bool{}
		members := map[uint64]bool{}
		for _, m := range f.Members() {
			members[m.RaftID] = true
		}
		for _, n := range f.Nodes() {
			if n.Role == RoleCoordinator && members[n.RaftID] {
				coords[n.ID] = true
			}
		}
		rf := min(int(f.Config().ReplicationFactor), len(coords))
		l := map[string]int{}
		for c := range coords {
			l[c] = 0
		}
		for _, p := range f.Placements() {
			if !p.Pinned && len(p.Replicas) != rf {
				t.Fatalf("seed %d: %+v has %d replicas, want %d", seed, p, len(p.Replicas), rf)
			}
			for _, r := range p.Replicas {
				l[r]++
			}
		}
		pinned := 0
		for _, p := range f.Placements() {
			if p.Pinned {
				pinned++
			}
		}
		if pinned == 0 && spread(l) > 1 {
			t.Fatalf("seed %d: loads %v after rebalance", seed, l)
		}
	}
}

func TestRestore_RejectsDamage(t *testing.T) {
	f := New()
	applyStream(t, f, randomCommands(3, 200), 1)
	snap := f.Snapshot()
	before := f.Snapshot()
	cases := map[string][]byte{
		"empty":     nil,
		"truncated": snap[:len(snap)/2],
		"magic":     append([]byte("XCAT"), snap[4:]...),
		"version":   append(append([]byte("TCAT"), 9), snap[5:]...),
	}
	flipped := slices.Clone(snap)
	flipped[len(flipped)/2] ^= 0x40
	cases["bit flip"] = flipped
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if err := f.Restore(b); !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("got %v", err)
			}
			if !bytes.Equal(f.Snapshot(), before) {
				t.Fatal("failed restore changed the catalog")
			}
		})
	}
	// A well-checksummed snapshot whose content breaks an invariant.
	s, err := decodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	dup := s.series.at(1)
	s.series.add(dup) // duplicate series
	s.seriesKeyBytes += keyStringLen(dup.AppendKey(nil))
	if err := f.Restore(s.appendSnapshot(nil)); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("duplicate series: %v", err)
	}
}

func TestCommand_RoundTrip(t *testing.T) {
	for _, c := range randomCommands(11, 300) {
		if _, ok := c.(membershipCmd); ok {
			continue
		}
		b := EncodeCommand(c)
		got, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("%s: %v", c.Kind(), err)
		}
		if !bytes.Equal(EncodeCommand(got), b) {
			t.Fatalf("%s: round trip differs", c.Kind())
		}
	}
}

// TestFSM_ReadsRunConcurrentlyWithApply is for the race detector: the
// apply loop and readers share the catalog.
func TestFSM_ReadsRunConcurrentlyWithApply(t *testing.T) {
	f := New()
	cmds := randomCommands(9, 300)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, c := range cmds {
			if m, ok := c.(membershipCmd); ok {
				if err := f.ApplyMembership(uint64(i+1), Membership{Voters: m.voters}); err != nil {
					t.Errorf("membership: %v", err) // not Fatal: not the test goroutine
				}
				continue
			}
			_, _ = f.Apply(uint64(i+1), EncodeCommand(c))
		}
	}()
	m := mustMatcher(t, labels.MatchRegexp, "__name__", "m[0-4]")
	for {
		select {
		case <-done:
			if err := f.Check(); err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		if _, err := f.Select([]*labels.Matcher{m}, 10); err != nil {
			t.Fatal(err)
		}
		_ = f.Snapshot()
		_ = f.Placements()
		_ = f.Progresses()
		_ = f.EdgesOf([]uint64{1, 2, 3})
	}
}

// TestFSM_SelectProbesLongPostingsWithFewCandidates: a selective matcher
// and an unselective one (the metric name of every series) give the same
// series whichever order they come in, by probing or merging.
func TestFSM_SelectProbesLongPostingsWithFewCandidates(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	var batch []labels.Labels
	for i := range 500 {
		batch = append(batch, series("__name__", "temp", "host", fmt.Sprintf("h%d", i%50), "probe", fmt.Sprintf("p%d", i/50)))
	}
	applyOK(t, f, 2, RegisterSeries{Edge: "pi-1", Series: batch})
	for _, ms := range [][]*labels.Matcher{
		{mustMatcher(t, labels.MatchEqual, "__name__", "temp"), mustMatcher(t, labels.MatchEqual, "host", "h7")},
		{mustMatcher(t, labels.MatchEqual, "host", "h7"), mustMatcher(t, labels.MatchEqual, "__name__", "temp")},
		{mustMatcher(t, labels.MatchRegexp, "__name__", "te.*"), mustMatcher(t, labels.MatchEqual, "host", "h7"), mustMatcher(t, labels.MatchEqual, "probe", "p3")},
	} {
		refs, err := f.Select(ms, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := 10
		if len(ms) == 3 {
			want = 1
		}
		if len(refs) != want {
			t.Fatalf("%v: %d series, want %d", ms, len(refs), want)
		}
		for _, r := range refs {
			if r.Labels.Get("host") != "h7" {
				t.Fatalf("%v selected %s", ms, r.Labels)
			}
		}
	}
}
