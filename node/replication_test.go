package node_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
)

// writeSegments writes batches of fresh points until the node has sealed
// at least segs WAL segments, and returns the number of points written.
// Timestamps start at from and advance by one millisecond per point.
func writeSegments(t *testing.T, n *node.Node, from int64, segs int) (points int64, next int64) {
	t.Helper()
	next = from
	for i := 0; sealedCount(n.WALSegments()) < segs; i++ {
		if i > 10_000 {
			t.Fatalf("no %d sealed segments after %d writes", segs, i)
		}
		ts := make([]int64, 200)
		vs := make([]float64, 200)
		for k := range ts {
			ts[k], vs[k] = next, float64(next%977)*1.37
			next++
		}
		res, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "m", "series", fmt.Sprint(i%3)), Ts: ts, Vs: vs}})
		if err != nil || res.Accepted != int64(len(ts)) {
			t.Fatalf("write %d: %+v, %v", i, res, err)
		}
		points += res.Accepted
	}
	return points, next
}

func sealedCount(segs []wal.SegmentInfo) int {
	c := 0
	for _, s := range segs {
		if s.Sealed {
			c++
		}
	}
	return c
}

func storedPoints(t *testing.T, n *node.Node, start, end int64) int {
	t.Helper()
	total := 0
	for _, s := range query(t, n, model.Query{Matchers: sel(t, `m`), Start: start, End: end, Mode: model.ModeRaw}) {
		total += len(s.Ts)
	}
	return total
}

func TestWALRetention_KeepsFlushedSegmentsUntilReleased(t *testing.T) {
	var keepFrom atomic.Uint64 // 0: keep every segment
	o := testOptions(t, t.TempDir())
	o.WALSegmentBytes = 4096
	o.WALRetention = keepFrom.Load
	n := mustOpen(t, o)
	defer n.Close()
	start := o.Now().UnixMilli() - 3_600_000
	writeSegments(t, n, start, 5)
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	segs := n.WALSegments()
	if segs[0].Seq != 1 || sealedCount(segs) < 5 {
		t.Fatalf("after a flush with nothing released, segments are %+v; want every sealed one from 1 on", segs)
	}
	for _, s := range segs {
		if !s.Sealed {
			continue
		}
		b, info, err := n.ReadWALSegment(s.Seq)
		if err != nil || int64(len(b)) != s.Bytes || info.CRC != s.CRC || info.NodeID != n.NodeID() {
			t.Fatalf("ReadWALSegment(%d) = %d bytes, %+v, %v; listed as %+v", s.Seq, len(b), info, err, s)
		}
	}

	release := segs[3].Seq
	keepFrom.Store(release)
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	after := n.WALSegments()
	if after[0].Seq != release {
		t.Fatalf("released below %d, the oldest segment left is %d", release, after[0].Seq)
	}
	if _, _, err := n.ReadWALSegment(segs[0].Seq); err == nil {
		t.Fatalf("released segment %d can still be read", segs[0].Seq)
	}
}

func TestWALRetention_NilKeepsRemovingFlushedSegments(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.WALSegmentBytes = 4096
	n := mustOpen(t, o)
	defer n.Close()
	writeSegments(t, n, o.Now().UnixMilli()-3_600_000, 3)
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	if segs := n.WALSegments(); len(segs) != 1 || segs[0].Sealed {
		t.Fatalf("without a retention hook a flush leaves only the open segment; got %+v", segs)
	}
}

// TestReplay_SkipsFlushedSegmentsKeptForShipping: segments kept on disk for
// the replicator are not applied again at the next start, while a crash
// still replays the segments that were not flushed.
func TestReplay_SkipsFlushedSegmentsKeptForShipping(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewCrashFS()
	opts := func() node.Options {
		o := testOptions(t, dir)
		o.WALFS = fs
		o.WALSegmentBytes = 4096
		o.WALRetention = func() uint64 { return 0 } // keep everything, as before any ack
		o.HeadChunkSamples = 1 << 16                // no chunk closes, so nothing flushes before Close
		return o
	}
	n := mustOpen(t, opts())
	start := opts().Now().UnixMilli() - 3_600_000
	flushed, next := writeSegments(t, n, start, 4)
	if err := n.Close(); err != nil { // flushes the head and seals the open segment
		t.Fatal(err)
	}

	n = mustOpen(t, opts())
	if sealedCount(n.WALSegments()) < 4 {
		t.Fatalf("segments kept for shipping are gone after a restart: %+v", n.WALSegments())
	}
	if st := n.Status(); st.HeadSamples != 0 {
		t.Fatalf("restart replayed %d samples of segments already flushed", st.HeadSamples)
	}
	if got := storedPoints(t, n, start, next); got != int(flushed) {
		t.Fatalf("%d points after restart, want %d", got, flushed)
	}

	// Unflushed points written now live only in the WAL; a power cut must
	// not lose them, and the restart replays exactly them.
	unflushed, next2 := writeSegments(t, n, next, sealedCount(n.WALSegments())+2)
	fs = fs.Crash()
	n.CrashForTest()

	n = mustOpen(t, opts())
	defer n.Close()
	if st := n.Status(); st.HeadSamples != unflushed {
		t.Fatalf("after a crash the restart put %d samples in the head, want the %d unflushed ones", st.HeadSamples, unflushed)
	}
	if got := storedPoints(t, n, start, next2); got != int(flushed+unflushed) {
		t.Fatalf("%d points after the crash, want %d", got, flushed+unflushed)
	}
}

// TestReplay_ReplacedWALIsReplayedInFull: when the WAL directory is lost
// and sequence numbers start again at 1, the store's flushed-through record
// must not hide the new segments from replay.
func TestReplay_ReplacedWALIsReplayedInFull(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewCrashFS()
	opts := func() node.Options {
		o := testOptions(t, dir)
		o.WALFS = fs
		o.WALSegmentBytes = 4096
		return o
	}
	n := mustOpen(t, opts())
	start := opts().Now().UnixMilli() - 3_600_000
	first, next := writeSegments(t, n, start, 4)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	fs = vfs.NewCrashFS() // the WAL directory is gone; the store is not
	n = mustOpen(t, opts())
	if segs := n.WALSegments(); segs[0].Seq != 1 {
		t.Fatalf("new WAL starts at %d, want 1", segs[0].Seq)
	}
	second, next2 := writeSegments(t, n, next, 1)
	fs = fs.Crash()
	n.CrashForTest()

	n = mustOpen(t, opts())
	defer n.Close()
	if got := storedPoints(t, n, start, next2); got != int(first+second) {
		t.Fatalf("%d points after the crash, want %d (%d written into the new WAL)", got, first+second, second)
	}
}

func TestWriteGate_RefusesWholeWrites(t *testing.T) {
	gateErr := fmt.Errorf("backlog full: %w", model.ErrOverloaded)
	var closed atomic.Bool
	o := testOptions(t, t.TempDir())
	o.WriteGate = func() error {
		if closed.Load() {
			return gateErr
		}
		return nil
	}
	n := mustOpen(t, o)
	defer n.Close()
	now := o.Now().UnixMilli()
	write := func(ts int64) (model.WriteResult, error) {
		return n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "m"), Ts: []int64{ts}, Vs: []float64{1}}})
	}
	closed.Store(true)
	if res, err := write(now - 1); !errors.Is(err, model.ErrOverloaded) || res.Accepted != 0 {
		t.Fatalf("write through a closed gate: %+v, %v", res, err)
	}
	closed.Store(false)
	if res, err := write(now); err != nil || res.Accepted != 1 {
		t.Fatalf("write through an open gate: %+v, %v", res, err)
	}
	if got := storedPoints(t, n, now-10, now); got != 1 {
		t.Fatalf("%d points stored, want only the one written through the open gate", got)
	}
}

// An edge whose writes stop must still seal (and so ship) its last
// segment once it is WALSegmentAge old.
func TestWAL_IdleSegmentIsSealedByAge(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.FlushInterval = 10 * time.Millisecond
	o.WALSegmentAge = 50 * time.Millisecond
	n := mustOpen(t, o)
	defer n.Close()
	ts := base.Add(39 * 24 * time.Hour).UnixMilli()
	if res, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "m"), Ts: []int64{ts}, Vs: []float64{1}}}); err != nil || res.Accepted != 1 {
		t.Fatalf("write: %+v, %v", res, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for sealedCount(n.WALSegments()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the segment holding the only write was not sealed 20 s after it aged: %+v", n.WALSegments())
		}
		time.Sleep(10 * time.Millisecond)
	}
	segs := n.WALSegments()
	if got := segs[0]; !got.Sealed || got.Points != 1 {
		t.Fatalf("sealed segment %+v, want one point", got)
	}
}

// TestExportRange_ReadsEverySeriesRawPoints: every series' points within
// the range, head and flushed alike, in label order; a range end before
// its start is a bad query; an error from fn stops it.
func TestExportRange_ReadsEverySeriesRawPoints(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.WALSegmentBytes = 4096
	n := mustOpen(t, o)
	defer n.Close()
	start := o.Now().UnixMilli() - 3_600_000
	_, next := writeSegments(t, n, start, 3)
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	// More in the head, and another metric.
	res, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "other"), Ts: []int64{next, next + 1}, Vs: []float64{1, 2}}})
	if err != nil || res.Accepted != 2 {
		t.Fatalf("write: %+v, %v", res, err)
	}
	lo, hi := start+100, next
	var got int
	var seen []string
	err = n.ExportRange(context.Background(), lo, hi, func(ls labels.Labels, ts []int64, vs []float64) error {
		seen = append(seen, ls.String())
		if len(ts) != len(vs) || !slices.IsSorted(ts) || ts[0] < lo || ts[len(ts)-1] > hi {
			t.Errorf("%s: %d timestamps, %d values, from %d to %d", ls, len(ts), len(vs), ts[0], ts[len(ts)-1])
		}
		got += len(ts)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := storedPoints(t, n, lo, hi) + 1 // the other metric's point at next
	if got != want || len(seen) != 4 {
		t.Fatalf("exported %d points of %v; want %d points of 4 series", got, seen, want)
	}
	stop := errors.New("stop")
	calls := 0
	if err := n.ExportRange(context.Background(), lo, hi, func(labels.Labels, []int64, []float64) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("ExportRange with fn failing = %v after %d calls", err, calls)
	}
	if err := n.ExportRange(context.Background(), hi, lo, func(labels.Labels, []int64, []float64) error { return nil }); !errors.Is(err, model.ErrBadQuery) {
		t.Fatalf("ExportRange(end before start) = %v", err)
	}
}

// TestExportRangeMatching_ReadsOnlyTheSelectedSeries: only series every
// matcher selects are exported, with the same points ExportRange gives
// them; matchers that select nothing by themselves are a bad query.
func TestExportRangeMatching_ReadsOnlyTheSelectedSeries(t *testing.T) {
	o := testOptions(t, t.TempDir())
	n := mustOpen(t, o)
	defer n.Close()
	start := o.Now().UnixMilli() - 3_600_000
	var batches []model.Batch
	for i, e := range []string{"e1", "e2", "e1", "e2"} {
		batches = append(batches, model.Batch{Labels: lbl("__name__", fmt.Sprintf("m%d", i/2), "__edge__", e),
			Ts: []int64{start + int64(i), start + 100 + int64(i), start + 50}, Vs: []float64{1, 2, float64(i)}})
	}
	if _, err := n.Write(context.Background(), batches); err != nil {
		t.Fatal(err)
	}
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	// One more point in the head, which must merge with the stored ones.
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "m1", "__edge__", "e1"), Ts: []int64{start + 60}, Vs: []float64{9}}}); err != nil {
		t.Fatal(err)
	}
	export := func(ms []*labels.Matcher) (map[string][]int64, error) {
		got := map[string][]int64{}
		err := n.ExportRangeMatching(context.Background(), ms, start, start+60, func(ls labels.Labels, ts []int64, _ []float64) error {
			got[ls.String()] = slices.Clone(ts)
			return nil
		})
		return got, err
	}
	e1, _ := labels.NewMatcher(labels.MatchEqual, "__edge__", "e1")
	got, err := export([]*labels.Matcher{e1})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int64{
		`m0{__edge__="e1"}`: {start, start + 50},
		`m1{__edge__="e1"}`: {start + 2, start + 50, start + 60},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("export of e1 = %v\nwant %v", got, want)
	}
	empty, _ := labels.NewMatcher(labels.MatchRegexp, "__edge__", ".*")
	if _, err := export([]*labels.Matcher{empty}); !errors.Is(err, model.ErrBadQuery) {
		t.Fatalf("export with only an empty-matching matcher = %v, want ErrBadQuery", err)
	}
	if _, err := export([]*labels.Matcher{e1, nil}); !errors.Is(err, model.ErrBadQuery) {
		t.Fatalf("export with a nil matcher = %v, want ErrBadQuery", err)
	}
}
