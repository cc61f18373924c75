package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

const testGroupYAML = "groups:\n  - name: can\n    rules:\n      - record: r\n        expr: up\n"

func TestFSM_RuleGroupsSetReplaceDelete(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	g := RuleGroup{Name: "can", Selector: `site="berlin"`, YAML: testGroupYAML, Version: 99}
	got := applyOK(t, f, 10, SetRuleGroup{Group: g}).(RuleGroup)
	if got.Version != 10 || got.Name != "can" || f.RulesVersion() != 10 {
		t.Fatalf("set: %+v, rules version %d", got, f.RulesVersion())
	}
	// The same group again changes nothing (a command applied twice).
	if got := applyOK(t, f, 11, SetRuleGroup{Group: g}).(RuleGroup); got.Version != 10 || f.RulesVersion() != 10 {
		t.Fatalf("set again: %+v, rules version %d", got, f.RulesVersion())
	}
	g.Selector = ""
	if got := applyOK(t, f, 12, SetRuleGroup{Group: g}).(RuleGroup); got.Version != 12 || f.RulesVersion() != 12 {
		t.Fatalf("replace: %+v, rules version %d", got, f.RulesVersion())
	}
	applyOK(t, f, 13, SetRuleGroup{Group: RuleGroup{Name: "climate", YAML: testGroupYAML}})
	groups, v := f.RuleGroups()
	if v != 13 || len(groups) != 2 || groups[0].Name != "can" || groups[0].Selector != "" || groups[1].Name != "climate" || groups[1].Version != 13 {
		t.Fatalf("groups %+v version %d", groups, v)
	}
	applyOK(t, f, 14, DeleteRuleGroup{Name: "can"})
	if groups, v := f.RuleGroups(); v != 14 || len(groups) != 1 || groups[0].Name != "climate" {
		t.Fatalf("after delete: %+v version %d", groups, v)
	}
	applyErr(t, f, 15, DeleteRuleGroup{Name: "can"}, ErrNotFound)

	for name, bad := range map[string]RuleGroup{
		"empty name":    {YAML: testGroupYAML},
		"long name":     {Name: strings.Repeat("n", MaxRuleGroupNameBytes+1), YAML: testGroupYAML},
		"empty yaml":    {Name: "x"},
		"long selector": {Name: "x", Selector: strings.Repeat("s", MaxRuleSelectorBytes+1), YAML: testGroupYAML},
		"bad utf-8":     {Name: "x", YAML: "groups: \xff"},
	} {
		t.Run(name, func(t *testing.T) { applyErr(t, f, 16, SetRuleGroup{Group: bad}, ErrBadCommand) })
	}
	big := RuleGroup{Name: "big", YAML: strings.Repeat("#", MaxRuleGroupBytes+1)}
	if _, err := f.Apply(16, EncodeCommand(SetRuleGroup{Group: big})); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("oversized YAML: %v", err)
	}
}

func TestFSM_RuleGroupsLimit(t *testing.T) {
	f := New()
	for i := range MaxRuleGroups {
		applyOK(t, f, uint64(i+1), SetRuleGroup{Group: RuleGroup{Name: fmt.Sprintf("g%03d", i), YAML: testGroupYAML}})
	}
	applyErr(t, f, MaxRuleGroups+1, SetRuleGroup{Group: RuleGroup{Name: "one-more", YAML: testGroupYAML}}, ErrLimit)
	// Replacing one of them is not adding one.
	applyOK(t, f, MaxRuleGroups+2, SetRuleGroup{Group: RuleGroup{Name: "g000", Selector: `a="b"`, YAML: testGroupYAML}})
}

func TestFSM_RuleGroupsBytesLimit(t *testing.T) {
	f := New()
	big := strings.Repeat("#", MaxRuleGroupBytes-100) + "\n" + testGroupYAML
	n := MaxRuleGroupsBytes / len(big)
	for i := range n {
		applyOK(t, f, uint64(i+1), SetRuleGroup{Group: RuleGroup{Name: fmt.Sprintf("g%02d", i), YAML: big}})
	}
	applyErr(t, f, uint64(n+1), SetRuleGroup{Group: RuleGroup{Name: "one-more", YAML: big}}, ErrLimit)
	// Replacing a group with a smaller one is within the limit.
	applyOK(t, f, uint64(n+2), SetRuleGroup{Group: RuleGroup{Name: "g00", YAML: testGroupYAML}})
	applyOK(t, f, uint64(n+3), SetRuleGroup{Group: RuleGroup{Name: "one-more", YAML: testGroupYAML}})
}

func TestFSM_RuleGroupsSnapshotRoundTrip(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	if v := f.Snapshot()[4]; v != snapshotVersionNoRegistration {
		t.Fatalf("a catalog that never had rule groups writes version %d, want %d", v, snapshotVersionNoRegistration)
	}
	applyOK(t, f, 5, SetRuleGroup{Group: RuleGroup{Name: "b", Selector: `site=~"ber.*"`, YAML: testGroupYAML}})
	applyOK(t, f, 6, SetRuleGroup{Group: RuleGroup{Name: "a", YAML: testGroupYAML}})
	snap := f.Snapshot()
	if snap[4] != SnapshotVersion {
		t.Fatalf("version %d, want %d", snap[4], SnapshotVersion)
	}
	g := New()
	if err := g.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g.Snapshot(), snap) {
		t.Fatal("restored catalog snapshots differently")
	}
	want, wv := f.RuleGroups()
	got, gv := g.RuleGroups()
	if !reflect.DeepEqual(got, want) || gv != wv || gv != 6 {
		t.Fatalf("restored %+v (%d), want %+v (%d)", got, gv, want, wv)
	}

	// With every group deleted the version stays, and so version 6.
	applyOK(t, f, 7, DeleteRuleGroup{Name: "a"})
	applyOK(t, f, 8, DeleteRuleGroup{Name: "b"})
	snap = f.Snapshot()
	if err := g.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if groups, v := g.RuleGroups(); len(groups) != 0 || v != 8 || snap[4] != SnapshotVersion {
		t.Fatalf("after deletes: %+v version %d, snapshot version %d", groups, v, snap[4])
	}
}

// TestRestore_OldSnapshotsHaveNoRuleGroups: a version 5 snapshot (written
// by the version before) loads, with no rule groups.
func TestRestore_OldSnapshotsHaveNoRuleGroups(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	applyOK(t, f, 2, AnnounceSeries{Edges: []EdgeAnnouncement{{Edge: "pi-1", ThroughMs: 100}}})
	snap := f.Snapshot()
	if snap[4] != snapshotVersionNoRules {
		t.Fatalf("version %d, want %d", snap[4], snapshotVersionNoRules)
	}
	g := New()
	if err := g.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if groups, v := g.RuleGroups(); len(groups) != 0 || v != 0 {
		t.Fatalf("rule groups %+v version %d", groups, v)
	}
}

func TestRestore_RejectsBadRuleGroups(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	applyOK(t, f, 5, SetRuleGroup{Group: RuleGroup{Name: "a", YAML: testGroupYAML}})
	for name, mutate := range map[string]func(s *state){
		"version after applied":   func(s *state) { s.rulesVersion = s.applied + 1 },
		"group newer than groups": func(s *state) { s.ruleGroups["a"].Version = s.rulesVersion + 1 },
		"empty yaml":              func(s *state) { s.ruleGroups["a"].YAML = "" },
	} {
		t.Run(name, func(t *testing.T) {
			s, err := decodeSnapshot(f.Snapshot())
			if err != nil {
				t.Fatal(err)
			}
			mutate(s)
			if err := New().Restore(s.appendSnapshot(nil)); !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("restore: %v", err)
			}
		})
	}
}

func TestFSM_EdgeRulesReadsLabelsAndGroupsTogether(t *testing.T) {
	f := New()
	applyOK(t, f, 1, RegisterNode{ID: "pi-1", Role: RoleEdge, TimeMs: 1,
		Labels: labels.Labels{{Name: "site", Value: "berlin"}, {Name: "model", Value: "pi4b"}}})
	applyOK(t, f, 2, SetRuleGroup{Group: RuleGroup{Name: "a", Selector: `site="berlin"`, YAML: testGroupYAML}})
	applyOK(t, f, 3, Heartbeat{Beats: []Beat{{ID: "pi-1", TimeMs: 5}}})
	er, ok := f.EdgeRules("pi-1")
	if !ok || er.Applied != 3 || er.RulesVersion != 2 || len(er.Groups) != 1 || er.Labels.Get("site") != "berlin" || er.Labels.Get("model") != "pi4b" {
		t.Fatalf("edge rules %+v %v", er, ok)
	}
	if _, ok := f.EdgeRules("nobody"); ok {
		t.Fatal("an unknown edge has rules")
	}
}

func TestCommand_RuleGroupsRoundTrip(t *testing.T) {
	for _, c := range []Command{
		SetRuleGroup{Group: RuleGroup{Name: "can", Selector: `site="berlin", model=~"pi4.*"`, YAML: testGroupYAML}},
		DeleteRuleGroup{Name: "can"},
	} {
		b := EncodeCommand(c)
		got, err := DecodeCommand(b)
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("%s: %+v %v", c.Kind(), got, err)
		}
	}
	// The YAML bound holds at decoding.
	b := EncodeCommand(SetRuleGroup{Group: RuleGroup{Name: "x", YAML: strings.Repeat("#", MaxRuleGroupBytes+1)}})
	if _, err := DecodeCommand(b); err == nil {
		t.Fatal("oversized YAML decoded")
	}
}

func TestFSM_FeatureReady(t *testing.T) {
	f := New()
	if err := f.ApplyMembership(1, Membership{Voters: []uint64{1, 2}}); err != nil {
		t.Fatal(err)
	}
	applyOK(t, f, 2, RegisterNode{ID: "c1", Role: RoleCoordinator, RaftID: 1, Labels: labels.Labels{{Name: FeaturesLabel, Value: Features}}})
	applyOK(t, f, 3, RegisterNode{ID: "c2", Role: RoleCoordinator, RaftID: 2, Labels: labels.Labels{{Name: FeaturesLabel, Value: FeatureAnnounceSeries}}})
	if f.FeatureReady(FeatureRuleGroups) || !f.FeatureReady(FeatureAnnounceSeries) {
		t.Fatal("a member of the version before counts as applying rule groups")
	}
	applyOK(t, f, 4, RegisterNode{ID: "c2", Role: RoleCoordinator, RaftID: 2, Labels: labels.Labels{{Name: FeaturesLabel, Value: Features}}})
	if !f.FeatureReady(FeatureRuleGroups) {
		t.Fatal("every member applies rule groups, yet not ready")
	}
}
