package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tributarydb/tributary/internal/vfs"
)

// unsealedSegment writes n records to a log on a CrashFS, syncs them, and
// crashes, leaving one unsealed segment. It returns the segment's bytes,
// the records and where each ends.
func unsealedSegment(t *testing.T, n int) ([]byte, []Record, []int64) {
	t.Helper()
	cfs := vfs.NewCrashFS()
	l := mustOpen(t, Options{Dir: "/wal", NodeID: "node-a", FS: cfs, Logger: testLogger(t)})
	var recs []Record
	var ends []int64
	for i := range n {
		r := testRecord(i + 90) // sizes across the varint boundary of 128
		pos, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		recs, ends = append(recs, r), append(ends, pos.Offset)
	}
	if err := l.Sync(Position{Seq: 1, Offset: ends[n-1]}); err != nil {
		t.Fatal(err)
	}
	after := cfs.Crash()
	l.Close() // fails: the crash killed its files
	b, err := after.ReadFile("/wal/" + segmentName(1))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != ends[n-1] {
		t.Fatalf("segment has %d bytes, want %d", len(b), ends[n-1])
	}
	return b, recs, ends
}

func TestLog_TornTailIsTruncated(t *testing.T) {
	const n = 5
	seg, recs, ends := unsealedSegment(t, n)
	hdrLen := ends[0] - frameSize(recs[0])
	// Every cut from inside the header to the full file: the last records
	// and the header, byte by byte.
	for cut := int64(0); cut <= int64(len(seg)); cut++ {
		if cut > hdrLen && cut < ends[n-4] {
			continue
		}
		keep := 0
		for keep < n && ends[keep] <= cut {
			keep++
		}
		boundary := cut == hdrLen || keep > 0 && ends[keep-1] == cut

		cfs := vfs.NewCrashFS()
		if err := cfs.MkdirAll("/wal", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := cfs.WriteFile("/wal/"+segmentName(1), seg[:cut]); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		opts := Options{Dir: "/wal", NodeID: "node-a", FS: cfs, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		l, err := Open(opts)
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		got := records(replayAll(t, l, 0))
		st := l.Stats()
		segs := l.Segments()
		mustClose(t, l)

		if !equalRecords(got, recs[:keep]) {
			t.Fatalf("cut at %d: replayed %d records, want the %d before the tear", cut, len(got), keep)
		}
		wantTorn := int64(1)
		if boundary || cut == 0 {
			wantTorn = 0
		}
		if st.TornTruncations != wantTorn {
			t.Fatalf("cut at %d: TornTruncations = %d, want %d; log:\n%s", cut, st.TornTruncations, wantTorn, logs.String())
		}
		if wantTorn == 1 && !strings.Contains(logs.String(), "bytes_cut=") {
			t.Fatalf("cut at %d: truncation not logged with the bytes cut:\n%s", cut, logs.String())
		}
		if st.OpenSeq != 2 {
			t.Fatalf("cut at %d: open segment %d, want 2", cut, st.OpenSeq)
		}
		if keep == 0 {
			// Nothing worth keeping: the segment is removed, not sealed.
			if len(segs) != 1 {
				t.Fatalf("cut at %d: segments %+v, want only the open one", cut, segs)
			}
			continue
		}
		if len(segs) != 2 || !segs[0].Sealed || segs[0].Records != int64(keep) {
			t.Fatalf("cut at %d: segments %+v", cut, segs)
		}
		if _, err := ReadSegment(cfs, segs[0].Path, func(Record) error { return nil }); err != nil {
			t.Fatalf("cut at %d: resealed segment does not verify: %v", cut, err)
		}
	}
}

// sealedLog writes three sealed segments of 10 records each and returns
// the records in order.
func sealedLog(t *testing.T, opts Options) []Record {
	t.Helper()
	l := mustOpen(t, opts)
	var all []Record
	for i := range 3 {
		all = append(all, appendSynced(t, l, i*10, i*10+10)...)
		if _, err := l.Cut(); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, l)
	return all
}

func TestLog_CorruptSealedSegmentIsQuarantined(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, NodeID: "node-a", Logger: testLogger(t)}
	all := sealedLog(t, opts)

	victim := filepath.Join(dir, segmentName(2))
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	mid := int64(len(b) / 2)
	b[mid] ^= 0x10
	if err := os.WriteFile(victim, b, 0o644); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	l := mustOpen(t, opts)
	defer mustClose(t, l)

	if st := l.Stats(); st.CorruptQuarantined != 1 || st.TornTruncations != 0 {
		t.Fatalf("stats %+v, want one quarantined, no truncation", st)
	}
	if _, err := os.Stat(victim); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("corrupt segment still in place: %v", err)
	}
	moved, err := os.ReadFile(filepath.Join(dir, "quarantine", segmentName(2)))
	if err != nil {
		t.Fatalf("corrupt segment not in quarantine: %v", err)
	}
	if !bytes.Equal(moved, b) {
		t.Fatal("quarantined file differs from the corrupt segment")
	}
	line := logs.String()
	for _, want := range []string{"level=ERROR", "quarantined", segmentName(2), "offset=", "reason=", "checksum mismatch"} {
		if !strings.Contains(line, want) {
			t.Fatalf("log lacks %q:\n%s", want, line)
		}
	}
	var seqs []uint64
	for _, s := range l.Segments() {
		seqs = append(seqs, s.Seq)
	}
	if !slices.Equal(seqs, []uint64{1, 3, 5}) {
		t.Fatalf("segments %v, want 1 3 5", seqs)
	}
	want := append(slices.Clone(all[:10]), all[20:]...)
	if got := records(replayAll(t, l, 0)); !equalRecords(got, want) {
		t.Fatalf("replayed %d records, want the %d of the intact segments", len(got), len(want))
	}
	if _, err := ReadSegment(nil, filepath.Join(dir, "quarantine", segmentName(2)), nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadSegment of the corrupt segment = %v, want ErrCorrupt", err)
	}
}

// TestOpen_Recovery damages the files of a log in different ways and checks
// what Open makes of them.
func TestOpen_Recovery(t *testing.T) {
	seg1 := "/wal/" + segmentName(1)
	tests := []struct {
		name    string
		damage  func(t *testing.T, cfs *vfs.CrashFS, seg []byte) []byte // returns new contents of segment 1, nil to leave it
		wantErr string
		// want after Open: records of segment 1 replayed, quarantined, torn
		wantRecords     int
		wantQuarantined int64
		wantTorn        int64
		wantSeg1Sealed  bool
		wantSeg1Present bool
		wantOpenSeq     uint64 // 0: 5, the one after the open segment removed at Close
	}{
		{
			name:        "intact",
			damage:      func(*testing.T, *vfs.CrashFS, []byte) []byte { return nil },
			wantRecords: 10, wantSeg1Sealed: true, wantSeg1Present: true,
		},
		{
			name: "bit flip in the header",
			damage: func(_ *testing.T, _ *vfs.CrashFS, b []byte) []byte {
				b[8] ^= 1
				return b
			},
			wantQuarantined: 1,
		},
		{
			name: "bit flip in the footer counts",
			damage: func(_ *testing.T, _ *vfs.CrashFS, b []byte) []byte {
				b[len(b)-footerBytes+2] ^= 1
				return b
			},
			wantRecords: 10, wantTorn: 1, wantSeg1Sealed: true, wantSeg1Present: true,
		},
		{
			name: "bit flip in the footer crc",
			damage: func(_ *testing.T, _ *vfs.CrashFS, b []byte) []byte {
				b[len(b)-8] ^= 1
				return b
			},
			wantRecords: 10, wantTorn: 1, wantSeg1Sealed: true, wantSeg1Present: true,
		},
		{
			name: "footer torn in half",
			damage: func(_ *testing.T, _ *vfs.CrashFS, b []byte) []byte {
				return b[:len(b)-footerBytes/2]
			},
			wantRecords: 10, wantTorn: 1, wantSeg1Sealed: true, wantSeg1Present: true,
		},
		{
			name: "footer missing",
			damage: func(_ *testing.T, _ *vfs.CrashFS, b []byte) []byte {
				return b[:len(b)-footerBytes]
			},
			wantRecords: 10, wantSeg1Sealed: true, wantSeg1Present: true,
		},
		{
			name: "garbage appended after the footer",
			damage: func(_ *testing.T, _ *vfs.CrashFS, b []byte) []byte {
				return append(b, 1, 2, 3)
			},
			wantRecords: 10, wantTorn: 1, wantSeg1Sealed: true, wantSeg1Present: true,
		},
		{
			name: "zeroed unsealed segment",
			damage: func(_ *testing.T, _ *vfs.CrashFS, b []byte) []byte {
				return make([]byte, len(b))
			},
			wantQuarantined: 1,
		},
		{
			name: "header sequence does not match the name",
			damage: func(_ *testing.T, cfs *vfs.CrashFS, b []byte) []byte {
				h, n, _ := parseHeader(b)
				h.seq = 9
				return append(appendHeader(nil, h), b[n:]...)
			},
			wantQuarantined: 1, wantOpenSeq: 10,
		},
		{
			name: "another node's segment",
			damage: func(_ *testing.T, cfs *vfs.CrashFS, b []byte) []byte {
				h, n, _ := parseHeader(b)
				h.nodeID = "node-b"
				return append(appendHeader(nil, h), b[n:]...)
			},
			wantErr: `written by node "node-b", not "node-a"`,
		},
		{
			name: "damaged state file",
			damage: func(t *testing.T, cfs *vfs.CrashFS, _ []byte) []byte {
				if err := cfs.WriteFile("/wal/"+stateName, []byte("junk")); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			// Segment names are all that is left to go by: 4 was removed
			// empty at Close and is handed out again.
			wantRecords: 10, wantQuarantined: 1, wantSeg1Sealed: true, wantSeg1Present: true, wantOpenSeq: 4,
		},
		{
			name: "state file ahead of the segments",
			damage: func(t *testing.T, cfs *vfs.CrashFS, _ []byte) []byte {
				if err := cfs.WriteFile("/wal/"+stateName, state{next: 100, lastSealed: 3}.encode()); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			wantRecords: 10, wantSeg1Sealed: true, wantSeg1Present: true, wantOpenSeq: 100,
		},
		{
			name: "leftover temporary state file",
			damage: func(t *testing.T, cfs *vfs.CrashFS, _ []byte) []byte {
				if err := cfs.WriteFile("/wal/"+stateTmpName, []byte("half")); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			wantRecords: 10, wantSeg1Sealed: true, wantSeg1Present: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfs := vfs.NewCrashFS()
			opts := Options{Dir: "/wal", NodeID: "node-a", FS: cfs, Logger: testLogger(t)}
			all := sealedLog(t, opts)
			b, err := cfs.ReadFile(seg1)
			if err != nil {
				t.Fatal(err)
			}
			if nb := tt.damage(t, cfs, b); nb != nil {
				if err := cfs.WriteFile(seg1, nb); err != nil {
					t.Fatal(err)
				}
			}
			l, err := Open(opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					if err == nil {
						l.Close()
					}
					t.Fatalf("Open = %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer mustClose(t, l)
			st := l.Stats()
			if st.CorruptQuarantined != tt.wantQuarantined || st.TornTruncations != tt.wantTorn {
				t.Fatalf("stats %+v, want %d quarantined, %d torn", st, tt.wantQuarantined, tt.wantTorn)
			}
			segs := l.Segments()
			present := segs[0].Seq == 1
			if present != tt.wantSeg1Present || present && segs[0].Sealed != tt.wantSeg1Sealed {
				t.Fatalf("segments %+v", segs)
			}
			if present {
				if _, err := ReadSegment(cfs, seg1, nil); err != nil {
					t.Fatalf("segment 1 does not verify: %v", err)
				}
			}
			want := append(slices.Clone(all[:tt.wantRecords]), all[10:]...)
			if got := records(replayAll(t, l, 0)); !equalRecords(got, want) {
				t.Fatalf("replayed %d records, want %d", len(got), len(want))
			}
			wantOpen := tt.wantOpenSeq
			if wantOpen == 0 {
				wantOpen = 5
			}
			if st.OpenSeq != wantOpen {
				t.Fatalf("open segment %d, want %d", st.OpenSeq, wantOpen)
			}
		})
	}
}

func TestOpen_TornHeaderOfNewSegmentIsRemoved(t *testing.T) {
	for cut := range headerFixedBytes + len("node-a") {
		cfs := vfs.NewCrashFS()
		opts := Options{Dir: "/wal", NodeID: "node-a", FS: cfs, Logger: testLogger(t)}
		sealedLog(t, opts)
		h := appendHeader(nil, header{nodeID: "node-a", seq: 7, prevSeq: 4})
		if err := cfs.WriteFile("/wal/"+segmentName(7), h[:cut]); err != nil {
			t.Fatal(err)
		}
		l := mustOpen(t, opts)
		st := l.Stats()
		mustClose(t, l)
		if st.OpenSeq != 8 || st.CorruptQuarantined != 0 {
			t.Fatalf("cut %d: stats %+v", cut, st)
		}
		if _, err := cfs.ReadFile("/wal/" + segmentName(7)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("cut %d: torn segment not removed: %v", cut, err)
		}
	}
}

// TestOpen_SealingRecoveredSegmentIsDurable checks that recovery makes an
// unsealed segment's records and footer durable, by crashing right after.
func TestOpen_SealingRecoveredSegmentIsDurable(t *testing.T) {
	seg, recs, _ := unsealedSegment(t, 5)
	cfs := vfs.NewCrashFS()
	cfs.MkdirAll("/wal", 0o755)
	// The recovered bytes are on the "disk" but, as after a real crash,
	// were perhaps never fsynced: write them without syncing.
	f, err := cfs.OpenFile("/wal/"+segmentName(1), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(seg)
	f.Close()
	cfs.SyncDir("/wal")
	opts := Options{Dir: "/wal", NodeID: "node-a", FS: cfs, Logger: testLogger(t)}
	l := mustOpen(t, opts)
	after := cfs.Crash()
	l.Close()
	opts.FS = after
	l = mustOpen(t, opts)
	defer mustClose(t, l)
	if got := records(replayAll(t, l, 0)); !equalRecords(got, recs) {
		t.Fatalf("replayed %d records, want %d", len(got), len(recs))
	}
	if s := l.Segments()[0]; !s.Sealed || s.Seq != 1 {
		t.Fatalf("segment 1 = %+v", s)
	}
}

// TestReplay_DetectsDamageAfterOpen flips a byte of a sealed segment while
// the log is open.
func TestReplay_DetectsDamageAfterOpen(t *testing.T) {
	cfs := vfs.NewCrashFS()
	opts := Options{Dir: "/wal", NodeID: "node-a", FS: cfs, Logger: testLogger(t)}
	sealedLog(t, opts)
	l := mustOpen(t, opts)
	defer mustClose(t, l)
	b, _ := cfs.ReadFile("/wal/" + segmentName(3))
	b[len(b)/2] ^= 0xff
	cfs.WriteFile("/wal/"+segmentName(3), b)
	err := l.Replay(0, func(uint64, Record) error { return nil })
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Path != "/wal/"+segmentName(3) {
		t.Fatalf("Replay = %v, want a CorruptionError for segment 3", err)
	}
}

// TestLog_ReplayWithConcurrentAppends replays while writers append: Replay
// returns a prefix of the log.
func TestLog_ReplayWithConcurrentAppends(t *testing.T) {
	cfs := vfs.NewCrashFS()
	opts := Options{Dir: "/wal", NodeID: "node-a", FS: cfs, Logger: testLogger(t), MaxSegmentBytes: MinSegmentBytes}
	l := mustOpen(t, opts)
	defer mustClose(t, l)
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for range 4 {
		wg.Go(func() {
			for range 100 {
				mu.Lock()
				r := Record{Data: binary.AppendUvarint(nil, uint64(n))}
				n++
				_, _, err := l.MaybeCut()
				if err == nil {
					_, err = l.Append(r)
				}
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 20 {
		next := uint64(0)
		for _, g := range replayAll(t, l, 0) {
			v, _ := binary.Uvarint(g.rec.Data)
			if v != next {
				t.Fatalf("replayed record %d where %d was due", v, next)
			}
			next++
		}
	}
	wg.Wait()
}
