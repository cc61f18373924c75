package replicator

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
	"github.com/tributarydb/tributary/replicator/internal/segsum"
)

// storeSource is a Source whose store holds one series' timestamps.
type storeSource struct {
	segs []wal.SegmentInfo
	ts   []int64 // sorted
	raw  time.Duration
}

func (f *storeSource) NodeID() string                 { return "pi-7" }
func (f *storeSource) WALSegments() []wal.SegmentInfo { return f.segs }
func (f *storeSource) WALReplayFrom() uint64          { return 0 }
func (f *storeSource) ReadWALSegment(uint64) ([]byte, wal.SegmentInfo, error) {
	return nil, wal.SegmentInfo{}, wal.ErrCorrupt
}
func (f *storeSource) Retention() (time.Duration, time.Duration, time.Duration) {
	return f.raw, f.raw, f.raw
}
func (f *storeSource) ExportRange(_ context.Context, minT, maxT int64, fn func(labels.Labels, []int64, []float64) error) error {
	var ts []int64
	for _, t := range f.ts {
		if t >= minT && t <= maxT {
			ts = append(ts, t)
		}
	}
	return fn(labels.FromStrings("__name__", "temp"), ts, make([]float64, len(ts)))
}

// TestWALChain: the WAL serves a run only when sealed files on disk chain
// over its numbers exactly.
func TestWALChain(t *testing.T) {
	src := &storeSource{segs: []wal.SegmentInfo{
		{Seq: 1, PrevSeq: 0, Sealed: true}, {Seq: 2, PrevSeq: 1, Sealed: true},
		{Seq: 4, PrevSeq: 2, Sealed: true}, // 3 skipped: an empty segment removed
		{Seq: 5, PrevSeq: 4},               // open
	}}
	l := &loop{src: src}
	for _, tc := range []struct {
		first, last uint64
		want        []uint64
	}{
		{1, 2, []uint64{1, 2}},
		{2, 4, []uint64{2, 4}},
		{3, 4, []uint64{4}}, // segment 4 covers 3..4
		{4, 4, nil},         // ... not 4 alone
		{1, 3, nil},         // no file ends at 3
		{1, 5, nil},         // 5 is not sealed
		{6, 6, nil},
	} {
		var got []uint64
		for _, s := range l.walChain(tc.first, tc.last) {
			got = append(got, s.Seq)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("walChain(%d, %d) = %v, want %v", tc.first, tc.last, got, tc.want)
		}
	}
}

// TestStoreLacks: a run is rebuilt from the store only when the store
// holds all of it: flushed or listed, after the retention horizon, and
// not short of what the segment summaries say.
func TestStoreLacks(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	sums, _, err := segsum.Open(vfs.OS{}, filepath.Join(t.TempDir(), "sums"), "pi-7")
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	if err := sums.Add(
		segsum.Summary{Seq: 31, PrevSeq: 30, Points: 3, MinT: 9_000_000, MaxT: 9_000_300},
		segsum.Summary{Seq: 32, PrevSeq: 31, Points: 0},
		segsum.Summary{Seq: 33, PrevSeq: 32, Points: 2, MinT: 9_000_200, MaxT: 9_000_400},
	); err != nil {
		t.Fatal(err)
	}
	src := &storeSource{raw: time.Hour}
	l := &loop{src: src, replayFrom: 20, sums: sums, ctx: context.Background(), log: slog.New(slog.DiscardHandler),
		o: &Options{Now: func() time.Time { return now }}}
	l.listed.Add(20, 40)
	horizon := now.Add(-time.Hour).UnixMilli()
	for _, tc := range []struct {
		name        string
		first, last uint64
		minT, maxT  int64
		ts          []int64
		want        string // in the reason; "" for none
	}{
		{"flushed before the node opened", 5, 19, horizon, horizon + 10, nil, ""},
		{"listed in this process", 26, 30, horizon, horizon + 10, nil, ""},
		{"flushed, then listed", 10, 40, horizon, horizon + 10, nil, ""},
		{"lost before it was flushed", 41, 45, horizon, horizon + 10, nil, "flushed"},
		{"starts before the retention horizon", 5, 19, horizon - 1, horizon + 10, nil, "retention"},
		{"empty segments have no span to keep", 5, 19, 0, 0, nil, ""},
		{"no span", 5, 19, 10, 9, nil, "no time span"},
		{"store as full as the summaries", 31, 33, 9_000_000, 9_000_400, []int64{9_000_000, 9_000_100, 9_000_300, 9_000_350, 9_000_400}, ""},
		{"store short of a segment", 31, 33, 9_000_000, 9_000_400, []int64{9_000_000, 9_000_100, 9_000_350, 9_000_400}, "segment 31 held 3 points"},
		{"summaries not chaining over the run", 30, 33, 9_000_000, 9_000_400, nil, ""},
	} {
		src.ts = tc.ts
		got := l.storeLacks(tc.first, tc.last, tc.minT, tc.maxT)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: storeLacks(%d, %d, %d, %d) = %q; want %q", tc.name, tc.first, tc.last, tc.minT, tc.maxT, got, tc.want)
		}
	}
	// A Source that does not say how long it keeps raw points cannot
	// vouch for a span (empty spans aside).
	l.src = struct{ Source }{src}
	if got := l.storeLacks(5, 19, horizon, horizon+10); !strings.Contains(got, "does not report") {
		t.Errorf("storeLacks from a Source without retention = %q", got)
	}
	if got := l.storeLacks(5, 19, 0, 0); got != "" {
		t.Errorf("storeLacks of empty segments from a Source without retention = %q", got)
	}
}
