package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotSealed is returned by ReadSealed for a segment that is still open
// or not yet durably sealed.
var ErrNotSealed = errors.New("wal: segment not sealed")

// ReadSealed returns the whole file of the sealed segment seq, verified
// (header, every record, footer and whole-file CRC, and the CRC the Log
// recorded when it sealed or recovered it), with its description. It is
// how the replicator reads a segment to ship it.
//
// A segment the Log does not have (never created, or removed by
// RemoveBefore, possibly while it was being read) yields an error matching
// fs.ErrNotExist; one not sealed yet, ErrNotSealed; damage, a
// *CorruptionError. Safe for concurrent use, also with Append and
// RemoveBefore.
func (l *Log) ReadSealed(seq uint64) ([]byte, SegmentInfo, error) {
	l.mu.Lock()
	var info SegmentInfo
	found := false
	for _, s := range l.segs {
		if s.info.Seq == seq {
			info, found = s.info, true
			break
		}
	}
	l.mu.Unlock()
	switch {
	case !found:
		return nil, SegmentInfo{}, fmt.Errorf("read segment %d: %w", seq, fs.ErrNotExist)
	case !info.Sealed:
		return nil, SegmentInfo{}, fmt.Errorf("read segment %d: %w", seq, ErrNotSealed)
	}
	f, err := l.fs.OpenFile(info.Path, os.O_RDONLY, 0)
	if err != nil {
		return nil, SegmentInfo{}, fmt.Errorf("read segment %d: %w", seq, err)
	}
	defer f.Close()
	// A sealed file never changes, so its size is the one recorded; a file
	// of another size is damaged, and reading only what was recorded keeps
	// the allocation bounded by what the Log wrote.
	size, err := f.Size()
	if err != nil {
		return nil, SegmentInfo{}, fmt.Errorf("stat segment %s: %w", info.Path, err)
	}
	if size != info.Bytes {
		return nil, SegmentInfo{}, &CorruptionError{Path: info.Path, Offset: min(size, info.Bytes),
			Reason: fmt.Sprintf("sealed segment is %d bytes on disk, %d when sealed", size, info.Bytes)}
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, SegmentInfo{}, fmt.Errorf("read segment %s: %w", info.Path, err)
	}
	got, err := VerifySegment(info.Path, b, nil)
	if err != nil {
		return nil, SegmentInfo{}, err
	}
	if got.CRC != info.CRC || got.Seq != info.Seq {
		return nil, SegmentInfo{}, &CorruptionError{Path: info.Path, Offset: size - 8,
			Reason: fmt.Sprintf("segment %d with checksum %08x on disk, %d with %08x when sealed", got.Seq, got.CRC, info.Seq, info.CRC)}
	}
	return b, got, nil
}

// VerifySegment checks that b is a whole sealed segment file (header,
// every record's CRC, footer counts, size and whole-file CRC), calls fn for
// each record in order if fn is not nil (r.Data is valid only during the
// call), and describes it; Path is name. Damage or a missing footer yields a *CorruptionError
// naming name and the offset; fn may have been called for the records
// before the damage. It is the check a receiver of shipped segments runs,
// and never panics on any input.
func VerifySegment(name string, b []byte, fn func(r Record) error) (SegmentInfo, error) {
	res, err := scanSegment(bytes.NewReader(b), int64(len(b)), fn)
	if err != nil {
		return SegmentInfo{}, fmt.Errorf("read segment %s: %w", name, err)
	}
	return res.sealed(name)
}
