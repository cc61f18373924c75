package replicator

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/replicator/internal/cursor"
	"github.com/tributarydb/tributary/replicator/internal/segsum"
)

// TestJudge: a missing gap is recoverable only with a known count and
// span, and only when the store holds its points: below WALReplayFrom,
// or listed by the node in this process in full.
func TestJudge(t *testing.T) {
	l := &loop{replayFrom: 10, log: slog.New(slog.DiscardHandler)}
	l.listed.Add(20, 30)
	known := func(after, through uint64) cursor.Gap {
		return cursor.Gap{After: after, Through: through, Reason: cursor.ReasonMissing, Points: 5, MinT: 1, MaxT: 2}
	}
	for _, tc := range []struct {
		name        string
		g           cursor.Gap
		recoverable bool
	}{
		{"flushed before the node opened", known(5, 9), true},
		{"reaches the replay start", known(5, 10), false},
		{"not flushed, never listed", known(10, 12), false},
		{"listed in full", known(19, 30), true},
		{"listed in part", known(19, 31), false},
		{"listed from the middle", known(18, 30), false},
		{"count unknown", cursor.Gap{After: 5, Through: 9, Reason: cursor.ReasonMissing, Points: -1, MinT: 1, MaxT: 2}, false},
		{"span unknown", cursor.Gap{After: 5, Through: 9, Reason: cursor.ReasonMissing, Points: 5}, false},
		{"no points", cursor.Gap{After: 5, Through: 9, Reason: cursor.ReasonMissing, Points: 0}, true},
	} {
		g := tc.g
		l.judge(&g)
		if g.Unrecoverable == tc.recoverable {
			t.Errorf("%s: gap %+v judged unrecoverable=%v", tc.name, tc.g, g.Unrecoverable)
		}
	}
}

// TestJudgeCursorGaps: gaps an earlier process recorded are judged again
// against this process's store; what is judged unrecoverable stays so.
func TestJudgeCursorGaps(t *testing.T) {
	l := &loop{replayFrom: 10, log: slog.New(slog.DiscardHandler)}
	l.cur.Gaps = []cursor.Gap{
		{After: 1, Through: 3, Reason: cursor.ReasonMissing, Points: 5, MinT: 1, MaxT: 2, Reported: true},  // flushed: stays
		{After: 3, Through: 4, Reason: cursor.ReasonBacklogOverflow, Points: 5, MinT: 1, MaxT: 2},          // not missing
		{After: 9, Through: 12, Reason: cursor.ReasonMissing, Points: 5, MinT: 3, MaxT: 4, Reported: true}, // head died
		{After: 12, Through: 14, Reason: cursor.ReasonMissing, Points: 5, MinT: 3, MaxT: 4, Backfilled: true},
	}
	l.judgeCursorGaps()
	got := []bool{l.cur.Gaps[0].Unrecoverable, l.cur.Gaps[1].Unrecoverable, l.cur.Gaps[2].Unrecoverable, l.cur.Gaps[3].Unrecoverable}
	if got[0] || got[1] || !got[2] || got[3] || !l.dirty {
		t.Fatalf("unrecoverable flags %v, dirty %v; want [false false true false], dirty", got, l.dirty)
	}
	if !l.cur.Gaps[0].NeedsBackfill() || l.cur.Gaps[2].NeedsBackfill() {
		t.Fatalf("NeedsBackfill: %v %v", l.cur.Gaps[0].NeedsBackfill(), l.cur.Gaps[2].NeedsBackfill())
	}
}

// TestMissingGap_CountsFromSummaries: a hole of segments the node no
// longer lists takes its count and span from their summaries when they
// chain over it exactly; otherwise both are unknown and it is
// unrecoverable.
func TestMissingGap_CountsFromSummaries(t *testing.T) {
	f, _, err := segsum.Open(vfs.OS{}, filepath.Join(t.TempDir(), "sums"), "pi-7")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Add(
		segsum.Summary{Seq: 4, PrevSeq: 2, Points: 100, MinT: 1000, MaxT: 2000},
		segsum.Summary{Seq: 5, PrevSeq: 4, Points: 0},
		segsum.Summary{Seq: 7, PrevSeq: 5, Points: 30, MinT: 900, MaxT: 2500},
	); err != nil {
		t.Fatal(err)
	}
	l := &loop{replayFrom: 100, sums: f, log: slog.New(slog.DiscardHandler)}
	g := l.missingGap(2, 7)
	want := cursor.Gap{After: 2, Through: 7, Reason: cursor.ReasonMissing, Segments: 3, Points: 130, MinT: 900, MaxT: 2500}
	if g != want {
		t.Fatalf("missingGap(2, 7) = %+v\nwant %+v", g, want)
	}
	for _, r := range [][2]uint64{{1, 7}, {2, 6}, {3, 7}} {
		if g := l.missingGap(r[0], r[1]); g.Points != -1 || g.Segments != 0 || g.SpanKnown() || !g.Unrecoverable {
			t.Errorf("missingGap(%d, %d) = %+v; want unknown and unrecoverable", r[0], r[1], g)
		}
	}
	l.replayFrom = 7 // the last one was not flushed before the node opened
	if g := l.missingGap(2, 7); !g.Unrecoverable || g.Points != 130 {
		t.Fatalf("missingGap(2, 7) above the replay start = %+v; want its count, unrecoverable", g)
	}
}
