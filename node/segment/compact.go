package segment

import (
	"fmt"

	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/wal"
)

// MaxCompactPoints bounds the points of a segment Compact rewrites: it
// holds them all in memory (16 bytes each). Compaction pays off for the
// small segments of slow edges; a larger segment is shipped as written.
const MaxCompactPoints = 1 << 16

// Compact rewrites a sealed WAL segment of format version 2 (compressed
// records) as the same segment in one record: the shipped form of a
// segment (docs/replication.md, "Compacted segments").
//
// A node writes one record per write; at low rates (a device sending a few
// points a second) each record holds one point per series, whose chunk
// coding and frame (CRC, time span, count) cost several bytes a point
// that zstd cannot take back. One record holding all the segment's points
// of a series in one run costs about a byte a point.
//
// The compacted file has the header of file (node id, sequence, previous
// sequence, format version 2; creation time 0), one kind-2 record that
// defines every series of the file once, in the order of their first
// definition, and holds one run per series (more past chunk.MaxSamples):
// its samples in file order, sorted by timestamp with, of equal
// timestamps, the last one kept (record.Encoder's rule, which is what
// replaying the records in order leaves behind: duplicate timestamps are
// last-write-wins). Its footer counts the points kept. The same file
// always compacts to the same bytes, so a segment shipped again after a
// lost acknowledgement carries the same checksum.
//
// ok is false, and file is to be shipped as it is, when the file is of
// format version 1, holds one record or none, holds more than
// MaxCompactPoints points, or would not get smaller. An error means file
// is not a valid segment (wal.VerifySegment, package record).
//
// Safe for concurrent use.
func Compact(file []byte) (out []byte, info wal.SegmentInfo, ok bool, err error) {
	head, err := wal.VerifySegment("segment", file, nil)
	if err != nil {
		return nil, wal.SegmentInfo{}, false, fmt.Errorf("compact: %w", err)
	}
	if head.Version != wal.FormatV2 || head.Records < 2 || head.Points > MaxCompactPoints {
		return nil, head, false, nil
	}
	type series struct {
		key    []byte
		ts     []int64
		vs     []float64
		hasKey bool
	}
	byID := map[uint64]*series{}
	var order []uint64 // ids in the order of their first definition
	var dec record.Decoder
	def := func(id uint64, key []byte) error {
		s := byID[id]
		if s == nil {
			s = &series{}
			byID[id] = s
		}
		if !s.hasKey {
			s.key, s.hasKey = append([]byte(nil), key...), true
			order = append(order, id)
		}
		return nil
	}
	run := func(id uint64, ts []int64, vs []float64) error {
		s := byID[id]
		if s == nil || !s.hasKey {
			return fmt.Errorf("run of series %d, which the segment does not define: %w", id, record.ErrCorrupt)
		}
		s.ts, s.vs = append(s.ts, ts...), append(s.vs, vs...)
		return nil
	}
	if _, err := wal.VerifySegment("segment", file, func(r wal.Record) error { return dec.Decode(r.Data, def, run) }); err != nil {
		return nil, wal.SegmentInfo{}, false, fmt.Errorf("compact segment %d: %w", head.Seq, err)
	}
	var enc record.Encoder
	enc.SetKind(record.KindCompressed)
	for _, id := range order {
		s := byID[id]
		enc.DefineSeries(id, s.key)
		if len(s.ts) > 0 {
			enc.AddRun(id, s.ts, s.vs)
		}
	}
	data := enc.AppendTo(nil)
	rec := wal.Record{Data: data, Points: enc.EncodedPoints()}
	if rec.Points > 0 {
		rec.MinT, rec.MaxT = enc.MinT(), enc.MaxT()
	}
	out, info, err = wal.EncodeSegmentVersion(wal.FormatV2, head.NodeID, head.Seq, head.PrevSeq, []wal.Record{rec})
	if err != nil {
		return nil, wal.SegmentInfo{}, false, fmt.Errorf("compact segment %d: %w", head.Seq, err)
	}
	if len(out) >= len(file) {
		return nil, head, false, nil
	}
	return out, info, true, nil
}
