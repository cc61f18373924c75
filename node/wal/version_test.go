package wal

import (
	"errors"
	"hash/crc32"
	"strings"
	"testing"
)

// TestLog_FormatVersions: a Log writes the header version its Options ask
// for, reports it, and reads segments of both versions whatever it writes:
// a directory written by one version and reopened with the other replays
// every record, and each segment keeps its own version.
func TestLog_FormatVersions(t *testing.T) {
	for _, e := range envs(t) {
		t.Run(e.name, func(t *testing.T) {
			var want []Record
			for round, format := range []uint8{FormatV2, FormatV1, FormatV2} {
				opts := e.options(t)
				opts.Format = format
				l := mustOpen(t, opts)
				want = append(want, appendSynced(t, l, round*10, round*10+10)...)
				if _, err := l.Cut(); err != nil {
					t.Fatal(err)
				}
				segs := l.Segments()
				if got := segs[len(segs)-2].Version; got != format {
					t.Fatalf("round %d: segment written with format %d reports version %d", round, format, got)
				}
				b, info, err := l.ReadSealed(segs[len(segs)-2].Seq)
				if err != nil {
					t.Fatal(err)
				}
				if b[4] != format || info.Version != format {
					t.Fatalf("round %d: header byte %d, ReadSealed version %d, want %d", round, b[4], info.Version, format)
				}
				if v, err := VerifySegment("shipped", b, nil); err != nil || v.Version != format {
					t.Fatalf("VerifySegment: version %d, %v; want %d", v.Version, err, format)
				}
				var got []Record
				if err := l.Replay(0, func(_ uint64, r Record) error {
					r.Data = append([]byte(nil), r.Data...)
					got = append(got, r)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if !equalRecords(got, want) {
					t.Fatalf("round %d: replayed %d records, want %d", round, len(got), len(want))
				}
				mustClose(t, l)
			}
		})
	}
}

func TestFormatVersion_UnknownRefused(t *testing.T) {
	if _, err := Open(Options{Dir: t.TempDir(), NodeID: "a", Format: 3}); err == nil || !strings.Contains(err.Error(), "Format 3") {
		t.Fatalf("Open with Format 3: %v", err)
	}
	if _, _, err := EncodeSegmentVersion(3, "a", 1, 0, nil); err == nil {
		t.Fatal("EncodeSegmentVersion(3) did not fail")
	}
	b, info, err := EncodeSegmentVersion(FormatV2, "a", 1, 0, []Record{testRecord(1)})
	if err != nil || info.Version != FormatV2 {
		t.Fatalf("EncodeSegmentVersion(2): %+v, %v", info, err)
	}
	// The same file claiming version 3 (header CRC fixed up) is refused.
	b[4] = 3
	n := header{nodeID: "a"}.size()
	crc := crc32.Checksum(b[:n-4], castagnoli)
	b[n-4], b[n-3], b[n-2], b[n-1] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
	_, err = VerifySegment("v3", b, nil)
	if err == nil || !strings.Contains(err.Error(), "unsupported format version 3") {
		t.Fatalf("VerifySegment of a version 3 header: %v", err)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("VerifySegment of a version 3 header: %v does not wrap ErrCorrupt", err)
	}
}
