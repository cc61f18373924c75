package wal

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tributarydb/tributary/internal/vfs"
)

var crashSeed = flag.Int64("wal.crashseed", 0, "seed for the crash test (0: from the clock)")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is a place to put a log: a real temporary directory or a CrashFS.
type env struct {
	name string
	fs   FS
	dir  string
	cfs  *vfs.CrashFS // nil for the real file system
}

func envs(t *testing.T) []env {
	return []env{
		{name: "os", fs: vfs.OS{}, dir: filepath.Join(t.TempDir(), "wal")},
		func() env {
			c := vfs.NewCrashFS()
			return env{name: "crashfs", fs: c, dir: "/data/wal", cfs: c}
		}(),
	}
}

func (e env) options(t testing.TB) Options {
	return Options{Dir: e.dir, NodeID: "node-a", FS: e.fs, Logger: testLogger(t)}
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testRecord returns record i: varying sizes, some without points.
func testRecord(i int) Record {
	data := fmt.Appendf(nil, "record-%06d:", i)
	data = append(data, bytes.Repeat([]byte{byte(i)}, i%97)...)
	return Record{Data: data, MinT: int64(i) * 1000, MaxT: int64(i)*1000 + int64(i%7), Points: int64(i % 3)}
}

type replayed struct {
	seq uint64
	rec Record
}

func replayAll(t testing.TB, l *Log, from uint64) []replayed {
	t.Helper()
	var out []replayed
	err := l.Replay(from, func(seq uint64, r Record) error {
		r.Data = bytes.Clone(r.Data)
		out = append(out, replayed{seq, r})
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(%d): %v", from, err)
	}
	return out
}

func records(rs []replayed) []Record {
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = r.rec
	}
	return out
}

func equalRecords(a, b []Record) bool {
	return slices.EqualFunc(a, b, func(x, y Record) bool {
		return bytes.Equal(x.Data, y.Data) && x.MinT == y.MinT && x.MaxT == y.MaxT && x.Points == y.Points
	})
}

func mustOpen(t testing.TB, opts Options) *Log {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func mustClose(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// appendSynced appends records [from, to) with MaybeCut before each and
// syncs them.
func appendSynced(t testing.TB, l *Log, from, to int) []Record {
	t.Helper()
	var out []Record
	for i := from; i < to; i++ {
		if _, _, err := l.MaybeCut(); err != nil {
			t.Fatalf("MaybeCut: %v", err)
		}
		r := testRecord(i)
		pos, err := l.Append(r)
		if err != nil {
			t.Fatalf("Append(%d): %v", i, err)
		}
		if err := l.Sync(pos); err != nil {
			t.Fatalf("Sync(%v): %v", pos, err)
		}
		out = append(out, r)
	}
	return out
}

func segmentFiles(t testing.TB, e env) []string {
	t.Helper()
	names, err := e.fs.ReadDir(e.dir)
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, segmentSuffix) {
			out = append(out, n)
		}
	}
	return out
}

func readState(t testing.TB, e env) state {
	t.Helper()
	f, err := e.fs.OpenFile(filepath.Join(e.dir, stateName), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, stateBytes)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	st, reason := decodeState(b)
	if reason != "" {
		t.Fatalf("state file: %s", reason)
	}
	return st
}

func TestOptions_Validate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "defaults filled", opts: Options{Dir: "d", NodeID: "n"}},
		{name: "no dir", opts: Options{NodeID: "n"}, wantErr: "Dir is required"},
		{name: "no node id", opts: Options{Dir: "d"}, wantErr: "NodeID is required"},
		{name: "node id too long", opts: Options{Dir: "d", NodeID: strings.Repeat("x", 256)}, wantErr: "NodeID is 256 bytes"},
		{name: "node id at limit", opts: Options{Dir: "d", NodeID: strings.Repeat("x", 255)}},
		{name: "segment too small", opts: Options{Dir: "d", NodeID: "n", MaxSegmentBytes: 100}, wantErr: "MaxSegmentBytes 100"},
		{name: "negative age", opts: Options{Dir: "d", NodeID: "n", MaxSegmentAge: -time.Second}, wantErr: "MaxSegmentAge"},
		{name: "negative min points", opts: Options{Dir: "d", NodeID: "n", MinSegmentPoints: -1}, wantErr: "MinSegmentPoints -1"},
		{name: "min points too many", opts: Options{Dir: "d", NodeID: "n", MinSegmentPoints: MaxMinSegmentPoints + 1}, wantErr: "MinSegmentPoints"},
		{name: "negative interval", opts: Options{Dir: "d", NodeID: "n", Sync: SyncPolicy{Interval: -1}}, wantErr: "Sync.Interval"},
		{name: "all errors at once", opts: Options{MaxSegmentBytes: -1}, wantErr: "Dir is required; NodeID is required; MaxSegmentBytes -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			err := o.Validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if o.FS == nil || o.Logger == nil || o.MaxSegmentBytes == 0 || o.MaxSegmentAge == 0 {
				t.Fatalf("defaults not filled: %+v", o)
			}
		})
	}
}

func TestLog(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, e env)
	}{
		{"RoundTrip", func(t *testing.T, e env) {
			l := mustOpen(t, e.options(t))
			want := appendSynced(t, l, 0, 200)
			if got := records(replayAll(t, l, 0)); !equalRecords(got, want) {
				t.Fatalf("replay of the open log: %d records, want %d", len(got), len(want))
			}
			mustClose(t, l)
			l = mustOpen(t, e.options(t))
			defer mustClose(t, l)
			if got := records(replayAll(t, l, 0)); !equalRecords(got, want) {
				t.Fatalf("replay after reopen: %d records, want %d", len(got), len(want))
			}
			segs := l.Segments()
			if len(segs) != 2 || !segs[0].Sealed || segs[1].Sealed || segs[0].Records != 200 {
				t.Fatalf("segments = %+v", segs)
			}
			var points int64
			for _, r := range want {
				points += r.Points
			}
			if s := segs[0]; s.Points != points || s.MinT != 1000 || s.MaxT != 199*1000+199%7 || s.NodeID != "node-a" || s.CRC == 0 {
				t.Fatalf("sealed segment info = %+v (want %d points)", s, points)
			}
		}},
		{"CutBySize", func(t *testing.T, e env) {
			opts := e.options(t)
			opts.MaxSegmentBytes = MinSegmentBytes
			l := mustOpen(t, opts)
			want := appendSynced(t, l, 0, 100)
			if _, err := l.Cut(); err != nil {
				t.Fatal(err)
			}
			segs := l.Segments()
			if len(segs) < 5 {
				t.Fatalf("%d segments, want several", len(segs))
			}
			var got []Record
			for _, s := range segs[:len(segs)-1] {
				if !s.Sealed {
					t.Fatalf("segment %d not sealed after Cut", s.Seq)
				}
				// A segment exceeds the limit by at most its last record.
				if s.Bytes > opts.MaxSegmentBytes+frameSize(testRecord(96)) {
					t.Fatalf("segment %d has %d bytes, limit %d", s.Seq, s.Bytes, opts.MaxSegmentBytes)
				}
				info, err := ReadSegment(e.fs, s.Path, func(r Record) error {
					r.Data = bytes.Clone(r.Data)
					got = append(got, r)
					return nil
				})
				if err != nil {
					t.Fatalf("ReadSegment(%s): %v", s.Path, err)
				}
				if info != s {
					t.Fatalf("ReadSegment info = %+v, Segments says %+v", info, s)
				}
			}
			if !equalRecords(got, want) {
				t.Fatalf("sealed segments hold %d records, want %d", len(got), len(want))
			}
			mustClose(t, l)
		}},
		{"CutByAge", func(t *testing.T, e env) {
			synctest.Test(t, func(t *testing.T) {
				opts := e.options(t)
				opts.MaxSegmentAge = 5 * time.Second
				l := mustOpen(t, opts)
				defer mustClose(t, l)
				if _, cut, _ := l.MaybeCut(); cut {
					t.Fatal("cut an empty segment")
				}
				time.Sleep(time.Minute) // an idle segment does not age
				appendSynced(t, l, 0, 1)
				time.Sleep(4 * time.Second)
				if _, cut, _ := l.MaybeCut(); cut {
					t.Fatal("cut after 4s")
				}
				first := l.OpenSeq()
				time.Sleep(time.Second)
				seq, cut, err := l.MaybeCut()
				if err != nil || !cut || seq != first+1 {
					t.Fatalf("MaybeCut after 5s = %d, %v, %v; want %d, true", seq, cut, err, first+1)
				}
				if _, cut, _ := l.MaybeCut(); cut {
					t.Fatal("cut the new, empty segment")
				}
			})
		}},
		{"CutByAgeWaitsForMinPoints", func(t *testing.T, e env) {
			synctest.Test(t, func(t *testing.T) {
				opts := e.options(t)
				opts.MaxSegmentAge, opts.MinSegmentPoints = 5*time.Second, 3
				l := mustOpen(t, opts)
				defer mustClose(t, l)
				appendSynced(t, l, 1, 2) // 1 point
				time.Sleep(6 * time.Second)
				if _, cut, _ := l.MaybeCut(); cut {
					t.Fatal("cut an old segment of 1 point, minimum 3")
				}
				appendSynced(t, l, 2, 3) // 3 points
				if _, cut, _ := l.MaybeCut(); !cut {
					t.Fatal("did not cut an old segment that reached its minimum")
				}
				// A trickle ships at MinPointsWaitFactor × the age.
				appendSynced(t, l, 4, 5) // 1 point
				time.Sleep(MinPointsWaitFactor*5*time.Second - time.Second)
				if _, cut, _ := l.MaybeCut(); cut {
					t.Fatal("cut a short segment before the wait's bound")
				}
				time.Sleep(time.Second)
				if _, cut, _ := l.MaybeCut(); !cut {
					t.Fatal("a short segment waited past MinPointsWaitFactor × MaxSegmentAge")
				}
			})
		}},
		{"SetSealPolicy", func(t *testing.T, e env) {
			synctest.Test(t, func(t *testing.T) {
				opts := e.options(t)
				opts.MaxSegmentAge = time.Minute
				l := mustOpen(t, opts)
				defer mustClose(t, l)
				appendSynced(t, l, 1, 2)
				time.Sleep(2 * time.Second)
				if _, cut, _ := l.MaybeCut(); cut {
					t.Fatal("cut at 2s under a 1m age")
				}
				if err := l.SetSealPolicy(time.Second, 0); err != nil {
					t.Fatal(err)
				}
				if age, pts := l.SealPolicy(); age != time.Second || pts != 0 {
					t.Fatalf("SealPolicy() = %v, %d", age, pts)
				}
				if _, cut, _ := l.MaybeCut(); !cut {
					t.Fatal("the open segment was not judged by the new policy")
				}
				for _, bad := range []struct {
					age time.Duration
					pts int64
				}{{0, 0}, {-time.Second, 0}, {time.Second, -1}, {time.Second, MaxMinSegmentPoints + 1}} {
					if err := l.SetSealPolicy(bad.age, bad.pts); err == nil {
						t.Errorf("SetSealPolicy(%v, %d) accepted", bad.age, bad.pts)
					}
				}
			})
		}},
		{"ReplayFromSeq", func(t *testing.T, e env) {
			l := mustOpen(t, e.options(t))
			defer mustClose(t, l)
			var bySeq [][]Record
			for i := range 4 {
				bySeq = append(bySeq, appendSynced(t, l, i*10, i*10+10))
				if _, err := l.Cut(); err != nil {
					t.Fatal(err)
				}
			}
			bySeq = append(bySeq, appendSynced(t, l, 40, 45)) // open segment
			for from := uint64(0); from <= 6; from++ {
				var want []Record
				for i, rs := range bySeq {
					if uint64(i+1) >= from {
						want = append(want, rs...)
					}
				}
				got := replayAll(t, l, from)
				if !equalRecords(records(got), want) {
					t.Fatalf("Replay(%d): %d records, want %d", from, len(got), len(want))
				}
				for _, g := range got {
					if g.seq < from || g.seq > 5 {
						t.Fatalf("Replay(%d) returned a record of segment %d", from, g.seq)
					}
				}
			}
		}},
		{"RemoveBefore", func(t *testing.T, e env) {
			opts := e.options(t)
			opts.MaxSegmentBytes = MinSegmentBytes
			l := mustOpen(t, opts)
			defer mustClose(t, l)
			appendSynced(t, l, 0, 60)
			seqs := func() (out []uint64) {
				for _, s := range l.Segments() {
					out = append(out, s.Seq)
				}
				return out
			}
			before := seqs()
			if len(before) < 4 {
				t.Fatalf("segments %v, want at least 4", before)
			}
			if err := l.RemoveBefore(before[2]); err != nil {
				t.Fatal(err)
			}
			if got := seqs(); !slices.Equal(got, before[2:]) {
				t.Fatalf("after RemoveBefore(%d): %v, want %v", before[2], got, before[2:])
			}
			open := l.OpenSeq()
			if err := l.RemoveBefore(open + 100); err != nil {
				t.Fatal(err)
			}
			if got := seqs(); !slices.Equal(got, []uint64{open}) {
				t.Fatalf("after removing everything: %v, want only the open segment %d", got, open)
			}
			if files := segmentFiles(t, e); !slices.Equal(files, []string{segmentName(open)}) {
				t.Fatalf("files %v", files)
			}
			if got := replayAll(t, l, 0); len(got) != int(l.Segments()[0].Records) {
				t.Fatalf("replay returned %d records", len(got))
			}
		}},
		{"SequenceNeverReusedAcrossReopen", func(t *testing.T, e env) {
			var last uint64
			for i := range 4 {
				l := mustOpen(t, e.options(t))
				if seq := l.OpenSeq(); seq <= last {
					t.Fatalf("reopen %d: open segment %d, previous was %d", i, seq, last)
				}
				last = l.OpenSeq()
				if i%2 == 0 {
					appendSynced(t, l, i, i+1)
				}
				mustClose(t, l)
			}
		}},
		{"SequenceSurvivesRemovingEverything", func(t *testing.T, e env) {
			l := mustOpen(t, e.options(t))
			appendSynced(t, l, 0, 10)
			if _, err := l.Cut(); err != nil {
				t.Fatal(err)
			}
			appendSynced(t, l, 10, 20)
			open, err := l.Cut()
			if err != nil {
				t.Fatal(err)
			}
			if err := l.RemoveBefore(open); err != nil {
				t.Fatal(err)
			}
			// The counter is on disk before the segments go: a power cut
			// that kept the removals but lost the open segment's entry
			// must not reset it.
			if st := readState(t, e); st.next <= open-1 || st.lastSealed != open-1 {
				t.Fatalf("state after RemoveBefore = %+v, want next > %d, last sealed %d", st, open-1, open-1)
			}
			mustClose(t, l) // removes the empty open segment
			if files := segmentFiles(t, e); len(files) != 0 {
				t.Fatalf("files left: %v", files)
			}
			l = mustOpen(t, e.options(t))
			defer mustClose(t, l)
			if seq := l.OpenSeq(); seq <= open {
				t.Fatalf("after removing every segment the log reopened at %d, want > %d", seq, open)
			}
			if s := l.Segments()[0]; s.PrevSeq != open-1 {
				t.Fatalf("PrevSeq = %d, want %d (the last segment sealed)", s.PrevSeq, open-1)
			}
		}},
		{"CloseRemovesEmptyOpenSegment", func(t *testing.T, e env) {
			l := mustOpen(t, e.options(t))
			mustClose(t, l)
			if files := segmentFiles(t, e); len(files) != 0 {
				t.Fatalf("empty log left %v", files)
			}
			l = mustOpen(t, e.options(t))
			appendSynced(t, l, 0, 3)
			sealed, err := l.Cut()
			if err != nil {
				t.Fatal(err)
			}
			mustClose(t, l)
			if files := segmentFiles(t, e); !slices.Equal(files, []string{segmentName(sealed - 1)}) {
				t.Fatalf("files %v, want only the sealed segment %d", files, sealed-1)
			}
		}},
		{"PrevSeqLinksSealedSegments", func(t *testing.T, e env) {
			l := mustOpen(t, e.options(t))
			appendSynced(t, l, 0, 1)
			l.Cut()
			mustClose(t, l) // empty open segment removed: its number is skipped
			l = mustOpen(t, e.options(t))
			appendSynced(t, l, 1, 2)
			mustClose(t, l)
			l = mustOpen(t, e.options(t))
			defer mustClose(t, l)
			segs := l.Segments()
			if len(segs) != 3 {
				t.Fatalf("segments %+v", segs)
			}
			if segs[0].Seq != 1 || segs[1].Seq != 3 || segs[2].Seq != 4 {
				t.Fatalf("sequences %d %d %d, want 1 3 4", segs[0].Seq, segs[1].Seq, segs[2].Seq)
			}
			if segs[0].PrevSeq != 0 || segs[1].PrevSeq != 1 || segs[2].PrevSeq != 3 {
				t.Fatalf("PrevSeq %d %d %d, want 0 1 3", segs[0].PrevSeq, segs[1].PrevSeq, segs[2].PrevSeq)
			}
		}},
		{"IntervalSyncPolicy", func(t *testing.T, e env) {
			opts := e.options(t)
			opts.Sync = SyncPolicy{Interval: 5 * time.Millisecond}
			l := mustOpen(t, opts)
			want := appendSynced(t, l, 0, 50)
			deadline := time.Now().Add(10 * time.Second)
			for l.Stats().Fsyncs == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if l.Stats().Fsyncs == 0 {
				t.Fatal("the interval syncer never fsynced")
			}
			mustClose(t, l)
			l = mustOpen(t, opts)
			defer mustClose(t, l)
			if got := records(replayAll(t, l, 0)); !equalRecords(got, want) {
				t.Fatalf("replay: %d records, want %d", len(got), len(want))
			}
		}},
		{"InvalidRecordsAreRejected", func(t *testing.T, e env) {
			l := mustOpen(t, e.options(t))
			defer mustClose(t, l)
			for _, r := range []Record{
				{Points: -1},
				{MinT: 10, MaxT: 9},
			} {
				if _, err := l.Append(r); !errors.Is(err, ErrInvalidRecord) {
					t.Fatalf("Append(%+v) = %v, want ErrInvalidRecord", r, err)
				}
			}
			appendSynced(t, l, 0, 1)
			if _, err := l.Append(Record{MinT: -1 << 63, MaxT: 1<<63 - 1, Points: 1}); err != nil {
				t.Fatalf("widest time range: %v", err)
			}
		}},
		{"SyncPastTheEndIsAnError", func(t *testing.T, e env) {
			l := mustOpen(t, e.options(t))
			defer mustClose(t, l)
			if err := l.Sync(Position{Seq: l.OpenSeq() + 1, Offset: 1}); err == nil {
				t.Fatal("Sync of a future position succeeded")
			}
			if err := l.Sync(Position{}); err != nil {
				t.Fatalf("Sync of the zero position: %v", err)
			}
		}},
		{"ClosedLogRefusesEverything", func(t *testing.T, e env) {
			l := mustOpen(t, e.options(t))
			appendSynced(t, l, 0, 1)
			mustClose(t, l)
			if _, err := l.Append(testRecord(1)); !errors.Is(err, ErrClosed) {
				t.Fatalf("Append after Close = %v", err)
			}
			if _, _, err := l.MaybeCut(); !errors.Is(err, ErrClosed) {
				t.Fatalf("MaybeCut after Close = %v", err)
			}
			if err := l.Replay(0, nil); !errors.Is(err, ErrClosed) {
				t.Fatalf("Replay after Close = %v", err)
			}
			if err := l.Close(); !errors.Is(err, ErrClosed) {
				t.Fatalf("second Close = %v", err)
			}
		}},
		{"ConcurrentAppendsKeepTheirOrder", func(t *testing.T, e env) {
			opts := e.options(t)
			opts.MaxSegmentBytes = 4 << 10
			l := mustOpen(t, opts)
			const writers, each = 8, 50
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						r := Record{Data: fmt.Appendf(nil, "%d/%d", w, i), Points: 1}
						pos, err := l.Append(r)
						if err == nil {
							_, _, err = l.MaybeCut()
						}
						if err == nil {
							err = l.Sync(pos)
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			mustClose(t, l)
			l = mustOpen(t, opts)
			defer mustClose(t, l)
			next := make([]int, writers)
			for _, g := range replayAll(t, l, 0) {
				var w, i int
				if _, err := fmt.Sscanf(string(g.rec.Data), "%d/%d", &w, &i); err != nil {
					t.Fatal(err)
				}
				if i != next[w] {
					t.Fatalf("writer %d: record %d replayed where %d was due", w, i, next[w])
				}
				next[w]++
			}
			for w, n := range next {
				if n != each {
					t.Fatalf("writer %d: %d records replayed, want %d", w, n, each)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, e := range envs(t) {
				t.Run(e.name, func(t *testing.T) { tt.run(t, e) })
			}
		})
	}
}

// TestLog_OSFileNames checks the on-disk names and that the real file
// system sees what the Log reports.
func TestLog_OSFileNames(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, Options{Dir: dir, NodeID: "n", Logger: testLogger(t)})
	appendSynced(t, l, 0, 5)
	mustClose(t, l)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"00000000000000000001.seg", "wal.state"}; !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	fi, err := os.Stat(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	info, err := ReadSegment(nil, filepath.Join(dir, names[0]), func(Record) error { return nil })
	if err != nil || info.Bytes != fi.Size() || info.Records != 5 {
		t.Fatalf("ReadSegment = %+v, %v; file has %d bytes", info, err, fi.Size())
	}
}

func TestSealDue(t *testing.T) {
	o := Options{MaxSegmentBytes: 1000, MaxSegmentAge: 10 * time.Second, MinSegmentPoints: 100}
	tests := []struct {
		name   string
		size   int64
		points int64
		age    time.Duration
		want   bool
	}{
		{"young and small", 10, 500, 9 * time.Second, false},
		{"full when young", 1000, 1, time.Millisecond, true},
		{"old with its points", 10, 100, 10 * time.Second, true},
		{"old short of points", 10, 99, 39 * time.Second, false},
		{"short of points at the bound", 10, 99, 40 * time.Second, true},
		{"no minimum", 10, 0, 10 * time.Second, true},
		{"an age of centuries does not overflow", 10, 99, 40 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := o
			switch tt.name {
			case "no minimum":
				o.MinSegmentPoints = 0
			case "an age of centuries does not overflow":
				o.MaxSegmentAge = time.Duration(math.MaxInt64 / 3) // 4 × it overflows int64
				tt.age = o.MaxSegmentAge + time.Second
			}
			if got := sealDue(tt.size, tt.points, tt.age, o); got != tt.want {
				t.Fatalf("sealDue(%d bytes, %d points, %v) = %v, want %v", tt.size, tt.points, tt.age, got, tt.want)
			}
		})
	}
}
