package wal

import (
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"time"
)

const (
	// flushBytes is how much Append buffers before handing it to the OS.
	flushBytes = 128 << 10
	// maxRetainedBufBytes: a larger buffer (grown by a huge record) is
	// dropped after a flush rather than kept for the life of the segment.
	maxRetainedBufBytes = 1 << 20
)

// Append writes r as the next record of the open segment and returns the
// position where it ends. The record is buffered: it is durable only once
// Sync(pos) returns nil. Append never cuts a segment and never waits for an
// fsync. Records keep the order of Append calls. Safe for concurrent use.
func (l *Log) Append(r Record) (Position, error) { return l.append(0, r) }

// AppendIn is Append, but only into the open segment seq (as returned by
// MaybeCut): if the open segment is another one, because the Log recovered
// from a failure and opened a fresh segment in the meantime, it appends
// nothing and returns an error matching ErrSegmentChanged. A caller that
// declares series at the start of each segment uses it so that no record
// lands in a segment that lacks the declarations it relies on.
func (l *Log) AppendIn(seq uint64, r Record) (Position, error) {
	if seq == 0 {
		return Position{}, fmt.Errorf("wal: AppendIn segment 0: %w", ErrSegmentChanged)
	}
	return l.append(seq, r)
}

func (l *Log) append(seq uint64, r Record) (Position, error) {
	if err := r.check(); err != nil {
		return Position{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return Position{}, err
	}
	w := l.cur
	s := w.seg
	if seq != 0 && s.info.Seq != seq {
		return Position{}, fmt.Errorf("wal: append to segment %d, but segment %d is open: %w", seq, s.info.Seq, ErrSegmentChanged)
	}
	start := len(w.buf)
	w.buf = appendFrame(w.buf, r)
	w.crc = crc32.Update(w.crc, castagnoli, w.buf[start:])
	s.dataEnd += int64(len(w.buf) - start)
	s.info.Bytes = s.dataEnd
	if s.info.Records == 0 {
		w.firstAt = time.Now()
	}
	s.info.count(r)
	pos := Position{Seq: s.info.Seq, Offset: s.dataEnd}
	if len(w.buf) >= flushBytes {
		if err := w.flush(); err != nil {
			return Position{}, l.failLocked(err)
		}
	}
	return pos, nil
}

// MaybeCut seals the open segment and opens the next one if the open
// segment holds at least one record and is due (sealDue): it has reached
// MaxSegmentBytes (footer included), or its first record is MaxSegmentAge
// old and it holds MinSegmentPoints points, or its first record is
// MinPointsWaitFactor × MaxSegmentAge old. It returns the sequence of the
// open segment after the call and whether it cut.
//
// MaybeCut does not wait for the seal: the background syncer writes the
// footer and fsyncs it, and Segments reports the segment Sealed once that is
// durable. Since the caller's next Append goes into the new segment, a
// caller that makes segments self-contained holds its own lock across
// MaybeCut and Append.
func (l *Log) MaybeCut() (seq uint64, cut bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, false, err
	}
	w := l.cur
	s := w.seg
	if s.info.Records == 0 || !sealDue(s.dataEnd+footerBytes, s.info.Points, time.Since(w.firstAt), l.opts) {
		return s.info.Seq, false, nil
	}
	if err := l.cutLocked(); err != nil {
		return l.cur.seg.info.Seq, false, err
	}
	return l.cur.seg.info.Seq, true, nil
}

// sealDue is the seal policy: whether an open segment of size bytes
// (footer included) and points points, whose first record is age old, is
// to be cut under o.
func sealDue(size, points int64, age time.Duration, o Options) bool {
	switch {
	case size >= o.MaxSegmentBytes:
		return true
	case age < o.MaxSegmentAge:
		return false
	case points >= o.MinSegmentPoints:
		return true
	default:
		// NB: a segment short of its points waits a bounded time only:
		// the WAL keeps it durable meanwhile, but the cloud, the fresh
		// tail's watermark and the release of WAL files all wait with it.
		limit := MinPointsWaitFactor * o.MaxSegmentAge
		if limit/MinPointsWaitFactor != o.MaxSegmentAge {
			limit = math.MaxInt64 // an age of centuries: no overflow to a negative limit
		}
		return age >= limit
	}
}

// SetSealPolicy changes MaxSegmentAge and MinSegmentPoints while the Log
// runs, with Validate's bounds (maxAge > 0). The open segment is judged by
// the new policy at the next MaybeCut.
func (l *Log) SetSealPolicy(maxAge time.Duration, minPoints int64) error {
	if maxAge <= 0 || minPoints < 0 || minPoints > MaxMinSegmentPoints {
		return fmt.Errorf("wal seal policy: segment age %v must be positive and min points %d within 0..%d", maxAge, minPoints, MaxMinSegmentPoints)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opts.MaxSegmentAge, l.opts.MinSegmentPoints = maxAge, minPoints
	return nil
}

// SealPolicy returns the MaxSegmentAge and MinSegmentPoints in force.
func (l *Log) SealPolicy() (maxAge time.Duration, minPoints int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opts.MaxSegmentAge, l.opts.MinSegmentPoints
}

// Cut seals the open segment now if it holds at least one record, waits
// until the seal is durable, and returns the sequence of the open segment
// after the call.
func (l *Log) Cut() (seq uint64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	old := l.cur.seg
	if old.info.Records == 0 {
		return old.info.Seq, nil
	}
	if err := l.cutLocked(); err != nil {
		return l.cur.seg.info.Seq, err
	}
	for !old.info.Sealed {
		if l.err != nil {
			return l.cur.seg.info.Seq, l.err
		}
		l.kickLocked()
		l.cond.Wait()
	}
	return l.cur.seg.info.Seq, nil
}

// cutLocked hands the open segment to the syncer for sealing and opens the
// next one. If the next segment cannot be created the open one stays open
// and the Log stays usable.
// REQUIRES: mu held, l.cur holds at least one record.
func (l *Log) cutLocked() error {
	old := l.cur
	if err := old.flush(); err != nil {
		return l.failLocked(err)
	}
	next, err := l.createSegmentLocked(old.seg.info.Seq)
	if err != nil {
		return err
	}
	l.sealing = append(l.sealing, l.prepareSealLocked(old))
	l.lastSealed = old.seg.info.Seq
	l.cur = next
	l.kickLocked()
	return nil
}

// createSegmentLocked creates segment l.nextSeq, with prevSeq in its header,
// and adds it to l.segs. Its header is buffered; the syncer writes and
// fsyncs it, and the directory, before any record in it is durable.
// REQUIRES: mu held.
func (l *Log) createSegmentLocked(prevSeq uint64) (*segWriter, error) {
	seq := l.nextSeq
	path := l.path(segmentName(seq))
	f, err := l.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment %d: %w", seq, err)
	}
	now := time.Now()
	h := header{version: l.opts.Format, nodeID: l.opts.NodeID, seq: seq, prevSeq: prevSeq, created: now.UnixNano()}
	w := &segWriter{f: f}
	w.buf = appendHeader(w.buf, h)
	w.crc = crc32.Checksum(w.buf, castagnoli)
	w.seg = &segment{
		info: SegmentInfo{
			Seq:     seq,
			Path:    path,
			Bytes:   h.size(),
			NodeID:  h.nodeID,
			Version: l.opts.Format,
			PrevSeq: prevSeq,
			Created: time.Unix(0, h.created),
		},
		hdrLen:  h.size(),
		dataEnd: h.size(),
	}
	l.nextSeq++
	l.segs = append(l.segs, w.seg)
	l.dirDirty = true
	return w, nil
}

// prepareSealLocked computes the footer of w, whose records are all
// flushed.
// REQUIRES: mu held.
func (l *Log) prepareSealLocked(w *segWriter) *sealJob {
	s := w.seg
	if len(w.buf) != 0 {
		panic("BUG: sealing a segment with buffered records")
	}
	f := footer{recordStats: s.info.stats(), totalBytes: s.dataEnd + footerBytes}
	b := appendFooter(make([]byte, 0, footerBytes), &f, w.crc)
	return &sealJob{w: w, footer: b, crc: f.crc, began: time.Now()}
}

// sealedLocked records that j's footer is durable and its file closed.
// REQUIRES: mu held.
func (l *Log) sealedLocked(j *sealJob) {
	s := j.w.seg
	s.info.Sealed = true
	s.info.Bytes = s.dataEnd + footerBytes
	s.info.CRC = j.crc
	j.w.f = nil
	j.w.synced = s.info.Bytes
	if len(l.sealing) > 0 && l.sealing[0] == j {
		l.sealing = l.sealing[1:]
	}
	l.cond.Broadcast()
	if l.opts.OnSeal != nil {
		l.opts.OnSeal(s.info, j.began)
	}
}

// flush writes the buffered frames to the file.
func (w *segWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.f.Write(w.buf)
	w.flushed += int64(n)
	if err != nil {
		return fmt.Errorf("write segment %s: %w", w.seg.info.Path, err)
	}
	if cap(w.buf) > maxRetainedBufBytes {
		w.buf = nil
	} else {
		w.buf = w.buf[:0]
	}
	return nil
}
