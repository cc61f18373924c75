package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"time"
)

const (
	headerMagic = "TWAL"
	footerMagic = "SEAL"
	// stateVersion is the version byte of the state file.
	stateVersion = 1

	// headerFixedBytes is the header's size without the node id:
	// magic, version, id length, seq, prev seq, created, crc.
	headerFixedBytes = 4 + 1 + 1 + 8 + 8 + 8 + 4
	maxHeaderBytes   = headerFixedBytes + MaxNodeIDBytes

	// footerBytes is the footer's size: marker, records, points, min time,
	// max time, total bytes, crc, magic.
	footerBytes = 1 + 8 + 8 + 8 + 8 + 8 + 4 + 4
	// footerCRCOffset is where the CRC sits inside the footer; the CRC
	// covers every byte of the file before it.
	footerCRCOffset = footerBytes - 8

	maxMetaBytes   = 3 * binary.MaxVarintLen64
	maxBodyBytes   = maxMetaBytes + MaxRecordBytes
	maxFramePrefix = binary.MaxVarintLen64 + 4

	segmentSuffix = ".seg"
	seqDigits     = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentName is the file name of segment seq: zero-padded so that names
// sort in sequence order.
func segmentName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, segmentSuffix) }

// parseSegmentName returns the sequence of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	if len(name) != seqDigits+len(segmentSuffix) {
		return 0, false
	}
	return parseSeqPrefix(name)
}

// parseSeqPrefix returns the sequence of a name that starts like a segment
// file name (quarantined files may carry a suffix).
func parseSeqPrefix(name string) (uint64, bool) {
	if len(name) < seqDigits+len(segmentSuffix) || name[seqDigits:seqDigits+len(segmentSuffix)] != segmentSuffix {
		return 0, false
	}
	for _, c := range name[:seqDigits] {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	seq, err := strconv.ParseUint(name[:seqDigits], 10, 64)
	return seq, err == nil && seq > 0
}

// header opens every segment file.
type header struct {
	version uint8 // FormatV1 or FormatV2; 0 is written as FormatV1
	nodeID  string
	seq     uint64
	prevSeq uint64
	created int64 // wall clock, unix nanoseconds; for people, never for ordering
}

func (h header) size() int64 { return headerFixedBytes + int64(len(h.nodeID)) }

func appendHeader(dst []byte, h header) []byte {
	start := len(dst)
	dst = append(dst, headerMagic...)
	v := h.version
	if v == 0 {
		v = FormatV1
	}
	dst = append(dst, v, byte(len(h.nodeID)))
	dst = append(dst, h.nodeID...)
	dst = binary.LittleEndian.AppendUint64(dst, h.seq)
	dst = binary.LittleEndian.AppendUint64(dst, h.prevSeq)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.created))
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// parseHeader decodes the header at the start of b, which holds the first
// maxHeaderBytes of the file or the whole file if it is shorter. It returns
// the header's size, or a reason why b does not start with a valid header.
func parseHeader(b []byte) (header, int64, string) {
	if len(b) < 6 {
		return header{}, 0, "truncated header"
	}
	if string(b[:4]) != headerMagic {
		return header{}, 0, fmt.Sprintf("bad header magic %q", b[:4])
	}
	if b[4] != FormatV1 && b[4] != FormatV2 {
		return header{}, 0, fmt.Sprintf("unsupported format version %d", b[4])
	}
	idLen := int(b[5])
	n := headerFixedBytes + idLen
	if len(b) < n {
		return header{}, 0, "truncated header"
	}
	if got, want := crc32.Checksum(b[:n-4], castagnoli), binary.LittleEndian.Uint32(b[n-4:]); got != want {
		return header{}, 0, fmt.Sprintf("header checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	if idLen == 0 {
		return header{}, 0, "empty node id"
	}
	p := b[6+idLen:]
	h := header{
		version: b[4],
		nodeID:  string(b[6 : 6+idLen]),
		seq:     binary.LittleEndian.Uint64(p),
		prevSeq: binary.LittleEndian.Uint64(p[8:]),
		created: int64(binary.LittleEndian.Uint64(p[16:])),
	}
	if h.seq == 0 {
		return header{}, 0, "sequence 0"
	}
	return h, int64(n), ""
}

// footer closes a sealed segment.
type footer struct {
	recordStats
	totalBytes int64  // size of the whole file, footer included
	crc        uint32 // CRC32C of every byte of the file before this field
}

// recordStats counts a segment's records and their points, with the time
// range of the records that carry points (both 0 when none does): what
// its footer states and SegmentInfo reports.
type recordStats struct {
	records, points int64
	minT, maxT      int64
}

// add counts r.
func (s *recordStats) add(r Record) {
	s.records++
	if r.Points > 0 {
		if s.points == 0 {
			s.minT, s.maxT = r.MinT, r.MaxT
		} else {
			s.minT, s.maxT = min(s.minT, r.MinT), max(s.maxT, r.MaxT)
		}
		s.points += r.Points
	}
}

// appendFooter appends the footer of a segment whose bytes before the
// footer have the running CRC32C fileCRC, and sets f.crc.
func appendFooter(dst []byte, f *footer, fileCRC uint32) []byte {
	start := len(dst)
	dst = append(dst, 0)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.records))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.points))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.minT))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.maxT))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.totalBytes))
	f.crc = crc32.Update(fileCRC, castagnoli, dst[start:])
	dst = binary.LittleEndian.AppendUint32(dst, f.crc)
	return append(dst, footerMagic...)
}

// parseFooter decodes b (footerBytes long) without checking it against the
// records; that is the reader's job.
func parseFooter(b []byte) (footer, string) {
	if b[0] != 0 {
		return footer{}, "footer marker missing"
	}
	if string(b[footerBytes-4:]) != footerMagic {
		return footer{}, fmt.Sprintf("bad footer magic %q", b[footerBytes-4:])
	}
	le := binary.LittleEndian
	return footer{
		recordStats: recordStats{
			records: int64(le.Uint64(b[1:])),
			points:  int64(le.Uint64(b[9:])),
			minT:    int64(le.Uint64(b[17:])),
			maxT:    int64(le.Uint64(b[25:])),
		},
		totalBytes: int64(le.Uint64(b[33:])),
		crc:        le.Uint32(b[footerCRCOffset:]),
	}, ""
}

// Record is one entry of the log.
type Record struct {
	Data       []byte // opaque payload
	MinT, MaxT int64  // time range of the points in Data, milliseconds
	Points     int64  // number of points in Data
}

func (r Record) check() error {
	switch {
	case r.Points < 0:
		return fmt.Errorf("%w: %d points", ErrInvalidRecord, r.Points)
	case r.MaxT < r.MinT:
		return fmt.Errorf("%w: time range [%d, %d] ends before it starts", ErrInvalidRecord, r.MinT, r.MaxT)
	case len(r.Data) > MaxRecordBytes:
		return fmt.Errorf("%w: %d bytes of data, more than %d", ErrInvalidRecord, len(r.Data), MaxRecordBytes)
	}
	return nil
}

// appendFrame appends r framed as a record:
//
//	uvarint(n) crc32c(4, LE) body(n)
//	body = varint(MinT) uvarint(MaxT-MinT) uvarint(Points) Data
//
// where the CRC covers the length bytes and the body.
// REQUIRES: r.check() == nil.
func appendFrame(dst []byte, r Record) []byte {
	var meta [maxMetaBytes]byte
	m := binary.PutVarint(meta[:], r.MinT)
	m += binary.PutUvarint(meta[m:], uint64(r.MaxT)-uint64(r.MinT))
	m += binary.PutUvarint(meta[m:], uint64(r.Points))
	start := len(dst)
	dst = binary.AppendUvarint(dst, uint64(m+len(r.Data)))
	lenEnd := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = append(dst, meta[:m]...)
	dst = append(dst, r.Data...)
	crc := crc32.Update(0, castagnoli, dst[start:lenEnd])
	crc = crc32.Update(crc, castagnoli, dst[lenEnd+4:])
	binary.LittleEndian.PutUint32(dst[lenEnd:], crc)
	return dst
}

// frameSize is the size of r's frame.
func frameSize(r Record) int64 {
	var meta [maxMetaBytes]byte
	m := binary.PutVarint(meta[:], r.MinT)
	m += binary.PutUvarint(meta[m:], uint64(r.MaxT)-uint64(r.MinT))
	m += binary.PutUvarint(meta[m:], uint64(r.Points))
	n := uint64(m + len(r.Data))
	return int64(binary.PutUvarint(meta[:], n)) + 4 + int64(n)
}

// decodeBody decodes a frame body whose checksum matched. r.Data aliases
// body.
func decodeBody(body []byte) (Record, string) {
	minT, a := binary.Varint(body)
	if a <= 0 {
		return Record{}, "bad min time"
	}
	span, b := binary.Uvarint(body[a:])
	if b <= 0 {
		return Record{}, "bad time span"
	}
	points, c := binary.Uvarint(body[a+b:])
	if c <= 0 {
		return Record{}, "bad point count"
	}
	maxT := int64(uint64(minT) + span)
	if maxT < minT {
		return Record{}, "time span overflows"
	}
	if points > 1<<63-1 {
		return Record{}, "point count overflows"
	}
	return Record{Data: body[a+b+c:], MinT: minT, MaxT: maxT, Points: int64(points)}, ""
}

// Position is where a record ends: its segment and the byte offset just
// past its frame. Positions order records: by Seq, then by Offset.
type Position struct {
	Seq    uint64
	Offset int64
}

func (p Position) less(q Position) bool {
	return p.Seq < q.Seq || p.Seq == q.Seq && p.Offset < q.Offset
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	Seq     uint64
	Path    string
	Sealed  bool  // footer written and durable; the file will not change again
	Bytes   int64 // file size (for the open segment: including bytes not yet written out)
	Records int64
	Points  int64
	// MinT and MaxT span the records that carry points; both are 0 when
	// the segment has no points.
	MinT, MaxT int64
	NodeID     string
	// PrevSeq is the sequence of the last segment sealed before this one
	// was created (0 for the first). Sequence numbers can skip (an empty
	// segment is removed rather than sealed), so a reader that holds
	// PrevSeq can tell a skipped number from a lost segment.
	PrevSeq uint64
	// CRC is the CRC32C stored in the footer, over the whole file before
	// it; with NodeID and Seq it identifies a sealed segment's contents.
	// 0 until sealed.
	CRC     uint32
	Created time.Time // wall clock when the segment was created; for people only
	// Version is the segment's format version (FormatV1 or FormatV2): which
	// kind of record payload it holds.
	Version uint8
}

// stats returns the counts and time range of info.
func (info *SegmentInfo) stats() recordStats {
	return recordStats{records: info.Records, points: info.Points, minT: info.MinT, maxT: info.MaxT}
}

// count adds r to the counts and time range of info.
func (info *SegmentInfo) count(r Record) {
	st := info.stats()
	st.add(r)
	info.Records, info.Points, info.MinT, info.MaxT = st.records, st.points, st.minT, st.maxT
}
