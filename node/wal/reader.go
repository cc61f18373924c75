package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"
)

// readBufferSize is the read buffer for size bytes: up to 64 KiB, and at
// least enough to peek at a whole header.
func readBufferSize(size int64) int {
	return int(max(min(size, 64<<10), 2*maxHeaderBytes))
}

// stopKind says why a scan of a segment file ended.
type stopKind int

const (
	stopEOF       stopKind = iota // the file ends right after the last valid record: not sealed
	stopFooter                    // a valid footer ends the file: sealed
	stopBadFooter                 // a footer starts after the last valid record but is torn or wrong
	stopBadFrame                  // the frame after the last valid record is torn or damaged
	stopBadHeader                 // no valid header
)

// scanResult is what a scan learnt about a segment file.
type scanResult struct {
	hdr    header
	hdrLen int64
	stop   stopKind
	reason string // why the scan stopped, for the bad kinds
	end    int64  // offset just past the last valid record (where the scan stopped)
	crc    uint32 // CRC32C of bytes [0, end); only if the scan computed it
	footer footer // if stop == stopFooter

	recordStats // of the valid records
}

func (r *scanResult) badFrame(format string, args ...any) {
	r.stop, r.reason = stopBadFrame, fmt.Sprintf(format, args...)
}

// scanSegment reads a whole segment file of size bytes: the header, every
// record (handed to fn if not nil; Data valid only during the call) and the
// footer if there is one. It stops at the first thing that is not valid and
// says so in the result; the error is for I/O failures and fn's errors.
func scanSegment(ra io.ReaderAt, size int64, fn func(Record) error) (scanResult, error) {
	var res scanResult
	br := bufio.NewReaderSize(io.NewSectionReader(ra, 0, size), readBufferSize(size))
	b, err := br.Peek(maxHeaderBytes)
	if err != nil && !errors.Is(err, io.EOF) {
		return res, fmt.Errorf("read header: %w", err)
	}
	h, n, reason := parseHeader(b)
	if reason != "" {
		res.stop, res.reason = stopBadHeader, reason
		return res, nil
	}
	res.hdr, res.hdrLen, res.end = h, n, n
	res.crc = crc32.Checksum(b[:n], castagnoli)
	if _, err := br.Discard(int(n)); err != nil {
		return res, fmt.Errorf("read header: %w", err)
	}
	err = scanFrames(br, size, &res, true, fn)
	return res, err
}

// scanFrames reads frames from br, positioned at res.end, up to offset
// size. It updates res as it goes; with fileCRC it keeps res.crc running.
func scanFrames(br *bufio.Reader, size int64, res *scanResult, fileCRC bool, fn func(Record) error) error {
	var body []byte
	for {
		p, err := br.Peek(maxFramePrefix)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read frame at offset %d: %w", res.end, err)
		}
		if len(p) == 0 {
			res.stop = stopEOF
			return nil
		}
		bodyLen, k := binary.Uvarint(p)
		switch {
		case k == 0:
			res.badFrame("truncated frame length")
			return nil
		case k < 0:
			res.badFrame("frame length overflows")
			return nil
		case bodyLen == 0:
			return scanFooter(br, size, res, fileCRC)
		case bodyLen > maxBodyBytes:
			res.badFrame("frame length %d exceeds the limit of %d", bodyLen, maxBodyBytes)
			return nil
		}
		frameLen := int64(k) + 4 + int64(bodyLen)
		if left := size - res.end; frameLen > left {
			res.badFrame("frame of %d bytes runs past the end of the data (%d bytes left)", frameLen, left)
			return nil
		}
		want := binary.LittleEndian.Uint32(p[k:])
		crc := crc32.Update(0, castagnoli, p[:k])
		var nextFileCRC uint32
		if fileCRC {
			nextFileCRC = crc32.Update(res.crc, castagnoli, p[:k+4])
		}
		if _, err := br.Discard(k + 4); err != nil {
			return fmt.Errorf("read frame at offset %d: %w", res.end, err)
		}
		if uint64(cap(body)) < bodyLen {
			body = make([]byte, bodyLen)
		}
		body = body[:bodyLen]
		if _, err := io.ReadFull(br, body); err != nil {
			return fmt.Errorf("read frame at offset %d: %w", res.end, err)
		}
		if got := crc32.Update(crc, castagnoli, body); got != want {
			res.badFrame("record checksum mismatch (stored %08x, computed %08x)", want, got)
			return nil
		}
		rec, reason := decodeBody(body)
		if reason != "" {
			res.badFrame("%s", reason)
			return nil
		}
		if fileCRC {
			res.crc = crc32.Update(nextFileCRC, castagnoli, body)
		}
		res.end += frameLen
		res.add(rec)
		if fn != nil {
			if err := fn(rec); err != nil {
				return err
			}
		}
	}
}

// scanFooter checks the footer that starts at res.end against the records
// scanned before it.
func scanFooter(br *bufio.Reader, size int64, res *scanResult, fileCRC bool) error {
	b, err := br.Peek(footerBytes)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read footer at offset %d: %w", res.end, err)
	}
	bad := func(format string, args ...any) error {
		res.stop, res.reason = stopBadFooter, fmt.Sprintf(format, args...)
		return nil
	}
	if len(b) < footerBytes {
		return bad("truncated footer (%d of %d bytes)", len(b), footerBytes)
	}
	f, reason := parseFooter(b)
	switch {
	case reason != "":
		return bad("%s", reason)
	case size != res.end+footerBytes:
		return bad("%d bytes after the footer", size-res.end-footerBytes)
	case f.totalBytes != size:
		return bad("footer says %d bytes, file has %d", f.totalBytes, size)
	case f.recordStats != res.recordStats:
		return bad("footer says %d records, %d points, time [%d, %d]; records hold %d, %d, [%d, %d]",
			f.records, f.points, f.minT, f.maxT, res.records, res.points, res.minT, res.maxT)
	}
	if fileCRC {
		if got := crc32.Update(res.crc, castagnoli, b[:footerCRCOffset]); got != f.crc {
			return bad("file checksum mismatch (stored %08x, computed %08x)", f.crc, got)
		}
	}
	res.stop, res.footer = stopFooter, f
	return nil
}

// info describes the sealed segment a scan ending in stopFooter read.
func (r *scanResult) info(path string) SegmentInfo {
	return SegmentInfo{
		Seq:     r.hdr.seq,
		Path:    path,
		Sealed:  r.stop == stopFooter,
		Bytes:   r.footer.totalBytes,
		Records: r.records,
		Points:  r.points,
		MinT:    r.minT,
		MaxT:    r.maxT,
		NodeID:  r.hdr.nodeID,
		Version: r.hdr.version,
		PrevSeq: r.hdr.prevSeq,
		CRC:     r.footer.crc,
		Created: time.Unix(0, r.hdr.created),
	}
}

// sealed describes the segment at path that the scan read whole: its
// info if the scan ended at a valid footer, else a *CorruptionError.
func (r *scanResult) sealed(path string) (SegmentInfo, error) {
	switch r.stop {
	case stopFooter:
		return r.info(path), nil
	case stopEOF:
		return SegmentInfo{}, &CorruptionError{Path: path, Offset: r.end, Reason: "segment is not sealed (no footer)"}
	default:
		return SegmentInfo{}, &CorruptionError{Path: path, Offset: r.end, Reason: r.reason}
	}
}

// ReadSegment reads the sealed segment file at path by itself, verifying
// its header, every record and its footer, and calls fn for each record in
// order (r.Data is valid only during the call). A file that is damaged or
// not sealed yields a *CorruptionError (errors.Is(err, ErrCorrupt)); fn may
// have been called for the records before the damage, so a caller that
// needs all or nothing must hold back until ReadSegment returns nil. A nil
// fn only verifies; a nil fsys means the real file system.
func ReadSegment(fsys FS, path string, fn func(r Record) error) (SegmentInfo, error) {
	if fsys == nil {
		fsys = vfs.OS{}
	}
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return SegmentInfo{}, fmt.Errorf("open segment %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return SegmentInfo{}, fmt.Errorf("stat segment %s: %w", path, err)
	}
	res, err := scanSegment(f, size, fn)
	if err != nil {
		return SegmentInfo{}, fmt.Errorf("read segment %s: %w", path, err)
	}
	return res.sealed(path)
}
