package catalog

import (
	"bytes"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

func TestFSM_ReproposableOnlyForOrderInsensitiveCommands(t *testing.T) {
	f := New()
	cases := []struct {
		cmd  Command
		want bool
	}{
		{RegisterSeries{Edge: "e", Series: []labels.Labels{labels.FromStrings("__name__", "m")}}, true},
		{RecordHeld{Edge: "e", Ranges: []HeldRange{{FirstSeq: 1, LastSeq: 1}}}, true},
		{RecordGap{Edge: "e", Gaps: []GapRange{{AfterSeq: 1, ThroughSeq: 2, Reason: GapMissing, Points: -1}}}, true},
		{Heartbeat{Beats: []Beat{{ID: "e", TimeMs: 1}}}, true},
		{RegisterNode{ID: "e", Role: RoleEdge}, false},
		{RemoveNode{ID: "e"}, false},
		{SetConfig{Config: DefaultConfig}, false},
		{SetPlacement{Edge: "e"}, false},
		{Rebalance{}, false},
	}
	for _, c := range cases {
		if got := f.Reproposable(EncodeCommand(c.cmd)); got != c.want {
			t.Errorf("%s: Reproposable = %v, want %v", c.cmd.Kind(), got, c.want)
		}
	}
	for _, bad := range [][]byte{nil, {CommandVersion}, {CommandVersion + 1, byte(KindHeartbeat)}} {
		if f.Reproposable(bad) {
			t.Errorf("Reproposable(%x) = true", bad)
		}
	}
}

// The reproposable commands, applied a second time after other commands,
// leave the catalog as it was.
func TestFSM_ReproposableCommandsAppliedTwiceChangeNothing(t *testing.T) {
	f, twin := New(), New()
	apply := func(index uint64, c Command) { mustApply(t, f, index, c); mustApply(t, twin, index, c) }
	apply(1, RegisterNode{ID: "c1", Role: RoleCoordinator, RaftID: 1})
	for _, x := range []*FSM{f, twin} {
		if err := x.ApplyMembership(2, Membership{Voters: []uint64{1}}); err != nil {
			t.Fatal(err)
		}
	}
	apply(3, RegisterNode{ID: "e", Role: RoleEdge})
	first := []Command{
		RegisterSeries{Edge: "e", Series: []labels.Labels{labels.FromStrings("__name__", "m", "k", "1")}},
		RecordHeld{Edge: "e", Ranges: []HeldRange{{FirstSeq: 1, LastSeq: 2, Points: 10, MinTimeMs: 1, MaxTimeMs: 5}}},
		RecordGap{Edge: "e", Gaps: []GapRange{{AfterSeq: 2, ThroughSeq: 4, Reason: GapBacklogOverflow, Segments: 2, Points: 7, MinTimeMs: 6, MaxTimeMs: 9}}},
		Heartbeat{Beats: []Beat{{ID: "e", TimeMs: 100}}},
	}
	idx := uint64(4)
	for _, c := range first {
		apply(idx, c)
		idx++
	}
	// Commands that came between.
	apply(idx, RegisterSeries{Edge: "e", Series: []labels.Labels{labels.FromStrings("__name__", "m", "k", "2")}})
	apply(idx+1, RecordHeld{Edge: "e", Ranges: []HeldRange{{FirstSeq: 5, LastSeq: 6, Points: 3, MinTimeMs: 10, MaxTimeMs: 12}}})
	apply(idx+2, Heartbeat{Beats: []Beat{{ID: "e", TimeMs: 200}}})
	idx += 3
	// f applies the first commands again; the twin applies entries that
	// do not decode at the same indexes (they only advance the index).
	for _, c := range first {
		if _, err := f.Apply(idx, EncodeCommand(c)); err != nil {
			t.Fatalf("second %s: %v", c.Kind(), err)
		}
		if _, err := twin.Apply(idx, []byte{0xff}); err == nil {
			t.Fatal("an undecodable command applied")
		}
		idx++
	}
	if !bytes.Equal(f.Snapshot(), twin.Snapshot()) {
		t.Fatal("applying the reproposable commands again changed the catalog")
	}
}

func TestFSM_SetConfigTwiceKeepsItsVersion(t *testing.T) {
	f := New()
	cfg := DefaultConfig
	cfg.MaxSeries = 77
	mustApply(t, f, 5, SetConfig{Config: cfg})
	mustApply(t, f, 9, SetConfig{Config: cfg})
	if got := f.Config(); got.Version != 5 || got.MaxSeries != 77 {
		t.Fatalf("the same SetConfig again: %+v, want version 5", got)
	}
}

func mustApply(t *testing.T, f *FSM, index uint64, c Command) {
	t.Helper()
	if _, err := f.Apply(index, EncodeCommand(c)); err != nil {
		t.Fatalf("apply %s at %d: %v", c.Kind(), index, err)
	}
}
