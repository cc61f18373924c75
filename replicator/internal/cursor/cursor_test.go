package cursor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/internal/vfs"
)

func sample() State {
	s := State{NodeID: "pi-7", AckedThrough: 40, Released: 57}
	s.AddGap(Gap{After: 41, Through: 44, Reason: ReasonMissing, Segments: 2, Points: -1})
	s.AddGap(Gap{After: 44, Through: 57, Reason: ReasonBacklogOverflow, Segments: 13, Points: 9000, MinT: 1000, MaxT: 5000, Reported: true})
	return s
}

func TestSaveLoad_RoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cursor")
	if _, found, err := Load(vfs.OS{}, path); found || err != nil {
		t.Fatalf("Load of a missing file: found=%v err=%v", found, err)
	}
	want := sample()
	if err := Save(vfs.OS{}, path, &want); err != nil {
		t.Fatal(err)
	}
	got, found, err := Load(vfs.OS{}, path)
	if err != nil || !found || !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v, %v, %v; want %+v", got, found, err, want)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
	// A leftover temporary file (a save cut short) changes nothing.
	if err := os.WriteFile(path+".tmp", []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _, err := Load(vfs.OS{}, path); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Load with a torn temporary file beside it = %+v, %v", got, err)
	}
	want.AckedThrough, want.Released = 57, 60
	if err := Save(vfs.OS{}, path, &want); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := Load(vfs.OS{}, path); got.Released != 60 {
		t.Fatalf("second save not read back: %+v", got)
	}
}

func TestLoad_DamageIsCorruptError(t *testing.T) {
	good := sample()
	enc := good.Encode()
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated", enc[:len(enc)-1]},
		{"flipped bit", func() []byte { b := append([]byte(nil), enc...); b[20] ^= 8; return b }()},
		{"bad magic", append([]byte("XXXX"), enc[4:]...)},
		{"grown", append(append([]byte(nil), enc...), 0)},
		{"larger than any cursor", append(append([]byte(nil), enc...), make([]byte, maxFileBytes)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cursor")
			if err := os.WriteFile(path, tc.b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := Load(vfs.OS{}, path)
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Path != path {
				t.Fatalf("Load = %v, want a *CorruptError naming the file", err)
			}
		})
	}
}

func TestAddGap_MergesAndCounts(t *testing.T) {
	var s State
	s.AddGap(Gap{After: 10, Through: 12, Reason: ReasonDropped, Segments: 2, Points: 100, MinT: 5, MaxT: 9})
	s.AddGap(Gap{After: 12, Through: 13, Reason: ReasonDropped, Segments: 1, Points: 50, MinT: 3, MaxT: 20})
	s.AddGap(Gap{After: 13, Through: 15, Reason: ReasonBacklogOverflow, Segments: 2, Points: 7})
	s.AddGap(Gap{After: 2, Through: 4, Reason: ReasonMissing, Segments: 1, Points: -1}) // found later, sorts first
	want := []Gap{
		{After: 2, Through: 4, Reason: ReasonMissing, Segments: 1, Points: -1},
		{After: 10, Through: 13, Reason: ReasonDropped, Segments: 3, Points: 150, MinT: 3, MaxT: 20},
		{After: 13, Through: 15, Reason: ReasonBacklogOverflow, Segments: 2, Points: 7},
	}
	if !reflect.DeepEqual(s.Gaps, want) {
		t.Fatalf("gaps %+v\nwant %+v", s.Gaps, want)
	}
	if s.GapSegments != 6 || s.GapPoints != 157 || s.DroppedPoints != 150 {
		t.Fatalf("totals: %d segments, %d points, %d dropped", s.GapSegments, s.GapPoints, s.DroppedPoints)
	}
}

func TestAddGap_StaysBounded(t *testing.T) {
	var s State
	for i := uint64(0); i < 3*MaxGaps; i++ {
		// Reported gaps never merge on arrival, so only the bound applies.
		s.AddGap(Gap{After: 2 * i, Through: 2*i + 1, Reason: ReasonBacklogOverflow, Segments: 1, Points: 2, Reported: true})
	}
	if len(s.Gaps) != MaxGaps {
		t.Fatalf("%d gap records, want %d", len(s.Gaps), MaxGaps)
	}
	var seg uint64
	var pts int64
	for _, g := range s.Gaps {
		seg += g.Segments
		pts += g.Points
	}
	if seg != 3*MaxGaps || pts != 6*MaxGaps || s.GapSegments != 3*MaxGaps || s.Gaps[0].After != 0 {
		t.Fatalf("merging lost counts: %d segments, %d points in records; totals %d", seg, pts, s.GapSegments)
	}
	b := s.Encode()
	got, reason := Decode(b)
	if reason != "" || !reflect.DeepEqual(got, s) {
		t.Fatalf("a full cursor does not round-trip: %s", reason)
	}
}

func FuzzDecode(f *testing.F) {
	s := sample()
	f.Add(s.Encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, reason := Decode(b)
		if reason != "" {
			return
		}
		if again, r := Decode(st.Encode()); r != "" || !reflect.DeepEqual(again, st) {
			t.Fatalf("decoded cursor does not round-trip: %s", r)
		}
	})
}

func TestBackfilledFlag_RoundTripAndVersion1(t *testing.T) {
	s := sample()
	s.Gaps[1].Backfilled = true
	got, reason := Decode(s.Encode())
	if reason != "" || !reflect.DeepEqual(got, s) {
		t.Fatalf("Decode = %+v, %q; want %+v", got, reason, s)
	}
	if g := got.Gaps[1]; g.NeedsBackfill() {
		t.Fatalf("a backfilled gap still needs a backfill: %+v", g)
	}
	// A version 1 file (written before backfills existed): same layout,
	// no backfilled flag.
	old := sample()
	b := old.Encode()
	b[4] = 1
	b = append(b[:len(b)-4], 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	got, reason = Decode(b)
	if reason != "" || !reflect.DeepEqual(got, old) {
		t.Fatalf("Decode(version 1) = %+v, %q; want %+v", got, reason, old)
	}
	if !got.Gaps[1].NeedsBackfill() || got.Gaps[0].NeedsBackfill() {
		t.Fatalf("NeedsBackfill: overflow gap %v, missing gap %v", got.Gaps[1].NeedsBackfill(), got.Gaps[0].NeedsBackfill())
	}
	b[4] = 4
	if _, reason := Decode(b); reason == "" {
		t.Fatal("version 4 decoded")
	}
}

// reversion rewrites an encoded cursor as version v with the flags of gap
// i set to flags.
func reversion(b []byte, v byte, i int, flags byte) []byte {
	b = append([]byte(nil), b...)
	b[4] = v
	idLen := int(b[5])
	b[6+idLen+44+i*gapBytes+49] = flags
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestUnrecoverableFlag_RoundTripAndVersion2(t *testing.T) {
	s := sample()
	s.Gaps[0].Unrecoverable = true
	got, reason := Decode(s.Encode())
	if reason != "" || !reflect.DeepEqual(got, s) {
		t.Fatalf("Decode = %+v, %q; want %+v", got, reason, s)
	}
	// Version 2 had no bit 2: a stray one there is not read as the flag.
	got, reason = Decode(reversion(s.Encode(), 2, 0, flagUnrecover|flagReported))
	if reason != "" || got.Gaps[0].Unrecoverable || !got.Gaps[0].Reported {
		t.Fatalf("Decode(version 2) = %+v, %q", got.Gaps[0], reason)
	}
}

func TestNeedsBackfill(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    Gap
		want bool
	}{
		{"overflow reported", Gap{Reason: ReasonBacklogOverflow, Reported: true, Points: 5, MinT: 1, MaxT: 2}, true},
		{"overflow not reported", Gap{Reason: ReasonBacklogOverflow, Points: 5, MinT: 1, MaxT: 2}, false},
		{"overflow backfilled", Gap{Reason: ReasonBacklogOverflow, Reported: true, Backfilled: true}, false},
		{"dropped", Gap{Reason: ReasonDropped, Reported: true, Points: 5, MinT: 1, MaxT: 2}, false},
		{"missing in store", Gap{Reason: ReasonMissing, Reported: true, Points: 5, MinT: 1, MaxT: 2}, true},
		{"missing unrecoverable", Gap{Reason: ReasonMissing, Reported: true, Points: 5, MinT: 1, MaxT: 2, Unrecoverable: true}, false},
		{"missing count unknown", Gap{Reason: ReasonMissing, Reported: true, Points: -1, MinT: 1, MaxT: 2}, false},
		{"missing span unknown", Gap{Reason: ReasonMissing, Reported: true, Points: 5}, false},
		{"missing no points", Gap{Reason: ReasonMissing, Reported: true, Points: 0, MinT: 1, MaxT: 2}, false},
		{"missing backfilled", Gap{Reason: ReasonMissing, Reported: true, Points: 5, MinT: 1, MaxT: 2, Backfilled: true}, false},
	} {
		if got := tc.g.NeedsBackfill(); got != tc.want {
			t.Errorf("%s: NeedsBackfill = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAddGap_KeepsRecoverabilityApart: a missing gap whose points the
// store holds is not merged with one whose points it may lack, or the
// merge would either re-ship what is gone or give up what is there.
func TestAddGap_KeepsRecoverabilityApart(t *testing.T) {
	var s State
	s.AddGap(Gap{After: 1, Through: 2, Reason: ReasonMissing, Segments: 1, Points: 10, MinT: 1, MaxT: 5})
	s.AddGap(Gap{After: 2, Through: 3, Reason: ReasonMissing, Segments: 1, Points: 20, MinT: 6, MaxT: 9, Unrecoverable: true})
	s.AddGap(Gap{After: 3, Through: 4, Reason: ReasonMissing, Segments: 1, Points: 30, MinT: 10, MaxT: 12, Unrecoverable: true})
	want := []Gap{
		{After: 1, Through: 2, Reason: ReasonMissing, Segments: 1, Points: 10, MinT: 1, MaxT: 5},
		{After: 2, Through: 4, Reason: ReasonMissing, Segments: 2, Points: 50, MinT: 6, MaxT: 12, Unrecoverable: true},
	}
	if !reflect.DeepEqual(s.Gaps, want) {
		t.Fatalf("gaps %+v\nwant %+v", s.Gaps, want)
	}
}

// TestLoad_TheLargestCursorLoads: the bound on what Load reads is no
// smaller than the largest cursor Save writes.
func TestLoad_TheLargestCursorLoads(t *testing.T) {
	s := State{NodeID: strings.Repeat("n", maxNodeID)}
	for i := range uint64(MaxGaps) {
		s.AddGap(Gap{After: 2 * i, Through: 2*i + 1, Reason: ReasonDropped, Segments: 1, Points: 1, Reported: true})
	}
	s.AckedThrough, s.Released = 2*MaxGaps, 2*MaxGaps
	if len(s.Gaps) != MaxGaps {
		t.Fatalf("%d gaps, want %d", len(s.Gaps), MaxGaps)
	}
	fsys := vfs.NewCrashFS()
	fsys.MkdirAll("/d", 0o755)
	if err := Save(fsys, "/d/cursor", &s); err != nil {
		t.Fatal(err)
	}
	if b, _ := fsys.ReadFile("/d/cursor"); len(b) != maxFileBytes {
		t.Fatalf("the largest cursor is %d bytes, maxFileBytes %d", len(b), maxFileBytes)
	}
	got, found, err := Load(fsys, "/d/cursor")
	if err != nil || !found || !bytes.Equal(got.Encode(), s.Encode()) {
		t.Fatalf("Load of the largest cursor: found %v, %v", found, err)
	}
}
