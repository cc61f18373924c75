package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"slices"
	"testing"
)

// held returns a held run first..last whose times follow the sequence
// numbers (seq*10 .. seq*10+9).
func held(first, last uint64) HeldRange {
	return HeldRange{FirstSeq: first, LastSeq: last, Points: last - first + 1, MinTimeMs: int64(first) * 10, MaxTimeMs: int64(last)*10 + 9}
}

// gap returns a gap (after, through] with unknown counts and time span.
func gap(after, through uint64, reason GapReason) GapRange {
	return GapRange{AfterSeq: after, ThroughSeq: through, Reason: reason, Points: -1}
}

// known returns g with counts and a time span.
func known(g GapRange, segments uint64, points, minT, maxT int64) GapRange {
	g.Segments, g.Points, g.MinTimeMs, g.MaxTimeMs = segments, points, minT, maxT
	return g
}

func TestEdgeProgress_AckedThrough(t *testing.T) {
	cases := []struct {
		name string
		p    EdgeProgress
		want uint64
	}{
		{"nothing", EdgeProgress{}, 0},
		{"held from 1", EdgeProgress{Held: []HeldRange{held(1, 7)}}, 7},
		{"held not from 1", EdgeProgress{Held: []HeldRange{held(2, 7)}}, 0},
		{"gap from 1", EdgeProgress{Gaps: []GapRange{gap(0, 4, GapMissing)}}, 4},
		{"gap not from 1", EdgeProgress{Gaps: []GapRange{gap(1, 4, GapMissing)}}, 0},
		{"held then gap then held", EdgeProgress{
			Held: []HeldRange{held(1, 3), held(8, 9)},
			Gaps: []GapRange{gap(3, 7, GapDropped)},
		}, 9},
		{"gap then held then hole", EdgeProgress{
			Held: []HeldRange{held(6, 9), held(12, 20)},
			Gaps: []GapRange{gap(0, 5, GapBacklogOverflow)},
		}, 9},
		{"adjacent gaps of two reasons", EdgeProgress{
			Gaps: []GapRange{gap(0, 2, GapDropped), gap(2, 5, GapMissing), gap(6, 9, GapMissing)},
		}, 5},
		{"alternating", EdgeProgress{
			Held: []HeldRange{held(2, 2), held(4, 4), held(6, 6)},
			Gaps: []GapRange{gap(0, 1, GapMissing), gap(2, 3, GapMissing), gap(4, 5, GapMissing)},
		}, 6},
		{"to the last number", EdgeProgress{
			Held: []HeldRange{held(1, 1)},
			Gaps: []GapRange{gap(1, math.MaxUint64, GapMissing)},
		}, math.MaxUint64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.AckedThrough(); got != tc.want {
				t.Fatalf("AckedThrough = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestFSM_RecordGap runs one edge through a sequence of commands; each
// step states the result and the held runs and gaps after it.
func TestFSM_RecordGap(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	steps := []struct {
		name      string
		cmd       Command
		added     int
		dups      int
		ack, wm   uint64
		wmTime    int64
		wantHeld  []HeldRange
		wantGaps  []GapRange
		unchanged bool // the snapshot must not change (but the applied index)
	}{
		{
			name: "first gap", cmd: RecordGap{Edge: "pi-1", Gaps: []GapRange{known(gap(0, 5, GapBacklogOverflow), 2, 100, 10, 59)}},
			added: 1, ack: 5, wm: 5, wmTime: 0,
			wantGaps: []GapRange{known(gap(0, 5, GapBacklogOverflow), 2, 100, 10, 59)},
		},
		{
			name: "replay is a duplicate", cmd: RecordGap{Edge: "pi-1", Gaps: []GapRange{known(gap(0, 5, GapBacklogOverflow), 2, 100, 10, 59)}},
			dups: 1, ack: 5, wm: 5, unchanged: true,
			wantGaps: []GapRange{known(gap(0, 5, GapBacklogOverflow), 2, 100, 10, 59)},
		},
		{
			name: "inside a recorded gap of another reason is a duplicate", cmd: RecordGap{Edge: "pi-1", Gaps: []GapRange{gap(1, 3, GapDropped)}},
			dups: 1, ack: 5, wm: 5, unchanged: true,
			wantGaps: []GapRange{known(gap(0, 5, GapBacklogOverflow), 2, 100, 10, 59)},
		},
		{
			name: "adjacent gap of the same reason merges", cmd: RecordGap{Edge: "pi-1", Gaps: []GapRange{known(gap(5, 8, GapBacklogOverflow), 1, 30, 60, 89)}},
			added: 1, ack: 8, wm: 8,
			wantGaps: []GapRange{known(gap(0, 8, GapBacklogOverflow), 3, 130, 10, 89)},
		},
		{
			name: "adjacent gap of another reason stays apart", cmd: RecordGap{Edge: "pi-1", Gaps: []GapRange{gap(8, 10, GapMissing)}},
			added: 1, ack: 10, wm: 10,
			wantGaps: []GapRange{known(gap(0, 8, GapBacklogOverflow), 3, 130, 10, 89), gap(8, 10, GapMissing)},
		},
		{
			name: "held run past a hole moves nothing", cmd: RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(13, 14)}},
			added: 1, ack: 10, wm: 10,
			wantHeld: []HeldRange{held(13, 14)},
			wantGaps: []GapRange{known(gap(0, 8, GapBacklogOverflow), 3, 130, 10, 89), gap(8, 10, GapMissing)},
		},
		{
			name: "gap over a held run is cut; counts become unknown", cmd: RecordGap{Edge: "pi-1", Gaps: []GapRange{known(gap(10, 16, GapDropped), 3, 60, 110, 169)}},
			added: 1, ack: 16, wm: 16, wmTime: 149,
			wantHeld: []HeldRange{held(13, 14)},
			wantGaps: []GapRange{
				known(gap(0, 8, GapBacklogOverflow), 3, 130, 10, 89), gap(8, 10, GapMissing),
				known(gap(10, 12, GapDropped), 0, -1, 110, 169), known(gap(14, 16, GapDropped), 0, -1, 110, 169),
			},
		},
		{
			name: "gap over held and recorded numbers only is a duplicate", cmd: RecordGap{Edge: "pi-1", Gaps: []GapRange{gap(9, 15, GapMissing)}},
			dups: 1, ack: 16, wm: 16, wmTime: 149, unchanged: true,
			wantHeld: []HeldRange{held(13, 14)},
			wantGaps: []GapRange{
				known(gap(0, 8, GapBacklogOverflow), 3, 130, 10, 89), gap(8, 10, GapMissing),
				known(gap(10, 12, GapDropped), 0, -1, 110, 169), known(gap(14, 16, GapDropped), 0, -1, 110, 169),
			},
		},
		{
			name: "a backfilled run cuts the gap it lands in (held wins)", cmd: RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(4, 5)}},
			added: 1, ack: 16, wm: 16, wmTime: 149,
			wantHeld: []HeldRange{held(4, 5), held(13, 14)},
			wantGaps: []GapRange{
				known(gap(0, 3, GapBacklogOverflow), 0, -1, 10, 89), known(gap(5, 8, GapBacklogOverflow), 0, -1, 10, 89), gap(8, 10, GapMissing),
				known(gap(10, 12, GapDropped), 0, -1, 110, 169), known(gap(14, 16, GapDropped), 0, -1, 110, 169),
			},
		},
		{
			name: "several gaps in one command, in order", cmd: RecordGap{Edge: "pi-1", Gaps: []GapRange{
				known(gap(16, 18, GapDropped), 2, 5, 170, 189), known(gap(17, 20, GapDropped), 3, 5, 180, 209), gap(29, 31, GapMissing),
			}},
			added: 3, ack: 20, wm: 20, wmTime: 149,
			wantHeld: []HeldRange{held(4, 5), held(13, 14)},
			wantGaps: []GapRange{
				known(gap(0, 3, GapBacklogOverflow), 0, -1, 10, 89), known(gap(5, 8, GapBacklogOverflow), 0, -1, 10, 89), gap(8, 10, GapMissing),
				known(gap(10, 12, GapDropped), 0, -1, 110, 169),
				// (14,16] merges with (16,18] (unknown counts win) and the cut (18,20].
				{AfterSeq: 14, ThroughSeq: 20, Reason: GapDropped, Points: -1, MinTimeMs: 110, MaxTimeMs: 209},
				gap(29, 31, GapMissing),
			},
		},
		{
			name: "held run reaching the gaps moves the watermark and its time", cmd: RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(21, 29)}},
			added: 1, ack: 31, wm: 31, wmTime: 299,
			wantHeld: []HeldRange{held(4, 5), held(13, 14), held(21, 29)},
			wantGaps: []GapRange{
				known(gap(0, 3, GapBacklogOverflow), 0, -1, 10, 89), known(gap(5, 8, GapBacklogOverflow), 0, -1, 10, 89), gap(8, 10, GapMissing),
				known(gap(10, 12, GapDropped), 0, -1, 110, 169),
				{AfterSeq: 14, ThroughSeq: 20, Reason: GapDropped, Points: -1, MinTimeMs: 110, MaxTimeMs: 209},
				gap(29, 31, GapMissing),
			},
		},
	}
	index := uint64(10)
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			index++
			before := stripApplied(t, f.Snapshot())
			res := applyOK(t, f, index, st.cmd)
			var added, dups int
			var ack, wm uint64
			var wmTime int64
			switch r := res.(type) {
			case RecordGapResult:
				added, dups, ack, wm, wmTime = r.Added, r.Duplicates, r.AckedThrough, r.WatermarkSeq, r.WatermarkTimeMs
			case RecordHeldResult:
				added, dups, ack, wm, wmTime = r.Added, r.Duplicates, r.AckedThrough, r.WatermarkSeq, r.WatermarkTimeMs
			default:
				t.Fatalf("result %T", res)
			}
			if added != st.added || dups != st.dups || ack != st.ack || wm != st.wm || wmTime != st.wmTime {
				t.Fatalf("result added %d dups %d acked %d watermark %d/%d, want %d %d %d %d/%d",
					added, dups, ack, wm, wmTime, st.added, st.dups, st.ack, st.wm, st.wmTime)
			}
			p, ok := f.Progress("pi-1")
			if !ok || !slices.Equal(p.Held, st.wantHeld) || !slices.Equal(p.Gaps, st.wantGaps) {
				t.Fatalf("progress %+v\nwant held %+v\n     gaps %+v", p, st.wantHeld, st.wantGaps)
			}
			if p.AckedThrough() != st.ack || p.WatermarkSeq != st.wm || p.WatermarkTimeMs != st.wmTime {
				t.Fatalf("progress acked %d watermark %d/%d", p.AckedThrough(), p.WatermarkSeq, p.WatermarkTimeMs)
			}
			if after := stripApplied(t, f.Snapshot()); st.unchanged != bytes.Equal(before, after) {
				t.Fatalf("snapshot changed: %v, want %v", !bytes.Equal(before, after), !st.unchanged)
			}
			if err := f.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFSM_RecordGapRejects(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	addCoordinator(t, f, 2, "c1", 1)
	applyOK(t, f, 3, RecordGap{Edge: "pi-1", Gaps: []GapRange{gap(0, 4, GapMissing)}})
	ok := gap(10, 12, GapDropped)
	cases := []struct {
		name  string
		cmd   RecordGap
		class error
	}{
		{"unknown edge", RecordGap{Edge: "pi-9", Gaps: []GapRange{ok}}, ErrNotFound},
		{"not an edge", RecordGap{Edge: "c1", Gaps: []GapRange{ok}}, ErrBadCommand},
		{"empty range", RecordGap{Edge: "pi-1", Gaps: []GapRange{gap(5, 5, GapDropped)}}, ErrBadCommand},
		{"inverted range", RecordGap{Edge: "pi-1", Gaps: []GapRange{gap(6, 5, GapDropped)}}, ErrBadCommand},
		{"reason 0", RecordGap{Edge: "pi-1", Gaps: []GapRange{gap(5, 6, 0)}}, ErrBadCommand},
		{"reason 4", RecordGap{Edge: "pi-1", Gaps: []GapRange{gap(5, 6, 4)}}, ErrBadCommand},
		{"points below -1", RecordGap{Edge: "pi-1", Gaps: []GapRange{known(gap(5, 6, GapDropped), 1, -2, 0, 0)}}, ErrBadCommand},
		{"min time after max", RecordGap{Edge: "pi-1", Gaps: []GapRange{known(gap(5, 6, GapDropped), 1, 1, 9, 8)}}, ErrBadCommand},
		{"a bad gap rejects the good ones", RecordGap{Edge: "pi-1", Gaps: []GapRange{ok, gap(5, 6, 0)}}, ErrBadCommand},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { applyErr(t, f, uint64(10+i), tc.cmd, tc.class) })
	}
	// The explicit watermark of RecordHeld may name a sequence in a gap,
	// but not one that is neither held nor in a gap.
	r := applyOK(t, f, 30, RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(6, 6)}, WatermarkSeq: 3, WatermarkTimeMs: 7}).(RecordHeldResult)
	if r.WatermarkSeq != 4 || r.AckedThrough != 4 {
		t.Fatalf("result %+v", r)
	}
	applyErr(t, f, 31, RecordHeld{Edge: "pi-1", WatermarkSeq: 5}, ErrBadCommand)
	r = applyOK(t, f, 32, RecordHeld{Edge: "pi-1", WatermarkSeq: 6, WatermarkTimeMs: 5}).(RecordHeldResult)
	// (the time of the ignored watermark 3 was not taken: 3 was behind)
	if r.WatermarkSeq != 6 || r.AckedThrough != 4 || r.WatermarkTimeMs != 5 {
		t.Fatalf("explicit watermark past acked-through: %+v", r)
	}
}

func TestFSM_RecordGapLimit(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	// Gaps (4i, 4i+3]: MaxGapRuns of them, apart from each other.
	var gaps []GapRange
	for i := range uint64(MaxGapRuns) {
		gaps = append(gaps, gap(4*i, 4*i+3, GapDropped))
	}
	t.Run("one past the limit", func(t *testing.T) {
		more := append(slices.Clone(gaps), gap(4*MaxGapRuns, 4*MaxGapRuns+1, GapDropped))
		applyErr(t, f, 2, RecordGap{Edge: "pi-1", Gaps: more}, ErrLimit)
	})
	t.Run("at the limit", func(t *testing.T) {
		r := applyOK(t, f, 3, RecordGap{Edge: "pi-1", Gaps: gaps}).(RecordGapResult)
		if r.Added != MaxGapRuns || r.AckedThrough != 3 {
			t.Fatalf("result %+v", r)
		}
	})
	t.Run("merging stays within the limit", func(t *testing.T) {
		r := applyOK(t, f, 4, RecordGap{Edge: "pi-1", Gaps: []GapRange{gap(3, 4, GapDropped)}}).(RecordGapResult)
		if r.Added != 1 || r.AckedThrough != 7 {
			t.Fatalf("result %+v", r)
		}
	})
	t.Run("back at the limit", func(t *testing.T) {
		applyOK(t, f, 5, RecordGap{Edge: "pi-1", Gaps: []GapRange{gap(4*MaxGapRuns+10, 4*MaxGapRuns+11, GapDropped)}})
		if p, _ := f.Progress("pi-1"); len(p.Gaps) != MaxGapRuns {
			t.Fatalf("%d gaps", len(p.Gaps))
		}
	})
	t.Run("a held run splitting a gap past the limit", func(t *testing.T) {
		applyErr(t, f, 6, RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(10, 10)}}, ErrLimit)
	})
	t.Run("a held run cutting a gap's end", func(t *testing.T) {
		applyOK(t, f, 7, RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(11, 11)}})
	})
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshot_GapsRoundTrip(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1", "pi-2")
	applyOK(t, f, 3, RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(3, 9)}})
	applyOK(t, f, 4, RecordGap{Edge: "pi-1", Gaps: []GapRange{
		known(gap(0, 2, GapBacklogOverflow), 1, 50, -20, 29), gap(9, 12, GapMissing), known(gap(20, 30, GapDropped), 4, 0, 0, 0),
	}})
	applyOK(t, f, 5, RecordGap{Edge: "pi-2", Gaps: []GapRange{gap(4, 5, GapMissing)}})
	snap := f.Snapshot()
	if snap[4] != snapshotVersionNoRegistration { // no edge announced series
		t.Fatalf("snapshot version %d", snap[4])
	}
	g := New()
	if err := g.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g.Snapshot(), snap) {
		t.Fatal("restore+snapshot is not the identity")
	}
	if !slices.EqualFunc(f.Progresses(), g.Progresses(), func(a, b EdgeProgress) bool {
		return a.Edge == b.Edge && a.WatermarkSeq == b.WatermarkSeq && a.WatermarkTimeMs == b.WatermarkTimeMs &&
			slices.Equal(a.Held, b.Held) && slices.Equal(a.Gaps, b.Gaps)
	}) {
		t.Fatalf("progress differs after restore:\n%+v\n%+v", f.Progresses(), g.Progresses())
	}
	if p, _ := g.Progress("pi-1"); p.AckedThrough() != 12 || len(p.Gaps) != 3 {
		t.Fatalf("restored progress %+v", p)
	}

	// Snapshots whose gaps break an invariant are refused.
	bad := []struct {
		name string
		edit func(p *EdgeProgress)
	}{
		{"gap over a held run", func(p *EdgeProgress) { p.Gaps[1].AfterSeq = 8 }},
		{"unsorted", func(p *EdgeProgress) { p.Gaps[1], p.Gaps[2] = p.Gaps[2], p.Gaps[1] }},
		{"overlapping", func(p *EdgeProgress) { p.Gaps[1].ThroughSeq = 21 }},
		{"unmerged neighbours", func(p *EdgeProgress) { p.Gaps[2].AfterSeq, p.Gaps[2].Reason = 12, GapMissing }},
		{"empty", func(p *EdgeProgress) { p.Gaps[1].ThroughSeq = 9 }},
		{"unknown reason", func(p *EdgeProgress) { p.Gaps[1].Reason = 7 }},
		{"points below -1", func(p *EdgeProgress) { p.Gaps[1].Points = -5 }},
		{"watermark nowhere", func(p *EdgeProgress) { p.WatermarkSeq = 15 }},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			s, err := decodeSnapshot(snap)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(s.progress["pi-1"])
			if err := New().Restore(s.appendSnapshot(nil)); !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("got %v, want ErrCorruptSnapshot", err)
			}
		})
	}
}

// TestSnapshot_RestoresVersion1 restores a snapshot written by the
// catalog before gaps existed (testdata/snapshot-v1.bin, from
// randomCommands(3, 200) of that version).
func TestSnapshot_RestoresVersion1(t *testing.T) {
	v1, err := os.ReadFile("testdata/snapshot-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	if v1[4] != 1 {
		t.Fatalf("test data is version %d", v1[4])
	}
	f := New()
	if err := f.Restore(v1); err != nil {
		t.Fatal(err)
	}
	ps := f.Progresses()
	if len(ps) != 5 {
		t.Fatalf("%d edges with progress, want 5", len(ps))
	}
	for _, p := range ps {
		if len(p.Gaps) != 0 || len(p.Held) == 0 {
			t.Fatalf("%s: %+v", p.Edge, p)
		}
	}
	if p, _ := f.Progress("pi-3"); p.AckedThrough() != 9 || p.WatermarkSeq != 9 || p.WatermarkTimeMs != 900 {
		t.Fatalf("pi-3: %+v", p)
	}
	// It is written back as the current version, which restores to the
	// same state; the old version is read, never written.
	v2 := f.Snapshot()
	if v2[4] != snapshotVersionNoRegistration { // the current version without registrations
		t.Fatalf("written as version %d", v2[4])
	}
	g := New()
	if err := g.Restore(v2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g.Snapshot(), v2) {
		t.Fatal("version 2 of a version 1 snapshot does not round-trip")
	}
	// A gap list in a version 1 snapshot is trailing bytes.
	s, _ := decodeSnapshot(v2)
	s.progress["pi-3"].Gaps = []GapRange{gap(9, 10, GapMissing)}
	b := s.appendSnapshot(nil)
	b[4] = 1
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	if err := New().Restore(b); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("version 1 with gaps: %v", err)
	}
}

// TestFSM_GapsSameCommandsSameSnapshot: streams with gaps reach
// byte-identical snapshots, directly or through a restore half way.
func TestFSM_GapsSameCommandsSameSnapshot(t *testing.T) {
	withGaps := 0
	for seed := range uint64(10) {
		cmds := randomCommands(100+seed, 300)
		a, b := New(), New()
		applyStream(t, a, cmds, 1)
		applyStream(t, b, cmds[:150], 1)
		c := New()
		if err := c.Restore(b.Snapshot()); err != nil {
			t.Fatal(err)
		}
		applyStream(t, c, cmds[150:], 151)
		if !bytes.Equal(a.Snapshot(), c.Snapshot()) {
			t.Fatalf("seed %d: snapshots differ", seed)
		}
		if err := a.Check(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, p := range a.Progresses() {
			if len(p.Gaps) > 0 {
				withGaps++
			}
			if p.WatermarkSeq < p.AckedThrough() {
				t.Fatalf("seed %d: %s: watermark %d behind acked-through %d", seed, p.Edge, p.WatermarkSeq, p.AckedThrough())
			}
		}
	}
	if withGaps == 0 {
		t.Fatal("the random streams recorded no gaps")
	}
}

func TestDecodeCommand_RecordGapBounds(t *testing.T) {
	good := EncodeCommand(RecordGap{Edge: "pi-1", Gaps: []GapRange{known(gap(1, 2, GapDropped), 1, 2, 3, 4)}})
	cases := map[string][]byte{
		"huge count": {CommandVersion, byte(KindRecordGap), 1, 'e', 0xff, 0xff, 0xff, 0xff, 0x0f},
		"truncated":  good[:len(good)-1],
		"trailing":   append(slices.Clone(good), 0),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeCommand(b); err == nil {
				t.Fatal("decoded")
			}
		})
	}
	c, err := DecodeCommand(good)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(EncodeCommand(c), good) {
		t.Fatal("round trip differs")
	}
	// The existing kinds keep their numbers.
	if KindSetConfig != 8 || KindRecordGap != 9 || GapBacklogOverflow != 1 || GapDropped != 2 || GapMissing != 3 {
		t.Fatal("numbers changed")
	}
}
