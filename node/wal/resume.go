package wal

import (
	"errors"
	"fmt"
	"os"
)

// ErrLost is returned by Sync for a record that was appended but cut away
// when the Log recovered from a failed write or fsync: it was never
// durable, and it is not in the log.
var ErrLost = errors.New("wal: record lost to a failed write; it was never durable")

// tryResume is the syncer's attempt to bring a failed Log back: it cuts
// every unsealed segment back to what a successful fsync covered (its
// un-synced tail is not trusted: after a failed fsync the kernel may have
// dropped those pages, and after a failed write a frame may be half
// written), then recovers the directory as Open does (sealing those
// segments, verifying the others) and opens a fresh segment with the next
// sequence number. If any step fails the Log stays failed and the syncer
// tries again after RetryInterval.
//
// While the Log is failed, Append, Sync, MaybeCut, Cut, Replay and
// RemoveBefore return without touching the segments, and the syncer (this
// goroutine) does no I/O, so the writers it abandons are its own.
func (l *Log) tryResume() {
	// maint keeps RemoveBefore and Close out. Close holds it while it
	// waits for the syncer to stop; then this attempt is skipped.
	if !l.maint.TryLock() {
		return
	}
	defer l.maint.Unlock()
	l.mu.Lock()
	if l.err == nil || l.closed {
		l.mu.Unlock()
		return
	}
	cause := l.err
	ws := make([]*segWriter, 0, len(l.sealing)+1)
	for _, j := range l.sealing {
		ws = append(ws, j.w)
	}
	ws = append(ws, l.cur)
	l.mu.Unlock()

	for _, w := range ws {
		if w.cutBack {
			continue // done by an earlier attempt
		}
		if err := l.cutBack(w); err != nil {
			l.logger.Warn("wal: still failed; will retry", "dir", l.opts.Dir, "err", err)
			return
		}
	}

	nl := &Log{opts: l.opts, fs: l.fs, logger: l.logger, state: l.state}
	nl.cond.L = &nl.mu
	err := nl.recover()
	l.state = nl.state
	l.fsyncs.Add(nl.fsyncs.Load())
	l.quarantined.Add(nl.quarantined.Load())
	l.torn.Add(nl.torn.Load())
	if err != nil {
		l.logger.Warn("wal: still failed; will retry", "dir", l.opts.Dir, "err", err)
		return
	}

	kept := make(map[uint64]int64, len(nl.segs))
	for _, s := range nl.segs {
		kept[s.info.Seq] = s.dataEnd
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil {
		l.lost = make(map[uint64]int64)
	}
	for _, w := range ws {
		l.lost[w.seg.info.Seq] = kept[w.seg.info.Seq] // 0 if removed: nothing in it survives
	}
	l.segs, l.cur, l.sealing = nl.segs, nl.cur, nil
	l.nextSeq, l.lastSealed = nl.nextSeq, nl.lastSealed
	l.durable, l.dirDirty = nl.durable, nl.dirDirty
	l.err = nil
	l.cond.Broadcast()
	l.logger.Warn("wal: recovered from a failed write; taking writes again", "dir", l.opts.Dir,
		"open_segment", l.cur.seg.info.Seq, "after", cause)
}

// cutBack truncates w's file to what a successful fsync covered and makes
// that durable. It uses a fresh handle: the old one may be in any state
// after the failure (a failed close, say).
func (l *Log) cutBack(w *segWriter) error {
	path := w.seg.info.Path
	if w.f != nil {
		w.f.Close() // the outcome is decided: nothing more goes through it
		w.f = nil
	}
	f, err := l.fs.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("open segment %s: %w", path, err)
	}
	if err := f.Truncate(w.synced); err != nil {
		f.Close()
		return fmt.Errorf("truncate segment %s to %d: %w", path, w.synced, err)
	}
	if err := l.syncFile(f, path); err != nil {
		f.Close()
		return err
	}
	if w.flushed > w.synced {
		l.logger.Warn("wal: cut un-synced records from a failed segment", "segment", path, "offset", w.synced, "bytes_cut", w.flushed-w.synced)
	}
	w.cutBack = true
	f.Close() // the truncation is durable; a failed close changes nothing
	return nil
}

// Err returns the failure the Log is refusing writes with, or nil while it
// takes writes (also nil once closed).
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// lostLocked says whether the record ending at p was cut away by a
// recovery.
// REQUIRES: mu held.
func (l *Log) lostLocked(p Position) bool {
	end, ok := l.lost[p.Seq]
	return ok && p.Offset > end
}
