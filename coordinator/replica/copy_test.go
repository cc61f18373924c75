package replica

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
)

// oracle is the naive model of an edge's data: series → timestamp → the
// last value written.
type oracle map[string]map[int64]float64

// writeEdge writes random points of edge straight into s's engine (with
// the edge label, as Apply would): nSeries series over span before
// testNow, in several writes, with duplicate timestamps (other values,
// also inside one write) and points out of order; the first half of the
// writes is flushed to the store, the rest stays in the head. It adds
// what it wrote to o.
func writeEdge(t testing.TB, s *Store, o oracle, edge string, rng *rand.Rand, nSeries, writes, perWrite int, span time.Duration) {
	t.Helper()
	end := testNow.UnixMilli()
	for w := range writes {
		var batches []model.Batch
		for i := range nSeries {
			ls := lbl("__name__", fmt.Sprintf("m%d", i%3), "k", fmt.Sprint(i), EdgeLabel, edge)
			key := labels.Labels(ls[:2]).String()
			if o[key] == nil {
				o[key] = map[int64]float64{}
			}
			b := model.Batch{Labels: ls}
			for range perWrite {
				ts := end - rng.Int64N(span.Milliseconds())
				if rng.IntN(8) == 0 && len(b.Ts) > 0 {
					ts = b.Ts[rng.IntN(len(b.Ts))] // a duplicate in the same write
				}
				v := float64(rng.IntN(1000)) / 4
				b.Ts, b.Vs = append(b.Ts, ts), append(b.Vs, v)
				o[key][ts] = v
			}
			batches = append(batches, b)
		}
		res, err := s.eng.Write(context.Background(), batches)
		if err != nil || res.Rejected != 0 {
			t.Fatalf("write: %+v, %v", res, err)
		}
		if w == writes/2 {
			if err := s.eng.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// answer is the raw query answer of s for edge over [minT, maxT], as
// series → points.
func answer(t *testing.T, s interface {
	Query(context.Context, []string, model.Query, func(string, model.Series) error) (model.QueryInfo, error)
}, edge string, minT, maxT int64) map[string][][2]float64 {
	t.Helper()
	out := map[string][][2]float64{}
	res, _ := queryAll(t, s, []string{edge}, model.Query{Matchers: sel(t, `{__name__=~".+"}`), Start: minT, End: maxT, Mode: model.ModeRaw})
	for _, r := range res {
		var pts [][2]float64
		for i, ts := range r.s.Ts {
			pts = append(pts, [2]float64{float64(ts), r.s.Vs[i]})
		}
		out[r.s.Labels.String()] = pts
	}
	return out
}

// oracleAnswer is what the oracle says a raw query over [minT, maxT]
// answers.
func (o oracle) answer(minT, maxT int64) map[string][][2]float64 {
	out := map[string][][2]float64{}
	for k, m := range o {
		var pts [][2]float64
		for ts, v := range m {
			if ts >= minT && ts <= maxT {
				pts = append(pts, [2]float64{float64(ts), v})
			}
		}
		slices.SortFunc(pts, func(a, b [2]float64) int { return int(a[0] - b[0]) })
		if len(pts) > 0 {
			out[k] = pts
		}
	}
	return out
}

func sameAnswer(a, b map[string][][2]float64) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d series, want %d", len(a), len(b))
	}
	for k, pa := range a {
		pb, ok := b[k]
		if !ok {
			return fmt.Errorf("series %s missing", k)
		}
		if !slices.Equal(pa, pb) {
			return fmt.Errorf("series %s: %d points, want %d (first difference near %v)", k, len(pa), len(pb), firstDiff(pa, pb))
		}
	}
	return nil
}

func firstDiff(a, b [][2]float64) any {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return [2]any{a[i], b[i]}
		}
	}
	return "the end"
}

// exportAll exports [minT, maxT] of edge from src and returns the files.
func exportAll(t *testing.T, src ExportSource, edge string, minT, maxT int64, first, last uint64, fileBytes int64) []ExportedFile {
	t.Helper()
	var files []ExportedFile
	err := src.Export(context.Background(), edge, minT, maxT, first, last, fileBytes, func(f ExportedFile) error {
		files = append(files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestExport_ApplyCopyRoundTripEqualsTheSourceAnswer: exporting a time
// range of an edge and applying every file to another store gives, for
// that edge and range, exactly the source's raw answer, which is the
// naive oracle's; other edges and points outside the range are not
// copied; the files respect the size limit and name the range.
func TestExport_ApplyCopyRoundTripEqualsTheSourceAnswer(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			src := openStore(t, t.TempDir())
			defer src.Close()
			o := oracle{}
			writeEdge(t, src, o, "e", rng, 20, 6, 400, 48*time.Hour)
			writeEdge(t, src, oracle{}, "other", rng, 5, 2, 100, 48*time.Hour)
			minT, maxT := testNow.Add(-40*time.Hour).UnixMilli(), testNow.Add(-2*time.Hour).UnixMilli()
			want := o.answer(minT, maxT)
			if err := sameAnswer(answer(t, src, "e", minT, maxT), want); err != nil {
				t.Fatalf("the source does not answer what the oracle says: %v", err)
			}

			fileBytes := int64(MinExportFileBytes)
			files := exportAll(t, src, "e", minT, maxT, 5, 9, fileBytes)
			if len(files) < 2 {
				t.Fatalf("%d files; the test wants several", len(files))
			}
			dst := openStore(t, t.TempDir())
			defer dst.Close()
			var points int64
			for _, f := range files {
				if int64(len(f.Data)) > fileBytes || f.Info.Seq != 9 || f.Info.PrevSeq != 4 || f.Info.NodeID != "e" || f.Info.MinT < minT || f.Info.MaxT > maxT {
					t.Fatalf("file %+v (%d bytes)", f.Info, len(f.Data))
				}
				a, err := dst.ApplyCopy(context.Background(), "e", 5, 9, f.Data)
				if err != nil {
					t.Fatal(err)
				}
				if a.Duplicate || a.Rejected != 0 || a.Points != f.Info.Points {
					t.Fatalf("applied %+v of a file of %d points", a, f.Info.Points)
				}
				points += a.Points
			}
			if err := sameAnswer(answer(t, dst, "e", minT-1e9, maxT+1e9), want); err != nil {
				t.Fatalf("the copy differs from the source: %v", err)
			}
			var n int64
			for _, pts := range want {
				n += int64(len(pts))
			}
			if points != n {
				t.Fatalf("copied %d points, the range holds %d", points, n)
			}
			if got := answer(t, dst, "other", 0, testNow.UnixMilli()); len(got) != 0 {
				t.Fatalf("another edge's series were copied: %v", len(got))
			}
			// Same data, same arguments: same bytes.
			again := exportAll(t, src, "e", minT, maxT, 5, 9, fileBytes)
			if len(again) != len(files) || string(again[0].Data) != string(files[0].Data) {
				t.Fatal("exporting twice gave other files")
			}
		})
	}
}

// TestApplyCopy_DamagedFileStoresNothing: a file that does not verify,
// or that names another edge or range, is ErrInvalidSegment and writes
// nothing.
func TestApplyCopy_DamagedFileStoresNothing(t *testing.T) {
	src := openStore(t, t.TempDir())
	defer src.Close()
	writeEdge(t, src, oracle{}, "e", rand.New(rand.NewPCG(1, 1)), 5, 2, 200, 10*time.Hour)
	f := exportAll(t, src, "e", 0, testNow.UnixMilli(), 3, 4, DefaultExportFileBytes)[0]
	dst := openStore(t, t.TempDir())
	defer dst.Close()
	flip := slices.Clone(f.Data)
	flip[len(flip)/2] ^= 0x10
	for name, c := range map[string]struct {
		edge        string
		first, last uint64
		file        []byte
	}{
		"bit flip":     {"e", 3, 4, flip},
		"truncated":    {"e", 3, 4, f.Data[:len(f.Data)-9]},
		"other edge":   {"f", 3, 4, f.Data},
		"other range":  {"e", 2, 4, f.Data},
		"other last":   {"e", 3, 5, f.Data},
		"empty":        {"e", 3, 4, nil},
		"zero first":   {"e", 0, 4, f.Data},
		"inverted":     {"e", 4, 3, f.Data},
		"edge with 0x": {"e\x00", 3, 4, f.Data},
	} {
		if _, err := dst.ApplyCopy(context.Background(), c.edge, c.first, c.last, c.file); !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("%s: %v, want ErrInvalidSegment", name, err)
		}
	}
	if st := dst.Stats(); st.Points != 0 || st.CopiesApplied != 0 || st.Invalid != 9 || st.Series != 0 {
		t.Fatalf("refused files changed the store: %+v", st)
	}
	if got := answer(t, dst, "e", 0, testNow.UnixMilli()); len(got) != 0 {
		t.Fatalf("refused files stored %d series", len(got))
	}
}

// TestApplyCopy_TwiceChangesNothing: applying the same files again gives
// the same answer; once the range is recorded, a file of it writes
// nothing (Duplicate), and recording it again changes nothing.
func TestApplyCopy_TwiceChangesNothing(t *testing.T) {
	src := openStore(t, t.TempDir())
	defer src.Close()
	writeEdge(t, src, oracle{}, "e", rand.New(rand.NewPCG(2, 2)), 8, 4, 300, 20*time.Hour)
	files := exportAll(t, src, "e", 0, testNow.UnixMilli(), 1, 7, MinExportFileBytes)
	dst := openStore(t, t.TempDir())
	defer dst.Close()
	apply := func() {
		for _, f := range files {
			if _, err := dst.ApplyCopy(context.Background(), "e", 1, 7, f.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply()
	first := answer(t, dst, "e", 0, testNow.UnixMilli())
	apply()
	if err := sameAnswer(answer(t, dst, "e", 0, testNow.UnixMilli()), first); err != nil {
		t.Fatalf("applying the copy twice changed the answer: %v", err)
	}
	if err := dst.RecordCopy("e", 1, 7); err != nil {
		t.Fatal(err)
	}
	before := dst.Stats()
	a, err := dst.ApplyCopy(context.Background(), "e", 1, 7, files[0].Data)
	if err != nil || !a.Duplicate || a.Points != 0 {
		t.Fatalf("a file of a recorded range: %+v, %v; want a duplicate", a, err)
	}
	if err := dst.RecordCopy("e", 1, 7); err != nil {
		t.Fatal(err)
	}
	if after := dst.Stats(); after.Points != before.Points || after.Duplicates != before.Duplicates+1 {
		t.Fatalf("stats %+v after %+v", after, before)
	}
	if h, err := dst.Holdings("e"); err != nil || !slices.Equal(h, []SeqRange{{First: 1, Last: 7}}) {
		t.Fatalf("holdings %v, %v", h, err)
	}
}

// TestHoldings_MergesSegmentsAndCopiedRanges: applied segments cover
// prev+1..seq, entries without a prev seq their own seq; copied ranges
// join them; adjacent runs merge; another edge's entries do not count
// (not even one whose id extends this one's).
func TestHoldings_MergesSegmentsAndCopiedRanges(t *testing.T) {
	ts, vs := points(testNow, 10, func(i int) float64 { return float64(i) })
	segs := edgeSegments(t, "e", []model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts[:5], Vs: vs[:5]}},
		[]model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts[5:], Vs: vs[5:]}})
	s := openStore(t, t.TempDir())
	defer s.Close()
	for _, seg := range segs {
		mustApply(t, s, "e", seg)
	}
	// segs cover 1..segs[1].seq (the first has prev 0).
	top := segs[1].seq
	for _, r := range [][2]uint64{{top + 1, top + 3}, {top + 10, top + 12}, {top + 11, top + 20}} {
		if err := s.RecordCopy("e", r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	// An entry written before entries carried prev seq: its own seq only.
	if err := s.eng.PutReplicaMeta(indexKey("e", top+30), []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCopy("ee", 1, 1000); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCopy("e", top+1, top+2); err != nil { // a shorter range with the same first: ignored
		t.Fatal(err)
	}
	got, err := s.Holdings("e")
	if err != nil {
		t.Fatal(err)
	}
	want := []SeqRange{{First: 1, Last: top + 3}, {First: top + 10, Last: top + 20}, {First: top + 30, Last: top + 30}}
	if !slices.Equal(got, want) {
		t.Fatalf("holdings %v, want %v", got, want)
	}
	if h, err := s.Holdings("nobody"); err != nil || len(h) != 0 {
		t.Fatalf("holdings of an unknown edge: %v, %v", h, err)
	}
	if _, err := s.Holdings(""); !errors.Is(err, ErrInvalidSegment) {
		t.Fatalf("holdings of the empty edge id: %v", err)
	}
}

// TestForget_DropsTheEdgesIndexAndNothingElse: after Forget the edge holds
// nothing, its segments apply again as new, a copy of it starts over;
// other edges and the points stay.
func TestForget_DropsTheEdgesIndexAndNothingElse(t *testing.T) {
	ts, vs := points(testNow, 10, func(i int) float64 { return float64(i) })
	seg := edgeSegments(t, "e", []model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts, Vs: vs}})[0]
	s := openStore(t, t.TempDir())
	defer s.Close()
	mustApply(t, s, "e", seg)
	mustApply(t, s, "e2", rename(t, seg, "e2"))
	for _, e := range []string{"e", "e2"} {
		if err := s.RecordCopy(e, 100, 200); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.eng.PutReplicaMeta(edgeKey(cpyPrefix, "e", 300, 400), copyProgress{1, 2, 1, 1}.encode()); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget("e"); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.Holdings("e"); len(h) != 0 {
		t.Fatalf("forgotten edge still holds %v", h)
	}
	if _, ok, _ := s.eng.GetReplicaMeta(edgeKey(cpyPrefix, "e", 300, 400)); ok {
		t.Fatal("copy progress survived Forget")
	}
	if h, _ := s.Holdings("e2"); len(h) != 2 {
		t.Fatalf("the other edge holds %v after Forget of e", h)
	}
	if got := answer(t, s, "e", 0, testNow.UnixMilli()); len(got) != 1 {
		t.Fatalf("Forget dropped points: %d series left", len(got))
	}
	if a := mustApply(t, s, "e", seg); a.Duplicate {
		t.Fatal("a forgotten segment is still a duplicate")
	}
}

// rename rebuilds a segment under another node id.
func rename(t *testing.T, seg shipped, nodeID string) shipped {
	t.Helper()
	var recs []wal.Record
	info, err := wal.VerifySegment("", seg.file, func(r wal.Record) error {
		recs = append(recs, wal.Record{Data: slices.Clone(r.Data), MinT: r.MinT, MaxT: r.MaxT, Points: r.Points})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, oi, err := wal.EncodeSegment(nodeID, info.Seq, info.PrevSeq, recs)
	if err != nil {
		t.Fatal(err)
	}
	return shipped{seq: oi.Seq, crc: oi.CRC, file: out}
}

// windowSource wraps a source and records each Export call (a window of
// a Copy): its start and the bytes it gave. cancelAt > 0 cancels the
// Copy's context at the start of that call.
type windowSource struct {
	src      ExportSource
	cancelAt int
	cancel   context.CancelFunc
	failAt   int // > 0: that call fails after its first file

	mu     sync.Mutex
	starts []int64
	bytes  []int64
}

func (w *windowSource) Export(ctx context.Context, edge string, minT, maxT int64, first, last uint64, fileBytes int64, fn func(ExportedFile) error) error {
	w.mu.Lock()
	w.starts = append(w.starts, minT)
	call := len(w.starts)
	w.mu.Unlock()
	if call == w.cancelAt {
		w.cancel()
		return ctx.Err()
	}
	var b int64
	err := w.src.Export(ctx, edge, minT, maxT, first, last, fileBytes, func(f ExportedFile) error {
		if call == w.failAt && b > 0 {
			return errors.New("source went away")
		}
		b += int64(len(f.Data))
		return fn(f)
	})
	w.mu.Lock()
	w.bytes = append(w.bytes, b)
	w.mu.Unlock()
	return err
}

func sum(xs []int64) (n int64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// TestCopy_ResumesAfterTheLastCompletedWindow: a Copy cancelled at a
// window boundary leaves its progress; the next Copy of the range copies
// only the windows after it (the bytes add up to one uninterrupted
// copy's), and only then is the range held.
func TestCopy_ResumesAfterTheLastCompletedWindow(t *testing.T) {
	src := openStore(t, t.TempDir())
	defer src.Close()
	o := oracle{}
	writeEdge(t, src, o, "e", rand.New(rand.NewPCG(4, 4)), 10, 4, 300, 12*time.Hour)
	minT, maxT := testNow.Add(-12*time.Hour).UnixMilli(), testNow.UnixMilli()
	opts := CopyOptions{InitialWindow: time.Hour, MaxWindow: time.Hour, MaxFileBytes: MinExportFileBytes}

	// An uninterrupted copy, for the bytes of each window.
	full := &windowSource{src: src}
	ref := openStore(t, t.TempDir())
	defer ref.Close()
	st, err := ref.Copy(context.Background(), full, "e", 1, 50, minT, maxT, opts)
	if err != nil {
		t.Fatal(err)
	}
	windows := len(full.starts)
	if st.Windows != windows || windows != 13 || st.Bytes != sum(full.bytes) || st.Resumed {
		t.Fatalf("full copy: %+v over %d windows; want 13", st, windows)
	}

	dst := openStore(t, t.TempDir())
	defer dst.Close()
	ctx, cancel := context.WithCancel(context.Background())
	w := &windowSource{src: src, cancelAt: 7, cancel: cancel}
	st1, err := dst.Copy(ctx, w, "e", 1, 50, minT, maxT, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled copy: %v", err)
	}
	done := st1.Windows
	if done < 3 || done > 6 || st1.Bytes < sum(full.bytes[:done]) {
		t.Fatalf("cancelled copy: %+v; want 3 to 6 windows done", st1)
	}
	if h, _ := dst.Holdings("e"); len(h) != 0 {
		t.Fatalf("an unfinished copy is held: %v", h)
	}

	w2 := &windowSource{src: src}
	st2, err := dst.Copy(context.Background(), w2, "e", 1, 50, minT, maxT, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !st2.Resumed || st2.Windows != windows-done || w2.starts[0] != full.starts[done] || st2.FromMs != full.starts[done] {
		t.Fatalf("resumed copy: %+v starting at %v; want %d windows from %d", st2, w2.starts[:1], windows-done, full.starts[done])
	}
	if want := sum(full.bytes[done:]); st2.Bytes != want || sum(w2.bytes) != want {
		t.Fatalf("resumed copy moved %d bytes, want %d (the windows after %d)", st2.Bytes, want, done)
	}
	if err := sameAnswer(answer(t, dst, "e", minT, maxT), o.answer(minT, maxT)); err != nil {
		t.Fatalf("resumed copy: %v", err)
	}
	if h, _ := dst.Holdings("e"); !slices.Equal(h, []SeqRange{{First: 1, Last: 50}}) {
		t.Fatalf("holdings %v", h)
	}
	if _, ok, _ := dst.eng.GetReplicaMeta(edgeKey(cpyPrefix, "e", 1, 50)); ok {
		t.Fatal("progress entry left after the copy")
	}
	// Done: another Copy does nothing.
	st3, err := dst.Copy(context.Background(), &windowSource{src: src}, "e", 1, 50, minT, maxT, opts)
	if err != nil || !st3.AlreadyHeld || st3.Bytes != 0 {
		t.Fatalf("copy of a held range: %+v, %v", st3, err)
	}
}

// TestCopy_FailureMidWindowRecopiesThatWindow: a source failing inside a
// window leaves the progress before it; the next Copy copies that window
// again (its first file twice in all), and the result is exact.
func TestCopy_FailureMidWindowRecopiesThatWindow(t *testing.T) {
	src := openStore(t, t.TempDir())
	defer src.Close()
	o := oracle{}
	writeEdge(t, src, o, "e", rand.New(rand.NewPCG(5, 5)), 10, 4, 2000, 6*time.Hour)
	minT, maxT := testNow.Add(-6*time.Hour).UnixMilli(), testNow.UnixMilli()
	opts := CopyOptions{InitialWindow: time.Hour, MaxWindow: time.Hour, MaxFileBytes: MinExportFileBytes}
	dst := openStore(t, t.TempDir())
	defer dst.Close()
	w := &windowSource{src: src, failAt: 3}
	st, err := dst.Copy(context.Background(), w, "e", 1, 2, minT, maxT, opts)
	if err == nil || st.Windows != 2 {
		t.Fatalf("copy with a failing source: %+v, %v; want an error after 2 windows", st, err)
	}
	w2 := &windowSource{src: src}
	st2, err := dst.Copy(context.Background(), w2, "e", 1, 2, minT, maxT, opts)
	if err != nil || st2.Windows != 5 || w2.starts[0] != w.starts[2] {
		t.Fatalf("second copy: %+v, %v from %v; want 5 windows from window 3", st2, err, w2.starts)
	}
	if err := sameAnswer(answer(t, dst, "e", minT, maxT), o.answer(minT, maxT)); err != nil {
		t.Fatal(err)
	}
}

// TestCopy_SparseRangeTakesFewWindows: windows double while they hold
// little, so 30 sparse days are a handful of round trips, not 720.
func TestCopy_SparseRangeTakesFewWindows(t *testing.T) {
	src := openStore(t, t.TempDir())
	defer src.Close()
	o := oracle{}
	writeEdge(t, src, o, "e", rand.New(rand.NewPCG(6, 6)), 3, 2, 50, 29*24*time.Hour)
	minT, maxT := testNow.Add(-30*24*time.Hour).UnixMilli(), testNow.UnixMilli()
	dst := openStore(t, t.TempDir())
	defer dst.Close()
	w := &windowSource{src: src}
	st, err := dst.Copy(context.Background(), w, "e", 1, 9, minT, maxT, CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Windows > 12 || st.Windows != len(w.starts) {
		t.Fatalf("%d windows (%d exports) for a sparse 30 days", st.Windows, len(w.starts))
	}
	if err := sameAnswer(answer(t, dst, "e", minT, maxT), o.answer(minT, maxT)); err != nil {
		t.Fatal(err)
	}
}

// TestCopy_PacedToBytesPerSec: with a rate, the copy takes (bytes - one
// second's burst) / rate of (fake) time; without, none.
func TestCopy_PacedToBytesPerSec(t *testing.T) {
	for _, c := range []struct {
		name    string
		quarter bool // the rate is a quarter of the bytes a second
		want    time.Duration
	}{
		{"unlimited", false, 0},
		{"a quarter a second", true, 3 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The engines' goroutines live in the bubble: a write waits
				// on a sync.Cond its WAL syncer signals.
				src := openStore(t, t.TempDir())
				defer src.Close()
				dst := openStore(t, t.TempDir())
				defer dst.Close()
				writeEdge(t, src, oracle{}, "e", rand.New(rand.NewPCG(7, 7)), 10, 4, 1000, 6*time.Hour)
				minT, maxT := testNow.Add(-6*time.Hour).UnixMilli(), testNow.UnixMilli()
				var total int64
				for _, f := range exportAll(t, src, "e", minT, maxT, 1, 1, MinExportFileBytes) {
					total += int64(len(f.Data))
				}
				var rate int64
				if c.quarter {
					rate = total / 4
				}
				start := time.Now()
				st, err := dst.Copy(context.Background(), src, "e", 1, 1, minT, maxT,
					CopyOptions{BytesPerSec: rate, MaxFileBytes: MinExportFileBytes, InitialWindow: 7 * time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				took := time.Since(start)
				if st.Bytes != total || took < c.want*9/10 || took > c.want*11/10+50*time.Millisecond {
					t.Fatalf("copied %d of %d bytes in %s, want about %s", st.Bytes, total, took, c.want)
				}
			})
		})
	}
}

// TestCopy_SharedPacerPacesCopiesTogether: two copies running at once
// with one CopyPacer take together what their bytes at its rate take
// (less one second's burst), not what each alone would.
func TestCopy_SharedPacerPacesCopiesTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := openStore(t, t.TempDir())
		defer src.Close()
		dst := openStore(t, t.TempDir())
		defer dst.Close()
		minT, maxT := testNow.Add(-6*time.Hour).UnixMilli(), testNow.UnixMilli()
		var total int64
		for i, edge := range []string{"e", "f"} {
			writeEdge(t, src, oracle{}, edge, rand.New(rand.NewPCG(7, uint64(i))), 10, 4, 1000, 6*time.Hour)
			for _, f := range exportAll(t, src, edge, minT, maxT, 1, 1, MinExportFileBytes) {
				total += int64(len(f.Data))
			}
		}
		pacer := NewCopyPacer(total / 4)
		start := time.Now()
		var wg sync.WaitGroup
		var copied atomic.Int64
		for _, edge := range []string{"e", "f"} {
			wg.Go(func() {
				st, err := dst.Copy(context.Background(), src, edge, 1, 1, minT, maxT,
					CopyOptions{BytesPerSec: total, Pacer: pacer, MaxFileBytes: MinExportFileBytes, InitialWindow: 7 * time.Hour})
				if err != nil {
					t.Error(err)
				}
				copied.Add(st.Bytes)
			})
		}
		wg.Wait()
		took, want := time.Since(start), 3*time.Second
		if copied.Load() != total || took < want*9/10 || took > want*11/10+50*time.Millisecond {
			t.Fatalf("copied %d of %d bytes in %s, want about %s", copied.Load(), total, took, want)
		}
	})
}

// TestCopy_OneAtATimePerRange: a second Copy of a running range is
// refused; bad arguments are errors.
func TestCopy_OneAtATimePerRange(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	key := edgeKey(cpyPrefix, "e", 1, 2)
	if !s.startCopy(key) {
		t.Fatal("startCopy refused a first copy")
	}
	if _, err := s.Copy(context.Background(), s, "e", 1, 2, 0, 10, CopyOptions{}); !errors.Is(err, ErrCopyRunning) {
		t.Fatalf("second copy: %v, want ErrCopyRunning", err)
	}
	s.endCopy(key)
	for name, c := range map[string]struct {
		first, last uint64
		minT, maxT  int64
		o           CopyOptions
	}{
		"inverted seqs":  {2, 1, 0, 10, CopyOptions{}},
		"inverted times": {1, 2, 10, 0, CopyOptions{}},
		"all of time":    {1, 2, math.MinInt64, math.MaxInt64, CopyOptions{}},
		"tiny files":     {1, 2, 0, 10, CopyOptions{MaxFileBytes: 100}},
		"tiny window":    {1, 2, 0, 10, CopyOptions{InitialWindow: time.Second}},
		"negative rate":  {1, 2, 0, 10, CopyOptions{BytesPerSec: -1}},
	} {
		if _, err := s.Copy(context.Background(), s, "e", c.first, c.last, c.minT, c.maxT, c.o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCopy_WindowsStopAtTheEndOfTime: windows near the largest timestamp
// end at it instead of overflowing.
func TestCopy_WindowsStopAtTheEndOfTime(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	src := openStore(t, t.TempDir())
	defer src.Close()
	w := &windowSource{src: src}
	minT := int64(math.MaxInt64) - 5*time.Hour.Milliseconds()
	st, err := s.Copy(context.Background(), w, "e", 1, 2, minT, math.MaxInt64, CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// 1 h, 2 h, then the last 2 h: three windows, the last ending at the end.
	if st.Windows != 3 || len(w.starts) != 3 || w.starts[2] != minT+3*time.Hour.Milliseconds() {
		t.Fatalf("%+v, windows from %v", st, w.starts)
	}
	if h, _ := s.Holdings("e"); !slices.Equal(h, []SeqRange{{First: 1, Last: 2}}) {
		t.Fatalf("holdings %v", h)
	}
}
