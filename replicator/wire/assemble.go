package wire

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"

	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Limits bound what an Assembler buffers.
type Limits struct {
	MaxSegmentBytes uint64 // largest uncompressed segment; 0: DefaultMaxSegmentBytes
	MaxPartBytes    int    // largest data of one part; 0: DefaultMaxPartBytes
}

// Validate fills in defaults and rejects impossible values.
func (l *Limits) Validate() error {
	if l.MaxSegmentBytes == 0 {
		l.MaxSegmentBytes = DefaultMaxSegmentBytes
	}
	if l.MaxPartBytes == 0 {
		l.MaxPartBytes = DefaultMaxPartBytes
	}
	if l.MaxPartBytes < 0 {
		return fmt.Errorf("segment limits: MaxPartBytes %d is negative", l.MaxPartBytes)
	}
	return nil
}

// Segment is a reassembled, verified segment.
type Segment struct {
	NodeID          string
	Seq, PrevSeq    uint64
	CRC             uint32
	Records, Points int64
	MinT, MaxT      int64
	// Backfill: the edge built the segment from its local store to fill a
	// gap (BACKLOG_OVERFLOW, or MISSING); BackfillPoints is the points the gap declared
	// for the numbers it covers, to be recorded instead of Points.
	Backfill       bool
	BackfillPoints int64
	// File is the segment file as the edge sealed it, verified.
	File            []byte
	CompressedBytes uint64
	// Traceparent is the first part's W3C trace context ("" if none).
	Traceparent string
}

// Assembler reassembles the segments of one node's stream.
type Assembler struct {
	nodeID string
	lim    Limits
	dec    *zstd.Decoder
	cur    *pb.ShipSegment // metadata of the segment being assembled
	buf    []byte
	// discard is a segment refused part-way: its remaining parts are
	// dropped without another error.
	discard uint64
}

// NewAssembler returns an Assembler for the stream of node nodeID.
func NewAssembler(nodeID string, lim Limits) (*Assembler, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(lim.MaxSegmentBytes),
		zstd.WithDecoderMaxWindow(maxWindowBytes),
		zstd.WithDecodeAllCapLimit(true),
	)
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return &Assembler{nodeID: nodeID, lim: lim, dec: dec}, nil
}

// Close releases the decoder.
func (a *Assembler) Close() { a.dec.Close() }

// Pending reports the segment being assembled (0 if none): a stream that
// ends now leaves it incomplete, and nothing of it is kept.
func (a *Assembler) Pending() uint64 {
	if a.cur == nil {
		return 0
	}
	return a.cur.Seq
}

// Add takes the next part of the stream. It returns the segment when the
// part completes one, nil while more parts are due, or an *Error refusing
// the segment. After a refusal the segment's remaining parts are dropped
// quietly, and the next segment starts afresh.
func (a *Assembler) Add(m *pb.ShipSegment) (*Segment, *Error) {
	if a.cur == nil {
		if m.Seq == a.discard && m.Offset != 0 {
			return nil, nil
		}
		a.discard = 0
		if err := a.start(m); err != nil {
			a.discard = m.Seq
			return nil, err
		}
	} else if err := a.continues(m); err != nil {
		a.refuse()
		return nil, err
	}
	if len(m.Data) > a.lim.MaxPartBytes {
		a.refuse()
		return nil, &Error{Seq: m.Seq, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_TOO_LARGE,
			Msg: fmt.Sprintf("part of %d bytes, more than the limit of %d", len(m.Data), a.lim.MaxPartBytes)}
	}
	if rest := a.cur.CompressedBytes - uint64(len(a.buf)); uint64(len(m.Data)) > rest {
		err := malformed(m.Seq, "part at offset %d carries %d bytes, only %d of compressed_bytes %d remain",
			m.Offset, len(m.Data), rest, a.cur.CompressedBytes)
		a.refuse()
		return nil, err
	}
	a.buf = append(a.buf, m.Data...)
	if uint64(len(a.buf)) < a.cur.CompressedBytes {
		return nil, nil
	}
	meta, data := a.cur, a.buf
	a.reset()
	return a.finish(meta, data)
}

func (a *Assembler) reset() { a.cur, a.buf = nil, nil }

// refuse drops the segment being assembled and the rest of its parts.
func (a *Assembler) refuse() {
	a.discard = a.cur.Seq
	a.reset()
}

// start checks the first part of a segment before anything is buffered.
func (a *Assembler) start(m *pb.ShipSegment) *Error {
	seq := m.Seq
	switch {
	case m.NodeId != a.nodeID:
		return malformed(seq, "segment of node %q on the stream of node %q", m.NodeId, a.nodeID)
	case seq == 0:
		return malformed(seq, "sequence 0")
	case m.PrevSeq >= seq:
		return malformed(seq, "prev_seq %d is not below seq %d", m.PrevSeq, seq)
	case m.Offset != 0:
		return malformed(seq, "first part at offset %d", m.Offset)
	case m.UncompressedBytes > a.lim.MaxSegmentBytes:
		return &Error{Seq: seq, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_TOO_LARGE,
			Msg: fmt.Sprintf("segment of %d bytes, more than the limit of %d", m.UncompressedBytes, a.lim.MaxSegmentBytes)}
	case m.Records < 0 || m.Points < 0 || m.MinTimeMs > m.MaxTimeMs:
		return malformed(seq, "records %d, points %d, time [%d, %d]", m.Records, m.Points, m.MinTimeMs, m.MaxTimeMs)
	case m.BackfillPoints != nil && *m.BackfillPoints < 0:
		return malformed(seq, "backfill of %d points", *m.BackfillPoints)
	}
	switch m.Compression {
	case pb.SegmentCompression_SEGMENT_COMPRESSION_NONE:
		if m.CompressedBytes != m.UncompressedBytes {
			return malformed(seq, "uncompressed segment with compressed_bytes %d and uncompressed_bytes %d", m.CompressedBytes, m.UncompressedBytes)
		}
	case pb.SegmentCompression_SEGMENT_COMPRESSION_ZSTD:
		// zstd never grows data by more than a small fraction; anything
		// larger is not a compressed segment within the limit.
		if m.CompressedBytes > m.UncompressedBytes+m.UncompressedBytes/64+1024 {
			return malformed(seq, "compressed_bytes %d for %d uncompressed", m.CompressedBytes, m.UncompressedBytes)
		}
	default:
		return malformed(seq, "unknown compression %v", m.Compression)
	}
	if m.CompressedBytes == 0 {
		return malformed(seq, "empty segment")
	}
	a.cur = cloneMeta(m)
	// Grow with the data that arrives rather than trust the declared size
	// up front: a sender that stops early then holds only what it sent.
	a.buf = make([]byte, 0, min(m.CompressedBytes, uint64(a.lim.MaxPartBytes)))
	return nil
}

// continues checks a later part against the first.
func (a *Assembler) continues(m *pb.ShipSegment) *Error {
	c := a.cur
	if m.Seq != c.Seq {
		return malformed(c.Seq, "segment %d started before segment %d was complete (%d of %d bytes)", m.Seq, c.Seq, len(a.buf), c.CompressedBytes)
	}
	if m.NodeId != c.NodeId || m.PrevSeq != c.PrevSeq || m.Crc32C != c.Crc32C || m.Compression != c.Compression ||
		m.UncompressedBytes != c.UncompressedBytes || m.CompressedBytes != c.CompressedBytes ||
		m.Records != c.Records || m.Points != c.Points || m.MinTimeMs != c.MinTimeMs || m.MaxTimeMs != c.MaxTimeMs ||
		(m.BackfillPoints == nil) != (c.BackfillPoints == nil) || m.GetBackfillPoints() != c.GetBackfillPoints() {
		return malformed(c.Seq, "part at offset %d changes the segment's metadata", m.Offset)
	}
	if m.Offset != uint64(len(a.buf)) {
		return malformed(c.Seq, "part at offset %d, expected %d", m.Offset, len(a.buf))
	}
	if len(m.Data) == 0 {
		return malformed(c.Seq, "empty part at offset %d", m.Offset)
	}
	return nil
}

// finish decompresses and verifies a complete segment.
func (a *Assembler) finish(m *pb.ShipSegment, data []byte) (*Segment, *Error) {
	seq := m.Seq
	damaged := func(format string, args ...any) (*Segment, *Error) {
		return nil, &Error{Seq: seq, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_CHECKSUM_MISMATCH, Retryable: true, Msg: fmt.Sprintf(format, args...)}
	}
	file := data
	if m.Compression == pb.SegmentCompression_SEGMENT_COMPRESSION_ZSTD {
		var err error
		// The output is capped at the declared size (WithDecodeAllCapLimit):
		// a decompression bomb stops there.
		file, err = a.dec.DecodeAll(data, make([]byte, 0, m.UncompressedBytes))
		if err != nil {
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				return damaged("decompresses to more than the declared %d bytes", m.UncompressedBytes)
			}
			return damaged("decompress: %v", err)
		}
	}
	if uint64(len(file)) != m.UncompressedBytes {
		return damaged("decompresses to %d bytes, %d declared", len(file), m.UncompressedBytes)
	}
	name := fmt.Sprintf("%s/%020d", m.NodeId, seq)
	info, err := wal.VerifySegment(name, file, nil)
	if err != nil {
		return damaged("%v", err)
	}
	switch {
	case info.CRC != m.Crc32C:
		return damaged("file checksum %08x, message says %08x", info.CRC, m.Crc32C)
	case info.NodeID != m.NodeId || info.Seq != seq || info.PrevSeq != m.PrevSeq:
		return nil, malformed(seq, "file is node %q segment %d after %d; message says %q %d after %d",
			info.NodeID, info.Seq, info.PrevSeq, m.NodeId, seq, m.PrevSeq)
	case info.Records != m.Records || info.Points != m.Points || info.MinT != m.MinTimeMs || info.MaxT != m.MaxTimeMs:
		return nil, malformed(seq, "file holds %d records, %d points, time [%d, %d]; message says %d, %d, [%d, %d]",
			info.Records, info.Points, info.MinT, info.MaxT, m.Records, m.Points, m.MinTimeMs, m.MaxTimeMs)
	}
	return &Segment{
		NodeID: m.NodeId, Seq: seq, PrevSeq: m.PrevSeq, CRC: info.CRC,
		Records: info.Records, Points: info.Points, MinT: info.MinT, MaxT: info.MaxT,
		Backfill: m.BackfillPoints != nil, BackfillPoints: m.GetBackfillPoints(),
		File: file, CompressedBytes: m.CompressedBytes, Traceparent: m.Traceparent,
	}, nil
}
