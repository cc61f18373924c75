package wal

import (
	"fmt"
	"hash/crc32"
)

// EncodeSegment builds, in memory, the sealed segment file the Log would
// have written for nodeID's segment seq (created after prevSeq) holding
// recs in order: header, one frame per record, footer with the counts,
// the time span of the records that carry points, the file size and the
// whole-file CRC. It returns the file and its description (Sealed, with
// the CRC; Path empty). It is how the replicator builds a backfill from
// the node's store.
//
// The header's creation time is 0, so the same arguments always build the
// same bytes (and CRC): a backfill built twice from unchanged data is the
// same segment. A segment without records is valid. Bad arguments (an
// empty or too long node id, seq 0, prevSeq not below seq, an invalid
// record) yield an error, never a panic. Safe for concurrent use.
func EncodeSegment(nodeID string, seq, prevSeq uint64, recs []Record) ([]byte, SegmentInfo, error) {
	return EncodeSegmentVersion(FormatV1, nodeID, seq, prevSeq, recs)
}

// EncodeSegmentVersion is EncodeSegment with the header's format version
// (FormatV1 or FormatV2) chosen: the caller vouches that the records hold
// the payload kind that version names.
func EncodeSegmentVersion(version uint8, nodeID string, seq, prevSeq uint64, recs []Record) ([]byte, SegmentInfo, error) {
	switch {
	case nodeID == "" || len(nodeID) > MaxNodeIDBytes:
		return nil, SegmentInfo{}, fmt.Errorf("encode segment %d: node id of %d bytes (1 to %d)", seq, len(nodeID), MaxNodeIDBytes)
	case seq == 0:
		return nil, SegmentInfo{}, fmt.Errorf("encode segment of %q: sequence 0", nodeID)
	case version != FormatV1 && version != FormatV2:
		return nil, SegmentInfo{}, fmt.Errorf("encode segment %d of %q: format version %d", seq, nodeID, version)
	case prevSeq >= seq:
		return nil, SegmentInfo{}, fmt.Errorf("encode segment %d of %q: prev seq %d is not below it", seq, nodeID, prevSeq)
	}
	h := header{version: version, nodeID: nodeID, seq: seq, prevSeq: prevSeq}
	size := h.size() + footerBytes
	for i, r := range recs {
		if err := r.check(); err != nil {
			return nil, SegmentInfo{}, fmt.Errorf("encode segment %d of %q: record %d: %w", seq, nodeID, i, err)
		}
		size += frameSize(r)
	}
	info := SegmentInfo{Seq: seq, PrevSeq: prevSeq, NodeID: nodeID, Sealed: true, Bytes: size, Version: version}
	b := make([]byte, 0, size)
	b = appendHeader(b, h)
	for _, r := range recs {
		b = appendFrame(b, r)
		info.count(r)
	}
	f := footer{recordStats: info.stats(), totalBytes: size}
	b = appendFooter(b, &f, crc32.Checksum(b, castagnoli))
	if int64(len(b)) != size {
		return nil, SegmentInfo{}, fmt.Errorf("BUG: encode segment %d of %q: %d bytes, %d computed", seq, nodeID, len(b), size)
	}
	info.CRC = f.crc
	return b, info, nil
}

// FrameBytes is what r adds to a segment file: its frame (length, CRC,
// time span, point count) and its data.
func FrameBytes(r Record) int64 { return frameSize(r) }

// SegmentOverheadBytes is the size of a segment file of nodeID without
// records: header and footer.
func SegmentOverheadBytes(nodeID string) int64 {
	return headerFixedBytes + int64(len(nodeID)) + footerBytes
}
