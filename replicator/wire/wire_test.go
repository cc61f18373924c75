package wire

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
	"go.uber.org/goleak"

	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sealedSegment writes records into a real WAL and returns its first sealed
// segment. random makes the payload incompressible.
func sealedSegment(t testing.TB, records, size int, random bool) ([]byte, wal.SegmentInfo) {
	t.Helper()
	l, err := wal.Open(wal.Options{Dir: t.TempDir(), NodeID: "pi-7"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range records {
		data := bytes.Repeat([]byte{byte(i)}, size)
		if random {
			for k := range data {
				data[k] = byte(rng.Uint32())
			}
		}
		pos, err := l.Append(wal.Record{Data: data, MinT: int64(i) * 10, MaxT: int64(i)*10 + 5, Points: 3})
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
	b, info, err := l.ReadSealed(l.Segments()[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	return b, info
}

func encode(t testing.TB, file []byte, info wal.SegmentInfo, maxPart int) Encoded {
	t.Helper()
	e, err := NewEncoder(zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	enc, err := e.Encode("pi-7", info, file, maxPart)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

func assembler(t testing.TB, lim Limits) *Assembler {
	t.Helper()
	a, err := NewAssembler("pi-7", lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// feed adds parts and returns the completed segment and the first error.
func feed(a *Assembler, parts []*pb.ShipSegment) (*Segment, *Error) {
	var done *Segment
	for i, p := range parts {
		s, err := a.Add(p)
		if err != nil {
			return nil, err
		}
		if s != nil {
			if i != len(parts)-1 {
				return nil, &Error{Msg: "segment completed before its last part"}
			}
			done = s
		}
	}
	return done, nil
}

func TestEncodeAssemble_RoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		random   bool
		maxPart  int
		wantComp pb.SegmentCompression
	}{
		{"compressible, one part", false, 0, pb.SegmentCompression_SEGMENT_COMPRESSION_ZSTD},
		{"compressible, many parts", false, 512, pb.SegmentCompression_SEGMENT_COMPRESSION_ZSTD},
		{"incompressible is sent as is", true, 4096, pb.SegmentCompression_SEGMENT_COMPRESSION_NONE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file, info := sealedSegment(t, 40, 1000, tc.random)
			enc := encode(t, file, info, tc.maxPart)
			if enc.Parts[0].Compression != tc.wantComp {
				t.Fatalf("compression %v, want %v", enc.Parts[0].Compression, tc.wantComp)
			}
			if tc.maxPart > 0 && len(enc.Parts) < 2 {
				t.Fatalf("%d parts for %d compressed bytes in parts of %d", len(enc.Parts), enc.CompressedBytes, tc.maxPart)
			}
			seg, err := feed(assembler(t, Limits{}), enc.Parts)
			if err != nil || seg == nil {
				t.Fatalf("assemble: %v", err)
			}
			if !bytes.Equal(seg.File, file) || seg.CRC != info.CRC || seg.Seq != info.Seq || seg.Points != info.Points || seg.PrevSeq != info.PrevSeq {
				t.Fatalf("reassembled segment differs: %+v vs %+v", seg, info)
			}
		})
	}
}

func TestAssembler_RefusesBadParts(t *testing.T) {
	file, info := sealedSegment(t, 40, 1000, false)
	good := func() []*pb.ShipSegment { return encode(t, file, info, 256).Parts }
	const (
		malformedCode = pb.ShipErrorCode_SHIP_ERROR_CODE_MALFORMED
		checksum      = pb.ShipErrorCode_SHIP_ERROR_CODE_CHECKSUM_MISMATCH
		tooLarge      = pb.ShipErrorCode_SHIP_ERROR_CODE_TOO_LARGE
	)
	for _, tc := range []struct {
		name      string
		lim       Limits
		tamper    func([]*pb.ShipSegment) []*pb.ShipSegment
		code      pb.ShipErrorCode
		retryable bool
	}{
		{"another node's segment", Limits{}, func(p []*pb.ShipSegment) []*pb.ShipSegment {
			for _, x := range p {
				x.NodeId = "pi-8"
			}
			return p
		}, malformedCode, false},
		{"skipped part", Limits{}, func(p []*pb.ShipSegment) []*pb.ShipSegment { return append(p[:1], p[2:]...) }, malformedCode, false},
		{"metadata changes between parts", Limits{}, func(p []*pb.ShipSegment) []*pb.ShipSegment { p[1].Points++; return p }, malformedCode, false},
		{"metadata differs from the file", Limits{}, func(p []*pb.ShipSegment) []*pb.ShipSegment {
			for _, x := range p {
				x.Points++
			}
			return p
		}, malformedCode, false},
		{"flipped bit in transit", Limits{}, func(p []*pb.ShipSegment) []*pb.ShipSegment {
			p[len(p)/2].Data = bytes.Clone(p[len(p)/2].Data)
			p[len(p)/2].Data[3] ^= 0x10
			return p
		}, checksum, true},
		{"wrong checksum in the message", Limits{}, func(p []*pb.ShipSegment) []*pb.ShipSegment {
			for _, x := range p {
				x.Crc32C++
			}
			return p
		}, checksum, true},
		{"declared size smaller than the data decompresses to", Limits{}, func(p []*pb.ShipSegment) []*pb.ShipSegment {
			for _, x := range p {
				x.UncompressedBytes = 100
			}
			return p
		}, checksum, true},
		{"segment over the limit", Limits{MaxSegmentBytes: 1024}, func(p []*pb.ShipSegment) []*pb.ShipSegment { return p }, tooLarge, false},
		{"part over the limit", Limits{MaxPartBytes: 100}, func(p []*pb.ShipSegment) []*pb.ShipSegment { return p }, tooLarge, false},
		{"next segment before this one is complete", Limits{}, func(p []*pb.ShipSegment) []*pb.ShipSegment {
			other := cloneMeta(p[0])
			other.Seq++
			other.PrevSeq++
			other.Data = p[0].Data
			return []*pb.ShipSegment{p[0], other}
		}, malformedCode, false},
		{"first part not at offset 0", Limits{}, func(p []*pb.ShipSegment) []*pb.ShipSegment { return p[1:] }, malformedCode, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := assembler(t, tc.lim)
			seg, err := feed(a, tc.tamper(good()))
			if err == nil {
				t.Fatalf("accepted: %+v", seg)
			}
			if err.Code != tc.code || err.Retryable != tc.retryable || err.Seq != info.Seq && err.Seq != info.Seq+1 {
				t.Fatalf("error %v; want code %v retryable %v", err, tc.code, tc.retryable)
			}
			if tc.lim != (Limits{}) {
				return
			}
			// The assembler recovers: the next segment goes through.
			next := good()
			for _, p := range next {
				p.Seq, p.PrevSeq = 0, 0
			}
			next = encode(t, file, info, 256).Parts
			if seg, err := feed(a, next); err != nil || seg == nil {
				t.Fatalf("after a refusal the next segment fails: %v", err)
			}
		})
	}
}

func TestCheckGapAndHello(t *testing.T) {
	ok := &pb.ShipGap{NodeId: "pi-7", AfterSeq: 3, ThroughSeq: 9, Reason: pb.GapReason_GAP_REASON_DROPPED, Points: 10}
	if err := CheckGap("pi-7", ok); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*pb.ShipGap{
		{NodeId: "pi-8", AfterSeq: 3, ThroughSeq: 9, Reason: pb.GapReason_GAP_REASON_DROPPED},
		{NodeId: "pi-7", AfterSeq: 9, ThroughSeq: 9, Reason: pb.GapReason_GAP_REASON_DROPPED},
		{NodeId: "pi-7", AfterSeq: 3, ThroughSeq: 9},
		{NodeId: "pi-7", AfterSeq: 3, ThroughSeq: 9, Reason: pb.GapReason_GAP_REASON_MISSING, Points: -2},
	} {
		if err := CheckGap("pi-7", g); err == nil || err.GapThrough != g.ThroughSeq || err.Retryable {
			t.Fatalf("CheckGap(%v) = %v", g, err)
		}
	}
	if err := CheckHello(&pb.ShipHello{NodeId: "pi-7", ProtocolVersion: ProtocolVersion}, "pi-7"); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*pb.ShipHello{nil, {NodeId: "pi-7"}, {NodeId: "", ProtocolVersion: 1}, {NodeId: "pi-8", ProtocolVersion: 1}} {
		if CheckHello(h, "pi-7") == nil {
			t.Fatalf("CheckHello(%v) accepted", h)
		}
	}
}

// FuzzAssembler: any part a hostile sender makes is refused or completes a
// segment that verifies; the assembler never panics.
func FuzzAssembler(f *testing.F) {
	file, info := sealedSegment(f, 5, 50, false)
	e, err := NewEncoder(zstd.SpeedFastest)
	if err != nil {
		f.Fatal(err)
	}
	enc, err := e.Encode("pi-7", info, file, 0)
	e.Close()
	if err != nil {
		f.Fatal(err)
	}
	p := enc.Parts[0]
	f.Add(p.Data, p.UncompressedBytes, p.CompressedBytes, int32(p.Compression))
	f.Add(file, uint64(len(file)), uint64(len(file)), int32(pb.SegmentCompression_SEGMENT_COMPRESSION_NONE))
	f.Fuzz(func(t *testing.T, data []byte, uncompressed, compressed uint64, comp int32) {
		a, err := NewAssembler("pi-7", Limits{MaxSegmentBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		m := cloneMeta(p)
		m.Data, m.UncompressedBytes, m.CompressedBytes, m.Compression = data, uncompressed, compressed, pb.SegmentCompression(comp)
		seg, werr := a.Add(m)
		if werr == nil && seg != nil {
			if _, err := wal.VerifySegment("x", seg.File, nil); err != nil || seg.CRC != p.Crc32C {
				t.Fatalf("accepted a segment that does not verify: %v", err)
			}
		}
	})
}

// TestBackfill_BuiltSegmentRoundTrips: a segment built in memory
// (wal.EncodeSegment) and marked as a backfill reassembles and verifies,
// carrying its backfill points; parts that disagree on them are refused.
func TestBackfill_BuiltSegmentRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	noise := func() []byte {
		b := make([]byte, 3000)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	recs := []wal.Record{
		{Data: noise(), MinT: 10, MaxT: 90, Points: 7},
		{Data: noise(), MinT: 5, MaxT: 50, Points: 3},
	}
	file, info, err := wal.EncodeSegment("pi-7", 12, 4, recs)
	if err != nil {
		t.Fatal(err)
	}
	enc := encode(t, file, info, 1024)
	if len(enc.Parts) < 2 {
		t.Fatalf("%d parts; want several", len(enc.Parts))
	}
	enc.MarkBackfill(42)
	seg, werr := feed(assembler(t, Limits{}), enc.Parts)
	if werr != nil {
		t.Fatal(werr)
	}
	if !seg.Backfill || seg.BackfillPoints != 42 || seg.Points != 10 || seg.Seq != 12 || seg.PrevSeq != 4 ||
		seg.MinT != 5 || seg.MaxT != 90 || !bytes.Equal(seg.File, file) {
		t.Fatalf("reassembled %+v", seg)
	}
	// A plain segment is no backfill.
	plain := encode(t, file, info, 1024)
	if seg, werr := feed(assembler(t, Limits{}), plain.Parts); werr != nil || seg.Backfill {
		t.Fatalf("plain segment reassembled as %+v, %v", seg, werr)
	}
	// A part that drops or changes the backfill points is malformed.
	changed := encode(t, file, info, 1024)
	changed.MarkBackfill(42)
	changed.Parts[1].BackfillPoints = nil
	if _, werr := feed(assembler(t, Limits{}), changed.Parts); werr == nil || werr.Code != pb.ShipErrorCode_SHIP_ERROR_CODE_MALFORMED {
		t.Fatalf("parts disagreeing on backfill points: %v", werr)
	}
	negative := encode(t, file, info, 1024)
	negative.MarkBackfill(-1)
	if _, werr := feed(assembler(t, Limits{}), negative.Parts); werr == nil || werr.Code != pb.ShipErrorCode_SHIP_ERROR_CODE_MALFORMED {
		t.Fatalf("negative backfill points: %v", werr)
	}
}
