package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

// ann is an AnnounceSeries of one edge.
func ann(edge string, throughMs int64, ss ...labels.Labels) AnnounceSeries {
	return AnnounceSeries{Edges: []EdgeAnnouncement{{Edge: edge, ThroughMs: throughMs, Series: ss}}}
}

// one is the result of a one-edge AnnounceSeries.
func one(t testing.TB, r any) EdgeAnnounced {
	t.Helper()
	res := r.(AnnounceSeriesResult)
	if len(res.Edges) != 1 {
		t.Fatalf("%d results", len(res.Edges))
	}
	return res.Edges[0]
}

func TestAnnounceSeries_RegistersSeriesAndAdvancesWatermark(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1", "pi-2")
	if _, ok := f.Registration("pi-1"); ok {
		t.Fatal("a registration watermark before any announcement")
	}
	a, b := series("__name__", "cpu", "host", "a"), series("__name__", "cpu", "host", "b")
	r := one(t, applyOK(t, f, 10, ann("pi-1", 5000, a, b)))
	if !slices.Equal(r.IDs, []uint64{1, 2}) || r.Created != 2 || r.ThroughMs != 5000 {
		t.Fatalf("first announcement: %+v", r)
	}
	if ms, ok := f.Registration("pi-1"); !ok || ms != 5000 {
		t.Fatalf("registration %d %v, want 5000", ms, ok)
	}
	if _, ok := f.Registration("pi-2"); ok {
		t.Fatal("pi-2 has a registration watermark it never announced")
	}
	// The series are in the postings and listed for the edge, as
	// RegisterSeries leaves them.
	refs, err := f.Select([]*labels.Matcher{mustMatcher(t, labels.MatchEqual, "host", "b")}, 0)
	if err != nil || len(refs) != 1 || refs[0].ID != 2 {
		t.Fatalf("select %v %v", refs, err)
	}
	if got := f.EdgeSeries("pi-1"); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("edge series %v", got)
	}
	// A part without a watermark registers its series only.
	c := series("__name__", "cpu", "host", "c")
	r = one(t, applyOK(t, f, 11, ann("pi-1", NoWatermark, c)))
	if r.ThroughMs != 5000 || r.Created != 1 {
		t.Fatalf("part without a watermark: %+v", r)
	}
	if got := f.Unlisted("pi-1", []labels.Labels{a, c, series("__name__", "new"), a}); len(got) != 1 || got[0].Get("__name__") != "new" {
		t.Fatalf("unlisted %v", got)
	}
	if got := f.Unlisted("pi-2", []labels.Labels{a, a}); len(got) != 1 {
		t.Fatalf("unlisted for pi-2 %v: a is not pi-2's", got)
	}
	// An empty announcement only moves the watermark.
	r = one(t, applyOK(t, f, 12, ann("pi-1", 6000)))
	if r.ThroughMs != 6000 || len(r.IDs) != 0 {
		t.Fatalf("empty announcement: %+v", r)
	}
}

func TestAnnounceSeries_IsIdempotentAndNeverGoesBack(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	a := series("__name__", "cpu", "host", "a")
	first := ann("pi-1", 5000, a)
	applyOK(t, f, 10, first)
	applyOK(t, f, 11, ann("pi-1", 7000))
	snap := stripApplied(t, f.Snapshot())
	// A replay (re-proposed after a leader change) after a later command
	// changes nothing.
	r := one(t, applyOK(t, f, 12, first))
	if r.Created != 0 || !slices.Equal(r.IDs, []uint64{1}) || r.ThroughMs != 7000 {
		t.Fatalf("replay: %+v", r)
	}
	if !bytes.Equal(snap, stripApplied(t, f.Snapshot())) {
		t.Fatal("a replayed announcement changed the catalog")
	}
	if !f.Reproposable(EncodeCommand(first)) {
		t.Fatal("AnnounceSeries is not reproposable")
	}
}

func TestAnnounceSeries_RejectedSeriesHoldTheWatermark(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	cfg := DefaultConfig
	cfg.MaxSeries = 1
	applyOK(t, f, 2, SetConfig{Config: cfg})
	applyOK(t, f, 3, ann("pi-1", 1000, series("__name__", "a")))
	// The second series exceeds the fleet's limit: the edge holds a series
	// the catalog cannot list, so the watermark must not vouch for it.
	r := one(t, applyOK(t, f, 4, ann("pi-1", 2000, series("__name__", "b"))))
	if len(r.Rejected) != 1 || r.ThroughMs != 1000 {
		t.Fatalf("result %+v, want one rejection and the watermark at 1000", r)
	}
	if ms, _ := f.Registration("pi-1"); ms != 1000 {
		t.Fatalf("registration %d, want 1000", ms)
	}
	// Nor does a later announcement of the edge in the same command (the
	// rest of a list split in pieces).
	r2 := applyOK(t, f, 5, AnnounceSeries{Edges: []EdgeAnnouncement{
		{Edge: "pi-1", ThroughMs: NoWatermark, Series: []labels.Labels{series("__name__", "c")}},
		{Edge: "pi-1", ThroughMs: 3000},
	}}).(AnnounceSeriesResult)
	if len(r2.Edges[0].Rejected) != 1 || r2.Edges[1].ThroughMs != 1000 {
		t.Fatalf("result %+v, want the watermark held at 1000", r2)
	}
}

func TestAnnounceSeries_SkipsUnknownNodesAndCoordinatorsAlone(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1", "pi-2")
	addCoordinator(t, f, 5, "c1", 1)
	r := applyOK(t, f, 6, AnnounceSeries{Edges: []EdgeAnnouncement{
		{Edge: "pi-9", ThroughMs: 1, Series: []labels.Labels{series("__name__", "lost")}},
		{Edge: "pi-1", ThroughMs: 10, Series: []labels.Labels{series("__name__", "a")}},
		{Edge: "c1", ThroughMs: 1},
		{Edge: "pi-2", ThroughMs: 20},
	}}).(AnnounceSeriesResult)
	if len(r.Edges) != 4 || r.Edges[0].Skipped == "" || r.Edges[2].Skipped == "" || r.Edges[1].Skipped != "" || r.Edges[3].Skipped != "" {
		t.Fatalf("result %+v", r)
	}
	if f.SeriesCount() != 1 {
		t.Fatalf("%d series: the unknown edge's series was registered", f.SeriesCount())
	}
	for edge, want := range map[string]int64{"pi-1": 10, "pi-2": 20} {
		if ms, ok := f.Registration(edge); !ok || ms != want {
			t.Fatalf("%s: registration %d %v, want %d", edge, ms, ok, want)
		}
	}
	if _, ok := f.Registration("c1"); ok {
		t.Fatal("a coordinator got a registration watermark")
	}
}

func TestAnnounceSeries_RemoveNodeDropsTheWatermark(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	applyOK(t, f, 2, ann("pi-1", 1000))
	applyOK(t, f, 3, RemoveNode{ID: "pi-1"})
	if _, ok := f.Registration("pi-1"); ok {
		t.Fatal("a removed edge kept its registration watermark")
	}
	applyOK(t, f, 4, RegisterNode{ID: "pi-1", Role: RoleEdge, TimeMs: 1})
	if _, ok := f.Registration("pi-1"); ok {
		t.Fatal("a re-registered edge has its old registration watermark")
	}
}

func TestAnnounceSeries_SnapshotRestore(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1", "pi-2", "pi-3")
	applyOK(t, f, 5, RegisterSeries{Edge: "pi-3", Series: []labels.Labels{series("__name__", "x")}})
	// No announcement yet: the snapshot is version 4, which coordinators
	// of the version before read.
	if v := f.Snapshot()[4]; v != snapshotVersionNoRegistration {
		t.Fatalf("snapshot version %d before any announcement, want %d", v, snapshotVersionNoRegistration)
	}
	applyOK(t, f, 6, ann("pi-2", -5, series("__name__", "y")))
	applyOK(t, f, 7, ann("pi-1", 1<<40))
	snap := f.Snapshot()
	if snap[4] != snapshotVersionNoRules {
		t.Fatalf("snapshot version %d, want %d", snap[4], snapshotVersionNoRules)
	}
	g := New()
	if err := g.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g.Snapshot(), snap) {
		t.Fatal("restored catalog snapshots differently")
	}
	for edge, want := range map[string]int64{"pi-1": 1 << 40, "pi-2": -5} {
		if ms, ok := g.Registration(edge); !ok || ms != want {
			t.Fatalf("%s: registration %d %v, want %d", edge, ms, ok, want)
		}
	}
	if _, ok := g.Registration("pi-3"); ok {
		t.Fatal("pi-3 restored with a registration watermark")
	}
	// The same commands on another member give the same bytes.
	h := newCatalogWithEdges(t, "pi-1", "pi-2", "pi-3")
	applyOK(t, h, 5, RegisterSeries{Edge: "pi-3", Series: []labels.Labels{series("__name__", "x")}})
	applyOK(t, h, 6, ann("pi-2", -5, series("__name__", "y")))
	applyOK(t, h, 7, ann("pi-1", 1<<40))
	if !bytes.Equal(h.Snapshot(), snap) {
		t.Fatal("two members applying the same announcements differ")
	}
}

func TestAnnounceSeries_RestoreRejectsABadRegistrationSection(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	applyOK(t, f, 2, ann("pi-1", 10))
	s, err := decodeSnapshot(f.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	s.registered["pi-9"] = 1 // not a registered edge
	if err := New().Restore(s.appendSnapshot(nil)); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("registration of an unknown edge: %v", err)
	}
}

func TestAnnounceSeries_RoundTripsItsEncoding(t *testing.T) {
	c := AnnounceSeries{Edges: []EdgeAnnouncement{
		{Edge: "pi-1", ThroughMs: -42, Series: []labels.Labels{series("__name__", "a", "x", "1"), series("__name__", "b")}},
		{Edge: "pi-2", ThroughMs: 7},
	}}
	b := EncodeCommand(c)
	got, err := DecodeCommand(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(EncodeCommand(got), b) {
		t.Fatal("round trip differs")
	}
	// A truncated body is an encoding error, never a panic.
	for n := 2; n < len(b); n++ {
		if _, err := DecodeCommand(b[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: decoded", n)
		}
	}
}

func TestAnnounceReady_RequiresEveryMemberToReportTheFeature(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	if f.AnnounceReady() {
		t.Fatal("ready without members")
	}
	feat := labels.Labels{{Name: FeaturesLabel, Value: Features}}
	applyOK(t, f, 5, RegisterNode{ID: "c1", Role: RoleCoordinator, RaftID: 1, Labels: feat})
	applyOK(t, f, 6, RegisterNode{ID: "c2", Role: RoleCoordinator, RaftID: 2}) // an earlier version
	if err := f.ApplyMembership(7, Membership{Voters: []uint64{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if f.AnnounceReady() {
		t.Fatal("ready while c2 does not report the feature")
	}
	if f.FeatureReady(FeatureSealPolicy) {
		t.Fatal("the seal policy may be set while c2 does not report it")
	}
	// A member of the version that announces series but knows no seal
	// policy.
	applyOK(t, f, 8, RegisterNode{ID: "c2", Role: RoleCoordinator, RaftID: 2, Labels: labels.Labels{{Name: FeaturesLabel, Value: FeatureAnnounceSeries}}})
	if !f.AnnounceReady() || f.FeatureReady(FeatureSealPolicy) {
		t.Fatalf("announce ready %v, seal policy %v; want true, false", f.AnnounceReady(), f.FeatureReady(FeatureSealPolicy))
	}
	applyOK(t, f, 9, RegisterNode{ID: "c2", Role: RoleCoordinator, RaftID: 2, Labels: feat}) // upgraded
	if !f.AnnounceReady() || !f.FeatureReady(FeatureSealPolicy) {
		t.Fatal("not ready once every member reports the features")
	}
	// A new member that has not registered yet (it may be of any
	// version) closes the gate again.
	if err := f.ApplyMembership(10, Membership{Voters: []uint64{1, 2}, Learners: []uint64{3}}); err != nil {
		t.Fatal(err)
	}
	if f.AnnounceReady() {
		t.Fatal("ready while member 3 has not said what it applies")
	}
}

// TestAnnounceSeries_SameCommandsSameSnapshot: random streams with
// announcements interleaved leave two members byte-identical, also when
// one of them restores a snapshot half way, and keep every invariant.
func TestAnnounceSeries_SameCommandsSameSnapshot(t *testing.T) {
	for seed := range uint64(5) {
		r := rand.New(rand.NewPCG(seed, 15))
		var cmds []Command
		for i, c := range randomCommands(seed, 200) {
			cmds = append(cmds, c)
			if i%5 != 0 {
				continue
			}
			var a AnnounceSeries
			for range 1 + r.IntN(3) {
				ea := EdgeAnnouncement{Edge: fmt.Sprintf("pi-%d", r.IntN(7)), ThroughMs: int64(r.IntN(100_000))}
				if r.IntN(5) == 0 {
					ea.ThroughMs = NoWatermark
				}
				for range r.IntN(4) {
					ea.Series = append(ea.Series, series("__name__", fmt.Sprintf("m%d", r.IntN(5)), "host", fmt.Sprintf("h%d", r.IntN(20)), "new", fmt.Sprint(r.IntN(2))))
				}
				a.Edges = append(a.Edges, ea)
			}
			cmds = append(cmds, a)
		}
		one, two := New(), New()
		applyStream(t, one, cmds, 1)
		half := len(cmds) / 2
		applyStream(t, two, cmds[:half], 1)
		three := New()
		if err := three.Restore(two.Snapshot()); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		applyStream(t, three, cmds[half:], uint64(half+1))
		if !bytes.Equal(one.Snapshot(), three.Snapshot()) {
			t.Fatalf("seed %d: a member that restored half way differs", seed)
		}
		if err := one.Check(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}
