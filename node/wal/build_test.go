package wal

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// TestEncodeSegment_MatchesTheLog writes records with a Log, builds the
// same segment with EncodeSegment, and compares: the same description and
// the same bytes between the header and the footer (the headers differ
// only in their creation time, and so the CRCs).
func TestEncodeSegment_MatchesTheLog(t *testing.T) {
	l := mustOpen(t, Options{Dir: filepath.Join(t.TempDir(), "wal"), NodeID: "node-a", Logger: testLogger(t)})
	defer mustClose(t, l)
	var recs []Record
	for i := range 40 {
		r := testRecord(i)
		recs = append(recs, r)
		pos, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(pos); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Cut(); err != nil {
		t.Fatal(err)
	}
	want, wantInfo, err := l.ReadSealed(1)
	if err != nil {
		t.Fatal(err)
	}
	got, info, err := EncodeSegment("node-a", 1, 0, recs)
	if err != nil {
		t.Fatal(err)
	}
	v, err := VerifySegment("built", got, nil)
	if err != nil {
		t.Fatalf("VerifySegment of a built segment: %v", err)
	}
	for _, x := range []SegmentInfo{info, v} {
		if x.Seq != 1 || x.PrevSeq != 0 || x.NodeID != "node-a" || !x.Sealed || x.Bytes != wantInfo.Bytes ||
			x.Records != wantInfo.Records || x.Points != wantInfo.Points || x.MinT != wantInfo.MinT || x.MaxT != wantInfo.MaxT {
			t.Fatalf("built segment described as %+v; the Log's is %+v", x, wantInfo)
		}
	}
	if info.CRC != v.CRC {
		t.Fatalf("EncodeSegment says crc %08x, the file %08x", info.CRC, v.CRC)
	}
	hdr := header{nodeID: "node-a"}.size()
	if !bytes.Equal(got[hdr:len(got)-footerBytes], want[hdr:len(want)-footerBytes]) {
		t.Fatal("records of the built segment differ from the Log's")
	}
	var replayed []Record
	if _, err := VerifySegment("built", got, func(r Record) error {
		r.Data = bytes.Clone(r.Data)
		replayed = append(replayed, r)
		return nil
	}); err != nil || !equalRecords(replayed, recs) {
		t.Fatalf("records read back differ (err %v)", err)
	}
	again, _, _ := EncodeSegment("node-a", 1, 0, recs)
	if !bytes.Equal(again, got) {
		t.Fatal("the same arguments built different bytes")
	}
	if n := SegmentOverheadBytes("node-a"); n+func() (s int64) {
		for _, r := range recs {
			s += FrameBytes(r)
		}
		return s
	}() != int64(len(got)) {
		t.Fatalf("SegmentOverheadBytes + FrameBytes = %d, file is %d bytes", n, len(got))
	}
}

func TestEncodeSegment_BadArguments(t *testing.T) {
	ok := []Record{testRecord(3)}
	for name, c := range map[string]struct {
		id        string
		seq, prev uint64
		recs      []Record
	}{
		"empty id":        {"", 2, 1, ok},
		"long id":         {string(bytes.Repeat([]byte("x"), MaxNodeIDBytes+1)), 2, 1, ok},
		"seq 0":           {"n", 0, 0, ok},
		"prev not below":  {"n", 2, 2, ok},
		"negative points": {"n", 2, 1, []Record{{Points: -1}}},
		"time backwards":  {"n", 2, 1, []Record{{MinT: 5, MaxT: 4, Points: 1}}},
	} {
		if _, _, err := EncodeSegment(c.id, c.seq, c.prev, c.recs); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	b, info, err := EncodeSegment("n", 9, 3, nil)
	if err != nil || info.Records != 0 || info.Points != 0 {
		t.Fatalf("empty segment: %+v, %v", info, err)
	}
	if _, err := VerifySegment("empty", b, nil); err != nil {
		t.Fatalf("empty segment does not verify: %v", err)
	}
}

// TestEncodeSegment_RandomNeverPanics builds segments of random records,
// valid or not: an invalid one is an error, a valid one verifies.
func TestEncodeSegment_RandomNeverPanics(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 2000 {
		var recs []Record
		valid := true
		for range rng.IntN(6) {
			r := Record{
				Data:   make([]byte, rng.IntN(200)),
				MinT:   rng.Int64N(1<<40) - 1<<39,
				Points: rng.Int64N(1000),
			}
			r.MaxT = r.MinT + rng.Int64N(1<<20)
			switch rng.IntN(20) {
			case 0:
				r.Points, valid = -r.Points-1, false
			case 1:
				r.MaxT, valid = r.MinT-1, false
			case 2:
				r.MinT, r.MaxT = -1<<63, 1<<63-1
			}
			for k := range r.Data {
				r.Data[k] = byte(rng.Uint32())
			}
			recs = append(recs, r)
		}
		seq := rng.Uint64N(1<<20) + 1
		b, info, err := EncodeSegment("rand-node", seq, seq-1, recs)
		if !valid {
			if err == nil {
				t.Fatalf("case %d: invalid records encoded", i)
			}
			continue
		}
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		v, err := VerifySegment("rand", b, nil)
		if err != nil || v.CRC != info.CRC || v.Points != info.Points || v.Records != int64(len(recs)) {
			t.Fatalf("case %d: built %+v, verified %+v, %v", i, info, v, err)
		}
	}
}
