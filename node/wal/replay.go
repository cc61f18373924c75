package wal

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

// Replay calls fn for every record of every segment with Seq >= fromSeq,
// in log order: sealed segments, segments being sealed, and the records of
// the open segment appended before the call (appended, not necessarily
// durable yet). r.Data is valid only during fn. fn may call
// Append, whose records Replay does not return. A segment removed by
// RemoveBefore while Replay runs makes Replay fail. An error from fn stops
// Replay and is returned.
func (l *Log) Replay(fromSeq uint64, fn func(seq uint64, r Record) error) error {
	type span struct {
		seq        uint64
		path       string
		start, end int64
	}
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	if err := l.cur.flush(); err != nil {
		err = l.failLocked(err)
		l.mu.Unlock()
		return err
	}
	var spans []span
	for _, s := range l.segs {
		if s.info.Seq >= fromSeq {
			spans = append(spans, span{s.info.Seq, s.info.Path, s.hdrLen, s.dataEnd})
		}
	}
	l.mu.Unlock()

	for _, sp := range spans {
		if err := l.replaySegment(sp.seq, sp.path, sp.start, sp.end, fn); err != nil {
			return err
		}
	}
	return nil
}

// replaySegment reads the frames in [start, end) of a segment file.
func (l *Log) replaySegment(seq uint64, path string, start, end int64, fn func(uint64, Record) error) error {
	f, err := l.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("replay segment %d: %w", seq, err)
	}
	defer f.Close()
	res := scanResult{end: start}
	br := bufio.NewReaderSize(io.NewSectionReader(f, start, end-start), readBufferSize(end-start))
	err = scanFrames(br, end, &res, false, func(r Record) error { return fn(seq, r) })
	if err != nil {
		return err
	}
	if res.stop != stopEOF {
		reason := res.reason
		if res.stop == stopFooter || res.stop == stopBadFooter {
			reason = "footer where a record should be"
		}
		return &CorruptionError{Path: path, Offset: res.end, Reason: reason}
	}
	return nil
}
