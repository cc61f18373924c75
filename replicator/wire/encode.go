package wire

import (
	"fmt"

	"github.com/klauspost/compress/zstd"

	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Encoder compresses segments and cuts them into parts.
type Encoder struct {
	zenc *zstd.Encoder
}

// NewEncoder returns an Encoder compressing at level.
func NewEncoder(level zstd.EncoderLevel) (*Encoder, error) {
	// One goroutine-free encoder: EncodeAll with concurrency 1 runs in the
	// caller, and the window stays within what every Assembler accepts.
	z, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(4<<20),
		zstd.WithEncoderCRC(false), // the segment carries its own CRCs
	)
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	return &Encoder{zenc: z}, nil
}

// Encoded is one segment ready to send.
type Encoded struct {
	Parts           []*pb.ShipSegment
	CompressedBytes int64
}

// Encode compresses the sealed segment file described by info (as returned
// by wal.Log.ReadSealed) and cuts it into parts of at most maxPartBytes of
// data. The parts do not alias file.
func (e *Encoder) Encode(nodeID string, info wal.SegmentInfo, file []byte, maxPartBytes int) (Encoded, error) {
	if !info.Sealed || int64(len(file)) != info.Bytes {
		return Encoded{}, fmt.Errorf("encode segment %d: not a sealed segment of %d bytes (%d given)", info.Seq, info.Bytes, len(file))
	}
	if maxPartBytes <= 0 {
		maxPartBytes = DefaultMaxPartBytes
	}
	comp := pb.SegmentCompression_SEGMENT_COMPRESSION_ZSTD
	data := e.zenc.EncodeAll(file, make([]byte, 0, len(file)/4+64))
	if len(data) >= len(file) {
		comp, data = pb.SegmentCompression_SEGMENT_COMPRESSION_NONE, append([]byte(nil), file...)
	}
	meta := pb.ShipSegment{
		NodeId:            nodeID,
		Seq:               info.Seq,
		PrevSeq:           info.PrevSeq,
		Crc32C:            info.CRC,
		Compression:       comp,
		UncompressedBytes: uint64(len(file)),
		CompressedBytes:   uint64(len(data)),
		Records:           info.Records,
		Points:            info.Points,
		MinTimeMs:         info.MinT,
		MaxTimeMs:         info.MaxT,
	}
	var parts []*pb.ShipSegment
	for off := 0; off < len(data) || off == 0; off += maxPartBytes {
		end := min(off+maxPartBytes, len(data))
		p := cloneMeta(&meta)
		p.Offset = uint64(off)
		p.Data = data[off:end:end]
		parts = append(parts, p)
		if end == len(data) {
			break
		}
	}
	return Encoded{Parts: parts, CompressedBytes: int64(len(data))}, nil
}

// MarkBackfill makes every part carry backfill_points = points: the
// segment is a backfill of a gap, built from the node's store, and the
// coordinator records points for it instead of its footer's count.
func (e Encoded) MarkBackfill(points int64) {
	for _, p := range e.Parts {
		p.BackfillPoints = &points
	}
}

// Close releases the encoder.
func (e *Encoder) Close() { e.zenc.Close() }

func cloneMeta(m *pb.ShipSegment) *pb.ShipSegment {
	return &pb.ShipSegment{
		NodeId: m.NodeId, Seq: m.Seq, PrevSeq: m.PrevSeq, Crc32C: m.Crc32C, Compression: m.Compression,
		UncompressedBytes: m.UncompressedBytes, CompressedBytes: m.CompressedBytes,
		Records: m.Records, Points: m.Points, MinTimeMs: m.MinTimeMs, MaxTimeMs: m.MaxTimeMs,
		BackfillPoints: m.BackfillPoints, Traceparent: m.Traceparent,
	}
}
